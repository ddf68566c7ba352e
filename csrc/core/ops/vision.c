/* vision.c - torchvision's detection ops: nms, roi_align and roi_pool with
 * their backwards, computed as torchvision's CPU kernels compute them (the
 * same sample points, bilinear weights, bin bounds, visiting order and
 * tie rules), so that a detection model gives the CPU's answer.
 *
 * The glue (csrc/torch/aten/vision_kernels.cpp) registers them for tpu
 * under torchvision's own op names when torchvision is installed and
 * calls the engine ops below with arguments in the schema's order:
 *
 *   torchvision::nms(dets, scores, iou_threshold)
 *       outputs: keep (i64[N]: the kept indices, in descending score
 *       order, first), count (i64[]: how many are kept)
 *   torchvision::roi_align(input, rois, spatial_scale, pooled_height,
 *       pooled_width, sampling_ratio, aligned) -> [K, C, PH, PW]
 *   torchvision::_roi_align_backward(grad, rois, spatial_scale,
 *       pooled_height, pooled_width, batch_size, channels, height, width,
 *       sampling_ratio, aligned) -> [N, C, H, W]
 *   torchvision::roi_pool(input, rois, spatial_scale, pooled_height,
 *       pooled_width) -> (output [K, C, PH, PW], argmax i32 of its shape)
 *   torchvision::_roi_pool_backward(grad, rois, argmax, spatial_scale,
 *       pooled_height, pooled_width, batch_size, channels, height, width)
 *
 * Shapes are static; what depends on the data is a loop count. roi_align
 * visits its sample points and roi_pool its bin cells in a stablehlo.while
 * whose trip count is the largest grid (or bin) over the rois, computed
 * in the program: no host read, and memory for one sample per bin at a
 * time. Each roi masks the samples beyond its own grid. Feature maps are
 * read as rows of channels (N*H*W rows of C), so one gather per corner
 * serves every channel. */
#include "elementwise.h"

#include <float.h>
#include <math.h>
#include <string.h>

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_val cmp(ttpu_hlo* b, ttpu_cmp d, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_compare(b, d, x, y);
}

static ttpu_val sel(ttpu_hlo* b, ttpu_val p, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_select(b, p, x, y);
}

/* x / y as written: XLA would turn a division by a constant into a
 * multiplication by its rounded reciprocal, which moves bin edges. */
static ttpu_val tdiv(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_DIV, x, ttpu_hlo_opaque(b, y));
}

static ttpu_type ty(ttpu_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  int64_t d[4] = {d0, d1, d2, d3};
  return ttpu_type_make(dt, ndim, d);
}

/* x (dims listed in map) broadcast to t. */
static ttpu_val bc(ttpu_hlo* b, ttpu_val x, ttpu_type t, int64_t m0, int64_t m1) {
  int64_t map[2] = {m0, m1};
  return ttpu_hlo_broadcast_in_dim(b, x, t, map);
}

/* std::max(a, b) and std::min(a, b) of the CPU kernels: the first
 * argument unless the comparison says otherwise (NaN keeps it). */
static ttpu_val cmax(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return sel(b, cmp(b, TTPU_LT, x, y), y, x);
}

static ttpu_val cmin(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return sel(b, cmp(b, TTPU_LT, y, x), y, x);
}

/* Column k of a [K, w] value, as [K]. */
static ttpu_val column(ttpu_hlo* b, ttpu_val x, int k) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return TTPU_VAL_ERROR;
  int64_t n = t->dims[0];
  int64_t start[2] = {0, k}, limit[2] = {n, k + 1}, stride[2] = {1, 1};
  return ttpu_hlo_reshape(b, ttpu_hlo_slice(b, x, start, limit, stride), 1, &n);
}

/* ------------------------------------------------------------------- nms */

/* state: i, suppressed[N], keep[N] */
typedef struct {
  int64_t n;
  ttpu_val over; /* bool[N, N]: IoU of sorted boxes i, j above the threshold */
} nms_ctx;

static ttpu_val nms_cond(ttpu_hlo* b, void* ctx, const ttpu_val* s) {
  const nms_ctx* c = ctx;
  return cmp(b, TTPU_LT, s[0], ttpu_hlo_const_i(b, TTPU_I64, c->n));
}

