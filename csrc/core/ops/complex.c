/* complex.c - complex64/complex128 arithmetic as PyTorch's CPU kernels do
 * it: + - * / (Tensor and Scalar, complex Scalars too), neg, conj, abs,
 * angle, complex(), polar(), eq/ne, isnan, sum and mean over dims; and the
 * list of real-dtype lowerings that are right for complex values as they
 * are (copies, fills, concatenation, gathers: they only move elements).
 * See complex.h for how a complex call finds its lowering. */
#include <math.h>
#include <string.h>

#include "complex.h"
#include "elementwise.h"

int ttpu_complex_call(const ttpu_op_call* call) {
  if (ttpu_dtype_is_complex(call->common_dtype)) return 1;
  for (int i = 0; i < call->n_tensors; ++i)
    if (ttpu_dtype_is_complex(call->tensors[i].dtype)) return 1;
  for (int i = 0; i < call->n_outputs; ++i)
    if (ttpu_dtype_is_complex(call->outputs[i].dtype)) return 1;
  for (int i = 0; i < call->n_args; ++i)
    if ((call->args[i].kind == TTPU_ARG_SCALAR ||
         call->args[i].kind == TTPU_ARG_SCALARS) &&
        ttpu_dtype_is_complex(call->args[i].scalar_dtype))
      return 1;
  return 0;
}

/* 1 when tensor i of the call is one of its outputs (an out= tensor, or an
 * in-place self, whose dtype is then in the result type). */
static int is_output(const ttpu_op_call* call, int i) {
  for (int k = 0; k < call->n_outputs; ++k)
    if (call->outputs[k].buffer == call->tensors[i].buffer) return 1;
  return 0;
}

/* 1 when only an out= tensor of the call is complex: its operands, read
 * tensors and Scalars, are real and so is their result type. */
static int only_out_complex(const ttpu_op_call* call) {
  if (call->common_dtype == TTPU_DTYPE_NONE ||
      ttpu_dtype_is_complex(call->common_dtype))
    return 0;
  int operands = 0;
  for (int i = 0; i < call->n_tensors; ++i) {
    if (!call->tensors[i].buffer || is_output(call, i)) continue;
    if (ttpu_dtype_is_complex(call->tensors[i].dtype)) return 0;
    ++operands;
  }
  for (int i = 0; i < call->n_args; ++i)
    if ((call->args[i].kind == TTPU_ARG_SCALAR ||
         call->args[i].kind == TTPU_ARG_SCALARS) &&
        ttpu_dtype_is_complex(call->args[i].scalar_dtype))
      return 0;
  return operands > 0;
}

/* ------------------------------------------------------------ arithmetic */

/* The dtype the op computes in: output 0's (PyTorch's result type, which
 * the meta kernel already gave the output). */
static ttpu_dtype out_dtype(ttpu_lower* L) { return ttpu_l_out_type(L, 0).dtype; }

/* self (op) alpha * other; reverse swaps self and other (rsub). */
static ttpu_status* arith(ttpu_lower* L, ttpu_binop op, int reverse) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (!ttpu_dtype_is_complex(dt)) dt = out_dtype(L);
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  if (reverse) {
    ttpu_val t = x;
    x = y;
    y = t;
  }
  if ((op == TTPU_ADD || op == TTPU_SUB) && !ttpu_l_is_none(L, 2))
    y = ttpu_ew_mul(b, y, ttpu_ew_in(L, 2, dt));
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, op, x, y));
  return NULL;
}

static ttpu_status* lower_add(ttpu_lower* L) { return arith(L, TTPU_ADD, 0); }
static ttpu_status* lower_sub(ttpu_lower* L) { return arith(L, TTPU_SUB, 0); }
static ttpu_status* lower_rsub(ttpu_lower* L) { return arith(L, TTPU_SUB, 1); }
static ttpu_status* lower_mul(ttpu_lower* L) { return arith(L, TTPU_MUL, 0); }
static ttpu_status* lower_div(ttpu_lower* L) {
  /* a rounding mode is not defined for complex values (CPU: "div_floor_cpu"
   * / "div_trunc_cpu" not implemented for 'ComplexFloat') */
  const char* mode = ttpu_l_str(L, 2, NULL);
  if (mode && ttpu_l_kind(L, 2) == TTPU_ARG_STR) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED,
                  "\"%s\" not implemented for '%s'",
                  mode[0] == 'f' ? "div_floor_cpu" : "div_trunc_cpu",
                  ttpu_dtype_torch_title(out_dtype(L)));
    return NULL;
  }
  return arith(L, TTPU_DIV, 0);
}

