/* elementwise.c - arithmetic with PyTorch's type promotion. */
#include "ttpu_lower.h"

/* The dtype the arithmetic runs in: PyTorch's result type. */
static ttpu_dtype compute_dtype(ttpu_lower* L) {
  ttpu_dtype dt = ttpu_l_common_dtype(L);
  return dt == TTPU_DTYPE_NONE ? ttpu_l_out_type(L, 0).dtype : dt;
}

/* The second operand: a tensor or a runtime Scalar. */
static ttpu_val operand(ttpu_lower* L, int arg, ttpu_dtype dt) {
  if (ttpu_l_kind(L, arg) == TTPU_ARG_TENSOR) return ttpu_l_tensor(L, arg);
  return ttpu_l_scalar(L, arg, dt);
}

/* self (op) alpha * other, for add/sub with an optional alpha at arg 2. */
static ttpu_status* lower_add_like(ttpu_lower* L, ttpu_binop op) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = compute_dtype(L);
  ttpu_val x = ttpu_l_tensor(L, 0), y = operand(L, 1, dt);
  ttpu_l_broadcast_pair(L, &x, &y, dt);
  if (!ttpu_l_is_none(L, 2)) {
    ttpu_val a = ttpu_l_scalar(L, 2, dt);
    ttpu_type t = ttpu_l_type(L, y);
    a = ttpu_hlo_broadcast_to(b, a, t.ndim, t.dims);
    y = ttpu_hlo_binary(b, dt == TTPU_BOOL ? TTPU_AND : TTPU_MUL, y, a);
  }
  if (dt == TTPU_BOOL) op = op == TTPU_ADD ? TTPU_OR : TTPU_XOR;
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, op, x, y));
  return NULL;
}

static ttpu_status* lower_add(ttpu_lower* L) { return lower_add_like(L, TTPU_ADD); }
static ttpu_status* lower_sub(ttpu_lower* L) { return lower_add_like(L, TTPU_SUB); }

static ttpu_status* lower_mul(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = compute_dtype(L);
  ttpu_val x = ttpu_l_tensor(L, 0), y = operand(L, 1, dt);
  ttpu_l_broadcast_pair(L, &x, &y, dt);
  ttpu_l_set_out(L, 0,
                 ttpu_hlo_binary(b, dt == TTPU_BOOL ? TTPU_AND : TTPU_MUL, x, y));
  return NULL;
}

/* div: true division in the output's float type unless a rounding mode
 * ("trunc"/"floor", arg 2) asks for integer semantics. */
static ttpu_status* lower_div(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const char* mode = ttpu_l_str(L, 2, NULL);
  ttpu_dtype dt = compute_dtype(L);
  if (!mode && !ttpu_dtype_is_float(dt)) dt = ttpu_l_out_type(L, 0).dtype;
  if (!mode && !ttpu_dtype_is_float(dt)) dt = TTPU_F32;
  ttpu_val x = ttpu_l_tensor(L, 0), y = operand(L, 1, dt);
  ttpu_l_broadcast_pair(L, &x, &y, dt);
  ttpu_val q = ttpu_hlo_binary(b, TTPU_DIV, x, y);
  if (mode && ttpu_dtype_is_float(dt)) {
    if (mode[0] == 't') {
      /* trunc toward zero */
      ttpu_type t = ttpu_l_type(L, q);
      ttpu_val neg = ttpu_hlo_compare(b, TTPU_LT, q, ttpu_hlo_const(b, t, 0, 0));
      q = ttpu_hlo_select(b, neg, ttpu_hlo_unary(b, TTPU_CEIL, q),
                          ttpu_hlo_unary(b, TTPU_FLOOR, q));
    } else {
      q = ttpu_hlo_unary(b, TTPU_FLOOR, q);
    }
  } else if (mode && mode[0] == 'f') {
    /* integer floor division: adjust truncation when signs differ */
    ttpu_type t = ttpu_l_type(L, q);
    ttpu_val zero = ttpu_hlo_const(b, t, 0, 0);
    ttpu_val r = ttpu_hlo_binary(b, TTPU_REM, x, y);
    ttpu_val rnz = ttpu_hlo_compare(b, TTPU_NE, r, zero);
    ttpu_val sx = ttpu_hlo_compare(b, TTPU_LT, r, zero);
    ttpu_val sy = ttpu_hlo_compare(b, TTPU_LT, y, zero);
    ttpu_val fix = ttpu_hlo_binary(b, TTPU_AND, rnz,
                                   ttpu_hlo_compare(b, TTPU_NE, sx, sy));
    q = ttpu_hlo_select(b, fix,
                        ttpu_hlo_binary(b, TTPU_SUB, q, ttpu_hlo_const(b, t, 0, 1)),
                        q);
  }
  ttpu_l_set_out(L, 0, q);
  return NULL;
}

const ttpu_op_def ttpu_ops_elementwise[] = {
    {"add.Tensor", lower_add, 0},
    {"add_.Tensor", lower_add, 0},
    {"add.Scalar", lower_add, 0},
    {"add_.Scalar", lower_add, 0},
    {"sub.Tensor", lower_sub, 0},
    {"sub_.Tensor", lower_sub, 0},
    {"sub.Scalar", lower_sub, 0},
    {"sub_.Scalar", lower_sub, 0},
    {"mul.Tensor", lower_mul, 0},
    {"mul_.Tensor", lower_mul, 0},
    {"mul.Scalar", lower_mul, 0},
    {"mul_.Scalar", lower_mul, 0},
    {"div.Tensor", lower_div, 0},
    {"div_.Tensor", lower_div, 0},
    {"div.Scalar", lower_div, 0},
    {"div_.Scalar", lower_div, 0},
    {"div.Tensor_mode", lower_div, 0},
    {"div_.Tensor_mode", lower_div, 0},
    {NULL, NULL, 0},
};
