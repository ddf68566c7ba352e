/* graph.c - the graph executor: the ops between ttpu_runtime_begin_graph
 * and end_graph (torch.compile) are recorded into the fused window whatever
 * the mode, run as one program at the graph's end, and the mode before the
 * graph is restored. That program can be captured and replayed.
 *
 * Recording a graph costs a dispatcher call, a meta pre-run, a plan and a
 * deep copy per op, plus hashing the window key: on a small model that is
 * as much host time as the program's device time. Once a graph ran as one
 * program, its replay (captured at the graph's end) holds the program and the
 * storages it reads and writes; the caller hands in its own storages in
 * the same order and the program runs with no op recorded. Everything the
 * program's signature depends on that the caller cannot see (whether a
 * storage holds a value, the shape a parameter was last written with) is
 * checked here; on any difference nothing runs and the caller records the
 * graph as usual. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "graph.h"
#include "window.h"
#include "../prog/program.h"

int ttpu_graph_replay_store_count(const ttpu_graph_replay* g) {
  return g ? g->n_st : 0;
}

const ttpu_buffer* ttpu_graph_replay_store(const ttpu_graph_replay* g, int k,
                                           int* written) {
  if (!g || k < 0 || k >= g->n_st) return NULL;
  if (written) *written = g->st[k].result;
  return g->st[k].buf0;
}

int ttpu_graph_replay_op_count(const ttpu_graph_replay* g) {
  return g ? g->n_ops : 0;
}

void ttpu_graph_replay_free_locked(ttpu_runtime* rt, ttpu_graph_replay* g) {
  if (!g) return;
  if (g->e) g->e->pins--;
  ttpu_rt_drop_pjrt(rt, g->fbuf);
  ttpu_rt_drop_pjrt(rt, g->ibuf);
  free(g->key);
  free(g->st);
  free(g);
}

void ttpu_graph_replay_free(ttpu_runtime* rt, ttpu_graph_replay* g) {
  if (!g) return;
  if (ttpu_rt_forked(rt)) return; /* the parent's: left alone in a child */
  pthread_mutex_lock(&rt->mu);
  ttpu_graph_replay_free_locked(rt, g);
  pthread_mutex_unlock(&rt->mu);
}

/* Whether bufs can stand for the capture's storages (under rt->mu). */
static int matches(const ttpu_graph_replay* g, ttpu_buffer* const* bufs) {
  for (int k = 0; k < g->n_st; ++k) {
    const ttpu_replay_store* t = &g->st[k];
    const ttpu_buffer* b = bufs[k];
    if (!b || b->device != g->device || b->nbytes != t->nbytes) return 0;
    if ((b->pb != NULL) != t->has_value0) return 0;
    /* Padded storages (prog/bucket.c): the program's pack holds the
     * true sizes of the capture, so they must be the same (sizes in one
     * bucket share the program, and each records its own replay). */
    if (b->pad.mask != t->pad0.mask || (b->pad.mask && b->pad.n != t->pad0.n))
      return 0;
    if (t->param >= 0 &&
        (b->phys_dtype != t->dt0 || b->phys_ndim != t->nd0 ||
         memcmp(b->phys_dims, t->dims0, (size_t)t->nd0 * sizeof(int64_t))))
      return 0;
    /* Distinct storages at capture must be distinct now: one storage in
     * two roles would be read and donated at once. */
    for (int j = 0; j < k; ++j)
      if (bufs[j] == b) return 0;
  }
  return 1;
}

typedef struct {
  const ttpu_graph_replay* g;
  ttpu_buffer* const* bufs;
  const int* kept; /* window store -> replay store */
} replay_ctx;

static ttpu_buffer* replay_buffer(void* ctx, int store) {
  const replay_ctx* c = ctx;
  return c->bufs[c->kept[store]];
}

