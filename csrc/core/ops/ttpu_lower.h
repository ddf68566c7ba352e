/* ttpu_lower.h - the lowering table's interface (internal).
 *
 * Each op family lives in its own file (ops/elementwise.c, ops/reduce.c,
 * ...) and exports one table, e.g.
 *
 *   const ttpu_op_def ttpu_ops_elementwise[] = {
 *     {"add.Tensor", add_like, .param = TTPU_ADD,
 *      .variants = TTPU_V_INPLACE | TTPU_V_OUT},
 *     {NULL, NULL, 0},
 *   };
 *
 * which ops/table.c lists. One record stands for one op and, through
 * `variants`, for its in-place and out= overloads where their names follow
 * ATen's rule; table.c expands the records into one flat table, once. A lowering reads its inputs as logical values
 * (the framework has already turned each strided view into a value of the
 * view's sizes and dtype) and sets one value per call output, of the
 * output's sizes. If its dtype differs from the output's, the framework
 * converts it. The framework writes results back into the output storages
 * (in place through views) and compiles/caches/runs the program.
 *
 * Argument helpers index the ATen schema's arguments (0-based). A lowering
 * must derive everything that changes the program from compile-time args
 * (ints, floats, bools, shapes, dtypes): runtime Scalars go through
 * ttpu_l_scalar and never change the program text.
 *
 * This header and ttpu_lower_ctx.h are ops/'s public face to the layers
 * above it (prog/, exec/, the C tests): the op table and the ttpu_l_*
 * helpers, whose context (ops/lower.c) stands on hlo/ alone.
 */
#ifndef TTPU_LOWER_H_
#define TTPU_LOWER_H_

#include "ttpu.h"
#include "../hlo/ttpu_hlo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Names derived from texts and types (ops/loop.c): 64-bit FNV-1a over
 * bytes, and over tensors' dtypes and sizes (strides and storages left
 * out), continuing from h. */
#define TTPU_FNV1A_SEED 0xcbf29ce484222325ull
uint64_t ttpu_fnv1a(uint64_t h, const void* p, size_t n);
uint64_t ttpu_types_hash(uint64_t h, const ttpu_tensor* t, int n);

typedef struct ttpu_lower ttpu_lower;
typedef ttpu_status* (*ttpu_lower_fn)(ttpu_lower* L);

enum {
  TTPU_OP_RANDOM = 1,      /* takes and advances the device's rng state */
  TTPU_OP_COMPLEX_AS_IS = 2, /* fn is right for complex values as it is */
  /* Its Scalar arguments are compile-time values: part of the program's
   * signature (a new value compiles a new program) and constants to the
   * lowering (ttpu_l_scalar_static), for ops whose best program depends
   * on the value, as pow's does on its exponent. */
  TTPU_OP_STATIC_SCALARS = 4,
  /* Its CPU kernel takes no output of another dtype than its input's
   * (ATen's borrowing unary ops): such a call fails with RuntimeError
   * "Found dtype <out> but expected <input>" before anything else. */
  TTPU_OP_SAME_DTYPE_OUT = 8,
  /* Without a complex lowering, a call of real operands with a complex
   * out= still reaches the real lowering: the CPU computes in the
   * operands' type and casts (the elementwise real functions: erf,
   * lgamma, the Bessel functions), or the lowering refuses that out with
   * the CPU kernel's own message (nan_to_num, log_sigmoid). */
  TTPU_OP_REAL_INTO_COMPLEX = 16,
  /* Its CPU kernel dispatches on its result's dtype, which its Scalar
   * arguments do not promote (rrelu_with_noise): `kinds` is checked
   * against output 0's dtype rather than the call's common dtype. */
  TTPU_OP_KINDS_OF_OUT = 32,
  /* A fill: writes values that depend on its scalar alone (zero_, fill_
   * with a Scalar), never on what the storage held. A fused window runs
   * a fill of a storage it has not seen on its own, before the window
   * (exec/window.c), so that state made with zeros_like enters a training
   * step's window as an input, as it does from the second step on. */
  TTPU_OP_FILL = 64,
};

/* Overloads a record also stands for, named from its own name "op.OV"
 * (or "op" without an overload name) as ATen names them. */
enum {
  TTPU_V_INPLACE = 1, /* "op_.OV" / "op_" */
  TTPU_V_OUT = 2,     /* "op.out" */
  TTPU_V_OV_OUT = 4,  /* "op.OV_out" (needs an overload name) */
};

/* Dtype kinds, for a record's `kinds`. */
enum {
  TTPU_K_BOOL = 1,
  TTPU_K_INT = 2,
  TTPU_K_FLOAT = 4,
  TTPU_K_NUM = TTPU_K_INT | TTPU_K_FLOAT,
};

