/* cache.h - in-memory compile cache: op signature -> compiled program
 * (internal). Keys are arrays of int64 words built by exec/plan.c; equal
 * words mean an identical program.
 *
 * Bounded: past its capacity the least recently used entry that is not
 * pinned is evicted (handed to the cache's retire callback, which owns
 * its executable from then on). The cache remembers the hashes of the
 * keys it evicted last, so a miss can tell a program seen before (a
 * reload) from a new signature.
 *
 * Not thread-safe: the runtime calls it under its lock. */
#ifndef TTPU_CACHE_H_
#define TTPU_CACHE_H_

#include "ttpu.h"
#include "../pjrt/ttpu_pjrt.h"

typedef struct ttpu_cache ttpu_cache;

/* Where each program result goes: a storage slot of the call's plan (or
 * -1: the device's rng state; TTPU_RESULT_CHECK: a data-dependent error
 * check, see ttpu_l_check) and the row-major shape it is stored with. */
#define TTPU_RESULT_CHECK (-2)
#define TTPU_CHECK_FMT_MAX 512
typedef struct {
  int slot;
  ttpu_dtype dtype;
  int ndim;
  int64_t dims[TTPU_MAX_DIMS];
  /* TTPU_RESULT_CHECK only: the error to raise when the check fires. */
  ttpu_code check_code;
  char check_fmt[TTPU_CHECK_FMT_MAX];
} ttpu_result_plan;

typedef struct {
  ttpu_pjrt_exec* exec;   /* owned by the cache */
  int n_results;
  ttpu_result_plan* results; /* owned by the cache */
  int64_t hits;
  /* Users that keep the entry across calls (a graph replay): a pinned
   * entry is never evicted. */
  int pins;
  /* The runtime's ticket of the entry's last execution (exec/runtime.c):
   * its executable may be destroyed once that execution finished. */
  int64_t last_run;
  /* What the program runs (an op name, "fused window (N ops)", ...), for
   * diagnostics: the programs loaded, by op. */
  char what[96];
} ttpu_cache_entry;

/* Called with each evicted entry (its exec and results are the callee's
 * to free; the entry itself is freed after the call). */
typedef void (*ttpu_cache_retire_fn)(void* ctx, ttpu_cache_entry* e);

/* capacity: most entries kept (0: unbounded). retire may be NULL (the
 * cache then frees only results: for entries without executables). */
ttpu_status* ttpu_cache_create(size_t capacity, ttpu_cache_retire_fn retire,
                               void* retire_ctx, ttpu_cache** out);
/* Destroys every executable with `client`. */
void ttpu_cache_destroy(ttpu_cache* c, ttpu_pjrt_client* client);
/* Borrowed entry or NULL; a found entry becomes the most recently used.
 * Valid until the next insert or set_capacity (which may evict it) unless
 * pinned. */
ttpu_cache_entry* ttpu_cache_find(ttpu_cache* c, const int64_t* key, size_t n);
/* Copies the key; takes ownership of e's exec and results. Returns the
 * stored entry (borrowed, most recently used) through *out. May evict
 * other entries. */
ttpu_status* ttpu_cache_insert(ttpu_cache* c, const int64_t* key, size_t n,
                               const ttpu_cache_entry* e,
                               ttpu_cache_entry** out);
/* Whether key was evicted recently (among the last `capacity` evictions;
 * 64-bit hashes, so a false answer is possible but vanishingly rare). */
int ttpu_cache_was_evicted(const ttpu_cache* c, const int64_t* key, size_t n);
/* Changes the capacity (0: unbounded), evicting down to it now. */
void ttpu_cache_set_capacity(ttpu_cache* c, size_t capacity);
size_t ttpu_cache_capacity(const ttpu_cache* c);
size_t ttpu_cache_size(const ttpu_cache* c);
/* Evicts every entry nothing pins (each handed to retire). */
void ttpu_cache_evict_unpinned(ttpu_cache* c);
/* Entries evicted so far. */
int64_t ttpu_cache_evictions(const ttpu_cache* c);
/* Calls fn with each entry, most recently used first; stops early when fn
 * returns nonzero. fn must not change the cache. */
void ttpu_cache_each(const ttpu_cache* c,
                     int (*fn)(void* user, const ttpu_cache_entry* e),
                     void* user);

#endif /* TTPU_CACHE_H_ */
