/* elementwise.h - helpers shared by the elementwise families
 * (ops/elementwise.c, ops/unary.c, ops/activation.c); internal to ops/.
 *
 * Conventions: an elementwise lowering reads every operand already
 * broadcast to the shape of output 0 (the meta kernel has checked that the
 * shapes broadcast, and for in-place ops that the result fits `self`), in
 * the dtype the math runs in. Like PyTorch's CPU kernels, half and bfloat16
 * math runs in float32 ("opmath") and is rounded once when the framework
 * converts the result to the output's dtype.
 */
#ifndef TTPU_OPS_ELEMENTWISE_H_
#define TTPU_OPS_ELEMENTWISE_H_

#include "ttpu_lower.h"

/* Element kinds an op accepts, as the CPU kernel's dispatch does. */
enum {
  TTPU_EW_BOOL = TTPU_K_BOOL,
  TTPU_EW_INT = TTPU_K_INT,
  TTPU_EW_FLOAT = TTPU_K_FLOAT,
  TTPU_EW_NUM = TTPU_EW_INT | TTPU_EW_FLOAT,
  TTPU_EW_ALL = TTPU_EW_BOOL | TTPU_EW_INT | TTPU_EW_FLOAT,
};

/* In the param of add/sub (ops/elementwise.c) and of
 * ttpu_complex_arith: the operands swapped (rsub). The rest is the
 * ttpu_binop. */
#define TTPU_EW_REVERSED ((int64_t)1 << 16)

/* float32 for half/bfloat16, else dt. */
ttpu_dtype ttpu_ew_opmath(ttpu_dtype dt);
/* PyTorch's result type over the call's operands (output 0's dtype when
 * the glue gave none). */
ttpu_dtype ttpu_ew_common(ttpu_lower* L);
/* The floating type a float-valued op (exp, atan2, true division) computes
 * in: the result type if floating, else output 0's dtype if floating, else
 * float32 (integer inputs promote to the default float type). */
ttpu_dtype ttpu_ew_float(ttpu_lower* L);
/* Fails the lowering with NotImplementedError, as the CPU dispatch does,
 * when dt is not among `kinds`; returns 0 then, 1 if accepted. */
int ttpu_ew_accepts(ttpu_lower* L, ttpu_dtype dt, int kinds, const char* op);

/* Argument `arg` (a tensor, a CPU scalar tensor or a Scalar) converted to
 * dt and broadcast to output 0's shape. */
ttpu_val ttpu_ew_in(ttpu_lower* L, int arg, ttpu_dtype dt);
/* Like ttpu_ew_in for a value already read. */
ttpu_val ttpu_ew_fit(ttpu_lower* L, ttpu_val v, ttpu_dtype dt);
/* Sets output 0 to v, a result computed in opmath of the result type dt:
 * rounded to dt first when the output has another dtype (an out= of a
 * wider type receives the rounded result, as on the CPU: half + half into
 * a float64 out= overflows to inf). */
void ttpu_ew_set(ttpu_lower* L, ttpu_val v, ttpu_dtype dt);
/* v rounded to dt and back to its own dtype: the rounding a PyTorch op in
 * dt does between the steps of a composite computation (v unchanged when
 * it is of dt already). */
ttpu_val ttpu_ew_round(ttpu_hlo* b, ttpu_val v, ttpu_dtype dt);
/* A constant with the type of `like`. */
ttpu_val ttpu_ew_k(ttpu_hlo* b, ttpu_val like, double v);
/* x != x: bool, same shape. */
ttpu_val ttpu_ew_isnan(ttpu_hlo* b, ttpu_val x);
/* The sign bit of a float value (set for -0.0 and negative NaNs). */
ttpu_val ttpu_ew_sign_bit(ttpu_hlo* b, ttpu_val x);
/* |v| with the sign bit of s (copysign). */
ttpu_val ttpu_ew_copysign(ttpu_hlo* b, ttpu_val v, ttpu_val s);
/* NaN-propagating maximum / minimum (PyTorch's maximum, clamp), exact for
 * integers and bool too. */
