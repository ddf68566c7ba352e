/* bucket.c - one program for a bucket of sizes (docs/design/shapes.md).
 *
 * A padded storage's version holds a bucket's size in some dims (ttpu_pad,
 * prog/storage.h). Every call that touches one has its views over it
 * rewritten into the padded layout (map_view), so its program takes the
 * padded version as it is. A call whose views span a padded dim whole is
 * bucketed when its op has a rule (ops/bucket.c) and nothing else in the
 * call depends on the true size: those dims take the bucket's size, the
 * true size goes into the int pack, inputs are masked with the rule's
 * fill, and fresh outputs come out padded. Any other call over padded
 * storages runs its exact program on the rewritten views (sizes in the
 * signature), which read and write inside the true sizes.
 *
 * Growing tensors start padded: the growth detector sees an op's output
 * keep changing size in one dim (cat in a decode loop) and pads that
 * output on write from then on (a "seed"), so the next call finds a padded
 * input. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* ------------------------------------------------------------ ladder */

int64_t ttpu_bucket_size(const ttpu_prog_ctx* pc, int64_t n) {
  int64_t b = pc->bucket_min;
  if (b <= 0 || n <= b) return b > 0 ? b : n;
  if (pc->bucket_ladder == 3) {
    for (int k = 0; k < pc->n_bucket_sizes; ++k)
      if (pc->bucket_sizes[k] >= n) return pc->bucket_sizes[k];
    b = pc->bucket_sizes[pc->n_bucket_sizes - 1];
  }
  while (b < n) b *= 2;
  if (pc->bucket_ladder == 2) {
    /* quarter steps between b/2 and b, multiples of 8 */
    int64_t h = b / 2;
    for (int q = 5; q <= 8; ++q) {
      int64_t c = (h * q / 4 + 7) / 8 * 8;
      if (c >= n) return c < b ? c : b;
    }
  }
  return b;
}

/* ------------------------------------------------------------ views */

/* The view t over a storage of dtype pd whose version has dims cap padded
 * as pad: its strides and offset in the padded layout (sizes unchanged),
 * and in *span the view dims that run over a padded dim whole (its true
 * size, from 0). 0 when it does not map: another element size, a negative
 * stride, a padded dim split, merged or stepped over, or a view that wraps
 * around a dim of the storage. */
static int map_view(const ttpu_tensor* t, ttpu_dtype pd, int nd,
                    const int64_t* cap, const ttpu_pad* pad, int64_t* strides,
                    int64_t* offset, int* span, int64_t* merge,
                    int64_t* true_n) {
  *span = 0;
  *merge = 1;
  *true_n = 0;
  if (ttpu_dtype_is_complex(t->dtype) || ttpu_dtype_is_complex(pd) ||
      ttpu_dtype_size(t->dtype) != ttpu_dtype_size(pd))
    return 0;
  int64_t L[TTPU_MAX_DIMS], ls[TTPU_MAX_DIMS], cs[TTPU_MAX_DIMS];
  ttpu_pad_logical(pad, nd, cap, L);
  int64_t a = 1, c = 1;
  for (int d = nd - 1; d >= 0; --d) {
    ls[d] = a;
    cs[d] = c;
    a *= L[d];
    c *= cap[d];
  }
  int64_t numel = 1;
  for (int j = 0; j < t->ndim; ++j) numel *= t->sizes[j];
  int64_t hi[TTPU_MAX_DIMS], rem = t->offset, off = 0;
  for (int d = 0; d < nd; ++d) {
    hi[d] = rem / ls[d];
    rem %= ls[d];
    off += hi[d] * cs[d];
  }
  int on[TTPU_MAX_DIMS] = {0};
  for (int j = 0; j < t->ndim; ++j) {
    int64_t s = t->strides[j];
    strides[j] = s;
    /* a size-1 dim's stride is never used: one that does not depend on
     * the true size keeps the signature the same across a bucket */
    if (numel == 0 || t->sizes[j] <= 1) {
      strides[j] = 1;
      continue;
    }
    if (s == 0) continue; /* a broadcast reads one element */
    if (s < 0) return 0;
    int d = nd - 1;
    while (d >= 0 && !(s % ls[d] == 0 && s / ls[d] < L[d] && L[d] > 1)) --d;
    if (d < 0) return 0;
    int64_t q = s / ls[d];
    if (pad->mask >> d & 1) {
      if (q != 1 || on[d]) return 0;
      if (t->sizes[j] > L[d] && hi[d] == 0 && t->sizes[j] % L[d] == 0) {
        /* One view dim over the padded dim and whole outer dims (a
         * flatten of [b, n, ...] into [b*n, ...]): in the padded layout
         * its rows are b runs of n at a period of the bucket. Only a
         * bucketed call can read it so (*merge: b; one such dim per
         * view); any other unpads the storage. */
        int64_t m = t->sizes[j] / L[d], acc = 1;
        int d0 = d;
        while (d0 > 0 && acc < m) {
          --d0;
          if (pad->mask >> d0 & 1 || on[d0] || hi[d0] != 0) return 0;
          acc *= L[d0];
        }
        if (acc != m || *merge != 1 || (*true_n && *true_n != L[d])) return 0;
        *merge = m;
        *true_n = L[d];
        *span |= 1 << j;
        for (int x = d0; x <= d; ++x) {
          on[x]++;
          hi[x] = L[x] - 1;
        }
        strides[j] = cs[d];
        continue;
      }
      /* spanning: from its start (or a fixed shift) to the true end; the
       * view's own true size is then the storage's less the shift */
      int64_t tn = L[d] - hi[d];
      if (t->sizes[j] == tn && tn > 1 && (!*true_n || *true_n == tn)) {
        *span |= 1 << j;
        *true_n = tn;
      }
    }
    if (q == 1 && hi[d] == 0 && !on[d] && t->sizes[j] > L[d] &&
        t->sizes[j] % L[d] == 0) {
      /* whole dims d0..d merged ([b, h, n, d] -> [b*h, n, d]), none of
       * them padded: as contiguous in the padded layout */
      int64_t m = t->sizes[j] / L[d], acc = 1;
      int d0 = d;
      while (d0 > 0 && acc < m) {
        --d0;
        if (pad->mask >> d0 & 1 || on[d0] || hi[d0] != 0) break;
        acc *= L[d0];
      }
      if (acc == m && !(pad->mask >> d0 & 1)) {
        for (int x = d0; x <= d; ++x) {
          on[x]++;
          hi[x] = L[x] - 1;
        }
        strides[j] = cs[d];
        continue;
      }
    }
    on[d]++;
    hi[d] += (t->sizes[j] - 1) * q;
    strides[j] = q * cs[d];
  }
  if (numel > 0)
    for (int d = 0; d < nd; ++d)
      if (hi[d] >= L[d]) return 0;
  *offset = numel > 0 ? off : 0;
  return 1;
}

/* Dense strides for sizes in the stride order of `like` (a dense view). */
static void dense_like(const ttpu_tensor* like, const int64_t* sizes,
                       int64_t* strides) {
  int order[TTPU_MAX_DIMS], n = like->ndim;
  for (int j = 0; j < n; ++j) order[j] = j;
  /* innermost first: ascending stride, later dims first on ties */
  for (int a = 1; a < n; ++a)
    for (int k = a; k > 0; --k) {
      int x = order[k - 1], y = order[k];
      int64_t sx = like->strides[x], sy = like->strides[y];
      if (sx < sy || (sx == sy && x > y)) break;
      order[k - 1] = y;
      order[k] = x;
    }
  int64_t acc = 1;
  for (int k = 0; k < n; ++k) {
    strides[order[k]] = acc;
    acc *= sizes[order[k]];
  }
}

static int is_contiguous(const ttpu_tensor* t) {
  int64_t acc = 1;
  for (int j = t->ndim - 1; j >= 0; --j) {
    if (t->sizes[j] != 1 && t->strides[j] != acc) return 0;
    acc *= t->sizes[j];
  }
  return 1;
}

/* ------------------------------------------------------------ growth */

#define GROWTH_CAP 1024
#define GROWTH_WAYS 8
/* Factories are bucketed within this many watched outputs and uploads
 * of the last padded upload (a model step watches a few dozen). */
#define VAR_SPAN 4096
/* Uploads of one token stream with the same length, in a row, after which
 * a stream padded from its first upload is taken for a fixed-shape loop's
 * (ttpu_bucket_upload_dim). */
#define STEADY_UPLOADS 8

struct ttpu_growth {
  uint64_t sig;
  int64_t last[TTPU_MAX_DIMS];
  int mask;     /* the dims that changed last (together, to one size) */
  int changes;  /* times in a row they changed */
  int dynamic;  /* the dims found growing; 0 not yet */
  int steady;   /* calls in a row with the same dims as the one before */
  uint64_t used; /* when it was last seen (the least recently seen of a
                    set of GROWTH_WAYS entries makes room) */
};

static uint64_t mix(uint64_t h, int64_t v) {
  return (h ^ (uint64_t)v) * 1099511628211ull;
}

/* Whether one of c's tensors has the sizes `last`: a growing tensor is
 * fed back into the op that grows it (x = cat([x, new])). */
static int feeds_back(const ttpu_op_call* c, int ndim, const int64_t* last) {
  for (int k = 0; k < c->n_tensors; ++k)
    if (c->tensors[k].ndim == ndim &&
        !memcmp(c->tensors[k].sizes, last, sizeof(int64_t) * (size_t)ndim))
      return 1;
  return 0;
}

