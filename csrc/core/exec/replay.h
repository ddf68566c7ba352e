/* replay.h - a compiled graph's program, run again from new storages
 * (internal; exec/window.c captures it, exec/replay.c runs it). */
#ifndef TTPU_REPLAY_H_
#define TTPU_REPLAY_H_

#include "internal.h"
#include "../cache/cache.h"

/* A storage the program needs at a replay: one it reads, writes or that
 * outlived the graph. The rest were the graph's temporaries. */
typedef struct {
  const ttpu_buffer* buf0; /* the storage at capture: compared, never used */
  int store;               /* the window's store index (result plans use it) */
  int param;               /* parameter index, or -1 */
  int result;              /* the program writes its value */
  int has_value0;          /* held a value when the graph began */
  size_t nbytes;
  ttpu_dtype dt0;          /* its parameter's shape */
  int nd0;
  int64_t dims0[TTPU_MAX_DIMS];
} ttpu_replay_store;

struct ttpu_graph_replay {
  int device;
  ttpu_cache_entry* e;     /* borrowed: memory cache entries live as long
                              as the runtime */
  int n_params;
  int f_param, i_param, rng_param;
  ttpu_pjrt_buffer* fbuf;  /* the graph's constant packs, kept on device */
  ttpu_pjrt_buffer* ibuf;
  int n_window_stores;
  int n_st;
  ttpu_replay_store* st;
  int n_ops;
};

#endif /* TTPU_REPLAY_H_ */