ttpu_status* ttpu_runtime_graph_replay(ttpu_runtime* rt, ttpu_graph_replay* g,
                                       ttpu_buffer* const* bufs, int* ran) {
  *ran = 0;
  if (!g || (g->n_st && !bufs))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "graph replay: no storages");
  ttpu_status* s = ttpu_rt_check_fork(rt);
  if (s) return s;
  ttpu_pjrt_buffer** args = calloc((size_t)g->n_params + 1, sizeof(*args));
  ttpu_pjrt_buffer** outs = NULL;
  int* kept = malloc(((size_t)g->n_window_stores + 1) * sizeof(*kept));
  ttpu_pad* pads = calloc((size_t)g->n_window_stores + 1, sizeof(*pads));
  if (!args || !kept || !pads) {
    free(args);
    free(kept);
    free(pads);
    return ttpu_status_oom();
  }
  pthread_mutex_lock(&rt->mu);
  /* Ops recorded before (fused mode) run first, as at a graph's start,
   * and so do programs still compiling, this one's included. */
  s = ttpu_exec_flush(rt, TTPU_END_SYNC);
  if (s || !matches(g, bufs)) goto done;
  if (!g->e) {
    /* Captured while compiling: a failed compile left no program, and the
     * caller records the graph (and raises the compile's error). */
    g->e = ttpu_prog_peek(&rt->prog, g->key, g->n_key);
    if (!g->e) goto done;
    g->e->pins++;
  }
  outs = calloc((size_t)g->e->n_results + 1, sizeof(*outs));
  if (!outs) {
    s = ttpu_status_oom();
    goto done;
  }
  for (int k = 0; k < g->n_st; ++k) {
    kept[g->st[k].store] = k;
    pads[g->st[k].store] = g->st[k].pad;
    if (g->st[k].param >= 0) args[g->st[k].param] = bufs[k]->pb;
  }
  if (g->f_param >= 0) args[g->f_param] = g->fbuf;
  if (g->i_param >= 0) args[g->i_param] = g->ibuf;
  if (g->rng_param >= 0) args[g->rng_param] = rt->dev[g->device].rng_state->pb;
  ttpu_pjrt_event* done_event = NULL;
  int64_t began = ttpu_rt_trace_clock(rt);
  s = ttpu_pjrt_execute(rt->client, g->e->exec, g->device, args, g->n_params,
                        outs, g->e->n_results, &done_event);
  if (s) {
    s = ttpu_status_annotate(s, "running a compiled graph of %d ops", g->n_ops);
    goto done;
  }
  *ran = 1;
  ttpu_stats* stats = &rt->dev[g->device].stats;
  g->e->hits++;
  stats->cache_hits++;
  stats->executions++;
  stats->graph_replays++;
  if (rt->trace_what & TTPU_TRACE_LAUNCHES) {
    char what[64];
    snprintf(what, sizeof(what), "graph replay (%d ops)", g->n_ops);
    ttpu_rt_trace_launch(rt, g->device, what, g->n_ops, began, done_event);
  }
  ttpu_rt_add_pending(rt, g->device, g->e, done_event);
  replay_ctx c = {g, bufs, kept};
  s = ttpu_prog_take_results(&rt->prog, g->device, g->e, outs, replay_buffer, &c,
                             pads);
done:
  pthread_mutex_unlock(&rt->mu);
  free(args);
  free(outs);
  free(kept);
  free(pads);
  return s;
}

/* ------------------------------------------------------------ capture */

/* The capture of a graph that ran as one program (graph.h). */
ttpu_graph_replay* ttpu_graph_capture(ttpu_runtime* rt, const ttpu_window* w,
                                      const ttpu_prog* g, ttpu_cache_entry* e,
                                      const int64_t* key, size_t n_key,
                                      ttpu_pjrt_buffer* fbuf,
                                      ttpu_pjrt_buffer* ibuf) {
  const ttpu_prog_store* ps = g->stores;
  int n_st = ttpu_window_store_count(w);
  ttpu_graph_replay* r = calloc(1, sizeof(*r));
  if (r) r->st = calloc((size_t)n_st + 1, sizeof(*r->st));
  if (r && !e) r->key = malloc(n_key * sizeof(int64_t) + 1);
  if (!r || !r->st || (!e && !r->key)) {
    ttpu_rt_drop_pjrt(rt, fbuf);
    ttpu_rt_drop_pjrt(rt, ibuf);
    if (r) free(r->st);
    if (r) free(r->key);
    free(r);
    return NULL;
  }
  r->device = ttpu_window_device(w);
  r->e = e;
  if (e) {
    e->pins++; /* the cache keeps the program while the replay lives */
  } else {
    memcpy(r->key, key, n_key * sizeof(int64_t));
    r->n_key = n_key;
  }
  r->n_params = g->n_params;
  r->f_param = g->f_param;
  r->i_param = g->i_param;
  r->rng_param = g->rng_param;
  r->fbuf = fbuf;
  r->ibuf = ibuf;
  r->n_window_stores = n_st;
  r->n_ops = ttpu_window_op_count(w);
  for (int k = 0; k < n_st; ++k) {
    int has_value0;
    ttpu_buffer* buf = ttpu_window_store(w, k, &has_value0);
    const ttpu_prog_store* x = &ps[k];
    /* A storage someone still holds must be the caller's at a replay too,
     * even one the program neither reads nor writes: whether it held a
     * value decides what the program computes (no value reads as zeros). */
    int alive = atomic_load(&buf->refs) > 1;
    if (x->param < 0 && x->result < 0 && !alive) continue;
    ttpu_replay_store* t = &r->st[r->n_st++];
    t->buf0 = buf;
    t->store = k;
    t->param = x->param;
    t->result = x->result >= 0;
    t->has_value0 = has_value0;
    t->nbytes = buf->nbytes;
    t->dt0 = x->dtype;
    t->nd0 = x->ndim;
    memcpy(t->dims0, x->dims, sizeof(t->dims0));
    ttpu_window_store_pads(w, k, &t->pad0, &t->pad);
  }
  return r;
}

