/* assemble.c - turns one planned op call (or a fused window of them) into a StableHLO program:
 * parameters for the storages it reads, strided views read out of them,
 * the op's lowering, and results written back into the storages (in place
 * through views, with the storage's parameter donated). */
#include <stdlib.h>
#include <string.h>

#include "../ops/ttpu_lower_ctx.h"
#include "plan.h"

/* A lowering's check message is kept whole in a result plan. */
_Static_assert(TTPU_L_CHECK_FMT_MAX <= TTPU_CHECK_FMT_MAX,
               "a check message must fit a result plan");

/* One op of a program as the framing sees it: its plan, and each of its
 * slots' value at the op's start (ERROR: no value, reads as zeros). The
 * op's lowering context (ops/lower.c) asks it for input views through
 * read_input; the write-back after the lowering updates slot_val. */
typedef struct {
  ttpu_hlo* b;
  const ttpu_plan* p;
  ttpu_val* slot_val;
} op_frame;

/* ------------------------------------------------------------ geometry */

typedef struct {
  int m;                      /* dims with size > 1 and stride != 0 */
  int idx[TTPU_MAX_DIMS];     /* their original positions, by stride desc */
  int64_t size[TTPU_MAX_DIMS], stride[TTPU_MAX_DIMS];
  int dense;                  /* a contiguous block in stride order */
  int divisible;              /* non-overlapping, each stride a multiple of
                                 the next: reachable by reshape + slice */
  int has_bcast;              /* a dim of size > 1 with stride 0 */
} geom;

static void analyse(const ttpu_tensor* t, geom* g) {
  memset(g, 0, sizeof(*g));
  for (int d = 0; d < t->ndim; ++d) {
    if (t->sizes[d] <= 1) continue;
    if (t->strides[d] == 0) {
      g->has_bcast = 1;
      continue;
    }
    int k = g->m++;
    /* insertion by stride, descending; equal strides keep original order */
    while (k > 0 && g->stride[k - 1] < t->strides[d]) {
      g->idx[k] = g->idx[k - 1];
      g->size[k] = g->size[k - 1];
      g->stride[k] = g->stride[k - 1];
      --k;
    }
    g->idx[k] = d;
    g->size[k] = t->sizes[d];
    g->stride[k] = t->strides[d];
  }
  g->dense = 1;
  g->divisible = 1;
  for (int k = 0; k < g->m; ++k) {
    if (g->stride[k] < 0) g->dense = g->divisible = 0;
    int64_t inner = k + 1 < g->m ? g->stride[k + 1] * g->size[k + 1] : 1;
    int64_t next = k + 1 < g->m ? g->stride[k + 1] : 1;
    if (g->stride[k] != inner) g->dense = 0;
    if (g->stride[k] < inner || next <= 0 || g->stride[k] % next) g->divisible = 0;
  }
}

static int64_t numel(const ttpu_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->sizes[d];
  return n;
}

/* offset + sum(iota_d * stride_d) over dims, as an i64 tensor of `sizes`. */
static ttpu_val flat_index(ttpu_hlo* b, int ndim, const int64_t* sizes,
                           const int64_t* strides, int64_t offset) {
  ttpu_type t = ttpu_type_make(TTPU_I64, ndim, sizes);
  ttpu_val acc = ttpu_hlo_const(b, t, 0, offset);
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] <= 1 || strides[d] == 0) continue;
    ttpu_val io = ttpu_hlo_iota(b, t, d);
    ttpu_val st = ttpu_hlo_const(b, t, 0, strides[d]);
    acc = ttpu_hlo_binary(b, TTPU_ADD, acc, ttpu_hlo_binary(b, TTPU_MUL, io, st));
  }
  return acc;
}

/* offset (a 0-d i64 value) added to a flat index */
static ttpu_val add_offset(ttpu_hlo* b, ttpu_val idx, ttpu_val offset) {
  const ttpu_type* t = ttpu_hlo_type(b, idx);
  if (!t) return idx;
  int64_t no_dims[1] = {0};
  ttpu_val o = ttpu_hlo_broadcast_in_dim(b, offset, *t, no_dims);
  return ttpu_hlo_binary(b, TTPU_ADD, idx, o);
}

/* ------------------------------------------------------------ storages */

/* Complex storages. XLA cannot reinterpret bits as complex, so a storage
 * is never kept physically complex: it holds the real component type with
 * twice the elements, (re, im) interleaved as in PyTorch's memory, so host
 * copies stay byte copies and views that change dtype over one storage
 * (view_as_real, view_as_complex) read the same bytes. Reading a complex
 * view pairs the components up; writing one interleaves them again. */

/* A flat real value of 2n elements (re, im, re, im, ...) as n complex. */
static ttpu_val pairs_to_complex(ttpu_hlo* b, ttpu_val flat, int64_t n) {
  int64_t d2[2] = {n, 2}, lo[2] = {0, 0}, hi[2] = {n, 1}, one[2] = {1, 1};
  ttpu_val v = ttpu_hlo_reshape(b, flat, 2, d2);
  ttpu_val re = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, v, lo, hi, one), 1, &n);
  lo[1] = 1;
  hi[1] = 2;
  ttpu_val im = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, v, lo, hi, one), 1, &n);
  return ttpu_hlo_complex(b, re, im);
}

/* A complex value of any shape as its interleaved real components, shaped
 * like v with the last dim doubled ([2] for a 0-d v). */
static ttpu_val complex_to_pairs(ttpu_hlo* b, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp;
  int64_t n = ttpu_type_numel(&t), d2[2] = {n, 1};
  ttpu_val parts[2] = {
      ttpu_hlo_reshape(b, ttpu_hlo_real(b, v), 2, d2),
      ttpu_hlo_reshape(b, ttpu_hlo_imag(b, v), 2, d2)};
  ttpu_val pairs = ttpu_hlo_concat(b, parts, 2, 1);
  if (t.ndim == 0) {
    t.ndim = 1;
    t.dims[0] = 1;
  }
  t.dims[t.ndim - 1] *= 2;
  return ttpu_hlo_reshape(b, pairs, t.ndim, t.dims);
}

/* A storage value v (phys dtype pd, any shape, nbytes in all) as a flat
 * 1-d value of dtype dt. */
