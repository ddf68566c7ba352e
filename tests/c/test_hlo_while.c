/* test_hlo_while.c - stablehlo.while in the program builder: the printed
 * loop, enclosing values used inside it, and the errors it reports. (The
 * op tests of eigh/matrix_exp compile and run such loops on the plugin.) */
#include <stdlib.h>
#include <string.h>

#include "hlo/ttpu_hlo.h"
#include "ttpu_test.h"

typedef struct {
  ttpu_val limit; /* an enclosing value the condition reads */
  int bad_body;   /* the body returns a value of the wrong type */
} loop_ctx;

static ttpu_val count_cond(ttpu_hlo* b, void* vctx, const ttpu_val* st) {
  loop_ctx* c = vctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0], c->limit);
}

static void count_body(ttpu_hlo* b, void* vctx, const ttpu_val* st, ttpu_val* next) {
  loop_ctx* c = vctx;
  next[0] = ttpu_hlo_binary(b, TTPU_ADD, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = c->bad_body ? st[0] : ttpu_hlo_binary(b, TTPU_MUL, st[1], st[1]);
}

static ttpu_hlo* build(loop_ctx* c, ttpu_val* outs) {
  ttpu_hlo* b = ttpu_hlo_create();
  if (!b) return NULL;
  int64_t four = 4;
  ttpu_val x = ttpu_hlo_param(b, ttpu_type_make(TTPU_F32, 1, &four), -1);
  c->limit = ttpu_hlo_const_i(b, TTPU_I64, 3);
  ttpu_val init[2] = {ttpu_hlo_const_i(b, TTPU_I64, 0), x};
  ttpu_hlo_while(b, init, 2, count_cond, count_body, c, outs);
  return b;
}

static void test_printed_loop(ttpu_test_ctx* t) {
  loop_ctx c = {TTPU_VAL_ERROR, 0};
  ttpu_val outs[2];
  ttpu_hlo* b = build(&c, outs);
  TTPU_CHECK(t, b && outs[0] >= 0 && outs[1] >= 0);
  ttpu_hlo_return(b, outs, 2);
  char* text = NULL;
  ttpu_status* s = ttpu_hlo_print(b, &text, NULL);
  ttpu_hlo_free(b);
  TTPU_CHECK(t, s == NULL && text);
  /* two regions (condition, body), the loop's results typed like its state */
  const char* w = strstr(text, "\"stablehlo.while\"(");
  int ok = w && strstr(w, "\"stablehlo.return\"") && strstr(w, "}, {") &&
           strstr(w, ": (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>)") &&
           strstr(text, "%10:2 = \"stablehlo.while\"(%1, %arg0) ({") == w - 8;
  if (!ok) printf("%s", text);
  free(text);
  TTPU_CHECK(t, ok);
}

static void test_body_type_change_fails(ttpu_test_ctx* t) {
  loop_ctx c = {TTPU_VAL_ERROR, 1};
  ttpu_val outs[2];
  ttpu_hlo* b = build(&c, outs);
  TTPU_CHECK(t, b);
  const ttpu_status* st = ttpu_hlo_status(b);
  int ok = outs[0] == TTPU_VAL_ERROR && st && ttpu_status_code(st) == TTPU_INTERNAL &&
           strstr(ttpu_status_message(st), "changes type");
  ttpu_hlo_free(b);
  TTPU_CHECK(t, ok);
}

static const ttpu_test kTests[] = {
    {"printed_loop", test_printed_loop},
    {"body_type_change_fails", test_body_type_change_fails},
    {NULL, NULL},
};
TTPU_TEST_SUITE(hlo_while, kTests)