/* The dims found growing (a mask) for tensors of signature h, now of
 * dims: dims that changed, together and to one size, `need` times in a
 * row; need 0: once where the new size's bucket wastes at most half of
 * it, twice otherwise. fed (where not NULL): the call, a change of which
 * counts only where one of its tensors is the previous output (the same
 * sizes): stacks of a model's parameters of other widths, one after
 * another, are not a tensor that grows. *steady (where not NULL): the
 * calls in a row before this one with these same dims. */
static int watch(ttpu_prog_ctx* pc, uint64_t h, int ndim, const int64_t* dims,
                 int need, const ttpu_op_call* fed, int* steady) {
  if (steady) *steady = 0;
  if (!pc->growth) {
    pc->growth = calloc(GROWTH_CAP, sizeof(*pc->growth));
    if (!pc->growth) return 0;
  }
  /* A set of GROWTH_WAYS entries per signature's hash: the many fills of
   * a model step do not push a growing cat's memory out. */
  struct ttpu_growth* set = &pc->growth[(h % (GROWTH_CAP / GROWTH_WAYS)) * GROWTH_WAYS];
  struct ttpu_growth* g = NULL;
  for (int w = 0; w < GROWTH_WAYS && !g; ++w)
    if (set[w].sig == h && set[w].used) g = &set[w];
  _Static_assert(GROWTH_CAP % GROWTH_WAYS == 0, "growth sets");
  uint64_t now = ++pc->growth_clock;
  if (!g) {
    g = &set[0];
    for (int w = 1; w < GROWTH_WAYS; ++w)
      if (set[w].used < g->used) g = &set[w];
    memset(g, 0, sizeof(*g));
    g->used = now;
    g->sig = h;
    memcpy(g->last, dims, sizeof(int64_t) * (size_t)ndim);
    return 0;
  }
  g->used = now;
  int changed = 0, same = 1;
  int64_t to = -1;
  for (int d = 0; d < ndim; ++d)
    if (dims[d] != g->last[d]) {
      changed |= 1 << d;
      if (to >= 0 && dims[d] != to) same = 0;
      to = dims[d];
    }
  g->steady = changed ? 0 : g->steady + 1;
  if (steady) *steady = g->steady;
  if (changed && fed && !feeds_back(fed, ndim, g->last)) same = 0;
  memcpy(g->last, dims, sizeof(int64_t) * (size_t)ndim);
  if (changed && !same) { /* another tensor of the same kind: start over */
    g->mask = 0;
    g->changes = 0;
    g->dynamic = 0;
  } else if (changed) {
    g->changes = changed == g->mask ? g->changes + 1 : 1;
    g->mask = changed;
    if (!need) need = ttpu_bucket_size(pc, to) <= 2 * to ? 1 : 2;
    if (g->changes >= need) g->dynamic = changed;
  }
  return g->dynamic;
}

/* The last lengths seen (var_len, batch_len): newest first, a length of
 * at most 1 never taken. */
#define RECENT 4
_Static_assert(sizeof(((ttpu_prog_ctx*)0)->var_len) == RECENT * sizeof(int64_t) &&
                   sizeof(((ttpu_prog_ctx*)0)->batch_len) == RECENT * sizeof(int64_t) &&
                   sizeof(((ttpu_prog_ctx*)0)->grow_len) == RECENT * sizeof(int64_t),
               "recent lengths");

static void recent_note(int64_t* recent, int64_t n) {
  if (n > 1 && recent[0] != n) {
    memmove(recent + 1, recent, (RECENT - 1) * sizeof(int64_t));
    recent[0] = n;
  }
}

static int recent_has(const int64_t* recent, int64_t n) {
  for (int k = 0; k < RECENT; ++k)
    if (n > 1 && recent[k] == n) return 1;
  return 0;
}

/* Whether n is one of the last lengths of integer batches uploaded. */
static int batch_length(const ttpu_prog_ctx* pc, int64_t n) {
  return recent_has(pc->batch_len, n);
}

/* The dims of output 0 found growing for calls like c (a mask). A
 * factory's kind (shaped) includes its dims other than those of a batch
 * length or a growing tensor's, so that the fills of one step
 * ([b, n, 128], [b, n, 256], ...) each keep their own history instead of
 * resetting one another's; a cat's (not shaped) grows only where it
 * takes its previous output. */
static int growth_mask(ttpu_prog_ctx* pc, const ttpu_op_call* c, int need,
                       int shaped) {
  const ttpu_tensor* o = &c->outputs[0];
  uint64_t h = 1469598103934665603ull;
  h = mix(h, c->op);
  h = mix(h, o->dtype);
  h = mix(h, o->ndim);
  for (int a = 0; a < c->n_args; ++a)
    if (c->args[a].kind == TTPU_ARG_INT) h = mix(h, c->args[a].i);
  if (shaped)
    for (int j = 0; j < o->ndim; ++j)
      h = mix(h, batch_length(pc, o->sizes[j]) || recent_has(pc->var_len, o->sizes[j]) ||
                         recent_has(pc->grow_len, o->sizes[j])
                     ? -1
                     : o->sizes[j]);
  pc->span_clock++;
  return watch(pc, h, o->ndim, o->sizes, need, shaped ? NULL : c, NULL);
}

int ttpu_bucket_upload_dim(ttpu_prog_ctx* pc, ttpu_dtype dt, int ndim,
                           const int64_t* dims, int per_op) {
  /* Integer and bool tensors of rank 2 or more, changing in a dim other
   * than the first (the batch): token ids, masks and labels of varying
   * length. Floating-point uploads are weights and features, left as
   * they come. */
  if (pc->bucket_min <= 0 || pc->exact || ndim < 2 || ttpu_dtype_is_float(dt) ||
      ttpu_dtype_is_complex(dt))
    return -1;
  /* One history per batch size: unrelated integer uploads (indices of
   * other shapes) do not move a token stream's. */
  uint64_t h = mix(mix(mix(mix(1469598103934665603ull, -7), dt), ndim), dims[0]);
  int steady = 0;
  pc->span_clock++;
  int m = watch(pc, h, ndim, dims, 0, NULL, &steady);
  recent_note(pc->batch_len, dims[1]);
  int d = m && !(m & (m - 1)) ? __builtin_ctz((unsigned)m) : -1;
  /* Where each op runs a program of its own (strict, debug), a token batch
   * [b, n] is padded from its first upload where the padding is cheap: n
   * in the smallest bucket and at least half of it (65 to 128 tokens by
   * default), or padding of at most a quarter of a larger bucket (a length
   * of 384 stays exact, 480 is padded to 512). The first length of a
   * training run then compiles the programs every later length reuses,
   * not a step's worth of exact ones used once (fused windows are few: a
   * first length's exact windows cost little). A length on a bucket (128,
   * 512) is stored as it is. A stream whose length has not changed for
   * STEADY_UPLOADS uploads is taken for a fixed-shape loop's and stored
   * exact from then on: its programs compile once more, and its steady
   * state pays no padding. Explicit sizes say that lengths vary: there, in
   * every mode, wherever the bucket is at most four times n (a prompt of 5
   * in a smallest size of 16; not a [b, 2] pair of indices). */
  if (d < 0 && ndim == 2) {
    int64_t n = dims[1], b = ttpu_bucket_size(pc, n);
    int cheap = pc->bucket_ladder == 3
                    ? b <= 4 * n
                    : per_op && b > n && steady < STEADY_UPLOADS &&
                          ((b == pc->bucket_min && b <= 2 * n) || 4 * (b - n) <= b);
    if (cheap) {
      d = 1;
      pc->first_len = n;
    } else if (steady >= STEADY_UPLOADS && recent_has(pc->var_len, n)) {
      /* taken for a fixed-shape loop: its masks and positions exact too */
      memset(pc->var_len, 0, sizeof(pc->var_len));
      pc->first_len = 0;
    }
  }
  if (d <= 0 || dims[d] <= 1) return -1;
  ttpu_bucket_note_length(pc, dims[d]);
  return d;
}

void ttpu_bucket_note_length(ttpu_prog_ctx* pc, int64_t n) {
  recent_note(pc->batch_len, n);
  recent_note(pc->var_len, n);
  pc->var_clock = pc->span_clock;
}

/* Whether n is one of the last lengths of uploads stored padded (a fused
 * window plans the previous step's ops again after the next upload). */
static int var_length(const ttpu_prog_ctx* pc, int64_t n) {
  return recent_has(pc->var_len, n);
}

/* ------------------------------------------------------------ sweeps */

/* A loop over sizes (`for i in range(1, 512): torch.empty(i).uniform_()`,
 * a test's or a benchmark's sweep) makes fresh tensors whose size in one
 * dim steps by a constant: i, i + s, i + 2s, ..., each dropped as the loop
 * goes on. Such a factory or fill is bucketed from its fourth size on:
 * each size would otherwise compile a program used once. Tensors a model
 * keeps (parameters, gradients, an optimizer's zeros_like state) stay
 * exact, even of evenly stepping widths (sweep_dim says how they differ).
 * Each kind (op, dtype, rank, int arguments) keeps its last SWEEP_RING
 * sizes, so a loop that makes two tensors of the kind, one sweeping and
 * one not, still finds its sweep. */
#define SWEEP_CAP 64
#define SWEEP_RING 8

struct ttpu_sweep {
  uint64_t sig, used;
  int n; /* sizes held, up to SWEEP_RING; the newest at [(next - 1) % RING] */
  int next;
  int64_t ring[SWEEP_RING][TTPU_MAX_DIMS];
  const ttpu_buffer* buf[SWEEP_RING]; /* the storage made; NULL once freed */
};

