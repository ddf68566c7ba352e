/* grid_sample.c - grid sampling (grid_sampler_2d, grid_sampler_3d) and
 * its backward, w.r.t. input and grid.
 *
 * Each output point reads the input at the location its grid entry names
 * (x, y[, z] in [-1, 1], unnormalised to pixel coordinates, then padded:
 * zeros, border clip or reflection) and interpolates: bilinear (2^nd
 * corners), nearest (one, rounded half to even) or bicubic (4x4 taps,
 * 2-d only). On the device every tap is one row of a gather from the
 * input laid out as (N * spatial, C): the taps' flat addresses and
 * in-bounds masks are computed from the grid, all taps are gathered at
 * once, and the weights combine them. The backward scatter-adds the
 * weighted grad_output into the same rows (grad_input) and differentiates
 * the weights w.r.t. the location (grad_grid).
 *
 * The arithmetic follows the CPU kernels step by step, so that rounding
 * lands where the CPU's does: the 2-d one is PyTorch's vectorized kernel
 * (unnormalise as (g + 1) * scale - 0.5, reflection by the doubled span),
 * the 3-d one its scalar kernel (((g + 1) * size - 1) / 2, fmod and flip
 * parity). bfloat16/float16 are computed in float32 and rounded once. */
#include <string.h>

#include "ttpu_lower.h"

