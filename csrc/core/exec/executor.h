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
 * the registry (exec/run.c) and its value in ttpu_mode (ttpu_runtime.h).
 * It runs programs through the compile queue (exec/queue.h) and, if it
 * records ops, through the recorded window (exec/window.h); no executor
 * knows another.
 *
 * Threads: every entry is called under rt->mu except `complete`, which is
 * called after ttpu_op_run released it. Entries left NULL do nothing. */
#ifndef TTPU_EXEC_EXECUTOR_H_
#define TTPU_EXEC_EXECUTOR_H_

#include "runtime.h"

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
  /* Storage b is about to be copied to the host: runs what the executor
   * holds back beyond what touch would (touch follows it). */
  ttpu_status* (*host_read)(ttpu_runtime* rt, const ttpu_buffer* b);
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
extern const ttpu_executor_ops ttpu_executor_function; /* exec/function.c */

/* The registered executor of an eager mode, or NULL for an unknown one
 * (exec/run.c). */
const ttpu_executor_ops* ttpu_executor_for_mode(ttpu_mode mode);
/* Frees every registered executor's state (exec/run.c). */
void ttpu_executors_destroy(ttpu_runtime* rt);

#endif /* TTPU_EXEC_EXECUTOR_H_ */
