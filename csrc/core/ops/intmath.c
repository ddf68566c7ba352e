/* intmath.c - integer number theory and bit hashing: gcd, lcm (with their
 * in-place and out= forms) and hash_tensor.
 *
 * gcd follows the CPU kernel's Euclid on the absolute values in the
 * result dtype itself (abs of the most negative value wraps to itself,
 * as it does on the CPU, so gcd(-128, 0) is -128 in int8). The loop runs
 * in a stablehlo.while until every element's remainder is zero: its trip
 * count is data-dependent (at most ~1.44 * bits steps), and a while keeps
 * the program small. lcm is |a / g * b| (0 when g is 0) computed, like the
 * C kernel's integer promotion, in int32 for the narrower types and
 * truncated back, which decides the result on overflow.
 *
 * hash_tensor (mode 0) xor-reduces each element's 64-bit pattern: floats
 * as float64 (built from the float's bits, subnormals included),
 * integers and bool sign-extended to int64, as the CPU does.
 * The builder has no xor reduction, so each bit of the result is the
 * parity of that bit's count over the reduced elements: the 64 bit planes
 * are summed in uint8 (a wrapping sum keeps the parity). */
#include "elementwise.h"

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

/* ------------------------------------------------------------ gcd / lcm */

/* any(a != 0) as a 0-d bool, for the loop test. */
static ttpu_val gcd_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  (void)ctx;
  ttpu_val nz = ttpu_ew_cmpk(b, TTPU_NE, st[0], 0);
  const ttpu_type* tp = ttpu_hlo_type(b, nz);
  if (!tp) return TTPU_VAL_ERROR;
  int nd = tp->ndim;
  if (nd == 0) return nz;
  int64_t all[TTPU_MAX_DIMS];
  for (int d = 0; d < nd; ++d) all[d] = d;
  return ttpu_hlo_reduce(b, nz, TTPU_RED_OR, all, nd);
}

/* One Euclid step where a != 0: (a, b) <- (b % a, a). Finished elements
 * keep their state (the divisor is made 1 there so nothing divides by 0). */
static void gcd_body(ttpu_hlo* b, void* ctx, const ttpu_val* st,
                     ttpu_val* next) {
  (void)ctx;
  ttpu_val a = st[0], bb = st[1];
  ttpu_val nz = ttpu_ew_cmpk(b, TTPU_NE, a, 0);
  ttpu_val safe = ttpu_hlo_select(b, nz, a, ttpu_ew_k(b, a, 1));
  next[0] = ttpu_hlo_select(b, nz, bin(b, TTPU_REM, bb, safe), a);
  next[1] = ttpu_hlo_select(b, nz, a, bb);
}

static ttpu_val gcd_values(ttpu_hlo* b, ttpu_val x, ttpu_val y, ttpu_dtype dt) {
  if (dt != TTPU_U8) {
    x = ttpu_hlo_unary(b, TTPU_ABS, x);
    y = ttpu_hlo_unary(b, TTPU_ABS, y);
  }
  ttpu_val init[2] = {x, y}, fin[2];
  ttpu_hlo_while(b, init, 2, gcd_cond, gcd_body, NULL, fin);
  return fin[1];
}

static ttpu_status* gcd_like(ttpu_lower* L) {
  int lcm = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype dt = ttpu_ew_common(L);
  if (dt != TTPU_U8 && dt != TTPU_I8 && dt != TTPU_I16 && dt != TTPU_I32 &&
      dt != TTPU_I64) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"%s\" not implemented for '%s'",
                  lcm ? "lcm_cpu" : "gcd_cpu", ttpu_dtype_torch_title(dt));
    return NULL;
  }
  ttpu_val x = ttpu_ew_in(L, 0, dt), y = ttpu_ew_in(L, 1, dt);
  ttpu_val g = gcd_values(b, x, y, dt);
  if (!lcm) {
    ttpu_l_set_out(L, 0, g);
    return NULL;
  }
  ttpu_dtype wide = ttpu_dtype_size(dt) < 4 ? TTPU_I32 : dt;
  ttpu_val xw = ttpu_hlo_convert(b, x, wide), yw = ttpu_hlo_convert(b, y, wide);
  ttpu_val gw = ttpu_hlo_convert(b, g, wide);
  ttpu_val zero = ttpu_hlo_compare(b, TTPU_EQ, gw, ttpu_ew_k(b, gw, 0));
  ttpu_val safe = ttpu_hlo_select(b, zero, ttpu_ew_k(b, gw, 1), gw);
  ttpu_val l = ttpu_hlo_unary(b, TTPU_ABS, bin(b, TTPU_MUL, bin(b, TTPU_DIV, xw, safe), yw));
  l = ttpu_hlo_select(b, zero, ttpu_ew_k(b, l, 0), l);
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, l, dt));
  return NULL;
}