static void nms_body(ttpu_hlo* b, void* ctx, const ttpu_val* s, ttpu_val* next) {
  const nms_ctx* c = ctx;
  int64_t one = 1, n = c->n;
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val start_i[1] = {s[0]};
  ttpu_val start_row[2] = {s[0], zero};
  int64_t row_sizes[2] = {1, n};
  ttpu_val sup_i = ttpu_hlo_reshape(b, ttpu_hlo_dynamic_slice(b, s[1], start_i, &one), 0, NULL);
  ttpu_val kept = ttpu_hlo_unary(b, TTPU_NOT, sup_i);
  ttpu_val row = ttpu_hlo_reshape(b, ttpu_hlo_dynamic_slice(b, c->over, start_row, row_sizes), 1, &n);
  ttpu_type tb = ty(TTPU_BOOL, 1, n, 0, 0, 0);
  ttpu_val kept_n = ttpu_hlo_broadcast_in_dim(b, kept, tb, NULL);
  next[0] = bin(b, TTPU_ADD, s[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = bin(b, TTPU_OR, s[1], bin(b, TTPU_AND, row, kept_n));
  next[2] = ttpu_hlo_dynamic_update_slice(b, s[2], ttpu_hlo_reshape(b, kept, 1, &one), start_i);
}

/* The comparison `ovr > iou_threshold` of the CPU kernel, which compares
 * in double, for ovr of dtype dt: against the threshold rounded up to dt
 * (strictly greater if it is exact there, else greater or equal). */
static ttpu_val above(ttpu_hlo* b, ttpu_val ovr, ttpu_dtype dt, double thr) {
  if (dt == TTPU_F64) return cmp(b, TTPU_GT, ovr, ttpu_ew_k(b, ovr, thr));
  float f = (float)thr;
  if (isnan(thr)) return ttpu_ew_k(b, cmp(b, TTPU_NE, ovr, ovr), 0);
  /* (float)thr is the nearest float: below thr, the next one up is the
   * smallest float not below it */
  if ((double)f < thr) f = nextafterf(f, INFINITY);
  return cmp(b, (double)f == thr ? TTPU_GT : TTPU_GE, ovr, ttpu_ew_k(b, ovr, f));
}

static ttpu_status* lower_nms(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val dets = ttpu_l_tensor(L, 0), scores = ttpu_l_tensor(L, 1);
  ttpu_type td = ttpu_l_type(L, dets);
  if (td.ndim != 2 || td.dims[1] != 4 || ttpu_l_nout(L) != 2) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "nms: boxes must be [N, 4], with outputs keep and count");
    return NULL;
  }
  int64_t n = td.dims[0];
  ttpu_dtype dt = td.dtype;
  ttpu_type tn = ty(TTPU_I64, 1, n, 0, 0, 0);
  ttpu_val iota = ttpu_hlo_iota(b, tn, 0);
  ttpu_val sorted[2];
  ttpu_hlo_sort(b, ttpu_hlo_convert(b, scores, dt), &iota, 1, 0, 1, sorted);
  ttpu_val order = sorted[1];
  ttpu_val boxes = ttpu_l_gather_dim(b, dets, 0, order);
  ttpu_val x1 = column(b, boxes, 0), y1 = column(b, boxes, 1);
  ttpu_val x2 = column(b, boxes, 2), y2 = column(b, boxes, 3);
  ttpu_val area = bin(b, TTPU_MUL, bin(b, TTPU_SUB, x2, x1), bin(b, TTPU_SUB, y2, y1));
  /* [i, j]: box i (rows) against box j (columns), as the CPU's inner loop */
  ttpu_type tm = ty(dt, 2, n, n, 0, 0);
  ttpu_val xx1 = cmax(b, bc(b, x1, tm, 0, 0), bc(b, x1, tm, 1, 0));
  ttpu_val yy1 = cmax(b, bc(b, y1, tm, 0, 0), bc(b, y1, tm, 1, 0));
  ttpu_val xx2 = cmin(b, bc(b, x2, tm, 0, 0), bc(b, x2, tm, 1, 0));
  ttpu_val yy2 = cmin(b, bc(b, y2, tm, 0, 0), bc(b, y2, tm, 1, 0));
  ttpu_val zero = ttpu_hlo_const(b, tm, 0, 0);
  ttpu_val w = cmax(b, zero, bin(b, TTPU_SUB, xx2, xx1));
  ttpu_val h = cmax(b, zero, bin(b, TTPU_SUB, yy2, yy1));
  ttpu_val inter = bin(b, TTPU_MUL, w, h);
  ttpu_val uni = bin(b, TTPU_SUB, bin(b, TTPU_ADD, bc(b, area, tm, 0, 0), bc(b, area, tm, 1, 0)), inter);
  nms_ctx c = {n, above(b, bin(b, TTPU_DIV, inter, uni), dt, ttpu_l_float(L, 2, 0))};
  ttpu_type tb = ty(TTPU_BOOL, 1, n, 0, 0, 0);
  ttpu_val init[3] = {ttpu_hlo_const_i(b, TTPU_I64, 0), ttpu_hlo_const(b, tb, 0, 0),
                      ttpu_hlo_const(b, tb, 0, 0)},
           fin[3];
  ttpu_hlo_while(b, init, 3, nms_cond, nms_body, &c, fin);
  /* kept indices to the front, in order: slot cumsum - 1, the others out
   * of range (dropped by the scatter) */
  ttpu_val kept = ttpu_hlo_convert(b, fin[2], TTPU_I64);
  ttpu_val slot = bin(b, TTPU_SUB, ttpu_hlo_cumulative(b, kept, TTPU_RED_SUM, 0), ttpu_hlo_const(b, tn, 1, 1));
  slot = sel(b, fin[2], slot, ttpu_hlo_const(b, tn, (double)n, n));
  ttpu_l_set_out(L, 0, ttpu_hlo_put(b, ttpu_hlo_const(b, tn, 0, 0), slot, order, TTPU_SCATTER_SET));
  int64_t all = 0;
  ttpu_l_set_out(L, 1, ttpu_hlo_reduce(b, kept, TTPU_RED_SUM, &all, 1));
  return NULL;
}

/* ------------------------------------------------------------- roi_align */

/* Per-roi geometry of roi_align, as the CPU kernel computes it in the
 * input's dtype. */
