/* test_hlo_complex.c - the builder's complex values: type spelling,
 * constants, real/imag/complex, conversions, FFT, the checks that reject
 * what StableHLO does not define for complex, and the plugin compiling
 * it (and refusing a bitcast to complex, the reason complex storages are
 * kept as their real components). */
#include <stdlib.h>
#include <string.h>

#include "hlo/ttpu_hlo.h"
#include "ttpu_test.h"

static int compiles(ttpu_test_ctx* t, const char* text) {
  ttpu_pjrt_plugin* p = ttpu_test_plugin(t);
  if (!p) return -1;
  ttpu_pjrt_client* c = NULL;
  if (ttpu_pjrt_client_create(p, 1, &c)) return -1;
  ttpu_pjrt_exec* e = NULL;
  ttpu_status* s = ttpu_pjrt_compile(c, text, strlen(text), NULL, 0, &e);
  int ok = !s && e;
  if (s) ttpu_status_free(s);
  if (e) ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  return ok;
}

static ttpu_hlo* build(void) {
  ttpu_hlo* b = ttpu_hlo_create();
  int64_t d[2] = {3, 8};
  ttpu_type rt = ttpu_type_make(TTPU_F32, 2, d);
  ttpu_val x = ttpu_hlo_param(b, rt, -1);
  ttpu_val c = ttpu_hlo_convert(b, x, TTPU_C64);              /* imag 0 */
  ttpu_val k = ttpu_hlo_const_c(b, ttpu_type_make(TTPU_C64, 2, d), 0.5, -2);
  c = ttpu_hlo_binary(b, TTPU_MUL, c, k);
  int64_t len = 8;
  ttpu_val f = ttpu_hlo_fft(b, c, TTPU_FFT_FFT, &len, 1);
  ttpu_val r = ttpu_hlo_fft(b, x, TTPU_FFT_RFFT, &len, 1);    /* 3x5 */
  ttpu_val back = ttpu_hlo_fft(b, r, TTPU_FFT_IRFFT, &len, 1); /* 3x8 f32 */
  ttpu_val mag = ttpu_hlo_unary(b, TTPU_ABS, f);               /* f32 */
  ttpu_val eq = ttpu_hlo_compare(b, TTPU_EQ, f, f);
  ttpu_val parts = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_real(b, f),
                                   ttpu_hlo_imag(b, f));
  ttpu_val c2 = ttpu_hlo_convert(b, f, TTPU_C128);
  int64_t dim = 1;
  ttpu_val sum = ttpu_hlo_reduce(b, c2, TTPU_RED_SUM, &dim, 1);
  ttpu_val nz = ttpu_hlo_convert(b, f, TTPU_BOOL);
  ttpu_val outs[7] = {back, mag, eq, parts, sum, nz,
                      ttpu_hlo_convert(b, f, TTPU_I32)};
  ttpu_hlo_return(b, outs, 7);
  return b;
}

static void test_program(ttpu_test_ctx* t) {
  ttpu_hlo* b = build();
  char* text = NULL;
  size_t n = 0;
  TTPU_CHECK_OK(t, ttpu_hlo_print(b, &text, &n));
  ttpu_hlo_free(b);
  TTPU_CHECK(t, strstr(text, "tensor<3x8xcomplex<f32>>") != NULL);
  TTPU_CHECK(t, strstr(text, "dense<(0x3F000000, 0xC0000000)>") != NULL);
  TTPU_CHECK(t, strstr(text, "#stablehlo<fft_type IRFFT>") != NULL);
  TTPU_CHECK(t, strstr(text, "tensor<3x5xcomplex<f32>>") != NULL);
  TTPU_CHECK(t, strstr(text, "stablehlo.imag") != NULL);
  TTPU_CHECK(t, compiles(t, text) == 1);
  free(text);
}

static int fails(ttpu_hlo* b) {
  int bad = ttpu_hlo_status(b) != NULL;
  ttpu_hlo_free(b);
  return bad;
}

static void test_rejects(ttpu_test_ctx* t) {
  int64_t d = 4, d2[2] = {4, 2};
  ttpu_type ct = ttpu_type_make(TTPU_C64, 1, &d);
  ttpu_hlo* b = ttpu_hlo_create();
  ttpu_val x = ttpu_hlo_param(b, ct, -1);
  ttpu_hlo_compare(b, TTPU_LT, x, x); /* unordered */
  TTPU_CHECK(t, fails(b));
  b = ttpu_hlo_create();
  x = ttpu_hlo_param(b, ttpu_type_make(TTPU_F32, 2, d2), -1);
  ttpu_hlo_bitcast(b, x, ct);
  TTPU_CHECK(t, fails(b));
  b = ttpu_hlo_create();
  x = ttpu_hlo_param(b, ct, -1);
  ttpu_hlo_reduce(b, x, TTPU_RED_MAX, (int64_t[]){0}, 1);
  TTPU_CHECK(t, fails(b));
  b = ttpu_hlo_create();
  x = ttpu_hlo_param(b, ct, -1);
  int64_t len = 6; /* does not fit the operand */
  ttpu_hlo_fft(b, x, TTPU_FFT_FFT, &len, 1);
  TTPU_CHECK(t, fails(b));
}

/* The plugin itself: no bitcast_convert to a complex element type. */
static void test_plugin_refuses_complex_bitcast(ttpu_test_ctx* t) {
  static const char kText[] =
      "func.func @main(%arg0: tensor<4x2xf32>) -> tensor<4xcomplex<f32>> {\n"
      "  %0 = \"stablehlo.bitcast_convert\"(%arg0) : (tensor<4x2xf32>) -> "
      "tensor<4xcomplex<f32>>\n"
      "  \"func.return\"(%0) : (tensor<4xcomplex<f32>>) -> ()\n"
      "}\n";
  static const char kControl[] =
      "func.func @main(%arg0: tensor<4x2xf32>) -> tensor<4x2xi32> {\n"
      "  %0 = \"stablehlo.bitcast_convert\"(%arg0) : (tensor<4x2xf32>) -> "
      "tensor<4x2xi32>\n"
      "  \"func.return\"(%0) : (tensor<4x2xi32>) -> ()\n"
      "}\n";
  TTPU_CHECK(t, compiles(t, kControl) == 1); /* the text itself is fine */
  TTPU_CHECK(t, compiles(t, kText) == 0);
}

static const ttpu_test kTests[] = {
    {"program", test_program},
    {"rejects", test_rejects},
    {"plugin_refuses_complex_bitcast", test_plugin_refuses_complex_bitcast},
    {NULL, NULL},
};
TTPU_TEST_SUITE(hlo_complex, kTests)
