/* run.c - one op call: plan, find or compile the program, enqueue it. */
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"

/* ------------------------------------------------------------ key words */

static int key_push(ttpu_plan* p, int64_t w) {
  if (p->n_key == p->cap_key) {
    size_t cap = p->cap_key ? p->cap_key * 2 : 256;
    int64_t* k = realloc(p->key, cap * sizeof(*k));
    if (!k) return -1;
    p->key = k;
    p->cap_key = cap;
  }
  p->key[p->n_key++] = w;
  return 0;
}

static int key_part(ttpu_plan* p, const char* label, int index) {
  if (p->n_parts == p->cap_parts) {
    int cap = p->cap_parts ? p->cap_parts * 2 : 32;
    size_t* a = realloc(p->part_at, cap * sizeof(*a));
    if (a) p->part_at = a;
    const char** l = realloc(p->part_label, cap * sizeof(*l));
    if (l) p->part_label = l;
    int* x = realloc(p->part_index, cap * sizeof(*x));
    if (x) p->part_index = x;
    if (!a || !l || !x) return -1;
    p->cap_parts = cap;
  }
  p->part_at[p->n_parts] = p->n_key;
  p->part_label[p->n_parts] = label;
  p->part_index[p->n_parts] = index;
  p->n_parts++;
  return 0;
}

static int key_str(ttpu_plan* p, const char* s) {
  size_t n = s ? strlen(s) : 0;
  int rc = key_push(p, (int64_t)n);
  for (size_t i = 0; i < n; i += 8) {
    int64_t w = 0;
    size_t m = n - i < 8 ? n - i : 8;
    memcpy(&w, s + i, m);
    rc |= key_push(p, w);
  }
  return rc;
}

static int key_geom(ttpu_plan* p, const ttpu_tensor* t, int slot) {
  int rc = key_push(p, slot);
  rc |= key_push(p, t->dtype);
  rc |= key_push(p, t->ndim);
  for (int d = 0; d < t->ndim; ++d) {
    rc |= key_push(p, t->sizes[d]);
    rc |= key_push(p, t->strides[d]);
  }
  rc |= key_push(p, t->offset);
  return rc;
}

/* ------------------------------------------------------------ plan */

static int slot_of(ttpu_plan* p, ttpu_buffer* b, const ttpu_window* w) {
  for (int s = 0; s < p->n_slots; ++s)
    if (p->slots[s].buf == b) return s;
  ttpu_slot* sl = &p->slots[p->n_slots];
  memset(sl, 0, sizeof(*sl));
  sl->buf = b;
  sl->param = -1;
  /* In a fused window a storage's shape and value are the window's. */
  if (!w || !ttpu_window_lookup(w, b, &sl->has_value, &sl->phys_dtype,
                                &sl->phys_ndim, sl->phys_dims)) {
    sl->has_value = b->pb != NULL;
    sl->phys_dtype = b->phys_dtype;
    sl->phys_ndim = b->phys_ndim;
    memcpy(sl->phys_dims, b->phys_dims, sizeof(sl->phys_dims));
  }
  return p->n_slots++;
}

static int64_t numel_of(const ttpu_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->sizes[d];
  return n;
}

/* Dense, non-overlapping, offset 0, and exactly the storage's bytes. */
static int covers_storage(const ttpu_tensor* t) {
  if (t->offset != 0) return 0;
  int64_t n = numel_of(t);
  if ((size_t)n * ttpu_dtype_size(t->dtype) != t->buffer->nbytes) return 0;
  if (n <= 1) return 1;
  /* dims with size > 1 sorted by stride must tile [0, n) exactly */
  int64_t expect = 1;
  int used[TTPU_MAX_DIMS] = {0};
  for (int k = 0; k < t->ndim; ++k) {
    int best = -1;
    for (int d = 0; d < t->ndim; ++d)
      if (!used[d] && t->sizes[d] > 1 &&
          (best < 0 || t->strides[d] < t->strides[best]))
        best = d;
    if (best < 0) break;
    used[best] = 1;
    if (t->strides[best] != expect) return 0;
    expect *= t->sizes[best];
  }
  return expect == n;
}

