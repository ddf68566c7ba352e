/* hlo_const.c - constants (exact float bit patterns) and iota. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

/* Rounds a double to a binary float format with `ebits` exponent and
 * `mbits` stored mantissa bits, to nearest-even, straight from the double's
 * bits. Going through float first would round twice and can be off by one
 * ulp for bf16/f16. */
static uint64_t round_to_format(double v, int ebits, int mbits) {
  uint64_t d;
  memcpy(&d, &v, sizeof d);
  uint64_t sign = d >> 63;
  int dexp = (int)((d >> 52) & 0x7FF);
  uint64_t dman = d & ((UINT64_C(1) << 52) - 1);
  uint64_t emax_field = (UINT64_C(1) << ebits) - 1;
  uint64_t signbit = sign << (ebits + mbits);
  if (dexp == 0x7FF) {
    if (dman) /* canonical quiet NaN, sign kept */
      return signbit | (emax_field << mbits) | (UINT64_C(1) << (mbits - 1));
    return signbit | (emax_field << mbits);
  }
  if (dexp == 0 && dman == 0) return signbit;
  /* |v| = M * 2^q exactly */
  uint64_t M;
  int q;
  if (dexp == 0) {
    M = dman;
    q = -1074;
  } else {
    M = dman | (UINT64_C(1) << 52);
    q = dexp - 1075;
  }
  int top = 63 - __builtin_clzll(M); /* |v| in [2^(q+top), 2^(q+top+1)) */
  int e = q + top;                   /* unbiased exponent */
  int bias = (1 << (ebits - 1)) - 1;
  int emin = 1 - bias;
  /* quantum of the target at this magnitude */
  int qt = (e < emin ? emin : e) - mbits;
  int shift = qt - q;
  uint64_t N;
  if (shift <= 0) {
    N = M << (-shift); /* cannot happen for formats narrower than double */
  } else if (shift >= 64) {
    N = 0;
  } else {
    N = M >> shift;
    uint64_t rem = M & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (N & 1))) N++;
  }
  if (N >> (mbits + 1)) { /* rounding carried into a new binade */
    N >>= 1;
    qt++;
  }
  if (N < (UINT64_C(1) << mbits)) /* subnormal (or zero) */
    return signbit | N;
  int64_t efield = (int64_t)qt + mbits + bias;
  if (efield >= (int64_t)emax_field) return signbit | (emax_field << mbits);
  return signbit | ((uint64_t)efield << mbits) |
         (N & ((UINT64_C(1) << mbits) - 1));
}

static void put_scalar(ttpu_hloi_buf* s, ttpu_dtype dt, double vf,
                       int64_t vi);

/* A complex literal: "(re, im)" of the component type. */
static void put_complex(ttpu_hloi_buf* s, ttpu_dtype dt, double re,
                        double im) {
  ttpu_dtype c = dt == TTPU_C64 ? TTPU_F32 : TTPU_F64;
  ttpu_hloi_buf_put(s, "(");
  put_scalar(s, c, re, 0);
  ttpu_hloi_buf_put(s, ", ");
  put_scalar(s, c, im, 0);
  ttpu_hloi_buf_put(s, ")");
}

/* Writes the literal of one element of dt into s. */
static void put_scalar(ttpu_hloi_buf* s, ttpu_dtype dt, double vf,
                       int64_t vi) {
  switch (dt) {
    case TTPU_C64:
    case TTPU_C128:
      /* a complex constant from a real value: imaginary part 0 */
      put_complex(s, dt, vf, 0.0);
      return;
    case TTPU_BOOL:
      ttpu_hloi_buf_put(s, vi ? "true" : "false");
      return;
    case TTPU_F64: {
      uint64_t bits;
      memcpy(&bits, &vf, sizeof bits);
      if (isnan(vf)) /* canonical quiet NaN keeps text independent of payload */
        bits = (bits & (UINT64_C(1) << 63)) | UINT64_C(0x7FF8000000000000);
      ttpu_hloi_buf_printf(s, "0x%016llX", (unsigned long long)bits);
      return;
    }
    case TTPU_F32:
      ttpu_hloi_buf_printf(s, "0x%08llX",
                           (unsigned long long)round_to_format(vf, 8, 23));
      return;
    case TTPU_F16:
      ttpu_hloi_buf_printf(s, "0x%04llX",
                           (unsigned long long)round_to_format(vf, 5, 10));
      return;
    case TTPU_BF16:
      ttpu_hloi_buf_printf(s, "0x%04llX",
                           (unsigned long long)round_to_format(vf, 8, 7));
      return;
    /* Out-of-range integers wrap as a C cast would, so that e.g. -1 as a
     * uint32 mask is the all-ones pattern, never unparsable text. */
    case TTPU_U8:
      ttpu_hloi_buf_printf(s, "%u", (unsigned)(uint8_t)vi);
      return;
    case TTPU_U16:
      ttpu_hloi_buf_printf(s, "%u", (unsigned)(uint16_t)vi);
      return;
    case TTPU_U32:
      ttpu_hloi_buf_printf(s, "%lu", (unsigned long)(uint32_t)vi);
      return;
    case TTPU_U64:
      ttpu_hloi_buf_printf(s, "%llu", (unsigned long long)(uint64_t)vi);
      return;
    case TTPU_I8:
      ttpu_hloi_buf_printf(s, "%d", (int)(int8_t)vi);
      return;
    case TTPU_I16:
      ttpu_hloi_buf_printf(s, "%d", (int)(int16_t)vi);
      return;
    case TTPU_I32:
      ttpu_hloi_buf_printf(s, "%ld", (long)(int32_t)vi);
      return;
    case TTPU_I64:
    default:
      ttpu_hloi_buf_printf(s, "%lld", (long long)vi);
      return;
  }
}

