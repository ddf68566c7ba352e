/* test_extern.c - calls of functions defined outside the engine: the
 * builder prints a callee's text once however often it is called, shares
 * equal calls and drops unused ones, and refuses bad names and a second
 * text for a name; ttpu_extern_define with the op torchtpu::extern_call
 * runs a handwritten StableHLO function, strict and fused. */
#include <stdlib.h>
#include <string.h>

#include "hlo/ttpu_hlo.h"
#include "ttpu_test.h"

#define TY(dt, nd, ...) ttpu_type_make(dt, nd, (int64_t[]){__VA_ARGS__})

/* x * y + x for f32[4], as a front end would hand it over. */
static const char kAxpy[] =
    "  func.func private @ttpu_test_fma(%a: tensor<4xf32>, %b: tensor<4xf32>)"
    " -> tensor<4xf32> {\n"
    "    %0 = func.call @ttpu_test_fma_mul(%a, %b) : (tensor<4xf32>, tensor<4xf32>)"
    " -> tensor<4xf32>\n"
    "    %1 = stablehlo.add %0, %a : tensor<4xf32>\n"
    "    return %1 : tensor<4xf32>\n"
    "  }\n"
    "  func.func private @ttpu_test_fma_mul(%a: tensor<4xf32>, %b: tensor<4xf32>)"
    " -> tensor<4xf32> {\n"
    "    %0 = stablehlo.multiply %a, %b : tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n";

static int count(const char* text, const char* what) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static void test_builder_prints_a_callee_once(ttpu_test_ctx* t) {
  ttpu_hlo* b = ttpu_hlo_create();
  TTPU_CHECK(t, b);
  ttpu_hlo_set_optimize(b, 1);
  ttpu_type ty = TY(TTPU_F32, 1, 4);
  ttpu_val x = ttpu_hlo_param(b, ty, -1);
  ttpu_val y = ttpu_hlo_param(b, ty, -1);
  ttpu_val in1[2] = {x, y}, in2[2] = {y, x}, r1, r2, r3, unused;
  ttpu_hlo_call(b, "ttpu_test_fma", kAxpy, in1, 2, &ty, 1, &r1);
  ttpu_hlo_call(b, "ttpu_test_fma", kAxpy, in2, 2, &ty, 1, &r2);
  ttpu_hlo_call(b, "ttpu_test_fma", kAxpy, in1, 2, &ty, 1, &r3);
  ttpu_hlo_call(b, "ttpu_test_fma", kAxpy, in2, 2, &ty, 1, &unused);
  TTPU_CHECK(t, r1 == r3 && r1 != r2 && unused == r2);
  ttpu_val s = ttpu_hlo_binary(b, TTPU_ADD, r1, r2);
  ttpu_hlo_return(b, &s, 1);
  char* text = NULL;
  ttpu_status* st = ttpu_hlo_print(b, &text, NULL);
  ttpu_hlo_free(b);
  TTPU_CHECK_OK(t, st);
  TTPU_CHECK(t, count(text, "func.func private @ttpu_test_fma(") == 1);
  TTPU_CHECK(t, count(text, "\"func.call\"") == 2);
  /* the text follows main, inside the module */
  const char* main_at = strstr(text, "@main(");
  const char* fn_at = strstr(text, "@ttpu_test_fma(");
  TTPU_CHECK(t, main_at && fn_at && main_at < fn_at);
  size_t n = strlen(text);
  TTPU_CHECK(t, n > 2 && !strcmp(text + n - 2, "}\n"));
  free(text);
}