void ttpu_bucket_forget(ttpu_prog_ctx* pc, const ttpu_buffer* b) {
  if (!pc->sweep) return;
  for (int k = 0; k < SWEEP_CAP; ++k)
    for (int j = 0; j < SWEEP_RING; ++j)
      if (pc->sweep[k].buf[j] == b) pc->sweep[k].buf[j] = NULL;
}

/* The one dim where a and b differ (rank nd), or -1. */
static int one_diff(const int64_t* a, const int64_t* b, int nd) {
  int d = -1;
  for (int j = 0; j < nd; ++j)
    if (a[j] != b[j]) {
      if (d >= 0) return -1;
      d = j;
    }
  return d;
}

/* How many sizes ago e last held the sizes s with dim d at v (1: the
 * newest), or 0; *gone: that storage has been freed since. */
static int sweep_age(const struct ttpu_sweep* e, const int64_t* s, int nd, int d,
                     int64_t v, int* gone) {
  for (int age = 1; age <= e->n; ++age) {
    int at = (e->next + SWEEP_RING - age) % SWEEP_RING;
    const int64_t* r = e->ring[at];
    if (r[d] != v) continue;
    int same = 1;
    for (int j = 0; j < nd && same; ++j) same = j == d || r[j] == s[j];
    if (!same) continue;
    *gone = e->buf[at] == NULL;
    return age;
  }
  return 0;
}

/* The dim in which calls like c sweep (the output's size there and three
 * before it, a constant step apart, among the kind's recent sizes), or -1;
 * notes the output's sizes. */
static int sweep_dim(ttpu_prog_ctx* pc, const ttpu_op_call* c) {
  const ttpu_tensor* o = &c->outputs[0];
  int nd = o->ndim;
  if (nd < 1) return -1;
  if (!pc->sweep) {
    pc->sweep = calloc(SWEEP_CAP, sizeof(*pc->sweep));
    if (!pc->sweep) return -1;
  }
  uint64_t h = 1469598103934665603ull;
  h = mix(h, -13);
  h = mix(h, c->op);
  h = mix(h, o->dtype);
  h = mix(h, nd);
  for (int a = 0; a < c->n_args; ++a)
    if (c->args[a].kind == TTPU_ARG_INT) h = mix(h, c->args[a].i);
  struct ttpu_sweep* e = NULL;
  struct ttpu_sweep* lru = &pc->sweep[0];
  for (int k = 0; k < SWEEP_CAP && !e; ++k) {
    if (pc->sweep[k].used && pc->sweep[k].sig == h) e = &pc->sweep[k];
    else if (pc->sweep[k].used < lru->used) lru = &pc->sweep[k];
  }
  if (!e) {
    e = lru;
    memset(e, 0, sizeof(*e));
    e->sig = h;
  }
  e->used = ++pc->sweep_clock;
  const int64_t* s = o->sizes;
  /* s - step, s - 2 step and s - 3 step, seen in that order (the newest
   * last), the older two freed already: a loop's counter, which makes a
   * tensor of each size and drops it. A model's parameters, gradients and
   * optimizer state of evenly stepping widths (Linear(k, k + 1) for k in
   * ...) stay alive, and parameters of a model come in no such order (an
   * embedding of 256 rows, then 384, 128 and 512 rows). */
  int found = -1;
  for (int k = 0; k < e->n && found < 0; ++k) {
    const int64_t* r = e->ring[k];
    int d = one_diff(r, s, nd);
    if (d < 0 || r[d] >= s[d]) continue;
    int64_t step = s[d] - r[d];
    if (s[d] - 3 * step < 0) continue;
    int g1 = 0, g2 = 0, g3 = 0;
    int a1 = sweep_age(e, s, nd, d, s[d] - step, &g1),
        a2 = sweep_age(e, s, nd, d, s[d] - 2 * step, &g2),
        a3 = sweep_age(e, s, nd, d, s[d] - 3 * step, &g3);
    if (a1 && a2 && a3 && a1 < a2 && a2 < a3 && g2 && g3) found = d;
  }
  const int64_t* newest = e->n ? e->ring[(e->next + SWEEP_RING - 1) % SWEEP_RING] : NULL;
  if (!newest || memcmp(newest, s, sizeof(int64_t) * (size_t)nd)) {
    memcpy(e->ring[e->next], s, sizeof(int64_t) * (size_t)nd);
    e->buf[e->next] = o->buffer;
    if (o->buffer) o->buffer->sweep_noted = 1;
    e->next = (e->next + 1) % SWEEP_RING;
    if (e->n < SWEEP_RING) e->n++;
  }
  return found;
}

/* ------------------------------------------------------------ decide */

/* Whether call tensor k is the `self` of an output that is written whole
 * and read for nothing (copy_ into a fresh storage): its sizes are the
 * output's, not an input's. */
static int fresh_self(const ttpu_plan* p, const ttpu_op_call* c, int k) {
  int s = p->tensor_slot[k];
  if (s < 0 || !p->slots[s].written || p->slots[s].has_value) return 0;
  for (int o = 0; o < c->n_outputs; ++o)
    if (p->out_slot[o] == s && !p->out_full[o]) return 0;
  return 1;
}

/* Which output dims hold the bucket, for calls whose dims line up in a
 * known way: a mask, -1 when an exact dim of the true size would meet a
 * padded one there (not bucketed), -2 when the call is not of such a
 * shape (the caller then refuses any exact dim of the true size).
 *
 * Broadcast-shaped calls (every output has the broadcast shape of the
 * inputs: elementwise ops, softmax, cumsum): dims line up from the right. */
static int broadcast_dyn(const ttpu_plan* p, const ttpu_op_call* c,
                         int64_t n) {
  int nt = c->n_tensors, no = c->n_outputs;
  if (no < 1 || p->out_slot[0] < 0) return -2;
  const ttpu_tensor* o0 = &p->rtens[nt];
  int R = o0->ndim;
  for (int o = 1; o < no; ++o) {
    const ttpu_tensor* t = &p->rtens[nt + o];
    if (p->out_slot[o] < 0) continue;
    if (t->ndim != R) return -2;
    for (int j = 0; j < R; ++j)
      if (t->sizes[j] != o0->sizes[j]) return -2;
  }
  int64_t bsz[TTPU_MAX_DIMS];
  for (int j = 0; j < R; ++j) bsz[j] = 1;
  int dyn = 0, inputs = 0;
  for (int k = 0; k < nt; ++k) {
    const ttpu_tensor* t = &p->rtens[k];
    if (!t->buffer || fresh_self(p, c, k)) continue;
    if (t->ndim > R) return -2;
    inputs++;
    for (int j = 0; j < t->ndim; ++j) {
      int at = R - t->ndim + j;
      int64_t s = c->tensors[k].sizes[j];
      if (p->tensor_dyn[k] >> j & 1) dyn |= 1 << at;
      if (s == 1) continue;
      if (bsz[at] == 1) bsz[at] = s;
      else if (bsz[at] != s) return -2;
    }
  }
  if (!inputs) return -2;
  for (int j = 0; j < R; ++j)
    if (bsz[j] != o0->sizes[j]) return -2;
  for (int k = 0; k < nt; ++k) {
    const ttpu_tensor* t = &p->rtens[k];
    if (!t->buffer || fresh_self(p, c, k)) continue;
    for (int j = 0; j < t->ndim; ++j)
      if (!(p->tensor_dyn[k] >> j & 1) && c->tensors[k].sizes[j] == n &&
          dyn >> (R - t->ndim + j) & 1)
        return -1;
  }
  return dyn;
}

/* mm, bmm, addmm, baddbmm: the factors are the tensors of arguments
 * `first` and first + 1 (after a bias), contracted over a's last dim and
 * b's second to last; a bias lines up with the output from the right. */
static int matmul_dyn(const ttpu_plan* p, const ttpu_op_call* c) {
  const char* name = ttpu_op_name(c->op);
  int first = !strncmp(name, "addmm", 5) || !strncmp(name, "baddbmm", 7);
  if (c->n_args < first + 2 || c->args[first].kind != TTPU_ARG_TENSOR ||
      c->args[first + 1].kind != TTPU_ARG_TENSOR || c->n_outputs != 1)
    return -2;
  int ia = c->args[first].tensor, ib = c->args[first + 1].tensor;
  int nd = c->tensors[ia].ndim;
  if ((nd != 2 && nd != 3) || c->tensors[ib].ndim != nd ||
      p->rtens[c->n_tensors].ndim != nd)
    return -2;
  int da = p->tensor_dyn[ia], db = p->tensor_dyn[ib];
  if ((da >> (nd - 1) & 1) != (db >> (nd - 2) & 1)) return -1;
  int out = 0;
  if (da >> (nd - 2) & 1) out |= 1 << (nd - 2);
  if (db >> (nd - 1) & 1) out |= 1 << (nd - 1);
  if (nd == 3) {
    if ((da & 1) != (db & 1)) return -1;
    out |= da & 1;
  }
  if (first && c->args[0].kind == TTPU_ARG_TENSOR) {
    int ic = c->args[0].tensor;
    const ttpu_tensor* t = &c->tensors[ic];
    if (t->ndim > nd) return -2;
    for (int j = 0; j < t->ndim; ++j) {
      int at = nd - t->ndim + j;
      int spans = p->tensor_dyn[ic] >> j & 1;
      if (spans != (t->sizes[j] != 1 && (out >> at & 1))) return -1;
    }
  }
  return out;
}

