/* window.c - the recorded window (exec/window.h): ops are recorded instead
 * of run, and a run of them (a window) becomes one program at a boundary.
 * Fused mode records every op into it (exec/fused.c); a graph records the
 * ops between its begin and end, as its owner (exec/graph.c).
 *
 * Recording an op deep-copies its call and plans it against the window's
 * view of each storage (its shape and whether it holds a value after the
 * ops recorded before it). Nothing is lowered until the window ends, and
 * not even then when the window's key is in the cache: the key is every
 * recorded op's signature, how their storages connect, and which written
 * storages are still alive at the end. Storages that died inside the
 * window (temporaries) are never materialized: that, plus XLA fusing
 * across ops, is what fused mode buys.
 *
 * Boundaries: any engine call that needs a storage's data or waits
 * (download, upload, copy, synchronize, rng state), an op on another
 * device, the op limit, and the repeat detector: after a boundary the first
 * REPEAT_K ops' signatures are the step's prefix; when the same REPEAT_K
 * signatures recur, the window is cut just before them, so a training loop
 * without host reads still runs the same windows every step (and its
 * op-limit cuts fall at the same offsets in each step). An op over padded
 * storages (prog/bucket.c) also matches the same op over tensors of the
 * same dtypes and ranks (step_hash), so a step over a batch of another
 * length still matches the prefix of the first, exact step; ops over
 * exact storages match by signature only, so layers of other widths in a
 * fixed-shape step are not taken for its beginning.
 */
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "window.h"
#include "queue.h"
#include "../prog/program.h"

#define REPEAT_K 8
/* Repeated layers (run_window): the fewest ops a copy holds, the fewest
 * copies, the most cuts in one window, and how many windows' cuts are
 * remembered. */
#define REPEAT_MIN_OPS 16
#define REPEAT_MIN_COPIES 3
#define REPEAT_MAX_CUTS 256
#define REPEAT_MEMO 8

struct repeat_memo {
  uint64_t seq; /* the window's op sequence */
  int n;        /* its length; 0: unused */
  int n_cut;
  int cut[REPEAT_MAX_CUTS];
  /* the sequence of the ops before each cut (their hashes mixed from
   * SEQ_SEED), by which a later window is cut as it is recorded */
  uint64_t at_cut[REPEAT_MAX_CUTS];
};
#define SEQ_SEED 0x7265706561747321ull
/* Bytes a window must have written before an autograd pass boundary ends
 * it: glibc's largest mmap threshold, above which every allocation of a
 * program's temporaries is a fresh mapping. */
#define PASS_CUT_BYTES ((size_t)32 << 20)
#define DEFAULT_LIMIT 1000
#define WINDOW_TAG (-0x7454505557494e44ll) /* marks a window key */
/* The op number under which true sizes of bucketed ops share (append). */
#define DYN_SIZE_OP (-1)

typedef struct {
  ttpu_buffer* buf;     /* retained by the window */
  int param;            /* read before written: its value is a parameter */
  int written;
  int has_value;        /* holds a value now */
  int has_value0;       /* held one at the window's start */
  ttpu_dtype dt;        /* shape now */
  int nd;
  int64_t dims[TTPU_MAX_DIMS];
  ttpu_pad pad;         /* padding now (prog/bucket.c) */
  ttpu_dtype dt0;       /* shape at the window's start (the parameter's) */
  int nd0;
  int64_t dims0[TTPU_MAX_DIMS];
  ttpu_pad pad0;
} wstore;

typedef struct {
  ttpu_op_call* call;   /* deep copy, all of it inside one allocation
                           (plans point at it: it must not move) */
  ttpu_plan plan;
  int* store;           /* per plan slot */
  int* f_map;           /* per float scalar of the plan: its index in w->f */
  int* i_map;           /* per int scalar: its index in w->i */
  int cap_store, cap_f_map, cap_i_map;
  uint64_t hash;        /* the op's signature, for the repeat detector */
  size_t key_at;        /* where its words start in the window key */
} wrec;

struct ttpu_window {
  const ttpu_runtime* rt;
  /* Who records into it other than fused mode (a graph), or NULL. */
  const ttpu_window_owner* owner;
  int device;
  int autograd_task; /* the autograd pass its calls came from */
  uint64_t serial;   /* its number (ttpu_store_view) */
  size_t written_bytes; /* storages its ops write, counted once each */
  int limit;
  wrec* recs;
  int n_recs, cap_recs;
  wstore* st;
  int n_st, cap_st;
  /* buffer -> store index + 1, open addressing */
  ttpu_buffer** map_key;
  int* map_val;
  int map_cap;
  double* f;
  int n_f, cap_f;
  /* The scalars are shared: one entry of f per op and value (f_op:
   * the op of each entry; fh: entry index + 1, open addressing), so that
   * the same op in every layer reads the same scalar and the compiler can
   * make one kernel of their identical computations. The sharing is part
   * of the window's key. */
  int* f_op;
  int cap_f_op;
  int* fh;
  int fh_cap;
  int64_t* i;           /* the int scalars, shared the same way */
  int n_i, cap_i;
  int* i_op;
  int cap_i_op;
  int* ih;
  int ih_cap;
  int uses_rng;
  int64_t* key;
  size_t n_key, cap_key;
  /* repeat detector */
  uint64_t prefix[REPEAT_K];
  uint64_t recent[REPEAT_K]; /* ring */
  uint64_t prefix_free[REPEAT_K]; /* their step_hash */
  uint64_t recent_free[REPEAT_K];
  unsigned char recent_padded[REPEAT_K]; /* the op touched padding */
  int64_t since_anchor;
  int64_t seen;
  /* repeated layers: the cuts of the last windows */
  struct repeat_memo memo[REPEAT_MEMO];
  int memo_next;
  /* The window being recorded as the memo's cuts say (follow_cut): the
   * ops recorded since it began, parts already run included, and their
   * sequence; per memo, its next cut. */
  int lpos;
  uint64_t lseq;
  uint64_t* lhash; /* the hashes of its lpos ops */
  int cap_lhash;
  size_t ran_bytes; /* written_bytes of its parts that ran */
  int memo_at[REPEAT_MEMO];
  /* the previous window's op hashes, to say what changed on a recompile */
  uint64_t* last_hash;
  int* last_op;
  int n_last;
  ttpu_cache* validated; /* op signatures known to lower */
};

/* ------------------------------------------------------------ helpers */

static int grow(void** p, int* cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void* q = realloc(*p, (size_t)c * elem);
  if (!q) return -1;
  *p = q;
  *cap = c;
  return 0;
}

static int key_add(ttpu_window* w, int64_t v) {
  if (w->n_key == w->cap_key) {
    size_t cap = w->cap_key ? w->cap_key * 2 : 1024;
    int64_t* k = realloc(w->key, cap * sizeof(*k));
    if (!k) return -1;
    w->key = k;
    w->cap_key = cap;
  }
  w->key[w->n_key++] = v;
  return 0;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static size_t ptr_hash(const void* p, int cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)(x & (uint64_t)(cap - 1));
}

static int map_find(const ttpu_window* w, const ttpu_buffer* b) {
  if (!w->map_cap) return -1;
  for (size_t i = ptr_hash(b, w->map_cap);; i = (i + 1) & (size_t)(w->map_cap - 1)) {
    if (!w->map_key[i]) return -1;
    if (w->map_key[i] == b) return w->map_val[i];
  }
}

static int map_put(ttpu_window* w, ttpu_buffer* b, int v) {
  if ((w->n_st + 1) * 2 > w->map_cap) {
    int cap = w->map_cap ? w->map_cap * 2 : 256;
    ttpu_buffer** k = calloc((size_t)cap, sizeof(*k));
    int* val = calloc((size_t)cap, sizeof(*val));
    if (!k || !val) {
      free(k);
      free(val);
      return -1;
    }
    for (int j = 0; j < w->map_cap; ++j) {
      if (!w->map_key[j]) continue;
      size_t i = ptr_hash(w->map_key[j], cap);
      while (k[i]) i = (i + 1) & (size_t)(cap - 1);
      k[i] = w->map_key[j];
      val[i] = w->map_val[j];
    }
    free(w->map_key);
    free(w->map_val);
    w->map_key = k;
    w->map_val = val;
    w->map_cap = cap;
  }
  size_t i = ptr_hash(b, w->map_cap);
  while (w->map_key[i]) i = (i + 1) & (size_t)(w->map_cap - 1);
  w->map_key[i] = b;
  w->map_val[i] = v;
  return 0;
}

