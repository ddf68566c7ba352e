/* queue.h - the compile queue (internal to exec/, exec/queue.c): how an op
 * call runs as its own program, and the FIFO of programs waiting for their
 * compiles on the compile threads.
 *
 * Every executor runs its programs through here: strict mode queues each
 * op (ttpu_queue_op) or, without compile threads, runs it at once
 * (ttpu_queue_run_op_now, which debug mode uses too); a fused window or a
 * graph whose program is still compiling joins the FIFO
 * (ttpu_queue_window), so that the code after it (the backward's tracing,
 * the next graph's recording) goes on meanwhile. Later ops, windows and
 * graphs are planned against what the FIFO will leave in each storage
 * (ttpu_queue_lookup). The FIFO is run by ttpu_exec_touch and
 * ttpu_exec_flush (exec/run.c) after the current executor's own held-back
 * ops, whichever executor that is.
 *
 * Threads: everything here is called under rt->mu. */
#ifndef TTPU_EXEC_QUEUE_H_
#define TTPU_EXEC_QUEUE_H_

#include "runtime.h"
#include "../prog/program.h"

/* One op call as its own program: it joins the FIFO and returns, its
 * program compiling on the compile threads where it is missing (a runtime
 * with compile threads), or runs after everything queued, compiled here
 * where missing (ttpu_queue_run_op_now). */
ttpu_status* ttpu_queue_op(ttpu_runtime* rt, const ttpu_op_call* call,
                           const ttpu_op_def* def);
ttpu_status* ttpu_queue_run_op_now(ttpu_runtime* rt, const ttpu_op_call* call,
                                   const ttpu_op_def* def);

/* A window's program waiting in the FIFO. */
typedef struct {
  const ttpu_prog_request* req; /* label, op count, reason, lowering */
  int device;
  const int64_t* key;
  size_t n_key;
  ttpu_cache_entry* e;          /* the memory cache's program, or NULL */
  int n_stores;                 /* the program's storages, */
  /* storage k: its buffer, parameter index (or -1), whether it is
   * written, and how it is padded after the program */
  void (*store)(const void* ctx, int k, ttpu_buffer** buf, int* param,
                int* written, ttpu_pad* pad);
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
int ttpu_queue_compiles_here(const ttpu_runtime* rt);
/* The FIFO's length (0 without compile threads). */
int ttpu_queue_length(const ttpu_runtime* rt);
/* The state the FIFO leaves b in (a ttpu_store_view's lookup), or 0. */
int ttpu_queue_lookup(const ttpu_runtime* rt, const ttpu_buffer* b,
                       int* has_value, ttpu_dtype* dt, int* nd, int64_t* dims,
                       ttpu_pad* pad);
/* Runs all of the FIFO / what b's read (writing 0) or write needs. */
ttpu_status* ttpu_queue_run_all(ttpu_runtime* rt);
ttpu_status* ttpu_queue_run_for(ttpu_runtime* rt, const ttpu_buffer* b,
                                 int writing);
/* Appends a window's program (its compile started on the pool unless it is
 * cached or compiling already); it runs, in order, when its compile is
 * done. Runs it at once when it is cached and nothing waits. A failure to
 * compile or run it is raised by the next point that waits, and each
 * storage it writes keeps the error (as for strict mode's ops). */
ttpu_status* ttpu_queue_window(ttpu_runtime* rt,
                                      const ttpu_queued_window* w);

/* Frees the FIFO (ops left over after a failed flush), the op plan's
 * arrays, the kept scalar packs and the compile threads, at
 * ttpu_runtime_destroy. */
void ttpu_queue_destroy(ttpu_runtime* rt);

#endif /* TTPU_EXEC_QUEUE_H_ */
