/* upsample_u8.c - uint8 bilinear and bicubic resizing, plain and
 * antialiased, bit for bit as PyTorch's CPU kernels compute it.
 *
 * The CPU resizes uint8 images in fixed point, separably: the width pass
 * first, then the height pass, each rounding back to uint8, and a pass
 * skipped when its dim keeps its size. Along one dim, output o is
 *
 *   clamp((2^(p-1) + sum_j w[o][j] * x[xmin[o] + j]) >> p, 0, 255)
 *
 * summed in int32, with int16 weights w: the filter weights computed in
 * double, scaled by 2^p and rounded half away from zero. The precision p
 * is the largest (at most 22) for which 2^(p+1) times the largest weight
 * still rounds below 2^15. Antialiased weights are the normalised window
 * of the float kernels; plain ones are the 2 (bilinear) or 4 (bicubic,
 * Keys' kernel with a = -0.75) taps at the source position, taps that
 * fall outside the input folded onto the edge pixel. Everything but the
 * sums depends on shapes and scales only: it is computed here, on the
 * host, and becomes per dim the integer matrix W (out x in) of the map;
 * a pass is an int32 matrix product, the rounding shift and the clamp.
 *
 * With more than 4 channels the CPU runs a generic kernel whose height
 * pass reads the window of the first output of each innermost run of its
 * iteration: when that run goes along the output's height (an output of
 * width 1 laid out channels-first), every row gets the weights of the
 * run's first row, which depends on how the CPU splits the work between
 * threads. Those calls fail as unimplemented instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "upsample_u8.h"

/* A `float? scales` arg: > 0 when given and positive, else 0. */
static double u8_scale_arg(ttpu_lower* L, int arg) {
  if (ttpu_l_is_none(L, arg)) return 0;
  double s = ttpu_l_float(L, arg, 0);
  return s > 0 ? s : 0;
}

/* The filters in double: the triangle, and Keys' cubic with parameter a.
 * The CPU kernel is built with FMA contraction: each polynomial step
 * `p * x + c` is one fused multiply-add there, so fma here. */
static double u8_filter(double x, int cubic, double a) {
  x = fabs(x);
  if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
  if (x < 1.0) return fma(fma(a + 2.0, x, -(a + 3.0)) * x, x, 1.0);
  if (x < 2.0) return fma(fma(fma(a, x, -5.0 * a), x, 8.0 * a), x, -4.0 * a);
  return 0.0;
}

/* One dim's map: window length K, per output its start xmin[o] and its
 * K integer weights w[o*K + j] (zero from the window's length on), and
 * the precision p. */
typedef struct {
  int64_t K;
  int64_t* xmin;
  int64_t* w;
  int p;
} u8_map;

static void u8_map_free(u8_map* m) {
  free(m->xmin);
  free(m->w);
  m->xmin = m->w = NULL;
}

/* The double weights of output o into wo[0..K), its window start and
 * length; returns the largest weight the CPU's precision search sees. */
static double u8_taps_aa(int64_t o, int64_t in, int64_t K, double scale, double support, int cubic, double* wo,
                         int64_t* lo_out, int64_t* n_out) {
  double center = scale * ((double)o + 0.5);
  double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  int64_t lo = (int64_t)(center - support + 0.5);
  int64_t hi = (int64_t)(center + support + 0.5);
  lo = lo < 0 ? 0 : lo;
  int64_t n = (hi < in ? hi : in) - lo;
  n = n < 0 ? 0 : (n > K ? K : n);
  double total = 0, top = 0;
  for (int64_t j = 0; j < n; ++j) total += wo[j] = u8_filter(((double)(j + lo) - center + 0.5) * invscale, cubic, -0.5);
  if (total != 0)
    for (int64_t j = 0; j < n; ++j) {
      wo[j] /= total;
      if (wo[j] > top) top = wo[j];
    }
  *lo_out = lo;
  *n_out = n;
  return top;
}

