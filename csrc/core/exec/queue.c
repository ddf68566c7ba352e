/* queue.c - the compile queue (exec/queue.h): one op call planned, its
 * program found or compiled, and enqueued without waiting; and the FIFO of
 * programs waiting for their compiles, which strict mode's ops, fused
 * windows and graphs all join.
 *
 * With compile threads (the compile threads option, more than 1), a
 * program that is neither in the memory cache nor on disk is lowered here,
 * then compiled on the runtime's compile pool (prog/pool.h) while the
 * caller goes on: the op waits in a FIFO of pending ops (its storages
 * retained, its scalars copied), and so does every later op, even one
 * whose program is cached, so that ops run in program order. Later ops
 * are planned against the storages as the pending ops will leave them (a
 * store view, as fused mode does). A key already compiling is not
 * compiled twice (the in-flight table). Head ops whose compile finished
 * run at each submit; touch runs the FIFO up to the last op that uses the
 * storage, and flush runs all of it, waiting for compiles. A finished
 * compile is collected (logged, cached, written to disk, traced) under
 * rt->mu, in FIFO order, so the compile log keeps program order.
 *
 * A graph's program (exec/fused.c) that is not compiled yet joins the same
 * FIFO (ttpu_queue_window) and compiles on the pool, so that
 * torch.compile's tracing of what follows the graph (its backward, the
 * optimizer's step) goes on meanwhile; so does any window that ends while
 * the FIFO holds something. Its record's slots are the window's storages.
 * Its errors follow the rules below, except that a graph does not run at
 * its end for a check or a large store: like a kernel on other
 * accelerators, its errors are raised by the next point that waits.
 *
 * Errors: an op whose program reads a data-dependent check (an index
 * bound), or that stores 256 MiB or more, runs, with everything queued
 * before it, before its call returns, so that the check's error or an
 * out-of-memory is raised at the op. A failed compile (or launch) of a
 * pending op is raised at the next submit, touch, flush or synchronize,
 * as "compiling <op>: ...". That op and every op queued after it do not
 * run: they are dropped, and each storage they would have written keeps
 * the error, which a read of it (download, copy, wait, an op reading it)
 * raises until the storage is written again. Later ops compile and run as
 * usual. Debug mode and fused windows compile on the calling thread, and
 * so does a miss while programs are dumped (TORCHTPU_DUMP_DIR) or the
 * trace hook reports compiles (the profiler), so that the dump, the
 * compile's trace and the op's execution appear before the op returns. */
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue.h"
#include "../prog/program.h"
#include "../prog/pool.h"
#include "../base/env.h"

typedef struct {
  ttpu_runtime* rt;
  const ttpu_plan* p;
} lower_one_ctx;

static ttpu_status* lower_one(void* ctx, char** text, size_t* len,
                              ttpu_result_plan** results, int* n_results) {
  lower_one_ctx* c = ctx;
  return ttpu_lower_program(c->p, text, len, results, n_results);
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
  ttpu_rt_drop_pjrt(rt, oldest->pb);
  oldest->pb = pb;
  oldest->dtype = dtype;
  oldest->n = n;
  oldest->used = ++d->pack_clock;
  memcpy(oldest->bits, data, bytes);
  *out = pb;
  return NULL;
}

/* What one launch of a one-op program needs besides its storages' buffers
 * (the plan of an op run now, or the copy a pending op keeps). */
typedef struct {
  const char* name;       /* the op's name, or a window's label */
  int n_ops;
  int op, device, n_params;
  const double* f;
  int n_f, f_param;
  const int64_t* i;
  int n_i, i_param, rng_param;
  const ttpu_pad* pads;   /* per slot (NULL: none padded) */
} launch_args;

/* Launches e with args (storage parameters filled in; packs and the rng
 * state are added here) and gives its results to buffer_of(ctx, slot). */