static ttpu_status* check_tensor(const ttpu_runtime* rt, const ttpu_op_call* c,
                                 const ttpu_tensor* t, const char* what,
                                 int i) {
  if (t->ndim < 0 || t->ndim > TTPU_MAX_DIMS)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "%s %d has %d dimensions; at most %d are supported",
                            what, i, t->ndim, TTPU_MAX_DIMS);
  if ((int)t->dtype < 0 || t->dtype >= TTPU_DTYPE_COUNT)
    return ttpu_status_make(TTPU_UNIMPLEMENTED, "%s %d has an unsupported dtype",
                            what, i);
  if (t->buffer->rt != rt)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s %d belongs to another runtime", what, i);
  if (t->buffer->device != c->device)
    return ttpu_status_make(
        TTPU_INVALID_ARGUMENT,
        "Expected all tensors to be on the same device, but found at least "
        "two devices, tpu:%d and tpu:%d!", c->device, t->buffer->device);
  /* The view must stay inside its storage. */
  int64_t lo = t->offset, hi = t->offset;
  int64_t n = numel_of(t);
  if (n > 0) {
    for (int d = 0; d < t->ndim; ++d) {
      int64_t ext = (t->sizes[d] - 1) * t->strides[d];
      if (ext < 0) lo += ext; else hi += ext;
    }
    size_t es = ttpu_dtype_size(t->dtype);
    if (lo < 0 || (size_t)(hi + 1) * es > t->buffer->nbytes)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s %d: view reaches outside its storage of %zu "
                              "bytes", what, i, t->buffer->nbytes);
  }
  return NULL;
}

