/* upsample_aa.c - antialiased resizing (_upsample_bilinear2d_aa,
 * _upsample_bicubic2d_aa) and their backward.
 *
 * Antialiased resizing is separable: along one dim, output o is a
 * normalised weighted sum of a window of inputs around its centre, the
 * window widened by the scale when downsampling (the filter is stretched
 * so that every input contributes). The window start and weights of each
 * output are computed here, on the host, exactly as the CPU kernel does
 * (in float for float32 data, double for float64), and become the matrix W
 * (out x in) of that map on the device; the forward is a matrix product
 * along W then along H, the backward the product with W^T along both.
 * Like the CPU kernel, the forward leaves a dim whose size does not change
 * as it is, while the backward always applies that dim's weights.
 * bfloat16/float16 (which the CPU kernel refuses) are computed in float32
 * and rounded once, like CUDA; uint8 takes the CPU's fixed-point path
 * (ops/upsample_u8.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"
#include "upsample_u8.h"

/* A `float? scales` arg: > 0 when given and positive, else 0. */
static double aa_scale_arg(ttpu_lower* L, int arg) {
  if (ttpu_l_is_none(L, arg)) return 0;
  double s = ttpu_l_float(L, arg, 0);
  return s > 0 ? s : 0;
}

/* The filters: the triangle (bilinear) and Keys' cubic with a = -0.5
 * (bicubic, PIL's choice), in float or double like the CPU's weights. The
 * CPU kernel is built with FMA contraction, so each polynomial step
 * `p * x + c` is one fused multiply-add there: fma reproduces its
 * roundings bit for bit. */
static float filter_f(float x, int cubic) {
  x = fabsf(x);
  if (!cubic) return x < 1.0f ? 1.0f - x : 0.0f;
  const float a = -0.5f;
  if (x < 1.0f) return fmaf(fmaf(a + 2.0f, x, -(a + 3.0f)) * x, x, 1.0f);
  if (x < 2.0f) return fmaf(fmaf(fmaf(a, x, -5.0f * a), x, 8.0f * a), x, -4.0f * a);
  return 0.0f;
}

static double filter_d(double x, int cubic) {
  x = fabs(x);
  if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;
  if (x < 1.0) return fma(fma(a + 2.0, x, -(a + 3.0)) * x, x, 1.0);
  if (x < 2.0) return fma(fma(fma(a, x, -5.0 * a), x, 8.0 * a), x, -4.0 * a);
  return 0.0;
}

/* One dim's map: the window length K, and per output o the window start
 * xmin[o] and K weights w[o*K + j] (zero past the window's end). Follows
 * the CPU kernel's arithmetic step by step, including which intermediate
 * results are float and which double. Returns K, or -1 on no memory. */
static int64_t aa_taps(int64_t in, int64_t out, int align, double sarg, int cubic, int dbl, int64_t** xmin_out,
                       double** w_out) {
  double interp = cubic ? 4 : 2;
  double scale, support, invscale;
  if (dbl) {
    scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                  : (sarg > 0 ? 1.0 / sarg : (double)in / (double)out);
    support = scale >= 1.0 ? interp * 0.5 * scale : interp * 0.5;
    invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  } else {
    float s = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                    : (sarg > 0 ? (float)(1.0 / sarg) : (float)in / (float)out);
    scale = s;
    support = (float)(s >= 1.0f ? interp * 0.5 * (double)s : interp * 0.5);
    invscale = (float)(s >= 1.0f ? 1.0 / (double)s : 1.0);
  }
  int64_t K = (int64_t)(ceil(support) * 2 + 1);
  int64_t* xmin = malloc(sizeof(int64_t) * (size_t)out);
  double* w = calloc((size_t)(out * K), sizeof(double));
  if (!xmin || !w) {
    free(xmin);
    free(w);
    return -1;
  }
  for (int64_t o = 0; o < out; ++o) {
    double* wo = &w[o * K];
    int64_t lo, hi, n;
    if (dbl) {
      double center = scale * ((double)o + 0.5);
      lo = (int64_t)(center - support + 0.5);
      hi = (int64_t)(center + support + 0.5);
      lo = lo < 0 ? 0 : lo;
      n = (hi < in ? hi : in) - lo;
      n = n < 0 ? 0 : (n > K ? K : n);
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += wo[j] = filter_d(((double)(j + lo) - center + 0.5) * invscale, cubic);
      if (total != 0)
        for (int64_t j = 0; j < n; ++j) wo[j] /= total;
    } else {
      float center = (float)(scale * ((double)o + 0.5)), sup = (float)support, inv = (float)invscale;
      lo = (int64_t)((double)(center - sup) + 0.5);
      hi = (int64_t)((double)(center + sup) + 0.5);
      lo = lo < 0 ? 0 : lo;
      n = (hi < in ? hi : in) - lo;
      n = n < 0 ? 0 : (n > K ? K : n);
      float total = 0;
      for (int64_t j = 0; j < n; ++j) {
        float f = filter_f((float)(((double)((float)(j + lo) - center) + 0.5) * (double)inv), cubic);
        wo[j] = f;
        total += f;
      }
      if (total != 0)
        for (int64_t j = 0; j < n; ++j) wo[j] = (float)wo[j] / total;
    }
    xmin[o] = lo;
  }
  *xmin_out = xmin;
  *w_out = w;
  return K;
}