/* One op's record. Tables are static and immutable; table.c's expanded
 * copies live for the process, so a record may be read from any thread. */
typedef struct {
  const char* name;   /* ATen overload name: "add.Tensor", "relu" */
  ttpu_lower_fn fn;
  int flags;          /* TTPU_OP_* */
  /* What fn reads through ttpu_l_param (the binop of a shared binary
   * lowering, the rank of a pooling...); a complex_fn reads it too. */
  int64_t param;
  int variants;       /* TTPU_V_*: overloads expanded from this record */
  /* The dtype kinds the CPU kernel dispatches (0: every kind). A real
   * call whose result type (the call's common dtype, else output 0's;
   * output 0's alone under TTPU_OP_KINDS_OF_OUT) is
   * of another kind fails before fn runs with NotImplementedError
   * "\"<kernel>\" not implemented for '<dtype>'", as the CPU does. */
  int kinds;
  const char* kernel;
  /* The lowering of calls with complex values (ops/complex.h), NULL for
   * none unless TTPU_OP_COMPLEX_AS_IS. */
  ttpu_lower_fn complex_fn;
} ttpu_op_def;

/* The record of op id `op` (expanded table), or NULL when out of range.
 * O(1); the table is built once, thread-safely, on first use. Ids and
 * names: ttpu_op_lookup / ttpu_op_name (ttpu_op.h). */
const ttpu_op_def* ttpu_op_def_get(int op);
/* The refusal of a call whose result type is not of def's kinds, before
 * its lowering runs (NULL: accepted). Caller owns the status. */
ttpu_status* ttpu_op_check_kinds(const ttpu_op_def* def,
                                 const ttpu_op_call* call);

/* Buckets (docs/design/shapes.md). How an op's program may serve every
 * size of a bucket along a dim whose padding holds undefined values
 * (ops/bucket.c lists the ops): */
enum {
  TTPU_B_NONE = 0,     /* it may not: an exact program per size */
  TTPU_B_ELEMENTWISE,  /* output elements read inputs at their own index */
  TTPU_B_FILL_ZERO,    /* right once the padding of its inputs holds 0 */
  TTPU_B_FILL_ONE,     /* ... 1 */
  TTPU_B_FILL_LOWEST,  /* ... the dtype's lowest value (-inf) */
  TTPU_B_FILL_HIGHEST, /* ... the dtype's highest value (+inf) */
  TTPU_B_OTHER_DIMS,   /* reduces the dims of its argument 1 (mean, var):
                          only when none of them is padded */
  TTPU_B_LAST_DIMS,    /* normalizes its last len(argument 1) dims: only
                          when none of them is padded */
  TTPU_B_CAT,          /* cat along the padded dim of its first operand */
  TTPU_B_MATMUL,       /* mm, bmm, addmm, baddbmm: FILL_ZERO, and its dims
                          known (the factors after any bias argument) */
  TTPU_B_PAD,          /* constant_pad_nd: at the end of the padded dim */
  TTPU_B_NLL,          /* nll_loss: integer inputs (targets) padded with
                          its ignore_index (its last int argument), the
                          others with 0 */
  TTPU_B_FACTORY,      /* arange: its output grows with nothing else */
  TTPU_B_NORM_BACKWARD, /* native_layer_norm_backward: FILL_ZERO, and only
                           when none of its last len(argument 2) dims is
                           padded */
  TTPU_B_MEAN,         /* mean: FILL_ZERO, and the lowering divides by the
                          true count (ttpu_l_dyn_size) where it reduces a
                          padded dim; not over a flattened one */
  TTPU_B_FIRST,        /* isin: elementwise over its first operand; the
                          others enter whole (a set) and are never padded */
  TTPU_B_ACCUMULATE,   /* index_put with accumulate: indices (1-d) and
                          values padded alike, their padding -0.0 (0) at
                          index 0; self exact */
  TTPU_B_INDEX,        /* index.Tensor: FILL_ZERO (index padding reads
                          row 0), the result's dims known; an indexed dim
                          of self that holds a bucket wraps and checks
                          against the true size */
  TTPU_B_INDEX_COPY,   /* index_copy: index (1-d) and source padded alike
                          along dim, self exact; the lowering writes the
                          padding as copies of entry 0 */
};
/* The rule of op id `op`. Thread-safe. */
int ttpu_op_bucket_rule(int op);
/* The names ops/bucket.c lists (each standing for its in-place and out=
 * overloads too): up to cap into names; returns how many there are. */
int ttpu_op_bucket_rule_names(const char** names, int cap);

/* A bucketed call: the dims of the view of tensor arg (list element k)
 * that hold a bucket (a mask; 0 for a call that is not bucketed), and the
 * true size of those dims as a 0-d i64 value. */
