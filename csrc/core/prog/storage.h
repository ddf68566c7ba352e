/* storage.h - the storage object and its versions (internal to the
 * engine: prog/ and the layers above it). A storage (ttpu_buffer, opaque
 * in the public API) is ref-counted and holds its current version, a
 * PJRT buffer replaced, never mutated, by each program that writes it.
 * The program layer hands results to storages (ttpu_prog_set_version);
 * the runtime (exec/) creates, accounts and frees them. Every field is
 * under the owning runtime's lock, refs excepted. */
#ifndef TTPU_PROG_STORAGE_H_
#define TTPU_PROG_STORAGE_H_

#include <stdatomic.h>

#include "context.h"

/* A padded storage (prog/plan.c decides, docs/design/shapes.md explains):
 * its version holds a bucket of sizes in the dims of `mask` (bits over
 * the version's dims, phys_dims giving the bucket's size) while the
 * storage's bytes (nbytes, what PyTorch sees) hold `n` in each of them:
 * the first n of each padded dim are the storage's elements in row-major
 * order of the logical dims, the rest is padding whose values are
 * undefined. mask 0: the version is exactly the storage. */
typedef struct {
  int mask;
  int64_t n;
} ttpu_pad;

/* The logical (unpadded) dims of a version of dims `cap` padded as pad. */
static inline void ttpu_pad_logical(const ttpu_pad* pad, int nd,
                                    const int64_t* cap, int64_t* out) {
  for (int d = 0; d < nd; ++d)
    out[d] = pad->mask >> d & 1 ? pad->n : cap[d];
}

/* Copies the logical elements (es bytes each) of a padded version `src`
 * of dims cap into dst, row-major: a download's compaction. */
void ttpu_pad_compact(const void* src, void* dst, size_t es, int nd,
                      const int64_t* cap, const ttpu_pad* pad);
/* The inverse: row-major true elements `src` into their places in a
 * padded version `dst` (the padding is left as it is): an upload's. */
void ttpu_pad_expand(const void* src, void* dst, size_t es, int nd,
                     const int64_t* cap, const ttpu_pad* pad);

/* Uploads (prog/bucket.c): the dim of an upload of dtype and row-major
 * dims to store padded, because uploads of its kind keep changing in that
 * dim (token ids and masks of varying length), else -1; and the bucket
 * that holds size n. per_op: the ops that read it run a program each
 * (strict and debug modes), where a token batch's first length is worth
 * padding. Under the owner's lock. */
int ttpu_bucket_upload_dim(ttpu_prog_ctx* pc, ttpu_dtype dt, int ndim,
                           const int64_t* dims, int per_op);
int64_t ttpu_bucket_size(const ttpu_prog_ctx* pc, int64_t n);
/* Notes n as the length of a storage just stored padded: factories of
 * that length (arange, fills) come out padded too. */
void ttpu_bucket_note_length(ttpu_prog_ctx* pc, int64_t n);
/* Storage b is being freed: the sweep detector forgets it. */
void ttpu_bucket_forget(ttpu_prog_ctx* pc, const ttpu_buffer* b);

struct ttpu_buffer {
  atomic_int refs;
  ttpu_runtime* rt;
  int device;
  size_t nbytes;
  /* Current version; NULL while never written (reads as zeros). */
  ttpu_pjrt_buffer* pb;
  /* Shape the current version was written with: row-major, so its flat
   * order is the storage's byte order. */
  ttpu_dtype phys_dtype;
  int phys_ndim;
  int64_t phys_dims[TTPU_MAX_DIMS];
  /* How the current version is padded (mask 0: not padded). */
  ttpu_pad pad;
  /* The error of a dropped op that was to write it (exec/strict.c): a
   * read raises it; the next version clears it. */
  ttpu_status* error;
  /* Host accesses of the current version (exec/runtime.c), or NULL: while
   * one is open the version is pinned, and replacing it hands it to the
   * pin, which destroys it at the last access's end. */
  struct ttpu_host_pin* pin;
  /* Held in the sweep detector's memory (prog/bucket.c), which must hear
   * of its end (ttpu_bucket_forget). */
  int sweep_noted;
  /* The true size of the last bucketed index_copy into it (0: none): a
   * view read back at that length is a bucket at once (prog/bucket.c). */
  int64_t filled_n;
};

/* One pinned version and the host accesses open on it. */
struct ttpu_host_pin {
  ttpu_pjrt_buffer* pb;
  int refs;
};

/* Replaces b's version with pb (taken), written with the given shape,
 * not padded; clears b's error. The version replaced is destroyed on pc's
 * client, or left to its pin. */
void ttpu_prog_set_version(ttpu_prog_ctx* pc, ttpu_buffer* b,
                           ttpu_pjrt_buffer* pb, ttpu_dtype dtype, int ndim,
                           const int64_t* dims);

#endif /* TTPU_PROG_STORAGE_H_ */
