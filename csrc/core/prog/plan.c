/* plan.c - what one op call needs before the cache is consulted: its
 * storages, runtime scalars and signature key; and, per op, the last
 * signature compiled, to say what changed on a recompile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* off: where the view's offset is in the int pack, or -1: in the key */
static int key_geom(ttpu_plan* p, const ttpu_tensor* t, int slot, int off) {
  int rc = key_push(p, slot);
  rc |= key_push(p, t->dtype);
  rc |= key_push(p, t->ndim);
  for (int d = 0; d < t->ndim; ++d) {
    rc |= key_push(p, t->sizes[d]);
    rc |= key_push(p, t->strides[d]);
  }
  rc |= key_push(p, off >= 0 ? -1 : t->offset);
  return rc;
}

/* ------------------------------------------------------------ plan */

static int slot_of(ttpu_plan* p, ttpu_buffer* b, const ttpu_store_view* w) {
  for (int s = 0; s < p->n_slots; ++s)
    if (p->slots[s].buf == b) return s;
  ttpu_slot* sl = &p->slots[p->n_slots];
  memset(sl, 0, sizeof(*sl));
  sl->buf = b;
  sl->param = -1;
  /* In a fused window a storage's shape and value are the window's. */
  if (!w || !w->lookup(w->ctx, b, &sl->has_value, &sl->phys_dtype,
                        &sl->phys_ndim, sl->phys_dims, &sl->pad)) {
    sl->has_value = b->pb != NULL;
    sl->phys_dtype = b->phys_dtype;
    sl->phys_ndim = b->phys_ndim;
    memcpy(sl->phys_dims, b->phys_dims, sizeof(sl->phys_dims));
    sl->pad = b->pad;
  }
  if (!sl->has_value) sl->pad.mask = 0;
  return p->n_slots++;
}

static int64_t numel_of(const ttpu_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->sizes[d];
  return n;
}