static ttpu_val flat_from(ttpu_hlo* b, ttpu_val v, ttpu_dtype pd,
                          size_t nbytes, ttpu_dtype dt) {
  if (ttpu_dtype_is_complex(pd))
    return ttpu_hlo_fail(b, TTPU_INTERNAL, "a storage is physically complex");
  if (ttpu_dtype_is_complex(dt)) {
    size_t cs = ttpu_dtype_size(dt);
    if (nbytes % cs)
      return ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                           "a %zu-byte storage cannot be viewed as %s", nbytes,
                           ttpu_dtype_name(dt));
    ttpu_val re = flat_from(b, v, pd, nbytes, ttpu_dtype_real(dt));
    return pairs_to_complex(b, re, (int64_t)(nbytes / cs));
  }
  size_t es = ttpu_dtype_size(dt), ps = ttpu_dtype_size(pd);
  if (nbytes % es)
    return ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                         "a %zu-byte storage cannot be viewed as %s", nbytes,
                         ttpu_dtype_name(dt));
  int64_t n = (int64_t)(nbytes / es), pn = (int64_t)(nbytes / ps);
  v = ttpu_hlo_reshape(b, v, 1, &pn);
  if (pd == dt) return v;
  if (pd == TTPU_BOOL || dt == TTPU_BOOL) {
    /* i1 has no bit width to cast through; bool storages hold 0/1 bytes.
     * A wider storage read as bool takes its bytes (as uint8); a bool
     * storage is not read through a wider dtype, since writes through
     * such a view could not keep bytes other than 0 and 1. */
    if (ps == 1 && es == 1) return ttpu_hlo_convert(b, v, dt);
    if (dt == TTPU_BOOL)
      return ttpu_hlo_convert(b, flat_from(b, v, pd, nbytes, TTPU_U8), TTPU_BOOL);
    return ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "reinterpreting %s storage as %s",
                         ttpu_dtype_name(pd), ttpu_dtype_name(dt));
  }
  if (ps == es) return ttpu_hlo_bitcast(b, v, ttpu_type_make(dt, 1, &n));
  if (ps > es) {
    int64_t d2[2] = {pn, (int64_t)(ps / es)};
    v = ttpu_hlo_bitcast(b, v, ttpu_type_make(dt, 2, d2));
    return ttpu_hlo_reshape(b, v, 1, &n);
  }
  int64_t d2[2] = {n, (int64_t)(es / ps)};
  v = ttpu_hlo_reshape(b, v, 2, d2);
  return ttpu_hlo_bitcast(b, v, ttpu_type_make(dt, 1, &n));
}

/* The storage of slot s as a flat 1-d value of dtype dt. */
static ttpu_val flat_of(const op_frame* F, int s, ttpu_dtype dt) {
  const ttpu_slot* sl = &F->p->slots[s];
  size_t bytes = ttpu_slot_view_bytes(sl);
  if (F->slot_val[s] == TTPU_VAL_ERROR) {
    int64_t n = (int64_t)(bytes / ttpu_dtype_size(dt));
    return ttpu_hlo_const(F->b, ttpu_type_make(dt, 1, &n), 0, 0); /* unwritten */
  }
  return flat_from(F->b, F->slot_val[s], sl->phys_dtype, bytes, dt);
}

/* Inverse of flat_of: a flat value of dtype dt back into phys dtype pd,
 * shaped as dims. */
static ttpu_val unflat(ttpu_hlo* b, ttpu_val v, ttpu_dtype dt, ttpu_dtype pd,
                       int ndim, const int64_t* dims, size_t nbytes) {
  if (ttpu_dtype_is_complex(dt)) {
    v = complex_to_pairs(b, v);
    dt = ttpu_dtype_real(dt);
  }
  if (dt == TTPU_BOOL && pd != TTPU_BOOL) { /* 0/1 bytes */
    v = ttpu_hlo_convert(b, v, TTPU_U8);
    dt = TTPU_U8;
  }
  size_t es = ttpu_dtype_size(dt), ps = ttpu_dtype_size(pd);
  int64_t pn = (int64_t)(nbytes / ps);
  if (pd != dt) {
    if (pd == TTPU_BOOL && ps != es) {
      /* a bool storage holds only 0 and 1: other bytes cannot be kept */
      return ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                           "writing through a %s view of a %s storage",
                           ttpu_dtype_name(dt), ttpu_dtype_name(pd));
    } else if (pd == TTPU_BOOL) {
      v = ttpu_hlo_convert(b, v, pd);
    } else if (ps == es) {
      v = ttpu_hlo_bitcast(b, v, ttpu_type_make(pd, 1, &pn));
    } else if (es > ps) {
      int64_t d2[2] = {(int64_t)(nbytes / es), (int64_t)(es / ps)};
      v = ttpu_hlo_bitcast(b, v, ttpu_type_make(pd, 2, d2));
      v = ttpu_hlo_reshape(b, v, 1, &pn);
    } else {
      int64_t d2[2] = {pn, (int64_t)(ps / es)};
      v = ttpu_hlo_reshape(b, v, 2, d2);
      v = ttpu_hlo_bitcast(b, v, ttpu_type_make(pd, 1, &pn));
    }
  }
  return ttpu_hlo_reshape(b, v, ndim, dims);
}

/* ------------------------------------------------------------ views */

/* From a value laid out in stride order (dims g->size), the view's value:
 * back to the original dim order, size-1 dims restored, broadcasts done. */
static ttpu_val from_stride_order(ttpu_hlo* b, ttpu_val v, const geom* g,
                                  const ttpu_tensor* t) {
  if (g->m > 1) {
    int64_t perm[TTPU_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < t->ndim; ++d)
      for (int j = 0; j < g->m; ++j)
        if (g->idx[j] == d) perm[k++] = j;
    int ident = 1;
    for (int j = 0; j < g->m; ++j) ident &= perm[j] == j;
    if (!ident) v = ttpu_hlo_transpose(b, v, perm);
  }
  int64_t dims[TTPU_MAX_DIMS];
  for (int d = 0; d < t->ndim; ++d)
    dims[d] = t->strides[d] == 0 && t->sizes[d] > 1 ? 1 : t->sizes[d];
  v = ttpu_hlo_reshape(b, v, t->ndim, dims);
  if (g->has_bcast) {
    int64_t map[TTPU_MAX_DIMS];
    for (int d = 0; d < t->ndim; ++d) map[d] = d;
    v = ttpu_hlo_broadcast_in_dim(
        b, v, ttpu_type_make(t->dtype, t->ndim, t->sizes), map);
  }
  return v;
}

/* The start of the view t in the layout of rows (see read_view), from its
 * offset: 1 when the view lies inside it without wrapping around a dim. */