enum { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum { kZeros = 0, kBorder = 1, kReflection = 2 };
enum { kMaxTaps = 16 };

typedef struct {
  ttpu_hlo* b;
  ttpu_dtype acc;
  int nd; /* spatial dims: 2 or 3 */
  int interp, pad, align;
  int64_t N, C, P, M; /* batch, channels, output points per batch, N * P */
  int64_t size[3];    /* input sizes by grid coordinate: x (W), y (H), z (D) */
  int64_t stot;       /* input points per batch */
  ttpu_type t1, i1;   /* acc[M], i64[M] */
  ttpu_val nbase;     /* each point's batch index, i64[M] */
} gs;

static ttpu_val cst(gs* g, double v) { return ttpu_hlo_const(g->b, g->t1, v, 0); }
static ttpu_val add(gs* g, ttpu_val x, ttpu_val y) { return ttpu_hlo_binary(g->b, TTPU_ADD, x, y); }
static ttpu_val sub(gs* g, ttpu_val x, ttpu_val y) { return ttpu_hlo_binary(g->b, TTPU_SUB, x, y); }
static ttpu_val mul(gs* g, ttpu_val x, ttpu_val y) { return ttpu_hlo_binary(g->b, TTPU_MUL, x, y); }
static ttpu_val cmp(gs* g, ttpu_cmp c, ttpu_val x, ttpu_val y) { return ttpu_hlo_compare(g->b, c, x, y); }
static ttpu_val sel(gs* g, ttpu_val p, ttpu_val x, ttpu_val y) { return ttpu_hlo_select(g->b, p, x, y); }
static ttpu_val isnan_(gs* g, ttpu_val x) { return cmp(g, TTPU_NE, x, x); }

/* Grid coordinate -> pixel coordinate; *mult = d(result)/d(coordinate). */
static ttpu_val unnormalize(gs* g, ttpu_val x, int64_t s, ttpu_val* mult) {
  double sf = g->align ? (double)(s - 1) / 2 : (double)s / 2;
  if (mult) *mult = cst(g, sf);
  if (g->nd == 2) {
    ttpu_val u = mul(g, add(g, x, cst(g, 1)), cst(g, sf));
    return g->align ? u : sub(g, u, cst(g, 0.5));
  }
  ttpu_val x1 = add(g, x, cst(g, 1));
  if (g->align) return mul(g, ttpu_hlo_binary(g->b, TTPU_DIV, x1, cst(g, 2)), cst(g, (double)(s - 1)));
  return ttpu_hlo_binary(g->b, TTPU_DIV, sub(g, mul(g, x1, cst(g, (double)s)), cst(g, 1)), cst(g, 2));
}

/* Clip into [0, s-1]; the gradient passes strictly inside only. NaN goes
 * to 0 (2-d kernel) or s-1 (3-d kernel), as each CPU kernel's min/max. */
static ttpu_val clip(gs* g, ttpu_val x, int64_t s, ttpu_val* mult) {
  ttpu_val hi = cst(g, (double)(s - 1)), zero = cst(g, 0);
  ttpu_val r = ttpu_hlo_clamp(g->b, zero, x, hi);
  r = sel(g, isnan_(g, x), g->nd == 2 ? zero : hi, r);
  if (mult) {
    ttpu_val in = ttpu_hlo_binary(g->b, TTPU_AND, cmp(g, TTPU_GT, x, zero), cmp(g, TTPU_LT, x, hi));
    *mult = sel(g, in, *mult, zero);
  }
  return r;
}

/* Reflect into the image (centres of the edge pixels with align_corners,
 * else their outer edges); *mult (if given) is multiplied by +-1. */
static ttpu_val reflect(gs* g, ttpu_val x, int64_t s, ttpu_val* mult) {
  ttpu_hlo* b = g->b;
  ttpu_val zero = cst(g, 0), one = cst(g, 1);
  if (g->align && s <= 1) {
    if (mult) *mult = zero;
    return zero;
  }
  double low = g->align ? 0 : -0.5;
  ttpu_val v = g->align ? x : sub(g, x, cst(g, low));
  ttpu_val neg = cmp(g, TTPU_LT, v, zero), a = ttpu_hlo_unary(b, TTPU_ABS, v), r, flip;
  if (g->nd == 2) {
    /* fold by the doubled span: extra in [0, 2 span), then mirror */
    ttpu_val ts = cst(g, g->align ? 2.0 * (double)(s - 1) : 2.0 * (double)s);
    ttpu_val k = ttpu_hlo_unary(b, TTPU_FLOOR, ttpu_hlo_binary(b, TTPU_DIV, a, ts));
    ttpu_val extra = sub(g, a, mul(g, k, ts)), mirrored = sub(g, ts, extra);
    flip = cmp(g, TTPU_GT, extra, mirrored);
    r = sel(g, flip, mirrored, extra);
    if (!g->align) r = add(g, r, cst(g, low));
  } else {
    /* fmod by the span, mirrored on odd flip counts */
    ttpu_val span = cst(g, g->align ? (double)(s - 1) : (double)s);
    ttpu_val extra = ttpu_hlo_binary(b, TTPU_REM, a, span);
    ttpu_val flips = ttpu_hlo_unary(b, TTPU_FLOOR, ttpu_hlo_binary(b, TTPU_DIV, a, span));
    ttpu_val half = ttpu_hlo_unary(b, TTPU_FLOOR, mul(g, flips, cst(g, 0.5)));
    flip = cmp(g, TTPU_NE, sub(g, flips, mul(g, half, cst(g, 2))), zero);
    r = sel(g, flip, add(g, sub(g, span, extra), cst(g, low)), add(g, extra, cst(g, low)));
  }
  if (mult) {
    ttpu_val odd = ttpu_hlo_binary(b, TTPU_XOR, flip, neg);
    *mult = mul(g, *mult, sel(g, odd, cst(g, -1), one));
  }
  return r;
}

/* Padding applied to a pixel coordinate. */
static ttpu_val pad_coord(gs* g, ttpu_val u, int64_t s, ttpu_val* mult) {
  if (g->pad == kBorder) return clip(g, u, s, mult);
  if (g->pad == kReflection) return clip(g, reflect(g, u, s, mult), s, mult);
  return u;
}

/* One dim's tap position: its index clamped into [0, s) (a safe gather
 * address) and whether it was inside. */
typedef struct {
  ttpu_val ix, in;
} pos;

/* An integral-valued coordinate -> its position. */
static pos to_pos(gs* g, ttpu_val c, int64_t s) {
  ttpu_hlo* b = g->b;
  ttpu_val safe = sel(g, isnan_(g, c), cst(g, -1), ttpu_hlo_clamp(b, cst(g, -1), c, cst(g, (double)s)));
  ttpu_val i = ttpu_hlo_convert(b, safe, TTPU_I64);
  ttpu_val lo = ttpu_hlo_const(b, g->i1, 0, 0), hi = ttpu_hlo_const(b, g->i1, 0, s - 1);
  pos p = {ttpu_hlo_clamp(b, lo, i, hi),
           ttpu_hlo_binary(b, TTPU_AND, cmp(g, TTPU_GE, i, lo), cmp(g, TTPU_LE, i, hi))};
  return p;
}

/* A tap: its flat row of the (N * spatial, C) input and whether it is
 * inside the input. */
typedef struct {
  ttpu_val addr, inb;
} tap;

/* The tap at per-dim positions q[0..nd) (x first). */
static tap make_tap(gs* g, const pos* q) {
  ttpu_hlo* b = g->b;
  tap t = {g->nbase, q[0].in};
  for (int k = g->nd - 1; k >= 0; --k)
    t.addr = add(g, mul(g, t.addr, ttpu_hlo_const(b, g->i1, 0, g->size[k])), q[k].ix);
  for (int k = 1; k < g->nd; ++k) t.inb = ttpu_hlo_binary(b, TTPU_AND, t.inb, q[k].in);
  return t;
}

/* (M) -> (M, C) */
static ttpu_val bc(gs* g, ttpu_val v) {
  int64_t dims[2] = {g->M, g->C}, map = 0;
  const ttpu_type* t = ttpu_hlo_type(g->b, v);
  return ttpu_hlo_broadcast_in_dim(g->b, v, ttpu_type_make(t ? t->dtype : g->acc, 2, dims), &map);
}

/* The values of n taps, each (M, C), zero outside the input: one gather. */
static void gather_taps(gs* g, ttpu_val x, const tap* t, int n, ttpu_val* vals) {
  ttpu_hlo* b = g->b;
  ttpu_val addrs[kMaxTaps];
  for (int k = 0; k < n; ++k) addrs[k] = t[k].addr;
  ttpu_val all = n > 1 ? ttpu_hlo_concat(b, addrs, n, 0) : addrs[0];
  ttpu_val rows = ttpu_l_gather_dim(b, x, 0, all);
  int64_t dims[2] = {g->M, g->C};
  ttpu_val zero = ttpu_hlo_const(b, ttpu_type_make(g->acc, 2, dims), 0, 0);
  for (int k = 0; k < n; ++k) {
    int64_t lo[2] = {k * g->M, 0}, hi[2] = {(k + 1) * g->M, g->C}, st[2] = {1, 1};
    vals[k] = sel(g, bc(g, t[k].inb), ttpu_hlo_slice(b, rows, lo, hi, st), zero);
  }
}

/* grad_input: the n taps' updates (M, C) added into (N * spatial, C) at
 * their rows (outside taps add nothing). */
static ttpu_val scatter_taps(gs* g, const tap* t, const ttpu_val* upd, int n) {
  ttpu_hlo* b = g->b;
  ttpu_val addrs[kMaxTaps], u[kMaxTaps];
  int64_t dims[2] = {g->M, g->C}, rows[2] = {g->N * g->stot, g->C};
  ttpu_val zero = ttpu_hlo_const(b, ttpu_type_make(g->acc, 2, dims), 0, 0);
  for (int k = 0; k < n; ++k) {
    addrs[k] = t[k].addr;
    u[k] = sel(g, bc(g, t[k].inb), upd[k], zero);
  }
  ttpu_val ia = n > 1 ? ttpu_hlo_concat(b, addrs, n, 0) : addrs[0];
  ttpu_val ua = n > 1 ? ttpu_hlo_concat(b, u, n, 0) : u[0];
  ttpu_val base = ttpu_hlo_const(b, ttpu_type_make(g->acc, 2, rows), 0, 0);
  return ttpu_l_scatter_dim(b, base, 0, ia, ua, TTPU_ADD);
}

/* Keys' cubic convolution weights (A = -0.75) of the 4 taps at offsets
 * -1..2 from floor, for fraction t, and their derivatives w.r.t. t's
 * location, in the CPU kernel's order of operations. */
static void cubic_coeffs(gs* g, ttpu_val t, ttpu_val* c, ttpu_val* dc) {
  const double A = -0.75;
  ttpu_val a = cst(g, A), a2 = cst(g, A + 2), a3 = cst(g, A + 3), one = cst(g, 1);
  ttpu_val xo[4] = {add(g, t, one), t, sub(g, one, t), sub(g, cst(g, 2), t)};
  for (int k = 0; k < 4; ++k) {
    ttpu_val x = xo[k];
    if (k == 1 || k == 2)
      c[k] = add(g, mul(g, mul(g, sub(g, mul(g, a2, x), a3), x), x), one);
    else
      c[k] = sub(g, mul(g, add(g, mul(g, sub(g, mul(g, a, x), cst(g, 5 * A)), x), cst(g, 8 * A)), x), cst(g, 4 * A));
  }
  if (!dc) return;
  ttpu_val xg[4] = {sub(g, cst(g, -1), t), sub(g, cst(g, 0), t), sub(g, one, t), sub(g, cst(g, 2), t)};
  dc[0] = sub(g, mul(g, sub(g, mul(g, cst(g, -3 * A), xg[0]), cst(g, 10 * A)), xg[0]), cst(g, 8 * A));
  dc[1] = mul(g, sub(g, mul(g, cst(g, -3 * (A + 2)), xg[1]), cst(g, 2 * (A + 3))), xg[1]);
  dc[2] = mul(g, sub(g, mul(g, cst(g, 3 * (A + 2)), xg[2]), cst(g, 2 * (A + 3))), xg[2]);
  dc[3] = add(g, mul(g, sub(g, mul(g, cst(g, 3 * A), xg[3]), cst(g, 10 * A)), xg[3]), cst(g, 8 * A));
}

/* The sampling: the taps, their weights and (backward) the weights'
 * derivatives. n taps; for bilinear w[k] is tap k's weight and lw/hw the
 * per-dim low/high weights; for bicubic cx/cy and their derivatives. */
typedef struct {
  int n;
  tap t[kMaxTaps];
  ttpu_val w[kMaxTaps];
  ttpu_val lw[3], hw[3];          /* bilinear: weights of the low/high corner per dim */
  ttpu_val cx[4], cy[4], dx[4], dy[4]; /* bicubic */
  ttpu_val mult[3];               /* d(pixel coordinate)/d(grid) per dim */
} plan;

static void make_plan(gs* g, const ttpu_val* gridc, int backward, plan* p) {
  ttpu_hlo* b = g->b;
  memset(p, 0, sizeof *p);
  if (g->interp == kBicubic) {
    /* 2-d only: unnormalised, no padding; the padding applies per tap */
    ttpu_val f[2], t[2];
    for (int k = 0; k < 2; ++k) {
      ttpu_val u = unnormalize(g, gridc[k], g->size[k], &p->mult[k]);
      f[k] = ttpu_hlo_unary(b, TTPU_FLOOR, u);
      t[k] = sub(g, u, f[k]);
    }
    cubic_coeffs(g, t[0], p->cx, backward ? p->dx : NULL);
    cubic_coeffs(g, t[1], p->cy, backward ? p->dy : NULL);
    pos q[2][4];
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < 4; ++i)
        q[k][i] = to_pos(g, pad_coord(g, add(g, f[k], cst(g, i - 1)), g->size[k], NULL), g->size[k]);
    p->n = 16;
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        pos qq[2] = {q[0][i], q[1][j]};
        p->t[j * 4 + i] = make_tap(g, qq);
      }
    return;
  }
  ttpu_val u[3];
  for (int k = 0; k < g->nd; ++k)
    u[k] = pad_coord(g, unnormalize(g, gridc[k], g->size[k], &p->mult[k]), g->size[k], &p->mult[k]);
  if (g->interp == kNearest) {
    pos q[3];
    for (int k = 0; k < g->nd; ++k) q[k] = to_pos(g, ttpu_hlo_unary(b, TTPU_ROUND_EVEN, u[k]), g->size[k]);
    p->n = 1;
    p->t[0] = make_tap(g, q);
    return;
  }
  pos q[3][2];
  for (int k = 0; k < g->nd; ++k) {
    ttpu_val f = ttpu_hlo_unary(b, TTPU_FLOOR, u[k]), f1 = add(g, f, cst(g, 1));
    p->hw[k] = sub(g, u[k], f);
    /* 2-d: 1 - frac; 3-d: (floor + 1) - coordinate */
    p->lw[k] = g->nd == 2 ? sub(g, cst(g, 1), p->hw[k]) : sub(g, f1, u[k]);
    q[k][0] = to_pos(g, f, g->size[k]);
    q[k][1] = to_pos(g, f1, g->size[k]);
  }
  p->n = 1 << g->nd;
  for (int k = 0; k < p->n; ++k) {
    pos c[3];
    ttpu_val w = TTPU_VAL_ERROR;
    for (int d = 0; d < g->nd; ++d) c[d] = q[d][(k >> d) & 1];
    /* 2-d: wy * wx; 3-d: (wx * wy) * wz */
    if (g->nd == 2) {
      w = mul(g, (k & 2) ? p->hw[1] : p->lw[1], (k & 1) ? p->hw[0] : p->lw[0]);
    } else {
      w = mul(g, (k & 1) ? p->hw[0] : p->lw[0], (k & 2) ? p->hw[1] : p->lw[1]);
      w = mul(g, w, (k & 4) ? p->hw[2] : p->lw[2]);
    }
    p->w[k] = w;
    p->t[k] = make_tap(g, c);
  }
}