/* ------------------------------------------------------------ hash_tensor */

static int hashable(ttpu_dtype dt) {
  switch (dt) {
    case TTPU_BOOL: case TTPU_U8: case TTPU_I8: case TTPU_I16: case TTPU_I32:
    case TTPU_I64: case TTPU_F16: case TTPU_BF16: case TTPU_F32: case TTPU_F64:
      return 1;
    default:
      return 0;
  }
}

/* The bit pattern (uint64) of x's float values converted to float64, from
 * x's own bits: a float conversion on the device may flush subnormals to
 * zero, which the CPU's conversion keeps. */
static ttpu_val float64_bits(ttpu_hlo* b, ttpu_val x, ttpu_type tx) {
  ttpu_type tu = tx;
  tu.dtype = TTPU_U64;
  if (tx.dtype == TTPU_F64) return ttpu_hlo_bitcast(b, x, tu);
  int man_bits = tx.dtype == TTPU_F32 ? 23 : tx.dtype == TTPU_BF16 ? 7 : 10;
  int exp_bits = tx.dtype == TTPU_F16 ? 5 : 8;
  int width = 1 + exp_bits + man_bits;
  int64_t bias = (1 << (exp_bits - 1)) - 1, emax = (1 << exp_bits) - 1;
  ttpu_type tn = tx;
  tn.dtype = width == 32 ? TTPU_U32 : TTPU_U16;
  ttpu_val raw = ttpu_hlo_convert(b, ttpu_hlo_bitcast(b, x, tn), TTPU_U64);
  ttpu_val sign = bin(b, TTPU_SHR_L, raw, ttpu_ew_k(b, raw, width - 1));
  ttpu_val e = bin(b, TTPU_AND, bin(b, TTPU_SHR_L, raw, ttpu_ew_k(b, raw, man_bits)),
                   ttpu_ew_k(b, raw, (double)emax));
  ttpu_val m = bin(b, TTPU_AND, raw, ttpu_ew_k(b, raw, (double)((1 << man_bits) - 1)));
  /* normal numbers and inf/NaN (a NaN comes out quiet, as a conversion
   * makes it) */
  ttpu_val e64 = bin(b, TTPU_ADD, e, ttpu_ew_k(b, e, (double)(1023 - bias)));
  ttpu_val m64 = bin(b, TTPU_SHL, m, ttpu_ew_k(b, m, 52 - man_bits));
  ttpu_val special = ttpu_ew_cmpk(b, TTPU_EQ, e, (double)emax);
  e64 = ttpu_hlo_select(b, special, ttpu_ew_k(b, e, 2047), e64);
  ttpu_val nan = ttpu_ew_and(b, special, ttpu_ew_cmpk(b, TTPU_NE, m, 0));
  m64 = ttpu_hlo_select(b, nan, bin(b, TTPU_OR, m64, ttpu_ew_k(b, m64, (double)(1ull << 51))), m64);
  /* subnormals become normal: p, the position of m's top bit, read off
   * the exponent of m converted (exactly) to float32 */
  ttpu_type t32 = tx;
  t32.dtype = TTPU_U32;
  ttpu_val mf = ttpu_hlo_bitcast(b, ttpu_hlo_convert(b, m, TTPU_F32), t32);
  ttpu_val p = bin(b, TTPU_SUB, ttpu_hlo_convert(b, bin(b, TTPU_SHR_L, mf, ttpu_ew_k(b, mf, 23)), TTPU_U64),
                   ttpu_ew_k(b, raw, 127));
  ttpu_val sub = ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_EQ, e, 0), ttpu_ew_cmpk(b, TTPU_NE, m, 0));
  ttpu_val sp = ttpu_hlo_select(b, sub, p, ttpu_ew_k(b, p, 0));
  ttpu_val se = bin(b, TTPU_ADD, sp, ttpu_ew_k(b, sp, (double)(1023 + 1 - bias - man_bits)));
  ttpu_val top = bin(b, TTPU_SHL, ttpu_ew_k(b, sp, 1), sp);
  ttpu_val sm = bin(b, TTPU_SHL, bin(b, TTPU_SUB, m, top), bin(b, TTPU_SUB, ttpu_ew_k(b, sp, 52), sp));
  ttpu_val zero = ttpu_ew_and(b, ttpu_ew_cmpk(b, TTPU_EQ, e, 0), ttpu_ew_cmpk(b, TTPU_EQ, m, 0));
  e64 = ttpu_hlo_select(b, sub, se, ttpu_hlo_select(b, zero, ttpu_ew_k(b, e, 0), e64));
  m64 = ttpu_hlo_select(b, sub, sm, m64);
  ttpu_val r = bin(b, TTPU_OR, bin(b, TTPU_SHL, sign, ttpu_ew_k(b, sign, 63)),
                   bin(b, TTPU_SHL, e64, ttpu_ew_k(b, e64, 52)));
  return bin(b, TTPU_OR, r, m64);
}

