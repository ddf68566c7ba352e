/* upsample_bicubic.c - bicubic upsampling (upsample_bicubic2d) and its
 * backward.
 *
 * Along one dim, interpolation is a fixed linear map: output o takes four
 * input taps (clamped to the edge) with the cubic convolution weights of
 * its fractional source position (Keys' kernel, A = -0.75). The taps and
 * weights are computed here, on the host, with PyTorch's formulas in its
 * arithmetic (float, or double for float64 data), become the matrix W
 * (out x in) of that map on the device, and the op is a matrix product
 * along H then along W; the backward is the product with W^T (each tap's
 * gradient summed, edge taps included). Products run on the TPU's matrix
 * unit instead of gathers and scatters. bfloat16/float16 are computed in
 * float32, as the CPU's opmath, and rounded once; uint8 takes the CPU's
 * fixed-point path (ops/upsample_u8.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"
#include "upsample_u8.h"

enum { kTaps = 4 };

/* A `float? scales` arg: > 0 when given and positive, else 0. */
static double scale_arg(ttpu_lower* L, int arg) {
  if (ttpu_l_is_none(L, arg)) return 0;
  double s = ttpu_l_float(L, arg, 0);
  return s > 0 ? s : 0;
}

/* Keys' cubic convolution kernel, for |x| <= 1 and for 1 < |x| < 2. */
#define CUBIC1(T, x, A) ((((A) + (T)2) * (x) - ((A) + (T)3)) * (x) * (x) + (T)1)
#define CUBIC2(T, x, A) (((((A) * (x)) - ((T)5 * (A))) * (x) + ((T)8 * (A))) * (x) - ((T)4 * (A)))

/* Source index and weights of output o (area_pixel_compute_source_index
 * with cubic=true, guard_index_and_lambda, get_cubic_upsample_coefficients),
 * in float or double as the CPU's opmath. */
static void cubic_taps(int64_t o, int64_t in, int64_t out, int align, double scale, int dbl, int64_t* idx,
                       double* w) {
  int64_t i0;
  if (dbl) {
    double r = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                     : (scale > 0 ? 1.0 / scale : (double)in / (double)out);
    double real = align ? r * (double)o : r * ((double)o + 0.5) - 0.5;
    i0 = (int64_t)floorf((float)real);
    if (i0 > in - 1) i0 = in - 1;
    double t = real - (double)i0;
    t = t < 0 ? 0 : (t > 1 ? 1 : t);
    const double A = -0.75;
    w[0] = CUBIC2(double, t + 1.0, A);
    w[1] = CUBIC1(double, t, A);
    double x2 = 1.0 - t;
    w[2] = CUBIC1(double, x2, A);
    w[3] = CUBIC2(double, x2 + 1.0, A);
  } else {
    float r = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                    : (scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out);
    float real = align ? r * (float)o : r * ((float)o + 0.5f) - 0.5f;
    i0 = (int64_t)floorf(real);
    if (i0 > in - 1) i0 = in - 1;
    float t = real - (float)i0;
    t = t < 0 ? 0 : (t > 1 ? 1 : t);
    const float A = -0.75f;
    float x2 = 1.0f - t;
    w[0] = CUBIC2(float, t + 1.0f, A);
    w[1] = CUBIC1(float, t, A);
    w[2] = CUBIC1(float, x2, A);
    w[3] = CUBIC2(float, x2 + 1.0f, A);
  }
  for (int k = 0; k < kTaps; ++k) {
    int64_t i = i0 - 1 + k;
    idx[k] = i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
  }
}

/* The (out, in) matrix of the map along one dim, of dtype dt: W[o, i] is
 * the sum of o's weights on taps that land on i. Host taps become
 * constants (weights as their bits: the builder has no float-array
 * constant), the matrix is assembled on the device. */
