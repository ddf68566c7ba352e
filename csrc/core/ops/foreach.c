/* foreach.c - the _foreach_* ops torch.optim and clip_grad_norm_ use: one
 * program for a whole list of tensors instead of one per tensor.
 *
 * Output k is list element k: the `self` tensors for in-place overloads
 * (they return nothing; the glue passes the mutable list as outputs), the
 * fresh tensors for functional ones. Each element behaves exactly as the
 * per-tensor op ATen's CPU slow path calls (t.add_(o, alpha), ...): its
 * own type promotion, broadcasting, and opmath (bfloat16/half computed in
 * float32, rounded once). Scalars, ScalarLists and alpha are runtime
 * values, so a new learning rate or bias correction never recompiles. */
#include <math.h>

#include "ttpu_lower.h"

/* ------------------------------------------------------------ promotion */

static int is_unsigned(ttpu_dtype t) {
  return t == TTPU_U8 || t == TTPU_U16 || t == TTPU_U32 || t == TTPU_U64;
}

/* PyTorch's promoteTypes over the dtypes the engine knows. */
static ttpu_dtype promote(ttpu_dtype a, ttpu_dtype b) {
  if (a == TTPU_DTYPE_NONE) return b;
  if (b == TTPU_DTYPE_NONE || a == b) return a;
  if (a == TTPU_BOOL) return b;
  if (b == TTPU_BOOL) return a;
  int fa = ttpu_dtype_is_float(a), fb = ttpu_dtype_is_float(b);
  size_t sa = ttpu_dtype_size(a), sb = ttpu_dtype_size(b);
  if (fa && fb) {
    if (sa == sb) return TTPU_F32; /* half with bfloat16 */
    return sa > sb ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  if (is_unsigned(a) == is_unsigned(b)) return sa >= sb ? a : b;
  ttpu_dtype s = is_unsigned(a) ? b : a, u = is_unsigned(a) ? a : b;
  if (ttpu_dtype_size(s) > ttpu_dtype_size(u)) return s;
  return ttpu_dtype_size(u) == 1 ? TTPU_I16 : TTPU_I64;
}

/* at::native::ResultTypeState: dimensioned tensors, zero-dim tensors and
 * wrapped numbers are three categories; a lower one only matters when it
 * is a higher kind (float over int over bool). */
typedef struct {
  ttpu_dtype dim, zero, wrapped;
} rtstate;

static rtstate rt_init(void) {
  rtstate s = {TTPU_DTYPE_NONE, TTPU_DTYPE_NONE, TTPU_DTYPE_NONE};
  return s;
}

static ttpu_dtype combine(ttpu_dtype higher, ttpu_dtype lower) {
  if (ttpu_dtype_is_float(higher)) return higher;
  if (higher == TTPU_BOOL || ttpu_dtype_is_float(lower))
    return promote(higher, lower);
  return higher != TTPU_DTYPE_NONE ? higher : lower;
}

static ttpu_dtype rt_result(const rtstate* s) {
  return combine(s->dim, combine(s->zero, s->wrapped));
}

/* The float dtype a Python float takes: torch.get_default_dtype(). The
 * glue's promotion over the whole call shows float64 only when it is the
 * default or some tensor is float64. */
static ttpu_dtype default_float(ttpu_lower* L) {
  if (ttpu_l_common_dtype(L) != TTPU_F64) return TTPU_F32;
  const ttpu_op_call* c = ttpu_l_call(L);
  for (int t = 0; t < c->n_tensors; ++t)
    if (c->tensors[t].dtype == TTPU_F64) return TTPU_F32;
  return TTPU_F64;
}

static void rt_tensor(rtstate* s, const ttpu_tensor* t) {
  if (!t) return;
  if (t->ndim > 0) s->dim = promote(s->dim, t->dtype);
  else s->zero = promote(s->zero, t->dtype);
}

/* Argument `arg` (element k of a list) into the state. A runtime SCALAR is
 * a 0-d CPU tensor when the schema says Tensor, else a Python number. */
static void rt_arg(ttpu_lower* L, rtstate* s, int arg, int k,
                   int tensor_schema) {
  switch (ttpu_l_kind(L, arg)) {
    case TTPU_ARG_TENSORS:
      rt_tensor(s, ttpu_l_tensor_desc(L, arg, k));
      break;
    case TTPU_ARG_TENSOR:
      rt_tensor(s, ttpu_l_tensor_desc(L, arg, -1));
      break;
    case TTPU_ARG_SCALAR:
    case TTPU_ARG_SCALARS: {
      ttpu_dtype d = ttpu_l_scalar_dtype(L, arg);
      if (tensor_schema && ttpu_l_kind(L, arg) == TTPU_ARG_SCALAR) {
        s->zero = promote(s->zero, d);
      } else {
        if (ttpu_dtype_is_float(d)) d = default_float(L);
        else if (d != TTPU_BOOL) d = TTPU_I64;
        s->wrapped = promote(s->wrapped, d);
      }
      break;
    }
    default:
      break;
  }
}

/* The dtype arithmetic runs in for result dtype ct. */
static ttpu_dtype opmath(ttpu_dtype ct) {
  return ct == TTPU_BF16 || ct == TTPU_F16 ? TTPU_F32 : ct;
}

/* ------------------------------------------------------------ values */

/* Value of `arg` for element k as dtype dt, broadcast to t's dims. */
static ttpu_val arg_val(ttpu_lower* L, int arg, int k, ttpu_dtype dt,
                        const ttpu_type* t) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val v;
  switch (ttpu_l_kind(L, arg)) {
    case TTPU_ARG_TENSORS:
      v = ttpu_l_tensor_at(L, arg, k);
      break;
    case TTPU_ARG_TENSOR:
      v = ttpu_l_tensor(L, arg);
      break;
    case TTPU_ARG_SCALARS:
      v = ttpu_l_scalar_at(L, arg, k, dt);
      break;
    default:
      v = ttpu_l_scalar(L, arg, dt);
      break;
  }
  return ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, v, dt), t->ndim,
                               t->dims);
}