int ttpu_plan_covers(const ttpu_tensor* t, size_t bytes) {
  if (t->offset != 0) return 0;
  int64_t n = numel_of(t);
  if ((size_t)n * ttpu_dtype_size(t->dtype) != bytes) return 0;
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

static ttpu_status* check_tensor(const ttpu_prog_ctx* pc, const ttpu_op_call* c,
                                 const ttpu_tensor* t, const char* what,
                                 int i) {
  if (t->ndim < 0 || t->ndim > TTPU_MAX_DIMS)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "%s %d has %d dimensions; at most %d are supported",
                            what, i, t->ndim, TTPU_MAX_DIMS);
  if ((int)t->dtype < 0 || t->dtype >= TTPU_DTYPE_COUNT)
    return ttpu_status_make(TTPU_UNIMPLEMENTED, "%s %d has an unsupported dtype",
                            what, i);
  if (t->buffer->rt != pc->owner)
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

/* Whether c is a foreach op over a list of two or more tensors. */
static int list_op(const ttpu_op_call* c) {
  int many = 0;
  for (int a = 0; a < c->n_args && !many; ++a)
    many = c->args[a].kind == TTPU_ARG_TENSORS && c->args[a].n >= 2;
  if (!many) return 0;
  const char* name = ttpu_op_name(c->op);
  return name && strstr(name, "_foreach_") != NULL;
}

/* The view x's offset appended to p's int pack when its program can take
 * it at run time (read, or written when `write`): its index there, or -1. */
static int run_time_offset(ttpu_plan* p, const ttpu_tensor* x, int slot,
                           int write) {
  if (!x->buffer || x->offset == 0 || slot < 0 ||
      !ttpu_view_offset_dynamic(x, ttpu_slot_view_bytes(&p->slots[slot]), write))
    return -1;
  p->i[p->n_i] = x->offset;
  return p->n_i++;
}

/* Makes *arr hold at least n zeroed elements of `size` bytes, growing it
 * (and *cap) when it holds fewer: 0, or -1 out of memory (arr unchanged). */
int ttpu_plan_zeroed(void* arr, int* cap, int n, size_t size) {
  void** a = arr;
  if (n > *cap) {
    int c = n > 2 * *cap ? n : 2 * *cap;
    void* m = realloc(*a, (size_t)c * size);
    if (!m) return -1;
    *a = m;
    *cap = c;
  }
  memset(*a, 0, (size_t)n * size);
  return 0;
}

ttpu_status* ttpu_plan_build(ttpu_prog_ctx* pc, const ttpu_op_call* call,
                             const ttpu_op_def* def, const ttpu_store_view* w,
                             ttpu_plan* p) {
  /* Keep the arrays (and their capacities) of an earlier build. */
  ttpu_plan kept = *p;
  memset(p, 0, sizeof(*p));
  p->slots = kept.slots;             p->cap_slots = kept.cap_slots;
  p->tensor_slot = kept.tensor_slot; p->cap_tensor_slot = kept.cap_tensor_slot;
  p->out_slot = kept.out_slot;       p->cap_out_slot = kept.cap_out_slot;
  p->out_full = kept.out_full;       p->cap_out_full = kept.cap_out_full;
  p->tensor_off = kept.tensor_off;   p->cap_tensor_off = kept.cap_tensor_off;
  p->out_off = kept.out_off;         p->cap_out_off = kept.cap_out_off;
  p->arg_scalar = kept.arg_scalar;   p->cap_arg_scalar = kept.cap_arg_scalar;
  p->f = kept.f;                     p->cap_f = kept.cap_f;
  p->i = kept.i;                     p->cap_i = kept.cap_i;
  p->list_at = kept.list_at;         p->cap_list_at = kept.cap_list_at;
  p->key = kept.key;                 p->cap_key = kept.cap_key;
  p->part_at = kept.part_at;         p->cap_parts = kept.cap_parts;
  p->part_label = kept.part_label;
  p->part_index = kept.part_index;
  p->rtens = kept.rtens;             p->cap_rtens = kept.cap_rtens;
  p->rcall = kept.rcall;             p->cap_rcall = kept.cap_rcall;
  p->rgeom = kept.rgeom;             p->cap_rgeom = kept.cap_rgeom;
  p->tensor_dyn = kept.tensor_dyn;   p->cap_tensor_dyn = kept.cap_tensor_dyn;
  p->out_dyn = kept.out_dyn;         p->cap_out_dyn = kept.cap_out_dyn;
  p->call = call;
  p->def = def;
  p->f_param = p->i_param = p->rng_param = -1;
  int nt = call->n_tensors, no = call->n_outputs, na = call->n_args;
  int n_scalars = 0;
  for (int a = 0; a < na; ++a)
    n_scalars += call->args[a].kind == TTPU_ARG_SCALAR
                     ? 1 + ttpu_dtype_is_complex(call->args[a].scalar_dtype)
                 : call->args[a].kind == TTPU_ARG_SCALARS ? call->args[a].n : 0;
  int grown = 0;
  grown |= ttpu_plan_zeroed(&p->slots, &p->cap_slots, nt + no + 1, sizeof(ttpu_slot));
  grown |= ttpu_plan_zeroed(&p->tensor_slot, &p->cap_tensor_slot, nt + 1, sizeof(int));
  grown |= ttpu_plan_zeroed(&p->out_slot, &p->cap_out_slot, no + 1, sizeof(int));
  grown |= ttpu_plan_zeroed(&p->out_full, &p->cap_out_full, no + 1, sizeof(int));
  grown |= ttpu_plan_zeroed(&p->arg_scalar, &p->cap_arg_scalar, na + 1, sizeof(int));
  grown |= ttpu_plan_zeroed(&p->f, &p->cap_f, n_scalars + 1, sizeof(double));
  grown |= ttpu_plan_zeroed(&p->i, &p->cap_i, n_scalars + nt + no + 2, sizeof(int64_t));
  grown |= ttpu_plan_zeroed(&p->tensor_off, &p->cap_tensor_off, nt + 1, sizeof(int));
  grown |= ttpu_plan_zeroed(&p->out_off, &p->cap_out_off, no + 1, sizeof(int));
  grown |= ttpu_plan_zeroed(&p->list_at, &p->cap_list_at, n_scalars + 1, sizeof(int));
  if (grown)
    return ttpu_status_oom();
  if (call->device < 0 || call->device >= pc->n_devices)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "invalid device tpu:%d",
                            call->device);

  for (int t = 0; t < nt; ++t) {
    const ttpu_tensor* x = &call->tensors[t];
    if (!x->buffer) {
      p->tensor_slot[t] = -1;
      continue;
    }
    ttpu_status* s = check_tensor(pc, call, x, "input", t);
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
    ttpu_status* s = check_tensor(pc, call, x, "output", o);
    if (s) return s;
    int sl = slot_of(p, x->buffer, w);
    p->out_slot[o] = sl;
    p->slots[sl].written = 1;
    p->out_full[o] = ttpu_plan_covers(x, x->buffer->nbytes);
    if (!p->out_full[o] && numel_of(x) > 0) p->slots[sl].read = 1;
  }
  /* Views over padded storages, and buckets (prog/bucket.c). */
  {
    ttpu_status* s = ttpu_plan_buckets(pc, p);
    if (s) return s;
    call = p->call;
  }
  for (int s = 0; s < p->n_slots; ++s) {
    ttpu_slot* sl = &p->slots[s];
    sl->has_param = sl->read && sl->has_value;
    if (sl->has_param) sl->param = p->n_params++;
  }
  int static_scalars = (def->flags & TTPU_OP_STATIC_SCALARS) != 0;
  int n_list = 0;
  for (int a = 0; a < na; ++a) {
    const ttpu_arg* g = &call->args[a];
    if (g->kind == TTPU_ARG_SCALAR && static_scalars) {
      p->arg_scalar[a] = -1; /* in the signature, not in a pack */
    } else if (g->kind == TTPU_ARG_SCALAR) {
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
      /* each distinct value once (bitwise: -0.0 and 0.0 stay apart) */
      p->arg_scalar[a] = n_list;
      int first = p->n_f;
      for (int k = 0; k < g->n; ++k) {
        int at = -1;
        for (int j = first; j < p->n_f && at < 0; ++j)
          if (!memcmp(&p->f[j], &g->floats[k], sizeof(double))) at = j;
        if (at < 0) {
          at = p->n_f;
          p->f[p->n_f++] = g->floats[k];
        }
        p->list_at[n_list++] = at;
      }
    }
  }
  /* View offsets are run-time values for a call that runs now, and part
   * of the signature for:
   * - a fused window's or a graph's views: their programs repeat with the
   *   same offsets, and constant slices let XLA fuse more;
   * - a foreach op's lists, a model's parameters, gradients and optimizer
   *   states, the same views at the same offsets every step: at run-time
   *   offsets the many views of one storage (rows of a stacked gradient)
   *   would each be a dynamic slice, which XLA's CPU compiler takes ten
   *   times as long over.
   * A view over a padded storage keeps its offset at run time even in a
   * window: it moves with the true size (the last row of a growing
   * tensor), and the window must repeat across a bucket. */
  int list = list_op(call);
  int static_off = (w && w->static_offsets) || list;
  /* a window's view that moves from window to window: its offset at run
   * time (prog/bucket.c) */
  int moves = w && w->static_offsets && !list;
#define STATIC_OFF(slot, x)                                                  \
  (static_off && ((slot) < 0 || !p->slots[slot].pad.mask) &&                 \
   !(moves && ttpu_bucket_moving_view(pc, x, w->serial)))
  for (int t = 0; t < nt; ++t)
    p->tensor_off[t] = (t < TTPU_PLAN_GROWN && p->grown >> t & 1) ||
                               STATIC_OFF(p->tensor_slot[t], &call->tensors[t])
                           ? -1
                           : run_time_offset(p, &call->tensors[t], p->tensor_slot[t], 0);
  for (int o = 0; o < no; ++o)
    p->out_off[o] = p->out_full[o] || STATIC_OFF(p->out_slot[o], &call->outputs[o])
                        ? -1
                        : run_time_offset(p, &call->outputs[o], p->out_slot[o], 1);
#undef STATIC_OFF
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
  /* a bucketed call: where its true size is, and its outputs' padding */
  rc |= key_push(p, p->dyn_at);
  if (p->dyn_at >= 0 || p->seed) {
    rc |= key_push(p, p->seed);
    rc |= key_push(p, p->poison);
    /* how far the output's padded dim reaches past the input's: fixed,
     * or (a pad by an amount taken at run time) which entry of the pad
     * list it is; the output's bucket is in its geometry */
    rc |= key_push(p, p->dyn_out_at >= 0 ? -1 - p->dyn_pad_at : p->dyn_out_n - p->dyn_n);
    rc |= key_push(p, p->dyn_b);
    for (int t = 0; t < nt && p->dyn_at >= 0; ++t) rc |= key_push(p, p->tensor_dyn[t]);
    for (int o = 0; o < no; ++o) rc |= key_push(p, p->out_dyn[o]);
    rc |= key_push(p, p->grown);
    for (int t = 0; t < nt && t < TTPU_PLAN_GROWN; ++t)
      if (p->grown >> t & 1) rc |= key_push(p, p->grown_r[t]);
  }
  for (int s = 0; s < p->n_slots; ++s) {
    const ttpu_slot* sl = &p->slots[s];
    rc |= key_part(p, "storage", s);
    rc |= key_push(p, (int64_t)sl->bytes);
    rc |= key_push(p, sl->read | sl->written << 1 | sl->has_param << 2 |
                          sl->unpad << 3);
    if (sl->pad.mask) {
      rc |= key_push(p, sl->pad.mask);
      if (sl->unpad) rc |= key_push(p, sl->pad.n);
    }
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
        if (static_scalars) {
          int64_t w[2];
          memcpy(&w[0], &g->f, sizeof(w[0]));
          memcpy(&w[1], &g->fi, sizeof(w[1]));
          rc |= key_push(p, g->i);
          rc |= key_push(p, w[0]);
          rc |= key_push(p, w[1]);
        }
        break;
      case TTPU_ARG_SCALARS:
        rc |= key_push(p, g->scalar_dtype);
        rc |= key_push(p, g->n);
        /* which elements share a value */
        for (int k = 0; k < g->n; ++k)
          rc |= key_push(p, p->list_at[p->arg_scalar[a] + k] -
                                p->list_at[p->arg_scalar[a]]);
        break;
      case TTPU_ARG_INTS:
        rc |= key_push(p, g->n);
        for (int k = 0; k < g->n; ++k)
          rc |= key_push(p, a == 1 && k == p->dyn_pad_at ? 0 : g->ints[k]);
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
    rc |= key_geom(p, &call->tensors[t], p->tensor_slot[t], p->tensor_off[t]);
  }
  for (int o = 0; o < no; ++o) {
    rc |= key_part(p, "output", o);
    if (p->out_slot[o] < 0) {
      rc |= key_push(p, -1);
      continue;
    }
    rc |= key_geom(p, &call->outputs[o], p->out_slot[o], p->out_off[o]);
    rc |= key_push(p, p->out_full[o]);
  }
  if (rc) return ttpu_status_oom();
  return NULL;
}

