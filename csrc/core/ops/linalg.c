/* linalg.c - matrix products: mm, bmm, mv, dot and their add* forms.
 *
 * matmul, linear, outer, einsum and friends are CompositeImplicitAutograd:
 * they reach us as the ops below (plus views), forward and backward.
 *
 * Precision: float32 products ask for HIGHEST, so a TPU does full f32
 * passes and results match the CPU (the XLA CPU plugin is exact either
 * way). Mapping torch.set_float32_matmul_precision("high"/"medium") onto
 * HIGH/DEFAULT comes later, with the glue passing the setting down.
 * bf16/f16 products accumulate in f32 and round once, as the CPU does. */
#include "complex.h"
#include "elementwise.h"
#include "ttpu_lower.h"

/* The type products accumulate in. */
static ttpu_dtype acc_dtype(ttpu_dtype dt) {
  return dt == TTPU_BF16 || dt == TTPU_F16 ? TTPU_F32 : dt;
}

/* The dtype of tensor arg a (TTPU_DTYPE_NONE for a CPU scalar `self`). */
static ttpu_dtype arg_dtype(ttpu_lower* L, int a) {
  const ttpu_tensor* t = ttpu_l_tensor_desc(L, a, -1);
  return t ? t->dtype : TTPU_DTYPE_NONE;
}

/* Which CPU kernel's words a dtype mismatch of a product takes. */
typedef enum {
  MISMATCH_ANY,       /* "<op>: expected all operands to have the same dtype" */
  MISMATCH_MM,        /* mm: "expected m1 and m2 to have the same dtype" */
  MISMATCH_MV,        /* mv runs addmv into a result of the vector's dtype */
  MISMATCH_SELF_MAT2, /* addmm, addbmm: self against mat2, then mat1 against mat2 */
} mismatch_words;

/* Tensor args [0, n) must share one dtype, as the CPU kernels require
 * (PyTorch's meta functions check only some of them); where they do not,
 * the CPU kernel's message. */
static void same_dtypes(ttpu_lower* L, int n, mismatch_words words) {
  ttpu_dtype dt = TTPU_DTYPE_NONE, other = TTPU_DTYPE_NONE;
  for (int a = 0; a < n; ++a) {
    ttpu_dtype d = arg_dtype(L, a);
    if (d == TTPU_DTYPE_NONE) continue;
    if (dt == TTPU_DTYPE_NONE) dt = d;
    else if (d != dt && other == TTPU_DTYPE_NONE) other = d;
  }
  if (other == TTPU_DTYPE_NONE) return;
  ttpu_hlo* h = ttpu_l_hlo(L);
  switch (words) {
    case MISMATCH_MM:
      ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                    ttpu_dtype_cpp_name(arg_dtype(L, 0)), ttpu_dtype_cpp_name(arg_dtype(L, 1)));
      return;
    case MISMATCH_MV: {
      const char* v = ttpu_dtype_torch_title(arg_dtype(L, 1));
      ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT, "addmv input tensors must have the same dtype, but got %s, %s, and %s",
                    v, ttpu_dtype_torch_title(arg_dtype(L, 0)), v);
      return;
    }
    case MISMATCH_SELF_MAT2: {
      ttpu_dtype s = arg_dtype(L, 0), m1 = arg_dtype(L, 1), m2 = arg_dtype(L, 2);
      int self_first = s != TTPU_DTYPE_NONE && s != m2;
      ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT, "%s and mat2 must have the same dtype, but got %s and %s",
                    self_first ? "self" : "mat1", ttpu_dtype_torch_title(self_first ? s : m1),
                    ttpu_dtype_torch_title(m2));
      return;
    }
    case MISMATCH_ANY:
      break;
  }
  ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT, "%s: expected all operands to have the same dtype, but got %s and %s",
                ttpu_op_name(ttpu_l_call(L)->op), ttpu_dtype_name(dt), ttpu_dtype_name(other));
}

/* A tensor arg, or a Scalar one (a 0-d CPU tensor `self`) as a 0-d value. */
static ttpu_val operand(ttpu_lower* L, int arg, ttpu_dtype dt) {
  if (ttpu_l_kind(L, arg) == TTPU_ARG_TENSOR) return ttpu_l_tensor(L, arg);
  return ttpu_l_scalar(L, arg, dt);
}

/* The dtype products run in: output 0's, which is the operands' once
 * same_dtypes has checked them. Bool has no CPU kernel, nor one here. */
static ttpu_dtype product_dtype(ttpu_lower* L, int n_operands, const char* cpu_kernel, mismatch_words words) {
  same_dtypes(L, n_operands, words);
  ttpu_dtype dt = ttpu_l_out_type(L, 0).dtype;
  if (dt == TTPU_BOOL)
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED,
                  "\"%s\" not implemented for 'Bool'", cpu_kernel);
  return dt;
}