static ttpu_val cst(ttpu_lower* L, const ttpu_type* t, ttpu_dtype dt,
                    double v) {
  ttpu_type c = *t;
  c.dtype = dt;
  return ttpu_hlo_const(ttpu_l_hlo(L), c, v, (int64_t)v);
}

static ttpu_val is_nan(ttpu_lower* L, ttpu_val x) {
  return ttpu_hlo_compare(ttpu_l_hlo(L), TTPU_NE, x, x);
}

/* maximum/minimum (and clamp_min/clamp_max, which CPU computes the same
 * way): NaN on either side wins. */
static ttpu_val nan_max(ttpu_lower* L, int is_max, ttpu_val x, ttpu_val y,
                        ttpu_dtype dt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (dt == TTPU_BOOL) return ttpu_hlo_binary(b, is_max ? TTPU_OR : TTPU_AND, x, y);
  ttpu_val r = ttpu_hlo_binary(b, is_max ? TTPU_MAX : TTPU_MIN, x, y);
  if (!ttpu_dtype_is_float(dt)) return r;
  r = ttpu_hlo_select(b, is_nan(L, y), y, r);
  return ttpu_hlo_select(b, is_nan(L, x), x, r);
}

/* An empty element has no storage to read: its output is just its shape. */
static int empty_element(ttpu_lower* L, int k) {
  ttpu_type ot = ttpu_l_out_type(L, k);
  if (ttpu_type_numel(&ot) != 0) return 0;
  ttpu_l_set_out(L, k, ttpu_hlo_const(ttpu_l_hlo(L), ot, 0, 0));
  return 1;
}

/* ------------------------------------------------------------ binary */

typedef enum {
  FB_ADD, FB_SUB, FB_MUL, FB_DIV, FB_MAX, FB_MIN, FB_POW
} fbin;

/* x ** e with CPU's exact special cases for common exponents (e is a
 * runtime value, so they are selected, not branched on). */