/* op(self) in the result dtype: neg; sgn (z / |z|, 0 for 0) */
static ttpu_status* unary(ttpu_lower* L, ttpu_unop op) {
  ttpu_l_set_out(L, 0, ttpu_hlo_unary(ttpu_l_hlo(L), op,
                                      ttpu_ew_in(L, 0, out_dtype(L))));
  return NULL;
}
static ttpu_status* lower_neg(ttpu_lower* L) { return unary(L, TTPU_NEG); }
static ttpu_status* lower_sgn(ttpu_lower* L) { return unary(L, TTPU_SIGN); }

/* conj_physical: re - im*i (a real input is its own conjugate) */
static ttpu_status* lower_conj(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_ew_in(L, 0, out_dtype(L));
  if (ttpu_dtype_is_complex(out_dtype(L)))
    x = ttpu_hlo_complex(b, ttpu_hlo_real(b, x),
                         ttpu_hlo_unary(b, TTPU_NEG, ttpu_hlo_imag(b, x)));
  ttpu_l_set_out(L, 0, x);
  return NULL;
}

/* abs of a complex value is its (real) magnitude, hypot(re, im) */
static ttpu_status* lower_abs(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_l_set_out(L, 0, ttpu_hlo_unary(b, TTPU_ABS, x));
  return NULL;
}

/* angle = atan2(im, re) */
static ttpu_status* lower_angle(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  if (ttpu_dtype_is_complex(ttpu_l_type(L, x).dtype)) {
    ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_ATAN2, ttpu_hlo_imag(b, x),
                                         ttpu_hlo_real(b, x)));
    return NULL;
  }
  /* real: pi below zero, else 0 (-0.0 too), NaN kept, as the CPU kernel */
  x = ttpu_ew_in(L, 0, ttpu_ew_opmath(out_dtype(L)));
  ttpu_val r = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_LT, x, 0),
                               ttpu_ew_k(b, x, M_PI), ttpu_ew_k(b, x, 0));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, ttpu_ew_isnan(b, x), x, r));
  return NULL;
}

/* complex()/polar() take two tensors of one float dtype; the CPU kernel
 * checks what the meta kernel does not. */
static int parts_ok(ttpu_lower* L) {
  const ttpu_tensor* a = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* c = ttpu_l_tensor_desc(L, 1, -1);
  if (!a || !c) return 1;
  if (a->dtype != c->dtype) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                  "Expected object of scalar type %s but got scalar type %s "
                  "for second argument",
                  ttpu_dtype_torch_title(a->dtype),
                  ttpu_dtype_torch_title(c->dtype));
    return 0;
  }
  return 1;
}

static ttpu_status* lower_complex(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!parts_ok(L)) return NULL;
  ttpu_dtype comp = ttpu_dtype_real(out_dtype(L));
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(b, ttpu_ew_in(L, 0, comp),
                                        ttpu_ew_in(L, 1, comp)));
  return NULL;
}

/* polar(abs, angle) = abs*cos(angle) + abs*sin(angle)*i, as std::polar */
static ttpu_status* lower_polar(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!parts_ok(L)) return NULL;
  ttpu_dtype comp = ttpu_dtype_real(out_dtype(L));
  ttpu_val r = ttpu_ew_in(L, 0, comp), t = ttpu_ew_in(L, 1, comp);
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(
                           b, ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_COS, t)),
                           ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_SIN, t))));
  return NULL;
}

static ttpu_status* cmp(ttpu_lower* L, ttpu_cmp c) {
  ttpu_dtype dt = ttpu_ew_common(L);
  ttpu_l_set_out(L, 0, ttpu_hlo_compare(ttpu_l_hlo(L), c, ttpu_ew_in(L, 0, dt),
                                        ttpu_ew_in(L, 1, dt)));
  return NULL;
}
static ttpu_status* lower_eq(ttpu_lower* L) { return cmp(L, TTPU_EQ); }
static ttpu_status* lower_ne(ttpu_lower* L) { return cmp(L, TTPU_NE); }

static ttpu_status* lower_isnan(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_l_set_out(L, 0, ttpu_ew_or(b, ttpu_ew_isnan(b, ttpu_hlo_real(b, x)),
                                  ttpu_ew_isnan(b, ttpu_hlo_imag(b, x))));
  return NULL;
}