ttpu_status* ttpu_plan_build(ttpu_runtime* rt, const ttpu_op_call* call,
                             const ttpu_op_def* def, const ttpu_window* w,
                             ttpu_plan* p) {
  memset(p, 0, sizeof(*p));
  p->call = call;
  p->def = def;
  p->f_param = p->i_param = p->rng_param = -1;
  int nt = call->n_tensors, no = call->n_outputs, na = call->n_args;
  p->slots = calloc((size_t)(nt + no + 1), sizeof(ttpu_slot));
  p->tensor_slot = calloc((size_t)nt + 1, sizeof(int));
  p->out_slot = calloc((size_t)no + 1, sizeof(int));
  p->out_full = calloc((size_t)no + 1, sizeof(int));
  p->arg_scalar = calloc((size_t)na + 1, sizeof(int));
  int n_scalars = 0;
  for (int a = 0; a < na; ++a)
    n_scalars += call->args[a].kind == TTPU_ARG_SCALAR
                     ? 1 + ttpu_dtype_is_complex(call->args[a].scalar_dtype)
                 : call->args[a].kind == TTPU_ARG_SCALARS ? call->args[a].n : 0;
  p->f = calloc((size_t)n_scalars + 1, sizeof(double));
  p->i = calloc((size_t)n_scalars + 1, sizeof(int64_t));
  if (!p->slots || !p->tensor_slot || !p->out_slot || !p->out_full ||
      !p->arg_scalar || !p->f || !p->i)
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of host memory");
  if (call->device < 0 || call->device >= rt->device_count)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "invalid device tpu:%d",
                            call->device);

  for (int t = 0; t < nt; ++t) {
    const ttpu_tensor* x = &call->tensors[t];
    if (!x->buffer) {
      p->tensor_slot[t] = -1;
      continue;
    }
    ttpu_status* s = check_tensor(rt, call, x, "input", t);
    if (s) return s;
    p->tensor_slot[t] = slot_of(p, x->buffer, w);
    p->slots[p->tensor_slot[t]].read = 1;
  }
  for (int o = 0; o < no; ++o) {
    const ttpu_tensor* x = &call->outputs[o];
    if (!x->buffer) { /* an undefined return (a backward's output_mask) */
      p->out_slot[o] = -1;
      continue;
    }
    ttpu_status* s = check_tensor(rt, call, x, "output", o);
    if (s) return s;
    int sl = slot_of(p, x->buffer, w);
    p->out_slot[o] = sl;
    p->slots[sl].written = 1;
    p->out_full[o] = covers_storage(x);
    if (!p->out_full[o] && numel_of(x) > 0) p->slots[sl].read = 1;
  }
  for (int s = 0; s < p->n_slots; ++s) {
    ttpu_slot* sl = &p->slots[s];
    sl->has_param = sl->read && sl->has_value;
    if (sl->has_param) sl->param = p->n_params++;
  }
  for (int a = 0; a < na; ++a) {
    const ttpu_arg* g = &call->args[a];
    if (g->kind == TTPU_ARG_SCALAR) {
      if (ttpu_dtype_is_complex(g->scalar_dtype)) { /* (re, im) */
        p->arg_scalar[a] = p->n_f;
        p->f[p->n_f++] = g->f;
        p->f[p->n_f++] = g->fi;
      } else if (ttpu_dtype_is_float(g->scalar_dtype)) {
        p->arg_scalar[a] = p->n_f;
        p->f[p->n_f++] = g->f;
      } else {
        p->arg_scalar[a] = p->n_i;
        p->i[p->n_i++] = g->i;
      }
    } else if (g->kind == TTPU_ARG_SCALARS) {
      p->arg_scalar[a] = p->n_f;
      for (int k = 0; k < g->n; ++k) p->f[p->n_f++] = g->floats[k];
    }
  }
  if (p->n_f) p->f_param = p->n_params++;
  if (p->n_i) p->i_param = p->n_params++;
  if (def->flags & TTPU_OP_RANDOM) p->rng_param = p->n_params++;

  /* The signature: everything the program text depends on. */
  int rc = key_part(p, "op", 0);
  rc |= key_push(p, call->op);
  rc |= key_push(p, na);
  rc |= key_push(p, nt);
  rc |= key_push(p, no);
  rc |= key_push(p, call->common_dtype);
  rc |= key_push(p, call->matmul_precision);
  rc |= key_push(p, p->n_f);
  rc |= key_push(p, p->n_i);
  for (int s = 0; s < p->n_slots; ++s) {
    const ttpu_slot* sl = &p->slots[s];
    rc |= key_part(p, "storage", s);
    rc |= key_push(p, (int64_t)sl->buf->nbytes);
    rc |= key_push(p, sl->read | sl->written << 1 | sl->has_param << 2);
    if (sl->has_param) {
      rc |= key_push(p, sl->phys_dtype);
      rc |= key_push(p, sl->phys_ndim);
      for (int d = 0; d < sl->phys_ndim; ++d) rc |= key_push(p, sl->phys_dims[d]);
    }
  }
  for (int a = 0; a < na; ++a) {
    const ttpu_arg* g = &call->args[a];
    rc |= key_part(p, "argument", a);
    rc |= key_push(p, g->kind);
    switch (g->kind) {
      case TTPU_ARG_TENSOR:
        rc |= key_push(p, g->tensor);
        break;
      case TTPU_ARG_TENSORS:
        rc |= key_push(p, g->tensor);
        rc |= key_push(p, g->n);
        break;
      case TTPU_ARG_INT:
      case TTPU_ARG_BOOL:
        rc |= key_push(p, g->i);
        break;
      case TTPU_ARG_FLOAT: {
        int64_t w;
        memcpy(&w, &g->f, sizeof(w));
        rc |= key_push(p, w);
        break;
      }
      case TTPU_ARG_SCALAR:
        rc |= key_push(p, g->scalar_dtype);
        break;
      case TTPU_ARG_SCALARS:
        rc |= key_push(p, g->scalar_dtype);
        rc |= key_push(p, g->n);
        break;
      case TTPU_ARG_INTS:
        rc |= key_push(p, g->n);
        for (int k = 0; k < g->n; ++k) rc |= key_push(p, g->ints[k]);
        break;
      case TTPU_ARG_FLOATS:
        rc |= key_push(p, g->n);
        for (int k = 0; k < g->n; ++k) {
          int64_t w;
          memcpy(&w, &g->floats[k], sizeof(w));
          rc |= key_push(p, w);
        }
        break;
      case TTPU_ARG_STR:
        rc |= key_str(p, g->str);
        break;
      case TTPU_ARG_NONE:
        break;
    }
  }
  for (int t = 0; t < nt; ++t) {
    rc |= key_part(p, "input", t);
    /* slot -1: None in a list, or an empty tensor (no storage) whose
     * shape still shapes the program */
    rc |= key_geom(p, &call->tensors[t], p->tensor_slot[t]);
  }
  for (int o = 0; o < no; ++o) {
    rc |= key_part(p, "output", o);
    if (p->out_slot[o] < 0) {
      rc |= key_push(p, -1);
      continue;
    }
    rc |= key_geom(p, &call->outputs[o], p->out_slot[o]);
    rc |= key_push(p, p->out_full[o]);
  }
  if (rc) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of host memory");
  return NULL;
}