/* Which dims of the two operands a product pairs up. */
typedef struct {
  const int64_t *a_batch, *b_batch;
  int n_batch;
  const int64_t *a_con, *b_con;
  int n_con;
} contraction;

static const int64_t D0[] = {0}, D1[] = {1}, D2[] = {2}, D02[] = {0, 2},
                     D01[] = {0, 1};
/* [n, k] x [k, m] and [n, k] x [k]. */
static const contraction kMatmul = {NULL, NULL, 0, D1, D0, 1};
/* [b, n, k] x [b, k, m]. */
static const contraction kBatched = {D0, D0, 1, D2, D1, 1};
/* [k] x [k] -> 0-d. */
static const contraction kDot = {NULL, NULL, 0, D0, D0, 1};
/* [b, n, k] x [b, k, m] summed over the batch: one contraction over both
 * the batch and the inner dim. */
static const contraction kBatchSum = {NULL, NULL, 0, D02, D01, 2};

/* dot_general of a and b (converted to dt) accumulating in acc_dtype(dt);
 * a complex product at its parts' precision. */
static ttpu_val contract(ttpu_lower* L, ttpu_val a, ttpu_val b, ttpu_dtype dt,
                         const contraction* c) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  a = ttpu_hlo_convert(h, a, dt);
  b = ttpu_hlo_convert(h, b, dt);
  return ttpu_hlo_dot_general(h, a, b, c->a_batch, c->b_batch, c->n_batch,
                              c->a_con, c->b_con, c->n_con, acc_dtype(dt),
                              ttpu_l_precision(L, ttpu_dtype_real(dt)));
}

/* beta * self + alpha * product, in the product's (accumulation) type.
 * As in BLAS, a zero beta ignores self and a zero alpha ignores the
 * product, so NaN/inf there do not propagate. beta at arg 3, alpha at 4;
 * a complex beta or alpha of a real product must have no imaginary part,
 * as the CPU's conversion to cpu_type requires. */
static ttpu_val add_scaled(ttpu_lower* L, ttpu_val prod, ttpu_dtype cpu_type) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, prod);
  ttpu_dtype at = t.dtype;
  ttpu_val self = operand(L, 0, at);
  self = ttpu_hlo_broadcast_to(h, ttpu_hlo_convert(h, self, at), t.ndim,
                               t.dims);
  ttpu_val zero = ttpu_hlo_const(h, t, 0, 0);
  ttpu_val beta = ttpu_ew_scalar_to(L, 3, at, cpu_type), alpha = ttpu_ew_scalar_to(L, 4, at, cpu_type);
  ttpu_val zero0 = ttpu_hlo_const(h, ttpu_type_make(at, 0, NULL), 0, 0);
  ttpu_val beta_is0 = ttpu_hlo_compare(h, TTPU_EQ, beta, zero0);
  ttpu_val alpha_is0 = ttpu_hlo_compare(h, TTPU_EQ, alpha, zero0);
  beta = ttpu_hlo_broadcast_to(h, beta, t.ndim, t.dims);
  alpha = ttpu_hlo_broadcast_to(h, alpha, t.ndim, t.dims);
  beta_is0 = ttpu_hlo_broadcast_to(h, beta_is0, t.ndim, t.dims);
  alpha_is0 = ttpu_hlo_broadcast_to(h, alpha_is0, t.ndim, t.dims);
  ttpu_val s = ttpu_hlo_select(h, beta_is0, zero,
                               ttpu_hlo_binary(h, TTPU_MUL, beta, self));
  ttpu_val p = ttpu_hlo_select(h, alpha_is0, zero,
                               ttpu_hlo_binary(h, TTPU_MUL, alpha, prod));
  return ttpu_hlo_binary(h, TTPU_ADD, s, p);
}

/* The product of args 0 and 1 (mm, bmm, mv, dot). */
static ttpu_status* lower_product(ttpu_lower* L, const char* cpu_kernel, const contraction* c,
                                  mismatch_words words) {
  ttpu_dtype dt = product_dtype(L, 2, cpu_kernel, words);
  ttpu_l_set_out(L, 0, contract(L, ttpu_l_tensor(L, 0), ttpu_l_tensor(L, 1), dt, c));
  return NULL;
}

/* beta * self + alpha * (the product of args 1 and 2), the add* forms;
 * self broadcasts to the product's shape. */
static ttpu_status* lower_add_product(ttpu_lower* L, const char* cpu_kernel, const contraction* c,
                                      mismatch_words words) {
  ttpu_dtype dt = product_dtype(L, 3, cpu_kernel, words);
  ttpu_val p = contract(L, ttpu_l_tensor(L, 1), ttpu_l_tensor(L, 2), dt, c);
  /* addmv's CPU kernel converts beta and alpha to the tensors' type,
   * the others to the type they accumulate in */
  ttpu_l_set_out(L, 0, add_scaled(L, p, c == &kMatmul && ttpu_l_type(L, p).ndim == 1 ? dt : acc_dtype(dt)));
  return NULL;
}