typedef struct {
  ttpu_dtype dt;
  int64_t k, c, h, w, ph, pw;
  ttpu_val batch;             /* i64[K]: the roi's image */
  ttpu_val start_h, start_w;  /* dt[K] */
  ttpu_val bin_h, bin_w;      /* dt[K] */
  ttpu_val grid_h, grid_w;    /* i64[K]: sample points per bin and dim */
  ttpu_val grid_hf, grid_wf;  /* the same in dt */
  ttpu_val grid_n;            /* dt[K]: grid_h * grid_w */
  ttpu_val count;             /* dt[K]: max(grid_h * grid_w, 1) */
  ttpu_val gw_max, total;     /* i64[]: the loop's grid and trip count */
  ttpu_val rows;              /* forward: dt[N*H*W, C]; backward: grad dt[K, PH, PW, C] */
} ra_geom;

static void ra_setup(ttpu_lower* L, ra_geom* g, int rois_arg, int scale_arg, int ph_arg, int sr_arg,
                     int aligned_arg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val rois = ttpu_l_tensor(L, rois_arg);
  ttpu_type tr = ttpu_l_type(L, rois);
  g->k = tr.dims[0];
  g->ph = ttpu_l_int(L, ph_arg, 1);
  g->pw = ttpu_l_int(L, ph_arg + 1, 1);
  rois = ttpu_hlo_convert(b, rois, g->dt);
  int64_t sr = ttpu_l_int(L, sr_arg, 0);
  int aligned = ttpu_l_bool(L, aligned_arg, 0);
  ttpu_type tk = ty(g->dt, 1, g->k, 0, 0, 0), ti = ty(TTPU_I64, 1, g->k, 0, 0, 0);
  ttpu_val scale = ttpu_hlo_const(b, tk, ttpu_l_float(L, scale_arg, 1), 0);
  ttpu_val off = ttpu_hlo_const(b, tk, aligned ? 0.5 : 0.0, 0);
  ttpu_val at[4];
  for (int i = 0; i < 4; ++i) at[i] = bin(b, TTPU_SUB, bin(b, TTPU_MUL, column(b, rois, i + 1), scale), off);
  g->batch = ttpu_hlo_convert(b, column(b, rois, 0), TTPU_I64);
  g->start_w = at[0];
  g->start_h = at[1];
  ttpu_val rw = bin(b, TTPU_SUB, at[2], at[0]), rh = bin(b, TTPU_SUB, at[3], at[1]);
  if (!aligned) {
    ttpu_val one = ttpu_hlo_const(b, tk, 1, 1);
    rw = cmax(b, rw, one);
    rh = cmax(b, rh, one);
  }
  g->bin_h = tdiv(b, rh, ttpu_hlo_const(b, tk, (double)g->ph, 0));
  g->bin_w = tdiv(b, rw, ttpu_hlo_const(b, tk, (double)g->pw, 0));
  if (sr > 0) {
    g->grid_h = g->grid_w = ttpu_hlo_const(b, ti, 0, sr);
  } else {
    /* ceil(roi_height / pooled_height), in float for half inputs */
    ttpu_dtype ct = g->dt == TTPU_F64 ? TTPU_F64 : TTPU_F32;
    ttpu_type tc = ty(ct, 1, g->k, 0, 0, 0);
    g->grid_h = ttpu_hlo_convert(
        b, ttpu_hlo_unary(b, TTPU_CEIL, tdiv(b, ttpu_hlo_convert(b, rh, ct), ttpu_hlo_const(b, tc, (double)g->ph, 0))),
        TTPU_I64);
    g->grid_w = ttpu_hlo_convert(
        b, ttpu_hlo_unary(b, TTPU_CEIL, tdiv(b, ttpu_hlo_convert(b, rw, ct), ttpu_hlo_const(b, tc, (double)g->pw, 0))),
        TTPU_I64);
  }
  /* divisors, kept from XLA's reciprocal rewrite (tdiv) */
  g->grid_hf = ttpu_hlo_opaque(b, ttpu_hlo_convert(b, g->grid_h, g->dt));
  g->grid_wf = ttpu_hlo_opaque(b, ttpu_hlo_convert(b, g->grid_w, g->dt));
  ttpu_val n = bin(b, TTPU_MUL, g->grid_h, g->grid_w);
  g->grid_n = ttpu_hlo_opaque(b, ttpu_hlo_convert(b, n, g->dt));
  g->count = ttpu_hlo_opaque(b, ttpu_hlo_convert(b, bin(b, TTPU_MAX, n, ttpu_hlo_const(b, ti, 1, 1)), g->dt));
  int64_t d0 = 0;
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val gh_max = bin(b, TTPU_MAX, ttpu_hlo_reduce(b, g->grid_h, TTPU_RED_MAX, &d0, 1), zero);
  g->gw_max = bin(b, TTPU_MAX, ttpu_hlo_reduce(b, g->grid_w, TTPU_RED_MAX, &d0, 1), zero);
  g->total = bin(b, TTPU_MUL, gh_max, g->gw_max);
}

/* One dim's side of a sample: per roi and bin, the low and high cells,
 * their weights (high: l, low: 1 - l) and whether the point is inside. */
typedef struct {
  ttpu_val lo, hi;     /* i64[K, P] */
  ttpu_val wl, wh;     /* dt[K, P]: weights of lo and hi */
  ttpu_val inside;     /* bool[K, P] */
} ra_side;