/* exp, log, sqrt, ... of complex values: StableHLO's complex functions */
#define COMPLEX_UNARY(name, op)                                \
  static ttpu_status* lower_##name(ttpu_lower* L) { return unary(L, op); }
COMPLEX_UNARY(exp, TTPU_EXP)
COMPLEX_UNARY(log, TTPU_LOG)
COMPLEX_UNARY(sqrt, TTPU_SQRT)
COMPLEX_UNARY(sin, TTPU_SIN)
COMPLEX_UNARY(cos, TTPU_COS)
COMPLEX_UNARY(tanh, TTPU_TANH)
#undef COMPLEX_UNARY

static ttpu_status* lower_reciprocal(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_ew_in(L, 0, out_dtype(L));
  ttpu_l_set_out(L, 0, ttpu_ew_div(b, ttpu_ew_k(b, x, 1), x));
  return NULL;
}

/* Comparisons PyTorch refuses for complex values with a RuntimeError (the
 * gate's NotImplementedError would be another exception type). */
static ttpu_status* unordered(ttpu_lower* L) {
  const char* name = ttpu_op_name(ttpu_l_call(L)->op);
  size_t n = strcspn(name, ".");
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                "%.*s not implemented for complex tensors.", (int)n, name);
  return NULL;
}

/* ------------------------------------------------------------ products */

/* mm / bmm / mv / dot: one dot_general contracting self's last dim with
 * the other's first non-batch dim (lazy conjugates arrive resolved: the
 * glue passes values). float32's precision setting covers complex64. */
static ttpu_status* product(ttpu_lower* L, int batch) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  const ttpu_tensor* ta = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* tb = ttpu_l_tensor_desc(L, 1, -1);
  if (ta && tb && ta->dtype != tb->dtype) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "expected m1 and m2 to have the same dtype, but got: %s != %s",
                  ttpu_dtype_name(ta->dtype), ttpu_dtype_name(tb->dtype));
    return NULL;
  }
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ot.dtype);
  ttpu_val y = ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), ot.dtype);
  int nx = ttpu_l_type(L, x).ndim;
  int64_t zero = 0, cx = nx - 1, cy = batch;
  ttpu_l_set_out(L, 0, ttpu_hlo_dot_general(
                           b, x, y, &zero, &zero, batch, &cx, &cy, 1, ot.dtype,
                           ttpu_l_precision(L, ttpu_dtype_real(ot.dtype))));
  return NULL;
}

static ttpu_status* lower_mm(ttpu_lower* L) { return product(L, 0); }
static ttpu_status* lower_bmm(ttpu_lower* L) { return product(L, 1); }

/* ------------------------------------------------------------ random */

/* uniform_(self, from, to) and normal_(self, mean, std) of a complex
 * tensor: as the CPU, each of the real and imaginary parts is drawn like
 * a real tensor's elements (normal_ with std/sqrt(2), so E|z - mean|^2 is
 * std^2); the normals come from Box-Muller on the device's random bits. */
static ttpu_status* random_parts(ttpu_lower* L, int normal) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_out_type(L, 0);
  t.dtype = ttpu_dtype_real(t.dtype);
  double p = ttpu_l_float(L, 1, 0.0), q = ttpu_l_float(L, 2, 1.0);
  if (normal && !(q >= 0.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "normal expects std >= 0.0, but found std %g", q);
  if (!normal && !(p <= q))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "uniform_ expects to return a [from, to) range, "
                            "but found from=%g > to=%g", p, q);
  ttpu_val u1 = ttpu_l_random_uniform(L, t), u2 = ttpu_l_random_uniform(L, t);
  ttpu_val re, im;
  if (normal) {
    ttpu_val r = ttpu_hlo_unary(
        b, TTPU_SQRT,
        ttpu_ew_mulk(b, ttpu_hlo_unary(b, TTPU_LOG, ttpu_ew_ksub(b, 1, u1)), -2));
    r = ttpu_ew_mulk(b, r, q / sqrt(2.0));
    ttpu_val a = ttpu_ew_mulk(b, u2, 2 * M_PI);
    re = ttpu_ew_addk(b, ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_COS, a)), p);
    im = ttpu_ew_addk(b, ttpu_ew_mul(b, r, ttpu_hlo_unary(b, TTPU_SIN, a)), p);
  } else {
    re = ttpu_ew_addk(b, ttpu_ew_mulk(b, u1, q - p), p);
    im = ttpu_ew_addk(b, ttpu_ew_mulk(b, u2, q - p), p);
    if (p < q) { /* rounding must not reach `to` */
      ttpu_val below = ttpu_hlo_binary(b, TTPU_NEXT_AFTER, ttpu_ew_k(b, re, q),
                                       ttpu_ew_k(b, re, p));
      re = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GE, re, q), below, re);
      im = ttpu_hlo_select(b, ttpu_ew_cmpk(b, TTPU_GE, im, q), below, im);
    }
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_complex(b, re, im));
  return NULL;
}

