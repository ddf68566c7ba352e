/* fractional_pool.c - fractional max pooling (2-d and 3-d) and its
 * backward.
 *
 * Each plane's windows start where the CPU kernel puts them: for output
 * position i < O-1 along a dim, int((i + u) * alpha) - int(u * alpha) with
 * alpha = (I - K) / (O - 1) and u the plane's random sample for that dim
 * (the 2-d kernel reads its samples as (w, h), the 3-d one as (t, h, w));
 * the last window starts at I - K. The arithmetic is the input dtype's, as
 * on the CPU: for bfloat16 and half every step rounds to the narrow type,
 * which the program does explicitly (round_narrow) so that no compiler
 * pass can keep the extra float32 precision, which would move a window.
 *
 * Inside a window the CPU scans in row-major order keeping the first
 * strict maximum, except that a NaN always replaces the current pick: the
 * index is the last NaN's if any, else the first maximum's; with every
 * value -inf it is the window's first position. Indices are flat within
 * the plane. The backward adds grad_output into the plane at them. */
#include <stdio.h>
#include <math.h>

#include "elementwise.h"

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

/* x (float32, >= 0) rounded to nearest-even with man_bits mantissa bits
 * and minimum normal exponent emin: the narrow type's rounding, subnormals
 * included. The unit of the last place is a power of two built from x's
 * exponent, so the scaling is exact and only round_even rounds. */
static ttpu_val round_narrow(ttpu_hlo* b, ttpu_val x, int man_bits, int emin) {
  ttpu_type t = *ttpu_hlo_type(b, x);
  ttpu_type tu = t;
  tu.dtype = TTPU_I32;
  ttpu_val bits = ttpu_hlo_bitcast(b, x, tu);
  ttpu_val e = bin(b, TTPU_SUB, bin(b, TTPU_SHR_L, bits, ttpu_ew_k(b, bits, 23)),
                   ttpu_ew_k(b, bits, 127));
  e = bin(b, TTPU_MAX, e, ttpu_ew_k(b, e, emin));
  /* (bfloat16's own subnormals would need a float32-subnormal unit: they
   * are flushed on the device anyway, so the unit stops at 2^-126) */
  ttpu_val ulp_e = bin(b, TTPU_MAX, bin(b, TTPU_SUB, e, ttpu_ew_k(b, e, man_bits)),
                       ttpu_ew_k(b, e, -126));
  ttpu_val ulp = ttpu_hlo_bitcast(
      b, bin(b, TTPU_SHL, bin(b, TTPU_ADD, ulp_e, ttpu_ew_k(b, e, 127)), ttpu_ew_k(b, e, 23)), t);
  ttpu_val q = ttpu_hlo_unary(b, TTPU_ROUND_EVEN, bin(b, TTPU_DIV, x, ulp));
  return bin(b, TTPU_MUL, q, ulp);
}

typedef struct {
  ttpu_dtype math;  /* the dtype the interval arithmetic runs in */
  int narrow;       /* 1: bfloat16, 2: half, rounded after each step */
} interval_math;

static ttpu_val rnd(ttpu_hlo* b, const interval_math* m, ttpu_val x) {
  if (m->narrow == 1) return round_narrow(b, x, 7, -126);
  if (m->narrow == 2) return round_narrow(b, x, 10, -14);
  return x;
}

/* Window starts (planes, O) i64 along one dim from the samples u
 * (planes, 1) of the math dtype. */
static ttpu_val window_starts(ttpu_hlo* b, const interval_math* m, ttpu_val u,
                              int64_t planes, int64_t in, int64_t out,
                              int64_t k) {
  int64_t dims[2] = {planes, out};
  ttpu_type ti = ttpu_type_make(TTPU_I64, 2, dims);
  ttpu_val last = ttpu_hlo_const(b, ti, 0, in - k);
  if (out <= 1) return last;
  ttpu_val num = rnd(b, m, ttpu_hlo_const_f(b, m->math, (double)(in - k)));
  ttpu_val den = rnd(b, m, ttpu_hlo_const_f(b, m->math, (double)(out - 1)));
  ttpu_val alpha = ttpu_hlo_broadcast_to(b, rnd(b, m, bin(b, TTPU_DIV, num, den)), 2, dims);
  ttpu_val ub = ttpu_hlo_broadcast_to(b, u, 2, dims);
  ttpu_val i = rnd(b, m, ttpu_hlo_convert(b, ttpu_hlo_iota(b, ti, 1), m->math));
  ttpu_val hi = rnd(b, m, bin(b, TTPU_MUL, rnd(b, m, bin(b, TTPU_ADD, i, ub)), alpha));
  ttpu_val lo = rnd(b, m, bin(b, TTPU_MUL, ub, alpha));
  ttpu_val s = bin(b, TTPU_SUB, ttpu_hlo_convert(b, hi, TTPU_I64), ttpu_hlo_convert(b, lo, TTPU_I64));
  return ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, 1),
                                             ttpu_hlo_const(b, ti, 0, out - 1)),
                         last, s);
}

