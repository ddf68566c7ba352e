/* executor.h - the eager modes behind one interface (internal to exec/).
 *
 * An executor is what ttpu_op_run hands each op call to: strict runs it
 * (exec/strict.c), debug runs it and waits (exec/debug.c), fused records it
 * into a window that runs as one program at a boundary (exec/fused.c), and
 * a graph records the ops between begin_graph and end_graph as one program
 * (exec/graph.c). The runtime holds the current one (rt->exec);
 * ttpu_runtime_set_mode flushes it and swaps in the mode's executor, and a
 * graph swaps in its own until its end, whatever the mode.
 *
 * A new mode is a new file defining a ttpu_executor_ops, plus its line in
 * the registry (exec/run.c).
 *
 * Threads: every entry is called under rt->mu except `complete`, which is
 * called after ttpu_op_run released it. Entries left NULL do nothing. */
#ifndef TTPU_EXEC_EXECUTOR_H_
#define TTPU_EXEC_EXECUTOR_H_

#include "runtime.h"
#include "../prog/program.h"

struct ttpu_executor_ops {
  const char* name;
  /* Runs or records one op call (call and def borrowed for the call). */
  ttpu_status* (*submit)(ttpu_runtime* rt, const ttpu_op_call* call,
                         const ttpu_op_def* def);
  /* After submit, rt->mu released: takes submit's status s (NULL on
   * success) and returns the op's. */
  ttpu_status* (*complete)(ttpu_runtime* rt, const ttpu_op_call* call,
                           ttpu_status* s);
  /* Runs every op held back; why: what ended them. */
  ttpu_status* (*flush)(ttpu_runtime* rt, ttpu_window_end why);
  /* Storage b is about to be read (writing 0) or written outside the
   * executor: runs the held-back ops that b's value depends on. */
  ttpu_status* (*touch)(ttpu_runtime* rt, const ttpu_buffer* b, int writing);
  /* Host work (upload, download, storage copy) happened. */
  void (*note_host_work)(ttpu_runtime* rt);
  /* Frees what the executor keeps in rt, at ttpu_runtime_destroy (called
   * once per registered executor, whichever is current). */
  void (*destroy)(ttpu_runtime* rt);
};

extern const ttpu_executor_ops ttpu_executor_strict; /* exec/strict.c */
extern const ttpu_executor_ops ttpu_executor_debug;  /* exec/debug.c */
extern const ttpu_executor_ops ttpu_executor_fused;  /* exec/fused.c */
extern const ttpu_executor_ops ttpu_executor_graph;  /* exec/graph.c */

/* The registered executor of an eager mode, or NULL for an unknown one
 * (exec/run.c). */
const ttpu_executor_ops* ttpu_executor_for_mode(ttpu_mode mode);
/* Frees every registered executor's state (exec/run.c). */
void ttpu_executors_destroy(ttpu_runtime* rt);

/* The fused window, shared by fused mode and graphs (exec/fused.c, under
 * rt->mu). record adds the call as the window's next op; inside a graph
 * (rt->graph.depth) the window only ends when flushed. */
ttpu_status* ttpu_fused_record(ttpu_runtime* rt, const ttpu_op_call* call,
                               const ttpu_op_def* def);
ttpu_status* ttpu_fused_flush(ttpu_runtime* rt, ttpu_window_end why);
ttpu_status* ttpu_fused_touch(ttpu_runtime* rt, const ttpu_buffer* b,
                              int writing);
/* Counts host work inside a graph (rt->graph.runs). */
void ttpu_graph_note_host_work(ttpu_runtime* rt);

/* Strict mode's FIFO of programs waiting for their compiles (exec/strict.c,
 * under rt->mu), which a graph's program joins while it compiles on the
 * compile threads, so that the code after the graph (the backward's
 * tracing, the next graph's recording) goes on meanwhile. Later ops,
 * windows and graphs are planned against what the FIFO will leave in each
 * storage (ttpu_strict_lookup); ttpu_exec_touch and ttpu_exec_flush run
 * it, whichever executor is current. */
typedef struct {
  const ttpu_prog_request* req; /* label, op count, reason, lowering */
  int device;
  const int64_t* key;
  size_t n_key;
  ttpu_cache_entry* e;          /* the memory cache's program, or NULL */
  int n_stores;                 /* the program's storages, */
  /* storage k: its buffer, parameter index (or -1), whether it is written */
  void (*store)(const void* ctx, int k, ttpu_buffer** buf, int* param,
                int* written);
  const void* store_ctx;
  int n_params;
  const double* f;              /* the scalar packs */
  int n_f, f_param;
  const int64_t* i;
  int n_i, i_param;
  int rng_param;
} ttpu_queued_window;

/* Whether a missing program compiles on the calling thread even with
 * compile threads (while programs are dumped or compiles traced). */
int ttpu_strict_compiles_here(const ttpu_runtime* rt);
/* The FIFO's length (0 without compile threads). */
int ttpu_strict_queued(const ttpu_runtime* rt);
/* The state the FIFO leaves b in (a ttpu_store_view's lookup), or 0. */
int ttpu_strict_lookup(const ttpu_runtime* rt, const ttpu_buffer* b,
                       int* has_value, ttpu_dtype* dt, int* nd, int64_t* dims);
/* Runs all of the FIFO / what b's read (writing 0) or write needs. */
ttpu_status* ttpu_strict_run_all(ttpu_runtime* rt);
ttpu_status* ttpu_strict_run_for(ttpu_runtime* rt, const ttpu_buffer* b,
                                 int writing);
/* Appends a window's program (its compile started on the pool unless it is
 * cached or compiling already); it runs, in order, when its compile is
 * done. Runs it at once when it is cached and nothing waits. A failure to
 * compile or run it is raised by the next point that waits, and each
 * storage it writes keeps the error (as for strict mode's ops). */
ttpu_status* ttpu_strict_queue_window(ttpu_runtime* rt,
                                      const ttpu_queued_window* w);

/* The window's storages, for a graph's capture: how many, and storage k
 * with whether it held a value when the window began. */
int ttpu_window_store_count(const ttpu_window* w);
ttpu_buffer* ttpu_window_store(const ttpu_window* w, int k, int* has_value0);
int ttpu_window_op_count(const ttpu_window* w);
int ttpu_window_device(const ttpu_window* w);

#endif /* TTPU_EXEC_EXECUTOR_H_ */
