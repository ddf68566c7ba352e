/* plan.h - what one op call needs, computed before looking in the cache:
 * the distinct storages it touches, its runtime scalars, and its signature
 * key (internal). */
#ifndef TTPU_PROG_PLAN_H_
#define TTPU_PROG_PLAN_H_

#include "../cache/cache.h"
#include "../ops/ttpu_lower.h"
#include "context.h"
#include "storage.h"

typedef struct {
  ttpu_buffer* buf;
  int read;       /* some input view, or a partial write, needs its value */
  int written;    /* some output writes into it */
  int has_value;  /* holds a value (else it reads as zeros) */
  int has_param;  /* read and has a value: a program parameter */
  int param;      /* parameter index, or -1 */
  ttpu_dtype phys_dtype;
  int phys_ndim;
  int64_t phys_dims[TTPU_MAX_DIMS];
  /* How the storage is padded when the op starts (mask 0: not); after it
   * says ttpu_lower_written_phys. */
  ttpu_pad pad;
  /* The bytes of the storage's version in the program: its nbytes, or a
   * padded version's (prog/bucket.c). */
  size_t bytes;
  /* A padded storage read or written through a view that does not map
   * into its padded layout: the program unpads it first (and pads what it
   * writes back), so its views keep their own geometry. */
  int unpad;
} ttpu_slot;

typedef struct {
  const ttpu_op_call* call;
  const ttpu_op_def* def;
  int n_slots;
  ttpu_slot* slots;
  int* tensor_slot;  /* per call tensor (-1: none) */
  int* out_slot;     /* per output */
  int* out_full;     /* per output: covers its whole storage densely */
  /* Per call tensor and per output: where its view offset is in the int
   * pack (i), or -1 when the offset is in the signature or unused. A call
   * that runs now (strict and debug modes) passes the offsets of the views
   * it reads and writes at run time wherever the program's structure does
   * not depend on them (ttpu_view_offset_dynamic), so a loop over a tensor's
   * rows or columns compiles one program, not one per offset. */
  int* tensor_off;
  int* out_off;
  int n_f, n_i;      /* runtime scalars */
  double* f;
  int64_t* i;
  int* arg_scalar;   /* per arg: a Scalar's first index into f or i (-1 for
                        an op with TTPU_OP_STATIC_SCALARS); a Scalar list's
                        first entry in list_at */
  /* Per element of a Scalar list: its index into f. Equal values of one
   * list share one entry of f (their pattern is in the signature), so the
   * per-tensor programs of a foreach op read the same scalar and come out
   * identical, which lets the compiler make one kernel of them. */
  int* list_at;
  int f_param, i_param, rng_param; /* parameter indices or -1 */
  /* Buckets (prog/bucket.c). When a call's views touch padded storages,
   * `call` is `*rcall`: the same call with those views rewritten into the
   * padded layouts (over `rtens`, `rgeom`); a bucketed call has its
   * dynamic dims at the bucket's size there, tensor_dyn/out_dyn say which
   * dims those are (view dims), dyn_n is their true size, at dyn_at in
   * the int pack (-1: the call is not bucketed), and each fresh output
   * with out_dyn set leaves its storage padded with true size dyn_out_n. */
  ttpu_op_call* rcall;
  ttpu_tensor* rtens;
  int64_t* rgeom;
  int* tensor_dyn;
  int* out_dyn;
  int bucket_rule;
  int64_t dyn_n, dyn_b, dyn_out_n;
  int dyn_at;
  /* A pad at the end of the dynamic dim (TTPU_B_PAD) by an amount that is
   * taken at run time: the output's true size dyn_out_n is at dyn_out_at
   * in the int pack, and the amount, entry dyn_pad_at of the pad list, is
   * left out of the signature (a mask padded to a fixed cache length is
   * padded by one less each step). -1 otherwise. */
  int dyn_out_at, dyn_pad_at;
  /* A bucketed call over flattened views (prog/bucket.c): each dynamic
   * dim holds dyn_merge runs of the bucket, the first dyn_n of each true;
   * 1 otherwise. */
  int64_t dyn_merge;
  /* Bucketed outputs fill their padding with NaN (a testing aid). */
  int poison;
  /* An exact call whose output 0 is padded on write: the first program of
   * a growing tensor (seeded by the growth detector). */
  int seed;
  /* Growing views (prog/bucket.c): call tensors k < TTPU_PLAN_GROWN (a
   * mask) that view an exact storage along a length that changes each
   * call (`cache[:, :n]`); the program reads grown_r[k] along their
   * dynamic dim (what the storage holds there) and pads the rest of the
   * bucket. */
  unsigned grown;
  int64_t grown_r[8];
  int n_params;
  /* signature */
  int64_t* key;
  size_t n_key, cap_key;
  /* key offsets where each labelled part starts, for recompile reasons */
  int n_parts, cap_parts;
  size_t* part_at;
  const char** part_label;
  int* part_index;
  /* Element capacities of the arrays above, kept across builds: a plan
   * built again into the same struct reuses them (see ttpu_plan_build). */
  int cap_slots, cap_tensor_slot, cap_out_slot, cap_out_full, cap_arg_scalar,
      cap_f, cap_i, cap_list_at, cap_tensor_off, cap_out_off, cap_rtens,
      cap_rcall, cap_rgeom, cap_tensor_dyn, cap_out_dyn;
} ttpu_plan;