static ttpu_status* launch(ttpu_runtime* rt, const launch_args* a,
                           ttpu_pjrt_buffer** args, ttpu_cache_entry* e,
                           ttpu_buffer* (*buffer_of)(void*, int), void* ctx) {
  int dev = a->device;
  const char* name = a->name;
  ttpu_pjrt_buffer* stack_outs[16];
  ttpu_pjrt_buffer** outs =
      e->n_results <= 16 ? stack_outs : calloc((size_t)e->n_results, sizeof(*outs));
  ttpu_pjrt_buffer *fbuf = NULL, *ibuf = NULL; /* uploads not kept */
  ttpu_status* s = NULL;
  if (!outs) return ttpu_status_oom();
  if (a->f_param >= 0) {
    s = pack_buffer(rt, dev, a->f, TTPU_F64, a->n_f, &args[a->f_param], &fbuf);
    if (s) goto done;
  }
  if (a->i_param >= 0) {
    s = pack_buffer(rt, dev, a->i, TTPU_I64, a->n_i, &args[a->i_param], &ibuf);
    if (s) goto done;
  }
  if (a->rng_param >= 0) args[a->rng_param] = rt->dev[dev].rng_state->pb;
  ttpu_pjrt_event* done_event = NULL;
  int64_t began = ttpu_rt_trace_clock(rt);
  s = ttpu_pjrt_execute(rt->client, e->exec, dev, args, a->n_params, outs,
                        e->n_results, &done_event);
  if (s) {
    s = ttpu_status_annotate(s, "running %s", name);
    goto done;
  }
  rt->dev[dev].stats.executions++;
  ttpu_rt_trace_launch(rt, dev, name, a->n_ops, began, done_event);
  ttpu_rt_add_pending(rt, dev, e, done_event);
  s = ttpu_prog_take_results(&rt->prog, dev, e, outs, buffer_of, ctx, a->pads);
done:
  ttpu_rt_drop_pjrt(rt, fbuf);
  ttpu_rt_drop_pjrt(rt, ibuf);
  if (outs != stack_outs) free(outs);
  return s;
}

static ttpu_status* execute(ttpu_runtime* rt, const ttpu_plan* p,
                            ttpu_cache_entry* e) {
  ttpu_pjrt_buffer* stack_args[16];
  ttpu_pjrt_buffer** args =
      p->n_params <= 16 ? stack_args : calloc((size_t)p->n_params, sizeof(*args));
  if (!args) return ttpu_status_oom();
  for (int k = 0; k < p->n_slots; ++k)
    if (p->slots[k].has_param) args[p->slots[k].param] = p->slots[k].buf->pb;
  launch_args a = {ttpu_op_name(p->call->op), 1, p->call->op, p->call->device,
                   p->n_params, p->f, p->n_f, p->f_param, p->i, p->n_i,
                   p->i_param, p->rng_param, NULL};
  /* The padding each written storage is left with (prog/bucket.c). */
  ttpu_pad stack_pads[16];
  ttpu_pad* pads = NULL;
  if (ttpu_plan_rewritten(p)) {
    pads = p->n_slots <= 16 ? stack_pads : calloc((size_t)p->n_slots, sizeof(*pads));
    if (!pads) {
      if (args != stack_args) free(args);
      return ttpu_status_oom();
    }
    for (int k = 0; k < p->n_slots; ++k) {
      ttpu_dtype dt;
      int nd;
      int64_t dims[TTPU_MAX_DIMS];
      pads[k].mask = 0;
      pads[k].n = 0;
      if (p->slots[k].written)
        ttpu_lower_written_phys(p, k, &dt, &nd, dims, &pads[k]);
    }
    a.pads = pads;
  }
  ttpu_status* s = launch(rt, &a, args, e, slot_buffer, (void*)p);
  if (pads && pads != stack_pads) free(pads);
  if (args != stack_args) free(args);
  return s;
}

/* The program of plan p: from the memory cache, else compiled (saying
 * why: an evicted program reloaded, or what changed since the op's last
 * compile). */
static ttpu_status* find_or_compile(ttpu_runtime* rt, const ttpu_plan* p,
                                    ttpu_cache_entry** e) {
  const ttpu_op_call* call = p->call;
  *e = ttpu_prog_find(&rt->prog, call->device, p->key, p->n_key);
  if (*e) return NULL;
  if (!ttpu_prog_note_reload(&rt->prog, p->key, p->n_key, ttpu_op_name(call->op)))
    ttpu_plan_note_recompile(&rt->prog, p);
  lower_one_ctx ctx = {rt, p};
  ttpu_prog_request req = {0};
  req.what = ttpu_op_name(call->op);
  req.n_ops = 1;
  req.reason = rt->prog.last_reason;
  req.lower = lower_one;
  req.ctx = &ctx;
  req.use_disk = 1;
  return ttpu_prog_compile(&rt->prog, call->device, p->key, p->n_key, &req, e);
}

/* ------------------------------------------------------------ pending */

/* A program compiling on the pool, shared by the pending ops that need it
 * (under rt->mu). */