static ttpu_status* lower_uniform(ttpu_lower* L) { return random_parts(L, 0); }
static ttpu_status* lower_normal(ttpu_lower* L) { return random_parts(L, 1); }

/* ------------------------------------------------------------ reductions */

/* sum / mean(self, int[1]? dim, bool keepdim, *, ScalarType? dtype) and
 * their out= forms: an empty or absent dim list reduces every dim. */
static ttpu_status* reduce_dims(ttpu_lower* L, int mean, int all) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), ot.dtype);
  ttpu_type tx = ttpu_l_type(L, x);
  int n = 0; /* sum(self, *, dtype) / mean(...): every dim */
  const int64_t* dims =
      all ? NULL : ttpu_l_ints(L, 1, &n);
  int mask[TTPU_MAX_DIMS] = {0};
  for (int i = 0; i < n; ++i) {
    int64_t d = ttpu_l_dim(L, dims[i], tx.ndim);
    if (tx.ndim > 0 && d >= 0 && d < tx.ndim) mask[d] = 1;
  }
  int64_t count = 1;
  for (int d = 0; d < tx.ndim; ++d) {
    if (n == 0) mask[d] = 1;
    if (mask[d]) count *= tx.dims[d];
  }
  ttpu_val r = ttpu_l_reduce_mask(L, x, TTPU_RED_SUM, mask);
  if (mean) /* CPU divides the sum by the count (0/0 is NaN) */
    r = ttpu_ew_div(b, r, ttpu_ew_k(b, r, (double)count));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

static ttpu_status* lower_sum(ttpu_lower* L) { return reduce_dims(L, 0, 0); }
static ttpu_status* lower_mean(ttpu_lower* L) { return reduce_dims(L, 1, 0); }
static ttpu_status* lower_sum_all(ttpu_lower* L) { return reduce_dims(L, 0, 1); }
static ttpu_status* lower_mean_all(ttpu_lower* L) { return reduce_dims(L, 1, 1); }

/* ------------------------------------------------------------ tables */

/* New ops (complex-only math, or ops whose real case is trivial). */
const ttpu_op_def ttpu_ops_complex[] = {
    {"complex.out", lower_complex, 0},
    {"polar.out", lower_polar, 0},
    {"conj_physical.out", lower_conj, 0},
    {NULL, NULL, 0},
};