/* The window's view of storage b (a ttpu_store_view's lookup): as the
 * window's ops leave it, else as the programs queued before the window
 * (strict mode's FIFO) will. */
static int window_lookup(const void* ctx, const ttpu_buffer* b, int* has_value,
                         ttpu_dtype* dt, int* nd, int64_t* dims,
                         ttpu_pad* pad) {
  const ttpu_window* w = ctx;
  int k = map_find(w, b);
  if (k < 0) return ttpu_queue_lookup(w->rt, b, has_value, dt, nd, dims, pad);
  const wstore* s = &w->st[k];
  *has_value = s->has_value;
  *dt = s->dt;
  *nd = s->nd;
  memcpy(dims, s->dims, sizeof(s->dims));
  *pad = s->pad;
  return 1;
}

/* ------------------------------------------------------------ deep copy */

static size_t tensors_bytes(const ttpu_tensor* t, int n) {
  size_t b = (size_t)n * sizeof(ttpu_tensor);
  for (int k = 0; k < n; ++k) b += 2 * (size_t)t[k].ndim * sizeof(int64_t);
  return b;
}

static char* copy_tensors(char* m, const ttpu_tensor* src, int n,
                          const ttpu_tensor** out) {
  ttpu_tensor* t = (ttpu_tensor*)m;
  m += (size_t)n * sizeof(ttpu_tensor);
  for (int k = 0; k < n; ++k) {
    t[k] = src[k];
    size_t sz = (size_t)src[k].ndim * sizeof(int64_t);
    if (sz) {
      memcpy(m, src[k].sizes, sz);
      t[k].sizes = (const int64_t*)m;
      m += sz;
      memcpy(m, src[k].strides, sz);
      t[k].strides = (const int64_t*)m;
      m += sz;
    }
  }
  *out = t;
  return m;
}

/* One allocation holding the call and everything it points at (int64 and
 * double arrays first, so every piece stays aligned). */
static ttpu_status* copy_call(const ttpu_op_call* c, ttpu_op_call** outp) {
  size_t bytes = sizeof(ttpu_op_call) + (size_t)c->n_args * sizeof(ttpu_arg) +
                 tensors_bytes(c->tensors, c->n_tensors) +
                 tensors_bytes(c->outputs, c->n_outputs);
  for (int a = 0; a < c->n_args; ++a) {
    const ttpu_arg* g = &c->args[a];
    if (g->kind == TTPU_ARG_INTS && g->n) bytes += (size_t)g->n * 8;
    if ((g->kind == TTPU_ARG_FLOATS || g->kind == TTPU_ARG_SCALARS) && g->n)
      bytes += (size_t)g->n * 8;
    if (g->kind == TTPU_ARG_STR && g->str) bytes += (strlen(g->str) + 8) & ~(size_t)7;
  }
  char* m = malloc(bytes + 8);
  if (!m) return ttpu_status_oom();
  ttpu_op_call* out = (ttpu_op_call*)m;
  *outp = out;
  m += (sizeof(ttpu_op_call) + 7) & ~(size_t)7;
  *out = *c;
  ttpu_arg* args = (ttpu_arg*)m;
  m += (size_t)c->n_args * sizeof(ttpu_arg);
  for (int a = 0; a < c->n_args; ++a) {
    args[a] = c->args[a];
    ttpu_arg* g = &args[a];
    if (g->kind == TTPU_ARG_INTS && g->n) {
      memcpy(m, g->ints, (size_t)g->n * 8);
      g->ints = (const int64_t*)m;
      m += (size_t)g->n * 8;
    }
    if ((g->kind == TTPU_ARG_FLOATS || g->kind == TTPU_ARG_SCALARS) && g->n) {
      memcpy(m, g->floats, (size_t)g->n * 8);
      g->floats = (const double*)m;
      m += (size_t)g->n * 8;
    }
  }
  out->args = args;
  m = copy_tensors(m, c->tensors, c->n_tensors, &out->tensors);
  m = copy_tensors(m, c->outputs, c->n_outputs, &out->outputs);
  for (int a = 0; a < c->n_args; ++a) {
    ttpu_arg* g = &args[a];
    if (g->kind == TTPU_ARG_STR && g->str) {
      size_t n = strlen(g->str) + 1;
      memcpy(m, g->str, n);
      g->str = m;
      m += (n + 7) & ~(size_t)7;
    }
  }
  return NULL;
}

/* ------------------------------------------------------------ state */

static ttpu_window* window_of(ttpu_runtime* rt) {
  if (!rt->window) {
    rt->window = calloc(1, sizeof(ttpu_window));
    if (!rt->window) return NULL;
    rt->window->rt = rt;
    int limit = rt->opts.fused_max_ops;
    rt->window->limit = limit > 0 ? limit : DEFAULT_LIMIT;
    rt->window->lseq = SEQ_SEED;
  }
  return rt->window;
}

void ttpu_runtime_set_window_limit(ttpu_runtime* rt, int max_ops) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  ttpu_window* w = window_of(rt);
  if (w) w->limit = max_ops > 0 ? max_ops : DEFAULT_LIMIT;
  pthread_mutex_unlock(&rt->mu);
}

static void rec_free(wrec* r) {
  ttpu_plan_free(&r->plan);
  free(r->store);
  free(r->f_map);
  free(r->i_map);
  free(r->call);
  memset(r, 0, sizeof(*r));
}

/* Empties the window: recs emptied (their arrays kept for the next
 * window's ops: a step records hundreds of ops, each with a dozen arrays),
 * storages released. */
static void window_clear(ttpu_window* w) {
  for (int k = 0; k < w->n_recs; ++k) {
    free(w->recs[k].call);
    w->recs[k].call = NULL;
  }
  w->n_recs = 0;
  for (int k = 0; k < w->n_st; ++k) ttpu_rt_release_locked(w->st[k].buf);
  w->n_st = 0;
  if (w->map_cap) {
    memset(w->map_key, 0, (size_t)w->map_cap * sizeof(*w->map_key));
  }
  w->n_f = w->n_i = 0;
  if (w->fh_cap) memset(w->fh, 0, (size_t)w->fh_cap * sizeof(*w->fh));
  if (w->ih_cap) memset(w->ih, 0, (size_t)w->ih_cap * sizeof(*w->ih));
  w->uses_rng = 0;
  w->n_key = 0;
  w->written_bytes = 0;
}

void ttpu_window_destroy(ttpu_runtime* rt) {
  ttpu_window* w = rt->window;
  if (!w) return;
  window_clear(w);
  for (int k = 0; k < w->cap_recs; ++k) rec_free(&w->recs[k]);
  free(w->recs);
  free(w->st);
  free(w->map_key);
  free(w->map_val);
  free(w->f);
  free(w->f_op);
  free(w->fh);
  free(w->i);
  free(w->i_op);
  free(w->ih);
  free(w->key);
  free(w->last_hash);
  free(w->last_op);
  free(w->lhash);
  ttpu_cache_destroy(w->validated, rt->client);
  free(w);
  rt->window = NULL;
}

/* ------------------------------------------------------------ record */

static int store_of(ttpu_window* w, ttpu_buffer* b) {
  int k = map_find(w, b);
  if (k >= 0) return k;
  if (grow((void**)&w->st, &w->cap_st, w->n_st + 1, sizeof(wstore))) return -1;
  if (map_put(w, b, w->n_st)) return -1;
  wstore* s = &w->st[w->n_st];
  memset(s, 0, sizeof(*s));
  ttpu_buffer_retain(b);
  s->buf = b;
  s->param = -1;
  if (!ttpu_queue_lookup(w->rt, b, &s->has_value, &s->dt, &s->nd, s->dims,
                         &s->pad)) {
    s->has_value = b->pb != NULL;
    s->dt = b->phys_dtype;
    s->nd = b->phys_ndim;
    memcpy(s->dims, b->phys_dims, sizeof(s->dims));
    s->pad = b->pad;
  }
  if (!s->has_value) s->pad.mask = 0;
  s->pad0 = s->pad;
  s->has_value0 = s->has_value;
  s->dt0 = s->dt;
  s->nd0 = s->nd;
  memcpy(s->dims0, s->dims, sizeof(s->dims0));
  return w->n_st++;
}

