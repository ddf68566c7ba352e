/* random.c - sampling ops. Every draw comes from the device's THREE_FRY
 * state (TTPU_OP_RANDOM), which the program takes and returns advanced, so
 * torch.manual_seed / torch.tpu.manual_seed replay a sequence exactly. A
 * `generator=` argument arrives as None: the glue installs a non-default
 * generator's state as the device state around the call (see
 * with_generator_state), so the lowerings never look at it.
 *
 * The streams are not CPU's (mt19937): tests compare distributions, not
 * values. Value-dependent argument checks that CPU makes by reading tensor
 * data (normal's `std` tensor >= 0, multinomial's probabilities) are not
 * made: they would need a host sync. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "complex.h"
#include "ttpu_lower.h"

/* ------------------------------------------------------------ helpers */

static ttpu_type with_dtype(ttpu_type t, ttpu_dtype dt) {
  t.dtype = dt;
  return t;
}

/* Float type the sampling arithmetic runs in for an output of dtype dt:
 * float64 for float64, float32 otherwise (like CPU's opmath). */
static ttpu_dtype work_dtype(ttpu_dtype dt) {
  return dt == TTPU_F64 ? TTPU_F64 : TTPU_F32;
}

static ttpu_val cst(ttpu_lower* L, ttpu_type t, double v) {
  return ttpu_hlo_const(ttpu_l_hlo(L), t, v, (int64_t)v);
}

static ttpu_val bin(ttpu_lower* L, ttpu_binop op, ttpu_val a, ttpu_val b) {
  return ttpu_hlo_binary(ttpu_l_hlo(L), op, a, b);
}

static ttpu_val un(ttpu_lower* L, ttpu_unop op, ttpu_val a) {
  return ttpu_hlo_unary(ttpu_l_hlo(L), op, a);
}

/* Fails the call with `msg` (a RuntimeError) when any element of the bool
 * value `bad` is set: a data-dependent check the engine reads back after
 * the program runs (see ttpu_l_check). */
static void check_none(ttpu_lower* L, ttpu_val bad, const char* msg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, bad);
  int64_t n = ttpu_type_numel(&t), dim0 = 0, one = 1, three = 3;
  if (n == 0) return;
  ttpu_val any = ttpu_hlo_reduce(b, ttpu_hlo_reshape(b, bad, 1, &n),
                                 TTPU_RED_OR, &dim0, 1);
  ttpu_val parts[2] = {
      ttpu_hlo_reshape(b, ttpu_hlo_convert(b, any, TTPU_I64), 1, &one),
      ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &three), 0, 0)};
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 2, 0), TTPU_INVALID_ARGUMENT, msg);
}

/* Uniform in [0, 1) of shape t.dims in the work dtype of t.dtype. */
static ttpu_val uniform01(ttpu_lower* L, ttpu_type t) {
  return ttpu_l_random_uniform(L, with_dtype(t, work_dtype(t.dtype)));
}

/* Standard normal samples (Box-Muller on two uniforms), work dtype. In
 * float32 both uniforms come from one 64-bit draw (its halves' top 24
 * bits): one generator per element, not two. */
static ttpu_val std_normal(ttpu_lower* L, ttpu_type t) {
  ttpu_type w = with_dtype(t, work_dtype(t.dtype));
  ttpu_val u1, u2;
  if (w.dtype == TTPU_F32) {
    ttpu_hlo* b = ttpu_l_hlo(L);
    ttpu_type t64 = with_dtype(t, TTPU_U64), t32 = with_dtype(t, TTPU_U32);
    ttpu_val bits = ttpu_l_random_bits(L, t64);
    ttpu_val half[2] = {ttpu_hlo_convert(b, bits, TTPU_U32),
                        ttpu_hlo_convert(b, bin(L, TTPU_SHR_L, bits, cst(L, t64, 32)),
                                         TTPU_U32)};
    for (int k = 0; k < 2; ++k) {
      ttpu_val f = ttpu_hlo_convert(b, bin(L, TTPU_SHR_L, half[k], cst(L, t32, 8)), TTPU_F32);
      half[k] = bin(L, TTPU_MUL, f, cst(L, w, 1.0 / 16777216.0));
    }
    u1 = half[0];
    u2 = half[1];
  } else {
    u1 = uniform01(L, t);
    u2 = uniform01(L, t);
  }
  /* 1 - u1 is in (0, 1]: the log never sees 0. */
  ttpu_val r = un(L, TTPU_LOG, bin(L, TTPU_SUB, cst(L, w, 1.0), u1));
  r = un(L, TTPU_SQRT, bin(L, TTPU_MUL, cst(L, w, -2.0), r));
  ttpu_val theta = bin(L, TTPU_MUL, cst(L, w, 6.283185307179586), u2);
  return bin(L, TTPU_MUL, r, un(L, TTPU_COS, theta));
}