typedef struct inflight {
  int64_t* key;
  size_t n_key;
  int device;
  char what[96];          /* the op that missed, or the window's label */
  int n_ops;
  char reason[512];       /* why it compiles, for the compile log */
  ttpu_pool_job* job;     /* owns the text */
  ttpu_prog_lowered low;  /* results, until collected */
  int users;              /* pending ops that need it */
  int64_t hits;           /* misses that found it in flight */
  int collected;
  ttpu_cache_entry* entry; /* collected: pinned once per user */
  ttpu_status* error;      /* collected and failed */
  struct inflight* next;   /* the in-flight table (not yet collected) */
} inflight;

/* One op waiting in the FIFO: what execute() needs, copied from its plan;
 * or one fused window or graph, its slots being the window's storages. */
typedef struct {
  int op, device;
  char* what;             /* a window's label; NULL for an op */
  int n_ops;
  int n_slots;
  ttpu_buffer** bufs;     /* retained */
  int* param;             /* per slot: parameter index or -1 */
  int* written;
  ttpu_dtype* w_dt;       /* per written slot: its shape after the op */
  int* w_nd;
  int64_t* w_dims;        /* n_slots x TTPU_MAX_DIMS */
  ttpu_pad* w_pad;        /* per written slot: its padding after the op */
  int n_params;
  int n_f, n_i, f_param, i_param, rng_param;
  double* f;
  int64_t* i;
  ttpu_cache_entry* e;    /* pinned; NULL while inf compiles */
  inflight* inf;
} pending;

struct ttpu_compile_queue {
  pending** ops;          /* ring */
  int head, n, cap;
  inflight* table;
};

static pending* q_at(const ttpu_compile_queue* q, int k) {
  return q->ops[(q->head + k) % q->cap];
}

static void pending_free(ttpu_runtime* rt, pending* o) {
  if (!o) return;
  for (int k = 0; k < o->n_slots; ++k) ttpu_rt_release_locked(o->bufs[k]);
  free(o->bufs);
  free(o->param);
  free(o->written);
  free(o->w_dt);
  free(o->w_nd);
  free(o->w_dims);
  free(o->w_pad);
  free(o->f);
  free(o->i);
  free(o->what);
  free(o);
  (void)rt;
}

static void inflight_free(inflight* f) {
  if (!f) return;
  ttpu_pool_job_free(f->job);
  free(f->low.text);
  free(f->low.results);
  ttpu_status_free(f->error);
  free(f->key);
  free(f);
}

static inflight* table_find(const ttpu_compile_queue* q, const int64_t* key,
                            size_t n_key) {
  for (inflight* f = q ? q->table : NULL; f; f = f->next)
    if (f->n_key == n_key && !memcmp(f->key, key, n_key * sizeof(int64_t)))
      return f;
  return NULL;
}

static void table_remove(ttpu_compile_queue* q, inflight* f) {
  for (inflight** pp = &q->table; *pp; pp = &(*pp)->next)
    if (*pp == f) {
      *pp = f->next;
      f->next = NULL;
      return;
    }
}

static ttpu_status* copy_status(const ttpu_status* s) {
  return ttpu_status_make(ttpu_status_code(s), "%s", ttpu_status_message(s));
}

/* Waits for f's compile and hands its outcome to the program layer (under
 * rt->mu): f->entry (pinned for each user) or f->error. */
static void collect(ttpu_runtime* rt, ttpu_compile_queue* q, inflight* f) {
  if (f->collected) return;
  ttpu_pool_job_wait(f->job);
  ttpu_prog_request req = {0};
  req.what = f->what;
  req.n_ops = f->n_ops;
  req.reason = f->reason;
  req.use_disk = 1;
  size_t len = 0;
  const char* text = ttpu_pool_job_text(f->job, &len);
  ttpu_status* s = ttpu_prog_finish(
      &rt->prog, f->device, f->key, f->n_key, &req, ttpu_pool_job_take_exec(f->job),
      ttpu_pool_job_take_status(f->job), ttpu_pool_job_seconds(f->job),
      f->low.results, f->low.n_results, text, len, f->low.hash, &f->entry);
  f->low.results = NULL;
  ttpu_pool_job_free(f->job);
  f->job = NULL;
  f->collected = 1;
  table_remove(q, f);
  if (s) {
    f->error = s;
    f->entry = NULL;
  } else {
    f->entry->pins += f->users;
    f->entry->hits += f->hits;
  }
}

/* One user of f is done with it. */
static void inflight_unuse(ttpu_runtime* rt, ttpu_compile_queue* q,
                           inflight* f) {
  if (--f->users > 0) return;
  /* Nobody waits for it any more: a compile still running is collected
   * now (its program is cached as any other). */
  if (!f->collected) collect(rt, q, f);
  inflight_free(f);
}