static void test_builder_refuses(ttpu_test_ctx* t) {
  ttpu_type ty = TY(TTPU_F32, 1, 4);
  char long_name[300];
  memset(long_name, 'a', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = 0;
  const char* bad_names[] = {"", "1abc", "a b", "x}{", long_name, NULL};
  for (int i = 0; i < 6; i++) {
    ttpu_hlo* b = ttpu_hlo_create();
    TTPU_CHECK(t, b);
    ttpu_val x = ttpu_hlo_param(b, ty, -1), r;
    ttpu_val in[2] = {x, x};
    ttpu_hlo_call(b, bad_names[i], kAxpy, in, 2, &ty, 1, &r);
    const ttpu_status* st = ttpu_hlo_status(b);
    int ok = st && ttpu_status_code(st) == TTPU_INVALID_ARGUMENT && r == TTPU_VAL_ERROR;
    ttpu_hlo_free(b);
    TTPU_CHECK(t, ok);
  }
  ttpu_hlo* b = ttpu_hlo_create();
  TTPU_CHECK(t, b);
  ttpu_val x = ttpu_hlo_param(b, ty, -1), r;
  ttpu_val in[2] = {x, x};
  ttpu_hlo_call(b, "ttpu_test_fma", kAxpy, in, 2, &ty, 1, &r);
  ttpu_hlo_call(b, "ttpu_test_fma", "  func.func private @ttpu_test_fma() {}\n", in, 2,
                &ty, 1, &r);
  const ttpu_status* st = ttpu_hlo_status(b);
  int ok = st && strstr(ttpu_status_message(st), "two different texts") != NULL;
  ttpu_hlo_free(b);
  TTPU_CHECK(t, ok);
}

static void test_define(ttpu_test_ctx* t) {
  TTPU_CHECK_OK(t, ttpu_extern_define("ttpu_test_fma", kAxpy));
  TTPU_CHECK_OK(t, ttpu_extern_define("ttpu_test_fma", kAxpy)); /* same text: fine */
  ttpu_status* st = ttpu_extern_define("ttpu_test_fma", "func.func private @ttpu_test_fma");
  TTPU_CHECK(t, st && ttpu_status_code(st) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(st);
  st = ttpu_extern_define("ttpu_test_nothing", "func.func private @other() {}");
  TTPU_CHECK(t, st && ttpu_status_code(st) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(st);
  TTPU_CHECK(t, ttpu_extern_text("ttpu_test_fma") &&
                    !strcmp(ttpu_extern_text("ttpu_test_fma"), kAxpy));
  TTPU_CHECK(t, ttpu_extern_text("ttpu_test_never") == NULL);
}

static ttpu_status* call_fma(ttpu_runtime* rt, const char* callee, const ttpu_tensor* in,
                             const ttpu_tensor* out) {
  return ttpu_test_extern_call(rt, callee, in, 2, out, 1);
}

static void test_runs_strict_and_fused(ttpu_test_ctx* t) {
  TTPU_CHECK(t, ttpu_op_lookup("torchtpu::extern_call") >= 0);
  TTPU_CHECK_OK(t, ttpu_extern_define("ttpu_test_fma", kAxpy));
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  float xv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, yv[4] = {10, 20, 30, 40};
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, xv, 8);
  ttpu_buffer* yb = ttpu_test_upload_f32(t, rt, yv, 4);
  ttpu_buffer* ob = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &ob));
  int64_t sz[1] = {4}, st1[1] = {1}, st2[1] = {2};
  /* x read through a strided view: every other element, from 1 */
  ttpu_tensor in[2] = {{xb, TTPU_F32, 1, sz, st2, 1}, {yb, TTPU_F32, 1, sz, st1, 0}};
  ttpu_tensor out = {ob, TTPU_F32, 1, sz, st1, 0};
  float r[4];
  for (int mode = 0; mode < 2; mode++) {
    TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, mode ? TTPU_MODE_FUSED : TTPU_MODE_STRICT));
    TTPU_CHECK_OK(t, call_fma(rt, "ttpu_test_fma", in, &out));
    TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
    for (int i = 0; i < 4; ++i) {
      float a = xv[1 + 2 * i];
      TTPU_CHECK(t, r[i] == a * yv[i] + a);
    }
  }
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_STRICT));
  /* an undefined callee: a clear error, and the runtime stays usable */
  ttpu_status* s = call_fma(rt, "ttpu_test_undefined", in, &out);
  TTPU_CHECK(t, s && ttpu_status_code(s) == TTPU_NOT_FOUND &&
                    strstr(ttpu_status_message(s), "ttpu_test_undefined"));
  ttpu_status_free(s);
  TTPU_CHECK_OK(t, call_fma(rt, "ttpu_test_fma", in, &out));
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
  TTPU_CHECK(t, r[0] == 2 * 10 + 2);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(yb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"builder_prints_a_callee_once", test_builder_prints_a_callee_once},
    {"builder_refuses", test_builder_refuses},
    {"define", test_define},
    {"runs_strict_and_fused", test_runs_strict_and_fused},
    {NULL, NULL},
};
TTPU_TEST_SUITE(extern, kTests)