static ttpu_val pow_val(ttpu_lower* L, ttpu_val x, ttpu_val e, ttpu_dtype dt,
                        int scalar_exponent) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val r = ttpu_hlo_binary(b, TTPU_POW, x, e);
  if (!scalar_exponent || !ttpu_dtype_is_float(dt)) return r;
  ttpu_type t = ttpu_l_type(L, x);
  ttpu_val one = cst(L, &t, dt, 1.0);
  ttpu_val x2 = ttpu_hlo_binary(b, TTPU_MUL, x, x);
  struct { double e; ttpu_val v; } cases[] = {
      {2.0, x2},
      {3.0, ttpu_hlo_binary(b, TTPU_MUL, x2, x)},
      {0.5, ttpu_hlo_unary(b, TTPU_SQRT, x)},
      {-0.5, ttpu_hlo_unary(b, TTPU_RSQRT, x)},
      {-1.0, ttpu_hlo_binary(b, TTPU_DIV, one, x)},
      {-2.0, ttpu_hlo_binary(b, TTPU_DIV, one, x2)},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    ttpu_val hit = ttpu_hlo_compare(b, TTPU_EQ, e, cst(L, &t, dt, cases[i].e));
    r = ttpu_hlo_select(b, hit, cases[i].v, r);
  }
  return r;
}

static ttpu_val apply_bin(ttpu_lower* L, fbin op, ttpu_val x, ttpu_val y,
                          ttpu_dtype dt, int scalar_exponent) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int bo = dt == TTPU_BOOL;
  switch (op) {
    case FB_ADD: return ttpu_hlo_binary(b, bo ? TTPU_OR : TTPU_ADD, x, y);
    case FB_SUB: return ttpu_hlo_binary(b, bo ? TTPU_XOR : TTPU_SUB, x, y);
    case FB_MUL: return ttpu_hlo_binary(b, bo ? TTPU_AND : TTPU_MUL, x, y);
    case FB_DIV: return ttpu_hlo_binary(b, TTPU_DIV, x, y);
    case FB_MAX: return nan_max(L, 1, x, y, dt);
    case FB_MIN: return nan_max(L, 0, x, y, dt);
    case FB_POW: return pow_val(L, x, y, dt, scalar_exponent);
  }
  return TTPU_VAL_ERROR;
}

/* The dtype of element k of argument `arg` (a list, a tensor or Scalars). */
static ttpu_dtype other_dtype(ttpu_lower* L, int arg, int k) {
  const ttpu_tensor* t = NULL;
  switch (ttpu_l_kind(L, arg)) {
    case TTPU_ARG_TENSORS: t = ttpu_l_tensor_desc(L, arg, k); break;
    case TTPU_ARG_TENSOR: t = ttpu_l_tensor_desc(L, arg, -1); break;
    case TTPU_ARG_SCALAR:
    case TTPU_ARG_SCALARS: return ttpu_l_scalar_dtype(L, arg);
    default: break;
  }
  return t ? t->dtype : TTPU_DTYPE_NONE;
}

/* In foreach_binary's param, with the fbin: the .Tensor overload. */
#define FB_TENSOR (1 << 8)

/* _foreach_<op>[_].{List,Scalar,ScalarList,Tensor}(self, other[, alpha]);
 * param: the fbin, | FB_TENSOR for .Tensor. */