/* The storage state the FIFO will leave b in (a ttpu_store_view). */
static int queue_lookup(const void* ctx, const ttpu_buffer* b, int* has_value,
                        ttpu_dtype* dt, int* nd, int64_t* dims,
                        ttpu_pad* pad) {
  const ttpu_compile_queue* q = ctx;
  for (int k = q->n - 1; k >= 0; --k) {
    const pending* o = q_at(q, k);
    for (int sl = 0; sl < o->n_slots; ++sl) {
      if (o->bufs[sl] != b || !o->written[sl]) continue;
      *has_value = 1;
      *dt = o->w_dt[sl];
      *nd = o->w_nd[sl];
      memcpy(dims, o->w_dims + (size_t)sl * TTPU_MAX_DIMS,
             sizeof(int64_t) * TTPU_MAX_DIMS);
      *pad = o->w_pad[sl];
      return 1;
    }
  }
  return 0;
}

static ttpu_buffer* pending_buffer(void* ctx, int slot) {
  return ((pending*)ctx)->bufs[slot];
}

/* execute() for a pending op. */
static ttpu_status* execute_pending(ttpu_runtime* rt, pending* o,
                                    ttpu_cache_entry* e) {
  ttpu_pjrt_buffer* stack_args[16];
  ttpu_pjrt_buffer** args =
      o->n_params <= 16 ? stack_args : calloc((size_t)o->n_params, sizeof(*args));
  if (!args) return ttpu_status_oom();
  ttpu_status* s = NULL;
  for (int k = 0; k < o->n_slots && !s; ++k) {
    if (o->param[k] < 0) continue;
    if (!o->bufs[k]->pb)
      s = ttpu_status_make(TTPU_INTERNAL,
                           "running %s: an input storage has no value",
                           o->what ? o->what : ttpu_op_name(o->op));
    else
      args[o->param[k]] = o->bufs[k]->pb;
  }
  launch_args a = {o->what ? o->what : ttpu_op_name(o->op), o->n_ops, o->op,
                   o->device, o->n_params, o->f, o->n_f, o->f_param, o->i,
                   o->n_i, o->i_param, o->rng_param, o->w_pad};
  if (!s) s = launch(rt, &a, args, e, pending_buffer, o);
  if (args != stack_args) free(args);
  return s;
}

/* Gives b the error of the op that should have written it. */
static void poison(ttpu_buffer* b, const ttpu_status* s) {
  ttpu_status_free(b->error);
  b->error = copy_status(s);
}

/* Pops the head op and releases what it holds. */
static pending* pop(ttpu_compile_queue* q) {
  pending* o = q->ops[q->head];
  q->ops[q->head] = NULL;
  q->head = (q->head + 1) % q->cap;
  q->n--;
  return o;
}

static void release_op(ttpu_runtime* rt, ttpu_compile_queue* q, pending* o) {
  if (o->e) o->e->pins--;
  if (o->inf) {
    if (o->inf->entry && !o->e) o->inf->entry->pins--;
    inflight_unuse(rt, q, o->inf);
  }
  pending_free(rt, o);
}

/* The head op failed with s: it and every op after it are dropped, their
 * written storages keep s. Returns s. */
static ttpu_status* drop_all(ttpu_runtime* rt, ttpu_compile_queue* q,
                             ttpu_status* s) {
  while (q->n) {
    pending* o = pop(q);
    for (int sl = 0; sl < o->n_slots; ++sl)
      if (o->written[sl]) poison(o->bufs[sl], s);
    release_op(rt, q, o);
  }
  return s;
}

/* Runs the FIFO's head ops in order: every op up to index `upto` (-1:
 * none), waiting for their compiles, then those whose compile is done
 * (under rt->mu). The first failure drops the rest (drop_all). */
static ttpu_status* run_queue(ttpu_runtime* rt, int upto) {
  ttpu_compile_queue* q = rt->queue;
  if (!q) return NULL;
  while (q->n) {
    pending* o = q_at(q, 0);
    ttpu_cache_entry* e = o->e;
    if (!e) {
      inflight* f = o->inf;
      if (!f->collected) {
        if (upto < 0 && !ttpu_pool_job_done(f->job)) break;
        collect(rt, q, f);
      }
      if (f->error) {
        ttpu_status* s = copy_status(f->error);
        return drop_all(rt, q, s);
      }
      e = f->entry;
    }
    ttpu_status* s = execute_pending(rt, o, e);
    if (s) return drop_all(rt, q, s);
    pop(q);
    release_op(rt, q, o);
    upto--;
  }
  return NULL;
}