/* hash_tensor(self, int[1] dim=[], *, keepdim, mode) and its .out. */
static ttpu_status* lower_hash_tensor(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  ttpu_type out = ttpu_l_out_type(L, 0);
  int64_t mode = ttpu_l_int(L, 3, 0);
  if (mode != 0) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "Unknown hash_tensor mode: %lld",
                  (long long)mode);
    return NULL;
  }
  if (!hashable(tx.dtype)) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"xor_sum_cpu\" not implemented for '%s'",
                  ttpu_dtype_torch_title(tx.dtype));
    return NULL;
  }
  /* which dims reduce: an empty list means all (the meta kernel checked
   * ranges and repeats) */
  int mask[TTPU_MAX_DIMS] = {0}, n = 0;
  const int64_t* dims = ttpu_l_ints(L, 1, &n);
  for (int d = 0; d < tx.ndim; ++d) mask[d] = n == 0;
  for (int i = 0; i < n; ++i)
    if (tx.ndim) mask[ttpu_l_dim(L, dims[i], tx.ndim)] = 1;

  ttpu_type tu = tx;
  tu.dtype = TTPU_U64;
  ttpu_val u = ttpu_dtype_is_float(tx.dtype)
                   ? float64_bits(b, x, tx)
                   : ttpu_hlo_bitcast(b, ttpu_hlo_convert(b, x, TTPU_I64), tu);

  /* bit planes: (x..., 64) with plane k holding bit k */
  ttpu_type tp = tu;
  tp.dims[tp.ndim++] = 64;
  int64_t map[TTPU_MAX_DIMS];
  for (int d = 0; d < tx.ndim; ++d) map[d] = d;
  ttpu_val ub = ttpu_hlo_broadcast_in_dim(b, u, tp, map);
  ttpu_val shift = ttpu_hlo_iota(b, tp, tx.ndim);
  ttpu_val bits = bin(b, TTPU_AND, bin(b, TTPU_SHR_L, ub, shift), ttpu_ew_k(b, ub, 1));
  bits = ttpu_hlo_convert(b, bits, TTPU_U8);
  int pmask[TTPU_MAX_DIMS];
  for (int d = 0; d < tx.ndim; ++d) pmask[d] = mask[d];
  pmask[tx.ndim] = 0;
  ttpu_val cnt = ttpu_l_reduce_mask(L, bits, TTPU_RED_SUM, pmask);
  ttpu_val par = ttpu_hlo_convert(b, bin(b, TTPU_AND, cnt, ttpu_ew_k(b, cnt, 1)), TTPU_U64);
  ttpu_type tr = ttpu_l_type(L, par);
  ttpu_val sh = ttpu_hlo_iota(b, tr, tr.ndim - 1);
  int64_t last = tr.ndim - 1;
  /* distinct bits: their sum is their or */
  ttpu_val h = ttpu_hlo_reduce(b, bin(b, TTPU_SHL, par, sh), TTPU_RED_SUM, &last, 1);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, h, out));
  return NULL;
}

const ttpu_op_def ttpu_ops_intmath[] = {
    {"gcd", gcd_like, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_INT, .kernel = "gcd_cpu"},
    {"lcm", gcd_like, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OUT, .kinds = TTPU_K_INT, .kernel = "lcm_cpu"},
    {"hash_tensor", lower_hash_tensor, .variants = TTPU_V_OUT},
    {0},
};