/* Reads the shapes and modes; 0 when fine, else the builder has failed. */
static int setup(ttpu_lower* L, gs* g, ttpu_type tin, ttpu_type tgrid, int arg_mode) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = tin.dtype;
  memset(g, 0, sizeof *g);
  g->b = b;
  g->nd = tin.ndim - 2;
  /* the CPU kernels' dtype errors: NotImplementedError for non-float
   * data, RuntimeError for a grid of another dtype */
  if (dt != TTPU_F32 && dt != TTPU_F64 && dt != TTPU_BF16 && dt != TTPU_F16) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "grid_sampler: not implemented for '%s'", ttpu_dtype_name(dt));
    return -1;
  }
  if (tgrid.dtype != dt) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "grid_sampler(): expected grid of dtype %s, but found %s",
                  ttpu_dtype_name(dt), ttpu_dtype_name(tgrid.dtype));
    return -1;
  }
  if ((g->nd != 2 && g->nd != 3) || tgrid.ndim != tin.ndim || tgrid.dims[tgrid.ndim - 1] != g->nd ||
      tgrid.dims[0] != tin.dims[0]) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "grid_sampler(): input and grid shapes do not match");
    return -1;
  }
  for (int k = 2; k < tin.ndim; ++k)
    if (tin.dims[k] == 0) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                    "grid_sampler(): expected input to have non-empty spatial dimensions, but dimension %d is empty",
                    k);
      return -1;
    }
  g->interp = (int)ttpu_l_int(L, arg_mode, 0);
  g->pad = (int)ttpu_l_int(L, arg_mode + 1, 0);
  g->align = ttpu_l_bool(L, arg_mode + 2, 0);
  if (g->interp == kBicubic && g->nd == 3) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "grid_sampler(): bicubic interpolation only supports 4D input");
    return -1;
  }
  if (g->interp < 0 || g->interp > 2 || g->pad < 0 || g->pad > 2) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "grid_sampler(): invalid interpolation mode %d or padding mode %d",
                  g->interp, g->pad);
    return -1;
  }
  g->acc = dt == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  g->N = tin.dims[0];
  g->C = tin.dims[1];
  g->P = 1;
  for (int k = 1; k <= g->nd; ++k) g->P *= tgrid.dims[k];
  g->M = g->N * g->P;
  g->stot = 1;
  for (int k = 0; k < g->nd; ++k) {
    g->size[k] = tin.dims[tin.ndim - 1 - k];
    g->stot *= g->size[k];
  }
  g->t1 = ttpu_type_make(g->acc, 1, &g->M);
  g->i1 = ttpu_type_make(TTPU_I64, 1, &g->M);
  g->nbase = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_iota(b, g->i1, 0), ttpu_hlo_const(b, g->i1, 0, g->P > 0 ? g->P : 1));
  return 0;
}