/* The last FIFO index whose op touches b (writing: any use; else a write,
 * or the rng state it advances), or -1. */
static int last_use(ttpu_runtime* rt, const ttpu_buffer* b, int writing) {
  ttpu_compile_queue* q = rt->queue;
  for (int k = q ? q->n - 1 : -1; k >= 0; --k) {
    const pending* o = q_at(q, k);
    if (o->rng_param >= 0 && rt->dev[o->device].rng_state == b) return k;
    for (int sl = 0; sl < o->n_slots; ++sl)
      if (o->bufs[sl] == b && (writing || o->written[sl])) return k;
  }
  return -1;
}

static ttpu_status* run_all(ttpu_runtime* rt) {
  ttpu_compile_queue* q = rt->queue;
  return q && q->n ? run_queue(rt, q->n - 1) : NULL;
}

static ttpu_status* run_for(ttpu_runtime* rt, const ttpu_buffer* b,
                                 int writing) {
  int k = last_use(rt, b, writing);
  return k >= 0 ? run_queue(rt, k) : NULL;
}

/* A pending record with room for n slots and the scalar packs (zeroed,
 * nothing retained yet), or NULL. */
static pending* pending_alloc(int n, int n_f, int n_i) {
  pending* o = calloc(1, sizeof(*o));
  if (!o) return NULL;
  o->bufs = calloc((size_t)n + 1, sizeof(*o->bufs));
  o->param = calloc((size_t)n + 1, sizeof(int));
  o->written = calloc((size_t)n + 1, sizeof(int));
  o->w_dt = calloc((size_t)n + 1, sizeof(ttpu_dtype));
  o->w_nd = calloc((size_t)n + 1, sizeof(int));
  o->w_dims = calloc(((size_t)n + 1) * TTPU_MAX_DIMS, sizeof(int64_t));
  o->w_pad = calloc((size_t)n + 1, sizeof(ttpu_pad));
  o->f = calloc((size_t)n_f + 1, sizeof(double));
  o->i = calloc((size_t)n_i + 1, sizeof(int64_t));
  if (!o->bufs || !o->param || !o->written || !o->w_dt || !o->w_nd ||
      !o->w_dims || !o->w_pad || !o->f || !o->i) {
    pending_free(NULL, o);
    return NULL;
  }
  return o;
}

/* The parameter count and scalar packs of a pending program (o's pack
 * arrays were sized by pending_alloc). */
static void pending_set_scalars(pending* o, int n_params, const double* f,
                                int n_f, int f_param, const int64_t* i,
                                int n_i, int i_param, int rng_param) {
  o->n_params = n_params;
  o->n_f = n_f;
  o->n_i = n_i;
  o->f_param = f_param;
  o->i_param = i_param;
  o->rng_param = rng_param;
  if (n_f) memcpy(o->f, f, (size_t)n_f * sizeof(double));
  if (n_i) memcpy(o->i, i, (size_t)n_i * sizeof(int64_t));
}

/* The pending copy of plan p, retaining its storages. */
static pending* pending_make(const ttpu_plan* p) {
  int n = p->n_slots;
  pending* o = pending_alloc(n, p->n_f, p->n_i);
  if (!o) return NULL;
  o->op = p->call->op;
  o->device = p->call->device;
  o->n_ops = 1;
  for (int k = 0; k < n; ++k) {
    const ttpu_slot* sl = &p->slots[k];
    o->bufs[k] = sl->buf;
    ttpu_buffer_retain(sl->buf);
    o->n_slots = k + 1;
    o->param[k] = sl->has_param ? sl->param : -1;
    o->written[k] = sl->written;
    if (sl->written)
      ttpu_lower_written_phys(p, k, &o->w_dt[k], &o->w_nd[k],
                              o->w_dims + (size_t)k * TTPU_MAX_DIMS,
                              &o->w_pad[k]);
  }
  pending_set_scalars(o, p->n_params, p->f, p->n_f, p->f_param, p->i,
                      p->n_i, p->i_param, p->rng_param);
  return o;
}

/* Room for one more op in the FIFO; 0 when out of memory. */
static int queue_reserve(ttpu_runtime* rt) {
  ttpu_compile_queue* q = rt->queue;
  if (!q) {
    q = calloc(1, sizeof(*q));
    if (!q) return 0;
    rt->queue = q;
  }
  if (q->n < q->cap) return 1;
  int cap = q->cap ? q->cap * 2 : 64;
  pending** ops = calloc((size_t)cap, sizeof(*ops));
  if (!ops) return 0;
  for (int k = 0; k < q->n; ++k) ops[k] = q_at(q, k);
  free(q->ops);
  q->ops = ops;
  q->head = 0;
  q->cap = cap;
  return 1;
}

