/* test_hlo_optimize.c - the builder's optimizations (ttpu_hlo_set_optimize):
 * identical ops are reused, reshape/transpose/convert chains fold only
 * where the values are kept exactly, and the printed program leaves out
 * the ops no result depends on, keeping those used inside regions and
 * those with effects. */
#include <stdlib.h>
#include <string.h>

#include "hlo/ttpu_hlo.h"
#include "ttpu_test.h"

#define TY(dt, nd, ...) ttpu_type_make(dt, nd, (int64_t[]){__VA_ARGS__})

static int count(const char* text, const char* what) {
  int n = 0;
  for (const char* p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* Prints b (freeing it); NULL and a failure when it does not print. */
static char* print(ttpu_test_ctx* t, ttpu_hlo* b) {
  char* text = NULL;
  ttpu_status* s = ttpu_hlo_print(b, &text, NULL);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "print: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  ttpu_hlo_free(b);
  return text;
}

static ttpu_hlo* optimizing(void) {
  ttpu_hlo* b = ttpu_hlo_create();
  if (b) ttpu_hlo_set_optimize(b, 1);
  return b;
}

static void test_identical_ops_reused(ttpu_test_ctx* t) {
  ttpu_hlo* b = optimizing();
  TTPU_CHECK(t, b);
  if (!b) return;
  ttpu_type ty = TY(TTPU_F32, 1, 4);
  ttpu_val x = ttpu_hlo_param(b, ty, -1);
  ttpu_val c1 = ttpu_hlo_const(b, ty, 2.0, 0);
  ttpu_val c2 = ttpu_hlo_const(b, ty, 2.0, 0);
  ttpu_val c3 = ttpu_hlo_const(b, ty, 3.0, 0);
  ttpu_val m1 = ttpu_hlo_binary(b, TTPU_MUL, x, c1);
  ttpu_val m2 = ttpu_hlo_binary(b, TTPU_MUL, x, c2);
  TTPU_CHECK(t, c1 == c2 && c1 != c3 && m1 == m2);
  ttpu_val r = ttpu_hlo_binary(b, TTPU_ADD, m1, ttpu_hlo_binary(b, TTPU_MUL, x, c3));
  ttpu_hlo_return(b, &r, 1);
  char* text = print(t, b);
  TTPU_CHECK(t, text && count(text, "stablehlo.constant") == 2 &&
                    count(text, "stablehlo.multiply") == 2);
  free(text);
}

static void test_chains_fold(ttpu_test_ctx* t) {
  ttpu_hlo* b = optimizing();
  TTPU_CHECK(t, b);
  if (!b) return;
  ttpu_val x = ttpu_hlo_param(b, TY(TTPU_F32, 3, 2, 3, 4), -1);
  /* transpose twice back to the start is x itself */
  ttpu_val t1 = ttpu_hlo_transpose(b, x, (const int64_t[]){1, 2, 0});
  ttpu_val t2 = ttpu_hlo_transpose(b, t1, (const int64_t[]){2, 0, 1});
  TTPU_CHECK(t, t2 == x);
  /* two transposes compose: perm {1,2,0} then {1,0,2} is {2,1,0} */
  ttpu_val t3 = ttpu_hlo_transpose(b, t1, (const int64_t[]){1, 0, 2});
  const ttpu_type* ty3 = ttpu_hlo_type(b, t3);
  TTPU_CHECK(t, ty3 && ty3->dims[0] == 4 && ty3->dims[1] == 3 && ty3->dims[2] == 2);
  /* reshape chains are one reshape; back to the start is x */
  ttpu_val r1 = ttpu_hlo_reshape(b, x, 2, (const int64_t[]){6, 4});
  ttpu_val r2 = ttpu_hlo_reshape(b, r1, 1, (const int64_t[]){24});
  ttpu_val r3 = ttpu_hlo_reshape(b, r2, 3, (const int64_t[]){2, 3, 4});
  TTPU_CHECK(t, r3 == x);
  /* f32 -> f64 -> f32 keeps every value: folds; f32 -> f16 -> f32 does not */
  ttpu_val up = ttpu_hlo_convert(b, x, TTPU_F64);
  TTPU_CHECK(t, ttpu_hlo_convert(b, up, TTPU_F32) == x);
  ttpu_val down = ttpu_hlo_convert(b, x, TTPU_F16);
  ttpu_val back = ttpu_hlo_convert(b, down, TTPU_F32);
  TTPU_CHECK(t, back != x);
  /* i8 -> i32 -> f32 is i8 -> f32 */
  ttpu_val xi = ttpu_hlo_param(b, TY(TTPU_I8, 1, 5), -1);
  ttpu_val wide = ttpu_hlo_convert(b, xi, TTPU_I32);
  ttpu_val f = ttpu_hlo_convert(b, wide, TTPU_F32);
  ttpu_val f_direct = ttpu_hlo_convert(b, xi, TTPU_F32);
  TTPU_CHECK(t, f == f_direct);
  /* i32 -> i8 -> i32 wraps: no fold */
  ttpu_val xw = ttpu_hlo_param(b, TY(TTPU_I32, 1, 5), -1);
  ttpu_val narrow = ttpu_hlo_convert(b, xw, TTPU_I8);
  TTPU_CHECK(t, ttpu_hlo_convert(b, narrow, TTPU_I32) != xw);
  /* broadcast chains are one broadcast; a [1] vector reshaped to a
   * scalar broadcasts directly */
  ttpu_val v = ttpu_hlo_param(b, TY(TTPU_F32, 1, 3), -1);
  ttpu_val b1 = ttpu_hlo_broadcast_in_dim(b, v, TY(TTPU_F32, 2, 3, 5), (const int64_t[]){0});
  ttpu_val b2 = ttpu_hlo_broadcast_in_dim(b, b1, TY(TTPU_F32, 3, 2, 5, 3),
                                          (const int64_t[]){2, 1});
  ttpu_val one = ttpu_hlo_param(b, TY(TTPU_F32, 1, 1), -1);
  ttpu_val sc = ttpu_hlo_reshape(b, one, 0, NULL);
  ttpu_val b3 = ttpu_hlo_broadcast_in_dim(b, sc, TY(TTPU_F32, 2, 4, 4), NULL);
  ttpu_val outs[6] = {t3, back, f, ttpu_hlo_convert(b, narrow, TTPU_I32), b2, b3};
  ttpu_hlo_return(b, outs, 6);
  char* text = print(t, b);
  /* t1 is only an intermediate of t3's chain: gone */
  TTPU_CHECK(t, text && count(text, "stablehlo.transpose") == 1);
  TTPU_CHECK(t, text && !strstr(text, "stablehlo.reshape"));
  TTPU_CHECK(t, text && count(text, "stablehlo.broadcast_in_dim") == 2);
  TTPU_CHECK(t, text && strstr(text, "broadcast_dimensions = array<i64: 2>} : (tensor<3xf32>) -> tensor<2x5x3xf32>"));
  TTPU_CHECK(t, text && strstr(text, "broadcast_dimensions = array<i64: 1>} : (tensor<1xf32>) -> tensor<4x4xf32>"));
  free(text);
}

static void test_unused_ops_dropped(ttpu_test_ctx* t) {
  ttpu_hlo* b = optimizing();
  TTPU_CHECK(t, b);
  if (!b) return;
  ttpu_type ty = TY(TTPU_F32, 1, 8);
  ttpu_val x = ttpu_hlo_param(b, ty, -1);
  ttpu_val dead = ttpu_hlo_unary(b, TTPU_EXP, x);
  (void)ttpu_hlo_binary(b, TTPU_MUL, dead, dead);
  /* a value of the body used only inside a region stays */
  ttpu_val scale = ttpu_hlo_unary(b, TTPU_LOG, x);
  ttpu_val w = ttpu_hlo_unary(b, TTPU_SQRT, x);
  ttpu_val red = ttpu_hlo_reduce(b, w, TTPU_RED_SUM, (const int64_t[]){0}, 1);
  ttpu_val sum = ttpu_hlo_binary(b, TTPU_MUL, scale,
                                 ttpu_hlo_broadcast_to(b, red, 1, (const int64_t[]){8}));
  ttpu_hlo_return(b, &sum, 1);
  char* text = print(t, b);
  TTPU_CHECK(t, text && !strstr(text, "stablehlo.exponential"));
  TTPU_CHECK(t, text && count(text, "stablehlo.multiply") == 1);
  TTPU_CHECK(t, text && strstr(text, "stablehlo.log") && strstr(text, "stablehlo.sqrt") &&
                    strstr(text, "stablehlo.reduce"));
  free(text);
}

static ttpu_val loop_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  return ttpu_hlo_compare(b, TTPU_LT, st[0], *(const ttpu_val*)ctx);
}

static void loop_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  (void)ctx;
  next[0] = ttpu_hlo_binary(b, TTPU_ADD, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
}

/* A value of the body that only a loop's condition reads stays. */
static void test_region_uses_kept(ttpu_test_ctx* t) {
  ttpu_hlo* b = optimizing();
  TTPU_CHECK(t, b);
  if (!b) return;
  ttpu_val limit = ttpu_hlo_const_i(b, TTPU_I64, 37);
  ttpu_val init = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val out = TTPU_VAL_ERROR;
  ttpu_hlo_while(b, &init, 1, loop_cond, loop_body, &limit, &out);
  ttpu_hlo_return(b, &out, 1);
  char* text = print(t, b);
  TTPU_CHECK(t, text && strstr(text, "dense<37>") && strstr(text, "stablehlo.while"));
  free(text);
}

/* Without the switch, the text is exactly what was built. */
static void test_off_by_default(ttpu_test_ctx* t) {
  ttpu_hlo* b = ttpu_hlo_create();
  TTPU_CHECK(t, b);
  if (!b) return;
  ttpu_type ty = TY(TTPU_F32, 1, 4);
  ttpu_val x = ttpu_hlo_param(b, ty, -1);
  ttpu_val a = ttpu_hlo_const(b, ty, 1.0, 0);
  ttpu_val c = ttpu_hlo_const(b, ty, 1.0, 0);
  TTPU_CHECK(t, a != c);
  (void)ttpu_hlo_unary(b, TTPU_EXP, x);
  ttpu_hlo_return(b, &x, 1);
  char* text = print(t, b);
  TTPU_CHECK(t, text && count(text, "stablehlo.constant") == 2 &&
                    strstr(text, "stablehlo.exponential"));
  free(text);
}

static const ttpu_test kTests[] = {
    {"identical_ops_reused", test_identical_ops_reused},
    {"chains_fold", test_chains_fold},
    {"unused_ops_dropped", test_unused_ops_dropped},
    {"region_uses_kept", test_region_uses_kept},
    {"off_by_default", test_off_by_default},
    {NULL, NULL},
};
TTPU_TEST_SUITE(hlo_optimize, kTests)