/* The largest value of r's float dtype below r (r finite), elementwise. */
static ttpu_val step_down(ttpu_lower* L, ttpu_val r) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, r);
  ttpu_dtype it = t.dtype == TTPU_F64   ? TTPU_I64
                  : t.dtype == TTPU_F32 ? TTPU_I32
                                        : TTPU_I16;
  ttpu_type ti = with_dtype(t, it);
  ttpu_val bits = ttpu_hlo_bitcast(b, r, ti);
  /* Sign-magnitude: a positive value steps down by decrementing its bits,
   * a negative one by incrementing them; zero steps to -(smallest
   * subnormal), whose pattern is the sign bit plus one. */
  ttpu_val one = ttpu_hlo_const(b, ti, 1, 1);
  ttpu_val pos = ttpu_hlo_compare(b, TTPU_GT, r, cst(L, t, 0.0));
  ttpu_val zero = ttpu_hlo_compare(b, TTPU_EQ, r, cst(L, t, 0.0));
  int64_t neg_tiny = it == TTPU_I64   ? INT64_MIN + 1
                     : it == TTPU_I32 ? (int64_t)INT32_MIN + 1
                                      : (int64_t)INT16_MIN + 1;
  ttpu_val down = ttpu_hlo_select(b, pos, bin(L, TTPU_SUB, bits, one),
                                  bin(L, TTPU_ADD, bits, one));
  down = ttpu_hlo_select(b, zero, ttpu_hlo_const(b, ti, 0, neg_tiny), down);
  return ttpu_hlo_bitcast(b, down, t);
}

/* Rounding into a narrower dtype may reach `to`; keep [from, to) open. */
static ttpu_val keep_below(ttpu_lower* L, ttpu_val r, double to) {
  ttpu_type t = ttpu_l_type(L, r);
  ttpu_val reached =
      ttpu_hlo_compare(ttpu_l_hlo(L), TTPU_GE, r, cst(L, t, to));
  return ttpu_hlo_select(ttpu_l_hlo(L), reached, step_down(L, r), r);
}

/* ------------------------------------------------------------ uniform */

/* uniform_(Tensor(a!) self, float from=0., float to=1., *, Generator?) */
static ttpu_status* lower_uniform_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double from = ttpu_l_float(L, 1, 0.0), to = ttpu_l_float(L, 2, 1.0);
  /* dtypes other than floating ones: refused by the record's kinds */
  if (!(from <= to))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "uniform_ expects to return a [from, to) range, "
                            "but found from=%g > to=%g", from, to);
  ttpu_type w = with_dtype(ot, work_dtype(ot.dtype));
  ttpu_val u = uniform01(L, ot);
  ttpu_val v = bin(L, TTPU_ADD, bin(L, TTPU_MUL, u, cst(L, w, to - from)),
                   cst(L, w, from));
  v = ttpu_hlo_convert(ttpu_l_hlo(L), v, ot.dtype);
  if (from < to) v = keep_below(L, v, to);
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

/* ------------------------------------------------------------ normal */

static ttpu_status* check_std(double std) {
  if (!(std >= 0.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "normal expects std >= 0.0, but found std %g", std);
  return NULL;
}

/* CPU (and CUDA) read std back to check it; so does this. */
static void check_std_tensor(ttpu_lower* L, ttpu_val std) {
  ttpu_type t = ttpu_l_type(L, std);
  ttpu_val neg = ttpu_hlo_compare(ttpu_l_hlo(L), TTPU_LT, std,
                                  ttpu_hlo_const(ttpu_l_hlo(L), t, 0, 0));
  check_none(L, neg, "normal expects all elements of std >= 0.0");
}

/* mean + std * N(0, 1), as CPU's normal: samples scaled, then shifted. */
static ttpu_val normal_of(ttpu_lower* L, ttpu_type ot, ttpu_val mean,
                          ttpu_val std) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype w = work_dtype(ot.dtype);
  ttpu_val n = std_normal(L, ot);
  mean = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, mean, w), ot.ndim,
                               ot.dims);
  std = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, std, w), ot.ndim,
                              ot.dims);
  return bin(L, TTPU_ADD, bin(L, TTPU_MUL, n, std), mean);
}

/* normal_(Tensor(a!) self, float mean=0., float std=1., *, Generator?) */
static ttpu_status* lower_normal_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double mean = ttpu_l_float(L, 1, 0.0), std = ttpu_l_float(L, 2, 1.0);
  if (!ttpu_dtype_is_float(ot.dtype))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "\"normal_kernel_cpu\" not implemented for '%s'",
                            ttpu_dtype_name(ot.dtype));
  ttpu_status* s = check_std(std);
  if (s) return s;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype w = work_dtype(ot.dtype);
  ttpu_l_set_out(L, 0, normal_of(L, ot, ttpu_hlo_const_f(b, w, mean),
                                 ttpu_hlo_const_f(b, w, std)));
  return NULL;
}