/* A storage that an op reads keeps the error of the dropped op that was
 * to write it, unless a pending op writes it anew. */
static ttpu_status* check_inputs(const ttpu_compile_queue* q,
                                 const ttpu_plan* p) {
  for (int k = 0; k < p->n_slots; ++k) {
    const ttpu_slot* sl = &p->slots[k];
    if (!sl->read || !sl->buf->error) continue;
    ttpu_dtype dt;
    int has, nd;
    int64_t dims[TTPU_MAX_DIMS];
    ttpu_pad pad;
    if (q && queue_lookup(q, sl->buf, &has, &dt, &nd, dims, &pad)) continue;
    return copy_status(sl->buf->error);
  }
  return NULL;
}

/* Whether a miss compiles at its op: while compiled programs are dumped
 * (the dump directory option, else TORCHTPU_DUMP_DIR, read at each compile
 * as program.c does) or the trace hook reports compiles, which tools read
 * as belonging to the op that returns (torchtpu.aot's capture, the
 * profiler's tpu::compile ranges inside their op). */
static int compile_at_op(const ttpu_runtime* rt) {
  if (rt->trace_what & TTPU_TRACE_COMPILES) return 1;
  const char* dir = rt->opts.dump_dir ? rt->opts.dump_dir : ttpu_env_dump_dir();
  return dir && *dir;
}

/* An op that stores at least this much runs before its call returns: an
 * allocation that size is where an out-of-memory is likely, and such an
 * op's run time dwarfs what overlapping its compile would save. */
static const int64_t kRunAtOpBytes = (int64_t)256 << 20;

/* Whether a program's results include a data-dependent check. */
static int reads_check(const ttpu_result_plan* r, int n) {
  for (int k = 0; k < n; ++k)
    if (r[k].slot == TTPU_RESULT_CHECK) return 1;
  return 0;
}

/* Puts pending o (its slots filled in) at the FIFO's end with the program
 * of key: e (a memory cache hit), else one compiling already (the in-flight
 * table), else from the disk cache, else lowered with req and compiled on
 * the pool. p: the plan of a single op, whose miss is explained
 * (ttpu_plan_note_recompile) before it compiles; NULL for a window, whose
 * req->reason says it. Later calls are planned against what the program
 * will store (its result plans), which come back in *results. With
 * nothing queued, a program found in a cache runs at once instead
 * (*queued 0; o freed). On failure o is freed. */