void ttpu_plan_free(ttpu_plan* p) {
  free(p->slots);
  free(p->tensor_slot);
  free(p->out_slot);
  free(p->out_full);
  free(p->arg_scalar);
  free(p->f);
  free(p->i);
  free(p->key);
  free(p->part_at);
  free(p->part_label);
  free(p->part_index);
}

/* ------------------------------------------------------------ reasons */

/* The last signature seen per op (rt->last_sigs, indexed by op id), to say
 * what changed on a recompile. */
struct ttpu_last_sig {
  int64_t* key;
  size_t n;
  size_t* part_at;
  const char** label;
  int* index;
  int n_parts;
  int recompiles; /* compiles after the first */
  uint64_t change; /* what the last recompile changed ("input 0 size of
                      dim 1"), hashed */
  int same_change; /* recompiles in a row that changed it */
  int64_t at_op;   /* rt->ops_run at its last recompile */
  int warned;
};
typedef struct ttpu_last_sig last_sig;

void ttpu_rt_free_last_sigs(ttpu_runtime* rt) {
  for (int i = 0; i < rt->n_last_sigs; ++i) {
    free(rt->last_sigs[i].key);
    free(rt->last_sigs[i].part_at);
    free(rt->last_sigs[i].label);
    free(rt->last_sigs[i].index);
  }
  free(rt->last_sigs);
  rt->last_sigs = NULL;
  rt->n_last_sigs = 0;
}

/* What word j of a labelled key part means (the layouts of key_geom and
 * the storage part in ttpu_plan_build). */
static void describe_word(char* buf, size_t n, const char* label, int index,
                          size_t j, int64_t was, int64_t now) {
  if (!strcmp(label, "input") || !strcmp(label, "output")) {
    if (j == 1) {
      snprintf(buf, n, "%s %d dtype changed", label, index);
    } else if (j == 2) {
      snprintf(buf, n, "%s %d rank changed (%lld -> %lld)", label, index,
               (long long)was, (long long)now);
    } else if (j >= 3) {
      size_t d = (j - 3) / 2;
      /* words after the dims (offset, coverage) read as "layout" */
      snprintf(buf, n, "%s %d %s%zu changed (%lld -> %lld)", label, index,
               (j - 3) % 2 ? "stride of dim " : "size of dim ", d,
               (long long)was, (long long)now);
    } else {
      snprintf(buf, n, "%s %d now shares storage differently", label, index);
    }
  } else if (!strcmp(label, "storage")) {
    snprintf(buf, n, j == 0 ? "storage %d size changed (%lld -> %lld bytes)"
                            : "storage %d layout changed",
             index, (long long)was, (long long)now);
  } else if (!strcmp(label, "argument")) {
    snprintf(buf, n, "argument %d value changed (%lld -> %lld)", index,
             (long long)was, (long long)now);
  } else {
    snprintf(buf, n, "the op's argument structure changed");
  }
}

