/* graph.h - a compiled graph's program, run again from new storages
 * (internal to exec/: exec/graph.c captures and runs it). */
#ifndef TTPU_EXEC_GRAPH_H_
#define TTPU_EXEC_GRAPH_H_

#include "runtime.h"
#include "../cache/cache.h"
#include "../prog/plan.h"

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
  ttpu_pad pad0;           /* its padding at capture (prog/bucket.c): a
                              replay's storage must have the same */
  ttpu_pad pad;            /* what the program leaves it with */
} ttpu_replay_store;

struct ttpu_graph_replay {
  int device;
  ttpu_cache_entry* e;     /* pinned in the memory cache; NULL while the
                              program was still compiling at the capture:
                              looked up by key at the first replay */
  int64_t* key;
  size_t n_key;
  int n_params;
  int f_param, i_param, rng_param;
  ttpu_pjrt_buffer* fbuf;  /* the graph's constant packs, kept on device */
  ttpu_pjrt_buffer* ibuf;
  int n_window_stores;
  int n_st;
  ttpu_replay_store* st;
  int n_ops;
};

/* The replay of a graph's window w that just ran, or is queued to run, as
 * program g (entry e, or NULL while it compiles: then found by key, the
 * window's, at the first replay), under rt->mu, before anything else
 * holds the window's storages: the storages it needs and the program.
 * Takes the pack buffers fbuf, ibuf. NULL when out of memory (the graph
 * then records every time, which is only slower). */
ttpu_graph_replay* ttpu_graph_capture(ttpu_runtime* rt, const ttpu_window* w,
                                      const ttpu_prog* g, ttpu_cache_entry* e,
                                      const int64_t* key, size_t n_key,
                                      ttpu_pjrt_buffer* fbuf,
                                      ttpu_pjrt_buffer* ibuf);
/* ttpu_graph_replay_free with rt->mu held. */
void ttpu_graph_replay_free_locked(ttpu_runtime* rt, ttpu_graph_replay* g);

#endif /* TTPU_EXEC_GRAPH_H_ */