/* index_select(self, dim, index) and embedding(weight, indices): the
 * output takes the index's dims (index_select: at `dim`), the rest are
 * self's, copied whole. index_select's self may hold a bucket: in another
 * dim (padded in the output too), or in `dim` itself (a key cache
 * reordered along its beams is not; a padded dim selected along is
 * checked against the true size, ops/index.c). An embedding's padded
 * weight is not of this shape. */
static int gather_dyn(const ttpu_plan* p, const ttpu_op_call* c) {
  const char* name = ttpu_op_name(c->op);
  int sel = !strcmp(name, "index_select");
  if (!sel && strcmp(name, "embedding")) return -2;
  int ia = sel ? 2 : 1;
  if (c->n_args <= ia || c->args[0].kind != TTPU_ARG_TENSOR ||
      c->args[ia].kind != TTPU_ARG_TENSOR || c->n_outputs != 1)
    return -2;
  int is = c->args[0].tensor, ix = c->args[ia].tensor;
  if (!sel) return p->tensor_dyn[is] ? -2 : p->tensor_dyn[ix];
  if (c->args[1].kind != TTPU_ARG_INT || c->tensors[ix].ndim > 1 ||
      c->tensors[is].ndim != p->rtens[c->n_tensors].ndim)
    return -2;
  int64_t d = c->args[1].i < 0 ? c->args[1].i + c->tensors[is].ndim : c->args[1].i;
  if (d < 0 || d >= p->rtens[c->n_tensors].ndim) return -2;
  int out = p->tensor_dyn[is] & ~(1 << d);
  if (p->tensor_dyn[ix]) out |= 1 << d;
  return out || p->tensor_dyn[is] ? out : -2;
}

/* index.Tensor(self, indices): the result holds the index tensors'
 * broadcast shape where self's indexed dims were (first when a slice
 * separates them; NumPy's rule), then self's other dims. A padded dim of
 * an index tensor is padded in the result (its padding holds index 0, in
 * range); a padded dim self keeps is padded in the result; a padded dim
 * self is indexed along is read through the indices, which the lowering
 * wraps and checks against the true size (ops/index.c). An index dim
 * padded in one tensor and of the true size in another does not
 * broadcast: refused (-1, as is a call not of this form). */
static int index_dyn(const ttpu_plan* p, const ttpu_op_call* c) {
  if (c->n_args < 2 || c->args[0].kind != TTPU_ARG_TENSOR ||
      c->args[1].kind != TTPU_ARG_TENSORS || c->n_outputs != 1)
    return -1;
  int is = c->args[0].tensor, nd = c->tensors[is].ndim, nl = c->args[1].n;
  if (nl > nd) return -1;
  int taken = 0, first = -1, last = -1, adjacent = 1, nb = 0;
  for (int k = 0; k < nl; ++k) {
    const ttpu_tensor* t = &c->tensors[c->args[1].tensor + k];
    if (t->dtype == TTPU_DTYPE_NONE) continue;
    if (t->dtype == TTPU_BOOL || t->dtype == TTPU_U8) return -1;
    taken |= 1 << k;
    if (first < 0) first = k;
    else if (k != last + 1) adjacent = 0;
    last = k;
    if (t->ndim > nb) nb = t->ndim;
  }
  if (first < 0) return -1;
  int state[TTPU_MAX_DIMS] = {0}; /* 0: all 1 so far, 1: exact, 2: padded */
  for (int k = 0; k < nl; ++k) {
    int i = c->args[1].tensor + k;
    const ttpu_tensor* t = &c->tensors[i];
    if (!(taken >> k & 1)) continue;
    for (int j = 0; j < t->ndim; ++j) {
      int at = nb - t->ndim + j, d = p->tensor_dyn[i] >> j & 1;
      if (!d && t->sizes[j] == 1) continue;
      int st = d ? 2 : 1;
      if (state[at] && state[at] != st) return -1;
      state[at] = st;
    }
  }
  int xd = p->tensor_dyn[is], before = adjacent ? first : 0, out = 0, r = 0;
  for (int j = 0; j < before; ++j, ++r)
    if (xd >> j & 1) out |= 1 << r;
  for (int j = 0; j < nb; ++j, ++r)
    if (state[j] == 2) out |= 1 << r;
  for (int j = before; j < nd; ++j) {
    if (taken >> j & 1) continue;
    if (xd >> j & 1) out |= 1 << r;
    ++r;
  }
  return r == p->rtens[c->n_tensors].ndim ? out : -1;
}

/* The dims an ints argument lists (negative ones from the end), as a
 * mask; -1 when one is out of range. */
static int dims_mask(const ttpu_arg* g, int ndim) {
  int mask = 0;
  for (int k = 0; k < g->n; ++k) {
    int64_t d = g->ints[k] < 0 ? g->ints[k] + ndim : g->ints[k];
    if (d < 0 || d >= ndim) return -1;
    mask |= 1 << d;
  }
  return mask;
}

/* A reduction of one tensor over the dims of its argument 1 (sum.dim_IntList,
 * mean.dim, amax, ...; keepdim or not): every output dim is an input dim,
 * so only the padded ones hold the bucket (a fixed dim of the true size
 * meets nothing). */
static int reduce_dyn(const ttpu_plan* p, const ttpu_op_call* c) {
  if (c->n_tensors != 1 || c->n_outputs != 1 || c->n_args < 2 ||
      c->args[0].kind != TTPU_ARG_TENSOR || c->args[1].kind != TTPU_ARG_INTS ||
      c->args[1].n == 0)
    return -2;
  int nd = c->tensors[0].ndim, od = p->rtens[1].ndim, red = dims_mask(&c->args[1], nd);
  if (red < 0) return -2;
  int n_red = __builtin_popcount((unsigned)red), dyn = p->tensor_dyn[0], out = 0;
  if (od != nd && od != nd - n_red) return -2;
  for (int j = 0, o = 0; j < nd; ++j) {
    if (red >> j & 1) {
      if (od == nd) ++o;
      continue;
    }
    if (dyn >> j & 1) out |= 1 << o;
    ++o;
  }
  return out;
}

static int has_size(const ttpu_tensor* t, int skip_mask, int64_t n) {
  for (int j = 0; j < t->ndim; ++j)
    if (!(skip_mask >> j & 1) && t->sizes[j] == n) return 1;
  return 0;
}

/* index_put with accumulate (_index_put_impl_(self, indices, values,
 * accumulate, unsafe)) over padded 1-d indices and values padded alike
 * (not broadcast):
 * the padding adds -0.0 (0, false) at index 0, which changes nothing, so
 * self and the output stay exact. 0 (no output dim padded) when the call
 * is of that shape, -1 otherwise. */
static int accumulate_dyn(const ttpu_plan* p, const ttpu_op_call* c, int64_t nn) {
  if (c->n_args < 4 || c->args[0].kind != TTPU_ARG_TENSOR ||
      c->args[1].kind != TTPU_ARG_TENSORS || c->args[2].kind != TTPU_ARG_TENSOR ||
      c->args[3].kind != TTPU_ARG_BOOL || !c->args[3].i || c->n_outputs != 1)
    return -1;
  int is = c->args[0].tensor, iv = c->args[2].tensor;
  if (p->tensor_dyn[is]) return -1;
  for (int k = 0; k < c->args[1].n; ++k) {
    int i = c->args[1].tensor + k;
    const ttpu_tensor* t = &c->tensors[i];
    if (t->dtype == TTPU_DTYPE_NONE) continue;
    if (t->ndim != 1 || p->tensor_dyn[i] != 1 || t->dtype == TTPU_BOOL ||
        t->dtype == TTPU_U8)
      return -1;
  }
  /* values padded alike: a value broadcast to the padding (a scalar)
   * would be added at index 0 once per padded index */
  const ttpu_tensor* v = &c->tensors[iv];
  if (!p->tensor_dyn[iv] || has_size(v, p->tensor_dyn[iv], nn)) return -1;
  return 0;
}

/* index_copy(self, dim, index, source): index (1-d) and source padded
 * alike along dim, self exact (a prompt written into a preallocated
 * cache at arange(n)). 0, or -1 when the call is not of that form. */
static int index_copy_dyn(const ttpu_plan* p, const ttpu_op_call* c, int64_t nn) {
  if (c->n_args < 4 || c->args[0].kind != TTPU_ARG_TENSOR ||
      c->args[1].kind != TTPU_ARG_INT || c->args[2].kind != TTPU_ARG_TENSOR ||
      c->args[3].kind != TTPU_ARG_TENSOR || c->n_outputs != 1)
    return -1;
  int is = c->args[0].tensor, ii = c->args[2].tensor, iv = c->args[3].tensor;
  const ttpu_tensor *s = &c->tensors[is], *v = &c->tensors[iv];
  int64_t d = c->args[1].i;
  if (s->ndim < 1 || v->ndim != s->ndim || c->tensors[ii].ndim != 1) return -1;
  if (d < 0) d += s->ndim;
  if (d < 0 || d >= s->ndim || p->tensor_dyn[is] || p->tensor_dyn[ii] != 1 ||
      p->tensor_dyn[iv] != 1 << d || has_size(v, p->tensor_dyn[iv], nn))
    return -1;
  return 0;
}

/* A reduction of one tensor to 0-dim outputs (sum(), amax(), all()): no
 * output dim holds the bucket, and the input's padded dims are its
 * storage's, whatever sizes its fixed dims have. 0, or -2 when the call is
 * not of that form. */