static void describe_recompile(ttpu_runtime* rt, const ttpu_plan* p) {
  const char* name = ttpu_op_name(p->call->op);
  int op = p->call->op;
  if (op >= rt->n_last_sigs) {
    int n = ttpu_op_count();
    last_sig* l = realloc(rt->last_sigs, (size_t)n * sizeof(*l));
    if (!l) return;
    memset(l + rt->n_last_sigs, 0, (size_t)(n - rt->n_last_sigs) * sizeof(*l));
    rt->last_sigs = l;
    rt->n_last_sigs = n;
  }
  last_sig* prev = &rt->last_sigs[op];
  if (!prev->key) {
    snprintf(rt->last_reason, sizeof(rt->last_reason), "%s: first compile",
             name);
  } else {
    char what[200] = "signature changed";
    /* Name the most telling change: a tensor's geometry before a storage's
     * size (which follows from it) or an argument. */
    static const char* const order[] = {"input", "output", "argument",
                                        "storage", "op"};
    int found = 0;
    for (int pass = 0; pass < 5 && !found; ++pass)
    for (int k = 0; k < p->n_parts; ++k) {
      if (strcmp(p->part_label[k], order[pass])) continue;
      size_t a = p->part_at[k];
      size_t b = k + 1 < p->n_parts ? p->part_at[k + 1] : p->n_key;
      if (k >= prev->n_parts || prev->part_at[k] != a) break;
      size_t pb = k + 1 < prev->n_parts ? prev->part_at[k + 1] : prev->n;
      size_t m = b - a < pb - a ? b - a : pb - a;
      size_t j = 0;
      while (j < m && prev->key[a + j] == p->key[a + j]) ++j;
      if (j == m && b == pb) continue;
      /* A tensor's sizes say more than the strides that follow from them. */
      int geometry = pass < 2 && b == pb;
      for (size_t q = 3; geometry && q + 1 < m; q += 2)
        if (prev->key[a + q] != p->key[a + q]) {
          j = q;
          break;
        }
      int64_t was = j < m ? prev->key[a + j] : 0;
      int64_t now = j < b - a ? p->key[a + j] : 0;
      describe_word(what, sizeof(what), p->part_label[k], p->part_index[k], j,
                    was, now);
      found = 1;
      break;
    }
    snprintf(rt->last_reason, sizeof(rt->last_reason), "%s: recompiled: %s",
             name, what);
    prev->recompiles++;
    rt->dev[p->call->device].stats.recompiles++;
    /* A model's many parameter shapes recompile an op now and then, each
     * time differently; a dynamic dimension changes the same thing again
     * and again. Only the latter warns. A loop over a list (an optimizer's
     * first step cloning each parameter) recompiles the op back to back
     * with nothing in between: one burst counts once. */
    uint64_t change = 1469598103934665603ull;
    const char* end = strstr(what, " changed");
    for (const char* c = what; *c && c != end; ++c)
      change = (change ^ (unsigned char)*c) * 1099511628211ull;
    int burst = prev->at_op + 1 == rt->ops_run;
    if (change != prev->change) prev->same_change = 1;
    else if (!burst) prev->same_change++;
    prev->change = change;
    const char* env = getenv("TORCHTPU_RECOMPILE_WARN");
    int limit = env && *env ? atoi(env) : 8;
    if (limit > 0 && prev->same_change >= limit && !prev->warned) {
      prev->warned = 1;
      ttpu_rt_warn(rt,
               "torchtpu: %s has been recompiled %d times in a row because "
               "the same thing changed; last: %s. Each new shape compiles a "
               "new program: keep this "
               "dimension fixed (pad or bucket it), or use "
               "torch.compile(backend=\"tpu\") with dynamic shapes marked. "
               "(TORCHTPU_RECOMPILE_WARN=N sets the threshold, 0 silences)",
               name, prev->same_change, what);
    }
  }
  prev->at_op = rt->ops_run;
  free(prev->key);
  free(prev->part_at);
  free(prev->label);
  free(prev->index);
  prev->key = malloc(p->n_key * sizeof(int64_t) + 1);
  prev->part_at = malloc((size_t)p->n_parts * sizeof(size_t) + 1);
  prev->label = malloc((size_t)p->n_parts * sizeof(char*) + 1);
  prev->index = malloc((size_t)p->n_parts * sizeof(int) + 1);
  if (!prev->key || !prev->part_at || !prev->label || !prev->index) {
    free(prev->key); free(prev->part_at); free(prev->label); free(prev->index);
    prev->key = NULL;
    prev->part_at = NULL;
    prev->label = NULL;
    prev->index = NULL;
    prev->n_parts = 0;
    return;
  }
  memcpy(prev->key, p->key, p->n_key * sizeof(int64_t));
  memcpy(prev->part_at, p->part_at, (size_t)p->n_parts * sizeof(size_t));
  memcpy(prev->label, p->part_label, (size_t)p->n_parts * sizeof(char*));
  memcpy(prev->index, p->part_index, (size_t)p->n_parts * sizeof(int));
  prev->n = p->n_key;
  prev->n_parts = p->n_parts;
}

