/* strict.c - strict mode's executor: one op call is planned, its program
 * found or compiled, and enqueued; the call returns without waiting. */
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor.h"
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

/* The program of plan p: from the memory cache, else compiled (saying
 * why: an evicted program reloaded, or what changed since the op's last
 * compile). */
static ttpu_status* find_or_compile(ttpu_runtime* rt, const ttpu_plan* p,
                                    ttpu_cache_entry** e) {
  const ttpu_op_call* call = p->call;
  *e = ttpu_prog_find(rt, call->device, p->key, p->n_key);
  if (*e) return NULL;
  if (!ttpu_prog_note_reload(rt, p->key, p->n_key, ttpu_op_name(call->op)))
    ttpu_plan_note_recompile(rt, p);
  lower_one_ctx ctx = {rt, p};
  ttpu_prog_request req = {0};
  req.what = ttpu_op_name(call->op);
  req.n_ops = 1;
  req.reason = rt->prog.last_reason;
  req.lower = lower_one;
  req.ctx = &ctx;
  req.use_disk = 1;
  return ttpu_prog_compile(rt, call->device, p->key, p->n_key, &req, e);
}

/* plan -> find or compile -> execute (which takes the results). */
static ttpu_status* strict_submit(ttpu_runtime* rt, const ttpu_op_call* call,
                                  const ttpu_op_def* def) {
  rt->prog.ops_run++;
  ttpu_plan p;
  ttpu_cache_entry* e = NULL;
  ttpu_status* s = ttpu_plan_build(rt, call, def, NULL, &p);
  if (!s) s = find_or_compile(rt, &p, &e);
  if (!s) s = execute(rt, &p, e);
  ttpu_plan_free(&p);
  return s;
}

const ttpu_executor_ops ttpu_executor_strict = {
    .name = "strict",
    .submit = strict_submit,
};