ttpu_val ttpu_ew_max(ttpu_hlo* b, ttpu_val x, ttpu_val y);
ttpu_val ttpu_ew_min(ttpu_hlo* b, ttpu_val x, ttpu_val y);
/* erf, exact to float32 rounding in the tails too (the plugin's own
 * float32 erf stops 3 ulp short of 1); erfc keeps its tiny tail values. */
ttpu_val ttpu_ew_erf(ttpu_hlo* b, ttpu_val x);
ttpu_val ttpu_ew_erfc(ttpu_hlo* b, ttpu_val x);
/* gelu(x) in x's (float) type: x/2 (1 + erf(x/sqrt2)), or the tanh form
 * x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) when tanh_form. */
ttpu_val ttpu_ew_gelu(ttpu_hlo* b, ttpu_val x, int tanh_form);
/* Scalar argument `arg` as a 0-d value of dt, converted as the CPU
 * converts a Scalar to a kernel's C type: a complex value into a real dt
 * fails the call (a data-dependent check) with "value cannot be converted
 * to type <C type of cpu_type> without overflow" unless its imaginary part
 * is zero. cpu_type is the type the CPU kernel converts to (float for
 * bf16/f16 where it computes in float, else the dtype itself). */
ttpu_val ttpu_ew_scalar_to(ttpu_lower* L, int arg, ttpu_dtype dt, ttpu_dtype cpu_type);
/* A data-dependent error: after the program runs, the call fails with
 * RuntimeError(msg) if any element of `flags` is true. */
void ttpu_ew_check(ttpu_lower* L, ttpu_val flags, const char* msg);
/* Fails the call with "ZeroDivisionError" (RuntimeError, as on CPU) when
 * an integer divisor has a zero element; a data-dependent check. */
void ttpu_ew_check_int_divisor(ttpu_lower* L, ttpu_val divisor);

/* Short spellings for formula-heavy lowerings. */
static inline ttpu_val ttpu_ew_add(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_ADD, x, y);
}
static inline ttpu_val ttpu_ew_sub(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_SUB, x, y);
}
static inline ttpu_val ttpu_ew_mul(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_MUL, x, y);
}
static inline ttpu_val ttpu_ew_div(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_DIV, x, y);
}
/* x (op) constant */
static inline ttpu_val ttpu_ew_addk(ttpu_hlo* b, ttpu_val x, double v) {
  return ttpu_hlo_binary(b, TTPU_ADD, x, ttpu_ew_k(b, x, v));
}
static inline ttpu_val ttpu_ew_mulk(ttpu_hlo* b, ttpu_val x, double v) {
  return ttpu_hlo_binary(b, TTPU_MUL, x, ttpu_ew_k(b, x, v));
}
/* constant (op) x */
static inline ttpu_val ttpu_ew_ksub(ttpu_hlo* b, double v, ttpu_val x) {
  return ttpu_hlo_binary(b, TTPU_SUB, ttpu_ew_k(b, x, v), x);
}
static inline ttpu_val ttpu_ew_kdiv(ttpu_hlo* b, double v, ttpu_val x) {
  return ttpu_hlo_binary(b, TTPU_DIV, ttpu_ew_k(b, x, v), x);
}
static inline ttpu_val ttpu_ew_cmpk(ttpu_hlo* b, ttpu_cmp c, ttpu_val x,
                                    double v) {
  return ttpu_hlo_compare(b, c, x, ttpu_ew_k(b, x, v));
}
static inline ttpu_val ttpu_ew_and(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_AND, x, y);
}
static inline ttpu_val ttpu_ew_or(ttpu_hlo* b, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, TTPU_OR, x, y);
}

#endif /* TTPU_OPS_ELEMENTWISE_H_ */