static ttpu_status* foreach_binary(ttpu_lower* L) {
  fbin op = (fbin)(ttpu_l_param(L) & ~FB_TENSOR);
  int n = ttpu_l_count(L, 0);
  int tensor_schema = (ttpu_l_param(L) & FB_TENSOR) != 0;
  int scalar_exponent = ttpu_l_kind(L, 1) == TTPU_ARG_SCALAR ||
                        ttpu_l_kind(L, 1) == TTPU_ARG_SCALARS;
  int has_alpha = (op == FB_ADD || op == FB_SUB) && !ttpu_l_is_none(L, 2);
  ttpu_hlo* b = ttpu_l_hlo(L);
  for (int k = 0; k < n; ++k) {
    if (op == FB_SUB && (ttpu_l_tensor_desc(L, 0, k)->dtype == TTPU_BOOL ||
                         other_dtype(L, 1, k) == TTPU_BOOL)) {
      /* the CPU's sub_check, as sub's (elementwise.c) */
      ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED,
                    "Subtraction, the `-` operator, with a bool tensor is not "
                    "supported. If you are trying to invert a mask, use the `~` "
                    "or `logical_not()` operator instead.");
      return NULL;
    }
    if (empty_element(L, k)) continue;
    rtstate st = rt_init();
    rt_tensor(&st, ttpu_l_tensor_desc(L, 0, k));
    rt_arg(L, &st, 1, k, tensor_schema);
    ttpu_dtype ct = rt_result(&st);
    if (op == FB_DIV && !ttpu_dtype_is_float(ct)) ct = default_float(L);
    ttpu_dtype wt = opmath(ct);
    ttpu_type ot = ttpu_l_out_type(L, k);
    ttpu_val x = ttpu_hlo_broadcast_to(
        b, ttpu_hlo_convert(b, ttpu_l_tensor_at(L, 0, k), wt), ot.ndim, ot.dims);
    ttpu_val y = arg_val(L, 1, k, wt, &ot);
    if (has_alpha) {
      ttpu_val a = arg_val(L, 2, 0, wt, &ot);
      y = ttpu_hlo_binary(b, wt == TTPU_BOOL ? TTPU_AND : TTPU_MUL, y, a);
    }
    ttpu_l_set_out(L, k, apply_bin(L, op, x, y, wt, scalar_exponent));
  }
  return NULL;
}

/* _foreach_pow.ScalarAndTensor(Scalar self, Tensor[] exponent) */
static ttpu_status* lower_pow_scalar_and_tensor(ttpu_lower* L) {
  int n = ttpu_l_count(L, 1);
  for (int k = 0; k < n; ++k) {
    if (empty_element(L, k)) continue;
    rtstate st = rt_init();
    rt_arg(L, &st, 0, 0, 0);
    rt_tensor(&st, ttpu_l_tensor_desc(L, 1, k));
    ttpu_dtype wt = opmath(rt_result(&st));
    ttpu_type ot = ttpu_l_out_type(L, k);
    ttpu_val base = arg_val(L, 0, 0, wt, &ot);
    ttpu_val e = arg_val(L, 1, k, wt, &ot);
    ttpu_l_set_out(L, k, pow_val(L, base, e, wt, 0));
  }
  return NULL;
}

/* ------------------------------------------------------------ ternary */

/* _foreach_lerp[_].{List,Scalar,ScalarList}(self, end, weight): CPU's
 * two-sided formula, exact at both ends. Integer and Boolean lists fail
 * as the CPU's lerp of each tensor does (its kernel named by the
 * weight's kind). */
static ttpu_status* lower_lerp(ttpu_lower* L) {
  int n = ttpu_l_count(L, 0);
  ttpu_hlo* b = ttpu_l_hlo(L);
  int tensor_weights = ttpu_l_kind(L, 2) == TTPU_ARG_TENSORS;
  for (int k = 0; k < n; ++k) {
    if (empty_element(L, k)) continue;
    rtstate st = rt_init();
    rt_tensor(&st, ttpu_l_tensor_desc(L, 0, k));
    rt_tensor(&st, ttpu_l_tensor_desc(L, 1, k));
    ttpu_dtype wt = opmath(rt_result(&st));
    ttpu_type ot = ttpu_l_out_type(L, k);
    if (!ttpu_dtype_is_float(ot.dtype) && !ttpu_dtype_is_complex(ot.dtype)) {
      ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"%s\" not implemented for '%s'",
                    tensor_weights ? "lerp_kernel_tensor" : "lerp_kernel_scalar",
                    ttpu_dtype_torch_title(ot.dtype));
      return NULL;
    }
    ttpu_val x = arg_val(L, 0, k, wt, &ot);
    ttpu_val end = arg_val(L, 1, k, wt, &ot);
    ttpu_val w = arg_val(L, 2, k, wt, &ot);
    ttpu_val diff = ttpu_hlo_binary(b, TTPU_SUB, end, x);
    ttpu_val small = ttpu_hlo_compare(b, TTPU_LT, ttpu_hlo_unary(b, TTPU_ABS, w),
                                      cst(L, &ot, wt, 0.5));
    ttpu_val lo = ttpu_hlo_binary(b, TTPU_ADD, x,
                                  ttpu_hlo_binary(b, TTPU_MUL, w, diff));
    ttpu_val hi = ttpu_hlo_binary(
        b, TTPU_SUB, end,
        ttpu_hlo_binary(b, TTPU_MUL, diff,
                        ttpu_hlo_binary(b, TTPU_SUB, cst(L, &ot, wt, 1.0), w)));
    ttpu_l_set_out(L, k, ttpu_hlo_select(b, small, lo, hi));
  }
  return NULL;
}