void ttpu_rt_warn(ttpu_runtime* rt, const char* fmt, ...) {
  size_t used = strlen(rt->warning);
  if (used && used + 2 < sizeof(rt->warning)) {
    rt->warning[used++] = '\n';
    rt->warning[used] = 0;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->warning + used, sizeof(rt->warning) - used, fmt, ap);
  va_end(ap);
}

int ttpu_runtime_take_warning(ttpu_runtime* rt, char* buf, size_t n) {
  /* racy peek; the copy below is locked */
  if (!rt->warning[0] || ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int have = rt->warning[0] != 0;
  if (have && buf && n) snprintf(buf, n, "%s", rt->warning);
  rt->warning[0] = 0;
  pthread_mutex_unlock(&rt->mu);
  return have;
}

/* ------------------------------------------------------------ compile log */

void ttpu_rt_log_compile(ttpu_runtime* rt, const char* what, const char* reason,
                         double seconds, int from_disk, int n_ops) {
  if (!rt->log) {
    rt->log = calloc(TTPU_LOG_CAP, sizeof(*rt->log));
    if (!rt->log) return;
  }
  ttpu_compile_record* r = &rt->log[rt->n_log % TTPU_LOG_CAP];
  snprintf(r->what, sizeof(r->what), "%s", what);
  snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
  r->seconds = seconds;
  r->from_disk = from_disk;
  r->n_ops = n_ops;
  rt->n_log++;
}

int ttpu_runtime_compile_log_count(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int n = (int)(rt->n_log < TTPU_LOG_CAP ? rt->n_log : TTPU_LOG_CAP);
  pthread_mutex_unlock(&rt->mu);
  return n;
}

int ttpu_runtime_compile_log_get(ttpu_runtime* rt, int index,
                                 ttpu_compile_record* out) {
  if (ttpu_rt_forked(rt)) return 0;
  pthread_mutex_lock(&rt->mu);
  int64_t n = rt->n_log < TTPU_LOG_CAP ? rt->n_log : TTPU_LOG_CAP;
  int ok = index >= 0 && index < n && rt->log;
  if (ok) *out = rt->log[(rt->n_log - n + index) % TTPU_LOG_CAP];
  pthread_mutex_unlock(&rt->mu);
  return ok;
}

void ttpu_runtime_compile_log_clear(ttpu_runtime* rt) {
  if (ttpu_rt_forked(rt)) return;
  pthread_mutex_lock(&rt->mu);
  rt->n_log = 0;
  pthread_mutex_unlock(&rt->mu);
}

/* ------------------------------------------------------------ programs */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* TORCHTPU_DUMP_DIR: every compiled program's StableHLO, one file each,
 * named by what it runs and its signature hash, so reruns overwrite
 * rather than pile up. */
static void dump_program(const char* what, const int64_t* key, size_t n_key,
                         const char* text, size_t len) {
  const char* dir = getenv("TORCHTPU_DUMP_DIR");
  if (!dir || !*dir) return;
  uint64_t h = 1469598103934665603ull;
  for (size_t k = 0; k < n_key; ++k) {
    h ^= (uint64_t)key[k];
    h *= 1099511628211ull;
  }
  char name[96];
  size_t j = 0;
  for (const char* c = what; *c && j + 1 < sizeof(name); ++c)
    name[j++] = (*c == ' ' || *c == '/' || *c == '(' || *c == ')') ? '_' : *c;
  name[j] = 0;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s-%016llx.mlir", dir, name,
           (unsigned long long)h);
  FILE* f = fopen(path, "wb");
  if (!f) return; /* a dump is a diagnostic: never fail the op for it */
  fwrite(text, 1, len, f);
  fclose(f);
}