/* ------------------------------------------------- the window's owner */

static void graph_ran(void* user) {
  ttpu_runtime* rt = user;
  rt->graph.runs++;
}

static int graph_wants_capture(void* user) {
  ttpu_runtime* rt = user;
  return rt->graph.capture != NULL;
}

static void* graph_capture(void* user, const ttpu_window* w,
                           const ttpu_prog* g, ttpu_cache_entry* e,
                           const int64_t* key, size_t n_key,
                           ttpu_pjrt_buffer* fbuf, ttpu_pjrt_buffer* ibuf) {
  return ttpu_graph_capture(user, w, g, e, key, n_key, fbuf, ibuf);
}

static void graph_captured(void* user, void* replay, int kept) {
  ttpu_runtime* rt = user;
  if (!kept) {
    ttpu_graph_replay_free_locked(rt, replay);
    return;
  }
  if (rt->graph.capture) *rt->graph.capture = replay;
}

/* ------------------------------------------------------------ executor */

/* Host work inside a graph is work its program does not do. */
static void graph_note_host_work(ttpu_runtime* rt) {
  if (rt->graph.depth) rt->graph.runs++;
}

static void graph_destroy(ttpu_runtime* rt) {
  free(rt->graph.owner);
  rt->graph.owner = NULL;
}

ttpu_status* ttpu_runtime_begin_graph(ttpu_runtime* rt, const char* name) {
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  /* What the current mode holds back ends here (a fused window runs, or
   * joins the programs still compiling); those go on compiling, and the
   * graph records against what they will store. */
  if (rt->exec->flush)
    s = rt->exec->flush(rt, TTPU_END_SYNC);
  ttpu_graph_state* g = &rt->graph;
  if (!g->owner) {
    g->owner = calloc(1, sizeof(*g->owner));
    if (!g->owner) {
      pthread_mutex_unlock(&rt->mu);
      ttpu_status_free(s);
      return ttpu_status_oom();
    }
    *g->owner = (ttpu_window_owner){.user = rt,
                                    .name = g->name,
                                    .ran = graph_ran,
                                    .wants_capture = graph_wants_capture,
                                    .capture = graph_capture,
                                    .captured = graph_captured};
  }
  ttpu_status* own = ttpu_window_set_owner(rt, g->owner);
  if (own) {
    pthread_mutex_unlock(&rt->mu);
    ttpu_status_free(s);
    return own;
  }
  if (!g->depth) {
    g->mode_before = rt->mode;
    g->runs = 0;
  }
  g->depth++;
  snprintf(g->name, sizeof(g->name), "%s", name ? name : "graph");
  /* Reported as fused while the graph records. */
  rt->mode = TTPU_MODE_FUSED;
  rt->exec = &ttpu_executor_graph;
  pthread_mutex_unlock(&rt->mu);
  return s;
}

ttpu_status* ttpu_runtime_end_graph(ttpu_runtime* rt) {
  return ttpu_runtime_end_graph_capture(rt, NULL);
}

ttpu_status* ttpu_runtime_end_graph_capture(ttpu_runtime* rt,
                                            ttpu_graph_replay** out) {
  if (out) *out = NULL;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  ttpu_graph_state* g = &rt->graph;
  if (g->depth) {
    /* Only a whole outermost graph that is about to run as its first and
     * only program can be replayed. */
    if (out && g->depth == 1 && g->runs == 0 && rt->window &&
        ttpu_window_op_count(rt->window))
      g->capture = out;
    s = ttpu_window_flush(rt, TTPU_END_GRAPH);
    g->capture = NULL;
    if (--g->depth == 0) {
      ttpu_status_free(ttpu_window_set_owner(rt, NULL)); /* cannot fail */
      rt->mode = g->mode_before;
      rt->exec = ttpu_executor_for_mode(g->mode_before);
    }
  }
  pthread_mutex_unlock(&rt->mu);
  return s;
}

const ttpu_executor_ops ttpu_executor_graph = {
    .name = "graph",
    .submit = ttpu_window_record,
    .flush = ttpu_window_flush,
    .touch = ttpu_window_touch,
    .note_host_work = graph_note_host_work,
    .destroy = graph_destroy,
};