#define TTPU_PLAN_GROWN 8

/* Whether p's call was rewritten for padded storages (prog/bucket.c). */
static inline int ttpu_plan_rewritten(const ttpu_plan* p) {
  return p->rcall && p->call == p->rcall;
}
/* The bytes the views of slot sl address: the padded layout's, unless the
 * program unpads the storage first. */
static inline size_t ttpu_slot_view_bytes(const ttpu_slot* sl) {
  return sl->unpad ? sl->buf->nbytes : sl->bytes;
}

/* 1 when the program reading (write 0) or writing (1) the view t over a
 * storage of nbytes can take t's offset as a run-time value: its structure
 * does not depend on it (prog/assemble.c decides, since its reads and
 * writes are built there); 0 when the offset shapes the program, or is
 * unused (nothing to read, the whole storage). */
int ttpu_view_offset_dynamic(const ttpu_tensor* t, size_t nbytes, int write);

/* How storages look to a call planned before what precedes it has run (a
 * fused window, exec/fused.c; strict mode's pending ops, exec/strict.c):
 * lookup returns 1 and the state storage b will have when the call runs
 * (has_value: it holds a value; its shape) if what precedes it touches b,
 * else 0 (b's own state applies). static_offsets: view offsets go in the
 * signature (a window's program repeats with the same offsets) instead of
 * being run-time values (a single op's program, whether it runs now or
 * after the ops queued before it: the same program either way). */
typedef struct {
  int (*lookup)(const void* ctx, const ttpu_buffer* b, int* has_value,
                ttpu_dtype* dt, int* nd, int64_t* dims, ttpu_pad* pad);
  const void* ctx;
  int static_offsets;
  /* The window's number (a new one per window; 0 outside windows). */
  uint64_t serial;
} ttpu_store_view;

/* view: how the recording the call goes into sees storages, or NULL when
 * the call runs now. */
ttpu_status* ttpu_plan_build(ttpu_prog_ctx* pc, const ttpu_op_call* call,
                             const ttpu_op_def* def,
                             const ttpu_store_view* view, ttpu_plan* p);
/* Frees p's arrays. A plan built again into the same struct without
 * ttpu_plan_free in between reuses them, so a caller that keeps one plan
 * for call after call (strict mode) allocates nothing once they are large
 * enough; a struct's first build needs it zeroed. */
void ttpu_plan_free(ttpu_plan* p);

/* On a memory cache miss for plan p (under the owner's lock): sets the last compile
 * reason to what changed since the op's last compiled signature, counts a
 * recompile, and queues the repeated-recompile warning when the same thing
 * keeps changing. */