/* An op signature seen for the first time is lowered on its own once, so
 * that what cannot be lowered (an unsupported case: NotImplementedError,
 * and the CPU fallback when enabled) fails at its op, as in strict mode,
 * not later inside a window. Signatures strict mode compiled are known
 * good. */
/* Signatures remembered as lowered (keys only: forgetting one costs one
 * more lowering, no compile). */
#define VALIDATED_CAP 8192

static ttpu_status* validate(ttpu_runtime* rt, ttpu_window* w,
                             const ttpu_plan* p) {
  if (ttpu_cache_find(rt->prog.cache, p->key, p->n_key)) return NULL;
  if (!w->validated) {
    ttpu_status* s = ttpu_cache_create(VALIDATED_CAP, NULL, NULL,
                                       &w->validated);
    if (s) return s;
  }
  if (ttpu_cache_find(w->validated, p->key, p->n_key)) return NULL;
  char* text = NULL;
  size_t len = 0;
  ttpu_cache_entry e = {0};
  ttpu_status* s = ttpu_lower_program(p, &text, &len, &e.results,
                                      &e.n_results);
  free(text);
  free(e.results);
  if (s) return s;
  ttpu_cache_entry* out;
  memset(&e, 0, sizeof(e)); /* no executable: only the key matters */
  return ttpu_cache_insert(w->validated, p->key, p->n_key, &e, &out);
}

/* One of the window's scalar packs: values of 8 bytes (double or int64),
 * the op of each, and the sharing table. */
typedef struct {
  void** vals;
  int* n;
  int* cap;
  int** ops;
  int* cap_ops;
  int** table;
  int* table_cap;
} wpack;

static size_t scalar_hash(int op, const void* v, int cap) {
  uint64_t bits;
  memcpy(&bits, v, sizeof(bits));
  return (size_t)(mix(mix(0x9e3779b9ull, (uint64_t)op), bits) & (uint64_t)(cap - 1));
}

/* The index in the pack of scalar v (8 bytes) of op: an entry of the same
 * op and bits if the window has one, else a new one; -1 on oom. */
static int share_scalar(const wpack* k, int op, const void* v) {
  char* vals = *k->vals;
  if ((*k->n + 1) * 2 > *k->table_cap) {
    int cap = *k->table_cap ? *k->table_cap * 2 : 256;
    int* t = calloc((size_t)cap, sizeof(*t));
    if (!t) return -1;
    for (int e = 0; e < *k->n; ++e) {
      size_t j = scalar_hash((*k->ops)[e], vals + 8 * (size_t)e, cap);
      while (t[j]) j = (j + 1) & (size_t)(cap - 1);
      t[j] = e + 1;
    }
    free(*k->table);
    *k->table = t;
    *k->table_cap = cap;
  }
  size_t j = scalar_hash(op, v, *k->table_cap);
  for (; (*k->table)[j]; j = (j + 1) & (size_t)(*k->table_cap - 1)) {
    int e = (*k->table)[j] - 1;
    if ((*k->ops)[e] == op && !memcmp(vals + 8 * (size_t)e, v, 8)) return e;
  }
  if (grow(k->vals, k->cap, *k->n + 1, 8) ||
      grow((void**)k->ops, k->cap_ops, *k->n + 1, sizeof(int)))
    return -1;
  vals = *k->vals;
  memcpy(vals + 8 * (size_t)*k->n, v, 8);
  (*k->ops)[*k->n] = op;
  (*k->table)[j] = *k->n + 1;
  return (*k->n)++;
}

/* The bytes a store's layout holds: a padded storage counts at its
 * bucket's size, so that where a window ends (PASS_CUT_BYTES) depends on
 * the buckets, not on the true sizes inside them. */
static size_t phys_bytes(const wstore* x) {
  size_t n = ttpu_dtype_size(x->dt);
  for (int d = 0; d < x->nd; ++d) n *= (size_t)x->dims[d];
  return n;
}

/* Adds the call as the window's next op (the window is on its device). */
static ttpu_status* append(ttpu_runtime* rt, ttpu_window* w,
                           const ttpu_op_call* call, const ttpu_op_def* def) {
  int had = w->cap_recs;
  if (grow((void**)&w->recs, &w->cap_recs, w->n_recs + 1, sizeof(wrec)))
    return ttpu_status_oom();
  if (w->cap_recs > had)
    memset(&w->recs[had], 0, (size_t)(w->cap_recs - had) * sizeof(wrec));
  wrec* r = &w->recs[w->n_recs]; /* its arrays are an earlier op's, kept */
  r->hash = 0;
  r->key_at = 0;
  ttpu_status* s = copy_call(call, &r->call);
  if (s) return s;
  if (w->n_recs == 0) w->serial = ttpu_bucket_window_begins(&rt->prog);
  ttpu_store_view view = {window_lookup, w, 1, w->serial};
  s = ttpu_plan_build(&rt->prog, r->call, def, &view, &r->plan);
  if (!s) {
    if (grow((void**)&r->store, &r->cap_store, r->plan.n_slots + 1, sizeof(int)) ||
        grow((void**)&r->f_map, &r->cap_f_map, r->plan.n_f + 1, sizeof(int)) ||
        grow((void**)&r->i_map, &r->cap_i_map, r->plan.n_i + 1, sizeof(int)))
      s = ttpu_status_oom();
  }
  if (!s) {
    for (int sl = 0; sl < r->plan.n_slots; ++sl) {
      r->store[sl] = store_of(w, r->plan.slots[sl].buf);
      if (r->store[sl] < 0) {
        s = ttpu_status_oom();
        break;
      }
    }
  }
  if (s) {
    rec_free(r);
    return s;
  }
  const ttpu_plan* p = &r->plan;
  s = validate(rt, w, p);
  if (s) {
    rec_free(r);
    return s;
  }
  /* The op's effect on the window's view of its storages. */
  for (int sl = 0; sl < p->n_slots; ++sl) {
    wstore* x = &w->st[r->store[sl]];
    if (p->slots[sl].has_param && !x->written) x->param = 1;
    if (!p->slots[sl].written) continue;
    ttpu_lower_written_phys(p, sl, &x->dt, &x->nd, x->dims, &x->pad);
    if (!x->written) w->written_bytes += phys_bytes(x);
    x->written = 1;
    x->has_value = 1;
  }
  const wpack fk = {(void**)&w->f, &w->n_f, &w->cap_f, &w->f_op, &w->cap_f_op,
                    &w->fh, &w->fh_cap};
  const wpack ik = {(void**)&w->i, &w->n_i, &w->cap_i, &w->i_op, &w->cap_i_op,
                    &w->ih, &w->ih_cap};
  int shared = 0;
  for (int j = 0; j < p->n_f && shared >= 0; ++j)
    shared = r->f_map[j] = share_scalar(&fk, r->call->op, &p->f[j]);
  /* A bucketed op's true size (and a pad's output size) is shared with
   * every other op's true size of the same value, and never with another
   * kind of scalar: which entries share must not depend on the sizes, or
   * the window's key would change with them (a length whose value
   * happened to equal an offset would compile the window again). */
  for (int j = 0; j < p->n_i && shared >= 0; ++j)
    shared = r->i_map[j] = share_scalar(
        &ik, j == p->dyn_at || j == p->dyn_out_at ? DYN_SIZE_OP : r->call->op, &p->i[j]);
  if (shared < 0) {
    rec_free(r);
    return ttpu_status_oom();
  }
  if (def->flags & TTPU_OP_RANDOM) w->uses_rng = 1;
  /* Key: the op's signature, then which window storage each slot is. */
  int rc = w->n_key ? 0 : key_add(w, WINDOW_TAG);
  r->key_at = w->n_key;
  rc |= key_add(w, (int64_t)p->n_key);
  /* The op's own signature hash: the same op in the next step hashes the
   * same wherever its window began. */
  uint64_t h = 0x51ed270b27ull;
  for (size_t k = 0; k < p->n_key; ++k) {
    rc |= key_add(w, p->key[k]);
    h = mix(h, (uint64_t)p->key[k]);
  }
  for (int sl = 0; sl < p->n_slots; ++sl) rc |= key_add(w, r->store[sl]);
  for (int j = 0; j < p->n_f; ++j) rc |= key_add(w, r->f_map[j]);
  for (int j = 0; j < p->n_i; ++j) rc |= key_add(w, r->i_map[j]);
  r->hash = h;
  w->n_recs++;
  if (rc) return ttpu_status_oom();
  return NULL;
}