/* _foreach_addcmul / addcdiv[_].{Scalar,ScalarList}(self, t1, t2, value):
 * self + value * t1 (*|/) t2, in CPU's order. */
static ttpu_status* foreach_addc(ttpu_lower* L) {
  ttpu_binop op = (ttpu_binop)ttpu_l_param(L);
  int n = ttpu_l_count(L, 0);
  ttpu_hlo* b = ttpu_l_hlo(L);
  for (int k = 0; k < n; ++k) {
    if (empty_element(L, k)) continue;
    rtstate st = rt_init();
    for (int a = 0; a < 3; ++a) rt_tensor(&st, ttpu_l_tensor_desc(L, a, k));
    ttpu_dtype wt = opmath(rt_result(&st));
    ttpu_type ot = ttpu_l_out_type(L, k);
    ttpu_val x = arg_val(L, 0, k, wt, &ot);
    ttpu_val t1 = arg_val(L, 1, k, wt, &ot);
    ttpu_val t2 = arg_val(L, 2, k, wt, &ot);
    ttpu_val v = ttpu_l_is_none(L, 3) ? cst(L, &ot, wt, 1.0)
                                      : arg_val(L, 3, k, wt, &ot);
    ttpu_val r = ttpu_hlo_binary(b, op, ttpu_hlo_binary(b, TTPU_MUL, v, t1), t2);
    ttpu_l_set_out(L, k, ttpu_hlo_binary(b, TTPU_ADD, x, r));
  }
  return NULL;
}

/* ------------------------------------------------------------ unary */

typedef enum {
  FU_SQRT, FU_RSQRT, FU_EXP, FU_EXPM1, FU_LOG, FU_LOG1P, FU_LOG2, FU_LOG10,
  FU_SIN, FU_COS, FU_TAN, FU_TANH, FU_SIGMOID, FU_ERF, FU_RECIPROCAL,
  /* the rest keep an integer input's dtype */
  FU_NEG, FU_ABS, FU_SIGN, FU_FLOOR, FU_CEIL, FU_ROUND, FU_TRUNC, FU_FRAC,
  FU_ZERO,
} funary;