static int whole_dyn(const ttpu_plan* p, const ttpu_op_call* c) {
  int nt = c->n_tensors, inputs = 0;
  for (int k = 0; k < nt; ++k)
    if (p->rtens[k].buffer && !fresh_self(p, c, k)) inputs++;
  if (inputs != 1 || c->n_outputs < 1) return -2;
  for (int o = 0; o < c->n_outputs; ++o)
    if (p->out_slot[o] >= 0 && p->rtens[nt + o].ndim != 0) return -2;
  return 0;
}

/* native_layer_norm(input, normalized_shape, weight, bias, eps): every
 * output (the result, the mean and rstd with 1 in the normalized dims) has
 * the input's rank and its padded dims; weight and bias span the
 * normalized dims, which reduces_other_dims requires to be fixed. The
 * input's padded dims, or -2 when the call is not of that form. */
static int norm_dyn(const ttpu_plan* p, const ttpu_op_call* c) {
  int nt = c->n_tensors;
  if (nt < 1 || c->n_args < 2 || c->args[1].kind != TTPU_ARG_INTS) return -2;
  int nd = c->tensors[0].ndim;
  for (int k = 1; k < nt; ++k)
    if (p->rtens[k].buffer &&
        (p->tensor_dyn[k] || p->rtens[k].ndim != c->args[1].n))
      return -2;
  for (int o = 0; o < c->n_outputs; ++o)
    if (p->out_slot[o] >= 0 && p->rtens[nt + o].ndim != nd) return -2;
  return p->tensor_dyn[0];
}

/* Whether the reduced dims (ints argument `arg`) avoid mask; `last`: the
 * argument is a normalized_shape, the last dims. */
static int reduces_other_dims(const ttpu_op_call* c, int arg, int mask, int ndim,
                              int last) {
  if (c->n_args <= arg) return 0;
  const ttpu_arg* g = &c->args[arg];
  if (g->kind != TTPU_ARG_INTS || g->n == 0) return 0;
  if (last) { /* normalized_shape: the last n dims */
    for (int j = ndim - g->n; j < ndim; ++j)
      if (j < 0 || mask >> j & 1) return 0;
    return 1;
  }
  int red = dims_mask(g, ndim);
  return red >= 0 && !(red & mask);
}

/* Whether view t is flat over its whole storage of `bytes` (offset 0,
 * stride 1). */
static int flat_whole(const ttpu_tensor* t, size_t bytes) {
  return t->buffer && t->ndim == 1 && t->offset == 0 &&
         (t->strides[0] == 1 || t->sizes[0] <= 1) &&
         (size_t)t->sizes[0] * ttpu_dtype_size(t->dtype) == bytes;
}

/* A clone of a whole padded storage through flat views into a fresh one
 * (clone_preserve_strides: the first step of slice_scatter, select_scatter
 * and the other scatters of a view) copies the padded version as it is,
 * padding and all, instead of unpadding it in a program per size. */
static int whole_copy(ttpu_prog_ctx* pc, ttpu_plan* p) {
  const ttpu_op_call* c = p->call;
  if (c->n_tensors != 1 || c->n_outputs != 1 || strcmp(ttpu_op_name(c->op), "clone"))
    return 0;
  int si = p->tensor_slot[0], so = p->out_slot[0];
  if (si < 0 || so < 0 || si == so) return 0;
  ttpu_slot* in = &p->slots[si];
  ttpu_slot* out = &p->slots[so];
  const ttpu_tensor* a = &c->tensors[0];
  const ttpu_tensor* o = &c->outputs[0];
  if (!in->pad.mask || out->pad.mask || !p->out_full[0] || !out->written ||
      (out->read && out->has_value) || a->dtype != o->dtype ||
      ttpu_dtype_is_complex(a->dtype) ||
      ttpu_dtype_size(a->dtype) != ttpu_dtype_size(in->phys_dtype) ||
      !flat_whole(a, in->buf->nbytes) || !flat_whole(o, out->buf->nbytes) ||
      a->sizes[0] != o->sizes[0])
    return 0;
  int nd = in->phys_ndim;
  int64_t B = 0;
  for (int k = 0; k < 2; ++k) {
    ttpu_tensor* t = &p->rtens[k];
    int64_t* sz = (int64_t*)t->sizes;
    memcpy(sz, in->phys_dims, sizeof(int64_t) * (size_t)nd);
    t->ndim = nd;
    t->offset = 0;
    int64_t acc = 1, *st = (int64_t*)t->strides;
    for (int d = nd - 1; d >= 0; --d) {
      st[d] = acc;
      acc *= sz[d];
    }
  }
  for (int d = 0; d < nd; ++d)
    if (in->pad.mask >> d & 1) B = in->phys_dims[d];
  out->bytes = in->bytes;
  p->tensor_dyn[0] = p->out_dyn[0] = in->pad.mask;
  p->bucket_rule = TTPU_B_ELEMENTWISE;
  p->dyn_n = p->dyn_out_n = in->pad.n;
  p->dyn_b = B;
  p->dyn_at = p->n_i;
  p->i[p->n_i++] = in->pad.n;
  p->poison = pc->bucket_poison;
  p->call = p->rcall;
  return 1;
}

/* ------------------------------------------------------------ grown views */

/* A view's kind for the growing- and moving-view histories: its storage's
 * size, dtype, rank and strides (not the storage itself: beam search
 * makes a new one of the same size each step). */
static uint64_t view_sig(int64_t seed, const ttpu_tensor* t) {
  uint64_t h = mix(mix(mix(mix(1469598103934665603ull, seed), (int64_t)t->buffer->nbytes),
                       t->dtype), t->ndim);
  for (int j = 0; j < t->ndim; ++j) h = mix(h, t->strides[j]);
  return h;
}

static int64_t grown_room(const ttpu_tensor* t, int d, int64_t total, int64_t B);

/* A view of an exact storage read along a length that changes call after
 * call, the rest of its geometry the same: a preallocated cache read as
 * `cache[:, :n]`, beam search's `sequences[:, :, :cur_len]` (a new storage
 * of the same size each step). The dim that changed twice in a row
 * (growth history per view_sig and offset), or else its one dim of the
 * length a bucketed index_copy last wrote the storage at, where the view
 * stops short in its storage (a prompt's keys read back from a static
 * cache: a process's first prompt then runs its bucket's programs, as its
 * queries do); -1 for none. Only views that do not cover their storage,
 * read and not written by the call. */
static int grown_dim(ttpu_prog_ctx* pc, const ttpu_plan* p, const ttpu_op_call* c,
                     int k) {
  const ttpu_tensor* t = &c->tensors[k];
  int s = p->tensor_slot[k];
  if (s < 0 || !t->buffer || p->slots[s].pad.mask || p->slots[s].written ||
      t->ndim < 1 || ttpu_dtype_is_complex(t->dtype) ||
      ttpu_plan_covers(t, t->buffer->nbytes))
    return -1;
  for (int j = 0; j < t->ndim; ++j)
    if (t->strides[j] < 0 || (t->strides[j] == 0 && t->sizes[j] > 1)) return -1;
  uint64_t h = mix(view_sig(-19, t), t->offset);
  int m = watch(pc, h, t->ndim, t->sizes, 2, NULL, NULL);
  if (!m && t->buffer->filled_n > 1) {
    int d = -1;
    for (int j = 0; j < t->ndim; ++j)
      if (t->sizes[j] == t->buffer->filled_n) {
        if (d >= 0) return -1; /* which one is the length? */
        d = j;
      }
    size_t es = ttpu_dtype_size(t->dtype);
    return d >= 0 && grown_room(t, d, (int64_t)(t->buffer->nbytes / es), t->sizes[d] + 1) >
                         t->sizes[d]
               ? d : -1;
  }
  if (!m || (m & (m - 1))) return -1;
  int d = __builtin_ctz((unsigned)m);
  return t->sizes[d] > 1 ? d : -1;
}

/* A view moves when its offset stepped forward by one constant amount
 * from each window to the next MOVING_RUN times in a row: a decode
 * position's, step after step. Views stepping inside one window (q, k and
 * v split from one projection, a loop over time steps) keep their
 * offsets in the window's signature, as constant slices. */
#define MOVING_CAP 256
#define MOVING_RUN 4

struct ttpu_moving {
  uint64_t sig, serial; /* serial: the window of the last step */
  int64_t last, step;
  int run;    /* forward steps of `step` in a row */
  int moving; /* sticky */
};

uint64_t ttpu_bucket_window_begins(ttpu_prog_ctx* pc) {
  return ++pc->window_serial;
}

int ttpu_bucket_moving_view(ttpu_prog_ctx* pc, const ttpu_tensor* t, uint64_t serial) {
  if (pc->bucket_min <= 0 || pc->exact || !t->buffer ||
      ttpu_plan_covers(t, t->buffer->nbytes))
    return 0;
  if (!pc->moving) {
    pc->moving = calloc(MOVING_CAP, sizeof(*pc->moving));
    if (!pc->moving) return 0;
  }
  uint64_t h = view_sig(-23, t);
  for (int j = 0; j < t->ndim; ++j) h = mix(h, t->sizes[j]);
  struct ttpu_moving* e = &pc->moving[h % MOVING_CAP];
  if (e->sig != h) {
    memset(e, 0, sizeof(*e));
    e->sig = h;
    e->serial = serial;
    e->last = t->offset;
    return 0;
  }
  if (e->serial == serial) return e->moving; /* the same window */
  e->serial = serial;
  int64_t step = t->offset - e->last;
  if (step > 0 && step == e->step) {
    if (++e->run >= MOVING_RUN) e->moving = 1;
  } else if (step) {
    e->run = step > 0;
  }
  if (step) e->step = step;
  e->last = t->offset;
  return e->moving;
}

