/* run.c - one op call: plan, find or compile the program, enqueue it. */
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../prog/program.h"

typedef struct {
  ttpu_runtime* rt;
  const ttpu_plan* p;
} lower_one_ctx;

static ttpu_status* lower_one(void* ctx, char** text, size_t* len,
                              ttpu_result_plan** results, int* n_results) {
  lower_one_ctx* c = ctx;
  return ttpu_lower_program(c->rt, c->p, text, len, results, n_results);
}

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

static ttpu_buffer* slot_buffer(void* plan, int slot) {
  return ((const ttpu_plan*)plan)->slots[slot].buf;
}

static ttpu_status* execute(ttpu_runtime* rt, const ttpu_plan* p,
                            ttpu_cache_entry* e) {
  const ttpu_op_call* call = p->call;
  int dev = call->device;
  ttpu_pjrt_buffer* stack_args[16];
  ttpu_pjrt_buffer* stack_outs[16];
  ttpu_pjrt_buffer** args =
      p->n_params <= 16 ? stack_args : calloc((size_t)p->n_params, sizeof(*args));
  ttpu_pjrt_buffer** outs =
      e->n_results <= 16 ? stack_outs : calloc((size_t)e->n_results, sizeof(*outs));
  ttpu_pjrt_buffer *fbuf = NULL, *ibuf = NULL;
  ttpu_status* s = NULL;
  if (!args || !outs) {
    s = ttpu_status_oom();
    goto done;
  }
  for (int k = 0; k < p->n_slots; ++k)
    if (p->slots[k].has_param) args[p->slots[k].param] = p->slots[k].buf->pb;
  if (p->f_param >= 0) {
    int64_t n = p->n_f;
    s = ttpu_pjrt_buffer_from_host(rt->client, dev, p->f, TTPU_F64, &n, 1, &fbuf);
    if (s) goto done;
    args[p->f_param] = fbuf;
  }
  if (p->i_param >= 0) {
    int64_t n = p->n_i;
    s = ttpu_pjrt_buffer_from_host(rt->client, dev, p->i, TTPU_I64, &n, 1, &ibuf);
    if (s) goto done;
    args[p->i_param] = ibuf;
  }
  if (p->rng_param >= 0) args[p->rng_param] = rt->dev[dev].rng_state->pb;
  ttpu_pjrt_event* done_event = NULL;
  int64_t began = ttpu_rt_trace_clock(rt);
  s = ttpu_pjrt_execute(rt->client, e->exec, dev, args, p->n_params, outs,
                        e->n_results, &done_event);
  if (s) {
    s = ttpu_status_annotate(s, "running %s", ttpu_op_name(call->op));
    goto done;
  }
  rt->dev[dev].stats.executions++;
  ttpu_rt_trace_launch(rt, dev, ttpu_op_name(call->op), 1, began, done_event);
  ttpu_rt_add_pending(rt, dev, e, done_event);
  s = ttpu_prog_take_results(rt, dev, e, outs, slot_buffer, (void*)p);
done:
  if (fbuf) ttpu_pjrt_buffer_destroy(rt->client, fbuf);
  if (ibuf) ttpu_pjrt_buffer_destroy(rt->client, ibuf);
  if (args != stack_args) free(args);
  if (outs != stack_outs) free(outs);
  return s;
}

static ttpu_status* run_strict(ttpu_runtime* rt, const ttpu_op_call* call,
                               const ttpu_op_def* def) {
  ttpu_plan p;
  ttpu_status* s = ttpu_plan_build(rt, call, def, NULL, &p);
  if (!s) {
    ttpu_cache_entry* e = ttpu_prog_find(rt, call->device, p.key, p.n_key);
    if (!e) {
      if (!ttpu_prog_note_reload(rt, p.key, p.n_key, ttpu_op_name(call->op)))
        ttpu_plan_note_recompile(rt, &p);
      lower_one_ctx ctx = {rt, &p};
      ttpu_prog_request req = {0};
      req.what = ttpu_op_name(call->op);
      req.n_ops = 1;
      req.reason = rt->last_reason;
      req.lower = lower_one;
      req.ctx = &ctx;
      req.use_disk = 1;
      s = ttpu_prog_compile(rt, call->device, p.key, p.n_key, &req, &e);
    }
    if (!s) s = execute(rt, &p, e);
  }
  ttpu_plan_free(&p);
  return s;
}

ttpu_status* ttpu_op_run(ttpu_runtime* rt, const ttpu_op_call* call) {
  const ttpu_op_def* def = ttpu_op_def_get(call->op);
  if (!def)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "unknown op id %d", call->op);
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  if (rt->mode == TTPU_MODE_FUSED) {
    s = ttpu_window_record(rt, call, def);
    pthread_mutex_unlock(&rt->mu);
    return s;
  }
  rt->ops_run++;
  ttpu_mode mode = rt->mode;
  s = run_strict(rt, call, def);
  pthread_mutex_unlock(&rt->mu);
  if (mode == TTPU_MODE_DEBUG) {
    /* Synchronous: the op's own failure, named with its shapes. */
    if (!s) s = ttpu_runtime_synchronize(rt, call->device);
    if (s) {
      char what[512];
      describe_call(call, what, sizeof(what));
      s = ttpu_status_annotate(s, "in %s", what);
    }
  }
  return s;
}
