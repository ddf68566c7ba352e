/* cache.h - in-memory compile cache: op signature -> compiled program
 * (internal). Keys are arrays of int64 words built by exec/plan.c; equal
 * words mean an identical program. */
#ifndef TTPU_CACHE_H_
#define TTPU_CACHE_H_

#include "ttpu.h"
#include "../pjrt/ttpu_pjrt.h"

typedef struct ttpu_cache ttpu_cache;

/* Where each program result goes: a storage slot of the call's plan (or
 * -1: the device's rng state; TTPU_RESULT_CHECK: a data-dependent error
 * check, see ttpu_l_check) and the row-major shape it is stored with. */
#define TTPU_RESULT_CHECK (-2)
#define TTPU_CHECK_FMT_MAX 256
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
} ttpu_cache_entry;

ttpu_status* ttpu_cache_create(ttpu_cache** out);
/* Destroys every executable with `client`. */
void ttpu_cache_destroy(ttpu_cache* c, ttpu_pjrt_client* client);
/* Borrowed entry or NULL. */
ttpu_cache_entry* ttpu_cache_find(ttpu_cache* c, const int64_t* key, size_t n);
/* Copies the key; takes ownership of e's exec and results. Returns the
 * stored entry (borrowed) through *out. */
ttpu_status* ttpu_cache_insert(ttpu_cache* c, const int64_t* key, size_t n,
                               const ttpu_cache_entry* e,
                               ttpu_cache_entry** out);
size_t ttpu_cache_size(const ttpu_cache* c);

#endif /* TTPU_CACHE_H_ */