/* What the storage holds of view t along dim d from its offset, up to B:
 * the largest size there that stays inside the storage (elements) and
 * does not run into the view's next outer dim. */
static int64_t grown_room(const ttpu_tensor* t, int d, int64_t total, int64_t B) {
  int64_t sd = t->strides[d], last = t->offset;
  if (sd <= 0) return 0;
  int64_t r = B;
  for (int j = 0; j < t->ndim; ++j) {
    if (j == d || t->sizes[j] <= 1) continue;
    last += (t->sizes[j] - 1) * t->strides[j];
    if (t->strides[j] > sd && t->strides[j] / sd < r) r = t->strides[j] / sd;
  }
  int64_t fit = last < total ? (total - 1 - last) / sd + 1 : 0;
  return fit < r ? fit : r;
}

ttpu_status* ttpu_plan_buckets(ttpu_prog_ctx* pc, ttpu_plan* p) {
  const ttpu_op_call* c = p->call;
  int nt = c->n_tensors, no = c->n_outputs;
  p->dyn_at = p->dyn_out_at = p->dyn_pad_at = -1;
  p->bucket_rule = 0;
  p->seed = 0;
  p->poison = 0;
  p->dyn_n = p->dyn_b = p->dyn_out_n = 0;
  p->dyn_merge = 1;
  p->grown = 0;
  int any_pad = 0;
  for (int s = 0; s < p->n_slots; ++s) {
    ttpu_slot* sl = &p->slots[s];
    sl->bytes = sl->buf->nbytes;
    sl->unpad = 0;
    if (sl->pad.mask) {
      any_pad = 1;
      size_t cap = ttpu_dtype_size(sl->phys_dtype);
      for (int d = 0; d < sl->phys_ndim; ++d) cap *= (size_t)sl->phys_dims[d];
      sl->bytes = cap;
    }
  }
  int rule = ttpu_op_bucket_rule(c->op);
  /* Growing outputs: a cat's (seeded: its exact program pads on write),
   * a factory's (arange, and fills of a fresh storage: bucketed at once,
   * since nothing but its size depends on the true size). */
  int seed_dim = -1, factory = 0;
  int fill = (p->def->flags & TTPU_OP_FILL) != 0;
  if (!any_pad && pc->bucket_min > 0 && !pc->exact &&
      (rule == TTPU_B_CAT || rule == TTPU_B_FACTORY || fill) &&
      no == 1 && c->outputs[0].buffer && p->out_full[0] &&
      !ttpu_dtype_is_complex(c->outputs[0].dtype) &&
      is_contiguous(&c->outputs[0]) && p->slots[p->out_slot[0]].written &&
      !(p->slots[p->out_slot[0]].read && p->slots[p->out_slot[0]].has_value)) {
    /* A cat grows when it grew twice; a factory once, to the length of
     * the uploads that vary, and twice in a row to a length only a
     * growing tensor has (made once or twice at such a length, its exact
     * program is the cheaper). */
    const int64_t* osz = c->outputs[0].sizes;
    int uploaded = 0;
    for (int j = 0; j < c->outputs[0].ndim; ++j) uploaded |= var_length(pc, osz[j]);
    int m = rule == TTPU_B_CAT ? growth_mask(pc, c, 2, 0)
                               : growth_mask(pc, c, uploaded ? 1 : 2, 1);
    int sweep = rule == TTPU_B_CAT ? -1 : sweep_dim(pc, c);
    int var_recent = pc->var_len[0] > 1 && pc->span_clock - pc->var_clock <= VAR_SPAN;
    int grow_recent = pc->grow_len[0] > 1 && pc->span_clock - pc->grow_clock <= VAR_SPAN;
    if (rule == TTPU_B_CAT) {
      if (m && !(m & (m - 1)) && !p->slots[p->out_slot[0]].read)
        seed_dim = __builtin_ctz((unsigned)m);
    } else if (var_recent || grow_recent) {
      /* From the first call, with explicit sizes (lengths declared
       * varying): the dims of such a length; after a token batch padded
       * from its first upload: the dims of its length. */
      if (!m && pc->bucket_ladder == 3)
        for (int j = 0; j < c->outputs[0].ndim; ++j)
          if (var_length(pc, osz[j])) m |= 1 << j;
      if (!m && pc->first_len > 1)
        for (int j = 0; j < c->outputs[0].ndim; ++j)
          if (osz[j] == pc->first_len) m |= 1 << j;
      /* the padded dims: lengths that vary, and one length (a [n, n]
       * mask), not two ([5, 4] where both were recent lengths) */
      factory = m;
      int64_t len = 0;
      for (int j = 0; j < c->outputs[0].ndim; ++j) {
        if (!(m >> j & 1)) continue;
        if (!(var_recent && var_length(pc, osz[j])) &&
            !(grow_recent && recent_has(pc->grow_len, osz[j])))
          factory = 0;
        if (len && osz[j] != len) factory = 0;
        len = osz[j];
      }
    }
    if (!factory && sweep >= 0 && c->outputs[0].sizes[sweep] > 1)
      factory = 1 << sweep;
  }
  /* Growing views, where the op may serve a bucket. */
  int grown_d[TTPU_PLAN_GROWN];
  unsigned grown = 0;
  if (pc->bucket_min > 0 && !pc->exact && rule != TTPU_B_NONE && !factory &&
      seed_dim < 0)
    for (int k = 0; k < nt && k < TTPU_PLAN_GROWN; ++k) {
      grown_d[k] = grown_dim(pc, p, c, k);
      if (grown_d[k] >= 0) grown |= 1u << k;
    }
  if (!any_pad && seed_dim < 0 && !factory && !grown) return NULL;
  if (ttpu_plan_zeroed(&p->rtens, &p->cap_rtens, nt + no + 1, sizeof(ttpu_tensor)) ||
      ttpu_plan_zeroed(&p->rgeom, &p->cap_rgeom, 2 * TTPU_MAX_DIMS * (nt + no) + 1,
             sizeof(int64_t)) ||
      ttpu_plan_zeroed(&p->tensor_dyn, &p->cap_tensor_dyn, nt + 1, sizeof(int)) ||
      ttpu_plan_zeroed(&p->out_dyn, &p->cap_out_dyn, no + 1, sizeof(int)) ||
      ttpu_plan_zeroed(&p->rcall, &p->cap_rcall, 1, sizeof(ttpu_op_call)))
    return ttpu_status_oom();
  *p->rcall = *c;
  p->rcall->tensors = p->rtens;
  p->rcall->outputs = p->rtens + nt;
  /* Copies with their own geometry arrays. */
  for (int k = 0; k < nt + no; ++k) {
    const ttpu_tensor* src = k < nt ? &c->tensors[k] : &c->outputs[k - nt];
    ttpu_tensor* t = &p->rtens[k];
    int64_t* sz = p->rgeom + (size_t)k * 2 * TTPU_MAX_DIMS;
    int64_t* st = sz + TTPU_MAX_DIMS;
    *t = *src;
    memcpy(sz, src->sizes, sizeof(int64_t) * (size_t)src->ndim);
    memcpy(st, src->strides, sizeof(int64_t) * (size_t)src->ndim);
    t->sizes = sz;
    t->strides = st;
  }
  if (any_pad && !factory && whole_copy(pc, p)) return NULL;
  /* Map every view over a padded storage; a storage with a view that
   * does not map is unpadded for this call instead. */
  if (factory) {
    /* A factory of a growing size: its output at the bucket's size. */
    ttpu_tensor* t = &p->rtens[nt];
    int64_t n = -1;
    for (int j = 0; j < t->ndim; ++j)
      if (factory >> j & 1) n = t->sizes[j];
    if (n > 1) {
      int64_t B = ttpu_bucket_size(pc, n);
      int64_t* sz = (int64_t*)t->sizes;
      size_t bytes = ttpu_dtype_size(t->dtype);
      for (int j = 0; j < t->ndim; ++j) {
        if (factory >> j & 1) sz[j] = B;
        bytes *= (size_t)sz[j];
      }
      dense_like(&c->outputs[0], t->sizes, (int64_t*)t->strides);
      for (int k = 0; k < nt; ++k) /* a fill's self: the same view */
        if (p->tensor_slot[k] == p->out_slot[0]) {
          memcpy((int64_t*)p->rtens[k].sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
          memcpy((int64_t*)p->rtens[k].strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
        }
      p->slots[p->out_slot[0]].bytes = bytes;
      p->out_dyn[0] = factory;
      p->bucket_rule = TTPU_B_ELEMENTWISE;
      p->dyn_n = p->dyn_out_n = n;
      p->dyn_b = B;
      p->dyn_at = p->n_i;
      p->i[p->n_i++] = n;
      p->poison = pc->bucket_poison;
      p->call = p->rcall;
      return NULL;
    }
    if (!any_pad) {
      p->call = p->rcall;
      return NULL;
    }
  }
  /* merged[k]: the view flattens its padded dim with outer dims (its
   * merge, else 1) */
  int64_t stack_merged[64];
  int64_t* merged = 2 * (nt + no) <= 64
                        ? stack_merged
                        : calloc((size_t)(2 * (nt + no)), sizeof(int64_t));
  if (!merged) return ttpu_status_oom();
  int64_t* span_n = merged + nt + no; /* per view: its spanning dims' size */
  for (int k = 0; k < nt + no; ++k) {
    merged[k] = 1;
    span_n[k] = 0;
  }
  for (int pass = 0; pass < 2; ++pass)
    for (int k = 0; k < nt + no; ++k) {
      int s = k < nt ? p->tensor_slot[k] : p->out_slot[k - nt];
      if (s < 0 || !p->slots[s].pad.mask) continue;
      ttpu_slot* sl = &p->slots[s];
      const ttpu_tensor* src = k < nt ? &c->tensors[k] : &c->outputs[k - nt];
      ttpu_tensor* t = &p->rtens[k];
      int64_t st[TTPU_MAX_DIMS], off = 0, merge = 1, tn = 0;
      int span = 0;
      if (pass == 0) {
        if (!map_view(src, sl->phys_dtype, sl->phys_ndim, sl->phys_dims,
                      &sl->pad, st, &off, &span, &merge, &tn))
          sl->unpad = 1;
        continue;
      }
      if (sl->unpad) continue;
      map_view(src, sl->phys_dtype, sl->phys_ndim, sl->phys_dims, &sl->pad, st,
               &off, &span, &merge, &tn);
      memcpy((int64_t*)t->strides, st, sizeof(int64_t) * (size_t)t->ndim);
      t->offset = off;
      merged[k] = merge;
      span_n[k] = tn;
      if (k < nt) p->tensor_dyn[k] = span;
      else p->out_dyn[k - nt] = span;
    }

  for (int k = 0; k < nt && k < TTPU_PLAN_GROWN; ++k)
    if (grown >> k & 1) {
      p->tensor_dyn[k] = 1 << grown_d[k];
      span_n[k] = c->tensors[k].sizes[grown_d[k]];
    }

  /* Bucketed? One true size n over every spanning input dim, and one
   * merge (a flattened view's count of runs, 1 for none) over all of them:
   * a spanning dim of a view holds merge * n elements. */
  int64_t n = -1, M = 0;
  int ok = pc->bucket_min > 0 && rule != TTPU_B_NONE;
  for (int k = 0; k < nt + no && ok; ++k) {
    int span = k < nt ? p->tensor_dyn[k] : p->out_dyn[k - nt];
    if (!span) continue;
    if (merged[k] > 1 && (span & (span - 1))) ok = 0;
    if (M == 0) M = merged[k];
    else if (merged[k] != M) ok = 0;
    if (k >= nt) continue;
    int64_t m = span_n[k];
    if (n < 0) n = m;
    else if (m != n) ok = 0;
  }
  if (M == 0) M = 1;
  ok = ok && n > 1 && (M == 1 || (rule != TTPU_B_CAT && rule != TTPU_B_MEAN));
  int64_t nn = n * M; /* a spanning dim's size */
  /* A broadcast dim (stride 0) of the true size over an exact storage
   * reads the same at any size: it spans the bucket too (the gradient of
   * a sum, expand()ed from one element). */
  for (int k = 0; k < nt && ok; ++k) {
    int s = p->tensor_slot[k];
    const ttpu_tensor* t = &c->tensors[k];
    if (s < 0 || p->slots[s].pad.mask || !t->buffer || fresh_self(p, c, k))
      continue;
    for (int j = 0; j < t->ndim; ++j)
      if (t->strides[j] == 0 && t->sizes[j] == nn) p->tensor_dyn[k] |= 1 << j;
  }
  /* A dim of the true size that holds no bucket would meet a padded one
   * (elementwise, contracted): not bucketed. Where the op's dims line up
   * in a known way only the dims that meet count; elsewhere any such dim
   * refuses. cat's other dims are the first operand's, fixed. */
  int known = -2;
  /* grow_dim: the output's padded dim grows past the input's (cat of a
   * fixed operand, a pad at the end), to out_n */
  int64_t out_n = n, grow_dim = -1;
  int pad_at = -1; /* TTPU_B_PAD: the amount's entry in the pad list */
  if (ok && rule == TTPU_B_CAT) {
    /* operands without a storage (empty: skipped by cat) do not count */
    int first = 0;
    while (first < nt - 1 && !p->rtens[first].buffer) ++first;
    const ttpu_tensor* t0 = &p->rtens[first];
    int64_t d = c->n_args > 1 && c->args[1].kind == TTPU_ARG_INT ? c->args[1].i : 0;
    if (d < 0) d += t0->ndim;
    int only = first < nt;
    for (int k = first + 1; k < nt; ++k) only &= !p->rtens[k].buffer;
    int dyn0 = first < nt ? p->tensor_dyn[first] : 0;
    int same = no == 1 && d >= 0 && d < t0->ndim && dyn0 &&
               (only || !(dyn0 >> d & 1)) &&
               p->rtens[nt].ndim == p->rtens[first].ndim;
    for (int k = first + 1; k < nt && same; ++k)
      same = !p->rtens[k].buffer ||
             (p->rtens[k].ndim == p->rtens[first].ndim && p->tensor_dyn[k] == dyn0);
    if (same) {
      /* along a fixed dim of operands padded alike, or of one operand
       * and empty ones: as elementwise */
      known = dyn0;
    } else {
      /* [padded along dim, fixed] */
      ok = first == 0 && nt == 2 && no == 1 && d >= 0 && d < t0->ndim && M == 1 &&
           p->tensor_dyn[0] == 1 << d && p->tensor_dyn[1] == 0 &&
           p->rtens[1].buffer && p->rtens[1].ndim == t0->ndim;
      if (ok) {
        grow_dim = d;
        out_n = n + p->rtens[1].sizes[d];
      }
    }
  } else if (ok && rule == TTPU_B_PAD) {
    /* constant_pad_nd(self, pad, value): at the end of the padded dim */
    const ttpu_tensor* t0 = &p->rtens[0];
    int dyn = p->tensor_dyn[0], np = c->args[1].kind == TTPU_ARG_INTS ? c->args[1].n : -1;
    ok = M == 1 && dyn && !(dyn & (dyn - 1)) && np >= 0 && np % 2 == 0 &&
         np / 2 <= t0->ndim;
    for (int i = 0; ok && i < np / 2; ++i) {
      int d = t0->ndim - 1 - i;
      if (!(dyn >> d & 1)) continue;
      ok = c->args[1].ints[2 * i] == 0 && c->args[1].ints[2 * i + 1] >= 0;
      grow_dim = d;
      pad_at = 2 * i + 1;
      out_n = n + c->args[1].ints[pad_at];
    }
    if (ok && grow_dim < 0) { /* the padded dim is not padded further */
      for (int d = 0; d < t0->ndim; ++d)
        if (dyn >> d & 1) grow_dim = d;
    }
  } else if (ok && rule == TTPU_B_MATMUL) {
    known = matmul_dyn(p, c);
  } else if (ok && rule == TTPU_B_ACCUMULATE) {
    known = M == 1 ? accumulate_dyn(p, c, nn) : -1;
  } else if (ok && rule == TTPU_B_INDEX) {
    known = M == 1 ? index_dyn(p, c) : -1;
  } else if (ok && rule == TTPU_B_INDEX_COPY) {
    known = M == 1 ? index_copy_dyn(p, c, nn) : -1;
  } else if (ok && rule == TTPU_B_FIRST) {
    /* the output has the first operand's shape; a padded set would add
     * its padding to the set */
    known = nt > 0 && no == 1 && p->rtens[nt].ndim == p->rtens[0].ndim ? p->tensor_dyn[0] : -1;
    for (int k = 1; k < nt && known >= 0; ++k)
      if (p->tensor_dyn[k]) known = -1;
  } else if (ok && rule == TTPU_B_LAST_DIMS && (known = norm_dyn(p, c)) != -2) {
    /* the dims known: a fixed dim of the true size (the hidden size at
     * that length) is no ambiguity */
  } else if (ok) {
    known = gather_dyn(p, c);
    if (known == -2 && rule != TTPU_B_ELEMENTWISE) known = reduce_dyn(p, c);
    if (known == -2 && rule != TTPU_B_ELEMENTWISE) known = whole_dyn(p, c);
    if (known == -2) known = broadcast_dyn(p, c, nn);
  }
  if (known == -1) ok = 0;
  for (int k = 0; k < nt && ok; ++k) {
    const ttpu_tensor* t = &p->rtens[k];
    if (ttpu_dtype_is_complex(t->dtype)) ok = 0;
    if (grow_dim < 0 && known < 0 && t->buffer && !fresh_self(p, c, k) &&
        has_size(t, p->tensor_dyn[k], nn))
      ok = 0;
  }
  /* An int argument of the true size may be a size taken from the padded
   * dim (a view's, a narrow's): refused. A normalized_shape is not: it
   * holds the sizes of the last dims, which reduces_other_dims (below)
   * requires to be fixed ones (a layer norm over a hidden size of 128 at a
   * length of 128). */
  int sizes_arg = rule == TTPU_B_LAST_DIMS ? 1 : rule == TTPU_B_NORM_BACKWARD ? 2 : -1;
  for (int a = 0; a < c->n_args && ok; ++a) {
    const ttpu_arg* g = &c->args[a];
    if (a == sizes_arg) continue;
    if ((g->kind == TTPU_ARG_INT) && (g->i == n || g->i == nn)) ok = 0;
    if (g->kind == TTPU_ARG_INTS)
      for (int k = 0; k < g->n; ++k)
        ok &= (a == 1 && k == pad_at) || (g->ints[k] != n && g->ints[k] != nn);
  }
  if (ok && (rule == TTPU_B_OTHER_DIMS || rule == TTPU_B_LAST_DIMS))
    ok = nt > 0 && reduces_other_dims(c, 1, p->tensor_dyn[0], c->tensors[0].ndim,
                                      rule == TTPU_B_LAST_DIMS);
  /* The lowest (highest) value of an integer or bool input is no identity
   * for an op that reduces it as floating point (logsumexp of bools: the
   * padding's false would add exp(0) each). */
  if (ok && (rule == TTPU_B_FILL_LOWEST || rule == TTPU_B_FILL_HIGHEST) && no > 0 &&
      ttpu_dtype_is_float(c->outputs[0].dtype))
    for (int k = 0; k < nt && ok; ++k)
      if (p->tensor_dyn[k] && !ttpu_dtype_is_float(c->tensors[k].dtype)) ok = 0;
  if (ok && rule == TTPU_B_NORM_BACKWARD) /* grad_out and input alike */
    ok = nt > 1 && p->tensor_dyn[0] == p->tensor_dyn[1] &&
         reduces_other_dims(c, 2, p->tensor_dyn[0], c->tensors[0].ndim, 1);
  int64_t B = ok ? ttpu_bucket_size(pc, n) : 0;
  int64_t outB = ok ? ttpu_bucket_size(pc, out_n) : 0;
  /* Outputs: in place over a mapped padded storage (its spanning dims),
   * or fresh and whole (dims of the true size become padded). */
  for (int o = 0; o < no && ok; ++o) {
    const ttpu_tensor* t = &p->rtens[nt + o];
    int s = p->out_slot[o];
    if (s < 0) continue;
    if (ttpu_dtype_is_complex(t->dtype)) ok = 0;
    else if (p->slots[s].pad.mask) {
      if (p->slots[s].unpad || (known < 0 && has_size(t, p->out_dyn[o], nn)) ||
          (known >= 0 && p->out_dyn[o] != known) ||
          (p->out_dyn[o] && (span_n[nt + o] != n ||
                             p->slots[s].pad.n != n)) ||
          grow_dim >= 0)
        ok = 0;
    } else if (rule == TTPU_B_ACCUMULATE || rule == TTPU_B_INDEX_COPY) {
      p->out_dyn[o] = 0; /* self's shape, exact */
    } else if (!p->out_full[o] || (p->slots[s].read && p->slots[s].has_value)) {
      /* (a storage read for its value: not fresh; has_param is set only
       * after this) */
      ok = 0;
    } else {
      int m = 0;
      for (int j = 0; j < t->ndim; ++j)
        if (grow_dim >= 0 ? j == grow_dim : t->sizes[j] == nn) m |= 1 << j;
      p->out_dyn[o] = known >= 0 ? known : m;
      /* a merged output is stored split: [.., merge, bucket, ..] */
      if (M > 1 && (!is_contiguous(&c->outputs[o]) ||
                    (p->out_dyn[o] & (p->out_dyn[o] - 1))))
        ok = 0;
    }
  }
  /* A growing view needs room in its storage for what it reads. */
  for (int k = 0; k < nt && k < TTPU_PLAN_GROWN && ok; ++k)
    if (grown >> k & 1) {
      size_t es = ttpu_dtype_size(c->tensors[k].dtype);
      int64_t room = grown_room(&c->tensors[k], grown_d[k],
                                (int64_t)(p->slots[p->tensor_slot[k]].buf->nbytes / es), B);
      if (room < n) ok = 0;
      p->grown_r[k] = room;
    }
  if (!ok) {
    for (int k = 0; k < nt && k < TTPU_PLAN_GROWN; ++k)
      if (grown >> k & 1) p->tensor_dyn[k] = 0;
    grown = 0;
    /* A flattened view is readable only by a bucketed call: its storage is
     * unpadded for this one, and its views keep their own geometry. */
    for (int k = 0; k < nt + no; ++k) {
      if (merged[k] == 1) continue;
      int s = k < nt ? p->tensor_slot[k] : p->out_slot[k - nt];
      p->slots[s].unpad = 1;
    }
    for (int k = 0; k < nt + no; ++k) {
      int s = k < nt ? p->tensor_slot[k] : p->out_slot[k - nt];
      if (s < 0 || !p->slots[s].unpad) continue;
      const ttpu_tensor* src = k < nt ? &c->tensors[k] : &c->outputs[k - nt];
      memcpy((int64_t*)p->rtens[k].strides, src->strides,
             sizeof(int64_t) * (size_t)src->ndim);
      p->rtens[k].offset = src->offset;
      if (k < nt) p->tensor_dyn[k] = 0;
      else p->out_dyn[k - nt] = 0;
    }
  }
  if (merged != stack_merged) free(merged);
  p->dyn_merge = ok ? M : 1;
  if (ok) {
    p->grown = grown;
    p->bucket_rule = rule;
    p->dyn_n = n;
    p->dyn_b = B;
    p->dyn_out_n = out_n;
    p->dyn_at = p->n_i;
    p->i[p->n_i++] = n;
    if (rule == TTPU_B_INDEX_COPY && p->out_slot[0] >= 0)
      p->slots[p->out_slot[0]].buf->filled_n = n; /* read back as a bucket */
    if (pad_at >= 0) {
      p->dyn_pad_at = pad_at;
      p->dyn_out_at = p->n_i;
      p->i[p->n_i++] = out_n;
    }
    p->poison = pc->bucket_poison;
    for (int k = 0; k < nt; ++k) {
      int64_t* sz = (int64_t*)p->rtens[k].sizes;
      for (int j = 0; j < p->rtens[k].ndim; ++j)
        if (p->tensor_dyn[k] >> j & 1) sz[j] = B * M;
    }
    for (int o = 0; o < no; ++o) {
      ttpu_tensor* t = &p->rtens[nt + o];
      int s = p->out_slot[o];
      if (s < 0) continue;
      int64_t* sz = (int64_t*)t->sizes;
      for (int j = 0; j < t->ndim; ++j)
        if (p->out_dyn[o] >> j & 1) sz[j] = grow_dim >= 0 ? outB : B * M;
      if (!p->slots[s].pad.mask && p->out_dyn[o]) { /* fresh: dense in its own order */
        dense_like(&c->outputs[o], t->sizes, (int64_t*)t->strides);
        t->offset = 0;
        size_t bytes = ttpu_dtype_size(t->dtype);
        for (int j = 0; j < t->ndim; ++j) bytes *= (size_t)t->sizes[j];
        p->slots[s].bytes = bytes;
        /* its self, the same view, takes the same geometry */
        for (int k = 0; k < nt; ++k) {
          const ttpu_tensor* u = &c->tensors[k];
          if (p->tensor_slot[k] != s || !fresh_self(p, c, k) ||
              u->ndim != t->ndim || u->offset != c->outputs[o].offset ||
              memcmp(u->sizes, c->outputs[o].sizes, sizeof(int64_t) * (size_t)u->ndim) ||
              memcmp(u->strides, c->outputs[o].strides, sizeof(int64_t) * (size_t)u->ndim))
            continue;
          memcpy((int64_t*)p->rtens[k].sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
          memcpy((int64_t*)p->rtens[k].strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
          p->rtens[k].offset = 0;
        }
      }
    }
  } else {
    /* Exact: fresh outputs stay exact storages. */
    for (int o = 0; o < no; ++o)
      if (p->out_slot[o] >= 0 && !p->slots[p->out_slot[o]].pad.mask)
        p->out_dyn[o] = 0;
    if (!any_pad && seed_dim >= 0 && c->outputs[0].sizes[seed_dim] > 1) {
      /* A growing tensor's first padded version. */
      ttpu_slot* sl = &p->slots[p->out_slot[0]];
      p->seed = 1;
      p->out_dyn[0] = 1 << seed_dim;
      p->dyn_out_n = c->outputs[0].sizes[seed_dim];
      p->dyn_b = ttpu_bucket_size(pc, p->dyn_out_n);
      size_t bytes = ttpu_dtype_size(c->outputs[0].dtype);
      for (int j = 0; j < c->outputs[0].ndim; ++j)
        bytes *= (size_t)(j == seed_dim ? p->dyn_b : c->outputs[0].sizes[j]);
      sl->bytes = bytes;
    }
  }
  /* Whole writes, against the bytes the program sees. */
  for (int o = 0; o < no; ++o) {
    int s = p->out_slot[o];
    if (s < 0 || p->seed) continue;
    if (p->slots[s].pad.mask && !p->slots[s].unpad) {
      p->out_full[o] = ttpu_plan_covers(&p->rtens[nt + o], p->slots[s].bytes);
      int64_t numel = 1;
      for (int j = 0; j < p->rtens[nt + o].ndim; ++j) numel *= p->rtens[nt + o].sizes[j];
      if (!p->out_full[o] && numel > 0) p->slots[s].read = 1;
    }
  }
  /* A growing tensor's new length (generate()'s attention mask, a key
   * cache): a factory of that size made each step (`arange(kv_length)` of
   * a padding mask) is bucketed too. */
  if (rule == TTPU_B_CAT && no == 1 && p->out_dyn[0] && p->dyn_out_n > 1) {
    recent_note(pc->grow_len, p->dyn_out_n);
    pc->grow_clock = pc->span_clock;
  }
  p->call = p->rcall;
  return NULL;
}