static ttpu_val interp_matrix(ttpu_lower* L, int64_t in, int64_t out, int align, double scale, ttpu_dtype dt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int dbl = dt == TTPU_F64;
  int64_t n = out * kTaps;
  int64_t* idx = malloc(sizeof(int64_t) * (size_t)n);
  int64_t* bits = malloc(sizeof(int64_t) * (size_t)n);
  if (!idx || !bits) {
    free(idx);
    free(bits);
    return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "upsample_bicubic2d: out of host memory");
  }
  for (int64_t o = 0; o < out; ++o) {
    double w[kTaps];
    cubic_taps(o, in, out, align, scale, dbl, &idx[o * kTaps], w);
    for (int k = 0; k < kTaps; ++k) {
      if (dbl) {
        memcpy(&bits[o * kTaps + k], &w[k], sizeof(double));
      } else {
        float f = (float)w[k];
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        bits[o * kTaps + k] = (int64_t)(int32_t)u;
      }
    }
  }
  int64_t ot[2] = {out, kTaps};
  ttpu_val vi = ttpu_hlo_reshape(b, ttpu_hlo_const_i64s(b, idx, (int)n), 2, ot);
  ttpu_val vb = ttpu_hlo_const_i64s(b, bits, (int)n);
  free(idx);
  free(bits);
  ttpu_val vw = dbl ? ttpu_hlo_bitcast(b, vb, ttpu_type_make(TTPU_F64, 1, &n))
                    : ttpu_hlo_bitcast(b, ttpu_hlo_convert(b, vb, TTPU_I32), ttpu_type_make(TTPU_F32, 1, &n));
  vw = ttpu_hlo_reshape(b, vw, 2, ot);
  int64_t full[3] = {out, kTaps, in}, map[2] = {0, 1};
  ttpu_type ti = ttpu_type_make(TTPU_I64, 3, full), tw = ttpu_type_make(dt, 3, full);
  ttpu_val hit = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_broadcast_in_dim(b, vi, ti, map), ttpu_hlo_iota(b, ti, 2));
  ttpu_val terms = ttpu_hlo_select(b, hit, ttpu_hlo_broadcast_in_dim(b, vw, tw, map), ttpu_hlo_const(b, tw, 0, 0));
  int64_t taps = 1;
  return ttpu_hlo_reduce(b, terms, TTPU_RED_SUM, &taps, 1);
}

/* x with its dim d mapped through m (rows: new size; columns: x's size,
 * or the reverse when transposed). */
static ttpu_val apply_dim(ttpu_hlo* b, ttpu_val x, int d, ttpu_val m, int transposed) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  int64_t cx = d, cm = transposed ? 0 : 1;
  ttpu_val r = ttpu_hlo_dot_general(b, x, m, NULL, NULL, 0, &cx, &cm, 1, tp->dtype, TTPU_PREC_HIGHEST);
  /* the product puts the mapped dim last */
  int64_t perm[TTPU_MAX_DIMS];
  for (int i = 0, k = 0; i < nd; ++i) perm[i] = i == d ? nd - 1 : k++;
  return ttpu_hlo_transpose(b, r, perm);
}

/* upsample_bicubic2d(self, output_size, align_corners, scales_h, scales_w)
 * and upsample_bicubic2d_backward(grad_output, output_size, input_size,
 * align_corners, scales_h, scales_w), with their out= forms. */
static ttpu_status* lower_bicubic(ttpu_lower* L) {
  int backward = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val v = ttpu_l_tensor(L, 0);
  ttpu_type tin = ttpu_l_type(L, v), out = ttpu_l_out_type(L, 0);
  if (!backward && out.dtype == TTPU_U8 && tin.dtype == TTPU_U8) return ttpu_upsample_u8(L, 1, 0, 1);
  if (out.dtype != TTPU_F32 && out.dtype != TTPU_F64 && out.dtype != TTPU_BF16 && out.dtype != TTPU_F16) {
    /* the CPU kernel's message (it takes floats, and uint8 forward) */
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"compute_indices_weights_cubic\" not implemented for '%s'",
                  ttpu_dtype_torch_title(out.dtype));
    return NULL;
  }
  if (tin.ndim != 4 || out.ndim != 4)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "upsample_bicubic2d: expected 4-d tensors");
  if (ttpu_type_numel(&out) == 0 || ttpu_type_numel(&tin) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  /* big: the upsampled side; small: the original input */
  ttpu_type big = backward ? tin : out, small = backward ? out : tin;
  int align = ttpu_l_bool(L, backward ? 3 : 2, 0), sarg = backward ? 4 : 3;
  ttpu_dtype acc = out.dtype == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  v = ttpu_hlo_convert(b, v, acc);
  for (int d = 0; d < 2; ++d) {
    ttpu_val m = interp_matrix(L, small.dims[2 + d], big.dims[2 + d], align, scale_arg(L, sarg + d), acc);
    v = apply_dim(b, v, 2 + d, m, backward);
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, v, out.dtype));
  return NULL;
}

const ttpu_op_def ttpu_ops_upsample_bicubic[] = {
    {"upsample_bicubic2d", lower_bicubic, .param = 0, .variants = TTPU_V_OUT},
    {"upsample_bicubic2d_backward", lower_bicubic, .param = 1},
    {"upsample_bicubic2d_backward.grad_input", lower_bicubic, .param = 1},
    {0},
};