static int row_layout(const geom* g, int64_t total, int64_t offset,
                      int64_t* shape, int64_t* start, int64_t* limit) {
  shape[0] = total / g->stride[0];
  for (int k = 1; k < g->m; ++k) shape[k] = g->stride[k - 1] / g->stride[k];
  shape[g->m] = g->stride[g->m - 1];
  int64_t rem = offset;
  int fits = 1;
  for (int k = 0; k <= g->m; ++k) {
    int64_t unit = k < g->m ? g->stride[k] : 1;
    start[k] = rem / unit;
    rem %= unit;
    limit[k] = start[k] + (k < g->m ? g->size[k] : 1);
    if (limit[k] > shape[k]) fits = 0;
  }
  return fits;
}

int ttpu_view_offset_dynamic(const ttpu_tensor* t, size_t nbytes, int write) {
  if (numel(t) == 0) return 0;
  geom g;
  analyse(t, &g);
  int64_t total = (int64_t)(nbytes / ttpu_dtype_size(t->dtype));
  int64_t cnt = 1;
  for (int k = 0; k < g.m; ++k) cnt *= g.size[k];
  if (g.dense) return cnt != total; /* a dynamic slice, or the whole storage */
  if (write) return 1;              /* a scatter at offset + index */
  int64_t shape[TTPU_MAX_DIMS + 1], start[TTPU_MAX_DIMS + 1], limit[TTPU_MAX_DIMS + 1];
  return g.divisible && g.m > 0 && total % g.stride[0] == 0 &&
         row_layout(&g, total, t->offset, shape, start, limit);
}

/* The view t over slot s. off: the view's offset among the op's int
 * scalars (read through L), or -1 (a constant) */
static ttpu_val read_view(const op_frame* F, ttpu_lower* L, int s,
                          const ttpu_tensor* t, int off) {
  ttpu_hlo* b = F->b;
  const ttpu_slot* sl = &F->p->slots[s];
  ttpu_val doff = off >= 0 ? ttpu_lower_int_scalar(L, off) : TTPU_VAL_ERROR;
  int64_t n = numel(t);
  if (n == 0)
    return ttpu_hlo_const(b, ttpu_type_make(t->dtype, t->ndim, t->sizes), 0, 0);
  geom g;
  analyse(t, &g);
  size_t es = ttpu_dtype_size(t->dtype);
  int64_t total = (int64_t)(ttpu_slot_view_bytes(sl) / es);
  /* The common case: the whole storage, as it was written. */
  if (F->slot_val[s] != TTPU_VAL_ERROR && sl->phys_dtype == t->dtype &&
      t->offset == 0 && n == total && g.dense && !g.has_bcast) {
    int64_t sorted[TTPU_MAX_DIMS];
    for (int k = 0; k < g.m; ++k) sorted[k] = g.size[k];
    ttpu_val v = F->slot_val[s];
    v = ttpu_hlo_reshape(b, v, g.m, sorted);
    return from_stride_order(b, v, &g, t);
  }
  ttpu_val flat = flat_of(F, s, t->dtype);
  if (g.dense) {
    /* broadcast (stride-0) dims hold one element each in the storage */
    int64_t cnt = 1;
    for (int k = 0; k < g.m; ++k) cnt *= g.size[k];
    int64_t lo = t->offset, hi = t->offset + cnt, one = 1;
    if (hi > total) {
      /* a bucketed view shifted from its storage's start reads past the
       * end: that part is padding (prog/bucket.c) */
      int64_t plo = 0, phi = hi - total, pin = 0;
      flat = ttpu_hlo_pad(b, flat, ttpu_hlo_const_i(b, t->dtype, 0), &plo, &phi, &pin);
    }
    if (doff != TTPU_VAL_ERROR) flat = ttpu_hlo_dynamic_slice(b, flat, &doff, &cnt);
    else if (lo != 0 || hi != total) flat = ttpu_hlo_slice(b, flat, &lo, &hi, &one);
    int64_t sorted[TTPU_MAX_DIMS];
    for (int k = 0; k < g.m; ++k) sorted[k] = g.size[k];
    ttpu_val v = ttpu_hlo_reshape(b, flat, g.m, sorted);
    return from_stride_order(b, v, &g, t);
  }
  if (g.divisible && g.m > 0 && total % g.stride[0] == 0) {
    /* The storage as rows of stride0 elements, each row as the inner
     * strides' dims: when the view starts and ends inside that layout
     * without wrapping around a dim (a split of the last dim, a column
     * block), one reshape and one slice read it. */
    int64_t shape[TTPU_MAX_DIMS + 1], start[TTPU_MAX_DIMS + 1],
        limit[TTPU_MAX_DIMS + 1], step[TTPU_MAX_DIMS + 1];
    int fits = row_layout(&g, total, t->offset, shape, start, limit);
    for (int k = 0; k <= g.m; ++k) step[k] = 1;
    if (fits) {
      ttpu_val v = ttpu_hlo_reshape(b, flat, g.m + 1, shape);
      if (doff != TTPU_VAL_ERROR) {
        /* the same starts, computed from the run-time offset */
        ttpu_val starts[TTPU_MAX_DIMS + 1], rem = doff;
        int64_t sizes[TTPU_MAX_DIMS + 1];
        for (int k = 0; k <= g.m; ++k) {
          sizes[k] = limit[k] - start[k];
          if (k == g.m) {
            starts[k] = rem;
            break;
          }
          ttpu_val unit = ttpu_hlo_const_i(b, TTPU_I64, g.stride[k]);
          starts[k] = ttpu_hlo_binary(b, TTPU_DIV, rem, unit);
          rem = ttpu_hlo_binary(b, TTPU_REM, rem, unit);
        }
        v = ttpu_hlo_dynamic_slice(b, v, starts, sizes);
      } else {
        v = ttpu_hlo_slice(b, v, start, limit, step);
      }
      v = ttpu_hlo_reshape(b, v, g.m, g.size);
      return from_stride_order(b, v, &g, t);
    }
  }
  if (g.divisible) {
    /* Take the span [offset, offset + size0*stride0), reshape it so each
     * stride becomes a dim, and slice the sizes out. */
    int64_t span = g.size[0] * g.stride[0];
    int64_t need = t->offset + span;
    if (need > total) {
      int64_t lo = 0, hi = need - total, in = 0;
      flat = ttpu_hlo_pad(b, flat, ttpu_hlo_const_i(b, t->dtype, 0), &lo, &hi,
                          &in);
    }
    int64_t lo = t->offset, hi = need, one = 1;
    flat = ttpu_hlo_slice(b, flat, &lo, &hi, &one);
    int64_t shape[TTPU_MAX_DIMS + 1], start[TTPU_MAX_DIMS + 1],
        limit[TTPU_MAX_DIMS + 1], step[TTPU_MAX_DIMS + 1];
    shape[0] = g.size[0];
    for (int k = 1; k < g.m; ++k) shape[k] = g.stride[k - 1] / g.stride[k];
    shape[g.m] = g.stride[g.m - 1];
    for (int k = 0; k <= g.m; ++k) {
      start[k] = 0;
      step[k] = 1;
      limit[k] = k < g.m ? g.size[k] : 1;
    }
    ttpu_val v = ttpu_hlo_reshape(b, flat, g.m + 1, shape);
    v = ttpu_hlo_slice(b, v, start, limit, step);
    v = ttpu_hlo_reshape(b, v, g.m, g.size);
    return from_stride_order(b, v, &g, t);
  }
  /* Overlapping or irregular (as_strided windows): gather every element. */
  ttpu_val idx = flat_index(b, t->ndim, t->sizes, t->strides, t->offset);
  return ttpu_hlo_take(b, flat, idx);
}

