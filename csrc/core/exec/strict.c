/* strict.c - strict mode's executor: each op call is its own program,
 * enqueued without waiting. With compile threads (the compile threads
 * option, more than 1) a missing program compiles on them while the op
 * waits in the compile queue's FIFO and the caller goes on; without, it
 * compiles here. Either way ops run in program order (exec/queue.h). */
#include "executor.h"
#include "queue.h"

static ttpu_status* strict_submit(ttpu_runtime* rt, const ttpu_op_call* call,
                                  const ttpu_op_def* def) {
  return rt->opts.compile_threads > 1 ? ttpu_queue_op(rt, call, def)
                                      : ttpu_queue_run_op_now(rt, call, def);
}

/* What strict mode holds back is the compile queue's FIFO, which
 * ttpu_exec_flush and ttpu_exec_touch run for every executor: it needs no
 * flush or touch of its own. */
const ttpu_executor_ops ttpu_executor_strict = {
    .name = "strict",
    .submit = strict_submit,
};