/* ------------------------------------------------------------ flush */

typedef struct {
  ttpu_window* w;
  int n_recs;
  ttpu_prog_store* stores;
  ttpu_prog_op* ops;
  ttpu_prog g;
} flush_ctx;

static ttpu_status* lower_window(void* ctx, char** text, size_t* len,
                                 ttpu_result_plan** results, int* n_results) {
  flush_ctx* c = ctx;
  return ttpu_lower_prog(&c->g, text, len, results, n_results);
}

/* What changed against the previous window, for the compile log. */
static void window_reason(ttpu_window* w, int n_recs, char* buf, size_t n) {
  const char* first = ttpu_op_name(w->recs[0].call->op);
  if (!w->last_hash) {
    snprintf(buf, n, "fused window of %d ops from %s: first compile", n_recs,
             first);
    return;
  }
  int k = 0;
  while (k < n_recs && k < w->n_last && w->recs[k].hash == w->last_hash[k]) ++k;
  if (k < n_recs && k < w->n_last)
    snprintf(buf, n,
             "fused window of %d ops from %s: op %d (%s) differs from the "
             "previous window's op %d (%s): new shapes, dtypes or op order",
             n_recs, first, k + 1, ttpu_op_name(w->recs[k].call->op), k + 1,
             ttpu_op_name(w->last_op[k]));
  else if (n_recs != w->n_last)
    snprintf(buf, n,
             "fused window of %d ops from %s: the previous window ended after "
             "%d ops", n_recs, first, w->n_last);
  else
    snprintf(buf, n,
             "fused window of %d ops from %s: other storages are alive at its "
             "end", n_recs, first);
}

static void remember_window(ttpu_window* w, int n_recs) {
  uint64_t* h = malloc((size_t)n_recs * sizeof(*h) + 8);
  int* op = malloc((size_t)n_recs * sizeof(*op) + 8);
  if (!h || !op) {
    free(h);
    free(op);
    return;
  }
  for (int i = 0; i < n_recs; ++i) {
    h[i] = w->recs[i].hash;
    op[i] = w->recs[i].call->op;
  }
  free(w->last_hash);
  free(w->last_op);
  w->last_hash = h;
  w->last_op = op;
  w->n_last = n_recs;
}

static ttpu_buffer* store_buffer(void* window, int store) {
  return ((ttpu_window*)window)->st[store].buf;
}

/* The label of a window's program: "graph NAME (N ops)" or "fused window
 * (N ops)". */
static void window_what(const ttpu_window* w, int n_recs, char* what,
                        size_t n_what) {
  if (w->owner)
    snprintf(what, n_what, "graph %s (%d ops)", w->owner->name, n_recs);
  else
    snprintf(what, n_what, "fused window (%d ops)", n_recs);
}

/* The label and compile-log reason of window w's program, before it
 * compiles. */
static void window_label(ttpu_runtime* rt, ttpu_window* w, int n_recs,
                         char* what, size_t n_what, char* reason,
                         size_t n_reason) {
  window_what(w, n_recs, what, n_what);
  if (w->owner)
    snprintf(reason, n_reason, "%s: new graph or new input shapes", what);
  else
    window_reason(w, n_recs, reason, n_reason);
  if (ttpu_prog_note_reload(&rt->prog, w->key, w->n_key, what))
    snprintf(reason, n_reason, "%s", rt->prog.last_reason);
  else
    snprintf(rt->prog.last_reason, sizeof(rt->prog.last_reason), "%s", reason);
}

/* s annotated with window w's first and last ops. */
static ttpu_status* window_error(ttpu_status* s, const ttpu_window* w) {
  return ttpu_status_annotate(s, "fused window of %d ops (%s ... %s)",
                              w->n_recs, ttpu_op_name(w->recs[0].call->op),
                              ttpu_op_name(w->recs[w->n_recs - 1].call->op));
}

static void count_window(ttpu_runtime* rt, int dev, int n_recs,
                         ttpu_window_end why) {
  ttpu_stats* stats = &rt->dev[dev].stats;
  stats->windows++;
  stats->window_ops += n_recs;
  if (n_recs > stats->window_max_ops) stats->window_max_ops = n_recs;
  stats->window_ends[why]++;
}

/* The window's scalar packs on its device, for the parameters program g
 * has for them (*fbuf, *ibuf stay NULL where it has none); on failure
 * neither is left allocated. */
static ttpu_status* upload_packs(ttpu_runtime* rt, const ttpu_window* w,
                                 const ttpu_prog* g, ttpu_pjrt_buffer** fbuf,
                                 ttpu_pjrt_buffer** ibuf) {
  int64_t nf = w->n_f, ni = w->n_i;
  ttpu_status* s = NULL;
  if (g->f_param >= 0)
    s = ttpu_pjrt_buffer_from_host(rt->client, w->device, w->f, TTPU_F64, &nf,
                                   1, fbuf);
  if (!s && g->i_param >= 0)
    s = ttpu_pjrt_buffer_from_host(rt->client, w->device, w->i, TTPU_I64, &ni,
                                   1, ibuf);
  if (s && *fbuf) {
    ttpu_pjrt_buffer_destroy(rt->client, *fbuf);
    *fbuf = NULL;
  }
  return s;
}

/* Storage k of a flushed window, for the FIFO (ttpu_queued_window). */
static void window_store(const void* ctx, int k, ttpu_buffer** buf,
                         int* param, int* written, ttpu_pad* pad) {
  const flush_ctx* c = ctx;
  *buf = c->w->st[k].buf;
  *param = c->stores[k].param;
  *written = c->w->st[k].written;
  *pad = c->w->st[k].pad;
}

/* Window w's program joins strict mode's FIFO (see executor.h): it runs
 * when its compile is done, after what is queued before it; e: the
 * memory cache's program or NULL. A graph asked for is captured first
 * (its program bound at the first replay). The window is emptied by the
 * caller. */
static ttpu_status* queue_window(ttpu_runtime* rt, ttpu_window* w,
                                 flush_ctx* c, ttpu_cache_entry* e,
                                 ttpu_window_end why) {
  int n_recs = w->n_recs, dev = w->device;
  char what[96], reason[512];
  reason[0] = 0;
  if (e)
    window_what(w, n_recs, what, sizeof(what));
  else
    window_label(rt, w, n_recs, what, sizeof(what), reason, sizeof(reason));
  ttpu_status* s = NULL;
  const ttpu_window_owner* own = w->owner;
  void* replay = NULL;
  int capture = own && own->wants_capture(own->user);
  if (capture) {
    /* Before the FIFO holds the storages: the capture reads who else
     * holds them. Its packs are uploaded for it alone. */
    ttpu_pjrt_buffer *fbuf = NULL, *ibuf = NULL;
    s = upload_packs(rt, w, &c->g, &fbuf, &ibuf);
    if (s) return window_error(s, w);
    replay = own->capture(own->user, w, &c->g, e, w->key, w->n_key, fbuf, ibuf);
  }
  ttpu_prog_request req = {.what = what,
                           .n_ops = n_recs,
                           .reason = reason,
                           .lower = lower_window,
                           .ctx = c,
                           .use_disk = 1};
  ttpu_queued_window q = {.req = &req,
                          .device = dev,
                          .key = w->key,
                          .n_key = w->n_key,
                          .e = e,
                          .n_stores = w->n_st,
                          .store = window_store,
                          .store_ctx = c,
                          .n_params = c->g.n_params,
                          .f = w->f,
                          .n_f = w->n_f,
                          .f_param = c->g.f_param,
                          .i = w->i,
                          .n_i = w->n_i,
                          .i_param = c->g.i_param,
                          .rng_param = c->g.rng_param};
  s = ttpu_queue_window(rt, &q);
  if (capture) own->captured(own->user, replay, s == NULL);
  if (s) return window_error(s, w);
  remember_window(w, n_recs);
  count_window(rt, dev, n_recs, why);
  if (own) own->ran(own->user);
  return NULL;
}