ttpu_val ttpu_upsample_window_matrix(ttpu_hlo* b, ttpu_val vw, ttpu_val vx, int64_t K, int64_t in, int64_t out,
                                     ttpu_dtype dt) {
  int64_t dims[2] = {out, in}, row = 0;
  ttpu_type ti = ttpu_type_make(TTPU_I64, 2, dims);
  /* d: position of input i inside output o's window */
  ttpu_val d = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_iota(b, ti, 1), ttpu_hlo_broadcast_in_dim(b, vx, ti, &row));
  ttpu_val zero = ttpu_hlo_const(b, ti, 0, 0), kk = ttpu_hlo_const(b, ti, 0, K);
  ttpu_val inside = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, d, zero), ttpu_hlo_compare(b, TTPU_LT, d, kk));
  ttpu_val flat = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_iota(b, ti, 0), kk),
                                  ttpu_hlo_clamp(b, zero, d, ttpu_hlo_const(b, ti, 0, K - 1)));
  ttpu_val m = ttpu_hlo_take(b, vw, flat);
  return ttpu_hlo_select(b, inside, m, ttpu_hlo_const(b, ttpu_type_make(dt, 2, dims), 0, 0));
}

/* The (out, in) matrix of one dim's map, of dtype dt (f32/f64): W[o, i] =
 * w[o, i - xmin[o]] inside the window, else 0, as one gather from the
 * flat weights (constants travel as integer bits: the builder has no
 * float-array constant). */
static ttpu_val aa_matrix(ttpu_lower* L, int64_t in, int64_t out, int align, double sarg, int cubic, ttpu_dtype dt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int dbl = dt == TTPU_F64;
  int64_t *xmin = NULL, *bits = NULL;
  double* w = NULL;
  int64_t K = aa_taps(in, out, align, sarg, cubic, dbl, &xmin, &w);
  int64_t n = out * K;
  if (K > 0) bits = malloc(sizeof(int64_t) * (size_t)n);
  if (K <= 0 || !bits) {
    free(xmin);
    free(w);
    return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "upsample antialias: out of host memory");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (dbl) {
      memcpy(&bits[i], &w[i], sizeof(double));
    } else {
      float f = (float)w[i];
      uint32_t u;
      memcpy(&u, &f, sizeof u);
      bits[i] = (int64_t)(int32_t)u;
    }
  }
  ttpu_val vw = ttpu_hlo_const_i64s(b, bits, (int)n);
  ttpu_val vx = ttpu_hlo_const_i64s(b, xmin, (int)out);
  free(bits);
  free(xmin);
  free(w);
  vw = dbl ? ttpu_hlo_bitcast(b, vw, ttpu_type_make(TTPU_F64, 1, &n))
           : ttpu_hlo_bitcast(b, ttpu_hlo_convert(b, vw, TTPU_I32), ttpu_type_make(TTPU_F32, 1, &n));
  return ttpu_upsample_window_matrix(b, vw, vx, K, in, out, dt);
}