static double u8_taps_plain(int64_t o, int64_t in, int64_t K, int align, double scale, int cubic, double* wo,
                            int64_t* lo_out, int64_t* n_out) {
  double real = align ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
  if (!cubic && !align && real < 0) real = 0;
  /* the CPU floors the source position in float */
  int64_t i0 = (int64_t)floorf((float)real);
  if (i0 > in - 1) i0 = in - 1;
  double lam = real - (double)i0;
  lam = lam < 0 ? 0 : (lam > 1 ? 1 : lam);
  int64_t half = K / 2;
  int64_t umin = i0 - half + 1, umax = i0 + half + 1;
  int64_t lo = umin < 0 ? 0 : umin;
  int64_t n = (umax < in ? umax : in) - lo;
  n = n < 0 ? 0 : (n > K ? K : n);
  /* taps before the first pixel add into the first weight, taps past the
   * last into the last; the precision search sees every partial sum */
  double top = 0;
  int64_t k = 0;
  for (int64_t j = 0; j < K; ++j) {
    double f = u8_filter((double)(j + 1 - half) - lam, cubic, -0.75);
    if (umin + j <= 0)
      k = 0;
    else if (umin + j >= in - 1)
      k = n - 1;
    if (k >= 0 && k < K) {
      wo[k] += f;
      if (wo[k] > top) top = wo[k];
    }
    ++k;
  }
  *lo_out = lo;
  *n_out = n;
  return top;
}

/* Fills m for a dim of size in resized to out; 0 on no memory. */
static int u8_map_make(int64_t in, int64_t out, int align, double sarg, int cubic, int aa, u8_map* m) {
  double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0)
                       : (sarg > 0 ? 1.0 / sarg : (double)in / (double)out);
  double interp = cubic ? 4 : 2, support = 0;
  int64_t K;
  if (aa) {
    support = scale >= 1.0 ? interp * 0.5 * scale : interp * 0.5;
    K = (int64_t)ceil(support) * 2 + 1;
  } else {
    K = (int64_t)interp;
  }
  m->K = K;
  m->xmin = malloc(sizeof(int64_t) * (size_t)out);
  m->w = calloc((size_t)(out * K), sizeof(int64_t));
  int64_t* size = malloc(sizeof(int64_t) * (size_t)out);
  double* wd = calloc((size_t)(out * K), sizeof(double));
  if (!m->xmin || !m->w || !size || !wd) {
    u8_map_free(m);
    free(size);
    free(wd);
    return 0;
  }
  double top = 0;
  for (int64_t o = 0; o < out; ++o) {
    double t = aa ? u8_taps_aa(o, in, K, scale, support, cubic, &wd[o * K], &m->xmin[o], &size[o])
                  : u8_taps_plain(o, in, K, align, scale, cubic, &wd[o * K], &m->xmin[o], &size[o]);
    if (t > top) top = t;
  }
  int p = 0;
  for (; p < 22; ++p)
    if ((int)(0.5 + top * (double)(1 << (p + 1))) >= (1 << 15)) break;
  m->p = p;
  for (int64_t o = 0; o < out; ++o)
    for (int64_t j = 0; j < size[o]; ++j) {
      double v = wd[o * K + j] * (double)(1 << p);
      m->w[o * K + j] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
  free(size);
  free(wd);
  return 1;
}

/* The (out, in) i32 matrix of m: W[o, i] = w[o, i - xmin[o]] inside the
 * window, else 0, gathered on the device from the flat weights. */
static ttpu_val u8_matrix(ttpu_hlo* b, const u8_map* m, int64_t in, int64_t out) {
  int64_t K = m->K;
  ttpu_val vw = ttpu_hlo_convert(b, ttpu_hlo_const_i64s(b, m->w, (int)(out * K)), TTPU_I32);
  ttpu_val vx = ttpu_hlo_const_i64s(b, m->xmin, (int)out);
  return ttpu_upsample_window_matrix(b, vw, vx, K, in, out, TTPU_I32);
}

/* x (i32 pixels) with its dim d resized through m, rounded and clamped. */
static ttpu_val u8_pass(ttpu_hlo* b, ttpu_val x, int d, const u8_map* m, int64_t in, int64_t out) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  int64_t cx = d, cm = 1, perm[TTPU_MAX_DIMS];
  ttpu_val r = ttpu_hlo_dot_general(b, x, u8_matrix(b, m, in, out), NULL, NULL, 0, &cx, &cm, 1, TTPU_I32,
                                    TTPU_PREC_HIGHEST);
  /* the product's new dim comes last; put it back at d */
  for (int i = 0, k = 0; i < nd; ++i) perm[i] = i == d ? nd - 1 : k++;
  r = ttpu_hlo_transpose(b, r, perm);
  const ttpu_type* tr = ttpu_hlo_type(b, r);
  if (!tr) return TTPU_VAL_ERROR;
  ttpu_type t = *tr;
  r = ttpu_hlo_binary(b, TTPU_ADD, r, ttpu_hlo_const(b, t, 0, (int64_t)1 << (m->p - 1)));
  r = ttpu_hlo_binary(b, TTPU_SHR_A, r, ttpu_hlo_const(b, t, 0, m->p));
  return ttpu_hlo_clamp(b, ttpu_hlo_const(b, t, 0, 0), r, ttpu_hlo_const(b, t, 0, 255));
}