/* Inverse of from_stride_order for a view without broadcast dims of size
 * > 1: v (the view's value) with its size-1 dims dropped and its dims put
 * in stride order (dims g->size). */
static ttpu_val to_stride_order(ttpu_hlo* b, ttpu_val v, const ttpu_tensor* t,
                                const geom* g) {
  int64_t kept[TTPU_MAX_DIMS];
  int nk = 0;
  for (int d = 0; d < t->ndim; ++d)
    if (t->sizes[d] > 1 && t->strides[d] != 0) kept[nk++] = t->sizes[d];
  v = ttpu_hlo_reshape(b, v, nk, kept);
  if (g->m > 1) {
    /* position of each stride-ordered dim among kept dims (orig order) */
    int64_t perm[TTPU_MAX_DIMS];
    for (int j = 0; j < g->m; ++j) {
      int pos = 0;
      for (int q = 0; q < g->m; ++q) pos += g->idx[q] < g->idx[j];
      perm[j] = pos;
    }
    v = ttpu_hlo_transpose(b, v, perm); /* the builder skips an identity */
  }
  return v;
}

/* Writes v (the view's value, dtype t->dtype) into the flat storage value
 * `flat` (same dtype) at the view's offset, or at doff (a run-time 0-d i64
 * offset) unless it is TTPU_VAL_ERROR; returns the updated flat value. */
static ttpu_val write_view(ttpu_hlo* b, ttpu_val flat, ttpu_val v,
                           const ttpu_tensor* t, int64_t total, ttpu_val doff) {
  int64_t n = numel(t);
  if (n == 0) return flat;
  geom g;
  analyse(t, &g);
  /* Broadcast dims hold one element: keep index 0 of them. */
  if (g.has_bcast) {
    int64_t start[TTPU_MAX_DIMS], limit[TTPU_MAX_DIMS], step[TTPU_MAX_DIMS];
    for (int d = 0; d < t->ndim; ++d) {
      start[d] = 0;
      step[d] = 1;
      limit[d] = t->strides[d] == 0 ? 1 : t->sizes[d];
    }
    v = ttpu_hlo_slice(b, v, start, limit, step);
  }
  v = to_stride_order(b, v, t, &g);
  int64_t cnt = 1;
  for (int k = 0; k < g.m; ++k) cnt *= g.size[k];
  if (g.dense) {
    v = ttpu_hlo_reshape(b, v, 1, &cnt);
    if (t->offset == 0 && cnt == total) return v;
    ttpu_val st = doff != TTPU_VAL_ERROR ? doff : ttpu_hlo_const_i(b, TTPU_I64, t->offset);
    return ttpu_hlo_dynamic_update_slice(b, flat, v, &st);
  }
  ttpu_val idx = doff != TTPU_VAL_ERROR
                     ? add_offset(b, flat_index(b, g.m, g.size, g.stride, 0), doff)
                     : flat_index(b, g.m, g.size, g.stride, t->offset);
  return ttpu_hlo_put(b, flat, idx, v, TTPU_SCATTER_SET);
}

/* Where a value of type ti (i32, a bucketed call's shape) holds true
 * elements along the dims of `mask`: index < n, or for a flattened dim
 * (p->dyn_merge > 1) index mod bucket < n; TTPU_VAL_ERROR for no dims. */
static ttpu_val true_part(ttpu_hlo* b, ttpu_type ti, int mask, ttpu_val n,
                          const ttpu_plan* p) {
  int64_t no_dims[1] = {0};
  ttpu_val nb = ttpu_hlo_broadcast_in_dim(b, n, ti, no_dims);
  ttpu_val keep = TTPU_VAL_ERROR;
  for (int d = 0; d < ti.ndim; ++d) {
    if (!(mask >> d & 1)) continue;
    ttpu_val io = ttpu_hlo_iota(b, ti, d);
    if (p->dyn_merge > 1)
      io = ttpu_hlo_binary(b, TTPU_REM, io, ttpu_hlo_const(b, ti, 0, p->dyn_b));
    ttpu_val in = ttpu_hlo_compare(b, TTPU_LT, io, nb);
    keep = keep == TTPU_VAL_ERROR ? in : ttpu_hlo_binary(b, TTPU_AND, keep, in);
  }
  return keep;
}

/* The op's lowering context asks for call tensor i (one with a storage)
 * here, the first time its lowering reads it. */
