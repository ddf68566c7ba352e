/* run.c - one op call handed to the current executor, the registry of
 * eager modes, and the executor interface the rest of the engine calls. */
#include <stddef.h>

#include "executor.h"
#include "queue.h"
#include "window.h"

/* One line per eager mode (executor.h). */
static const ttpu_executor_ops* const executors[] = {
    [TTPU_MODE_STRICT] = &ttpu_executor_strict,
    [TTPU_MODE_DEBUG] = &ttpu_executor_debug,
    [TTPU_MODE_FUSED] = &ttpu_executor_fused,
};
#define N_EXECUTORS ((int)(sizeof(executors) / sizeof(executors[0])))

const ttpu_executor_ops* ttpu_executor_for_mode(ttpu_mode mode) {
  if ((int)mode < 0 || (int)mode >= N_EXECUTORS) return NULL;
  return executors[mode];
}

void ttpu_executors_destroy(ttpu_runtime* rt) {
  for (int k = 0; k < N_EXECUTORS; ++k)
    if (executors[k] && executors[k]->destroy) executors[k]->destroy(rt);
  if (ttpu_executor_graph.destroy) ttpu_executor_graph.destroy(rt);
  if (ttpu_executor_function.destroy) ttpu_executor_function.destroy(rt);
  ttpu_window_destroy(rt);
  ttpu_queue_destroy(rt);
}

ttpu_status* ttpu_op_run(ttpu_runtime* rt, const ttpu_op_call* call) {
  const ttpu_op_def* def = ttpu_op_def_get(call->op);
  if (!def)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "unknown op id %d", call->op);
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  const ttpu_executor_ops* x = rt->exec;
  s = x->submit(rt, call, def);
  pthread_mutex_unlock(&rt->mu);
  if (x->complete) s = x->complete(rt, call, s);
  return s;
}

/* The current executor's held-back ops first (a window that ends here may
 * join the compile queue), then the compile queue's FIFO, whichever
 * executor is current (a graph's program may wait in it while another mode
 * records). */
ttpu_status* ttpu_exec_flush(ttpu_runtime* rt, ttpu_window_end why) {
  ttpu_status* s = rt->exec && rt->exec->flush ? rt->exec->flush(rt, why) : NULL;
  if (!s && ttpu_queue_length(rt)) s = ttpu_queue_run_all(rt);
  return s;
}

ttpu_status* ttpu_exec_touch(ttpu_runtime* rt, const ttpu_buffer* b,
                             int writing) {
  ttpu_status* s =
      rt->exec && rt->exec->touch ? rt->exec->touch(rt, b, writing) : NULL;
  if (!s && ttpu_queue_length(rt)) s = ttpu_queue_run_for(rt, b, writing);
  return s;
}

ttpu_status* ttpu_exec_host_read(ttpu_runtime* rt, const ttpu_buffer* b) {
  ttpu_status* s =
      rt->exec && rt->exec->host_read ? rt->exec->host_read(rt, b) : NULL;
  return s ? s : ttpu_exec_touch(rt, b, 0);
}

void ttpu_exec_note_host_work(ttpu_runtime* rt) {
  if (rt->exec && rt->exec->note_host_work) rt->exec->note_host_work(rt);
}

/* ------------------------------------------------------------ modes */

ttpu_status* ttpu_runtime_set_mode(ttpu_runtime* rt, ttpu_mode mode) {
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_exec_flush(rt, TTPU_END_SYNC);
  const ttpu_executor_ops* x = ttpu_executor_for_mode(mode);
  if (x) {
    rt->mode = mode;
    rt->exec = x;
  } else if (!s) {
    s = ttpu_status_make(TTPU_INVALID_ARGUMENT, "unknown eager mode %d",
                         (int)mode);
  }
  pthread_mutex_unlock(&rt->mu);
  return s;
}

ttpu_status* ttpu_runtime_group_begin(ttpu_runtime* rt, int* grouped) {
  *grouped = 0;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  /* strict holds nothing back: there is nothing to flush before */
  if (rt->exec == &ttpu_executor_strict) {
    rt->exec = &ttpu_executor_fused;
    *grouped = 1;
  } else if (rt->exec == &ttpu_executor_fused) {
    *grouped = 2; /* recorded already: the composite is only marked */
  }
  if (*grouped) rt->composite_depth++;
  pthread_mutex_unlock(&rt->mu);
  return NULL;
}

ttpu_status* ttpu_runtime_group_end(ttpu_runtime* rt, int grouped) {
  if (!grouped) return NULL;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  if (rt->composite_depth > 0) rt->composite_depth--;
  if (grouped == 1 && rt->exec == &ttpu_executor_fused &&
      rt->mode == TTPU_MODE_STRICT) {
    s = rt->exec->flush(rt, TTPU_END_SYNC);
    /* Strict mode raises a data-dependent error at its op: the group's
     * checks are read here, not left for the next host wait. */
    s = ttpu_rt_take_checks(rt, s);
    rt->exec = &ttpu_executor_strict;
  }
  pthread_mutex_unlock(&rt->mu);
  return s;
}

ttpu_mode ttpu_runtime_mode(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return rt->mode;
  pthread_mutex_lock(&rt->mu);
  ttpu_mode mode = rt->mode;
  pthread_mutex_unlock(&rt->mu);
  return mode;
}

ttpu_status* ttpu_runtime_flush(ttpu_runtime* rt) {
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  s = ttpu_exec_flush(rt, TTPU_END_SYNC);
  pthread_mutex_unlock(&rt->mu);
  return s;
}