/* Runs the window's ops as one program and empties it. Written storages
 * someone else still holds become results; the rest were temporaries. */
static ttpu_status* run_one(ttpu_runtime* rt, ttpu_window* w,
                            ttpu_window_end why) {
  if (w->owner && w->owner->never_run)
    return ttpu_status_make(
        TTPU_UNIMPLEMENTED,
        "inside a loop body being traced (torchtpu.scan, scan_layers), "
        "nothing may wait for the device: a host read (.item(), .cpu(), "
        "printing), synchronize or an op on another device is not "
        "supported there");
  int dev = w->device;
  int n_recs = w->n_recs;
  ttpu_stats* stats = &rt->dev[dev].stats;
  flush_ctx c;
  memset(&c, 0, sizeof(c));
  c.w = w;
  c.n_recs = n_recs;
  c.stores = calloc((size_t)w->n_st + 1, sizeof(*c.stores));
  c.ops = calloc((size_t)n_recs + 1, sizeof(*c.ops));
  ttpu_pjrt_buffer** args = calloc((size_t)w->n_st + 4, sizeof(*args));
  ttpu_pjrt_buffer** outs = NULL;
  ttpu_pjrt_buffer *fbuf = NULL, *ibuf = NULL;
  ttpu_status* s = NULL;
  if (!c.stores || !c.ops || !args) {
    s = ttpu_status_oom();
    goto done;
  }
  /* Parameters in store order, then the packs and the rng state; results
   * for written storages someone still holds, then the rng state. */
  int n_params = 0, n_results = 0;
  int rc = key_add(w, -1 - (int64_t)w->n_st); /* then who is alive */
  for (int k = 0; k < w->n_st; ++k) {
    const wstore* x = &w->st[k];
    ttpu_prog_store* ps = &c.stores[k];
    ps->nbytes = x->buf->nbytes;
    if (x->pad0.mask) { /* a padded version's bytes */
      ps->nbytes = ttpu_dtype_size(x->dt0);
      for (int d = 0; d < x->nd0; ++d) ps->nbytes *= (size_t)x->dims0[d];
    }
    ps->param = x->param > 0 ? n_params++ : -1;
    int alive = atomic_load(&x->buf->refs) > 1;
    ps->result = x->written && alive ? n_results++ : -1;
    ps->dtype = x->dt0;
    ps->ndim = x->nd0;
    memcpy(ps->dims, x->dims0, sizeof(ps->dims));
    if (ps->param >= 0) args[ps->param] = x->buf->pb;
    rc |= key_add(w, ps->result >= 0);
  }
  c.g.f_param = w->n_f ? n_params++ : -1;
  c.g.i_param = w->n_i ? n_params++ : -1;
  c.g.rng_param = w->uses_rng ? n_params++ : -1;
  c.g.rng_result = w->uses_rng ? n_results++ : -1;
  c.g.n_f = w->n_f;
  c.g.n_i = w->n_i;
  c.g.n_params = n_params;
  c.g.n_results = n_results;
  c.g.n_stores = w->n_st;
  c.g.stores = c.stores;
  c.g.n_ops = n_recs;
  c.g.ops = c.ops;
  for (int i = 0; i < n_recs; ++i) {
    c.ops[i].plan = &w->recs[i].plan;
    c.ops[i].store = w->recs[i].store;
    c.ops[i].f_map = w->recs[i].f_map;
    c.ops[i].f_off = 0;
    c.ops[i].i_map = w->recs[i].i_map;
    c.ops[i].i_off = 0;
  }
  if (rc) {
    s = ttpu_status_oom();
    goto done;
  }

  ttpu_cache_entry* e = ttpu_prog_find(&rt->prog, dev, w->key, w->n_key);
  int queued = ttpu_queue_length(rt);
  if (queued || (!e && w->owner)) {
    if (rt->opts.compile_threads > 1 && !ttpu_queue_compiles_here(rt)) {
      s = queue_window(rt, w, &c, e, why);
      goto done;
    }
    /* Compiled here: what waits before the window runs first. */
    if (queued) {
      s = ttpu_queue_run_all(rt);
      if (s) goto done;
    }
  }
  if (!e) {
    char what[96], reason[512];
    window_label(rt, w, n_recs, what, sizeof(what), reason, sizeof(reason));
    ttpu_prog_request req = {0};
    req.what = what;
    req.n_ops = n_recs;
    req.reason = reason;
    req.lower = lower_window;
    req.ctx = &c;
    req.use_disk = 1;
    s = ttpu_prog_compile(&rt->prog, dev, w->key, w->n_key, &req, &e);
    if (s) {
      s = window_error(s, w);
      goto done;
    }
  }
  remember_window(w, n_recs);

  s = upload_packs(rt, w, &c.g, &fbuf, &ibuf);
  if (s) goto done;
  if (c.g.f_param >= 0) args[c.g.f_param] = fbuf;
  if (c.g.i_param >= 0) args[c.g.i_param] = ibuf;
  if (c.g.rng_param >= 0) args[c.g.rng_param] = rt->dev[dev].rng_state->pb;
  outs = calloc((size_t)e->n_results + 1, sizeof(*outs));
  if (!outs) {
    s = ttpu_status_oom();
    goto done;
  }
  ttpu_pjrt_event* done_event = NULL;
  int64_t began = ttpu_rt_trace_clock(rt);
  s = ttpu_pjrt_execute(rt->client, e->exec, dev, args, n_params, outs,
                        e->n_results, &done_event);
  if (s) {
    s = ttpu_status_annotate(s, "running a fused window of %d ops", n_recs);
    goto done;
  }
  stats->executions++;
  count_window(rt, dev, n_recs, why);
  if (rt->trace_what & TTPU_TRACE_LAUNCHES) {
    char what[96];
    window_what(w, n_recs, what, sizeof(what));
    ttpu_rt_trace_launch(rt, dev, what, n_recs, began, done_event);
  }
  ttpu_rt_add_pending(rt, dev, e, done_event);
  ttpu_pad* pads = calloc((size_t)w->n_st + 1, sizeof(*pads));
  if (!pads) {
    s = ttpu_status_oom();
    goto done;
  }
  for (int k = 0; k < w->n_st; ++k) pads[k] = w->st[k].pad;
  /* A window that ended for anything but a host read (a pass, a layer,
   * its op limit, a flush) leaves its checks to be read where the host
   * next waits: reading one here would wait for the program, and the host
   * would stop recording the next window meanwhile. */
  rt->prog.defer_checks = !w->owner && why != TTPU_END_READ;
  s = ttpu_prog_take_results(&rt->prog, dev, e, outs, store_buffer, w, pads);
  rt->prog.defer_checks = 0;
  free(pads);
  const ttpu_window_owner* own = w->owner;
  if (own) own->ran(own->user);
  if (!s && own && own->wants_capture(own->user)) {
    own->captured(own->user,
                  own->capture(own->user, w, &c.g, e, NULL, 0, fbuf, ibuf), 1);
    fbuf = ibuf = NULL; /* kept by the replay, or freed by capture */
  }
done:
  ttpu_rt_drop_pjrt(rt, fbuf);
  ttpu_rt_drop_pjrt(rt, ibuf);
  free(args);
  free(outs);
  free(c.stores);
  free(c.ops);
  /* Success or not, the window is spent: a failed window's outputs keep
   * their previous values and the error goes to whoever ended it. */
  window_clear(w);
  return s;
}