static ttpu_status* queue_program(ttpu_runtime* rt, pending* o,
                                  const int64_t* key, size_t n_key,
                                  ttpu_prog_request* req, const ttpu_plan* p,
                                  ttpu_cache_entry* e, int* queued,
                                  const ttpu_result_plan** results,
                                  int* n_results) {
  ttpu_compile_queue* q = rt->queue;
  int dev = o->device;
  ttpu_status* s = NULL;
  *queued = 0;
  inflight* f = e ? NULL : table_find(q, key, n_key);
  if (f) {
    rt->dev[dev].stats.cache_hits++; /* the cache has it once it compiled */
    f->hits++;
  } else if (!e) {
    if (p && !ttpu_prog_note_reload(&rt->prog, key, n_key, req->what))
      ttpu_plan_note_recompile(&rt->prog, p);
    if (p) req->reason = rt->prog.last_reason;
    f = calloc(1, sizeof(*f));
    if (f) f->key = malloc(n_key * sizeof(int64_t) + 1);
    if (!f || !f->key) {
      free(f);
      pending_free(rt, o);
      return ttpu_status_oom();
    }
    memcpy(f->key, key, n_key * sizeof(int64_t));
    f->n_key = n_key;
    f->device = dev;
    snprintf(f->what, sizeof(f->what), "%s", req->what);
    f->n_ops = req->n_ops;
    snprintf(f->reason, sizeof(f->reason), "%s", req->reason ? req->reason : "");
    s = ttpu_prog_prepare(&rt->prog, dev, key, n_key, req, &e, &f->low);
    if (!s && !e) {
      /* A program of the same text compiling already (bmm, then bmm.out
       * before it finished): wait for it and take its executable. */
      inflight* same = q->table;
      while (same && (same->collected || same->device != dev ||
                      same->low.hash[0] != f->low.hash[0] ||
                      same->low.hash[1] != f->low.hash[1]))
        same = same->next;
      if (same) {
        collect(rt, q, same);
        if (!same->error)
          s = ttpu_prog_share(&rt->prog, dev, key, n_key, req, &f->low, &e);
      }
    }
    if (!s && !e) {
      /* A window's compile goes to the window pool (runtime.h). */
      ttpu_pool** pool = p ? &rt->compile_pool : &rt->window_pool;
      int threads = rt->opts.compile_threads - (p ? 0 : 1);
      if (!*pool) s = ttpu_pool_create(threads > 1 ? threads : 1, pool);
      if (!s) {
        s = ttpu_pool_submit_compile(*pool, rt->client,
                                     f->low.text, f->low.len, NULL, 0,
                                     &f->job);
        f->low.text = NULL; /* the job's now */
      }
    }
    if (s || e) {
      inflight_free(f);
      f = NULL;
    }
    if (s) {
      pending_free(rt, o);
      return s;
    }
    if (f) {
      f->next = q->table;
      q->table = f;
    }
  }
  if (e) {
    /* A cached program runs at once when nothing waits before it. */
    if (!q->n) {
      s = execute_pending(rt, o, e);
      pending_free(rt, o);
      return s;
    }
    e->pins++;
    o->e = e;
  } else {
    f->users++;
    o->inf = f;
  }
  q->ops[(q->head + q->n) % q->cap] = o;
  q->n++;
  *queued = 1;
  *results = NULL;
  *n_results = 0;
  if (e) {
    *results = e->results;
    *n_results = e->n_results;
  } else if (!f->collected) {
    *results = f->low.results;
    *n_results = f->low.n_results;
  } else if (f->entry) {
    *results = f->entry->results;
    *n_results = f->entry->n_results;
  }
  for (int r = 0; r < *n_results; ++r) {
    int sl = (*results)[r].slot;
    if (sl < 0 || sl >= o->n_slots || !o->written[sl]) continue;
    o->w_dt[sl] = (*results)[r].dtype;
    o->w_nd[sl] = (*results)[r].ndim;
    memcpy(o->w_dims + (size_t)sl * TTPU_MAX_DIMS, (*results)[r].dims,
           sizeof(int64_t) * TTPU_MAX_DIMS);
  }
  return NULL;
}

/* An op joins the FIFO (see the top of this file). */
ttpu_status* ttpu_queue_op(ttpu_runtime* rt, const ttpu_op_call* call,
                                 const ttpu_op_def* def) {
  rt->prog.ops_run++;
  ttpu_status* s = run_queue(rt, -1);
  if (s) return s;
  ttpu_compile_queue* q = rt->queue;
  ttpu_plan* p = &rt->op_plan;
  ttpu_store_view view = {queue_lookup, q, 0, 0};
  s = ttpu_plan_build(&rt->prog, call, def, q && q->n ? &view : NULL, p);
  if (!s) s = check_inputs(q, p);
  if (s) return s;
  int dev = call->device;
  ttpu_cache_entry* e = ttpu_prog_find(&rt->prog, dev, p->key, p->n_key);
  if (e && !(q && q->n)) return execute(rt, p, e);
  if (!e && compile_at_op(rt)) {
    /* Compile here, after what waits, so that the dump, the trace's
     * compile and the op's execution all happen before the op returns.
     * The plan is rebuilt: the FIFO's storages have their values now. */
    s = run_queue(rt, q && q->n ? q->n - 1 : -1);
    if (!s) s = ttpu_plan_build(&rt->prog, call, def, NULL, p);
    if (!s) s = find_or_compile(rt, p, &e);
    if (!s) s = execute(rt, p, e);
    return s;
  }
  /* The op waits in the FIFO: its record first, so that running out of
   * memory leaves nothing half done. */
  pending* o = queue_reserve(rt) ? pending_make(p) : NULL;
  if (!o) return ttpu_status_oom();
  lower_one_ctx ctx = {rt, p};
  ttpu_prog_request req = {0};
  req.what = ttpu_op_name(call->op);
  req.n_ops = 1;
  req.lower = lower_one;
  req.ctx = &ctx;
  req.use_disk = 1;
  const ttpu_result_plan* results = NULL;
  int n_results = 0;
  int queued = 0;
  s = queue_program(rt, o, p->key, p->n_key, &req, p, e, &queued, &results,
                    &n_results);
  if (s || !queued) return s;
  /* An op whose program reads a data-dependent check (an index out of
   * range), or that stores a large result, runs before its call returns,
   * so that its error (the check's, an out-of-memory) is raised at the op,
   * as with no compile threads. */
  int64_t stored = 0;
  for (int sl = 0; sl < o->n_slots; ++sl)
    if (o->written[sl]) stored += (int64_t)o->bufs[sl]->nbytes;
  int at_op = reads_check(results, n_results) || stored >= kRunAtOpBytes;
  q = rt->queue;
  return at_op ? run_queue(rt, q->n - 1) : NULL;
}