/* normal.Tensor_float(Tensor mean, float std=1., *, Generator?) */
static ttpu_status* lower_normal_tensor_float(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double std = ttpu_l_float(L, 1, 1.0);
  ttpu_status* s = check_std(std);
  if (s) return s;
  ttpu_val mean = ttpu_l_tensor(L, 0);
  ttpu_l_set_out(L, 0, normal_of(L, ot, mean,
                                 ttpu_hlo_const_f(ttpu_l_hlo(L),
                                                  work_dtype(ot.dtype), std)));
  return NULL;
}

/* normal.float_Tensor(float mean, Tensor std, *, Generator?) */
static ttpu_status* lower_normal_float_tensor(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double mean = ttpu_l_float(L, 0, 0.0);
  ttpu_val std = ttpu_l_tensor(L, 1);
  check_std_tensor(L, std);
  ttpu_l_set_out(L, 0, normal_of(L, ot,
                                 ttpu_hlo_const_f(ttpu_l_hlo(L),
                                                  work_dtype(ot.dtype), mean),
                                 std));
  return NULL;
}

/* normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator?) */
static ttpu_status* lower_normal_tensor_tensor(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val std = ttpu_l_tensor(L, 1);
  check_std_tensor(L, std);
  ttpu_l_set_out(L, 0, normal_of(L, ot, ttpu_l_tensor(L, 0), std));
  return NULL;
}

/* log_normal_(Tensor(a!) self, float mean=1., float std=2., *, Generator?) */
static ttpu_status* lower_log_normal_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double mean = ttpu_l_float(L, 1, 1.0), std = ttpu_l_float(L, 2, 2.0);
  if (!ttpu_dtype_is_float(ot.dtype))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "log_normal_ expects a floating point dtype, got %s",
                            ttpu_dtype_name(ot.dtype));
  if (!(std > 0.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "log_normal_ expects std > 0.0, but found std=%g",
                            std);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype w = work_dtype(ot.dtype);
  ttpu_val v = normal_of(L, ot, ttpu_hlo_const_f(b, w, mean),
                         ttpu_hlo_const_f(b, w, std));
  ttpu_l_set_out(L, 0, un(L, TTPU_EXP, v));
  return NULL;
}

/* ------------------------------------------------------------ other
 * continuous distributions (inverse CDF of one uniform draw) */

/* exponential_(Tensor(a!) self, float lambd=1., *, Generator?) */
static ttpu_status* lower_exponential_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double lambd = ttpu_l_float(L, 1, 1.0);
  if (!ttpu_dtype_is_float(ot.dtype))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "Exponential distribution is a continuous "
                            "probability distribution. dtype must be a "
                            "floating point but you specified %s",
                            ttpu_dtype_name(ot.dtype));
  if (!(lambd > 0.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "exponential_ expects lambda > 0.0, but found "
                            "lambda=%g", lambd);
  ttpu_type w = with_dtype(ot, work_dtype(ot.dtype));
  /* -1/lambda * log1p(-u), as CPU does: u in [0, 1) keeps it finite. */
  ttpu_val u = uniform01(L, ot);
  ttpu_val v = un(L, TTPU_LOG1P, un(L, TTPU_NEG, u));
  ttpu_l_set_out(L, 0, bin(L, TTPU_MUL, cst(L, w, -1.0 / lambd), v));
  return NULL;
}

/* cauchy_(Tensor(a!) self, float median=0., float sigma=1., *, Generator?) */
static ttpu_status* lower_cauchy_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double median = ttpu_l_float(L, 1, 0.0), sigma = ttpu_l_float(L, 2, 1.0);
  if (!ttpu_dtype_is_float(ot.dtype))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "Cauchy distribution is a continuous probability "
                            "distribution. dtype must be a floating point but "
                            "you specified %s", ttpu_dtype_name(ot.dtype));
  if (!(sigma > 0.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "cauchy_ expects sigma > 0.0, but found sigma=%g",
                            sigma);
  ttpu_type w = with_dtype(ot, work_dtype(ot.dtype));
  ttpu_val u = uniform01(L, ot);
  ttpu_val a = bin(L, TTPU_MUL, cst(L, w, 3.141592653589793),
                   bin(L, TTPU_SUB, u, cst(L, w, 0.5)));
  ttpu_val v = bin(L, TTPU_ADD, cst(L, w, median),
                   bin(L, TTPU_MUL, cst(L, w, sigma), un(L, TTPU_TAN, a)));
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

/* geometric_(Tensor(a!) self, float p, *, Generator?): trials until the
 * first success, >= 1. */
static ttpu_status* lower_geometric_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double p = ttpu_l_float(L, 1, 0.5);
  if (!(p > 0.0 && p < 1.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "geometric_ expects p to be in (0, 1), but got p=%g",
                            p);
  ttpu_type w = with_dtype(ot, work_dtype(ot.dtype));
  ttpu_val u = uniform01(L, ot);
  /* ceil(log(v) / log1p(-p)) with v = 1 - u in (0, 1]; v == 1 would give
   * 0 trials, which is outside the support: count it as 1. */
  ttpu_val v = un(L, TTPU_LOG, bin(L, TTPU_SUB, cst(L, w, 1.0), u));
  v = un(L, TTPU_CEIL, bin(L, TTPU_DIV, v, cst(L, w, log1p(-p))));
  v = bin(L, TTPU_MAX, v, cst(L, w, 1.0));
  ttpu_l_set_out(L, 0, v);
  return NULL;
}

/* ------------------------------------------------------------ bernoulli */

static ttpu_status* check_p(double p, const char* op) {
  if (!(p >= 0.0 && p <= 1.0))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s expects p to be in [0, 1], but got p=%g", op,
                            p);
  return NULL;
}

