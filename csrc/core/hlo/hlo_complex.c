/* hlo_complex.c - complex values: real/imag parts, complex from parts, FFT. */
#include <stdio.h>
#include <stdlib.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

static ttpu_val part(ttpu_hlo* b, ttpu_val x, int imag) {
  const char* name = imag ? "stablehlo.imag" : "stablehlo.real";
  const ttpu_type* tx = ttpu_hloi_check(b, x, name);
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type r = *tx;
  if (!ttpu_hloi_is_complex(r.dtype)) {
    if (!imag) return x;
    return ttpu_hlo_const(b, r, 0.0, 0);
  }
  r.dtype = r.dtype == TTPU_C64 ? TTPU_F32 : TTPU_F64;
  return ttpu_hloi_op(b, name, &x, 1, NULL, r);
}

ttpu_val ttpu_hlo_real(ttpu_hlo* b, ttpu_val x) { return part(b, x, 0); }
ttpu_val ttpu_hlo_imag(ttpu_hlo* b, ttpu_val x) { return part(b, x, 1); }

ttpu_val ttpu_hlo_complex(ttpu_hlo* b, ttpu_val re, ttpu_val im) {
  const ttpu_type* tr = ttpu_hloi_check(b, re, "stablehlo.complex");
  const ttpu_type* ti = ttpu_hloi_check(b, im, "stablehlo.complex");
  if (!tr || !ti) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_same_type(tr, ti) ||
      (tr->dtype != TTPU_F32 && tr->dtype != TTPU_F64)) {
    char a[160], c[160];
    ttpu_hloi_type_desc(tr, a, sizeof a);
    ttpu_hloi_type_desc(ti, c, sizeof c);
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "stablehlo.complex: parts must be one f32/f64 type "
                         "(%s, %s)", a, c);
  }
  ttpu_type r = *tr;
  r.dtype = r.dtype == TTPU_F32 ? TTPU_C64 : TTPU_C128;
  ttpu_val ops[2] = {re, im};
  return ttpu_hloi_op(b, "stablehlo.complex", ops, 2, NULL, r);
}

ttpu_val ttpu_hlo_fft(ttpu_hlo* b, ttpu_val x, ttpu_fft_type type,
                      const int64_t* len, int n) {
  const char* what = "stablehlo.fft";
  const ttpu_type* tx = ttpu_hloi_check(b, x, what);
  if (!tx) return TTPU_VAL_ERROR;
  ttpu_type t = *tx;
  if (n < 1 || n > 3 || n > t.ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: %d transformed dims for rank %d", what, n,
                         t.ndim);
  for (int i = 0; i < n; i++)
    if (len[i] < 0)
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: negative length",
                           what);
  int inner = t.ndim - n;
  ttpu_type r = t;
  const char* kind = "FFT";
  int ok = 1;
  switch (type) {
    case TTPU_FFT_FFT:
    case TTPU_FFT_IFFT:
      kind = type == TTPU_FFT_FFT ? "FFT" : "IFFT";
      ok = ttpu_hloi_is_complex(t.dtype);
      for (int i = 0; ok && i < n; i++) ok = t.dims[inner + i] == len[i];
      break;
    case TTPU_FFT_RFFT:
      kind = "RFFT";
      ok = t.dtype == TTPU_F32 || t.dtype == TTPU_F64;
      for (int i = 0; ok && i < n; i++) ok = t.dims[inner + i] == len[i];
      r.dtype = t.dtype == TTPU_F32 ? TTPU_C64 : TTPU_C128;
      r.dims[t.ndim - 1] = len[n - 1] / 2 + 1;
      break;
    case TTPU_FFT_IRFFT:
      kind = "IRFFT";
      ok = ttpu_hloi_is_complex(t.dtype);
      for (int i = 0; ok && i + 1 < n; i++) ok = t.dims[inner + i] == len[i];
      ok = ok && t.dims[t.ndim - 1] == len[n - 1] / 2 + 1;
      r.dtype = t.dtype == TTPU_C64 ? TTPU_F32 : TTPU_F64;
      r.dims[t.ndim - 1] = len[n - 1];
      break;
    default:
      ok = 0;
  }
  if (!ok) {
    char a[160];
    ttpu_hloi_type_desc(&t, a, sizeof a);
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: %s does not fit the transform's lengths", what,
                         a);
  }
  ttpu_hloi_buf s = {0};
  ttpu_hloi_buf_printf(&s, "fft_type = #stablehlo<fft_type %s>, fft_length = ",
                       kind);
  ttpu_hloi_put_array(&s, len, n);
  char* attrs = ttpu_hloi_buf_take(&s);
  if (!attrs) return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "fft: oom");
  ttpu_val v = ttpu_hloi_op(b, what, &x, 1, attrs, r);
  free(attrs);
  return v;
}