int ttpu_l_dyn_dims(ttpu_lower* L, int arg, int k);
ttpu_val ttpu_l_dyn_size(ttpu_lower* L);
/* A bool value of type t's dims: true where the index along dim d is at
 * or past the true size (the padding of a bucketed dim). */
ttpu_val ttpu_l_dyn_past(ttpu_lower* L, ttpu_type t, int d);

/* The builder to emit into. */
ttpu_hlo* ttpu_l_hlo(ttpu_lower* L);
const ttpu_op_call* ttpu_l_call(ttpu_lower* L);
int ttpu_l_nargs(ttpu_lower* L);
ttpu_arg_kind ttpu_l_kind(ttpu_lower* L, int arg);
int ttpu_l_is_none(ttpu_lower* L, int arg);  /* NONE, or arg out of range */
/* The record's parameter (ttpu_op_def.param) of the op being lowered. */
int64_t ttpu_l_param(ttpu_lower* L);
/* A parameter of up to three small ints (each in [-32768, 32767]), and
 * its k-th part. */
#define TTPU_PARAMS(a, b, c)                              \
  ((int64_t)(uint16_t)(int16_t)(a) |                      \
   ((int64_t)(uint16_t)(int16_t)(b) << 16) |              \
   ((int64_t)(uint16_t)(int16_t)(c) << 32))
static inline int ttpu_l_param_at(ttpu_lower* L, int k) {
  return (int16_t)(uint16_t)((uint64_t)ttpu_l_param(L) >> (16 * k));
}

/* Tensor args: the logical value of the view. */
ttpu_val ttpu_l_tensor(ttpu_lower* L, int arg);
/* Tensor-list args: count and k-th element (VAL_ERROR for a None entry). */
int ttpu_l_count(ttpu_lower* L, int arg);
ttpu_val ttpu_l_tensor_at(ttpu_lower* L, int arg, int k);
/* The ttpu_tensor (geometry) behind a tensor arg / list element. */
const ttpu_tensor* ttpu_l_tensor_desc(ttpu_lower* L, int arg, int k);

/* Compile-time args. Defaults are returned when the arg is None/absent. */
int64_t ttpu_l_int(ttpu_lower* L, int arg, int64_t dflt);
double ttpu_l_float(ttpu_lower* L, int arg, double dflt);
int ttpu_l_bool(ttpu_lower* L, int arg, int dflt);
const char* ttpu_l_str(ttpu_lower* L, int arg, const char* dflt);
/* int[] arg; *n receives the count (0 for None). */
const int64_t* ttpu_l_ints(ttpu_lower* L, int arg, int* n);
const double* ttpu_l_floats(ttpu_lower* L, int arg, int* n);

/* Runtime Scalar arg (or Scalar-list element k) as a 0-d value of dtype dt.
 * Also accepts compile-time INT/FLOAT/BOOL args (emitted as constants). */
ttpu_val ttpu_l_scalar(ttpu_lower* L, int arg, ttpu_dtype dt);
ttpu_val ttpu_l_scalar_at(ttpu_lower* L, int arg, int k, ttpu_dtype dt);
/* PyTorch type of a Scalar arg (I64/F64/BOOL for Python numbers). */
ttpu_dtype ttpu_l_scalar_dtype(ttpu_lower* L, int arg);
/* 1 when Scalar argument arg is a compile-time value
 * (TTPU_OP_STATIC_SCALARS), with its real value in *value; else 0. */
int ttpu_l_scalar_static(ttpu_lower* L, int arg, double* value);

/* PyTorch's result_type over the call (TTPU_DTYPE_NONE if not given). */
ttpu_dtype ttpu_l_common_dtype(ttpu_lower* L);

/* Outputs. */
int ttpu_l_nout(ttpu_lower* L);
ttpu_type ttpu_l_out_type(ttpu_lower* L, int k);
void ttpu_l_set_out(ttpu_lower* L, int k, ttpu_val v);

/* A data-dependent error check (an out-of-range index, a mask count that
 * does not match): info is an i64[4] value {flag, a, b, c}. After the
 * program runs the engine reads it back (one small synchronous host read)
 * unless TORCHTPU_CHECK_INDICES=0, and when flag != 0 fails the call with
 * `code` and fmt formatted with a, b, c (as long long, in that order; fmt
 * may use fewer). The program text does not depend on the switch. One
 * check per program (a later call replaces it); fmt is copied. Outputs are
 * still written, so a lowering keeps them harmless when the check fires
 * (XLA drops out-of-range scatter updates and clamps gathers). fmt may
 * hold several messages separated by TTPU_CHECK_ALT: a flag of k (1, 2,
 * ...) fails with the k-th (the last when there are fewer). fmt must be
 * shorter than TTPU_L_CHECK_FMT_MAX bytes (a longer one is an error, never
 * cut inside a conversion). */