/* ------------------------------------------------------------ repeats */

/* Repeated layers. A window that holds the same run of ops several times
 * in a row (a model's identical layers: the same op signatures over other
 * weights) is run as consecutive windows, one per copy, with whatever
 * comes before and after as windows of their own. The copies' windows
 * have one key (storages are numbered by first use, scalars shared per op
 * and value), so a model of 12 layers compiles the programs a model of 2
 * compiles, and each copy's temporaries still die inside its program.
 * A copy must hold at least REPEAT_MIN_OPS ops: shorter runs (a loop over
 * parameters, an attention's three projections) stay in their window,
 * where launching them one by one would cost more than it saves. And
 * there must be REPEAT_MIN_COPIES copies: two copies cut save one
 * copy's compile but add the windows before and after them (a 2-layer
 * step cut compiled no faster on libtpu, slower on the CPU plugin), and
 * each window cut is one more program for every bucket of a changing
 * length. */

/* The run of ops in h[a, b) repeated back to back (period P and copies R
 * at least the minimums, from s) that covers the most ops, the shortest
 * period on a tie; 0 when there is none. */
static int best_repeat(const uint64_t* h, int a, int b, int* s, int* P, int* R) {
  int best = 0;
  for (int p = REPEAT_MIN_OPS; 2 * p <= b - a; ++p) {
    int run = 0;
    for (int i = a; i + p < b; ++i) {
      run = h[i] == h[i + p] ? run + 1 : 0;
      if (run < p) continue;
      int copies = run / p + 1, cover = copies * p;
      if (copies >= REPEAT_MIN_COPIES && cover > best) {
        best = cover;
        *s = i - run + 1;
        *P = p;
        *R = copies;
      }
    }
  }
  return best > 0;
}

/* Appends to cut (n of cap used) the window boundaries inside h[a, b):
 * each copy of the best repeat, and those found before and after it. */
static void find_cuts(const uint64_t* h, int a, int b, int* cut, int* n, int cap) {
  int s = 0, P = 0, R = 0;
  if (!best_repeat(h, a, b, &s, &P, &R) || *n + R + 1 > cap) return;
  find_cuts(h, a, s, cut, n, cap);
  for (int k = 0; k <= R; ++k) {
    int at = s + k * P;
    if (at > a && at < b && (*n == 0 || cut[*n - 1] < at)) cut[(*n)++] = at;
  }
  find_cuts(h, s + R * P, b, cut, n, cap);
}

/* Runs the window as consecutive windows split at cut[0..n_cut) (inside
 * (0, n_recs), ascending): each part recorded again from its calls (so
 * every storage's bookkeeping is exact for it), then run, ended by
 * mid_why; the last part ends by why, or with keep_last stays recorded,
 * the start of the next window, and the part before it ends by tail_why.
 * A storage a later part reads stays held until that part is recorded, so
 * it is a result of the part that writes it; one that nothing outside
 * and no later part holds is a temporary. */
static ttpu_status* run_parts(ttpu_runtime* rt, ttpu_window* w, const int* cut,
                              int n_cut, ttpu_window_end mid_why,
                              ttpu_window_end why, int keep_last,
                              ttpu_window_end tail_why) {
  int n = w->n_recs, total = 0;
  for (int k = 0; k < n; ++k) total += w->recs[k].plan.n_slots;
  ttpu_op_call** calls = malloc((size_t)n * sizeof(*calls));
  ttpu_buffer** held = malloc(((size_t)total + 1) * sizeof(*held));
  int* held_at = malloc(((size_t)n + 1) * sizeof(*held_at));
  if (!calls || !held || !held_at) {
    free(calls);
    free(held);
    free(held_at);
    if (keep_last) return NULL; /* the window stays whole, unrun */
    return run_one(rt, w, why);
  }
  int nh = 0;
  for (int k = 0; k < n; ++k) {
    held_at[k] = nh;
    calls[k] = w->recs[k].call;
    w->recs[k].call = NULL;
    for (int sl = 0; sl < w->recs[k].plan.n_slots; ++sl) {
      held[nh] = w->recs[k].plan.slots[sl].buf;
      ttpu_buffer_retain(held[nh++]);
    }
  }
  held_at[n] = nh;
  window_clear(w);
  ttpu_status* s = NULL;
  int released = 0; /* calls whose holds are released */
  for (int part = 0; part <= n_cut && !s; ++part) {
    int a = part ? cut[part - 1] : 0, b = part < n_cut ? cut[part] : n;
    for (int k = a; k < b && !s; ++k)
      s = append(rt, w, calls[k], ttpu_op_def_get(calls[k]->op));
    for (; released < b; ++released)
      for (int j = held_at[released]; j < held_at[released + 1]; ++j)
        ttpu_rt_release_locked(held[j]);
    if (s) window_clear(w);
    else if (part < n_cut)
      s = run_one(rt, w, keep_last && part == n_cut - 1 ? tail_why : mid_why);
    else if (!keep_last) s = run_one(rt, w, why);
  }
  for (; released < n; ++released)
    for (int j = held_at[released]; j < held_at[released + 1]; ++j)
      ttpu_rt_release_locked(held[j]);
  for (int k = 0; k < n; ++k) free(calls[k]);
  free(calls);
  free(held);
  free(held_at);
  return s;
}

/* The window being recorded begins again with the ops it holds now
 * (none, or the tail a cut kept): its position and sequence are theirs,
 * no part of it has run, and every memo's next cut is searched anew. */
static int logical_restart(ttpu_window* w) {
  memset(w->memo_at, 0, sizeof(w->memo_at));
  w->ran_bytes = 0;
  w->lpos = 0;
  w->lseq = SEQ_SEED;
  if (grow((void**)&w->lhash, &w->cap_lhash, w->n_recs, sizeof(uint64_t)))
    return -1;
  for (int k = 0; k < w->n_recs; ++k) {
    w->lhash[k] = w->recs[k].hash;
    w->lseq = mix(w->lseq, w->recs[k].hash);
  }
  w->lpos = w->n_recs;
  return 0;
}

/* Whether a remembered window had a cut after the ops recorded so far,
 * and began with the same ops: then the ops recorded since the last cut
 * are one part of it, run now, while the rest is recorded. */
static int follow_cut(ttpu_window* w) {
  for (int k = 0; k < REPEAT_MEMO; ++k) {
    const struct repeat_memo* m = &w->memo[k];
    if (!m->n) continue;
    int j = w->memo_at[k];
    while (j < m->n_cut && m->cut[j] < w->lpos) ++j;
    w->memo_at[k] = j;
    if (j < m->n_cut && m->cut[j] == w->lpos && m->at_cut[j] == w->lseq)
      return 1;
  }
  return 0;
}

/* The cuts at repeated runs of ops in the window as recorded up to op L
 * (lhash[0, L): the ops of parts that already ran included), as offsets
 * into the ops still held, which begin at op L - held. The search is
 * quadratic in the window's length; a loop ends the same windows every
 * step, so the cuts of the last few are remembered by their op sequence,
 * and a window that begins with one's ops is cut as it is recorded
 * (ttpu_window_record), where that one was cut. */
static int window_cuts(ttpu_window* w, int L, int held, int* cut) {
  const uint64_t* h = w->lhash;
  uint64_t seq = SEQ_SEED;
  for (int k = 0; k < L; ++k) seq = mix(seq, h[k]);
  seq = mix(seq, (uint64_t)L);
  struct repeat_memo* m = NULL;
  for (int k = 0; k < REPEAT_MEMO && !m; ++k)
    if (w->memo[k].n == L && w->memo[k].seq == seq) m = &w->memo[k];
  if (!m) {
    int slot = w->memo_next;
    m = &w->memo[slot];
    w->memo_next = (w->memo_next + 1) % REPEAT_MEMO;
    m->n = L;
    m->seq = seq;
    m->n_cut = 0;
    find_cuts(h, 0, L, m->cut, &m->n_cut, REPEAT_MAX_CUTS);
    uint64_t pre = SEQ_SEED;
    for (int j = 0, k = 0; j < m->n_cut; ++j) {
      for (; k < m->cut[j]; ++k) pre = mix(pre, h[k]);
      m->at_cut[j] = pre;
    }
    w->memo_at[slot] = 0;
  }
  int base = L - held, n_cut = 0;
  for (int j = 0; j < m->n_cut; ++j)
    if (m->cut[j] > base && m->cut[j] < L) cut[n_cut++] = m->cut[j] - base;
  return n_cut;
}