/* x with its dim d mapped through m: (new, old) for the forward, or
 * (old, new) contracted on its rows for the backward. */
static ttpu_val aa_apply(ttpu_hlo* b, ttpu_val x, int d, ttpu_val m, int transposed) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  ttpu_dtype dt = tp->dtype;
  int64_t cx = d, cm = transposed ? 0 : 1, perm[TTPU_MAX_DIMS];
  ttpu_val r = ttpu_hlo_dot_general(b, x, m, NULL, NULL, 0, &cx, &cm, 1, dt, TTPU_PREC_HIGHEST);
  /* the product's new dim comes last; put it back at d */
  for (int i = 0, k = 0; i < nd; ++i) perm[i] = i == d ? nd - 1 : k++;
  return ttpu_hlo_transpose(b, r, perm);
}

/* _upsample_{bilinear,bicubic}2d_aa(self, output_size, align_corners,
 * scales_h, scales_w) and their _backward(grad_output, output_size,
 * input_size, align_corners, scales_h, scales_w), with the out= forms. */
static ttpu_status* lower_aa(ttpu_lower* L) {
  int cubic = (int)ttpu_l_param_at(L, 0);
  int backward = (int)ttpu_l_param_at(L, 1);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val v = ttpu_l_tensor(L, 0);
  ttpu_type tin = ttpu_l_type(L, v), out = ttpu_l_out_type(L, 0);
  const char* name = cubic ? "_upsample_bicubic2d_aa" : "_upsample_bilinear2d_aa";
  if (!backward && out.dtype == TTPU_U8 && tin.dtype == TTPU_U8) return ttpu_upsample_u8(L, cubic, 1, 1);
  if (out.dtype != TTPU_F32 && out.dtype != TTPU_F64 && out.dtype != TTPU_BF16 && out.dtype != TTPU_F16) {
    /* the CPU kernel's message (it takes floats, and uint8 forward) */
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"compute_index_ranges_weights\" not implemented for '%s'",
                  ttpu_dtype_torch_title(out.dtype));
    return NULL;
  }
  if (tin.ndim != 4 || out.ndim != 4) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: expected 4-d tensors", name);
  if (ttpu_type_numel(&out) == 0 || ttpu_type_numel(&tin) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  /* big/small: the resized side and the original input */
  ttpu_type resized = backward ? tin : out, orig = backward ? out : tin;
  int align = ttpu_l_bool(L, backward ? 3 : 2, 0), sarg = backward ? 4 : 3;
  ttpu_dtype acc = out.dtype == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  v = ttpu_hlo_convert(b, v, acc);
  /* width first, then height, as the CPU's separable passes */
  for (int d = 3; d >= 2; --d) {
    int64_t n_in = orig.dims[d], n_out = resized.dims[d];
    if (!backward && n_in == n_out) continue;
    ttpu_val m = aa_matrix(L, n_in, n_out, align, aa_scale_arg(L, sarg + d - 2), cubic, acc);
    v = aa_apply(b, v, d, m, backward);
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, v, out.dtype));
  return NULL;
}

const ttpu_op_def ttpu_ops_upsample_aa[] = {
    {"_upsample_bilinear2d_aa", lower_aa, .param = TTPU_PARAMS(0, 0, 0), .variants = TTPU_V_OUT},
    {"_upsample_bilinear2d_aa_backward", lower_aa, .param = TTPU_PARAMS(0, 1, 0)},
    {"_upsample_bilinear2d_aa_backward.grad_input", lower_aa, .param = TTPU_PARAMS(0, 1, 0)},
    {"_upsample_bicubic2d_aa", lower_aa, .param = TTPU_PARAMS(1, 0, 0), .variants = TTPU_V_OUT},
    {"_upsample_bicubic2d_aa_backward", lower_aa, .param = TTPU_PARAMS(1, 1, 0)},
    {"_upsample_bicubic2d_aa_backward.grad_input", lower_aa, .param = TTPU_PARAMS(1, 1, 0)},
    {0},
};