/* u < p, as the output's dtype. p is a value broadcastable to ot. The
 * draws are float32 (float64 for a float64 output), as on CUDA: a TPU has
 * no fast float64, and dropout masks are hot. */
static ttpu_val bernoulli_of(ttpu_lower* L, ttpu_type ot, ttpu_val p) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype w = work_dtype(ot.dtype);
  ttpu_val u = uniform01(L, ot);
  p = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, p, w), ot.ndim, ot.dims);
  return ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_LT, u, p), ot.dtype);
}

/* bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator?) and
 * bernoulli.p(Tensor self, float p, *, Generator?) */
static ttpu_status* lower_bernoulli_float(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  double p = ttpu_l_float(L, 1, 0.5);
  ttpu_status* s = check_p(p, "bernoulli_");
  if (s) return s;
  ttpu_l_set_out(L, 0, bernoulli_of(L, ot, ttpu_hlo_const_f(
                                              ttpu_l_hlo(L),
                                              work_dtype(ot.dtype), p)));
  return NULL;
}

/* Bernoulli with a tensor of probabilities at arg `arg` (a tpu tensor or
 * a CPU scalar), checked to lie in [0, 1] as CPU does. */
static ttpu_status* bernoulli_p_tensor(ttpu_lower* L, int arg) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val p = ttpu_l_kind(L, arg) == TTPU_ARG_TENSOR
                   ? ttpu_l_tensor(L, arg)
                   : ttpu_l_scalar(L, arg, work_dtype(ot.dtype));
  ttpu_type pt = ttpu_l_type(L, p);
  ttpu_val ok = ttpu_hlo_binary(
      b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, p, cst(L, pt, 0.0)),
      ttpu_hlo_compare(b, TTPU_LE, p, cst(L, pt, 1.0)));
  check_none(L, ttpu_hlo_unary(b, TTPU_NOT, ok),
             "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  ttpu_l_set_out(L, 0, bernoulli_of(L, ot, p));
  return NULL;
}

/* bernoulli_.Tensor(Tensor(a!) self, Tensor p, *, Generator?) */
static ttpu_status* lower_bernoulli_tensor(ttpu_lower* L) {
  return bernoulli_p_tensor(L, 1);
}

/* bernoulli.out(Tensor self, *, Generator?, Tensor(a!) out): self holds
 * the probabilities. */
static ttpu_status* lower_bernoulli_out(ttpu_lower* L) {
  return bernoulli_p_tensor(L, 0);
}

/* ------------------------------------------------------------ dropout */

/* x * mask * scale in the opmath type of x (mask 0/1, so x * mask is
 * exact), the order CPU multiplies in. */
static ttpu_val masked_scale(ttpu_lower* L, ttpu_type ot, ttpu_val x,
                             ttpu_val mask, double scale) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype w = ot.dtype == TTPU_BF16 || ot.dtype == TTPU_F16 ? TTPU_F32
                                                                : ot.dtype;
  ttpu_type tw = with_dtype(ot, w);
  x = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, x, w), ot.ndim, ot.dims);
  mask = ttpu_hlo_broadcast_to(b, ttpu_hlo_convert(b, mask, w), ot.ndim,
                               ot.dims);
  ttpu_val v = bin(L, TTPU_MUL, x, mask);
  /* a float64 scale meets a float32 value as float32, like a Scalar */
  return bin(L, TTPU_MUL, v, cst(L, tw, w == TTPU_F64 ? scale : (float)scale));
}