static ttpu_val apply_unary(ttpu_lower* L, funary op, ttpu_val x,
                            ttpu_dtype dt) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, x);
  int fl = ttpu_dtype_is_float(dt);
  switch (op) {
    case FU_SQRT: return ttpu_hlo_unary(b, TTPU_SQRT, x);
    case FU_RSQRT: return ttpu_hlo_unary(b, TTPU_RSQRT, x);
    case FU_EXP: return ttpu_hlo_unary(b, TTPU_EXP, x);
    case FU_EXPM1: return ttpu_hlo_unary(b, TTPU_EXPM1, x);
    case FU_LOG: return ttpu_hlo_unary(b, TTPU_LOG, x);
    case FU_LOG1P: return ttpu_hlo_unary(b, TTPU_LOG1P, x);
    case FU_LOG2:
      return ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_unary(b, TTPU_LOG, x),
                             cst(L, &t, dt, 1.4426950408889634));
    case FU_LOG10:
      return ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_unary(b, TTPU_LOG, x),
                             cst(L, &t, dt, 0.4342944819032518));
    case FU_SIN: return ttpu_hlo_unary(b, TTPU_SIN, x);
    case FU_COS: return ttpu_hlo_unary(b, TTPU_COS, x);
    case FU_TAN: return ttpu_hlo_unary(b, TTPU_TAN, x);
    case FU_TANH: return ttpu_hlo_unary(b, TTPU_TANH, x);
    case FU_SIGMOID: return ttpu_hlo_unary(b, TTPU_LOGISTIC, x);
    case FU_ERF: return ttpu_hlo_unary(b, TTPU_ERF, x);
    case FU_RECIPROCAL:
      return ttpu_hlo_binary(b, TTPU_DIV, cst(L, &t, dt, 1.0), x);
    case FU_NEG: return ttpu_hlo_unary(b, TTPU_NEG, x);
    case FU_ABS: return dt == TTPU_BOOL ? x : ttpu_hlo_unary(b, TTPU_ABS, x);
    case FU_SIGN:
      if (dt == TTPU_BOOL) return x;
      if (!fl) return ttpu_hlo_unary(b, TTPU_SIGN, x);
      /* (0 < x) - (x < 0): NaN has sign 0 on CPU */
      return ttpu_hlo_binary(
          b, TTPU_SUB,
          ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_GT, x, cst(L, &t, dt, 0)), dt),
          ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_LT, x, cst(L, &t, dt, 0)), dt));
    case FU_FLOOR: return fl ? ttpu_hlo_unary(b, TTPU_FLOOR, x) : x;
    case FU_CEIL: return fl ? ttpu_hlo_unary(b, TTPU_CEIL, x) : x;
    case FU_ROUND: return fl ? ttpu_hlo_unary(b, TTPU_ROUND_EVEN, x) : x;
    case FU_TRUNC:
    case FU_FRAC: {
      if (!fl) return x;
      ttpu_val neg = ttpu_hlo_compare(b, TTPU_LT, x, cst(L, &t, dt, 0));
      ttpu_val tr = ttpu_hlo_select(b, neg, ttpu_hlo_unary(b, TTPU_CEIL, x),
                                    ttpu_hlo_unary(b, TTPU_FLOOR, x));
      return op == FU_TRUNC ? tr : ttpu_hlo_binary(b, TTPU_SUB, x, tr);
    }
    case FU_ZERO: return cst(L, &t, dt, 0);
  }
  return TTPU_VAL_ERROR;
}

/* _foreach_<op>[_](self); param: the funary. */
static ttpu_status* foreach_unary(ttpu_lower* L) {
  funary op = (funary)ttpu_l_param(L);
  int n = ttpu_l_count(L, 0);
  for (int k = 0; k < n; ++k) {
    if (empty_element(L, k)) continue;
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, k);
    ttpu_dtype ct = d ? d->dtype : TTPU_F32;
    if (op < FU_NEG && !ttpu_dtype_is_float(ct)) ct = default_float(L);
    ttpu_dtype wt = opmath(ct);
    ttpu_type ot = ttpu_l_out_type(L, k);
    ttpu_val x = arg_val(L, 0, k, wt, &ot);
    ttpu_l_set_out(L, k, apply_unary(L, op, x, wt));
  }
  return NULL;
}

/* ------------------------------------------------------------ norm */

/* _foreach_norm.Scalar(Tensor[] self, Scalar ord=2, ScalarType? dtype):
 * linalg.vector_norm of each tensor. ord is a runtime value, so every
 * kind of norm is computed and the right one selected: one sum and one
 * max/min reduction, whatever ord is. */
static ttpu_status* lower_norm(ttpu_lower* L) {
  int n = ttpu_l_count(L, 0);
  ttpu_hlo* b = ttpu_l_hlo(L);
  for (int k = 0; k < n; ++k) {
    if (empty_element(L, k)) continue;
    ttpu_type ot = ttpu_l_out_type(L, k);
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, k);
    if (!d) return ttpu_status_make(TTPU_INTERNAL, "_foreach_norm: no tensor");
    if (!ttpu_dtype_is_float(ot.dtype))
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "linalg.vector_norm: Expected a floating point "
                              "or complex tensor as input. Got %s",
                              ttpu_dtype_name(ot.dtype));
    ttpu_dtype wt = opmath(ot.dtype);
    int64_t numel = 1;
    for (int i = 0; i < d->ndim; ++i) numel *= d->sizes[i];
    ttpu_val x = ttpu_l_tensor_at(L, 0, k);
    /* dtype= casts the input first (to the output's dtype) */
    x = ttpu_hlo_convert(b, ttpu_hlo_convert(b, x, ot.dtype), wt);
    x = ttpu_hlo_reshape(b, x, 1, &numel);
    ttpu_type t = ttpu_type_make(wt, 1, &numel);
    ttpu_type t0 = ttpu_type_make(wt, 0, NULL);
    ttpu_val a = ttpu_hlo_unary(b, TTPU_ABS, x);
    ttpu_val p = ttpu_l_scalar(L, 1, wt);
    ttpu_val pb = ttpu_hlo_broadcast_to(b, p, 1, &numel);