#define TTPU_CHECK_ALT "\x1e"
#define TTPU_L_CHECK_FMT_MAX 512
void ttpu_l_check(ttpu_lower* L, ttpu_val info, ttpu_code code,
                  const char* fmt);

/* Random ops (TTPU_OP_RANDOM): `bits` of type t (unsigned dtype), drawn
 * from and advancing the device's rng state. */
ttpu_val ttpu_l_random_bits(ttpu_lower* L, ttpu_type t);
/* Uniform floats in [0, 1) of type t (float dtype), from random bits. */
ttpu_val ttpu_l_random_uniform(ttpu_lower* L, ttpu_type t);

/* Convenience: the type of a value / a value's dtype. */
static inline ttpu_type ttpu_l_type(ttpu_lower* L, ttpu_val v) {
  const ttpu_type* t = ttpu_hlo_type(ttpu_l_hlo(L), v);
  if (t) return *t;
  ttpu_type e = {TTPU_DTYPE_NONE, 0, {0}};
  return e;
}

/* Shared lowering helpers (ops/common.c). */
/* Broadcasts a and b to their common shape and converts both to dt. */
void ttpu_l_broadcast_pair(ttpu_lower* L, ttpu_val* a, ttpu_val* b,
                           ttpu_dtype dt);
/* Normalises a possibly negative dim for rank ndim (rank 0 allows 0/-1);
 * sets an IndexError in the builder when out of range. */
int64_t ttpu_l_dim(ttpu_lower* L, int64_t dim, int ndim);
/* Reduces x over the dims d with mask[d] set (dropping them); mask has
 * one entry per dim of x. */
ttpu_val ttpu_l_reduce_mask(ttpu_lower* L, ttpu_val x, ttpu_redop op,
                            const int* mask);
/* r (a value of type t reduced over the masked dims) reshaped with those
 * dims kept as 1 and broadcast back to t's shape. */
ttpu_val ttpu_l_bcast_back(ttpu_lower* L, ttpu_val r, ttpu_type t,
                           const int* mask);
/* linspace(start, end, steps) as the CPU computes it: start + i * step
 * for the first half, end - (steps - 1 - i) * step for the rest, step =
 * (end - start) / (steps - 1) a true division (XLA would multiply by a
 * constant divisor's rounded reciprocal). start and end are 0-d values
 * of dtype ct, which the result has; steps == 1 gives start. */
ttpu_val ttpu_l_linspace(ttpu_hlo* b, ttpu_val start, ttpu_val end, int64_t steps, ttpu_dtype ct);
/* Gathers x's slices along dim at idx (1-d i64 of length n): x's shape
 * with dim -> n. x's dim must not be empty. */
ttpu_val ttpu_l_gather_dim(ttpu_hlo* b, ttpu_val x, int dim, ttpu_val idx);
/* Combines upd (x's shape with dim -> n) into x along dim at idx (1-d i64
 * of length n) with `combine` (TTPU_SCATTER_SET or a binop). */
ttpu_val ttpu_l_scatter_dim(ttpu_hlo* b, ttpu_val x, int dim, ttpu_val idx,
                            ttpu_val upd, int combine);
/* The precision contractions (dot_general, convolution) of operand dtype
 * dt ask for. float32 follows torch.set_float32_matmul_precision (the
 * call's matmul_precision): "highest" (the default) is HIGHEST, full
 * fp32 passes on a TPU, matching the CPU; "high" is HIGH (bf16_3x);
 * "medium" is DEFAULT (one bf16 pass). float64 is always HIGHEST;
 * bf16/f16 DEFAULT (they accumulate in f32 anyway). */
ttpu_precision ttpu_l_precision(ttpu_lower* L, ttpu_dtype dt);

/* Finishes builder b (its main's results set: its sticky error first) and
 * defines the printed module for the process as callee
 * (ttpu_extern_define); writes callee to name when name_cap > 0. Loop
 * bodies and scans are defined this way. Thread-safe as
 * ttpu_extern_define. */
ttpu_status* ttpu_extern_define_module(ttpu_hlo* b, const char* callee,
                                       char* name, size_t name_cap);

/* x reshaped to t's dims (t's dtype is x's). */
static inline ttpu_val ttpu_l_reshape_to(ttpu_hlo* b, ttpu_val x, ttpu_type t) {
  return ttpu_hlo_reshape(b, x, t.ndim, t.dims);
}
/* A constant of v's type (every element f; integer types take (int64)f). */
static inline ttpu_val ttpu_l_const_like(ttpu_lower* L, ttpu_val v, double f) {
  return ttpu_hlo_const(ttpu_l_hlo(L), ttpu_l_type(L, v), f, (int64_t)f);
}

#ifdef __cplusplus
}
#endif

#endif /* TTPU_LOWER_H_ */