int ttpu_rt_note_reload(ttpu_runtime* rt, const int64_t* key, size_t n_key,
                        const char* what) {
  if (!ttpu_cache_was_evicted(rt->cache, key, n_key)) return 0;
  rt->programs_reloaded++;
  snprintf(rt->last_reason, sizeof(rt->last_reason),
           "%s: reloaded: unloaded earlier as one of the least recently used "
           "programs (the program cache keeps %lld; "
           "TORCHTPU_PROGRAM_CACHE_SIZE)",
           what, (long long)ttpu_cache_capacity(rt->cache));
  return 1;
}

ttpu_status* ttpu_rt_get_program(ttpu_runtime* rt, int device,
                                 const int64_t* key, size_t n_key,
                                 const char* what, int n_ops,
                                 const char* reason, ttpu_lower_cb lower,
                                 void* ctx, ttpu_cache_entry** out) {
  ttpu_stats* st = &rt->dev[device].stats;
  ttpu_cache_entry e = {0};
  ttpu_rt_trace_compile_begin(rt, device, what, n_ops);
  int from_disk = 0;
  double t0 = now_seconds();
  if (rt->disk && ttpu_disk_load(rt->disk, rt->client, key, n_key, &e)) {
    from_disk = 1;
    double dt = now_seconds() - t0;
    st->disk_hits++;
    st->disk_load_seconds += dt;
    ttpu_rt_log_compile(rt, what, reason, dt, 1, n_ops);
  } else {
    char* text = NULL;
    size_t len = 0;
    ttpu_status* s = lower(ctx, &text, &len, &e.results, &e.n_results);
    if (s) {
      ttpu_rt_trace_compile_end(rt, device, what, n_ops, 0, 1);
      return ttpu_status_annotate(s, "lowering %s", what);
    }
    dump_program(what, key, n_key, text, len);
    t0 = now_seconds();
    s = ttpu_pjrt_compile(rt->client, text, len, NULL, 0, &e.exec);
    double dt = now_seconds() - t0;
    if (s) {
      free(e.results);
      s = ttpu_status_annotate(s, "compiling %s", what);
      if (getenv("TORCHTPU_DEBUG_HLO")) fprintf(stderr, "%s\n", text);
      free(text);
      ttpu_rt_trace_compile_end(rt, device, what, n_ops, 0, 1);
      return s;
    }
    free(text);
    st->compiles++;
    st->compile_seconds += dt;
    ttpu_rt_log_compile(rt, what, reason, dt, 0, n_ops);
    int stored = rt->disk ? ttpu_disk_store(rt->disk, rt->client, key, n_key, &e)
                          : 0;
    if (stored > 0) st->disk_writes++;
    if (stored < 0) {
      ttpu_rt_warn(rt,
                   "torchtpu: cannot write the persistent compile cache (%s); "
                   "continuing without it for this process "
                   "(TORCHTPU_CACHE_DIR chooses another directory)",
                   ttpu_disk_error(rt->disk));
      ttpu_disk_close(rt->disk);
      rt->disk = NULL;
    }
  }
  ttpu_status* s = ttpu_cache_insert(rt->cache, key, n_key, &e, out);
  if (s) {
    ttpu_pjrt_exec_destroy(rt->client, e.exec);
    free(e.results);
  }
  ttpu_rt_trace_compile_end(rt, device, what, n_ops, from_disk, s != NULL);
  return s;
}

