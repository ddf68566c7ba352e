/* internal.h - engine objects shared by exec/, cache/ and ops/ (internal). */
#ifndef TTPU_EXEC_INTERNAL_H_
#define TTPU_EXEC_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "ttpu.h"
#include "../pjrt/ttpu_pjrt.h"
#include "../hlo/ttpu_hlo.h"
#include "../ops/ttpu_lower.h"

#define TTPU_MAX_DEVICES 64

struct ttpu_buffer {
  atomic_int refs;
  ttpu_runtime* rt;
  int device;
  size_t nbytes;
  /* Current version; NULL while never written (reads as zeros). Replaced,
   * never mutated, under rt->mu. */
  ttpu_pjrt_buffer* pb;
  /* Shape the current version was written with: row-major, so its flat
   * order is the storage's byte order. */
  ttpu_dtype phys_dtype;
  int phys_ndim;
  int64_t phys_dims[TTPU_MAX_DIMS];
};

typedef struct ttpu_cache ttpu_cache;

typedef struct {
  ttpu_stats stats;
  ttpu_buffer* rng_state; /* ui64[2] */
} ttpu_device_state;

struct ttpu_runtime {
  ttpu_pjrt_plugin* plugin;
  ttpu_pjrt_client* client;
  int device_count;
  /* One lock for the engine's mutable state: op runs, buffer versions,
   * cache, stats. PyTorch calls us from several threads (autograd). */
  pthread_mutex_t mu;
  ttpu_cache* cache;
  ttpu_device_state dev[TTPU_MAX_DEVICES];
  /* Completion events of enqueued executions, awaited by synchronize. */
  ttpu_pjrt_event** pending;
  int* pending_device;
  int n_pending, cap_pending;
  ttpu_status* async_error; /* first asynchronous failure not yet reported */
  char last_reason[512];
  struct ttpu_last_sig* last_sigs; /* per op id: see exec/run.c */
  int n_last_sigs;
};

/* Frees rt->last_sigs (exec/run.c). */
void ttpu_rt_free_last_sigs(ttpu_runtime* rt);

/* Accounting of device bytes (under rt->mu). */
void ttpu_rt_account(ttpu_runtime* rt, int device, int64_t delta_bytes,
                     int64_t delta_buffers);
/* Replaces a storage's version (under rt->mu). Takes ownership of pb. */
void ttpu_rt_set_version(ttpu_buffer* b, ttpu_pjrt_buffer* pb,
                         ttpu_dtype dtype, int ndim, const int64_t* dims);
/* Records an execution's completion event (under rt->mu). */
void ttpu_rt_add_pending(ttpu_runtime* rt, int device, ttpu_pjrt_event* e);

/* Lowering table (ops/table.c): the definition of op id `op`, or NULL. */
const ttpu_op_def* ttpu_op_def_get(int op);

#endif /* TTPU_EXEC_INTERNAL_H_ */