/* The grid's coordinates, each (M), in acc. */
static void grid_coords(gs* g, ttpu_val grid, ttpu_val* c) {
  ttpu_hlo* b = g->b;
  int64_t dims[2] = {g->M, g->nd};
  ttpu_val v = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, grid, g->acc), 2, dims);
  for (int k = 0; k < g->nd; ++k) {
    int64_t lo[2] = {0, k}, hi[2] = {g->M, k + 1}, st[2] = {1, 1};
    c[k] = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, v, lo, hi, st), 1, &g->M);
  }
}

/* (N, C, spatial...) -> (N * spatial, C), in acc */
static ttpu_val input_rows(gs* g, ttpu_val x) {
  int64_t perm[5] = {0}, rows[2] = {g->N * g->stot, g->C};
  int nd = g->nd + 2;
  for (int i = 1; i < nd - 1; ++i) perm[i] = i + 1;
  perm[nd - 1] = 1;
  return ttpu_hlo_reshape(g->b, ttpu_hlo_transpose(g->b, ttpu_hlo_convert(g->b, x, g->acc), perm), 2, rows);
}

/* (M, C) <-> (N, C, out spatial...) */
static ttpu_val points_to_nc(gs* g, ttpu_val v, ttpu_type to) {
  int64_t npc[3] = {g->N, g->P, g->C}, perm[3] = {0, 2, 1};
  v = ttpu_hlo_transpose(g->b, ttpu_hlo_reshape(g->b, v, 3, npc), perm);
  return ttpu_hlo_reshape(g->b, v, to.ndim, to.dims);
}