/* 1 when the CPU's generic kernel iterates the output's height innermost:
 * its dim of least stride among those longer than 1 is the height. */
static int u8_height_innermost(const ttpu_tensor* t) {
  int best = -1;
  for (int d = 0; d < t->ndim; ++d)
    if (t->sizes[d] > 1 && (best < 0 || t->strides[d] < t->strides[best])) best = d;
  return best == 2;
}

/* PyTorch's is_contiguous of a 4-d view, channels-first (cl 0) or
 * channels-last (cl 1): dims longer than 1 dense in that order. */
static int u8_dense(const ttpu_tensor* t, int cl) {
  static const int order[2][4] = {{3, 2, 1, 0}, {1, 3, 2, 0}};
  int64_t expect = 1;
  if (t->ndim != 4) return 0;
  for (int k = 0; k < 4; ++k) {
    int d = order[cl][k];
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expect) return 0;
    expect *= t->sizes[d];
  }
  return 1;
}

ttpu_status* ttpu_upsample_u8(ttpu_lower* L, int cubic, int antialias, int out_final) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const char* name = cubic ? (antialias ? "_upsample_bicubic2d_aa" : "upsample_bicubic2d")
                           : (antialias ? "_upsample_bilinear2d_aa" : "upsample_bilinear2d");
  ttpu_val v = ttpu_l_tensor(L, 0);
  ttpu_type tin = ttpu_l_type(L, v), out = ttpu_l_out_type(L, 0);
  if (tin.ndim != 4 || out.ndim != 4) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: expected 4-d tensors", name);
  if (ttpu_type_numel(&out) == 0 || ttpu_type_numel(&tin) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  int64_t ih = tin.dims[2], iw = tin.dims[3], oh = out.dims[2], ow = out.dims[3];
  const ttpu_op_call* call = ttpu_l_call(L);
  int height_inner = call->n_outputs > 0 && u8_height_innermost(&call->outputs[0]);
  /* an output that an out= form copies into a tensor of its own layout
   * says nothing of that layout: width 1 there may be channels-first */
  if (!out_final && ow == 1) height_inner = 1;
  if (tin.dims[1] > 4 && oh != ih && height_inner) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                  "%s on tpu: uint8 input with %lld channels resized in height into an output whose height is "
                  "its innermost dim (as for width 1, channels-first) is not implemented: the CPU kernel's "
                  "result there depends on its threading",
                  name, (long long)tin.dims[1]);
    return NULL;
  }
  /* The SIMD kernel (up to 4 channels) reads 3-channel pixels packed when
   * the input is channels-last (a view dense in neither layout is made
   * so), writes them packed when the output is, and keeps them as 4 bytes
   * otherwise. Unpacked input into a packed output fails its check when
   * the height is resized; resizing the width alone, it writes 4-byte
   * pixels over the 3-byte ones, right only for a single pixel. */
  const ttpu_tensor* din = ttpu_l_tensor_desc(L, 0, -1);
  if (tin.dims[1] == 3 && (oh != ih || ow != iw) && din && call->n_outputs > 0 && u8_dense(&call->outputs[0], 1) &&
      u8_dense(din, 0) && !u8_dense(din, 1) && (oh != ih || oh * ow != 1)) {
    if (oh != ih) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "num_channels == unpacked_output.size(0) INTERNAL ASSERT FAILED");
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                  "%s on tpu: uint8 channels-first 3-channel input into a channels-last output is not "
                  "implemented (the CPU kernel writes 4-byte pixels there)",
                  name);
    return NULL;
  }
  int align = ttpu_l_bool(L, 2, 0);
  v = ttpu_hlo_convert(b, v, TTPU_I32);
  /* width first, then height, each pass rounded to uint8 */
  for (int d = 3; d >= 2; --d) {
    int64_t n_in = d == 3 ? iw : ih, n_out = d == 3 ? ow : oh;
    if (n_in == n_out) continue;
    u8_map m;
    if (!u8_map_make(n_in, n_out, align, u8_scale_arg(L, d == 3 ? 4 : 3), cubic, antialias, &m))
      return ttpu_status_oom();
    v = u8_pass(b, v, d, &m, n_in, n_out);
    u8_map_free(&m);
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, v, TTPU_U8));
  return NULL;
}