/* fractional_max_pool{2,3}d(self, kernel_size, output_size, random_samples)
 * and the .output form: outputs (output, indices). */
static ttpu_status* lower_fractional_max_pool(ttpu_lower* L) {
  int nsp = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int nk = 0, no = 0;
  const int64_t* ks = ttpu_l_ints(L, 1, &nk);
  const int64_t* os = ttpu_l_ints(L, 2, &no);
  if (nk != nsp || no != nsp || tx.ndim < nsp + 1) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "fractional_max_pool%dd: bad arguments", nsp);
    return NULL;
  }
  if (!ttpu_dtype_is_float(tx.dtype)) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"fractional_max_pool%dd_out_frame\" not implemented for '%s'",
                  nsp, ttpu_dtype_torch_title(tx.dtype));
    return NULL;
  }
  int lead = tx.ndim - nsp;
  int64_t planes = 1, plane_size = 1;
  for (int d = 0; d < lead; ++d) planes *= tx.dims[d];
  const int64_t* in = tx.dims + lead;
  for (int d = 0; d < nsp; ++d) plane_size *= in[d];

  interval_math m = {tx.dtype, 0};
  if (tx.dtype == TTPU_BF16 || tx.dtype == TTPU_F16) {
    m.math = TTPU_F32;
    m.narrow = tx.dtype == TTPU_BF16 ? 1 : 2;
  }
  /* the samples, (planes, nsp) in the math dtype: the kernel reads them
   * flat, plane by plane */
  ttpu_val u = ttpu_l_tensor(L, 3);
  ttpu_type tu = ttpu_l_type(L, u);
  int64_t un = ttpu_type_numel(&tu), need = planes * nsp;
  /* the CPU kernel's checks of the samples' (batch, channels, nsp) shape */
  int64_t batch = lead >= 2 ? tx.dims[lead - 2] : 1, chans = lead >= 1 ? tx.dims[lead - 1] : 1;
  const char* bad = NULL;
  char msg[96];
  if (tu.ndim != 3 || tu.dims[0] < batch) {
    bad = "Expect _random_samples.size(0) no less then input batch size.";
  } else if (tu.dims[1] != chans) {
    bad = "Expect _random_samples.size(1) equals to input channel size.";
  } else if (tu.dims[2] != nsp) {
    snprintf(msg, sizeof msg, "Expect _random_samples.size(2) equals to %d; got %lld.", nsp,
             (long long)tu.dims[2]);
    bad = msg;
  }
  if (bad || un < need) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s",
                  bad ? bad : "Expect _random_samples to hold a sample per plane.");
    return NULL;
  }
  u = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, u, m.math), 1, &un);
  int64_t z = 0, one = 1;
  u = ttpu_hlo_slice(b, u, &z, &need, &one);
  int64_t pn[2] = {planes, nsp};
  u = ttpu_hlo_reshape(b, u, 2, pn);

  /* flat in-plane index of every window element: (planes, O..., K...) */
  int64_t wd[TTPU_MAX_DIMS] = {planes};
  for (int d = 0; d < nsp; ++d) {
    wd[1 + d] = os[d];
    wd[1 + nsp + d] = ks[d];
  }
  ttpu_type tw = ttpu_type_make(TTPU_I64, 1 + 2 * nsp, wd);
  ttpu_val flat = ttpu_hlo_const(b, tw, 0, 0);
  int64_t stride = plane_size;
  for (int d = 0; d < nsp; ++d) {
    stride /= in[d];
    int col = nsp == 2 ? 1 - d : d;
    int64_t s0[2] = {0, col}, s1[2] = {planes, col + 1}, st[2] = {1, 1};
    ttpu_val ud = ttpu_hlo_slice(b, u, s0, s1, st);
    ttpu_val starts = window_starts(b, &m, ud, planes, in[d], os[d], ks[d]);
    int64_t map[2] = {0, 1 + d};
    ttpu_val pos = bin(b, TTPU_ADD, ttpu_hlo_broadcast_in_dim(b, starts, tw, map),
                       ttpu_hlo_iota(b, tw, 1 + nsp + d));
    flat = bin(b, TTPU_ADD, flat, bin(b, TTPU_MUL, pos, ttpu_hlo_const(b, tw, 0, stride)));
  }
  /* (planes, O..., Ktot) in scan order */
  int64_t ktot = 1;
  for (int d = 0; d < nsp; ++d) ktot *= ks[d];
  ttpu_type tr = tw;
  tr.ndim = 2 + nsp;
  tr.dims[1 + nsp] = ktot;
  flat = ttpu_hlo_reshape(b, flat, tr.ndim, tr.dims);
  ttpu_val gidx = bin(b, TTPU_ADD, flat,
                      bin(b, TTPU_MUL, ttpu_hlo_iota(b, tr, 0), ttpu_hlo_const(b, tr, 0, plane_size)));
  int64_t total = planes * plane_size;
  ttpu_val vals = ttpu_hlo_take(b, ttpu_hlo_reshape(b, x, 1, &total), gidx);

  int64_t kd = 1 + nsp;
  ttpu_val k = ttpu_hlo_iota(b, tr, (int)kd);
  ttpu_val nan = ttpu_ew_isnan(b, vals);
  ttpu_val no_k = ttpu_hlo_const(b, tr, 0, -1);
  ttpu_val last_nan = ttpu_hlo_reduce(b, ttpu_hlo_select(b, nan, k, no_k), TTPU_RED_MAX, &kd, 1);
  ttpu_val vmax = ttpu_hlo_reduce(b, vals, TTPU_RED_MAX, &kd, 1);
  ttpu_type to = ttpu_l_type(L, vmax);
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < to.ndim; ++d) map[d] = d;
  ttpu_type tvals = tr;
  tvals.dtype = tx.dtype;
  ttpu_val is_max = ttpu_hlo_compare(b, TTPU_EQ, vals, ttpu_hlo_broadcast_in_dim(b, vmax, tvals, map));
  ttpu_val first_max = ttpu_hlo_reduce(b, ttpu_hlo_select(b, is_max, k, ttpu_hlo_const(b, tr, 0, ktot)),
                                       TTPU_RED_MIN, &kd, 1);
  ttpu_val any_nan = ttpu_ew_cmpk(b, TTPU_GE, last_nan, 0);
  ttpu_val pick = ttpu_hlo_select(b, any_nan, last_nan, first_max);
  ttpu_val chosen = ttpu_hlo_compare(b, TTPU_EQ, k, ttpu_hlo_broadcast_in_dim(b, pick, tr, map));
  ttpu_val idx = ttpu_hlo_reduce(b, ttpu_hlo_select(b, chosen, flat, ttpu_hlo_const(b, tr, 0, 0)),
                                 TTPU_RED_SUM, &kd, 1);
  ttpu_val out = ttpu_hlo_select(b, any_nan, ttpu_l_const_like(L, vmax, NAN), vmax);

  ttpu_type o0 = ttpu_l_out_type(L, 0), o1 = ttpu_l_out_type(L, 1);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, out, ttpu_type_make(tx.dtype, o0.ndim, o0.dims)));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, idx, ttpu_type_make(TTPU_I64, o1.ndim, o1.dims)));
  return NULL;
}