/* Complex lowerings of ops whose table entry is written for real dtypes. */
static const ttpu_op_def overrides[] = {
    {"add.Tensor", lower_add, 0},      {"add_.Tensor", lower_add, 0},
    {"add.out", lower_add, 0},         {"add.Scalar", lower_add, 0},
    {"add_.Scalar", lower_add, 0},     {"sub.Tensor", lower_sub, 0},
    {"sub_.Tensor", lower_sub, 0},     {"sub.out", lower_sub, 0},
    {"sub.Scalar", lower_sub, 0},      {"sub_.Scalar", lower_sub, 0},
    {"rsub.Tensor", lower_rsub, 0},    {"rsub.Scalar", lower_rsub, 0},
    {"mul.Tensor", lower_mul, 0},      {"mul_.Tensor", lower_mul, 0},
    {"mul.out", lower_mul, 0},         {"mul.Scalar", lower_mul, 0},
    {"mul_.Scalar", lower_mul, 0},     {"div.Tensor", lower_div, 0},
    {"div_.Tensor", lower_div, 0},     {"div.out", lower_div, 0},
    {"div.Scalar", lower_div, 0},      {"div_.Scalar", lower_div, 0},
    {"div.Tensor_mode", lower_div, 0}, {"div_.Tensor_mode", lower_div, 0},
    {"div.out_mode", lower_div, 0},    {"neg", lower_neg, 0},
    {"neg_", lower_neg, 0},            {"neg.out", lower_neg, 0},
    {"abs", lower_abs, 0},             {"abs.out", lower_abs, 0},
    {"sgn", lower_sgn, 0},             {"sgn_", lower_sgn, 0},
    {"sgn.out", lower_sgn, 0},         {"angle", lower_angle, 0},
    {"angle.out", lower_angle, 0},
    {"eq.Tensor", lower_eq, 0},        {"eq.Scalar", lower_eq, 0},
    {"eq.Tensor_out", lower_eq, 0},    {"eq.Scalar_out", lower_eq, 0},
    {"ne.Tensor", lower_ne, 0},        {"ne.Scalar", lower_ne, 0},
    {"ne.Tensor_out", lower_ne, 0},    {"ne.Scalar_out", lower_ne, 0},
    {"isnan", lower_isnan, 0},         {"sum.dim_IntList", lower_sum, 0},
    {"sum.IntList_out", lower_sum, 0}, {"mean.dim", lower_mean, 0},
    {"mean.out", lower_mean, 0},       {"sum", lower_sum_all, 0},
    {"exp", lower_exp, 0},             {"exp_", lower_exp, 0},
    {"exp.out", lower_exp, 0},         {"log", lower_log, 0},
    {"log_", lower_log, 0},            {"log.out", lower_log, 0},
    {"sqrt", lower_sqrt, 0},           {"sqrt_", lower_sqrt, 0},
    {"sqrt.out", lower_sqrt, 0},       {"sin", lower_sin, 0},
    {"sin_", lower_sin, 0},            {"sin.out", lower_sin, 0},
    {"cos", lower_cos, 0},             {"cos_", lower_cos, 0},
    {"cos.out", lower_cos, 0},         {"tanh", lower_tanh, 0},
    {"tanh_", lower_tanh, 0},          {"tanh.out", lower_tanh, 0},
    {"reciprocal", lower_reciprocal, 0}, {"reciprocal_", lower_reciprocal, 0},
    {"reciprocal.out", lower_reciprocal, 0},
    {"maximum", unordered, 0},         {"maximum.out", unordered, 0},
    {"minimum", unordered, 0},         {"minimum.out", unordered, 0},
    {"fmax", unordered, 0},            {"fmax.out", unordered, 0},
    {"fmin", unordered, 0},            {"fmin.out", unordered, 0},
    {"uniform_", lower_uniform, 0},    {"normal_", lower_normal, 0},
    {"mm", lower_mm, 0},               {"mm.out", lower_mm, 0},
    {"bmm", lower_bmm, 0},             {"bmm.out", lower_bmm, 0},
    {"mv", lower_mm, 0},               {"mv.out", lower_mm, 0},
    {"dot", lower_mm, 0},              {"dot.out", lower_mm, 0},
    {"mean", lower_mean_all, 0},       {NULL, NULL, 0},
};

/* Real-dtype lowerings that only move, convert or fill elements, through
 * builder ops that take complex values as they are. */
static const char* const as_is[] = {
    "copy_", "clone", "fill_.Scalar", "fill_.Tensor", "zero_", "cat",
    "cat.out", "flip", "roll", "constant_pad_nd", "index_select",
    "index_select.out", "narrow_copy", "where.self", "where.self_out",
    "repeat", NULL,
};

extern const ttpu_op_def ttpu_ops_fft[];

/* The complex lowering of def's op, before a complex out= of real
 * operands is considered. */
static ttpu_lower_fn complex_lowering_of(const ttpu_op_def* def) {
  /* the families written for complex values (this file's, ops/fft.c) */
  for (const ttpu_op_def* d = ttpu_ops_complex; d->name; ++d)
    if (d == def) return def->fn;
  for (const ttpu_op_def* d = ttpu_ops_fft; d->name; ++d)
    if (d == def) return def->fn;
  for (const ttpu_op_def* d = overrides; d->name; ++d)
    if (!strcmp(d->name, def->name)) return d->fn;
  for (int i = 0; as_is[i]; ++i)
    if (!strcmp(as_is[i], def->name)) return def->fn;
  return NULL;
}

ttpu_lower_fn ttpu_complex_lowering(const ttpu_op_def* def,
                                    const ttpu_op_call* call) {
  ttpu_lower_fn fn = complex_lowering_of(def);
  /* A complex out= of real operands only receives the result: PyTorch
   * computes in the operands' result type and casts (uint8 3 - 9 into a
   * complex64 out= is 250, not -6), which is the real lowering followed
   * by the framework's conversion. Ops without a complex lowering keep
   * refusing: many CPU kernels reject an out= of another dtype, which
   * their meta kernels do not check. */
  if (fn && only_out_complex(call)) return def->fn;
  return fn;
}