static ttpu_val read_input(void* user, ttpu_lower* L, int i) {
  const op_frame* F = user;
  const ttpu_plan* p = F->p;
  ttpu_val v;
  if (p->dyn_at >= 0 && i < TTPU_PLAN_GROWN && p->grown >> i & 1) {
    /* A growing view: what its storage holds along the dynamic dim, then
     * padding to the bucket (prog/bucket.c). */
    const ttpu_tensor* t = &p->call->tensors[i];
    int d = __builtin_ctz((unsigned)p->tensor_dyn[i]);
    int64_t sz[TTPU_MAX_DIMS], lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0},
        in[TTPU_MAX_DIMS] = {0};
    memcpy(sz, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    sz[d] = p->grown_r[i];
    hi[d] = t->sizes[d] - p->grown_r[i];
    ttpu_tensor r = *t;
    r.sizes = sz;
    v = read_view(F, L, p->tensor_slot[i], &r, -1);
    if (hi[d] > 0)
      v = ttpu_hlo_pad(F->b, v, ttpu_hlo_const_i(F->b, t->dtype, 0), lo, hi, in);
  } else {
    v = read_view(F, L, p->tensor_slot[i], &p->call->tensors[i], p->tensor_off[i]);
  }
  if (p->dyn_at < 0 || !p->tensor_dyn[i]) return v;
  int rule = p->bucket_rule == TTPU_B_MATMUL || p->bucket_rule == TTPU_B_NORM_BACKWARD ||
                     p->bucket_rule == TTPU_B_MEAN || p->bucket_rule == TTPU_B_ACCUMULATE ||
                     p->bucket_rule == TTPU_B_INDEX
                 ? TTPU_B_FILL_ZERO : p->bucket_rule;
  int64_t ignore_index = 0;
  if (rule == TTPU_B_NLL) {
    /* targets hold the ignore_index (the call's last int argument) */
    for (int a = 0; a < p->call->n_args; ++a)
      if (p->call->args[a].kind == TTPU_ARG_INT) ignore_index = p->call->args[a].i;
    const ttpu_type* vt = ttpu_hlo_type(F->b, v);
    rule = vt && (ttpu_dtype_is_float(vt->dtype) || ttpu_dtype_is_complex(vt->dtype))
               ? TTPU_B_FILL_ZERO : TTPU_B_NLL;
  }
  if (rule != TTPU_B_FILL_ZERO && rule != TTPU_B_NLL && rule != TTPU_B_FILL_ONE &&
      rule != TTPU_B_FILL_LOWEST && rule != TTPU_B_FILL_HIGHEST)
    return v;
  /* The padding of a bucketed dim holds the op's identity from here on. */
  ttpu_hlo* b = F->b;
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return v;
  ttpu_type t = *tp;
  ttpu_type ti = ttpu_type_make(TTPU_I32, t.ndim, t.dims);
  ttpu_val n = ttpu_hlo_convert(b, ttpu_lower_int_scalar(L, p->dyn_at), TTPU_I32);
  ttpu_val keep = true_part(b, ti, p->tensor_dyn[i], n, p);
  if (keep == TTPU_VAL_ERROR) return v;
  double f = 0;
  int64_t k = 0;
  int is_float = ttpu_dtype_is_float(t.dtype);
  size_t es = ttpu_dtype_size(t.dtype);
  int is_signed = t.dtype == TTPU_I8 || t.dtype == TTPU_I16 ||
                  t.dtype == TTPU_I32 || t.dtype == TTPU_I64;
  if (p->bucket_rule == TTPU_B_ACCUMULATE) {
    f = -0.0; /* x + -0.0 is x, -0.0 included */
  } else if (rule == TTPU_B_FILL_ONE) {
    f = 1;
    k = 1;
  } else if (rule == TTPU_B_NLL) {
    f = (double)ignore_index;
    k = ignore_index;
  } else if (rule == TTPU_B_FILL_LOWEST) {
    f = -__builtin_inf();
    k = t.dtype == TTPU_BOOL || !is_signed ? 0
        : es >= 8 ? INT64_MIN : -((int64_t)1 << (8 * es - 1));
  } else if (rule == TTPU_B_FILL_HIGHEST) {
    f = __builtin_inf();
    k = t.dtype == TTPU_BOOL ? 1
        : es >= 8 ? (is_signed ? INT64_MAX : -1)
        : is_signed ? ((int64_t)1 << (8 * es - 1)) - 1
                    : (int64_t)(((uint64_t)1 << (8 * es)) - 1);
  }
  (void)is_float;
  return ttpu_hlo_select(b, keep, v, ttpu_hlo_const(b, t, f, k));
}

/* ------------------------------------------------------------ program */

/* The shape a written slot's storage is kept in after the op: the same
 * decisions as the write-back in lower_op, without building anything, so
 * a fused window knows every storage's shape before it is lowered. */
/* The dims of the stored shape (ttpu_lower_written_phys's for a whole
 * write of t) that the view dims in `mask` become. */
static int stored_mask(const ttpu_tensor* t, int mask) {
  if (!mask) return 0;
  geom g;
  analyse(t, &g);
  int contiguous = 1;
  for (int k = 0; k + 1 < g.m; ++k) contiguous &= g.idx[k] < g.idx[k + 1];
  if (contiguous) return mask;
  int m = 0;
  for (int k = 0; k < g.m; ++k)
    if (mask >> g.idx[k] & 1) m |= 1 << k;
  return m;
}

