/* matrix_exp.c - the matrix exponential (linalg_matrix_exp), by scaling
 * and squaring: exp(A) = exp(A / 2^s)^(2^s), with s per matrix chosen
 * from its 1-norm so that the scaled matrix is within the radius where a
 * degree-18 Taylor polynomial is exact to the dtype's rounding. The
 * polynomial costs seven matrix products (Paterson-Stockmeyer: A^2, A^3,
 * A^4, then Horner in A^4); the squarings run in an XLA while loop, as
 * many as the largest s of the batch (matrices needing fewer keep their
 * value), so the program is the same for any norm. Its backward
 * (linalg_matrix_exp_differential) takes the exponential of a block matrix
 * twice the size: this op again. bfloat16/float16 are computed in float32
 * and rounded once; complex matrices in their own dtype, with the bound of
 * their component dtype (the remainder bound holds for complex entries). */
#include <math.h>

#include "matrix.h"

enum { kDegree = 18 };

/* Largest 1-norm for which the remainder of the degree-18 Taylor series,
 * theta^19 / 19!, is below the dtype's rounding (relative to exp's size):
 * about 1e-8 at 3.0, 8e-18 at 1.0. */
static const double kThetaF32 = 3.0, kThetaF64 = 1.0;
/* Squarings beyond this overflow any float dtype anyway. */
enum { kMaxSquarings = 1100 };

typedef struct {
  ttpu_type tm;      /* (batch..., n, n), compute dtype */
  ttpu_val s;        /* squarings per matrix (batch...), i64 */
  ttpu_val smax;     /* 0-d i64 */
  ttpu_precision prec;
} squaring;

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

static ttpu_val mm(ttpu_hlo* b, ttpu_val x, ttpu_val y, ttpu_type t, ttpu_precision prec) {
  int nd = t.ndim;
  int64_t batch[TTPU_MAX_DIMS];
  for (int d = 0; d < nd - 2; ++d) batch[d] = d;
  int64_t cx = nd - 1, cy = nd - 2;
  return ttpu_hlo_dot_general(b, x, y, batch, batch, nd - 2, &cx, &cy, 1, t.dtype, prec);
}

/* A per-matrix value (batch...) broadcast over each matrix's entries. */
static ttpu_val per_matrix(ttpu_hlo* b, ttpu_val v, ttpu_type tm) {
  const ttpu_type* tp = ttpu_hlo_type(b, v);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type to = tm;
  to.dtype = tp->dtype;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < tm.ndim - 2; ++d) map[d] = d;
  return ttpu_hlo_broadcast_in_dim(b, v, to, map);
}

static ttpu_val sq_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const squaring* q = ctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0], q->smax);
}

static void sq_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const squaring* q = ctx;
  const ttpu_type* tp = ttpu_hlo_type(b, q->s);
  if (!tp) return;
  ttpu_val it = ttpu_hlo_broadcast_to(b, st[0], tp->ndim, tp->dims);
  ttpu_val more = per_matrix(b, ttpu_hlo_compare(b, TTPU_LT, it, q->s), q->tm);
  next[1] = ttpu_hlo_select(b, more, mm(b, st[1], st[1], q->tm, q->prec), st[1]);
  next[0] = ttpu_hlo_binary(b, TTPU_ADD, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
}