typedef struct {
  ttpu_runtime* rt;
  const ttpu_plan* p;
} lower_one_ctx;

static ttpu_status* lower_one(void* ctx, char** text, size_t* len,
                              ttpu_result_plan** results, int* n_results) {
  lower_one_ctx* c = ctx;
  return ttpu_lower_program(c->rt, c->p, text, len, results, n_results);
}

/* A program's data-dependent error check (ttpu_l_check): the one place an
 * op waits for its own result. TORCHTPU_CHECK_INDICES=0 skips the read. */
ttpu_status* ttpu_rt_read_check(ttpu_runtime* rt, int dev,
                                const ttpu_result_plan* rp,
                                ttpu_pjrt_buffer* buf) {
  const char* env = getenv("TORCHTPU_CHECK_INDICES");
  if (env && !strcmp(env, "0")) return NULL;
  int64_t info[4];
  ttpu_status* s = ttpu_pjrt_buffer_to_host(rt->client, buf, info, sizeof(info));
  if (s) return s;
  rt->dev[dev].stats.d2h_bytes += (int64_t)sizeof(info);
  if (!info[0]) return NULL;
  /* fmt was written by the lowering, which consumes at most three args */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  return ttpu_status_make(rp->check_code, rp->check_fmt, (long long)info[1],
                          (long long)info[2], (long long)info[3]);
#pragma GCC diagnostic pop
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

ttpu_status* ttpu_rt_take_results(ttpu_runtime* rt, int dev,
                                  const ttpu_cache_entry* e,
                                  ttpu_pjrt_buffer** outs,
                                  ttpu_buffer* (*buffer_of)(void*, int),
                                  void* ctx) {
  ttpu_status* s = NULL;
  for (int r = 0; r < e->n_results; ++r) {
    const ttpu_result_plan* rp = &e->results[r];
    if (rp->slot == TTPU_RESULT_CHECK) {
      ttpu_status* c = s ? NULL : ttpu_rt_read_check(rt, dev, rp, outs[r]);
      if (c) s = c;
      ttpu_pjrt_buffer_destroy(rt->client, outs[r]);
      continue;
    }
    ttpu_buffer* b = rp->slot >= 0 ? buffer_of(ctx, rp->slot)
                                   : rt->dev[dev].rng_state;
    ttpu_rt_set_version(b, outs[r], rp->dtype, rp->ndim, rp->dims);
  }
  return s;
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
    s = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "out of host memory");
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
  s = ttpu_rt_take_results(rt, dev, e, outs, slot_buffer, (void*)p);
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
    ttpu_cache_entry* e = ttpu_cache_find(rt->cache, p.key, p.n_key);
    if (e) {
      e->hits++;
      rt->dev[call->device].stats.cache_hits++;
    } else {
      if (!ttpu_rt_note_reload(rt, p.key, p.n_key, ttpu_op_name(call->op)))
        describe_recompile(rt, &p);
      lower_one_ctx ctx = {rt, &p};
      s = ttpu_rt_get_program(rt, call->device, p.key, p.n_key,
                              ttpu_op_name(call->op), 1, rt->last_reason,
                              lower_one, &ctx, &e);
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
  s = run_strict(rt, call, def);
  pthread_mutex_unlock(&rt->mu);
  if (rt->mode == TTPU_MODE_DEBUG) {
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