/* native_dropout(Tensor input, float p, bool? train) -> (out, bool mask) */
static ttpu_status* lower_native_dropout(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0), mt = ttpu_l_out_type(L, 1);
  double p = ttpu_l_float(L, 1, 0.5);
  int train = ttpu_l_is_none(L, 2) ? 1 : ttpu_l_bool(L, 2, 1);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  if (!train) {
    ttpu_l_set_out(L, 0, x);
    ttpu_l_set_out(L, 1, ttpu_hlo_const(b, mt, 1, 1));
    return NULL;
  }
  double p1m = 1.0 - p;
  ttpu_status* s = check_p(p1m, "bernoulli_");
  if (s) return s;
  if (!ttpu_dtype_is_float(ot.dtype))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "result type Float can't be cast to the desired "
                            "output type %s", ttpu_dtype_name(ot.dtype));
  double scale = p1m == 0.0 ? 0.0 : 1.0 / p1m;
  ttpu_val mask =
      bernoulli_of(L, with_dtype(ot, TTPU_BOOL), ttpu_hlo_const_f(b, TTPU_F32, p1m));
  ttpu_l_set_out(L, 0, masked_scale(L, ot, x, mask, scale));
  ttpu_l_set_out(L, 1, mask);
  return NULL;
}

/* native_dropout_backward(Tensor grad_output, Tensor mask, float scale) */
static ttpu_status* lower_native_dropout_backward(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  const ttpu_tensor* m = ttpu_l_tensor_desc(L, 1, -1);
  if (m && m->dtype != TTPU_BOOL)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "Mask should be Bool Scalar Type%s",
                            ttpu_dtype_name(m->dtype));
  if (!ttpu_dtype_is_float(ot.dtype))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "native_dropout_backward is not implemented for %s",
                            ttpu_dtype_name(ot.dtype));
  ttpu_l_set_out(L, 0, masked_scale(L, ot, ttpu_l_tensor(L, 0),
                                    ttpu_l_tensor(L, 1),
                                    ttpu_l_float(L, 2, 1.0)));
  return NULL;
}

/* ------------------------------------------------------------ integers */

/* `digits` of std::numeric_limits for a float dtype. */
static int float_digits(ttpu_dtype dt) {
  switch (dt) {
    case TTPU_F64: return 53;
    case TTPU_F32: return 24;
    case TTPU_F16: return 11;
    default: return 8; /* bfloat16 */
  }
}

/* static_cast<scalar_t>(v) back to int64, for a float dtype (round to
 * nearest even at the dtype's precision). */
static int64_t through_float(int64_t v, ttpu_dtype dt) {
  double d = (double)v;
  if (dt == TTPU_F64) return (int64_t)d;
  float f = (float)v;
  if (dt == TTPU_F32) return (int64_t)f;
  int e = 0;
  double m = frexp((double)f, &e);
  int digits = float_digits(dt);
  return (int64_t)ldexp(nearbyint(ldexp(m, digits)), e - digits);
}

/* ATen's update_from / update_to: bounds that round past themselves in the
 * float dtype move inwards so every drawn integer is representable. */
static int64_t update_from(int64_t from, ttpu_dtype dt) {
  int64_t from_plus_1 = through_float(from + 1, dt);
  if (from_plus_1 < from) {
    int64_t f = llabs(from + 1);
    int n = 0;
    while (f >>= 1) ++n;
    from = from_plus_1 + ((int64_t)1 << (n - float_digits(dt) + 1));
  }
  return from;
}

static int64_t update_to(int64_t to, ttpu_dtype dt) {
  int64_t to_minus_1 = through_float(to - 1, dt);
  if (to_minus_1 >= to) {
    int64_t t = llabs(to - 1);
    int n = 0;
    while (t >>= 1) ++n;
    to = to_minus_1 - ((int64_t)1 << (n - float_digits(dt) + 1));
  }
  return to;
}

/* [lowest, max] of a dtype as doubles (integers exact up to 2^53, which is
 * all the bound checks need). */
static void dtype_range(ttpu_dtype dt, double* lo, double* hi) {
  switch (dt) {
    case TTPU_BOOL: *lo = 0; *hi = 1; break;
    case TTPU_U8: *lo = 0; *hi = 255; break;
    case TTPU_I8: *lo = -128; *hi = 127; break;
    case TTPU_I16: *lo = -32768; *hi = 32767; break;
    case TTPU_U16: *lo = 0; *hi = 65535; break;
    case TTPU_I32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    case TTPU_U32: *lo = 0; *hi = 4294967295.0; break;
    case TTPU_F16: *lo = -65504; *hi = 65504; break;
    case TTPU_BF16: *lo = -3.3895313892515355e38; *hi = 3.3895313892515355e38; break;
    case TTPU_F32: *lo = -3.4028234663852886e38; *hi = 3.4028234663852886e38; break;
    case TTPU_F64: *lo = -INFINITY; *hi = INFINITY; break;
    default: *lo = -9223372036854775808.0; *hi = 9223372036854775807.0; break;
  }
}