void ttpu_plan_free(ttpu_plan* p) {
  free(p->rtens);
  free(p->rcall);
  free(p->rgeom);
  free(p->tensor_dyn);
  free(p->out_dyn);
  free(p->slots);
  free(p->tensor_slot);
  free(p->out_slot);
  free(p->out_full);
  free(p->tensor_off);
  free(p->out_off);
  free(p->arg_scalar);
  free(p->f);
  free(p->i);
  free(p->list_at);
  free(p->key);
  free(p->part_at);
  free(p->part_label);
  free(p->part_index);
}

/* ------------------------------------------------------------ reasons */

/* The last signature seen per op (pc->last_sigs, indexed by op id), to say
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
  int64_t at_op;   /* ttpu_programs.ops_run at its last recompile */
  int warned;
};
typedef struct ttpu_last_sig last_sig;

void ttpu_plan_free_last_sigs(ttpu_prog_ctx* pc) {
    for (int i = 0; i < pc->n_last_sigs; ++i) {
    free(pc->last_sigs[i].key);
    free(pc->last_sigs[i].part_at);
    free(pc->last_sigs[i].label);
    free(pc->last_sigs[i].index);
  }
  free(pc->last_sigs);
  pc->last_sigs = NULL;
  pc->n_last_sigs = 0;
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

void ttpu_plan_note_recompile(ttpu_prog_ctx* pc, const ttpu_plan* p) {
    const char* name = ttpu_op_name(p->call->op);
  int op = p->call->op;
  if (op >= pc->n_last_sigs) {
    int n = ttpu_op_count();
    last_sig* l = realloc(pc->last_sigs, (size_t)n * sizeof(*l));
    if (!l) return;
    memset(l + pc->n_last_sigs, 0, (size_t)(n - pc->n_last_sigs) * sizeof(*l));
    pc->last_sigs = l;
    pc->n_last_sigs = n;
  }
  last_sig* prev = &pc->last_sigs[op];
  if (!prev->key) {
    snprintf(pc->last_reason, sizeof(pc->last_reason), "%s: first compile",
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
    snprintf(pc->last_reason, sizeof(pc->last_reason), "%s: recompiled: %s",
             name, what);
    prev->recompiles++;
    pc->stats[p->call->device]->recompiles++;
    /* A model's many parameter shapes recompile an op now and then, each
     * time differently; a dynamic dimension changes the same thing again
     * and again. Only the latter warns. A loop over a list (an optimizer's
     * first step cloning each parameter) recompiles the op back to back
     * with nothing in between: one burst counts once. */
    uint64_t change = 1469598103934665603ull;
    const char* end = strstr(what, " changed");
    for (const char* c = what; *c && c != end; ++c)
      change = (change ^ (unsigned char)*c) * 1099511628211ull;
    int burst = prev->at_op + 1 == pc->ops_run;
    if (change != prev->change) prev->same_change = 1;
    else if (!burst) prev->same_change++;
    prev->change = change;
    int limit = pc->opts->recompile_warn;
    if (limit > 0 && prev->same_change >= limit && !prev->warned) {
      prev->warned = 1;
      ttpu_prog_warn(pc,
               "torchtpu: %s has been recompiled %d times in a row because "
               "the same thing changed; last: %s. Each new shape compiles a "
               "new program: keep this "
               "dimension fixed (pad or bucket it), or use "
               "torch.compile(backend=\"tpu\") with dynamic shapes marked. "
               "(TORCHTPU_RECOMPILE_WARN=N sets the threshold, 0 silences)",
               name, prev->same_change, what);
    }
  }
  /* What a bucketed program serves (prog/bucket.c). */
  size_t len = strlen(pc->last_reason);
  if (p->dyn_at >= 0 && len < sizeof(pc->last_reason)) {
    int t = 0;
    while (t < p->call->n_tensors && !p->tensor_dyn[t]) ++t;
    int out = t == p->call->n_tensors; /* a factory: its output */
    int mask = out ? p->out_dyn[0] : p->tensor_dyn[t];
    int d = 0;
    while (d < 31 && !(mask >> d & 1)) ++d;
    snprintf(pc->last_reason + len, sizeof(pc->last_reason) - len,
             "; bucketed: %s %d dim %d holds sizes up to %lld (now %lld)",
             out ? "output" : "input", out ? 0 : t, d, (long long)p->dyn_b,
             (long long)p->dyn_n);
  } else if (p->seed && len < sizeof(pc->last_reason)) {
    int d = 0;
    while (d < 31 && !(p->out_dyn[0] >> d & 1)) ++d;
    snprintf(pc->last_reason + len, sizeof(pc->last_reason) - len,
             "; output 0 dim %d grows: stored padded to %lld (now %lld)", d,
             (long long)p->dyn_b, (long long)p->dyn_out_n);
  }
  prev->at_op = pc->ops_run;
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