void ttpu_lower_written_phys(const ttpu_plan* p, int sl, ttpu_dtype* dt,
                             int* nd, int64_t* dims, ttpu_pad* pad) {
  const ttpu_slot* x = &p->slots[sl];
  const ttpu_op_call* call = p->call;
  *dt = x->phys_dtype;
  *nd = x->phys_ndim;
  memcpy(dims, x->phys_dims, sizeof(int64_t) * TTPU_MAX_DIMS);
  *pad = x->pad;
  /* A padded storage keeps its shape and padding (the program writes its
   * value back in that shape; prog/bucket.c) */
  if (x->pad.mask) return;
  int have = x->has_param;
  for (int o = 0; o < call->n_outputs; ++o) {
    if (p->out_slot[o] != sl) continue;
    const ttpu_tensor* t = &call->outputs[o];
    if (p->out_full[o]) {
      geom g;
      analyse(t, &g);
      int contiguous = 1;
      for (int k = 0; k + 1 < g.m; ++k) contiguous &= g.idx[k] < g.idx[k + 1];
      if (contiguous) {
        *nd = t->ndim;
        memcpy(dims, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
      } else {
        *nd = g.m;
        memcpy(dims, g.size, sizeof(int64_t) * (size_t)g.m);
      }
      int dyn = ttpu_plan_rewritten(p) ? p->out_dyn[o] : 0;
      pad->mask = stored_mask(t, dyn);
      pad->n = x->pad.mask ? x->pad.n : p->dyn_out_n;
      if (dyn && p->dyn_merge > 1 && !x->pad.mask && t->ndim < TTPU_MAX_DIMS) {
        /* a flattened dim is stored as [merge, bucket] (contiguous) */
        int k = 0;
        for (int d = 0; d < t->ndim; ++d) {
          if (dyn >> d & 1) {
            dims[k++] = p->dyn_merge;
            pad->mask = 1 << k;
            dims[k++] = p->dyn_b;
          } else {
            dims[k++] = t->sizes[d];
          }
        }
        *nd = k;
      }
      if (p->seed && dyn) { /* padded on write: contiguous */
        for (int d = 0; d < t->ndim; ++d)
          if (dyn >> d & 1) dims[d] = p->dyn_b;
      }
      if (!pad->mask) pad->n = 0;
      *dt = t->dtype;
      if (ttpu_dtype_is_complex(*dt)) { /* complex_to_pairs' shape */
        *dt = ttpu_dtype_real(*dt);
        if (*nd == 0) dims[(*nd)++] = 1;
        dims[*nd - 1] *= 2;
      }
    } else if (!have) {
      *dt = ttpu_dtype_real(t->dtype);
      *nd = 1;
      dims[0] = (int64_t)(x->bytes / ttpu_dtype_size(*dt));
      pad->mask = 0;
    }
    have = 1;
  }
  if (!have) {
    *dt = TTPU_U8;
    *nd = 1;
    dims[0] = (int64_t)x->bytes;
    pad->mask = 0;
  }
  if (!pad->mask) pad->n = 0;
}

typedef struct {
  ttpu_val info;
  ttpu_code code;
  char fmt[TTPU_CHECK_FMT_MAX];
} lowered_check;

/* Output o of a bucketed call with NaN (integers: their highest value)
 * beyond its true size in its padded dims (TORCHTPU_BUCKET_POISON). */
static ttpu_val poison_padding(ttpu_hlo* b, ttpu_lower* L, const ttpu_plan* p,
                               int o, ttpu_val v) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return v;
  ttpu_type t = *tp;
  ttpu_type ti = ttpu_type_make(TTPU_I32, t.ndim, t.dims);
  ttpu_val n = p->dyn_out_at >= 0
                   ? ttpu_lower_int_scalar(L, p->dyn_out_at)
                   : ttpu_hlo_binary(b, TTPU_ADD, ttpu_lower_int_scalar(L, p->dyn_at),
                                     ttpu_hlo_const_i(b, TTPU_I64, p->dyn_out_n - p->dyn_n));
  ttpu_val keep = true_part(b, ti, p->out_dyn[o], ttpu_hlo_convert(b, n, TTPU_I32), p);
  if (keep == TTPU_VAL_ERROR || ttpu_dtype_is_complex(t.dtype)) return v;
  size_t es = ttpu_dtype_size(t.dtype);
  int64_t hi = t.dtype == TTPU_BOOL ? 1
               : es >= 8 ? INT64_MAX : ((int64_t)1 << (8 * es - 1)) - 1;
  return ttpu_hlo_select(b, keep, v, ttpu_hlo_const(b, t, __builtin_nan(""), hi));
}

/* Lowers one op into F->b through its lowering context L: F->slot_val
 * holds each slot's value at the op's start (ERROR: no value, reads as
 * zeros); on success every written slot holds its storage's new value. */
static ttpu_status* lower_op(op_frame* F, ttpu_lower* L) {
  const ttpu_plan* p = F->p;
  const ttpu_op_call* call = p->call;
  ttpu_hlo* b = F->b;
  /* Every output with a storage comes back set, of its sizes. */
  ttpu_status* s = ttpu_lower_run(L);
  if (s) return s;

  /* Write each output into its storage, in output order. A slot's running
   * value is its phys-shaped value; `cur_*` describe it. */
  for (int sl = 0; sl < p->n_slots; ++sl) {
    const ttpu_slot* x = &p->slots[sl];
    if (!x->written) continue;
    ttpu_val cur = F->slot_val[sl];
    ttpu_dtype cur_dt = x->phys_dtype;
    int cur_nd = x->phys_ndim;
    int64_t cur_dims[TTPU_MAX_DIMS];
    memcpy(cur_dims, x->phys_dims, sizeof(cur_dims));
    if (x->unpad) ttpu_pad_logical(&x->pad, cur_nd, x->phys_dims, cur_dims);
    size_t bytes = ttpu_slot_view_bytes(x);
    int have = cur != TTPU_VAL_ERROR;
    for (int o = 0; o < call->n_outputs; ++o) {
      if (p->out_slot[o] != sl) continue;
      const ttpu_tensor* t = &call->outputs[o];
      ttpu_val v = ttpu_hlo_convert(b, ttpu_lower_output(L, o), t->dtype);
      if (p->poison && p->out_dyn[o] && !x->pad.mask)
        v = poison_padding(b, L, p, o, v);
      if (p->out_full[o]) {
        geom g;
        analyse(t, &g);
        /* Keep the row-major shape of a contiguous result as the
         * storage's shape; a permuted dense result is stored in stride
         * order. */
        int contiguous = 1;
        for (int k = 0; k + 1 < g.m; ++k) contiguous &= g.idx[k] < g.idx[k + 1];
        cur = contiguous ? v : to_stride_order(b, v, t, &g);
        if (ttpu_dtype_is_complex(t->dtype)) cur = complex_to_pairs(b, cur);
        if (p->dyn_merge > 1 && ttpu_plan_rewritten(p) && p->out_dyn[o] &&
            !x->pad.mask) {
          ttpu_dtype wdt;
          int wnd;
          int64_t wdims[TTPU_MAX_DIMS];
          ttpu_pad wpad;
          ttpu_lower_written_phys(p, sl, &wdt, &wnd, wdims, &wpad);
          cur = ttpu_hlo_reshape(b, cur, wnd, wdims);
        }
        if (p->seed && ttpu_plan_rewritten(p) && p->out_dyn[o]) {
          /* a growing tensor's first padded version (prog/bucket.c) */
          int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0},
                  in[TTPU_MAX_DIMS] = {0};
          for (int d = 0; d < t->ndim; ++d)
            if (p->out_dyn[o] >> d & 1) hi[d] = p->dyn_b - t->sizes[d];
          cur = ttpu_hlo_pad(b, cur, ttpu_hlo_const_i(b, t->dtype, 0), lo, hi, in);
        }
      } else {
        size_t es = ttpu_dtype_size(t->dtype);
        int64_t total = (int64_t)(bytes / es);
        ttpu_val flat;
        if (have) {
          flat = flat_from(b, cur, cur_dt, bytes, t->dtype);
        } else {
          int64_t n = total;
          flat = ttpu_hlo_const(b, ttpu_type_make(t->dtype, 1, &n), 0, 0);
        }
        ttpu_val doff = p->out_off[o] >= 0 ? ttpu_lower_int_scalar(L, p->out_off[o])
                                           : TTPU_VAL_ERROR;
        flat = write_view(b, flat, v, t, total, doff);
        cur = have ? unflat(b, flat, t->dtype, cur_dt, cur_nd, cur_dims,
                            bytes)
               : ttpu_dtype_is_complex(t->dtype) ? complex_to_pairs(b, flat)
                                                 : flat;
      }
      have = 1;
      /* the shape bookkeeping is ttpu_lower_written_phys's, one output at
       * a time */
      const ttpu_type* ct = ttpu_hlo_type(b, cur);
      if (!ct) return ttpu_hlo_take_status(b);
      cur_dt = ct->dtype;
      cur_nd = ct->ndim;
      memcpy(cur_dims, ct->dims, sizeof(int64_t) * (size_t)ct->ndim);
    }
    if (!have) { /* only empty outputs: the storage stays zeros */
      int64_t n = (int64_t)x->bytes;
      cur = ttpu_hlo_const(b, ttpu_type_make(TTPU_U8, 1, &n), 0, 0);
    }
    if (x->pad.mask && !x->unpad) {
      /* a padded storage keeps its shape (ttpu_lower_written_phys) */
      const ttpu_type* ct = ttpu_hlo_type(b, cur);
      int same = ct && ct->dtype == x->phys_dtype && ct->ndim == x->phys_ndim;
      for (int d = 0; same && d < x->phys_ndim; ++d) same = ct->dims[d] == x->phys_dims[d];
      if (ct && !same) {
        cur = flat_from(b, cur, ct->dtype, x->bytes, x->phys_dtype);
        cur = ttpu_hlo_reshape(b, cur, x->phys_ndim, x->phys_dims);
      }
    }
    if (x->unpad) {
      /* padded again as it came: the true elements in the padded layout */
      int64_t logical[TTPU_MAX_DIMS], lo[TTPU_MAX_DIMS] = {0},
              hi[TTPU_MAX_DIMS] = {0}, in[TTPU_MAX_DIMS] = {0};
      ttpu_pad_logical(&x->pad, x->phys_ndim, x->phys_dims, logical);
      cur = flat_from(b, cur, cur_dt, bytes, x->phys_dtype);
      cur = ttpu_hlo_reshape(b, cur, x->phys_ndim, logical);
      for (int d = 0; d < x->phys_ndim; ++d) hi[d] = x->phys_dims[d] - logical[d];
      cur = ttpu_hlo_pad(b, cur, ttpu_hlo_const_i(b, x->phys_dtype, 0), lo, hi, in);
    }
    F->slot_val[sl] = cur;
  }
  return ttpu_hlo_take_status(b);
}