static ttpu_val emit_dense(ttpu_hlo* b, ttpu_type t, ttpu_hloi_buf* lit) {
  ttpu_hloi_buf a = {0};
  ttpu_hloi_buf_put(&a, "value = dense<");
  if (lit->p) ttpu_hloi_buf_put(&a, lit->p);
  ttpu_hloi_buf_put(&a, "> : ");
  ttpu_hloi_put_type(&a, &t);
  if (lit->oom) a.oom = 1;
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val v = attrs ? ttpu_hloi_op(b, "stablehlo.constant", NULL, 0, attrs, t)
                     : ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "const: oom");
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_const(ttpu_hlo* b, ttpu_type t, double v_float,
                        int64_t v_int) {
  if (!ttpu_hloi_type_ok(b, &t, "const")) return TTPU_VAL_ERROR;
  /* An integer constant asked for with only a float value (or the
   * reverse) is common in lowerings; take whichever fits the dtype. */
  ttpu_hloi_buf lit = {0};
  put_scalar(&lit, t.dtype, v_float, v_int);
  /* A splat `dense<x> : tensor<AxBxT>` is one token whatever the size,
   * so large fills stay small in text and in the compile-cache key. */
  ttpu_val v = emit_dense(b, t, &lit);
  ttpu_hloi_buf_free(&lit);
  return v;
}

ttpu_val ttpu_hlo_const_c(ttpu_hlo* b, ttpu_type t, double re, double im) {
  if (!ttpu_hloi_type_ok(b, &t, "const")) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_is_complex(t.dtype))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "const_c: %s is not complex",
                         ttpu_dtype_name(t.dtype));
  ttpu_hloi_buf lit = {0};
  put_complex(&lit, t.dtype, re, im);
  ttpu_val v = emit_dense(b, t, &lit);
  ttpu_hloi_buf_free(&lit);
  return v;
}

ttpu_val ttpu_hlo_const_f(ttpu_hlo* b, ttpu_dtype dt, double v) {
  int64_t vi = 0;
  if (!ttpu_hloi_is_floatlike(dt) && !ttpu_hloi_is_complex(dt)) {
    /* Integral dtype: truncate like a C cast, saturating instead of UB. */
    if (isnan(v)) vi = 0;
    else if (v >= 9223372036854775807.0) vi = INT64_MAX;
    else if (v <= -9223372036854775808.0) vi = INT64_MIN;
    else vi = (int64_t)v;
    if (dt == TTPU_BOOL) vi = v != 0.0;
    if (ttpu_hloi_is_unsigned(dt) && v >= 9223372036854775808.0)
      vi = v >= 18446744073709551616.0 ? (int64_t)UINT64_MAX
                                       : (int64_t)(uint64_t)v;
  }
  return ttpu_hlo_const(b, ttpu_hloi_scalar_type(dt), v, vi);
}

ttpu_val ttpu_hlo_const_i(ttpu_hlo* b, ttpu_dtype dt, int64_t v) {
  return ttpu_hlo_const(b, ttpu_hloi_scalar_type(dt), (double)v, v);
}

ttpu_val ttpu_hlo_const_i64s(ttpu_hlo* b, const int64_t* v, int n) {
  if (ttpu_hloi_failed(b)) return TTPU_VAL_ERROR;
  if (n < 0) return ttpu_hlo_fail(b, TTPU_INTERNAL, "const_i64s: n < 0");
  int64_t d = n;
  ttpu_type t = ttpu_type_make(TTPU_I64, 1, &d);
  ttpu_hloi_buf lit = {0};
  /* MLIR parses `dense<[]>` for an empty tensor; `dense<>` is rejected
   * by some versions. */
  ttpu_hloi_put_list(&lit, v, n);
  ttpu_val r = emit_dense(b, t, &lit);
  ttpu_hloi_buf_free(&lit);
  return r;
}

ttpu_val ttpu_hlo_iota(ttpu_hlo* b, ttpu_type t, int dim) {
  if (!ttpu_hloi_type_ok(b, &t, "iota")) return TTPU_VAL_ERROR;
  if (t.dtype == TTPU_BOOL || ttpu_hloi_is_complex(t.dtype))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "iota: %s dtype",
                         ttpu_dtype_name(t.dtype));
  if (t.ndim == 0) /* stablehlo.iota needs rank >= 1; index 0 is 0 */
    return ttpu_hlo_const(b, t, 0.0, 0);
  if (dim < 0 || dim >= t.ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "iota: dimension %d out of range for rank %d", dim,
                         t.ndim);
  ttpu_hloi_buf a = {0};
  ttpu_hloi_buf_printf(&a, "iota_dimension = %d : i64", dim);
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val v = ttpu_hloi_op(b, "stablehlo.iota", NULL, 0, attrs, t);
  free(attrs);
  return v;
}