/* Whether the window's repeats are searched: fused mode's (not a graph's)
 * whose ops as recorded are all known (lhash). */
static int searches_repeats(const ttpu_runtime* rt, const ttpu_window* w) {
  return !w->owner && rt->opts.fused_repeats && w->lpos >= w->n_recs &&
         w->lpos >= 2 * REPEAT_MIN_OPS;
}

/* Runs the window: split at its repeated runs of ops where it has them,
 * else as one program. At the op limit, the ops after the last cut (the
 * start of a copy) stay in the window: a deeper model reaches the limit
 * elsewhere, and its copies must still be cut where a shallower model's
 * are. */
static ttpu_status* run_window(ttpu_runtime* rt, ttpu_window* w,
                               ttpu_window_end why) {
  int keep_last = why == TTPU_END_LIMIT;
  if (!searches_repeats(rt, w)) return run_one(rt, w, why);
  int cut[REPEAT_MAX_CUTS];
  int n_cut = window_cuts(w, w->lpos, w->n_recs, cut);
  if (n_cut)
    return run_parts(rt, w, cut, n_cut, TTPU_END_LAYER, why, keep_last,
                     TTPU_END_LAYER);
  if (keep_last && w->lpos > w->n_recs)
    return NULL; /* all since the last cut that ran stays */
  return run_one(rt, w, why);
}

/* Cuts the window before its last `tail` ops (the next step began): the
 * ops before the cut run (repeated layers split as ever), the tail stays
 * recorded, the start of the next window. */
static ttpu_status* cut_before_tail(ttpu_runtime* rt, ttpu_window* w,
                                    int tail) {
  int n = w->n_recs, at = n - tail;
  if (at <= 0) return NULL;
  int cut[REPEAT_MAX_CUTS + 1], n_cut = 0;
  if (searches_repeats(rt, w) && w->lpos - tail >= 2 * REPEAT_MIN_OPS)
    n_cut = window_cuts(w, w->lpos - tail, at, cut);
  cut[n_cut++] = at;
  return run_parts(rt, w, cut, n_cut, TTPU_END_LAYER, TTPU_END_REPEAT, 1,
                   TTPU_END_REPEAT);
}

ttpu_status* ttpu_window_touch(ttpu_runtime* rt, const ttpu_buffer* b,
                              int writing) {
  ttpu_window* w = rt->window;
  if (!w || !w->n_recs) return NULL;
  int k = map_find(w, b);
  /* Reading a storage the window only reads needs nothing from it. */
  if (k < 0 || (!writing && !w->st[k].written)) return NULL;
  return ttpu_window_flush(rt, TTPU_END_READ);
}

ttpu_status* ttpu_window_host_read(ttpu_runtime* rt, const ttpu_buffer* b) {
  (void)b;
  return ttpu_window_flush(rt, TTPU_END_READ);
}

ttpu_status* ttpu_window_flush(ttpu_runtime* rt, ttpu_window_end why) {
  ttpu_window* w = rt->window;
  if (!w) return NULL;
  if (!w->n_recs) {
    logical_restart(w);
    return NULL;
  }
  if (why == TTPU_END_READ || why == TTPU_END_SYNC) w->since_anchor = 0;
  ttpu_status* s = run_window(rt, w, why);
  logical_restart(w);
  return s;
}

/* A fill (TTPU_OP_FILL: zero_, fill_ with a Scalar) of a storage the
 * window has not seen runs on its own, before the window, instead of
 * inside it: it depends on nothing the window computes and nothing in the
 * window reads the storage yet, so the order is kept. A training loop's
 * first step then records the same window as every later step: state a
 * step creates with zeros_like (an optimizer's moments) enters the window
 * as an input, as it does from the second step on, and the first window's
 * program is reused instead of compiling a second one. A composite op's
 * fills (ttpu_runtime_group_begin) and an autograd pass's stay in the
 * window: they are temporaries made at every call (attention's mask of
 * ones, its -inf scalar; the zeros slice_backward and cat's backward
 * write a gradient into), which the program folds instead of a launch
 * and a read each. */
static int is_outside_fill(const ttpu_runtime* rt, const ttpu_window* w,
                           const ttpu_op_call* call, const ttpu_op_def* def) {
  if (!(def->flags & TTPU_OP_FILL) || rt->composite_depth > 0 ||
      call->autograd_task > 0)
    return 0;
  if (call->n_outputs != 1 || !call->outputs[0].buffer) return 0;
  return !w->n_recs || map_find(w, call->outputs[0].buffer) < 0;
}

/* Whether a planned op reads or writes a padded storage, or is bucketed. */
static int touches_padding(const ttpu_plan* p) {
  if (p->dyn_at >= 0) return 1;
  for (int sl = 0; sl < p->n_slots; ++sl)
    if (p->slots[sl].pad.mask) return 1;
  return 0;
}

/* An op's hash for the step detector where it touches padding: the op and
 * the dtype and rank of each tensor, not their sizes, so that a step over
 * other sizes (the next batch of a varying length) is still seen to begin
 * with the same ops. */
static uint64_t step_hash(const ttpu_op_call* call) {
  uint64_t h = mix(0x5eed5fe9ull, (uint64_t)call->op);
  for (int k = 0; k < call->n_tensors; ++k)
    h = mix(h, (uint64_t)call->tensors[k].dtype << 8 | (uint64_t)call->tensors[k].ndim);
  for (int k = 0; k < call->n_outputs; ++k)
    h = mix(h, (uint64_t)call->outputs[k].dtype << 8 | (uint64_t)call->outputs[k].ndim);
  return h;
}

ttpu_status* ttpu_window_record(ttpu_runtime* rt, const ttpu_op_call* call,
                               const ttpu_op_def* def) {
  ttpu_window* w = window_of(rt);
  if (!w) return ttpu_status_oom();
  ttpu_status* s = NULL;
  if (call->device < 0 || call->device >= rt->device_count)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "invalid device tpu:%d",
                            call->device);
  if (!w->owner && is_outside_fill(rt, w, call, def))
    return ttpu_queue_run_op_now(rt, call, def);
  if (w->n_recs && w->device != call->device) {
    s = ttpu_window_flush(rt, TTPU_END_DEVICE);
    if (s) return s;
  }
  /* A backward pass begins or ends in a window that has written at least
   * PASS_CUT_BYTES: the window ends there. One window for forward, backward
   * and update holds every activation as a temporary of one program, which
   * the XLA CPU plugin maps afresh, page by page, at each run (a 4-layer
   * step spent a fifth of its time in page faults); across windows
   * activations are buffers, which stay allocated. Smaller windows stay
   * whole: their temporaries are reused, and a cut would cost a launch.
   * The rule depends on shapes only (padded storages count at their
   * bucket's size), so a TPU records the windows a CPU filling its cache
   * recorded, and every length in a bucket the same windows. A graph is
   * one program whatever records it. */
  if (w->n_recs && !w->owner && w->autograd_task != call->autograd_task &&
      w->ran_bytes + w->written_bytes >= PASS_CUT_BYTES) {
    s = ttpu_window_flush(rt, TTPU_END_PASS);
    if (s) return s;
  }
  /* The ops since the last cut are a part a remembered window ran as its
   * own program: it runs now, while the next ones are recorded. */
  if (w->n_recs && !w->owner && rt->opts.fused_repeats && follow_cut(w)) {
    w->ran_bytes += w->written_bytes;
    s = run_one(rt, w, TTPU_END_LAYER);
    if (s) {
      logical_restart(w);
      return s;
    }
  }
  w->device = call->device;
  w->autograd_task = call->autograd_task;
  s = append(rt, w, call, def);
  if (s) return s;
  if (w->owner) return NULL; /* a graph is one program, however long */
  const wrec* r = &w->recs[w->n_recs - 1];
  if (grow((void**)&w->lhash, &w->cap_lhash, w->lpos + 1, sizeof(uint64_t)))
    return ttpu_status_oom();
  w->lhash[w->lpos++] = r->hash;
  w->lseq = mix(w->lseq, r->hash);
  uint64_t h = r->hash, hf = step_hash(call);
  /* Repeat detector: the ring holds the last REPEAT_K op hashes. */
  w->recent[w->seen % REPEAT_K] = h;
  w->recent_free[w->seen % REPEAT_K] = hf;
  w->recent_padded[w->seen % REPEAT_K] = touches_padding(&r->plan);
  w->seen++;
  if (w->since_anchor < REPEAT_K) {
    w->prefix[w->since_anchor] = h;
    w->prefix_free[w->since_anchor] = hf;
  }
  w->since_anchor++;
  if (w->since_anchor > 2 * REPEAT_K) {
    int same = 1;
    for (int k = 0; k < REPEAT_K && same; ++k) {
      int at = (int)((w->seen - REPEAT_K + k) % REPEAT_K);
      same = w->recent[at] == w->prefix[k] ||
             (w->recent_padded[at] && w->recent_free[at] == w->prefix_free[k]);
    }
    if (same) {
      /* The step's first REPEAT_K ops again: the next step began. */
      w->since_anchor = REPEAT_K;
      s = w->n_recs > REPEAT_K ? cut_before_tail(rt, w, REPEAT_K) : NULL;
      logical_restart(w);
      return s;
    }
  }
  if (w->lpos >= w->limit) {
    s = run_window(rt, w, TTPU_END_LIMIT);
    logical_restart(w);
    return s;
  }
  return NULL;
}

