/* debug.c - debug mode's executor: each op runs as in strict mode and is
 * waited for, so that an error surfaces at its op, named with its shapes. */
#include <stdio.h>

#include "executor.h"
#include "queue.h"

/* "add.Tensor(f32[2,3], f32[3])": how debug mode names the failing op. */
static void describe_call(const ttpu_op_call* c, char* buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s(", ttpu_op_name(c->op));
  for (int t = 0; t < c->n_tensors && k < n; ++t) {
    const ttpu_tensor* x = &c->tensors[t];
    k += (size_t)snprintf(buf + k, n - k, "%s%s[", t ? ", " : "",
                          x->buffer ? ttpu_dtype_name(x->dtype) : "None");
    for (int d = 0; d < x->ndim && k < n; ++d)
      k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "",
                            (long long)x->sizes[d]);
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "]");
  }
  if (k < n) snprintf(buf + k, n - k, ")");
}

/* Compiled and launched here, never left compiling in the queue. */
static ttpu_status* debug_submit(ttpu_runtime* rt, const ttpu_op_call* call,
                                 const ttpu_op_def* def) {
  return ttpu_queue_run_op_now(rt, call, def);
}

/* Synchronous: the op's own failure, named with its shapes. */
static ttpu_status* debug_complete(ttpu_runtime* rt, const ttpu_op_call* call,
                                   ttpu_status* s) {
  if (!s) s = ttpu_runtime_synchronize(rt, call->device);
  if (s) {
    char what[512];
    describe_call(call, what, sizeof(what));
    s = ttpu_status_annotate(s, "in %s", what);
  }
  return s;
}

const ttpu_executor_ops ttpu_executor_debug = {
    .name = "debug",
    .submit = debug_submit,
    .complete = debug_complete,
};
