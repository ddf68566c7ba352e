/* matrix.c - small matrix and vector functions that are not products:
 * trace, the 3-vector cross product. */
#include "ttpu_lower.h"

static ttpu_dtype opmath(ttpu_dtype dt) {
  return dt == TTPU_BF16 || dt == TTPU_F16 ? TTPU_F32 : dt;
}

/* trace(self): the sum of the main diagonal of a matrix, in sum's result
 * dtype (integers and bool sum to int64). */
static ttpu_status* lower_trace(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = opmath(ot.dtype);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md);
  ttpu_type tx = ttpu_l_type(L, x);
  if (tx.ndim != 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "trace: expected a matrix, but got tensor with dim %d",
                            tx.ndim);
  ttpu_type ti = tx;
  ti.dtype = TTPU_I64;
  ttpu_val diag = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, 0), ttpu_hlo_iota(b, ti, 1));
  ttpu_val z = ttpu_hlo_const(b, tx, 0, 0);
  int64_t both[2] = {0, 1};
  ttpu_val r = ttpu_hlo_reduce(b, ttpu_hlo_select(b, diag, x, z), TTPU_RED_SUM, both, 2);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ttpu_type_make(md, ot.ndim, ot.dims)));
  return NULL;
}

/* Component k (0..2) of x along dim. */
static ttpu_val comp(ttpu_hlo* b, ttpu_val x, int dim, int k) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int d = 0; d < tp->ndim; ++d) hi[d] = tp->dims[d], st[d] = 1;
  lo[dim] = k;
  hi[dim] = k + 1;
  return ttpu_hlo_slice(b, x, lo, hi, st);
}

/* linalg_cross(self, other, *, int dim=-1): both broadcast to the output's
 * shape (the meta kernel has checked that dim has size 3 in each). */
static ttpu_status* lower_linalg_cross(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype md = opmath(ot.dtype);
  ttpu_val x = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), md), ot.ndim, ot.dims);
  ttpu_val y = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), md), ot.ndim, ot.dims);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, -1), ot.ndim);
  ttpu_val parts[3];
  for (int k = 0; k < 3; ++k) {
    int i = (k + 1) % 3, j = (k + 2) % 3;
    parts[k] = ttpu_hlo_binary(
        b, TTPU_SUB, ttpu_hlo_binary(b, TTPU_MUL, comp(b, x, dim, i), comp(b, y, dim, j)),
        ttpu_hlo_binary(b, TTPU_MUL, comp(b, x, dim, j), comp(b, y, dim, i)));
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_concat(b, parts, 3, dim));
  return NULL;
}

const ttpu_op_def ttpu_ops_matrix[] = {
    {"trace", lower_trace, 0},
    {"trace.out", lower_trace, 0},
    {"linalg_cross", lower_linalg_cross, 0},
    {"linalg_cross.out", lower_linalg_cross, 0},
    {NULL, NULL, 0},
};
