/* common.c - helpers shared by the op families. */
#include <string.h>

#include "ttpu_lower.h"

void ttpu_l_broadcast_pair(ttpu_lower* L, ttpu_val* a, ttpu_val* b,
                           ttpu_dtype dt) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type ta = ttpu_l_type(L, *a), tb = ttpu_l_type(L, *b);
  int nd = ta.ndim > tb.ndim ? ta.ndim : tb.ndim;
  int64_t dims[TTPU_MAX_DIMS];
  for (int i = 0; i < nd; ++i) {
    int ia = i - (nd - ta.ndim), ib = i - (nd - tb.ndim);
    int64_t da = ia >= 0 ? ta.dims[ia] : 1, db = ib >= 0 ? tb.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT,
                    "The size of tensor a (%lld) must match the size of "
                    "tensor b (%lld) at non-singleton dimension %d",
                    (long long)da, (long long)db, i);
      return;
    }
    dims[i] = da == 1 ? db : da;
  }
  *a = ttpu_hlo_broadcast_to(h, ttpu_hlo_convert(h, *a, dt), nd, dims);
  *b = ttpu_hlo_broadcast_to(h, ttpu_hlo_convert(h, *b, dt), nd, dims);
}

int64_t ttpu_l_dim(ttpu_lower* L, int64_t dim, int ndim) {
  int64_t r = ndim > 0 ? ndim : 1;
  if (dim < -r || dim >= r) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INDEX_ERROR,
                  "Dimension out of range (expected to be in range of [%lld, "
                  "%lld], but got %lld)",
                  (long long)-r, (long long)(r - 1), (long long)dim);
    return 0;
  }
  return dim < 0 ? dim + r : dim;
}

ttpu_val ttpu_l_reduce_mask(ttpu_lower* L, ttpu_val x, ttpu_redop op,
                            const int* mask) {
  ttpu_type t = ttpu_l_type(L, x);
  int64_t dims[TTPU_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t.ndim; ++d)
    if (mask[d]) dims[n++] = d;
  return ttpu_hlo_reduce(ttpu_l_hlo(L), x, op, dims, n);
}

ttpu_val ttpu_l_linspace(ttpu_hlo* b, ttpu_val start, ttpu_val end, int64_t steps, ttpu_dtype ct) {
  if (steps == 1) return ttpu_hlo_broadcast_to(b, start, 1, &steps);
  ttpu_val step = ttpu_hlo_binary(
      b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_SUB, end, start),
      ttpu_hlo_opaque(b, ttpu_hlo_const_f(b, ct, (double)(steps - 1))));
  ttpu_type ti = ttpu_type_make(TTPU_I64, 1, &steps);
  ttpu_val i = ttpu_hlo_iota(b, ti, 0);
  ttpu_val back = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_const(b, ti, 0, steps - 1), i);
  ttpu_val sb = ttpu_hlo_broadcast_to(b, step, 1, &steps);
  ttpu_val lo = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_broadcast_to(b, start, 1, &steps),
                                ttpu_hlo_binary(b, TTPU_MUL, sb, ttpu_hlo_convert(b, i, ct)));
  ttpu_val hi = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_broadcast_to(b, end, 1, &steps),
                                ttpu_hlo_binary(b, TTPU_MUL, sb, ttpu_hlo_convert(b, back, ct)));
  ttpu_val first = ttpu_hlo_compare(b, TTPU_LT, i, ttpu_hlo_const(b, ti, 0, steps / 2));
  return ttpu_hlo_select(b, first, lo, hi);
}

ttpu_val ttpu_l_bcast_back(ttpu_lower* L, ttpu_val r, ttpu_type t,
                           const int* mask) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t keep[TTPU_MAX_DIMS];
  for (int d = 0; d < t.ndim; ++d) keep[d] = mask[d] ? 1 : t.dims[d];
  r = ttpu_hlo_reshape(b, r, t.ndim, keep);
  return ttpu_hlo_broadcast_to(b, r, t.ndim, t.dims);
}

ttpu_val ttpu_l_gather_dim(ttpu_hlo* b, ttpu_val x, int dim, ttpu_val idx) {
  const ttpu_type* tx = ttpu_hlo_type(b, x);
  const ttpu_type* ti = ttpu_hlo_type(b, idx);
  if (!tx || !ti) return TTPU_VAL_ERROR;
  ttpu_type out = *tx;
  int64_t offs[TTPU_MAX_DIMS], sizes[TTPU_MAX_DIMS], d = dim;
  int no = 0;
  for (int i = 0; i < tx->ndim; ++i) {
    if (i != dim) offs[no++] = i;
    sizes[i] = i == dim ? 1 : tx->dims[i];
  }
  out.dims[dim] = ti->dims[0];
  ttpu_gather_dims dn;
  memset(&dn, 0, sizeof(dn));
  dn.n_offset_dims = no;
  dn.offset_dims = offs;
  dn.n_collapsed_slice_dims = 1;
  dn.collapsed_slice_dims = &d;
  dn.n_start_index_map = 1;
  dn.start_index_map = &d;
  dn.index_vector_dim = 1;
  dn.slice_sizes = sizes;
  return ttpu_hlo_gather(b, x, idx, &dn, out);
}

ttpu_val ttpu_l_scatter_dim(ttpu_hlo* b, ttpu_val x, int dim, ttpu_val idx,
                            ttpu_val upd, int combine) {
  const ttpu_type* tx = ttpu_hlo_type(b, x);
  if (!tx) return TTPU_VAL_ERROR;
  int64_t win[TTPU_MAX_DIMS], d = dim;
  int nw = 0;
  for (int i = 0; i < tx->ndim; ++i)
    if (i != dim) win[nw++] = i;
  ttpu_scatter_dims dn;
  memset(&dn, 0, sizeof(dn));
  dn.n_update_window_dims = nw;
  dn.update_window_dims = win;
  dn.n_inserted_window_dims = 1;
  dn.inserted_window_dims = &d;
  dn.n_scatter_dims_to_operand_dims = 1;
  dn.scatter_dims_to_operand_dims = &d;
  dn.index_vector_dim = 1;
  return ttpu_hlo_scatter(b, x, idx, upd, &dn, combine);
}

ttpu_precision ttpu_l_precision(ttpu_lower* L, ttpu_dtype dt) {
  if (dt == TTPU_F64) return TTPU_PREC_HIGHEST;
  if (dt != TTPU_F32) return TTPU_PREC_DEFAULT;
  /* PyTorch's setting covers float32 only, as on CUDA (TF32). */
  switch (ttpu_l_call(L)->matmul_precision) {
    case 1: return TTPU_PREC_HIGH;      /* "high" */
    case 2: return TTPU_PREC_DEFAULT;   /* "medium" */
    default: return TTPU_PREC_HIGHEST;  /* "highest" */
  }
}