#define P_IS(val, pv) ttpu_hlo_compare(b, TTPU_EQ, val, cst(L, &t, wt, pv))
#define P0_IS(pv) ttpu_hlo_compare(b, TTPU_EQ, p, cst(L, &t0, wt, pv))
    ttpu_val nz = ttpu_hlo_convert(
        b, ttpu_hlo_compare(b, TTPU_NE, a, cst(L, &t, wt, 0)), wt);
    ttpu_val f = ttpu_hlo_binary(b, TTPU_POW, a, pb);
    f = ttpu_hlo_select(b, P_IS(pb, 0.0), nz, f);
    f = ttpu_hlo_select(b, P_IS(pb, 1.0), a, f);
    f = ttpu_hlo_select(b, P_IS(pb, 2.0), ttpu_hlo_binary(b, TTPU_MUL, a, a), f);
    int64_t dim0 = 0;
    ttpu_val s = ttpu_hlo_reduce(b, f, TTPU_RED_SUM, &dim0, 1);
    /* max of |x| for inf, max of -|x| (= -min) for -inf */
    ttpu_val neg_inf = P0_IS(-INFINITY);
    ttpu_val m = ttpu_hlo_select(
        b, ttpu_hlo_broadcast_to(b, neg_inf, 1, &numel),
        ttpu_hlo_unary(b, TTPU_NEG, a), a);
    m = ttpu_hlo_reduce(b, m, TTPU_RED_MAX, &dim0, 1);
    m = ttpu_hlo_select(b, neg_inf, ttpu_hlo_unary(b, TTPU_NEG, m), m);
    ttpu_val any_nan = ttpu_hlo_reduce(b, is_nan(L, a), TTPU_RED_OR, &dim0, 1);
    m = ttpu_hlo_select(b, any_nan, cst(L, &t0, wt, NAN), m);
    ttpu_val r = ttpu_hlo_binary(
        b, TTPU_POW, s, ttpu_hlo_binary(b, TTPU_DIV, cst(L, &t0, wt, 1.0), p));
    r = ttpu_hlo_select(b, P0_IS(0.0), s, r);
    r = ttpu_hlo_select(b, P0_IS(1.0), s, r);
    r = ttpu_hlo_select(b, P0_IS(2.0), ttpu_hlo_unary(b, TTPU_SQRT, s), r);
    r = ttpu_hlo_select(
        b, ttpu_hlo_binary(b, TTPU_OR, P0_IS(INFINITY), neg_inf), m, r);
#undef P_IS
#undef P0_IS
    ttpu_l_set_out(L, k, r);
  }
  return NULL;
}

/* ------------------------------------------------------------ table */

#define BIN_OVERLOADS(name, op)                                       \
  {"_foreach_" name ".List", foreach_binary, .param = op,             \
   .variants = TTPU_V_INPLACE},                                       \
  {"_foreach_" name ".Scalar", foreach_binary, .param = op,           \
   .variants = TTPU_V_INPLACE},                                       \
  {"_foreach_" name ".ScalarList", foreach_binary, .param = op,       \
   .variants = TTPU_V_INPLACE}

#define UN_OVERLOADS(name, op, ...) \
  {"_foreach_" name, foreach_unary, .param = op, .variants = TTPU_V_INPLACE, __VA_ARGS__}