static ra_side ra_side_at(ttpu_hlo* b, const ra_geom* g, ttpu_val i, ttpu_val start, ttpu_val binsz,
                          ttpu_val gridf, int64_t p, int64_t size) {
  ra_side s;
  ttpu_type tp = ty(g->dt, 2, g->k, p, 0, 0);
  ttpu_type tpi = ty(TTPU_I64, 2, g->k, p, 0, 0);
  /* start + p * bin + (i + .5) * bin / grid, left to right */
  ttpu_val pos = ttpu_hlo_convert(b, ttpu_hlo_iota(b, tpi, 1), g->dt);
  ttpu_val frac = bin(b, TTPU_ADD, ttpu_hlo_convert(b, i, TTPU_F32), ttpu_hlo_const_f(b, TTPU_F32, 0.5));
  frac = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, frac, g->dt), tp, NULL);
  ttpu_val binb = bc(b, binsz, tp, 0, 0);
  ttpu_val v = bin(b, TTPU_ADD, bc(b, start, tp, 0, 0), bin(b, TTPU_MUL, pos, binb));
  v = bin(b, TTPU_ADD, v, bin(b, TTPU_DIV, bin(b, TTPU_MUL, frac, binb), bc(b, gridf, tp, 0, 0)));
  ttpu_val zero = ttpu_hlo_const(b, tp, 0, 0);
  s.inside = bin(b, TTPU_AND, cmp(b, TTPU_GE, v, ttpu_hlo_const(b, tp, -1, 0)),
                 cmp(b, TTPU_LE, v, ttpu_hlo_const(b, tp, (double)size, 0)));
  v = sel(b, cmp(b, TTPU_LE, v, zero), zero, v);
  /* inside, v is in [0, size]: the conversion truncates to its floor */
  ttpu_val lo = ttpu_hlo_convert(b, sel(b, s.inside, v, zero), TTPU_I64);
  ttpu_val last = ttpu_hlo_const(b, tpi, (double)(size - 1), size - 1);
  ttpu_val at_end = cmp(b, TTPU_GE, lo, last);
  s.lo = sel(b, at_end, last, lo);
  s.hi = sel(b, at_end, last, bin(b, TTPU_ADD, lo, ttpu_hlo_const(b, tpi, 1, 1)));
  v = sel(b, at_end, ttpu_hlo_convert(b, last, g->dt), v);
  s.wh = bin(b, TTPU_SUB, v, ttpu_hlo_convert(b, s.lo, g->dt));
  s.wl = bin(b, TTPU_SUB, ttpu_hlo_const(b, tp, 1, 1), s.wh);
  return s;
}

/* The sample (iy, ix) = (t / gw_max, t % gw_max) of every bin: the four
 * corners' row indices into the N*H*W rows (i64[K*PH*PW] each), their
 * weights (dt[K, PH, PW]; 0 where the point is outside), and which rois
 * have this sample at all (bool[K, PH, PW]). */
typedef struct {
  ttpu_val idx[4];
  ttpu_val wt[4];
  ttpu_val in_grid;
  ttpu_val inside;
} ra_sample;

static ra_sample ra_sample_at(ttpu_hlo* b, const ra_geom* g, ttpu_val t) {
  ra_sample r;
  ttpu_val iy = bin(b, TTPU_DIV, t, g->gw_max), ix = bin(b, TTPU_REM, t, g->gw_max);
  ra_side y = ra_side_at(b, g, iy, g->start_h, g->bin_h, g->grid_hf, g->ph, g->h);
  ra_side x = ra_side_at(b, g, ix, g->start_w, g->bin_w, g->grid_wf, g->pw, g->w);
  ttpu_type t3 = ty(g->dt, 3, g->k, g->ph, g->pw, 0), t3i = ty(TTPU_I64, 3, g->k, g->ph, g->pw, 0);
  ttpu_type t3b = ty(TTPU_BOOL, 3, g->k, g->ph, g->pw, 0);
  ttpu_type tki = ty(TTPU_I64, 1, g->k, 0, 0, 0);
  ttpu_val in_grid = bin(b, TTPU_AND, cmp(b, TTPU_LT, ttpu_hlo_broadcast_in_dim(b, iy, tki, NULL), g->grid_h),
                         cmp(b, TTPU_LT, ttpu_hlo_broadcast_in_dim(b, ix, tki, NULL), g->grid_w));
  r.in_grid = bc(b, in_grid, t3b, 0, 0);
  r.inside = bin(b, TTPU_AND, bc(b, y.inside, t3b, 0, 1), bc(b, x.inside, t3b, 0, 2));
  ttpu_val zero = ttpu_hlo_const(b, t3, 0, 0);
  ttpu_val wy[2] = {bc(b, y.wl, t3, 0, 1), bc(b, y.wh, t3, 0, 1)};
  ttpu_val wx[2] = {bc(b, x.wl, t3, 0, 2), bc(b, x.wh, t3, 0, 2)};
  ttpu_val cy[2] = {bc(b, y.lo, t3i, 0, 1), bc(b, y.hi, t3i, 0, 1)};
  ttpu_val cx[2] = {bc(b, x.lo, t3i, 0, 2), bc(b, x.hi, t3i, 0, 2)};
  /* image row base: batch * H */
  ttpu_val base = bc(b, bin(b, TTPU_MUL, g->batch, ttpu_hlo_const(b, tki, (double)g->h, g->h)), t3i, 0, 0);
  ttpu_val wv = ttpu_hlo_const(b, t3i, (double)g->w, g->w);
  int64_t flat = g->k * g->ph * g->pw;
  for (int k = 0; k < 4; ++k) {
    int yi = k >> 1, xi = k & 1;
    /* outside: weight 0 on the image's first cell, as the CPU's
     * precomputed empty samples (0 * x, so an inf there still makes NaN) */
    ttpu_val cell = bin(b, TTPU_ADD, bin(b, TTPU_MUL, bin(b, TTPU_ADD, base, cy[yi]), wv), cx[xi]);
    cell = sel(b, r.inside, cell, bin(b, TTPU_MUL, base, wv));
    r.idx[k] = ttpu_hlo_reshape(b, cell, 1, &flat);
    r.wt[k] = sel(b, r.inside, bin(b, TTPU_MUL, wy[yi], wx[xi]), zero);
  }
  return r;
}