/* linalg_matrix_exp(self) */
static ttpu_status* lower_matrix_exp(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val a = ttpu_l_tensor(L, 0);
  ttpu_type ta = ttpu_l_type(L, a);
  if (ttpu_type_numel(&ot) == 0) {
    ttpu_l_set_out(L, 0, kc(b, ot, 0));
    return NULL;
  }
  ttpu_dtype cd = ttpu_dtype_is_complex(ta.dtype) ? ta.dtype : ta.dtype == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  ttpu_type tm = ta;
  tm.dtype = cd;
  a = ttpu_hlo_convert(b, a, cd);
  int nd = tm.ndim;
  ttpu_precision prec = ttpu_l_precision(L, cd);

  /* s = ceil(log2(|A|_1 / theta)), at least 0; a non-finite norm takes
   * none (the polynomial then carries the inf/NaN through). */
  int64_t rows = nd - 2;
  ttpu_val colsum = ttpu_hlo_reduce(b, ttpu_hlo_unary(b, TTPU_ABS, a), TTPU_RED_SUM, &rows, 1);
  int64_t last = nd - 2;
  ttpu_val norm = ttpu_hlo_reduce(b, colsum, TTPU_RED_MAX, &last, 1); /* (batch...) */
  ttpu_type tb = ttpu_l_type(L, norm);
  double theta = ttpu_dtype_real(cd) == TTPU_F64 ? kThetaF64 : kThetaF32;
  ttpu_val ratio = ttpu_hlo_binary(b, TTPU_DIV, norm, kc(b, tb, theta));
  ttpu_val ls = ttpu_hlo_unary(b, TTPU_CEIL, ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_unary(b, TTPU_LOG, ratio),
                                                             kc(b, tb, log(2.0))));
  ls = ttpu_hlo_select(b, ttpu_hlo_unary(b, TTPU_IS_FINITE, ls), ls, kc(b, tb, 0));
  ls = ttpu_hlo_clamp(b, kc(b, tb, 0), ls, kc(b, tb, kMaxSquarings));
  /* 2^-s exactly, in two halves so that neither underflows */
  ttpu_val half = ttpu_hlo_unary(b, TTPU_FLOOR, ttpu_hlo_binary(b, TTPU_MUL, ls, kc(b, tb, 0.5)));
  ttpu_val f1 = ttpu_hlo_binary(b, TTPU_POW, kc(b, tb, 0.5), half);
  ttpu_val f2 = ttpu_hlo_binary(b, TTPU_POW, kc(b, tb, 0.5), ttpu_hlo_binary(b, TTPU_SUB, ls, half));
  ttpu_val s1 = per_matrix(b, ttpu_hlo_convert(b, f1, cd), tm), s2 = per_matrix(b, ttpu_hlo_convert(b, f2, cd), tm);
  ttpu_val x = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_MUL, a, s1), s2);

  /* Taylor: sum_k x^k / k!, as sum_j B_j (x^4)^j with
   * B_j = c_4j I + c_4j+1 x + c_4j+2 x^2 + c_4j+3 x^3. */
  ttpu_val eye = ttpu_mx_identity(b, tm);
  ttpu_val pw[4];
  pw[0] = eye;
  pw[1] = x;
  pw[2] = mm(b, x, x, tm, prec);
  pw[3] = mm(b, pw[2], x, tm, prec);
  ttpu_val x4 = mm(b, pw[2], pw[2], tm, prec);
  double coef[kDegree + 1];
  coef[0] = 1.0;
  for (int k = 1; k <= kDegree; ++k) coef[k] = coef[k - 1] / k;
  ttpu_val p = TTPU_VAL_ERROR;
  for (int j = kDegree / 4; j >= 0; --j) {
    ttpu_val bj = TTPU_VAL_ERROR;
    for (int i = 0; i < 4; ++i) {
      int k = 4 * j + i;
      if (k > kDegree) break;
      ttpu_val term = ttpu_hlo_binary(b, TTPU_MUL, pw[i], kc(b, tm, coef[k]));
      bj = bj == TTPU_VAL_ERROR ? term : ttpu_hlo_binary(b, TTPU_ADD, bj, term);
    }
    p = p == TTPU_VAL_ERROR ? bj : ttpu_hlo_binary(b, TTPU_ADD, mm(b, p, x4, tm, prec), bj);
  }

  squaring q = {tm, ttpu_hlo_convert(b, ls, TTPU_I64), TTPU_VAL_ERROR, prec};
  int64_t all[TTPU_MAX_DIMS];
  for (int d = 0; d < tb.ndim; ++d) all[d] = d;
  q.smax = tb.ndim ? ttpu_hlo_reduce(b, q.s, TTPU_RED_MAX, all, tb.ndim) : q.s;
  ttpu_val init[2] = {ttpu_hlo_const_i(b, TTPU_I64, 0), p}, fin[2];
  ttpu_hlo_while(b, init, 2, sq_cond, sq_body, &q, fin);
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, fin[1], ot.dtype));
  return NULL;
}

const ttpu_op_def ttpu_ops_matrix_exp[] = {
    {"linalg_matrix_exp", lower_matrix_exp, .variants = TTPU_V_OUT, .kinds = TTPU_K_FLOAT,
     .kernel = "linalg_matrix_exp", .complex_fn = lower_matrix_exp},
    {0},
};