void ttpu_plan_note_recompile(ttpu_prog_ctx* pc, const ttpu_plan* p);
/* Frees the per-op last signatures ttpu_plan_note_recompile keeps. */
void ttpu_plan_free_last_sigs(ttpu_prog_ctx* pc);

/* A program of one or more ops (a fused window): the storages it touches
 * ("stores"), and per op its plan, which store each plan slot is, and
 * where its runtime scalars start in the program's packs. */
typedef struct {
  size_t nbytes;
  int param;   /* parameter index, or -1: not read before written / zeros */
  int result;  /* result index, or -1: not written, or dead at the end */
  ttpu_dtype dtype; /* shape of the parameter */
  int ndim;
  int64_t dims[TTPU_MAX_DIMS];
} ttpu_prog_store;

typedef struct {
  const ttpu_plan* plan;
  const int* store; /* per plan slot */
  /* Where the op's float scalars are in the program's float pack: f_map[j]
   * for its scalar j, or f_off + j when f_map is NULL. */
  const int* f_map;
  const int* i_map; /* the same for its int scalars (or i_off + j) */
  int f_off, i_off;
} ttpu_prog_op;

typedef struct {
  int n_ops;
  const ttpu_prog_op* ops;
  int n_stores;
  const ttpu_prog_store* stores;
  int n_params;
  int f_param, n_f, i_param, n_i, rng_param;
  int n_results;  /* stores' results and the rng state; checks follow */
  int rng_result; /* -1: none */
} ttpu_prog;

/* Lowers a program (prog/assemble.c). Result r's plan names its store in
 * `slot` (-1 the rng state, TTPU_RESULT_CHECK a check, one per checking
 * op after n_results). */
ttpu_status* ttpu_lower_prog(const ttpu_prog* g, char** text, size_t* text_len,
                             ttpu_result_plan** results, int* n_results);
/* The storage shape a written slot has after its op, and how it is
 * padded (prog/assemble.c). */
void ttpu_lower_written_phys(const ttpu_plan* p, int slot, ttpu_dtype* dt,
                             int* nd, int64_t* dims, ttpu_pad* pad);

/* Whether the view t is dense, non-overlapping, at offset 0 and exactly
 * `bytes` long: a whole write of a storage of that many bytes. */
int ttpu_plan_covers(const ttpu_tensor* t, size_t bytes);

/* Makes *arr (a pointer to an array) hold at least n zeroed elements of
 * `size` bytes, growing it (and *cap) when it holds fewer: 0, or -1 out
 * of memory (arr unchanged). */
int ttpu_plan_zeroed(void* arr, int* cap, int n, size_t size);

/* Buckets (prog/bucket.c), from ttpu_plan_build once p's slots are known:
 * rewrites the views over padded storages, decides whether the call is
 * bucketed (or seeds a growing tensor) and sets out_full and the slots'
 * bytes accordingly. */
ttpu_status* ttpu_plan_buckets(ttpu_prog_ctx* pc, ttpu_plan* p);

/* Whether view t of an exact storage moves: its offset stepped forward by
 * one amount from each window to the next (window number `serial`), the
 * rest of its geometry the same (a preallocated cache written at
 * `cache[:, pos:pos + 1]`, pos growing step after step). A fused window's
 * views keep their offsets in the signature; a moving one takes it at run
 * time, so the window repeats (prog/bucket.c). */
int ttpu_bucket_moving_view(ttpu_prog_ctx* pc, const ttpu_tensor* t, uint64_t serial);
/* The number of a fused window that begins (1, 2, ...): its views count
 * one step of ttpu_bucket_moving_view however often they are planned. */
uint64_t ttpu_bucket_window_begins(ttpu_prog_ctx* pc);

/* Lowers the call into a program (prog/assemble.c). *text is malloc'ed;
 * results receives the result plan (malloc'ed, caller frees). */
ttpu_status* ttpu_lower_program(const ttpu_plan* p, char** text,
                                size_t* text_len, ttpu_result_plan** results,
                                int* n_results);

#endif /* TTPU_PROG_PLAN_H_ */