/* x [K, PH, PW] broadcast over the channels: [K, PH, PW, C] */
static ttpu_val over_c(ttpu_hlo* b, const ra_geom* g, ttpu_val x) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return TTPU_VAL_ERROR;
  ttpu_type to = ty(t->dtype, 4, g->k, g->ph, g->pw, g->c);
  int64_t map[3] = {0, 1, 2};
  return ttpu_hlo_broadcast_in_dim(b, x, to, map);
}

static ttpu_val loop_cond(ttpu_hlo* b, void* ctx, const ttpu_val* s) {
  const ra_geom* g = ctx;
  return cmp(b, TTPU_LT, s[0], g->total);
}

/* state: t, acc dt[K, PH, PW, C] */
static void ra_fwd_body(ttpu_hlo* b, void* ctx, const ttpu_val* s, ttpu_val* next) {
  const ra_geom* g = ctx;
  ra_sample r = ra_sample_at(b, g, s[0]);
  int64_t d4[4] = {g->k, g->ph, g->pw, g->c};
  ttpu_val sum = TTPU_VAL_ERROR;
  for (int k = 0; k < 4; ++k) {
    ttpu_val v = ttpu_hlo_reshape(b, ttpu_l_gather_dim(b, g->rows, 0, r.idx[k]), 4, d4);
    ttpu_val term = bin(b, TTPU_MUL, over_c(b, g, r.wt[k]), v);
    sum = k == 0 ? term : bin(b, TTPU_ADD, sum, term);
  }
  next[0] = bin(b, TTPU_ADD, s[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = sel(b, over_c(b, g, r.in_grid), bin(b, TTPU_ADD, s[1], sum), s[1]);
}

/* x [A, B, C, D] transposed by perm */
static ttpu_val tr4(ttpu_hlo* b, ttpu_val x, int64_t p0, int64_t p1, int64_t p2, int64_t p3) {
  int64_t perm[4] = {p0, p1, p2, p3};
  return ttpu_hlo_transpose(b, x, perm);
}

/* The geometry of a roi_align call whose argument 0 (the input or the
 * gradient) and output are 4-d; `map` is the feature map's [N, C, H, W]
 * (the input's, or the gradient's output). 0 after a failure. */
static int ra_begin(ttpu_lower* L, ra_geom* g, ttpu_type map, int sr_arg, int aligned_arg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t0 = ttpu_l_type(L, ttpu_l_tensor(L, 0));
  if (t0.ndim != 4 || map.ndim != 4 || ttpu_l_out_type(L, 0).ndim != 4) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "roi_align: the feature map and the gradient must be 4-d");
    return 0;
  }
  memset(g, 0, sizeof *g);
  g->dt = t0.dtype;
  g->c = map.dims[1];
  g->h = map.dims[2];
  g->w = map.dims[3];
  ra_setup(L, g, 1, 2, 3, sr_arg, aligned_arg);
  return 1;
}

static ttpu_status* lower_roi_align(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  ra_geom g;
  if (!ra_begin(L, &g, tx, 5, 6)) return NULL;
  int64_t rows[2] = {tx.dims[0] * g.h * g.w, g.c};
  g.rows = ttpu_hlo_reshape(b, tr4(b, x, 0, 2, 3, 1), 2, rows);
  ttpu_type ta = ty(g.dt, 4, g.k, g.ph, g.pw, g.c);
  ttpu_val init[2] = {ttpu_hlo_const_i(b, TTPU_I64, 0), ttpu_hlo_const(b, ta, 0, 0)}, fin[2];
  ttpu_hlo_while(b, init, 2, loop_cond, ra_fwd_body, &g, fin);
  ttpu_type tk3 = ty(g.dt, 3, g.k, g.ph, g.pw, 0);
  ttpu_val out = bin(b, TTPU_DIV, fin[1], over_c(b, &g, bc(b, g.count, tk3, 0, 0)));
  ttpu_l_set_out(L, 0, tr4(b, out, 0, 3, 1, 2));
  return NULL;
}

