/* context.h - the program layer's context (internal): everything prog/
 * needs to find, compile, log and run programs, handed down by the layer
 * that embeds it. prog/ never reaches up for any of it.
 *
 * The runtime (exec/) embeds one ttpu_prog_ctx, fills the fields marked
 * "set by the owner" once at creation, creates the caches, and frees
 * everything at ttpu_runtime_destroy (ttpu_prog_ctx_free_state). The
 * hooks are how the program layer reports back: a warning for the user,
 * a compile's trace range, a device's rng state storage, a replaced
 * version to destroy.
 *
 * Thread rule: every field, and every function of prog/ that takes a
 * context, is used under the owner's lock; the context takes none. */
#ifndef TTPU_PROG_CONTEXT_H_
#define TTPU_PROG_CONTEXT_H_

#include <stdint.h>

#include "ttpu.h"
#include "../cache/cache.h"
#include "../cache/disk.h"
#include "../pjrt/ttpu_pjrt.h"

#define TTPU_MAX_DEVICES 64
#define TTPU_LOG_CAP 4096

/* Calls back into the owner. Each may be NULL (nothing is reported);
 * host is passed to each. */
typedef struct {
  void* host;
  /* A warning for the user, queued after any already pending. */
  void (*warn)(void* host, const char* message);
  /* A compile's trace range: end follows begin on every path. */
  void (*compile_begin)(void* host, int device, const char* what, int n_ops);
  void (*compile_end)(void* host, int device, const char* what, int n_ops,
                      int from_disk, int failed);
  /* Device `device`'s rng state storage (ui64[2]), borrowed. */
  ttpu_buffer* (*rng_state)(void* host, int device);
  /* Takes a storage's replaced version, to destroy once the executions
   * that may read it have finished (NULL: destroyed at once). */
  void (*drop_buffer)(void* host, ttpu_pjrt_buffer* pb);
  /* Takes a data-dependent check's result to read later (while the
   * owner's defer_checks is set); returns 0 when it did not take it, and
   * the check is read at once. */
  int (*keep_check)(void* host, int device, const ttpu_result_plan* rp,
                    ttpu_pjrt_buffer* pb);
} ttpu_prog_hooks;

typedef struct ttpu_prog_ctx {
  /* Set by the owner. */
  ttpu_pjrt_client* client;
  const ttpu_runtime_options* opts;
  const ttpu_runtime* owner; /* storages a plan takes must be this one's
                                (compared, never called) */
  int n_devices;
  ttpu_stats* stats[TTPU_MAX_DEVICES]; /* per device, borrowed */
  ttpu_prog_hooks hooks;
  /* Set by the owner around ttpu_prog_take_results: nonzero hands each
   * check's result to hooks.keep_check instead of reading it there, so
   * that the launch does not wait for the program. */
  int defer_checks;

  /* The program layer's own state. */
  ttpu_cache* cache;        /* compiled programs by signature key */
  ttpu_disk* disk;          /* persistent cache, NULL when off */
  ttpu_compile_record* log; /* ring of the last TTPU_LOG_CAP compiles */
  int64_t n_log;
  char last_reason[512];    /* why the last program compiled */
  struct ttpu_last_sig* last_sigs; /* per op id: see prog/plan.c */
  int n_last_sigs;
  int64_t ops_run;          /* ops the strict path ran (recompile warning) */
  int64_t programs_reloaded; /* evicted programs needed again */
  /* Compiled programs by the hash of their text (prog/program.c): a new
   * signature with a loaded program's text shares its executable. NULL
   * until the first compile. */
  struct ttpu_text_slot* texts;
  /* Sees every disk-cacheable program lowered here (ttpu_aot_set_program_sink). */
  void (*sink)(void* user, const char* what, const int64_t* key,
               size_t n_key, const char* text, size_t text_len,
               const void* results, size_t results_len, int n_results,
               const void* options, size_t options_len);
  void* sink_user;
  /* Buckets (prog/bucket.c; set by the owner): 0 off, else the smallest
   * bucket, and the ladder (1 powers of two, 2 quarter steps, 3 the
   * explicit sizes, then powers of two). */
  int64_t bucket_min;
  int bucket_ladder;
  int64_t bucket_sizes[16];
  int n_bucket_sizes;
  int bucket_poison; /* padding written as NaN (TORCHTPU_BUCKET_POISON) */
  /* The growth detector's memory (prog/bucket.c). */
  struct ttpu_growth* growth; /* NULL until first used */
  uint64_t growth_clock; /* every watched call: its entries' last use */
  /* Watched outputs and uploads, not views' checks (a step that reads
   * many partial views does not use up VAR_SPAN sooner). */
  uint64_t span_clock;
  /* The sweep detector's memory (prog/bucket.c): recent output sizes of
   * factories and fills, per kind. NULL until first used. */
  struct ttpu_sweep* sweep;
  uint64_t sweep_clock;
  /* The moving-view detector's memory (prog/bucket.c): per view geometry,
   * its last offset and how it has been stepping. NULL until first used. */
  struct ttpu_moving* moving;
  uint64_t window_serial; /* the last fused window's number */
  /* The true lengths of the last uploads stored padded, latest first (0:
   * none): only factories of such a length, soon after, are bucketed, so
   * that fills of differing shapes (an optimizer's zeros_like of each
   * parameter) are not taken for growth. */
  int64_t var_len[4];
  uint64_t var_clock; /* span_clock at that upload */
  /* The last lengths of growing tensors (a cat that takes its output
   * back), latest first: a factory of such a length that changed with it
   * twice in a row (a padding mask's arange(kv_length)) is bucketed. */
  int64_t grow_len[4];
  uint64_t grow_clock; /* span_clock at that cat */
  /* The last lengths of integer batches uploaded, padded or not: a fill's
   * growth history leaves dims of these sizes out of its kind. */
  int64_t batch_len[4];
  /* The length of the last token batch stored padded from its first
   * upload (0: none): factories of that length are bucketed from their
   * first call, as with explicit sizes. */
  int64_t first_len;
  /* Nonzero while a loop body is recorded (exec/function.c): it is traced
   * once for its inputs' shapes into a program with no true-size inputs,
   * so its uploads and ops stay exact. */
  int exact;
} ttpu_prog_ctx;

/* Queues a warning through the warn hook (prog/log.c). */
void ttpu_prog_warn(ttpu_prog_ctx* pc, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Frees the compile log and the per-op last signatures; the caches are
 * the owner's to destroy, since it decides when evictions may happen. */
void ttpu_prog_ctx_free_state(ttpu_prog_ctx* pc);

/* The compile log (prog/log.c): how many records it holds, and record
 * index (oldest first); 0 when out of range. */
int ttpu_prog_log_count(const ttpu_prog_ctx* pc);
int ttpu_prog_log_get(const ttpu_prog_ctx* pc, int index,
                      ttpu_compile_record* out);
void ttpu_prog_log_clear(ttpu_prog_ctx* pc);

#endif /* TTPU_PROG_CONTEXT_H_ */
