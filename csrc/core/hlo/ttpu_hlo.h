/* ttpu_hlo.h - program builder: typed SSA values printed as StableHLO text.
 *
 * A builder holds one function `main`. Values are small integers (ttpu_val)
 * naming SSA results; each has a ranked tensor type. Every op checks its
 * operand types; the first error sticks in the builder (later calls return
 * TTPU_VAL_ERROR and do nothing), so lowering code can chain calls and check
 * ttpu_hlo_status() once at the end. The printer is deterministic: the same
 * sequence of calls gives byte-identical text.
 *
 * Ops are printed in MLIR's generic form ("stablehlo.add"(%0, %1) {...}),
 * which every StableHLO parser version accepts.
 */
#ifndef TTPU_HLO_H_
#define TTPU_HLO_H_

#include "ttpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ttpu_hlo ttpu_hlo;
typedef int ttpu_val;
#define TTPU_VAL_ERROR (-1)

typedef struct {
  ttpu_dtype dtype;
  int ndim;
  int64_t dims[TTPU_MAX_DIMS];
} ttpu_type;

/* Caller frees with ttpu_hlo_free. */
ttpu_hlo* ttpu_hlo_create(void);
void ttpu_hlo_free(ttpu_hlo* b);
/* On (off by default): an op identical to an earlier one of the function
 * body (same name, operands, attributes; no regions, no effects) yields
 * the earlier value instead of a new op; reshapes, transposes and
 * converts of such values fold into one; and the printed program leaves
 * out the ops none of its results depend on. The program computes the
 * same results either way. */
void ttpu_hlo_set_optimize(ttpu_hlo* b, int on);
/* Sticky error: NULL while fine. Borrowed (the builder owns it). */
const ttpu_status* ttpu_hlo_status(const ttpu_hlo* b);
/* Takes the sticky error out of the builder (caller frees); NULL if none. */
ttpu_status* ttpu_hlo_take_status(ttpu_hlo* b);
/* Sets the sticky error (if none yet) from a formatted message. Returns
 * TTPU_VAL_ERROR so lowerings can `return ttpu_hlo_fail(...)`. */