/* state: t, grad_rows dt[N*H*W, C] */
static void ra_bwd_body(ttpu_hlo* b, void* ctx, const ttpu_val* s, ttpu_val* next) {
  const ra_geom* g = ctx;
  ra_sample r = ra_sample_at(b, g, s[0]);
  ttpu_type tk3 = ty(g->dt, 3, g->k, g->ph, g->pw, 0);
  ttpu_val live = bin(b, TTPU_AND, r.in_grid, r.inside);
  int64_t flat = g->k * g->ph * g->pw;
  ttpu_val drop = ttpu_hlo_const(b, ty(TTPU_I64, 1, flat, 0, 0, 0), 0, INT64_MAX);
  ttpu_val live_flat = ttpu_hlo_reshape(b, live, 1, &flat);
  ttpu_val idx[4], upd[4];
  int64_t d2[2] = {flat, g->c};
  /* grad * w / count, as the CPU: the grid's own count, no max with 1 */
  ttpu_val nc = over_c(b, g, bc(b, g->grid_n, tk3, 0, 0));
  for (int k = 0; k < 4; ++k) {
    idx[k] = sel(b, live_flat, r.idx[k], drop);
    ttpu_val u = bin(b, TTPU_DIV, bin(b, TTPU_MUL, g->rows, over_c(b, g, r.wt[k])), nc);
    upd[k] = ttpu_hlo_reshape(b, u, 2, d2);
  }
  next[0] = bin(b, TTPU_ADD, s[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = ttpu_l_scatter_dim(b, s[1], 0, ttpu_hlo_concat(b, idx, 4, 0), ttpu_hlo_concat(b, upd, 4, 0), TTPU_ADD);
}

static ttpu_status* lower_roi_align_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type to = ttpu_l_out_type(L, 0);
  ra_geom g;
  if (!ra_begin(L, &g, to, 9, 10)) return NULL;
  g.rows = tr4(b, ttpu_l_tensor(L, 0), 0, 2, 3, 1);
  int64_t rows[2] = {to.dims[0] * g.h * g.w, g.c};
  ttpu_val init[2] = {ttpu_hlo_const_i(b, TTPU_I64, 0), ttpu_hlo_const(b, ttpu_type_make(g.dt, 2, rows), 0, 0)},
           fin[2];
  ttpu_hlo_while(b, init, 2, loop_cond, ra_bwd_body, &g, fin);
  int64_t nhwc[4] = {to.dims[0], g.h, g.w, g.c};
  ttpu_l_set_out(L, 0, tr4(b, ttpu_hlo_reshape(b, fin[1], 4, nhwc), 0, 3, 1, 2));
  return NULL;
}

/* -------------------------------------------------------------- roi_pool */

/* C's round() (halves away from zero) of x, exactly: x - floor(x) is
 * exact in binary floating point. */
static ttpu_val round_away(ttpu_hlo* b, ttpu_val x) {
  ttpu_val half = ttpu_ew_k(b, x, 0.5), one = ttpu_ew_k(b, x, 1);
  ttpu_val fl = ttpu_hlo_unary(b, TTPU_FLOOR, x), ce = ttpu_hlo_unary(b, TTPU_CEIL, x);
  ttpu_val up = sel(b, cmp(b, TTPU_GE, bin(b, TTPU_SUB, x, fl), half), bin(b, TTPU_ADD, fl, one), fl);
  ttpu_val down = sel(b, cmp(b, TTPU_GE, bin(b, TTPU_SUB, ce, x), half), bin(b, TTPU_SUB, ce, one), ce);
  return sel(b, cmp(b, TTPU_GE, x, ttpu_ew_k(b, x, 0)), up, down);
}

typedef struct {
  ttpu_dtype dt;
  int64_t k, c, h, w, ph, pw;
  ttpu_val batch;                /* i64[K] */
  ttpu_val hstart, hend;         /* i64[K, PH], clipped to [0, H] */
  ttpu_val wstart, wend;         /* i64[K, PW] */
  ttpu_val kw_max, total;        /* i64[]: the widest bin, the loop's trip count */
  ttpu_val rows;                 /* dt[N*H*W, C] */
} rp_geom;

/* One dim's bins: start and end cells of bin p of every roi, as the CPU
 * computes them (floor(p * bin) + start and ceil((p + 1) * bin) + start,
 * clipped to [0, size]). */
static void rp_bins(ttpu_hlo* b, const rp_geom* g, ttpu_val r0, ttpu_val r1, int64_t p, int64_t size,
                    ttpu_val* start, ttpu_val* end) {
  ttpu_type tki = ty(TTPU_I64, 1, g->k, 0, 0, 0);
  ttpu_type tk = ty(g->dt, 1, g->k, 0, 0, 0);
  ttpu_type tp = ty(g->dt, 2, g->k, p, 0, 0), tpi = ty(TTPU_I64, 2, g->k, p, 0, 0);
  ttpu_val len = bin(b, TTPU_ADD, bin(b, TTPU_SUB, r1, r0), ttpu_hlo_const(b, tki, 1, 1));
  len = bin(b, TTPU_MAX, len, ttpu_hlo_const(b, tki, 1, 1));
  ttpu_val binsz = tdiv(b, ttpu_hlo_convert(b, len, g->dt), ttpu_hlo_const(b, tk, (double)p, 0));
  ttpu_val binb = bc(b, binsz, tp, 0, 0);
  ttpu_val i = ttpu_hlo_iota(b, tpi, 1);
  ttpu_val lo = ttpu_hlo_unary(b, TTPU_FLOOR, bin(b, TTPU_MUL, ttpu_hlo_convert(b, i, g->dt), binb));
  ttpu_val i1 = bin(b, TTPU_ADD, i, ttpu_hlo_const(b, tpi, 1, 1));
  ttpu_val hi = ttpu_hlo_unary(b, TTPU_CEIL, bin(b, TTPU_MUL, ttpu_hlo_convert(b, i1, g->dt), binb));
  ttpu_val r0b = bc(b, r0, tpi, 0, 0);
  ttpu_val zero = ttpu_hlo_const(b, tpi, 0, 0), top = ttpu_hlo_const(b, tpi, (double)size, size);
  *start = ttpu_hlo_clamp(b, zero, bin(b, TTPU_ADD, ttpu_hlo_convert(b, lo, TTPU_I64), r0b), top);
  *end = ttpu_hlo_clamp(b, zero, bin(b, TTPU_ADD, ttpu_hlo_convert(b, hi, TTPU_I64), r0b), top);
}

/* x [K, P] broadcast to [K, PH, PW, C] along dim d (1 or 2) */
static ttpu_val rp_over(ttpu_hlo* b, const rp_geom* g, ttpu_val x, int64_t d) {
  const ttpu_type* t = ttpu_hlo_type(b, x);
  if (!t) return TTPU_VAL_ERROR;
  return bc(b, x, ty(t->dtype, 4, g->k, g->ph, g->pw, g->c), 0, d);
}

static ttpu_val rp_cond(ttpu_hlo* b, void* ctx, const ttpu_val* s) {
  const rp_geom* g = ctx;
  return cmp(b, TTPU_LT, s[0], g->total);
}

/* state: t, max dt[K, PH, PW, C], argmax i32[K, PH, PW, C]. Cell
 * (hstart + t / kw_max, wstart + t % kw_max) of every bin: the cells of a
 * bin come in the CPU's order (rows, then columns), and a value replaces
 * the maximum only when greater, so ties and NaN resolve as there. */
static void rp_body(ttpu_hlo* b, void* ctx, const ttpu_val* s, ttpu_val* next) {
  const rp_geom* g = ctx;
  ttpu_type tki = ty(TTPU_I64, 1, g->k, 0, 0, 0);
  ttpu_type tph = ty(TTPU_I64, 2, g->k, g->ph, 0, 0), tpw = ty(TTPU_I64, 2, g->k, g->pw, 0, 0);
  ttpu_val kh = bin(b, TTPU_DIV, s[0], g->kw_max), kw = bin(b, TTPU_REM, s[0], g->kw_max);
  ttpu_val h = bin(b, TTPU_ADD, g->hstart, ttpu_hlo_broadcast_in_dim(b, kh, tph, NULL));
  ttpu_val w = bin(b, TTPU_ADD, g->wstart, ttpu_hlo_broadcast_in_dim(b, kw, tpw, NULL));
  ttpu_val vh = cmp(b, TTPU_LT, h, g->hend), vw = cmp(b, TTPU_LT, w, g->wend);
  ttpu_val valid = bin(b, TTPU_AND, rp_over(b, g, vh, 1), rp_over(b, g, vw, 2));
  ttpu_val hc = ttpu_hlo_clamp(b, ttpu_hlo_const(b, tph, 0, 0), h, ttpu_hlo_const(b, tph, (double)(g->h - 1), g->h - 1));
  ttpu_val wc = ttpu_hlo_clamp(b, ttpu_hlo_const(b, tpw, 0, 0), w, ttpu_hlo_const(b, tpw, (double)(g->w - 1), g->w - 1));
  ttpu_val base = bin(b, TTPU_MUL, g->batch, ttpu_hlo_const(b, tki, (double)g->h, g->h));
  ttpu_type t3i = ty(TTPU_I64, 3, g->k, g->ph, g->pw, 0);
  ttpu_val wv = ttpu_hlo_const(b, t3i, (double)g->w, g->w);
  ttpu_val rowi = bin(b, TTPU_ADD, bc(b, base, ty(TTPU_I64, 2, g->k, g->ph, 0, 0), 0, 0), hc);
  ttpu_val cell = bin(b, TTPU_ADD, bin(b, TTPU_MUL, bc(b, rowi, t3i, 0, 1), wv), bc(b, wc, t3i, 0, 2));
  int64_t flat = g->k * g->ph * g->pw, d4[4] = {g->k, g->ph, g->pw, g->c};
  ttpu_val v = ttpu_hlo_reshape(b, ttpu_l_gather_dim(b, g->rows, 0, ttpu_hlo_reshape(b, cell, 1, &flat)), 4, d4);
  ttpu_val upd = bin(b, TTPU_AND, valid, cmp(b, TTPU_GT, v, s[1]));
  ttpu_val at = bin(b, TTPU_ADD, bin(b, TTPU_MUL, rp_over(b, g, h, 1), ttpu_hlo_const(b, ty(TTPU_I64, 4, g->k, g->ph, g->pw, g->c), (double)g->w, g->w)),
                    rp_over(b, g, w, 2));
  next[0] = bin(b, TTPU_ADD, s[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = sel(b, upd, v, s[1]);
  next[2] = sel(b, upd, ttpu_hlo_convert(b, at, TTPU_I32), s[2]);
}

/* The rois' image and rounded corners: x1, y1, x2, y2 as cells. */
static void rp_corners(ttpu_lower* L, ttpu_dtype dt, int rois_arg, int scale_arg, ttpu_val* batch, ttpu_val* c) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val rois = ttpu_hlo_convert(b, ttpu_l_tensor(L, rois_arg), dt);
  ttpu_type tr = ttpu_l_type(L, rois);
  ttpu_type tk = ty(dt, 1, tr.dims[0], 0, 0, 0);
  ttpu_val scale = ttpu_hlo_const(b, tk, ttpu_l_float(L, scale_arg, 1), 0);
  *batch = ttpu_hlo_convert(b, column(b, rois, 0), TTPU_I64);
  for (int i = 0; i < 4; ++i)
    c[i] = ttpu_hlo_convert(b, round_away(b, bin(b, TTPU_MUL, column(b, rois, i + 1), scale)), TTPU_I64);
}

static ttpu_status* lower_roi_pool(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x), to = ttpu_l_out_type(L, 0);
  if (tx.ndim != 4 || to.ndim != 4 || ttpu_l_nout(L) != 2) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "roi_pool: input must be [N, C, H, W]");
    return NULL;
  }
  rp_geom g;
  memset(&g, 0, sizeof g);
  g.dt = tx.dtype;
  g.k = to.dims[0];
  g.c = tx.dims[1];
  g.h = tx.dims[2];
  g.w = tx.dims[3];
  g.ph = to.dims[2];
  g.pw = to.dims[3];
  ttpu_val c[4];
  rp_corners(L, g.dt, 1, 2, &g.batch, c);
  rp_bins(b, &g, c[1], c[3], g.ph, g.h, &g.hstart, &g.hend);
  rp_bins(b, &g, c[0], c[2], g.pw, g.w, &g.wstart, &g.wend);
  int64_t dims2[2] = {0, 1};
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val kh = bin(b, TTPU_MAX, ttpu_hlo_reduce(b, bin(b, TTPU_SUB, g.hend, g.hstart), TTPU_RED_MAX, dims2, 2), zero);
  g.kw_max = bin(b, TTPU_MAX, ttpu_hlo_reduce(b, bin(b, TTPU_SUB, g.wend, g.wstart), TTPU_RED_MAX, dims2, 2), zero);
  g.total = bin(b, TTPU_MUL, kh, g.kw_max);
  int64_t rows[2] = {tx.dims[0] * g.h * g.w, g.c};
  g.rows = ttpu_hlo_reshape(b, tr4(b, x, 0, 2, 3, 1), 2, rows);
  /* an empty bin is 0 with argmax -1; the others start below every
   * value the CPU takes (-FLT_MAX, in the input's dtype) */
  ttpu_val empty = bin(b, TTPU_OR, rp_over(b, &g, cmp(b, TTPU_LE, g.hend, g.hstart), 1),
                       rp_over(b, &g, cmp(b, TTPU_LE, g.wend, g.wstart), 2));
  ttpu_type ta = ty(g.dt, 4, g.k, g.ph, g.pw, g.c);
  ttpu_val init[3] = {zero, sel(b, empty, ttpu_hlo_const(b, ta, 0, 0), ttpu_hlo_const(b, ta, -FLT_MAX, 0)),
                      ttpu_hlo_const(b, ty(TTPU_I32, 4, g.k, g.ph, g.pw, g.c), -1, -1)},
           fin[3];
  ttpu_hlo_while(b, init, 3, rp_cond, rp_body, &g, fin);
  ttpu_l_set_out(L, 0, tr4(b, fin[1], 0, 3, 1, 2));
  ttpu_l_set_out(L, 1, tr4(b, fin[2], 0, 3, 1, 2));
  return NULL;
}