/* *_backward(grad_output, self, kernel_size, output_size, indices): the
 * gradient added into each plane at the picked positions. bfloat16/half
 * accumulate in float32 and round once. */
static ttpu_status* lower_fmp_backward(ttpu_lower* L) {
  int nsp = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ttpu_val g = ttpu_l_tensor(L, 0), ind = ttpu_l_tensor(L, 4);
  ttpu_type tg = ttpu_l_type(L, g);
  int lead = out.ndim - nsp;
  if (lead < 1 || tg.ndim != out.ndim) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "fractional_max_pool%dd_backward: bad shapes", nsp);
    return NULL;
  }
  int64_t planes = 1, psize = 1, osize = 1;
  for (int d = 0; d < lead; ++d) planes *= out.dims[d];
  for (int d = lead; d < out.ndim; ++d) {
    psize *= out.dims[d];
    osize *= tg.dims[d];
  }
  ttpu_dtype acc = ttpu_ew_opmath(out.dtype);
  int64_t pq[2] = {planes, osize};
  ttpu_type ti = ttpu_type_make(TTPU_I64, 2, pq);
  g = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, g, acc), 2, pq);
  ttpu_val i = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, ind, TTPU_I64), 2, pq);
  i = bin(b, TTPU_ADD, i, bin(b, TTPU_MUL, ttpu_hlo_iota(b, ti, 0), ttpu_hlo_const(b, ti, 0, psize)));
  int64_t total = planes * psize;
  ttpu_val zero = ttpu_hlo_const(b, ttpu_type_make(acc, 1, &total), 0, 0);
  ttpu_val r = ttpu_hlo_put(b, zero, i, g, TTPU_ADD);
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(b, r, out.ndim, out.dims));
  return NULL;
}

const ttpu_op_def ttpu_ops_fractional_pool[] = {
    {"fractional_max_pool2d", lower_fractional_max_pool, .param = 2},
    {"fractional_max_pool2d.output", lower_fractional_max_pool, .param = 2},
    {"fractional_max_pool3d", lower_fractional_max_pool, .param = 3},
    {"fractional_max_pool3d.output", lower_fractional_max_pool, .param = 3},
    {"fractional_max_pool2d_backward", lower_fmp_backward, .param = 2},
    {"fractional_max_pool2d_backward.grad_input", lower_fmp_backward, .param = 2},
    {"fractional_max_pool3d_backward", lower_fmp_backward, .param = 3},
    {"fractional_max_pool3d_backward.grad_input", lower_fmp_backward, .param = 3},
    {0},
};