/* ------------------------------------------------- the queue's interface */

int ttpu_queue_compiles_here(const ttpu_runtime* rt) {
  return compile_at_op(rt);
}

int ttpu_queue_length(const ttpu_runtime* rt) {
  return rt->queue ? rt->queue->n : 0;
}

int ttpu_queue_lookup(const ttpu_runtime* rt, const ttpu_buffer* b,
                       int* has_value, ttpu_dtype* dt, int* nd,
                       int64_t* dims, ttpu_pad* pad) {
  const ttpu_compile_queue* q = rt->queue;
  return q && q->n ? queue_lookup(q, b, has_value, dt, nd, dims, pad) : 0;
}

ttpu_status* ttpu_queue_run_all(ttpu_runtime* rt) {
  return run_all(rt);
}

ttpu_status* ttpu_queue_run_for(ttpu_runtime* rt, const ttpu_buffer* b,
                                 int writing) {
  return run_for(rt, b, writing);
}

ttpu_status* ttpu_queue_window(ttpu_runtime* rt,
                                      const ttpu_queued_window* w) {
  ttpu_status* s = run_queue(rt, -1);
  if (s) return s;
  if (!queue_reserve(rt)) return ttpu_status_oom();
  int n = w->n_stores;
  pending* o = pending_alloc(n, w->n_f, w->n_i);
  if (o) o->what = malloc(strlen(w->req->what) + 1);
  if (!o || !o->what) {
    pending_free(rt, o);
    return ttpu_status_oom();
  }
  o->op = -1;
  o->device = w->device;
  o->n_ops = w->req->n_ops;
  strcpy(o->what, w->req->what);
  for (int k = 0; k < n; ++k) {
    w->store(w->store_ctx, k, &o->bufs[k], &o->param[k], &o->written[k],
             &o->w_pad[k]);
    ttpu_buffer_retain(o->bufs[k]);
    o->n_slots = k + 1;
  }
  pending_set_scalars(o, w->n_params, w->f, w->n_f, w->f_param, w->i, w->n_i,
                      w->i_param, w->rng_param);
  ttpu_prog_request req = *w->req;
  const ttpu_result_plan* results = NULL;
  int n_results = 0, queued = 0;
  return queue_program(rt, o, w->key, w->n_key, &req, NULL, w->e, &queued,
                       &results, &n_results);
}

/* plan -> find or compile -> execute (which takes the results), on the
 * calling thread, after everything queued. */
ttpu_status* ttpu_queue_run_op_now(ttpu_runtime* rt, const ttpu_op_call* call,
                                   const ttpu_op_def* def) {
  rt->prog.ops_run++;
  ttpu_status* s = run_queue(rt, rt->queue ? rt->queue->n - 1 : -1);
  if (s) return s;
  ttpu_plan* p = &rt->op_plan;
  ttpu_cache_entry* e = NULL;
  s = ttpu_plan_build(&rt->prog, call, def, NULL, p);
  if (!s) s = find_or_compile(rt, p, &e);
  if (!s) s = execute(rt, p, e);
  return s;
}

/* The plan's arrays, the kept packs, the FIFO (ops left over after a
 * failed flush) and the compile threads. */
void ttpu_queue_destroy(ttpu_runtime* rt) {
  ttpu_compile_queue* q = rt->queue;
  if (q) {
    while (q->n) release_op(rt, q, pop(q));
    while (q->table) {
      inflight* f = q->table;
      q->table = f->next;
      inflight_free(f);
    }
    free(q->ops);
    free(q);
    rt->queue = NULL;
  }
  ttpu_pool_destroy(rt->compile_pool);
  rt->compile_pool = NULL;
  ttpu_pool_destroy(rt->window_pool);
  rt->window_pool = NULL;
  ttpu_plan_free(&rt->op_plan);
  memset(&rt->op_plan, 0, sizeof(rt->op_plan));
  for (int dev = 0; dev < rt->device_count; ++dev)
    for (int k = 0; k < TTPU_PACKS; ++k) {
      ttpu_pack* e = &rt->dev[dev].packs[k];
      if (e->pb) ttpu_pjrt_buffer_destroy(rt->client, e->pb);
      e->pb = NULL;
    }
}