/* mm(self, mat2) */
static ttpu_status* lower_mm(ttpu_lower* L) {
  return lower_product(L, "addmm_impl_cpu_", &kMatmul, MISMATCH_MM);
}

/* bmm(self, mat2) */
static ttpu_status* lower_bmm(ttpu_lower* L) {
  return lower_product(L, "bmm", &kBatched, MISMATCH_ANY);
}

/* mv(self, vec) */
static ttpu_status* lower_mv(ttpu_lower* L) {
  return lower_product(L, "addmv_impl_cpu", &kMatmul, MISMATCH_MV);
}

/* dot / vdot (the same for real dtypes) */
static ttpu_status* lower_dot(ttpu_lower* L) {
  return lower_product(L, "dot", &kDot, MISMATCH_ANY);
}

/* vdot(self, other) of complex vectors: sum(conj(self) * other), the
 * first operand conjugated as the CPU's (BLAS dotc). */
static ttpu_status* lower_vdot_complex(ttpu_lower* L) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_dtype dt = product_dtype(L, 2, "dot", MISMATCH_ANY);
  ttpu_val x = ttpu_hlo_convert(h, ttpu_l_tensor(L, 0), dt);
  x = ttpu_hlo_complex(h, ttpu_hlo_real(h, x), ttpu_hlo_unary(h, TTPU_NEG, ttpu_hlo_imag(h, x)));
  ttpu_l_set_out(L, 0, contract(L, x, ttpu_l_tensor(L, 1), dt, &kDot));
  return NULL;
}

/* addmm(self, mat1, mat2, beta, alpha) */
static ttpu_status* lower_addmm(ttpu_lower* L) {
  return lower_add_product(L, "addmm_impl_cpu_", &kMatmul, MISMATCH_SELF_MAT2);
}

/* addmv(self, mat, vec, beta, alpha) */
static ttpu_status* lower_addmv(ttpu_lower* L) {
  return lower_add_product(L, "addmv_impl_cpu", &kMatmul, MISMATCH_ANY);
}

/* baddbmm(self, batch1, batch2, beta, alpha) */
static ttpu_status* lower_baddbmm(ttpu_lower* L) {
  return lower_add_product(L, "baddbmm", &kBatched, MISMATCH_ANY);
}

/* addbmm(self, batch1, batch2, beta, alpha) */
static ttpu_status* lower_addbmm(ttpu_lower* L) {
  return lower_add_product(L, "addbmm", &kBatchSum, MISMATCH_SELF_MAT2);
}

/* _addmm_activation(self, mat1, mat2, beta, alpha, use_gelu): addmm,
 * rounded to the output dtype, then relu or (exact) gelu in place, as the
 * CPU kernel runs them. */
static ttpu_status* lower_addmm_activation(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = product_dtype(L, 3, "addmm_impl_cpu_", MISMATCH_ANY);
  int gelu = ttpu_l_bool(L, 5, 0);
  if (gelu && !ttpu_ew_accepts(L, dt, TTPU_EW_FLOAT, "GeluKernelImpl")) return NULL;
  if (!gelu && !ttpu_ew_accepts(L, dt, TTPU_EW_NUM, "clamp_min_scalar_cpu")) return NULL;
  ttpu_val p = contract(L, ttpu_l_tensor(L, 1), ttpu_l_tensor(L, 2), dt, &kMatmul);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_hlo_convert(b, add_scaled(L, p, acc_dtype(dt)), dt), ttpu_ew_opmath(dt));
  ttpu_l_set_out(L, 0, gelu ? ttpu_ew_gelu(b, x, 0) : ttpu_ew_max(b, x, ttpu_ew_k(b, x, 0)));
  return NULL;
}

/* The functional, in-place and out= overloads share argument positions
 * (self/operands first, beta and alpha at 3 and 4, out last), so one
 * lowering serves all three. The add* forms' lowering is the same for
 * complex operands (dot_general, multiply and add of complex values). */
const ttpu_op_def ttpu_ops_linalg[] = {
    {"mm", lower_mm, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_product},
    {"bmm", lower_bmm, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_product},
    {"mv", lower_mv, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_product},
    {"dot", lower_dot, .variants = TTPU_V_OUT, .complex_fn = ttpu_complex_product},
    {"vdot", lower_dot, .variants = TTPU_V_OUT, .complex_fn = lower_vdot_complex},
    {"addmm", lower_addmm, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"addmv", lower_addmv, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"baddbmm", lower_baddbmm, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"addbmm", lower_addbmm, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"_addmm_activation", lower_addmm_activation, .variants = TTPU_V_OUT},
    {0},
};