static ttpu_status* check_in_range(int64_t from, int64_t to_inc,
                                   ttpu_dtype dt) {
  double lo, hi;
  dtype_range(dt, &lo, &hi);
  if (dt == TTPU_I64 || dt == TTPU_U64) return NULL;
  if ((double)from < lo || (double)from > hi)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "from is out of bounds for %s", ttpu_dtype_name(dt));
  if ((double)to_inc < lo || (double)to_inc > hi)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "to - 1 is out of bounds for %s",
                            ttpu_dtype_name(dt));
  return NULL;
}

/* base + bits % range (range 0 means 2^64), converted to dtype ot, as
 * ATen's uniform_int_from_to: 64-bit draws only when the range needs them
 * (and the dtype can hold them). */
static ttpu_val int_from_to(ttpu_lower* L, ttpu_type ot, uint64_t range,
                            int64_t base) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t64 = with_dtype(ot, TTPU_U64);
  ttpu_val bits;
  if (range == 0 || range >= ((uint64_t)1 << 32)) {
    bits = ttpu_l_random_bits(L, t64);
  } else {
    bits = ttpu_hlo_convert(b, ttpu_l_random_bits(L, with_dtype(ot, TTPU_U32)),
                            TTPU_U64);
  }
  if (range != 0)
    bits = bin(L, TTPU_REM, bits, ttpu_hlo_const(b, t64, 0, (int64_t)range));
  ttpu_type ti = with_dtype(ot, TTPU_I64);
  ttpu_val v = ttpu_hlo_bitcast(b, bits, ti);
  if (base != 0) v = bin(L, TTPU_ADD, v, ttpu_hlo_const(b, ti, 0, base));
  return ttpu_hlo_convert(b, v, ot.dtype);
}

/* random_.from(Tensor(a!) self, int from, int? to, *, Generator?) */
static ttpu_status* random_from(ttpu_lower* L, int64_t from, int has_to,
                                int64_t to) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype dt = ot.dtype;
  int is_f = ttpu_dtype_is_float(dt);
  uint64_t range;
  ttpu_status* s;
  if (has_to) {
    if (from >= to)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "random_ expects 'from' to be less than 'to', "
                              "but got from=%lld >= to=%lld",
                              (long long)from, (long long)to);
    if (is_f) {
      from = update_from(from, dt);
      to = update_to(to, dt);
      if (from >= to)
        return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                                "random_ expects 'from' casted to dtype to be "
                                "less than 'to' casted to dtype, but got "
                                "from=%lld >= to=%lld",
                                (long long)from, (long long)to);
    }
    if ((s = check_in_range(from, to - 1, dt))) return s;
    range = (uint64_t)to - (uint64_t)from;
  } else if (from != INT64_MIN) {
    int64_t to_inc;
    if (is_f) {
      int digits = float_digits(dt);
      to_inc = digits >= 63 ? INT64_MAX : (int64_t)1 << digits;
      from = update_from(from, dt);
      if (from >= to_inc)
        return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                                "random_ expects 'from' casted to dtype to be "
                                "less than or equal to 'to_inc' casted to "
                                "dtype, but got from=%lld > to_inc=%lld",
                                (long long)from, (long long)to_inc);
    } else {
      double lo, hi;
      dtype_range(dt, &lo, &hi);
      to_inc = dt == TTPU_I64 || dt == TTPU_U64 ? INT64_MAX : (int64_t)hi;
    }
    if ((s = check_in_range(from, to_inc, dt))) return s;
    range = (uint64_t)to_inc - (uint64_t)from + 1;
  } else {
    range = 0; /* the full 64-bit range */
  }
  ttpu_l_set_out(L, 0, int_from_to(L, ot, range, from));
  return NULL;
}

static ttpu_status* lower_random_from(ttpu_lower* L) {
  return random_from(L, ttpu_l_int(L, 1, 0), !ttpu_l_is_none(L, 2),
                     ttpu_l_int(L, 2, 0));
}

/* random_.to(Tensor(a!) self, int to, *, Generator?) */
static ttpu_status* lower_random_to(ttpu_lower* L) {
  return random_from(L, 0, 1, ttpu_l_int(L, 1, 1));
}

/* random_(Tensor(a!) self, *, Generator?): integers in [0, 2^digits] for
 * floats, [0, max] for integers, as ATen's uniform_int. */