ttpu_status* ttpu_lower_prog(const ttpu_prog* g, char** text, size_t* text_len,
                             ttpu_result_plan** results, int* n_results) {
  *text = NULL;
  *results = NULL;
  *n_results = 0;
  ttpu_hlo* b = ttpu_hlo_create();
  if (b) ttpu_hlo_set_optimize(b, 1);
  ttpu_val* vals = malloc(((size_t)g->n_stores + 1) * sizeof(ttpu_val));
  int cap_checks = 4, n_checks = 0;
  lowered_check* checks = malloc((size_t)cap_checks * sizeof(*checks));
  ttpu_result_plan* res = NULL;
  ttpu_val* rvals = NULL;
  /* The program's scalar packs and the rng state as the ops so far left
   * it. */
  ttpu_val fpack = TTPU_VAL_ERROR, ipack = TTPU_VAL_ERROR,
           rng_state = TTPU_VAL_ERROR;
  ttpu_status* s = NULL;
  if (!b || !vals || !checks) {
    s = ttpu_status_oom();
    goto done;
  }
  for (int k = 0; k < g->n_stores; ++k) vals[k] = TTPU_VAL_ERROR;
  /* Parameters, in index order. A store with a result donates its
   * parameter to it; so does the rng state. */
  for (int param = 0; param < g->n_params; ++param) {
    for (int k = 0; k < g->n_stores; ++k) {
      const ttpu_prog_store* x = &g->stores[k];
      if (x->param == param)
        vals[k] = ttpu_hlo_param(b, ttpu_type_make(x->dtype, x->ndim, x->dims),
                                 x->result);
    }
    if (param == g->f_param) {
      int64_t n = g->n_f;
      fpack = ttpu_hlo_param(b, ttpu_type_make(TTPU_F64, 1, &n), -1);
    }
    if (param == g->i_param) {
      int64_t n = g->n_i;
      ipack = ttpu_hlo_param(b, ttpu_type_make(TTPU_I64, 1, &n), -1);
    }
    if (param == g->rng_param) {
      int64_t two = 2;
      rng_state = ttpu_hlo_param(b, ttpu_type_make(TTPU_U64, 1, &two),
                                 g->rng_result);
    }
  }

  for (int i = 0; i < g->n_ops && !s; ++i) {
    const ttpu_prog_op* op = &g->ops[i];
    const ttpu_plan* p = op->plan;
    const ttpu_op_call* call = p->call;
    op_frame F = {.b = b, .p = p};
    ttpu_lower_setup su = {
        .read_input = read_input, .user = &F,
        .fpack = fpack, .ipack = ipack,
        .arg_scalar = p->arg_scalar, .list_at = p->list_at,
        .f_map = op->f_map, .i_map = op->i_map,
        .f_off = op->f_off, .i_off = op->i_off,
        .rng_state = rng_state,
        .tensor_dyn = p->dyn_at >= 0 ? p->tensor_dyn : NULL,
        .dyn_at = p->dyn_at,
        .out_dyn = p->dyn_at >= 0 ? p->out_dyn : NULL};
    ttpu_lower* L = NULL;
    s = ttpu_lower_begin(b, p->def, call, &su, &L);
    F.slot_val = malloc(((size_t)p->n_slots + 1) * sizeof(ttpu_val));
    if (!s && !F.slot_val) s = ttpu_status_oom();
    if (!s) {
      for (int sl = 0; sl < p->n_slots; ++sl) {
        ttpu_val v = vals[op->store[sl]];
        const ttpu_slot* x = &p->slots[sl];
        if (x->has_param && x->unpad && v != TTPU_VAL_ERROR) {
          /* the storage's true elements, for views that do not map into
           * its padded layout (prog/bucket.c) */
          int64_t logical[TTPU_MAX_DIMS], lo[TTPU_MAX_DIMS] = {0},
                  one[TTPU_MAX_DIMS];
          ttpu_pad_logical(&x->pad, x->phys_ndim, x->phys_dims, logical);
          for (int d = 0; d < x->phys_ndim; ++d) one[d] = 1;
          v = ttpu_hlo_reshape(b, v, x->phys_ndim, x->phys_dims);
          v = ttpu_hlo_slice(b, v, lo, logical, one);
        }
        F.slot_val[sl] = p->slots[sl].has_param ? v : TTPU_VAL_ERROR;
        if (p->slots[sl].has_param && v == TTPU_VAL_ERROR)
          s = ttpu_status_make(TTPU_INTERNAL, "%s reads a storage with no value",
                               ttpu_op_name(call->op));
      }
      if (!s) s = lower_op(&F, L);
      if (!s) {
        for (int sl = 0; sl < p->n_slots; ++sl)
          if (p->slots[sl].written) vals[op->store[sl]] = F.slot_val[sl];
        rng_state = ttpu_lower_rng_state(L);
        ttpu_code code;
        const char* fmt;
        ttpu_val info = ttpu_lower_check(L, &code, &fmt);
        if (info != TTPU_VAL_ERROR) {
          if (n_checks == cap_checks) {
            cap_checks *= 2;
            lowered_check* c = realloc(checks, (size_t)cap_checks * sizeof(*c));
            if (!c) s = ttpu_status_oom();
            else checks = c;
          }
          if (!s) {
            checks[n_checks].info = info;
            checks[n_checks].code = code;
            memset(checks[n_checks].fmt, 0, sizeof(checks[n_checks].fmt));
            memcpy(checks[n_checks].fmt, fmt, strlen(fmt) + 1);
            n_checks++;
          }
        }
      }
      if (s && g->n_ops > 1)
        s = ttpu_status_annotate(s, "op %d of %d in a fused window", i + 1,
                                 g->n_ops);
    }
    ttpu_lower_end(L);
    free(F.slot_val);
  }
  if (s) goto done;

  /* Results: each store's final value in its result slot, the rng state,
   * then the checks. */
  int n_res = g->n_results + n_checks;
  res = calloc((size_t)n_res + 1, sizeof(*res));
  rvals = malloc(((size_t)n_res + 1) * sizeof(ttpu_val));
  if (!res || !rvals) {
    s = ttpu_status_oom();
    goto done;
  }
  for (int r = 0; r < g->n_results; ++r) rvals[r] = TTPU_VAL_ERROR;
  for (int k = 0; k < g->n_stores; ++k) {
    const ttpu_prog_store* x = &g->stores[k];
    int r = x->result;
    if (r < 0) continue;
    ttpu_val v = vals[k];
    const ttpu_type* t = v == TTPU_VAL_ERROR ? NULL : ttpu_hlo_type(b, v);
    if (t && x->param >= 0) {
      /* A donated parameter aliases its result: the result keeps the
       * parameter's shape and dtype (TPU compilers require the aliased
       * pair to match in layout, and the storage's shape stays stable). */
      int same = t->dtype == x->dtype && t->ndim == x->ndim;
      for (int d = 0; same && d < x->ndim; ++d) same = t->dims[d] == x->dims[d];
      if (!same) {
        v = flat_from(b, v, t->dtype, x->nbytes, x->dtype);
        v = ttpu_hlo_reshape(b, v, x->ndim, x->dims);
      }
    }
    rvals[r] = v;
    res[r].slot = k;
  }
  if (g->rng_result >= 0) {
    rvals[g->rng_result] = rng_state;
    res[g->rng_result].slot = -1;
  }
  for (int r = 0; r < g->n_results; ++r) {
    const ttpu_type* t =
        rvals[r] == TTPU_VAL_ERROR ? NULL : ttpu_hlo_type(b, rvals[r]);
    if (!t) {
      s = ttpu_status_make(TTPU_INTERNAL, "program result %d has no value", r);
      goto done;
    }
    res[r].dtype = t->dtype;
    res[r].ndim = t->ndim;
    memcpy(res[r].dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
  }
  for (int c = 0; c < n_checks; ++c) {
    int r = g->n_results + c;
    rvals[r] = checks[c].info;
    res[r].slot = TTPU_RESULT_CHECK;
    res[r].dtype = TTPU_I64;
    res[r].ndim = 1;
    res[r].dims[0] = 4;
    res[r].check_code = checks[c].code;
    memcpy(res[r].check_fmt, checks[c].fmt, sizeof(checks[c].fmt));
  }
  ttpu_hlo_return(b, rvals, n_res);
  s = ttpu_hlo_take_status(b);
  if (!s) s = ttpu_hlo_print(b, text, text_len);
  if (!s) {
    *results = res;
    *n_results = n_res;
    res = NULL;
  }
done:
  if (s && b) ttpu_status_free(ttpu_hlo_take_status(b));
  ttpu_hlo_free(b);
  free(vals);
  free(checks);
  free(res);
  free(rvals);
  return s;
}

ttpu_status* ttpu_lower_program(const ttpu_plan* p, char** text,
                                size_t* text_len, ttpu_result_plan** results,
                                int* n_results) {
  /* One op as a program of one: its slots are the program's stores. */
  ttpu_prog_store* st = calloc((size_t)p->n_slots + 1, sizeof(*st));
  int* ident = calloc((size_t)p->n_slots + 1, sizeof(int));
  if (!st || !ident) {
    free(st);
    free(ident);
    return ttpu_status_oom();
  }
  int r = 0;
  for (int sl = 0; sl < p->n_slots; ++sl) {
    const ttpu_slot* x = &p->slots[sl];
    ident[sl] = sl;
    st[sl].nbytes = x->bytes;
    st[sl].param = x->param;
    st[sl].result = x->written ? r++ : -1;
    st[sl].dtype = x->phys_dtype;
    st[sl].ndim = x->phys_ndim;
    memcpy(st[sl].dims, x->phys_dims, sizeof(st[sl].dims));
  }
  ttpu_prog_op op = {.plan = p, .store = ident};
  ttpu_prog g;
  memset(&g, 0, sizeof(g));
  g.n_ops = 1;
  g.ops = &op;
  g.n_stores = p->n_slots;
  g.stores = st;
  g.n_params = p->n_params;
  g.f_param = p->f_param;
  g.n_f = p->n_f;
  g.i_param = p->i_param;
  g.n_i = p->n_i;
  g.rng_param = p->rng_param;
  g.rng_result = p->rng_param >= 0 ? r : -1;
  g.n_results = r + (p->rng_param >= 0);
  ttpu_status* s = ttpu_lower_prog(&g, text, text_len, results, n_results);
  free(st);
  free(ident);
  return s;
}