/* ------------------------------------------------------------ owner */

ttpu_status* ttpu_window_set_owner(ttpu_runtime* rt,
                                   const ttpu_window_owner* owner) {
  ttpu_window* w = window_of(rt);
  if (!w) return owner ? ttpu_status_oom() : NULL;
  w->owner = owner;
  logical_restart(w);
  return NULL;
}

/* ------------------------------------------------------------ function */

void ttpu_window_function_free(ttpu_window_function* fn) {
  if (!fn) return;
  free(fn->text);
  free(fn->param_buf);
  free(fn->param);
  free(fn->f);
  free(fn->i);
  free(fn->results);
  memset(fn, 0, sizeof(*fn));
}

static ttpu_status* function_program(ttpu_window* w, ttpu_buffer* const* outs,
                                     int n_out, flush_ctx* c,
                                     ttpu_window_function* fn) {
  if (w->uses_rng)
    return ttpu_status_make(
        TTPU_UNIMPLEMENTED,
        "random numbers (dropout, rand, ...) inside a loop body are not "
        "supported: draw them outside the loop and pass them in as inputs, "
        "or set dropout to 0");
  int n_params = 0;
  for (int k = 0; k < w->n_st; ++k) {
    const wstore* x = &w->st[k];
    ttpu_prog_store* ps = &c->stores[k];
    if (x->pad0.mask || x->pad.mask)
      return ttpu_status_make(TTPU_UNIMPLEMENTED,
                              "a loop body over a padded (bucketed) tensor");
    if (x->param > 0 && x->written)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "a loop body may not change its inputs in place");
    ps->nbytes = x->buf->nbytes;
    ps->param = x->param > 0 ? n_params++ : -1;
    ps->result = -1;
    ps->dtype = x->dt0;
    ps->ndim = x->nd0;
    memcpy(ps->dims, x->dims0, sizeof(ps->dims));
  }
  for (int j = 0; j < n_out; ++j) {
    int k = outs[j] ? map_find(w, outs[j]) : -1;
    if (k < 0 || !w->st[k].written || c->stores[k].result >= 0)
      return ttpu_status_make(TTPU_INTERNAL,
                              "loop body: output %d is not a storage the body "
                              "computes (once)", j);
    c->stores[k].result = j;
  }
  c->g.f_param = w->n_f ? n_params++ : -1;
  c->g.i_param = w->n_i ? n_params++ : -1;
  c->g.rng_param = -1;
  c->g.rng_result = -1;
  c->g.n_f = w->n_f;
  c->g.n_i = w->n_i;
  c->g.n_params = n_params;
  c->g.n_results = n_out;
  c->g.n_stores = w->n_st;
  c->g.stores = c->stores;
  c->g.n_ops = w->n_recs;
  c->g.ops = c->ops;
  for (int i = 0; i < w->n_recs; ++i) {
    c->ops[i].plan = &w->recs[i].plan;
    c->ops[i].store = w->recs[i].store;
    c->ops[i].f_map = w->recs[i].f_map;
    c->ops[i].i_map = w->recs[i].i_map;
  }
  ttpu_status* s = ttpu_lower_prog(&c->g, &fn->text, &fn->len, &fn->results,
                                   &fn->n_results);
  if (s) return ttpu_status_annotate(s, "lowering a loop body of %d ops", w->n_recs);
  if (fn->n_results != n_out)
    return ttpu_status_make(
        TTPU_UNIMPLEMENTED,
        "a loop body with an op that checks its data at run time (an index "
        "checked on the device) is not supported");
  fn->n_params = n_params;
  fn->param_buf = calloc((size_t)n_params + 1, sizeof(*fn->param_buf));
  fn->param = calloc((size_t)n_params + 1, sizeof(*fn->param));
  fn->f = malloc(((size_t)w->n_f + 1) * sizeof(double));
  fn->i = malloc(((size_t)w->n_i + 1) * sizeof(int64_t));
  if (!fn->param_buf || !fn->param || !fn->f || !fn->i) return ttpu_status_oom();
  for (int k = 0; k < w->n_st; ++k) {
    int p = c->stores[k].param;
    if (p < 0) continue;
    fn->param_buf[p] = w->st[k].buf;
    fn->param[p] = c->stores[k];
  }
  fn->f_param = c->g.f_param;
  fn->i_param = c->g.i_param;
  fn->n_f = w->n_f;
  fn->n_i = w->n_i;
  if (w->n_f) memcpy(fn->f, w->f, (size_t)w->n_f * sizeof(double));
  if (w->n_i) memcpy(fn->i, w->i, (size_t)w->n_i * sizeof(int64_t));
  return NULL;
}

ttpu_status* ttpu_window_lower_function(ttpu_runtime* rt,
                                        ttpu_buffer* const* outs, int n_out,
                                        ttpu_window_function* fn) {
  memset(fn, 0, sizeof(*fn));
  ttpu_window* w = rt->window;
  if (!w || !w->n_recs || n_out < 1)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "a loop body must compute at least one output");
  flush_ctx c;
  memset(&c, 0, sizeof(c));
  c.w = w;
  c.n_recs = w->n_recs;
  c.stores = calloc((size_t)w->n_st + 1, sizeof(*c.stores));
  c.ops = calloc((size_t)w->n_recs + 1, sizeof(*c.ops));
  ttpu_status* s = !c.stores || !c.ops ? ttpu_status_oom()
                                       : function_program(w, outs, n_out, &c, fn);
  free(c.stores);
  free(c.ops);
  /* The storages are compared with the caller's, never used: the window
   * lets go of them now. */
  window_clear(w);
  if (s) ttpu_window_function_free(fn);
  return s;
}

/* ------------------------------------------------------------ queries */


int ttpu_window_store_count(const ttpu_window* w) { return w->n_st; }

void ttpu_window_store_pads(const ttpu_window* w, int k, ttpu_pad* pad0,
                            ttpu_pad* pad) {
  *pad0 = w->st[k].pad0;
  *pad = w->st[k].pad;
}

ttpu_buffer* ttpu_window_store(const ttpu_window* w, int k, int* has_value0) {
  if (has_value0) *has_value0 = w->st[k].has_value0;
  return w->st[k].buf;
}

int ttpu_window_op_count(const ttpu_window* w) { return w->n_recs; }

int ttpu_window_device(const ttpu_window* w) { return w->device; }