static ttpu_val nc_to_points(gs* g, ttpu_val v) {
  int64_t ncp[3] = {g->N, g->C, g->P}, perm[3] = {0, 2, 1}, mc[2] = {g->M, g->C};
  v = ttpu_hlo_transpose(g->b, ttpu_hlo_reshape(g->b, ttpu_hlo_convert(g->b, v, g->acc), 3, ncp), perm);
  return ttpu_hlo_reshape(g->b, v, 2, mc);
}

/* grid_sampler_{2,3}d(input, grid, interpolation_mode, padding_mode,
 * align_corners) */
static ttpu_status* lower_grid_sampler(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0), grid = ttpu_l_tensor(L, 1);
  ttpu_type out = ttpu_l_out_type(L, 0);
  gs g;
  if (setup(L, &g, ttpu_l_type(L, x), ttpu_l_type(L, grid), 2)) return NULL;
  if (ttpu_type_numel(&out) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  ttpu_val gc[3], v[kMaxTaps], r;
  plan p;
  grid_coords(&g, grid, gc);
  make_plan(&g, gc, 0, &p);
  gather_taps(&g, input_rows(&g, x), p.t, p.n, v);
  if (g.interp == kNearest) {
    r = v[0];
  } else if (g.interp == kBicubic) {
    ttpu_val row[4];
    for (int j = 0; j < 4; ++j) {
      row[j] = mul(&g, bc(&g, p.cx[0]), v[j * 4]);
      for (int i = 1; i < 4; ++i) row[j] = add(&g, row[j], mul(&g, bc(&g, p.cx[i]), v[j * 4 + i]));
    }
    r = mul(&g, bc(&g, p.cy[0]), row[0]);
    for (int j = 1; j < 4; ++j) r = add(&g, r, mul(&g, bc(&g, p.cy[j]), row[j]));
  } else {
    r = mul(&g, v[0], bc(&g, p.w[0]));
    for (int k = 1; k < p.n; ++k) r = add(&g, r, mul(&g, v[k], bc(&g, p.w[k])));
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, points_to_nc(&g, r, ttpu_type_make(g.acc, out.ndim, out.dims)), out.dtype));
  return NULL;
}