ttpu_val ttpu_hlo_fail(ttpu_hlo* b, ttpu_code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Type of a value (borrowed pointer into the builder, valid until the next
 * op is added: copy it if you keep it). */
const ttpu_type* ttpu_hlo_type(const ttpu_hlo* b, ttpu_val v);
ttpu_type ttpu_type_make(ttpu_dtype dtype, int ndim, const int64_t* dims);
int64_t ttpu_type_numel(const ttpu_type* t);

/* Function parameters, in order. alias_output >= 0 marks the parameter as
 * donated to that result index (tf.aliasing_output); -1 for none. */
ttpu_val ttpu_hlo_param(ttpu_hlo* b, ttpu_type t, int alias_output);
/* Sets the results of main (call once, at the end). */
void ttpu_hlo_return(ttpu_hlo* b, const ttpu_val* vals, int n);
/* Prints the module. *out is malloc'ed, NUL-terminated (caller frees). */
ttpu_status* ttpu_hlo_print(ttpu_hlo* b, char** out, size_t* len);

/* A module ttpu_hlo_print printed, as a callee's text for ttpu_hlo_call
 * and ttpu_extern_define: its main becomes `func.func private @name`, the
 * functions it calls stay after it, the module around them goes. NULL
 * when text is not such a module or memory runs out; caller frees. */
char* ttpu_hlo_module_as_callee(const char* text, const char* name);

/* ---- constants */
/* A scalar constant broadcast to type t (t.ndim may be 0). Integers are
 * converted exactly from v_int when the dtype is integral or bool, else from
 * v_float (inf/nan allowed; printed as exact hex). */
ttpu_val ttpu_hlo_const(ttpu_hlo* b, ttpu_type t, double v_float,
                        int64_t v_int);
ttpu_val ttpu_hlo_const_f(ttpu_hlo* b, ttpu_dtype dt, double v);  /* 0-d */
/* A complex constant re + im*i broadcast to type t (C64/C128). A complex
 * t given to ttpu_hlo_const gets v_float + 0i. */
ttpu_val ttpu_hlo_const_c(ttpu_hlo* b, ttpu_type t, double re, double im);
ttpu_val ttpu_hlo_const_i(ttpu_hlo* b, ttpu_dtype dt, int64_t v); /* 0-d */
/* A 1-d i64 constant tensor from an array. */
ttpu_val ttpu_hlo_const_i64s(ttpu_hlo* b, const int64_t* v, int n);
/* iota along dimension `dim` of type t. */
ttpu_val ttpu_hlo_iota(ttpu_hlo* b, ttpu_type t, int dim);

/* ---- elementwise (operands must have identical types except where
 * noted; use ttpu_hlo_broadcast_to/convert first) */
typedef enum {
  TTPU_ADD, TTPU_SUB, TTPU_MUL, TTPU_DIV, TTPU_REM, TTPU_POW, TTPU_MAX,
  TTPU_MIN, TTPU_AND, TTPU_OR, TTPU_XOR, TTPU_ATAN2, TTPU_SHL, TTPU_SHR_A,
  TTPU_SHR_L,
  /* float only, printed as XLA's chlo ops (legalized by the CPU plugin and
   * libtpu, as chlo.erf): Hurwitz zeta(s, q) (for q > 0) and
   * nextafter(x, y) */
  TTPU_ZETA, TTPU_NEXT_AFTER,
} ttpu_binop;
ttpu_val ttpu_hlo_binary(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y);

typedef enum {
  TTPU_NEG, TTPU_ABS, TTPU_EXP, TTPU_EXPM1, TTPU_LOG, TTPU_LOG1P, TTPU_SQRT,
  TTPU_RSQRT, TTPU_CBRT, TTPU_SIN, TTPU_COS, TTPU_TAN, TTPU_TANH,
  TTPU_LOGISTIC, TTPU_FLOOR, TTPU_CEIL, TTPU_ROUND_EVEN, TTPU_SIGN, TTPU_NOT,
  TTPU_IS_FINITE, /* result i1 */
  TTPU_ERF, /* printed as "chlo.erf" (XLA's own approximation, ~1 ulp);
              verified to compile on the CPU plugin for f16/bf16/f32/f64 */
  TTPU_LGAMMA, TTPU_DIGAMMA, TTPU_BESSEL_I1E, TTPU_ERF_INV, /* chlo ops too, float only */
  /* chlo ops, float and complex: XLA legalizes the complex ones with
   * algorithms accurate to a few ulp over the whole plane */
  TTPU_ASIN, TTPU_ACOS, TTPU_ATAN, TTPU_ASINH, TTPU_ACOSH, TTPU_ATANH,
} ttpu_unop;
ttpu_val ttpu_hlo_unary(ttpu_hlo* b, ttpu_unop op, ttpu_val x);

typedef enum { TTPU_EQ, TTPU_NE, TTPU_LT, TTPU_LE, TTPU_GT, TTPU_GE } ttpu_cmp;
/* Result has dtype bool. Compare type (FLOAT/SIGNED/UNSIGNED) from dtype. */
ttpu_val ttpu_hlo_compare(ttpu_hlo* b, ttpu_cmp dir, ttpu_val x, ttpu_val y);
/* pred (bool, same dims) ? on_true : on_false. */
ttpu_val ttpu_hlo_select(ttpu_hlo* b, ttpu_val pred, ttpu_val on_true,
                         ttpu_val on_false);
ttpu_val ttpu_hlo_clamp(ttpu_hlo* b, ttpu_val lo, ttpu_val x, ttpu_val hi);
/* Element type conversion (bool results compare != 0). No-op if same. */
ttpu_val ttpu_hlo_convert(ttpu_hlo* b, ttpu_val x, ttpu_dtype to);
/* Complex values (C64/C128). Complex operands are accepted by add, sub,
 * mul, div, pow, negate, exp, log(1p), expm1, sqrt, rsqrt, sin, cos, tan,
 * tanh, the inverse trigonometric and hyperbolic functions, logistic, sign
 * (x/|x|), compare EQ/NE, select, reduce sum/prod and every shape op; abs gives the real component type. Convert follows
 * PyTorch: real -> complex has imaginary part 0, complex -> real keeps the
 * real part, complex -> bool is (re != 0 || im != 0). */
ttpu_val ttpu_hlo_real(ttpu_hlo* b, ttpu_val x);  /* component dtype */
ttpu_val ttpu_hlo_imag(ttpu_hlo* b, ttpu_val x);  /* zeros for a real x */
/* re + im*i from two real values of one type (F32 -> C64, F64 -> C128). */
ttpu_val ttpu_hlo_complex(ttpu_hlo* b, ttpu_val re, ttpu_val im);
/* stablehlo.fft over the innermost n (1..3) dims with lengths len[0..n):
 * FFT/IFFT complex -> complex (IFFT scaled by 1/prod(len)), RFFT real ->
 * complex (last dim len/2+1), IRFFT complex (last dim len/2+1) -> real of
 * len (scaled by 1/prod(len)). */
typedef enum { TTPU_FFT_FFT, TTPU_FFT_IFFT, TTPU_FFT_RFFT, TTPU_FFT_IRFFT }
    ttpu_fft_type;
ttpu_val ttpu_hlo_fft(ttpu_hlo* b, ttpu_val x, ttpu_fft_type type,
                      const int64_t* len, int n);
/* Reinterprets bits (no complex types). Same element size: same dims. Different sizes follow
 * StableHLO's rule (a trailing dim appears/disappears). */
ttpu_val ttpu_hlo_bitcast(ttpu_hlo* b, ttpu_val x, ttpu_type to);

/* ---- shape */
ttpu_val ttpu_hlo_reshape(ttpu_hlo* b, ttpu_val x, int ndim,
                          const int64_t* dims);
ttpu_val ttpu_hlo_transpose(ttpu_hlo* b, ttpu_val x, const int64_t* perm);
/* broadcast_in_dim: operand dim i goes to result dim map[i]. */
ttpu_val ttpu_hlo_broadcast_in_dim(ttpu_hlo* b, ttpu_val x, ttpu_type to,
                                   const int64_t* map);
/* NumPy-style broadcast of x to dims (trailing-aligned). */
ttpu_val ttpu_hlo_broadcast_to(ttpu_hlo* b, ttpu_val x, int ndim,
                               const int64_t* dims);
ttpu_val ttpu_hlo_slice(ttpu_hlo* b, ttpu_val x, const int64_t* start,
                        const int64_t* limit, const int64_t* stride);
ttpu_val ttpu_hlo_concat(ttpu_hlo* b, const ttpu_val* xs, int n, int dim);
ttpu_val ttpu_hlo_pad(ttpu_hlo* b, ttpu_val x, ttpu_val pad_value,
                      const int64_t* low, const int64_t* high,
                      const int64_t* interior);
ttpu_val ttpu_hlo_reverse(ttpu_hlo* b, ttpu_val x, const int64_t* dims,
                          int n);
/* starts: n = rank 0-d integer values. */
ttpu_val ttpu_hlo_dynamic_slice(ttpu_hlo* b, ttpu_val x, const ttpu_val* starts,
                                const int64_t* sizes);
ttpu_val ttpu_hlo_dynamic_update_slice(ttpu_hlo* b, ttpu_val x, ttpu_val upd,
                                       const ttpu_val* starts);

/* ---- reductions */
typedef enum { TTPU_RED_SUM, TTPU_RED_PROD, TTPU_RED_MAX, TTPU_RED_MIN,
               TTPU_RED_AND, TTPU_RED_OR } ttpu_redop;
/* Reduces dims[0..n) of x with the identity of op as init (-inf/+inf or
 * lowest/highest int for max/min). Result drops the reduced dims. */
ttpu_val ttpu_hlo_reduce(ttpu_hlo* b, ttpu_val x, ttpu_redop op,
                         const int64_t* dims, int n);
/* Variadic reduce returning (value, index) of the max (is_max=1) or min
 * along `dim`, ties broken by the lowest index, NaN propagating as max, as
 * PyTorch does. index has dtype I64. */
void ttpu_hlo_reduce_arg(ttpu_hlo* b, ttpu_val x, int dim, int is_max,
                         ttpu_val* value, ttpu_val* index);
/* reduce_window with op's identity as init (or `init` if != VAL_ERROR). All
 * arrays have rank(x) entries; padding is [rank][2] flattened (lo, hi). */
ttpu_val ttpu_hlo_reduce_window(ttpu_hlo* b, ttpu_val x, ttpu_redop op,
                                ttpu_val init, const int64_t* window,
                                const int64_t* strides,
                                const int64_t* base_dilation,
                                const int64_t* window_dilation,
                                const int64_t* padding);
/* Cumulative op along dim (sum/prod/max/min), inclusive. */
ttpu_val ttpu_hlo_cumulative(ttpu_hlo* b, ttpu_val x, ttpu_redop op, int dim);

/* ---- linear algebra */
/* Solves op(a) x = rhs (left_side) or x op(a) = rhs for triangular a
 * (batch..., n, n), float or complex; rhs (batch..., n, k) / (batch...,
 * k, n), same batch and dtype; op transposes a when transpose_a is 1,
 * conjugate-transposes it when 2 (ADJOINT). */
ttpu_val ttpu_hlo_triangular_solve(ttpu_hlo* b, ttpu_val a, ttpu_val rhs,
                                   int left_side, int lower,
                                   int unit_diagonal, int transpose_a);
typedef enum { TTPU_PREC_DEFAULT = 0, TTPU_PREC_HIGH, TTPU_PREC_HIGHEST }
    ttpu_precision;
/* dot_general; result dtype `out` (accumulation type hint). Result dims:
 * batch, lhs free, rhs free. bf16/f16 operands with a float32 result are
 * widened to float32 first (exact; see hlo_linalg.c). */
ttpu_val ttpu_hlo_dot_general(ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs,
                              const int64_t* lhs_batch,
                              const int64_t* rhs_batch, int n_batch,
                              const int64_t* lhs_contract,
                              const int64_t* rhs_contract, int n_contract,
                              ttpu_dtype out, ttpu_precision prec);
/* convolution in NC(spatial) / OI(spatial) / NC(spatial) layout with
 * n_spatial dims. padding is [n_spatial][2] (lo, hi). */
ttpu_val ttpu_hlo_convolution(ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs,
                              int n_spatial, const int64_t* strides,
                              const int64_t* padding,
                              const int64_t* lhs_dilation,
                              const int64_t* rhs_dilation,
                              int64_t feature_groups, int64_t batch_groups,
                              ttpu_dtype out, ttpu_precision prec);
/* Generic convolution with explicit dimension numbers (each array lists
 * the dims of batch/feature/spatial...). */
typedef struct {
  int64_t in_batch, in_feature, in_spatial[TTPU_MAX_DIMS];
  int64_t k_out, k_in, k_spatial[TTPU_MAX_DIMS];
  int64_t out_batch, out_feature, out_spatial[TTPU_MAX_DIMS];
} ttpu_conv_dims;
ttpu_val ttpu_hlo_convolution_general(
    ttpu_hlo* b, ttpu_val lhs, ttpu_val rhs, int n_spatial,
    const ttpu_conv_dims* dn, const int64_t* strides, const int64_t* padding,
    const int64_t* lhs_dilation, const int64_t* rhs_dilation,
    int64_t feature_groups, int64_t batch_groups, ttpu_type out,
    ttpu_precision prec);

/* ---- indexing */
typedef struct {
  int n_offset_dims;            const int64_t* offset_dims;
  int n_collapsed_slice_dims;   const int64_t* collapsed_slice_dims;
  int n_start_index_map;        const int64_t* start_index_map;
  int n_operand_batching_dims;  const int64_t* operand_batching_dims;
  int n_start_indices_batching_dims; const int64_t* start_indices_batching_dims;
  int64_t index_vector_dim;
  const int64_t* slice_sizes;   /* rank(operand) entries */
} ttpu_gather_dims;
ttpu_val ttpu_hlo_gather(ttpu_hlo* b, ttpu_val operand, ttpu_val indices,
                         const ttpu_gather_dims* dn, ttpu_type out);

typedef struct {
  int n_update_window_dims;     const int64_t* update_window_dims;
  int n_inserted_window_dims;   const int64_t* inserted_window_dims;
  int n_scatter_dims_to_operand_dims;
  const int64_t* scatter_dims_to_operand_dims;
  int n_input_batching_dims;    const int64_t* input_batching_dims;
  int n_scatter_indices_batching_dims;
  const int64_t* scatter_indices_batching_dims;
  int64_t index_vector_dim;
} ttpu_scatter_dims;
/* combine: TTPU_SCATTER_SET replaces, others combine with the binop. */
typedef enum { TTPU_SCATTER_SET = -1 } ttpu_scatter_mode;
ttpu_val ttpu_hlo_scatter(ttpu_hlo* b, ttpu_val operand, ttpu_val indices,
                          ttpu_val updates, const ttpu_scatter_dims* dn,
                          int combine /* ttpu_binop or TTPU_SCATTER_SET */);

/* Flat gather/scatter on a 1-d operand with an index tensor of any shape
 * (i64 values): out[i...] = x[idx[i...]]; and x[idx[...]] (op)= upd[...]. */
ttpu_val ttpu_hlo_take(ttpu_hlo* b, ttpu_val x1d, ttpu_val idx);
ttpu_val ttpu_hlo_put(ttpu_hlo* b, ttpu_val x1d, ttpu_val idx, ttpu_val upd,
                      int combine);

/* ---- sorting */
/* Stable sort along dim of keys; each of the n_extra values is permuted
 * alongside. descending sorts largest first; NaN ordered as PyTorch (last
 * when ascending). outs receives 1 + n_extra values. */
void ttpu_hlo_sort(ttpu_hlo* b, ttpu_val keys, const ttpu_val* extra,
                   int n_extra, int dim, int descending, ttpu_val* outs);

/* ---- random */
/* rng_bit_generator (THREE_FRY): state is ui64[2]; returns new state and
 * random bits of type `bits` (an unsigned integer dtype). */
void ttpu_hlo_rng_bits(ttpu_hlo* b, ttpu_val state, ttpu_type bits,
                       ttpu_val* new_state, ttpu_val* out);

/* ---- control flow */
/* stablehlo.while over a loop state of n values (1..256) starting at init.
 * cond(b, ctx, state) emits the loop test and returns a 0-d bool; body(b,
 * ctx, state, next) emits one iteration and writes the n next state values
 * (each of its state value's type). Both may use values of the enclosing
 * program. outs receives the n final state values. */
typedef ttpu_val (*ttpu_hlo_while_cond)(ttpu_hlo* b, void* ctx,
                                        const ttpu_val* state);
typedef void (*ttpu_hlo_while_body)(ttpu_hlo* b, void* ctx,
                                    const ttpu_val* state, ttpu_val* next);
void ttpu_hlo_while(ttpu_hlo* b, const ttpu_val* init, int n,
                    ttpu_hlo_while_cond cond, ttpu_hlo_while_body body,
                    void* ctx, ttpu_val* outs);

/* x, through a value XLA cannot see through (an optimization barrier):
 * for a constant whose use must stay as written (XLA turns a division by
 * a constant into a multiplication by its rounded reciprocal). */
ttpu_val ttpu_hlo_opaque(ttpu_hlo* b, ttpu_val x);

/* A call of a function defined outside the builder: `text` is
 * module-level StableHLO (one or more func.func ops, private, one of them
 * named `callee`; other symbols it defines must not clash with another
 * text's; callee is a bare identifier of at most 256 characters). It is
 * printed once after main, whatever the number of calls;
 * a callee must always come with the same text. args must have the
 * callee's argument types and res are its result types (n_res >= 1); the
 * call is pure: equal calls are shared and an unused one is dropped. outs
 * receives n_res values. A call may sit inside a region (a loop's body). */
void ttpu_hlo_call(ttpu_hlo* b, const char* callee, const char* text,
                   const ttpu_val* args, int n, const ttpu_type* res,
                   int n_res, ttpu_val* outs);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_HLO_H_ */