static ttpu_status* lower_random_(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype dt = ot.dtype;
  if (dt == TTPU_BOOL) {
    ttpu_l_set_out(L, 0, int_from_to(L, ot, 2, 0));
    return NULL;
  }
  if (ttpu_dtype_is_float(dt)) {
    uint64_t range = ((uint64_t)1 << float_digits(dt)) + 1;
    ttpu_l_set_out(L, 0, int_from_to(L, ot, range, 0));
    return NULL;
  }
  double lo, hi;
  dtype_range(dt, &lo, &hi);
  uint64_t range = dt == TTPU_I64   ? (uint64_t)INT64_MAX + 1
                   : dt == TTPU_U64 ? 0
                                    : (uint64_t)hi + 1;
  ttpu_l_set_out(L, 0, int_from_to(L, ot, range, 0));
  return NULL;
}

/* ------------------------------------------------------------ perms */

/* randperm.generator_out(SymInt n, *, Generator?, Tensor(a!) out): the
 * order that sorts n random 64-bit keys. */
static ttpu_status* lower_randperm_out(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t n = ttpu_l_int(L, 0, 0);
  ttpu_dtype dt = ot.dtype;
  double lo, hi;
  dtype_range(dt, &lo, &hi);
  if (ttpu_dtype_is_float(dt)) hi = ldexp(1.0, float_digits(dt));
  if (n > 0 && (double)(n - 1) > hi)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "n is too large for result tensor type: '%s'",
                            ttpu_dtype_name(dt));
  if (ot.ndim != 1 || ot.dims[0] != n)
    return ttpu_status_make(TTPU_INTERNAL, "randperm: out has the wrong shape");
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val keys = ttpu_l_random_bits(L, with_dtype(ot, TTPU_U64));
  ttpu_val idx = ttpu_hlo_iota(b, with_dtype(ot, TTPU_I64), 0);
  ttpu_val outs[2];
  ttpu_hlo_sort(b, keys, &idx, 1, 0, 0, outs);
  ttpu_l_set_out(L, 0, outs[1]);
  return NULL;
}

/* multinomial(Tensor self, SymInt num_samples, bool replacement=False, *,
 * Generator?) over the last dim of a 1-d or 2-d weight tensor. */
static ttpu_status* lower_multinomial(ttpu_lower* L) {
  const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, -1);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t ns = ttpu_l_int(L, 1, 1);
  int repl = ttpu_l_bool(L, 2, 0);
  if (!d) return ttpu_status_make(TTPU_INTERNAL, "multinomial: no input");
  if (!ttpu_dtype_is_float(d->dtype))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "multinomial only supports floating-point dtypes "
                            "for input, got: %s", ttpu_dtype_name(d->dtype));
  if (d->ndim < 1 || d->ndim > 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "prob_dist must be 1 or 2 dim");
  int64_t nc = d->sizes[d->ndim - 1];
  if (ns <= 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "cannot sample n_sample <= 0 samples");
  if (!repl && ns > nc)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "cannot sample n_sample > prob_dist.size(-1) "
                            "samples without replacement");
  if (nc == 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "invalid multinomial distribution (sum of "
                            "probabilities <= 0)");
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype w = work_dtype(d->dtype);
  int64_t rows = d->ndim == 2 ? d->sizes[0] : 1;
  int64_t pd[2] = {rows, nc};
  ttpu_val p = ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), w);
  p = ttpu_hlo_reshape(b, p, 2, pd);
  ttpu_type tp = ttpu_type_make(w, 2, pd);
  {
    /* CPU's value checks, read back after the run: every weight finite
     * and >= 0, every row with a positive sum. */
    ttpu_val ok = ttpu_hlo_binary(
        b, TTPU_AND, ttpu_hlo_unary(b, TTPU_IS_FINITE, p),
        ttpu_hlo_compare(b, TTPU_GE, p, cst(L, tp, 0.0)));
    ttpu_val bad = ttpu_hlo_unary(b, TTPU_NOT, ok);
    int64_t dim1 = 1, rows1[2] = {rows, 1};
    ttpu_val pos = ttpu_hlo_convert(
        b, ttpu_hlo_compare(b, TTPU_GT, p, cst(L, tp, 0.0)), TTPU_I64);
    ttpu_val npos = ttpu_hlo_reduce(b, pos, TTPU_RED_SUM, &dim1, 1);
    ttpu_val short_row = ttpu_hlo_compare(
        b, TTPU_LT, npos,
        ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &rows), 0, 1));
    short_row = ttpu_hlo_broadcast_to(
        b, ttpu_hlo_reshape(b, short_row, 2, rows1), 2, pd);
    check_none(L, ttpu_hlo_binary(b, TTPU_OR, bad, short_row),
               "invalid multinomial distribution: probabilities must be "
               "finite and >= 0 with a positive sum");
  }
  ttpu_val idx;
  if (!repl) {
    /* Exponential race: the categories with the largest p / E, E ~ Exp(1),
     * are a sample without replacement with the right law. */
    ttpu_val u = ttpu_l_random_uniform(L, tp);
    ttpu_val e = un(L, TTPU_NEG, un(L, TTPU_LOG1P, un(L, TTPU_NEG, u)));
    e = bin(L, TTPU_MAX, e, cst(L, tp, w == TTPU_F64 ? 1e-300 : 1e-30));
    ttpu_val keys = bin(L, TTPU_DIV, p, e);
    ttpu_val io = ttpu_hlo_iota(b, ttpu_type_make(TTPU_I64, 2, pd), 1);
    ttpu_val outs[2];
    ttpu_hlo_sort(b, keys, &io, 1, 1, 1, outs);
    int64_t start[2] = {0, 0}, limit[2] = {rows, ns}, step[2] = {1, 1};
    idx = ttpu_hlo_slice(b, outs[1], start, limit, step);
  } else {
    /* Inverse CDF: the index is the number of cumulative weights at or
     * below u * total (zero-weight categories can never be chosen). */
    ttpu_val cdf = ttpu_hlo_cumulative(b, p, TTPU_RED_SUM, 1);
    int64_t lo2[2] = {0, nc - 1}, hi2[2] = {rows, nc}, st2[2] = {1, 1};
    ttpu_val total = ttpu_hlo_slice(b, cdf, lo2, hi2, st2); /* [rows, 1] */
    int64_t sd[2] = {rows, ns};
    ttpu_type ts = ttpu_type_make(w, 2, sd);
    ttpu_val u = ttpu_l_random_uniform(L, ts);
    ttpu_val target = bin(L, TTPU_MUL, u,
                          ttpu_hlo_broadcast_to(b, total, 2, sd));
    int64_t d3[3] = {rows, ns, nc};
    ttpu_type t3 = ttpu_type_make(w, 3, d3);
    int64_t map_c[2] = {0, 2}, map_t[2] = {0, 1};
    ttpu_val c3 = ttpu_hlo_broadcast_in_dim(b, cdf, t3, map_c);
    ttpu_val t3v = ttpu_hlo_broadcast_in_dim(b, target, t3, map_t);
    ttpu_val le = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_LE, c3, t3v),
                                   TTPU_I64);
    int64_t rd = 2;
    idx = ttpu_hlo_reduce(b, le, TTPU_RED_SUM, &rd, 1);
    idx = bin(L, TTPU_MIN, idx,
              ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 2, sd), 0, nc - 1));
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(b, idx, ot.ndim, ot.dims));
  return NULL;
}