/* Output k exists and output_mask (arg 6) asks for it. */
static int wanted(ttpu_lower* L, int k) {
  if (k >= ttpu_l_nout(L)) return 0;
  const ttpu_tensor* t = &ttpu_l_call(L)->outputs[k];
  if (!t->buffer || t->dtype == TTPU_DTYPE_NONE) return 0;
  int n = 0;
  const int64_t* m = ttpu_l_ints(L, 6, &n);
  return !(k < n && !m[k]);
}

/* Sum over channels: (M, C) -> (M). */
static ttpu_val sum_c(gs* g, ttpu_val v) {
  int64_t d = 1;
  return ttpu_hlo_reduce(g->b, v, TTPU_RED_SUM, &d, 1);
}

/* grid_sampler_{2,3}d_backward(grad_output, input, grid,
 * interpolation_mode, padding_mode, align_corners, output_mask) ->
 * (grad_input, grad_grid) */
static ttpu_status* lower_grid_sampler_bwd(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val go = ttpu_l_tensor(L, 0), x = ttpu_l_tensor(L, 1), grid = ttpu_l_tensor(L, 2);
  ttpu_type tin = ttpu_l_type(L, x), tgrid = ttpu_l_type(L, grid);
  gs g;
  if (setup(L, &g, tin, tgrid, 3)) return NULL;
  /* grad_output must be (N, C, grid's spatial...) */
  ttpu_type tgo = ttpu_l_type(L, go);
  int ok = tgo.ndim == tin.ndim && tgo.dims[0] == g.N && tgo.dims[1] == g.C;
  for (int k = 2; ok && k < tin.ndim; ++k) ok = tgo.dims[k] == tgrid.dims[k - 1];
  if (!ok) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "grid_sampler(): grad_output does not have the output's shape");
    return NULL;
  }
  int want_in = wanted(L, 0), want_grid = wanted(L, 1);
  /* An output the mask leaves out but the call still has (the CPU returns
   * grad_grid whatever the mask says) is zeros. */
  for (int k = 0; k < 2 && k < ttpu_l_nout(L); ++k)
    if (!wanted(L, k) && ttpu_l_call(L)->outputs[k].buffer)
      ttpu_l_set_out(L, k, ttpu_hlo_const(b, ttpu_l_out_type(L, k), 0, 0));
  if (ttpu_type_numel(&tin) == 0 || g.M == 0 || g.C == 0) {
    if (want_in) ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ttpu_l_out_type(L, 0), 0, 0));
    if (want_grid) ttpu_l_set_out(L, 1, ttpu_hlo_const(b, ttpu_l_out_type(L, 1), 0, 0));
    return NULL;
  }
  ttpu_val gc[3], gop = nc_to_points(&g, go);
  plan p;
  grid_coords(&g, grid, gc);
  make_plan(&g, gc, 1, &p);
  if (want_in) {
    ttpu_val upd[kMaxTaps];
    for (int k = 0; k < p.n; ++k) {
      if (g.interp == kNearest)
        upd[k] = gop;
      else if (g.interp == kBicubic)
        upd[k] = mul(&g, mul(&g, gop, bc(&g, p.cx[k % 4])), bc(&g, p.cy[k / 4]));
      else
        upd[k] = mul(&g, bc(&g, p.w[k]), gop);
    }
    ttpu_val gi = scatter_taps(&g, p.t, upd, p.n);
    /* (N * spatial, C) -> (N, C, spatial...) */
    int64_t nsc[5], perm[5];
    nsc[0] = g.N;
    for (int k = 0; k < g.nd; ++k) nsc[1 + k] = tin.dims[2 + k];
    nsc[g.nd + 1] = g.C;
    perm[0] = 0;
    perm[1] = g.nd + 1;
    for (int k = 0; k < g.nd; ++k) perm[2 + k] = 1 + k;
    gi = ttpu_hlo_transpose(b, ttpu_hlo_reshape(b, gi, g.nd + 2, nsc), perm);
    ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, gi, ttpu_l_out_type(L, 0).dtype));
  }
  if (!want_grid) return NULL;
  ttpu_type tg = ttpu_l_out_type(L, 1);
  if (g.interp == kNearest) {
    ttpu_l_set_out(L, 1, ttpu_hlo_const(b, tg, 0, 0));
    return NULL;
  }
  ttpu_val v[kMaxTaps], gd[3];
  gather_taps(&g, input_rows(&g, x), p.t, p.n, v);
  if (g.interp == kBicubic) {
    ttpu_val sx = TTPU_VAL_ERROR, sy = TTPU_VAL_ERROR;
    for (int k = 0; k < 16; ++k) {
      int i = k % 4, j = k / 4;
      ttpu_val vg = mul(&g, v[k], gop);
      ttpu_val tx = mul(&g, mul(&g, vg, bc(&g, p.dx[i])), bc(&g, p.cy[j]));
      ttpu_val ty = mul(&g, mul(&g, vg, bc(&g, p.dy[j])), bc(&g, p.cx[i]));
      sx = k ? add(&g, sx, tx) : tx;
      sy = k ? add(&g, sy, ty) : ty;
    }
    gd[0] = ttpu_hlo_unary(b, TTPU_NEG, sum_c(&g, sx));
    gd[1] = ttpu_hlo_unary(b, TTPU_NEG, sum_c(&g, sy));
  } else if (g.nd == 2) {
    /* ((ne - nw) * s + (se - sw) * n) * gOut and the same along y */
    ttpu_val ex = add(&g, mul(&g, sub(&g, v[1], v[0]), bc(&g, p.lw[1])), mul(&g, sub(&g, v[3], v[2]), bc(&g, p.hw[1])));
    ttpu_val ey = add(&g, mul(&g, sub(&g, v[2], v[0]), bc(&g, p.lw[0])), mul(&g, sub(&g, v[3], v[1]), bc(&g, p.hw[0])));
    gd[0] = sum_c(&g, mul(&g, ex, gop));
    gd[1] = sum_c(&g, mul(&g, ey, gop));
  } else {
    /* each corner's value times the other two dims' weights, signed by
     * the side of the corner along the differentiated dim */
    for (int d = 0; d < 3; ++d) {
      ttpu_val s = TTPU_VAL_ERROR;
      int o1 = d == 0 ? 1 : 0, o2 = d == 2 ? 1 : 2;
      for (int k = 0; k < 8; ++k) {
        ttpu_val w1 = ((k >> o1) & 1) ? p.hw[o1] : p.lw[o1], w2 = ((k >> o2) & 1) ? p.hw[o2] : p.lw[o2];
        ttpu_val t = mul(&g, mul(&g, mul(&g, v[k], bc(&g, w1)), bc(&g, w2)), gop);
        s = k == 0 ? ttpu_hlo_unary(b, TTPU_NEG, t) : (((k >> d) & 1) ? add(&g, s, t) : sub(&g, s, t));
      }
      gd[d] = sum_c(&g, s);
    }
  }
  int64_t m1[2] = {g.M, 1};
  for (int d = 0; d < g.nd; ++d) gd[d] = ttpu_hlo_reshape(b, mul(&g, gd[d], p.mult[d]), 2, m1);
  ttpu_val gg = ttpu_hlo_concat(b, gd, g.nd, 1);
  ttpu_l_set_out(L, 1, ttpu_hlo_convert(b, ttpu_hlo_reshape(b, gg, tg.ndim, tg.dims), tg.dtype));
  return NULL;
}

const ttpu_op_def ttpu_ops_grid_sample[] = {
    {"grid_sampler_2d", lower_grid_sampler, .variants = TTPU_V_OUT},
    {"grid_sampler_3d", lower_grid_sampler, .variants = TTPU_V_OUT},
    {"grid_sampler_2d_backward", lower_grid_sampler_bwd, .variants = TTPU_V_OUT},
    {"grid_sampler_3d_backward", lower_grid_sampler_bwd, .variants = TTPU_V_OUT},
    {0},
};