const ttpu_op_def ttpu_ops_foreach[] = {
    BIN_OVERLOADS("add", FB_ADD),
    {"_foreach_add.Tensor", foreach_binary, .param = FB_ADD | FB_TENSOR, .variants = TTPU_V_INPLACE},
    BIN_OVERLOADS("sub", FB_SUB),
    BIN_OVERLOADS("mul", FB_MUL),
    {"_foreach_mul.Tensor", foreach_binary, .param = FB_MUL | FB_TENSOR, .variants = TTPU_V_INPLACE},
    BIN_OVERLOADS("div", FB_DIV),
    {"_foreach_div.Tensor", foreach_binary, .param = FB_DIV | FB_TENSOR, .variants = TTPU_V_INPLACE},
    BIN_OVERLOADS("maximum", FB_MAX),
    BIN_OVERLOADS("minimum", FB_MIN),
    BIN_OVERLOADS("clamp_min", FB_MAX),
    BIN_OVERLOADS("clamp_max", FB_MIN),
    BIN_OVERLOADS("pow", FB_POW),
    {"_foreach_pow.ScalarAndTensor", lower_pow_scalar_and_tensor, .flags = 0},
    {"_foreach_lerp.List", lower_lerp, .variants = TTPU_V_INPLACE},
    {"_foreach_lerp.Scalar", lower_lerp, .variants = TTPU_V_INPLACE},
    {"_foreach_lerp.ScalarList", lower_lerp, .variants = TTPU_V_INPLACE},
    {"_foreach_addcmul.Scalar", foreach_addc, .param = TTPU_MUL, .variants = TTPU_V_INPLACE},
    {"_foreach_addcmul.ScalarList", foreach_addc, .param = TTPU_MUL, .variants = TTPU_V_INPLACE},
    {"_foreach_addcdiv.Scalar", foreach_addc, .param = TTPU_DIV, .variants = TTPU_V_INPLACE},
    {"_foreach_addcdiv.ScalarList", foreach_addc, .param = TTPU_DIV, .variants = TTPU_V_INPLACE},
    UN_OVERLOADS("sqrt", FU_SQRT),
    UN_OVERLOADS("rsqrt", FU_RSQRT),
    UN_OVERLOADS("exp", FU_EXP),
    UN_OVERLOADS("expm1", FU_EXPM1),
    UN_OVERLOADS("log", FU_LOG),
    UN_OVERLOADS("log1p", FU_LOG1P),
    UN_OVERLOADS("log2", FU_LOG2),
    UN_OVERLOADS("log10", FU_LOG10),
    UN_OVERLOADS("sin", FU_SIN),
    UN_OVERLOADS("cos", FU_COS),
    UN_OVERLOADS("tan", FU_TAN),
    UN_OVERLOADS("tanh", FU_TANH),
    UN_OVERLOADS("sigmoid", FU_SIGMOID),
    UN_OVERLOADS("erf", FU_ERF),
    UN_OVERLOADS("reciprocal", FU_RECIPROCAL),
    UN_OVERLOADS("neg", FU_NEG),
    UN_OVERLOADS("abs", FU_ABS, .kinds = TTPU_K_NUM, .kernel = "abs_cpu"),
    UN_OVERLOADS("sign", FU_SIGN),
    UN_OVERLOADS("floor", FU_FLOOR, .kinds = TTPU_K_NUM, .kernel = "floor_vml_cpu"),
    UN_OVERLOADS("ceil", FU_CEIL, .kinds = TTPU_K_NUM, .kernel = "ceil_vml_cpu"),
    UN_OVERLOADS("round", FU_ROUND, .kinds = TTPU_K_NUM, .kernel = "round_vml_cpu"),
    UN_OVERLOADS("trunc", FU_TRUNC, .kinds = TTPU_K_NUM, .kernel = "trunc_vml_cpu"),
    UN_OVERLOADS("frac", FU_FRAC, .kinds = TTPU_K_FLOAT, .kernel = "frac_cpu"),
    {"_foreach_zero_", foreach_unary, .param = FU_ZERO},
    {"_foreach_norm.Scalar", lower_norm, .flags = 0},
    {0},
};