const ttpu_op_def ttpu_ops_random[] = {
    {"uniform_", lower_uniform_, .flags = TTPU_OP_RANDOM, .kinds = TTPU_K_FLOAT,
     .kernel = "check_uniform_bounds", .complex_fn = ttpu_complex_random},
    {"normal_", lower_normal_, .flags = TTPU_OP_RANDOM, .param = TTPU_CX_NORMAL, .complex_fn = ttpu_complex_random},
    {"normal.Tensor_float", lower_normal_tensor_float, .flags = TTPU_OP_RANDOM, .variants = TTPU_V_OV_OUT},
    {"normal.float_Tensor", lower_normal_float_tensor, .flags = TTPU_OP_RANDOM, .variants = TTPU_V_OV_OUT},
    {"normal.Tensor_Tensor", lower_normal_tensor_tensor, .flags = TTPU_OP_RANDOM, .variants = TTPU_V_OV_OUT},
    {"log_normal_", lower_log_normal_, .flags = TTPU_OP_RANDOM},
    {"exponential_", lower_exponential_, .flags = TTPU_OP_RANDOM},
    {"cauchy_", lower_cauchy_, .flags = TTPU_OP_RANDOM},
    {"geometric_", lower_geometric_, .flags = TTPU_OP_RANDOM},
    {"bernoulli_.float", lower_bernoulli_float, .flags = TTPU_OP_RANDOM},
    {"bernoulli.p", lower_bernoulli_float, .flags = TTPU_OP_RANDOM},
    {"bernoulli_.Tensor", lower_bernoulli_tensor, .flags = TTPU_OP_RANDOM},
    {"bernoulli.out", lower_bernoulli_out, .flags = TTPU_OP_RANDOM},
    {"random_", lower_random_, .flags = TTPU_OP_RANDOM},
    {"random_.from", lower_random_from, .flags = TTPU_OP_RANDOM},
    {"random_.to", lower_random_to, .flags = TTPU_OP_RANDOM},
    {"randperm.generator_out", lower_randperm_out, .flags = TTPU_OP_RANDOM},
    {"multinomial", lower_multinomial, .flags = TTPU_OP_RANDOM},
    {"native_dropout", lower_native_dropout, .flags = TTPU_OP_RANDOM},
    {"native_dropout_backward", lower_native_dropout_backward, .flags = 0},
    {0},
};