/* _roi_pool_backward: grad_input[batch, c, argmax] += grad where argmax
 * is not -1. */
static ttpu_status* lower_roi_pool_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val grad = ttpu_l_tensor(L, 0);
  ttpu_val arg = ttpu_hlo_convert(b, ttpu_l_tensor(L, 2), TTPU_I64);
  ttpu_type tg = ttpu_l_type(L, grad), to = ttpu_l_out_type(L, 0);
  if (tg.ndim != 4 || to.ndim != 4) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "_roi_pool_backward: grad must be [K, C, PH, PW]");
    return NULL;
  }
  ttpu_val batch = ttpu_hlo_convert(b, column(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), tg.dtype), 0), TTPU_I64);
  int64_t c = to.dims[1], hw = to.dims[2] * to.dims[3];
  ttpu_type ti = ty(TTPU_I64, 4, tg.dims[0], tg.dims[1], tg.dims[2], tg.dims[3]);
  /* (batch * C + c) * H * W + argmax */
  ttpu_val plane = bin(b, TTPU_ADD, bc(b, bin(b, TTPU_MUL, batch, ttpu_hlo_const(b, ty(TTPU_I64, 1, tg.dims[0], 0, 0, 0), (double)c, c)), ti, 0, 0),
                       ttpu_hlo_iota(b, ti, 1));
  ttpu_val idx = bin(b, TTPU_ADD, bin(b, TTPU_MUL, plane, ttpu_hlo_const(b, ti, (double)hw, hw)), arg);
  idx = sel(b, cmp(b, TTPU_EQ, arg, ttpu_hlo_const(b, ti, -1, -1)), ttpu_hlo_const(b, ti, 0, INT64_MAX), idx);
  int64_t all = ttpu_type_numel(&to);
  ttpu_val flat = ttpu_hlo_put(b, ttpu_hlo_const(b, ttpu_type_make(tg.dtype, 1, &all), 0, 0), idx, grad, TTPU_ADD);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, flat, to));
  return NULL;
}

const ttpu_op_def ttpu_ops_vision[] = {
    {"torchvision::nms", lower_nms, .flags = 0},
    {"torchvision::roi_align", lower_roi_align, .flags = 0},
    {"torchvision::_roi_align_backward", lower_roi_align_backward, .flags = 0},
    {"torchvision::roi_pool", lower_roi_pool, .flags = 0},
    {"torchvision::_roi_pool_backward", lower_roi_pool_backward, .flags = 0},
    {0},
};
