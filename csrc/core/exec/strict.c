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

/* The device buffer of a scalar pack of n values of dtype (F64 or I64):
 * one the device keeps from an earlier op with the same values, else
 * uploaded and kept in place of the least recently used. A pack too long
 * to keep is uploaded for this launch only: *once is set to it, and the
 * caller destroys it after the launch (PJRT holds what a running
 * execution reads). */
static ttpu_status* pack_buffer(ttpu_runtime* rt, int dev, const void* data,
                                ttpu_dtype dtype, int n,
                                ttpu_pjrt_buffer** out,
                                ttpu_pjrt_buffer** once) {
  int64_t dims = n;
  if (n > TTPU_PACK_MAX) {
    ttpu_status* s = ttpu_pjrt_buffer_from_host(rt->client, dev, data, dtype,
                                                &dims, 1, once);
    *out = *once;
    return s;
  }
  ttpu_device_state* d = &rt->dev[dev];
  size_t bytes = (size_t)n * sizeof(int64_t);
  ttpu_pack* oldest = &d->packs[0];
  for (int k = 0; k < TTPU_PACKS; ++k) {
    ttpu_pack* e = &d->packs[k];
    if (e->pb && e->dtype == dtype && e->n == n && !memcmp(e->bits, data, bytes)) {
      e->used = ++d->pack_clock;
      *out = e->pb;
      return NULL;
    }
    if (!e->pb || (oldest->pb && e->used < oldest->used)) oldest = e;
  }
  ttpu_pjrt_buffer* pb = NULL;
  ttpu_status* s = ttpu_pjrt_buffer_from_host(rt->client, dev, data, dtype,
                                              &dims, 1, &pb);
  if (s) return s;
  if (oldest->pb) ttpu_pjrt_buffer_destroy(rt->client, oldest->pb);
  oldest->pb = pb;
  oldest->dtype = dtype;
  oldest->n = n;
  oldest->used = ++d->pack_clock;
  memcpy(oldest->bits, data, bytes);
  *out = pb;
  return NULL;
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
  ttpu_pjrt_buffer *fbuf = NULL, *ibuf = NULL; /* uploads not kept */
  ttpu_status* s = NULL;
  if (!args || !outs) {
    s = ttpu_status_oom();
    goto done;
  }
  for (int k = 0; k < p->n_slots; ++k)
    if (p->slots[k].has_param) args[p->slots[k].param] = p->slots[k].buf->pb;
  if (p->f_param >= 0) {
    s = pack_buffer(rt, dev, p->f, TTPU_F64, p->n_f, &args[p->f_param], &fbuf);
    if (s) goto done;
  }
  if (p->i_param >= 0) {
    s = pack_buffer(rt, dev, p->i, TTPU_I64, p->n_i, &args[p->i_param], &ibuf);
    if (s) goto done;
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
  ttpu_plan* p = &rt->strict_plan;
  ttpu_cache_entry* e = NULL;
  ttpu_status* s = ttpu_plan_build(rt, call, def, NULL, p);
  if (!s) s = find_or_compile(rt, p, &e);
  if (!s) s = execute(rt, p, e);
  return s;
}

/* The plan's arrays and the kept packs. */
static void strict_destroy(ttpu_runtime* rt) {
  ttpu_plan_free(&rt->strict_plan);
  memset(&rt->strict_plan, 0, sizeof(rt->strict_plan));
  for (int dev = 0; dev < rt->device_count; ++dev)
    for (int k = 0; k < TTPU_PACKS; ++k) {
      ttpu_pack* e = &rt->dev[dev].packs[k];
      if (e->pb) ttpu_pjrt_buffer_destroy(rt->client, e->pb);
      e->pb = NULL;
    }
}

const ttpu_executor_ops ttpu_executor_strict = {
    .name = "strict",
    .submit = strict_submit,
    .destroy = strict_destroy,
};
