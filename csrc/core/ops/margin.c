/* margin.c - the multi-class margin losses: multi_margin_loss and
 * multilabel_margin_loss, forward and backward. Inputs are (N, C) or (C);
 * the reduction is PyTorch's enum: 0 none, 1 mean, 2 sum. */
#include "ttpu_lower.h"

/* The CPU kernels have float32/float64 instances only. */
static int float_kernel(ttpu_lower* L, ttpu_dtype dt, const char* kernel) {
  if (dt == TTPU_F32 || dt == TTPU_F64) return 1;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED, "\"%s\" not implemented for '%s'", kernel,
                ttpu_dtype_torch_title(dt));
  return 0;
}

/* x as (N, C) (a 1-d input is one row). */
static ttpu_val rows(ttpu_hlo* b, ttpu_val x) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  if (tp->ndim == 2) return x;
  int64_t d[2] = {1, tp->ndim ? tp->dims[0] : 1};
  return ttpu_hlo_reshape(b, x, 2, d);
}

/* Per-row losses l (N) reduced as the reduction asks, shaped like `out`. */
static ttpu_val reduce_rows(ttpu_hlo* b, ttpu_val l, int64_t reduction, ttpu_type out) {
  if (reduction == 0) return ttpu_l_reshape_to(b, l, out);
  const ttpu_type* tp = ttpu_hlo_type(b, l);
  if (!tp) return TTPU_VAL_ERROR;
  int64_t n = tp->dims[0], zero = 0;
  ttpu_val s = ttpu_hlo_reduce(b, l, TTPU_RED_SUM, &zero, 1);
  if (reduction == 1) s = ttpu_hlo_binary(b, TTPU_DIV, s, ttpu_hlo_const(b, ttpu_type_make(tp->dtype, 0, NULL), (double)n, n));
  return s;
}

/* The upstream gradient per row (N), from grad_output of either shape. */
static ttpu_val grad_rows(ttpu_hlo* b, ttpu_val g, int64_t reduction, int64_t n) {
  const ttpu_type* tp = ttpu_hlo_type(b, g);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = ttpu_type_make(tp->dtype, 1, &n);
  if (reduction == 0) return ttpu_hlo_reshape(b, g, 1, &n);
  ttpu_val s = ttpu_hlo_broadcast_to(b, ttpu_hlo_reshape(b, g, 0, NULL), 1, &n);
  if (reduction == 1) s = ttpu_hlo_binary(b, TTPU_DIV, s, ttpu_hlo_const(b, t, (double)n, n));
  return s;
}

/* x[i, y_i] as (N, C) (broadcast along C), and the one-hot of y. */
static ttpu_val pick(ttpu_hlo* b, ttpu_val x, ttpu_val y, ttpu_val* onehot) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return TTPU_VAL_ERROR;
  ttpu_type t = *tp, ti = *tp;
  ti.dtype = TTPU_I64;
  int64_t map[1] = {0}, one = 1;
  ttpu_val yb = ttpu_hlo_broadcast_in_dim(b, y, ti, map);
  *onehot = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, ti, 1), yb);
  ttpu_val xy = ttpu_hlo_reduce(b, ttpu_hlo_select(b, *onehot, x, ttpu_hlo_const(b, t, 0, 0)), TTPU_RED_SUM, &one, 1);
  return ttpu_hlo_broadcast_in_dim(b, xy, t, map);
}

/* Shared by multi_margin_loss and its backward: z = margin - x_y + x_j
 * off the target, the active mask z > 0, the per-row weight w_y / C. */
typedef struct {
  ttpu_val x, z, active, onehot, scale, p;
  int64_t n;
} mm_parts;

static void mm_setup(ttpu_lower* L, int self, int target, int p_arg, int margin_arg, int weight_arg,
                     mm_parts* m) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  m->x = rows(b, ttpu_l_tensor(L, self));
  ttpu_type t = ttpu_l_type(L, m->x);
  m->n = t.dims[0];
  int64_t c = t.dims[1];
  ttpu_val y = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, target), TTPU_I64), 1, &m->n);
  ttpu_val xy = pick(b, m->x, y, &m->onehot);
  ttpu_val margin = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, margin_arg, t.dtype), t.ndim, t.dims);
  m->z = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_SUB, margin, xy), m->x);
  ttpu_val pos = ttpu_hlo_compare(b, TTPU_GT, m->z, ttpu_hlo_const(b, t, 0, 0));
  m->active = ttpu_hlo_binary(b, TTPU_AND, pos, ttpu_hlo_unary(b, TTPU_NOT, m->onehot));
  ttpu_type tn = ttpu_type_make(t.dtype, 1, &m->n);
  ttpu_val w = ttpu_hlo_const(b, tn, 1.0 / (double)c, 0);
  if (!ttpu_l_is_none(L, weight_arg)) {
    ttpu_val wt = ttpu_hlo_convert(b, ttpu_l_tensor(L, weight_arg), t.dtype);
    int64_t one = 1, map1[1] = {1};
    ttpu_val wb = ttpu_hlo_broadcast_in_dim(b, wt, t, map1);
    ttpu_val wy = ttpu_hlo_reduce(b, ttpu_hlo_select(b, m->onehot, wb, ttpu_hlo_const(b, t, 0, 0)), TTPU_RED_SUM,
                                  &one, 1);
    w = ttpu_hlo_binary(b, TTPU_MUL, wy, w);
  }
  m->scale = w;
  m->p = ttpu_hlo_broadcast_to(b, ttpu_l_scalar(L, p_arg, t.dtype), t.ndim, t.dims);
}

/* multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction) */
static ttpu_status* lower_multi_margin(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!float_kernel(L, ttpu_l_type(L, ttpu_l_tensor(L, 0)).dtype, "multi_margin_loss_cpu_kernel")) return NULL;
  mm_parts m;
  mm_setup(L, 0, 1, 2, 3, 4, &m);
  ttpu_type t = ttpu_l_type(L, m.x);
  ttpu_val zero = ttpu_hlo_const(b, t, 0, 0);
  ttpu_val zz = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, m.p, ttpu_hlo_const(b, t, 2, 2)),
                                ttpu_hlo_binary(b, TTPU_MUL, m.z, m.z), m.z);
  int64_t one = 1;
  ttpu_val l = ttpu_hlo_reduce(b, ttpu_hlo_select(b, m.active, zz, zero), TTPU_RED_SUM, &one, 1);
  l = ttpu_hlo_binary(b, TTPU_MUL, l, m.scale);
  ttpu_l_set_out(L, 0, reduce_rows(b, l, ttpu_l_int(L, 5, 1), ot));
  return NULL;
}

/* multi_margin_loss_backward(grad_output, self, target, p, margin, weight,
 * reduction): d/dx_j = s (p == 1 ? 1 : 2z) on the active j, minus their
 * sum at the target. */
static ttpu_status* lower_multi_margin_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!float_kernel(L, ot.dtype, "multi_margin_loss_backward_cpu_kernel")) return NULL;
  mm_parts m;
  mm_setup(L, 1, 2, 3, 4, 5, &m);
  ttpu_type t = ttpu_l_type(L, m.x);
  ttpu_val zero = ttpu_hlo_const(b, t, 0, 0);
  ttpu_val g = grad_rows(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), t.dtype), ttpu_l_int(L, 6, 1), m.n);
  int64_t map[1] = {0}, one = 1;
  ttpu_val s = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_binary(b, TTPU_MUL, g, m.scale), t, map);
  ttpu_val d = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, m.p, ttpu_hlo_const(b, t, 2, 2)),
                               ttpu_hlo_binary(b, TTPU_ADD, m.z, m.z), ttpu_hlo_const(b, t, 1, 1));
  ttpu_val gj = ttpu_hlo_select(b, m.active, ttpu_hlo_binary(b, TTPU_MUL, d, s), zero);
  ttpu_val tot = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_reduce(b, gj, TTPU_RED_SUM, &one, 1), t, map);
  ttpu_val r = ttpu_hlo_select(b, m.onehot, ttpu_hlo_unary(b, TTPU_NEG, tot), gj);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* Shared by multilabel_margin_loss and its backward. target (N, C) lists
 * each row's classes up to the first -1. valid (N, C): position k holds a
 * class; hit (N, C, C): valid k names class j; is_target (N, C). */
typedef struct {
  ttpu_val x, z, hit, is_target, active; /* z, hit, active: (N, K, J) */
  int64_t n, c;
} ml_parts;

static void ml_setup(ttpu_lower* L, int self, int target, ml_parts* m) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  m->x = rows(b, ttpu_l_tensor(L, self));
  ttpu_type t = ttpu_l_type(L, m->x);
  m->n = t.dims[0];
  m->c = t.dims[1];
  ttpu_val y = rows(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, target), TTPU_I64));
  ttpu_type ti = t;
  ti.dtype = TTPU_I64;
  /* positions before the first -1 */
  ttpu_val neg = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_LT, y, ttpu_hlo_const(b, ti, 0, 0)), TTPU_I64);
  ttpu_val seen = ttpu_hlo_cumulative(b, neg, TTPU_RED_SUM, 1);
  ttpu_val valid = ttpu_hlo_compare(b, TTPU_EQ, seen, ttpu_hlo_const(b, ti, 0, 0));
  ttpu_type t3 = ttpu_type_make(TTPU_I64, 3, (int64_t[]){m->n, m->c, m->c});
  int64_t m01[2] = {0, 1};
  ttpu_val yk = ttpu_hlo_broadcast_in_dim(b, y, t3, m01);
  ttpu_type tb3 = t3;
  tb3.dtype = TTPU_BOOL;
  ttpu_val valid3 = ttpu_hlo_broadcast_in_dim(b, valid, tb3, m01);
  m->hit = ttpu_hlo_binary(b, TTPU_AND, valid3, ttpu_hlo_compare(b, TTPU_EQ, yk, ttpu_hlo_iota(b, t3, 2)));
  int64_t k1 = 1;
  m->is_target = ttpu_hlo_reduce(b, m->hit, TTPU_RED_OR, &k1, 1); /* (N, C) */
  /* x at target position k: (N, C) */
  ttpu_type tf3 = t3;
  tf3.dtype = t.dtype;
  int64_t m02[2] = {0, 2}, k2 = 2;
  ttpu_val xb = ttpu_hlo_broadcast_in_dim(b, m->x, tf3, m02);
  ttpu_val xt = ttpu_hlo_reduce(b, ttpu_hlo_select(b, m->hit, xb, ttpu_hlo_const(b, tf3, 0, 0)), TTPU_RED_SUM, &k2, 1);
  /* z[i, k, j] = 1 - x_t[i, k] + x[i, j], active on valid k, non-target j */
  ttpu_val z = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_const(b, tf3, 1, 1),
                                                            ttpu_hlo_broadcast_in_dim(b, xt, tf3, m01)),
                               xb);
  ttpu_val nt = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_unary(b, TTPU_NOT, m->is_target), tb3, m02);
  m->active = ttpu_hlo_binary(b, TTPU_AND, ttpu_hlo_binary(b, TTPU_AND, valid3, nt),
                              ttpu_hlo_compare(b, TTPU_GT, z, ttpu_hlo_const(b, tf3, 0, 0)));
  m->z = z;
}

/* multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target) */
static ttpu_status* lower_multilabel_margin(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0), oi = ttpu_l_out_type(L, 1);
  if (!float_kernel(L, oi.dtype, "multilabel_margin_loss_forward_out_frame")) return NULL;
  ml_parts m;
  ml_setup(L, 0, 1, &m);
  const ttpu_type* tz = ttpu_hlo_type(b, m.z);
  if (!tz) return NULL;
  ttpu_val terms = ttpu_hlo_select(b, m.active, m.z, ttpu_hlo_const(b, *tz, 0, 0));
  int64_t kj[2] = {1, 2};
  ttpu_val l = ttpu_hlo_reduce(b, terms, TTPU_RED_SUM, kj, 2);
  l = ttpu_hlo_binary(b, TTPU_DIV, l, ttpu_hlo_const(b, ttpu_l_type(L, l), (double)m.c, m.c));
  ttpu_l_set_out(L, 0, reduce_rows(b, l, ttpu_l_int(L, 2, 1), ot));
  ttpu_l_set_out(L, 1, ttpu_l_reshape_to(b, ttpu_hlo_convert(b, m.is_target, oi.dtype), oi));
  return NULL;
}

/* multilabel_margin_loss_backward(grad_output, self, target, reduction,
 * is_target): +1/C per active (k, j) at j, -1/C at the target of k. */
static ttpu_status* lower_multilabel_margin_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (!float_kernel(L, ot.dtype, "multilabel_margin_loss_backward_out_frame")) return NULL;
  ml_parts m;
  ml_setup(L, 1, 2, &m);
  ttpu_type t = ttpu_l_type(L, m.x);
  const ttpu_type* tz = ttpu_hlo_type(b, m.z);
  if (!tz) return NULL;
  ttpu_val a = ttpu_hlo_convert(b, m.active, t.dtype); /* (N, K, J) */
  int64_t k1 = 1, k2 = 2;
  ttpu_val plus = ttpu_hlo_reduce(b, a, TTPU_RED_SUM, &k1, 1);                  /* (N, J) */
  ttpu_val per_k = ttpu_hlo_reduce(b, a, TTPU_RED_SUM, &k2, 1);                 /* (N, K) */
  int64_t m01[2] = {0, 1};
  ttpu_val pk = ttpu_hlo_broadcast_in_dim(b, per_k, *tz, m01);
  ttpu_val minus = ttpu_hlo_reduce(b, ttpu_hlo_select(b, m.hit, pk, ttpu_hlo_const(b, *tz, 0, 0)), TTPU_RED_SUM,
                                   &k1, 1);                                     /* (N, J) */
  ttpu_val g = grad_rows(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), t.dtype), ttpu_l_int(L, 3, 1), m.n);
  int64_t map[1] = {0};
  ttpu_val s = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_broadcast_in_dim(b, g, t, map),
                               ttpu_hlo_const(b, t, (double)m.c, m.c));
  ttpu_val r = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_SUB, plus, minus), s);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

const ttpu_op_def ttpu_ops_margin[] = {
    {"multi_margin_loss", lower_multi_margin, .variants = TTPU_V_OUT},
    {"multi_margin_loss_backward", lower_multi_margin_backward, .flags = 0},
    {"multi_margin_loss_backward.grad_input", lower_multi_margin_backward, .flags = 0},
    {"multilabel_margin_loss_forward", lower_multilabel_margin, .flags = 0},
    {"multilabel_margin_loss_forward.output", lower_multilabel_margin, .flags = 0},
    {"multilabel_margin_loss_backward", lower_multilabel_margin_backward, .flags = 0},
    {"multilabel_margin_loss_backward.grad_input", lower_multilabel_margin_backward, .flags = 0},
    {0},
};
