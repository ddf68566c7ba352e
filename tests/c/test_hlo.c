/* test_hlo.c - the program builder: printed text is deterministic and
 * well-formed, constants are bit-exact, errors stick; and (with the plugin)
 * a program using every op kind compiles. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/ttpu_hlo.h"
#include "pjrt/ttpu_pjrt.h"
#include "ttpu_test.h"

#define TY(dt, nd, ...) ttpu_type_make(dt, nd, (int64_t[]){__VA_ARGS__})

/* One program touching every builder entry point, so the text tests and
 * the plugin test cover all printers. Returns the builder (caller frees). */
static ttpu_hlo* build_kitchen_sink(int optimize) {
  ttpu_hlo* b = ttpu_hlo_create();
  if (!b) return NULL;
  ttpu_hlo_set_optimize(b, optimize);
  ttpu_type t = TY(TTPU_F32, 2, 3, 4);
  ttpu_val x = ttpu_hlo_param(b, t, 0);
  ttpu_val y = ttpu_hlo_param(b, t, -1);
  ttpu_val idx = ttpu_hlo_param(b, TY(TTPU_I64, 2, 2, 2), -1);
  ttpu_val state = ttpu_hlo_param(b, TY(TTPU_U64, 1, 2), -1);
  ttpu_val img = ttpu_hlo_param(b, TY(TTPU_F32, 4, 1, 2, 5, 5), -1);
  ttpu_val ker = ttpu_hlo_param(b, TY(TTPU_F32, 4, 4, 1, 3, 3), -1);

  ttpu_val s = ttpu_hlo_binary(b, TTPU_ADD, x, y);
  s = ttpu_hlo_binary(b, TTPU_REM, s, ttpu_hlo_const(b, t, 1.5, 0));
  s = ttpu_hlo_binary(b, TTPU_MAX, s, ttpu_hlo_unary(b, TTPU_ERF, y));
  s = ttpu_hlo_unary(b, TTPU_LOGISTIC, s);
  ttpu_val nan_mask = ttpu_hlo_compare(b, TTPU_NE, s, s);
  s = ttpu_hlo_select(b, nan_mask, ttpu_hlo_const(b, t, NAN, 0), s);
  s = ttpu_hlo_clamp(b, ttpu_hlo_const_f(b, TTPU_F32, -INFINITY), s,
                     ttpu_hlo_const_f(b, TTPU_F32, 0.25));
  ttpu_val bits = ttpu_hlo_bitcast(b, s, TY(TTPU_I32, 2, 3, 4));
  bits = ttpu_hlo_binary(b, TTPU_SHR_L, bits,
                         ttpu_hlo_const(b, TY(TTPU_I32, 2, 3, 4), 0, 1));
  ttpu_val as_bool = ttpu_hlo_convert(b, bits, TTPU_BOOL);
  ttpu_val as_bf16 = ttpu_hlo_convert(b, s, TTPU_BF16);

  ttpu_val tr = ttpu_hlo_transpose(b, s, (const int64_t[]){1, 0});
  ttpu_val rs = ttpu_hlo_reshape(b, tr, 1, (const int64_t[]){12});
  ttpu_val bc = ttpu_hlo_broadcast_to(b, rs, 2, (const int64_t[]){2, 12});
  ttpu_val sl = ttpu_hlo_slice(b, bc, (const int64_t[]){0, 1},
                               (const int64_t[]){2, 12}, (const int64_t[]){1, 3});
  ttpu_val cat = ttpu_hlo_concat(b, (const ttpu_val[]){sl, sl}, 2, 0);
  ttpu_val pd = ttpu_hlo_pad(b, cat, ttpu_hlo_const_f(b, TTPU_F32, 0),
                             (const int64_t[]){1, -1}, (const int64_t[]){0, 2},
                             (const int64_t[]){1, 0});
  ttpu_val rv = ttpu_hlo_reverse(b, pd, (const int64_t[]){0}, 1);
  ttpu_val one = ttpu_hlo_const_i(b, TTPU_I64, 1);
  ttpu_val ds = ttpu_hlo_dynamic_slice(b, x, (const ttpu_val[]){one, one},
                                       (const int64_t[]){2, 2});
  ttpu_val dus = ttpu_hlo_dynamic_update_slice(b, x, ds,
                                               (const ttpu_val[]){one, one});
  ttpu_val io = ttpu_hlo_iota(b, TY(TTPU_I64, 2, 3, 4), 1);

  ttpu_val red = ttpu_hlo_reduce(b, dus, TTPU_RED_SUM, (const int64_t[]){1}, 1);
  ttpu_val any = ttpu_hlo_reduce(b, as_bool, TTPU_RED_OR,
                                 (const int64_t[]){0, 1}, 2);
  ttpu_val amax, aidx;
  ttpu_hlo_reduce_arg(b, x, 1, 1, &amax, &aidx);
  ttpu_val pool = ttpu_hlo_reduce_window(
      b, img, TTPU_RED_MAX, TTPU_VAL_ERROR, (const int64_t[]){1, 1, 2, 2},
      (const int64_t[]){1, 1, 2, 2}, NULL, NULL,
      (const int64_t[]){0, 0, 0, 0, 0, 1, 0, 1});
  ttpu_val cum = ttpu_hlo_cumulative(b, x, TTPU_RED_PROD, 1);

  ttpu_val mm = ttpu_hlo_dot_general(b, x, y, NULL, NULL, 0,
                                     (const int64_t[]){1},
                                     (const int64_t[]){1}, 1, TTPU_F32,
                                     TTPU_PREC_HIGHEST);
  ttpu_val cv = ttpu_hlo_convolution(
      b, img, ker, 2, (const int64_t[]){2, 1}, (const int64_t[]){1, 1, 0, 0},
      NULL, (const int64_t[]){1, 2}, 2, 1, TTPU_F32, TTPU_PREC_DEFAULT);

  ttpu_val flat = ttpu_hlo_reshape(b, x, 1, (const int64_t[]){12});
  ttpu_val tk = ttpu_hlo_take(b, flat, idx);
  ttpu_val pt = ttpu_hlo_put(b, flat, idx, tk, TTPU_ADD);

  ttpu_val sorted[2];
  ttpu_hlo_sort(b, x, &io, 1, 1, 1, sorted);
  ttpu_val new_state, rbits;
  ttpu_hlo_rng_bits(b, state, TY(TTPU_U32, 1, 8), &new_state, &rbits);

  ttpu_val outs[] = {dus,  as_bf16, rv, red, any,       amax,  aidx,
                     pool, cum,     mm, cv,  pt,        sorted[0], sorted[1],
                     new_state, rbits};
  ttpu_hlo_return(b, outs, (int)(sizeof outs / sizeof outs[0]));
  return b;
}

static char* print_or_fail(ttpu_test_ctx* t, ttpu_hlo* b, size_t* len) {
  char* text = NULL;
  ttpu_status* s = ttpu_hlo_print(b, &text, len);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "print: %s", ttpu_status_message(s));
    ttpu_status_free(s);
    return NULL;
  }
  return text;
}

/* Structural checks that catch most printer slips without an MLIR parser:
 * balanced brackets outside string literals, every %N used after it is
 * defined, SSA numbers defined once. Returns NULL or a static reason. */
static const char* well_formed(const char* text) {
  char stack[256];
  int depth = 0, in_str = 0;
  for (const char* p = text; *p; p++) {
    char c = *p;
    if (in_str) {
      if (c == '"') in_str = 0;
      continue;
    }
    if (c == '"') {
      in_str = 1;
    } else if (c == '(' || c == '{' || c == '[' || c == '<') {
      if (depth == (int)sizeof stack) return "nesting too deep";
      stack[depth++] = c;
    } else if (c == ')' || c == '}' || c == ']' || c == '>') {
      /* "->" is an arrow, not a bracket */
      if (c == '>' && p > text && p[-1] == '-') continue;
      char open = c == ')' ? '(' : c == '}' ? '{' : c == ']' ? '[' : '<';
      if (depth == 0 || stack[depth - 1] != open) return "unbalanced bracket";
      depth--;
    }
  }
  if (in_str) return "unterminated string";
  if (depth) return "unclosed bracket";

  int cap = 1024, *defined = calloc((size_t)cap, sizeof *defined);
  if (!defined) return "oom";
  const char* why = NULL;
  for (const char* p = text; *p && !why; p++) {
    if (*p != '%' || !isdigit((unsigned char)p[1])) continue;
    char* end;
    long n = strtol(p + 1, &end, 10);
    while (n >= cap) {
      int* d = realloc(defined, (size_t)cap * 2 * sizeof *d);
      if (!d) {
        why = "oom";
        break;
      }
      memset(d + cap, 0, (size_t)cap * sizeof *d);
      defined = d;
      cap *= 2;
    }
    if (why) break;
    /* a definition is "%N = ", "%N:k = " or a block argument "%N: type" */
    int is_def = strncmp(end, " = ", 3) == 0 ||
                 (end[0] == ':' && end[1] != ' ') ||
                 (end[0] == ':' && end[1] == ' ' && strncmp(end + 2, "tensor", 6) == 0);
    if (is_def) {
      if (defined[n]) why = "SSA value defined twice";
      defined[n] = 1;
    } else if (!defined[n]) {
      why = "SSA value used before its definition";
    }
    p = end - 1;
  }
  free(defined);
  return why;
}

static void test_deterministic(ttpu_test_ctx* t) {
  ttpu_hlo* b1 = build_kitchen_sink(0);
  ttpu_hlo* b2 = build_kitchen_sink(0);
  TTPU_CHECK(t, b1 && b2);
  size_t n1 = 0, n2 = 0;
  char* a = print_or_fail(t, b1, &n1);
  char* c = a ? print_or_fail(t, b2, &n2) : NULL;
  /* printing twice from the same builder gives the same text too */
  size_t n3 = 0;
  char* d = c ? print_or_fail(t, b1, &n3) : NULL;
  int same = a && c && d && n1 == n2 && n1 == n3 && strlen(a) == n1 &&
             memcmp(a, c, n1) == 0 && memcmp(a, d, n1) == 0;
  const char* why = a ? well_formed(a) : "no text";
  int header = a && strncmp(a,
                            "module @ttpu attributes {mhlo.num_partitions = 1 "
                            ": i32, mhlo.num_replicas = 1 : i32} {\n"
                            "  func.func public @main(%arg0: tensor<3x4xf32> "
                            "{tf.aliasing_output = 0 : i32}, %arg1: ",
                            150) == 0;
  int generic = a && strstr(a, "\"func.return\"(") &&
                strstr(a, "\"stablehlo.sort\"") &&
                strstr(a, "is_stable = true") &&
                strstr(a, "#stablehlo<rng_algorithm THREE_FRY>") &&
                strstr(a, "\"chlo.erf\"") && strstr(a, "#stablehlo.conv<raw ");
  free(a);
  free(c);
  free(d);
  ttpu_hlo_free(b1);
  ttpu_hlo_free(b2);
  TTPU_CHECK(t, same);
  if (why) ttpu_test_fail(t, __FILE__, __LINE__, "malformed text: %s", why);
  TTPU_CHECK(t, header);
  TTPU_CHECK(t, generic);
}

/* The exact text of a small program: the format other code hashes. */
static void test_golden_text(ttpu_test_ctx* t) {
  ttpu_hlo* b = ttpu_hlo_create();
  TTPU_CHECK(t, b);
  ttpu_type ty = TY(TTPU_F32, 1, 4);
  ttpu_val x = ttpu_hlo_param(b, ty, 0);
  ttpu_val y = ttpu_hlo_param(b, ty, -1);
  ttpu_val s = ttpu_hlo_binary(b, TTPU_ADD, x, y);
  ttpu_val g = ttpu_hlo_compare(b, TTPU_GT, s, y);
  ttpu_val r = ttpu_hlo_reduce(b, s, TTPU_RED_SUM, (const int64_t[]){0}, 1);
  ttpu_val outs[3] = {s, g, r};
  ttpu_hlo_return(b, outs, 3);
  size_t n = 0;
  char* text = print_or_fail(t, b, &n);
  ttpu_hlo_free(b);
  TTPU_CHECK(t, text);
  const char* want =
      "module @ttpu attributes {mhlo.num_partitions = 1 : i32, "
      "mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 "
      ": i32}, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>, "
      "tensor<f32>) {\n"
      "    %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, "
      "tensor<4xf32>) -> tensor<4xf32>\n"
      "    %1 = \"stablehlo.compare\"(%0, %arg1) {comparison_direction = "
      "#stablehlo<comparison_direction GT>, compare_type = "
      "#stablehlo<comparison_type FLOAT>} : (tensor<4xf32>, tensor<4xf32>) "
      "-> tensor<4xi1>\n"
      "    %2 = \"stablehlo.constant\"() {value = dense<0x00000000> : "
      "tensor<f32>} : () -> tensor<f32>\n"
      "    %6 = \"stablehlo.reduce\"(%0, %2) ({\n"
      "      ^bb0(%3: tensor<f32>, %4: tensor<f32>):\n"
      "      %5 = \"stablehlo.add\"(%3, %4) : (tensor<f32>, tensor<f32>) -> "
      "tensor<f32>\n"
      "      \"stablehlo.return\"(%5) : (tensor<f32>) -> ()\n"
      "    }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> "
      "tensor<f32>\n"
      "    \"func.return\"(%0, %1, %6) : (tensor<4xf32>, tensor<4xi1>, "
      "tensor<f32>) -> ()\n"
      "  }\n"
      "}\n";
  int ok = strcmp(text, want) == 0 && n == strlen(want);
  if (!ok) printf("--- got:\n%s--- want:\n%s", text, want);
  free(text);
  TTPU_CHECK(t, ok);
}

static int const_text(ttpu_hlo* b, ttpu_val v, const char* want) {
  ttpu_hlo_return(b, &v, 1);
  char* text = NULL;
  ttpu_status* s = ttpu_hlo_print(b, &text, NULL);
  int ok = !s && strstr(text, want) != NULL;
  if (!ok) printf("    want %s in:\n%s\n", want, text ? text : "(none)");
  ttpu_status_free(s);
  free(text);
  ttpu_hlo_free(b);
  return ok;
}

/* Float constants are printed as their exact bits, rounded to nearest-even
 * straight from the double (no double rounding through float). */
static void test_constants_exact(ttpu_test_ctx* t) {
  ttpu_hlo* b;
#define CONST_CASE(expr, want)                 \
  b = ttpu_hlo_create();                       \
  TTPU_CHECK(t, b);                            \
  TTPU_CHECK(t, const_text(b, (expr), want));
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F32, 1.0), "dense<0x3F800000> : tensor<f32>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_BF16, 1.0), "dense<0x3F80> : tensor<bf16>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F16, 1.0), "dense<0x3C00> : tensor<f16>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F64, 1.0),
             "dense<0x3FF0000000000000> : tensor<f64>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F32, NAN), "dense<0x7FC00000>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F32, -INFINITY), "dense<0xFF800000>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F32, -0.0), "dense<0x80000000>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_BF16, 1.0 / 3.0), "dense<0x3EAB>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F16, 1.0 / 3.0), "dense<0x3555>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F16, 65520.0), "dense<0x7C00>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_F16, 1e-7), "dense<0x0002>");
  /* 1 + 2^-8 + 2^-30 is above the bf16 halfway point; via float it would
   * first round to exactly halfway and then (ties-to-even) down. */
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_BF16, 1.0 + 0x1p-8 + 0x1p-30),
             "dense<0x3F81>");
  CONST_CASE(ttpu_hlo_const(b, TY(TTPU_F32, 2, 2, 3), 2.0, 0),
             "dense<0x40000000> : tensor<2x3xf32>");
  CONST_CASE(ttpu_hlo_const_i(b, TTPU_I64, INT64_MIN),
             "dense<-9223372036854775808> : tensor<i64>");
  CONST_CASE(ttpu_hlo_const_i(b, TTPU_U64, -1),
             "dense<18446744073709551615> : tensor<ui64>");
  CONST_CASE(ttpu_hlo_const_i(b, TTPU_U8, 300), "dense<44> : tensor<ui8>");
  CONST_CASE(ttpu_hlo_const_i(b, TTPU_BOOL, 1), "dense<true> : tensor<i1>");
  CONST_CASE(ttpu_hlo_const(b, TY(TTPU_BOOL, 1, 2), 0.0, 0),
             "dense<false> : tensor<2xi1>");
  CONST_CASE(ttpu_hlo_const_f(b, TTPU_I32, -2.9), "dense<-2> : tensor<i32>");
  CONST_CASE(ttpu_hlo_const_i64s(b, (const int64_t[]){3, -1}, 2),
             "dense<[3, -1]> : tensor<2xi64>");
#undef CONST_CASE
}

static void test_errors_stick(ttpu_test_ctx* t) {
  ttpu_hlo* b = ttpu_hlo_create();
  TTPU_CHECK(t, b);
  ttpu_val x = ttpu_hlo_param(b, TY(TTPU_F32, 1, 4), -1);
  ttpu_val y = ttpu_hlo_param(b, TY(TTPU_F32, 1, 5), -1);
  TTPU_CHECK(t, x >= 0 && y >= 0 && ttpu_hlo_status(b) == NULL);
  ttpu_val s = ttpu_hlo_binary(b, TTPU_ADD, x, y);
  TTPU_CHECK(t, s == TTPU_VAL_ERROR);
  const ttpu_status* st = ttpu_hlo_status(b);
  TTPU_CHECK(t, st && ttpu_status_code(st) == TTPU_INVALID_ARGUMENT);
  TTPU_CHECK(t, strstr(ttpu_status_message(st), "stablehlo.add") != NULL);
  /* later calls do nothing, and the first error is the one kept */
  TTPU_CHECK(t, ttpu_hlo_unary(b, TTPU_EXP, x) == TTPU_VAL_ERROR);
  ttpu_hlo_fail(b, TTPU_INTERNAL, "second");
  TTPU_CHECK(t, ttpu_status_code(ttpu_hlo_status(b)) == TTPU_INVALID_ARGUMENT);
  ttpu_hlo_return(b, &x, 1);
  char* text = (char*)1;
  ttpu_status* ps = ttpu_hlo_print(b, &text, NULL);
  int print_failed = ps && ttpu_status_code(ps) == TTPU_INVALID_ARGUMENT &&
                     text == NULL;
  ttpu_status_free(ps);
  TTPU_CHECK(t, print_failed);
  ttpu_status* taken = ttpu_hlo_take_status(b);
  TTPU_CHECK(t, taken && ttpu_hlo_status(b) == NULL);
  ttpu_status_free(taken);
  ttpu_hlo_free(b);

  /* a selection of type errors, each reported rather than printed */
  struct {
    const char* what;
    int kind;
  } cases[] = {{"exp of int", 0},       {"bool subtract", 1},
               {"bad transpose", 2},    {"bad broadcast", 3},
               {"dot size mismatch", 4}, {"reshape count", 5},
               {"rng float bits", 6},   {"bitcast sizes", 7}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    b = ttpu_hlo_create();
    TTPU_CHECK(t, b);
    ttpu_val xi = ttpu_hlo_param(b, TY(TTPU_I64, 2, 2, 3), -1);
    ttpu_val xb = ttpu_hlo_param(b, TY(TTPU_BOOL, 1, 3), -1);
    ttpu_val xf = ttpu_hlo_param(b, TY(TTPU_F32, 2, 2, 3), -1);
    ttpu_val st2 = ttpu_hlo_param(b, TY(TTPU_U64, 1, 2), -1);
    ttpu_val r = 0, r2 = 0;
    switch (cases[i].kind) {
      case 0: r = ttpu_hlo_unary(b, TTPU_EXP, xi); break;
      case 1: r = ttpu_hlo_binary(b, TTPU_SUB, xb, xb); break;
      case 2: r = ttpu_hlo_transpose(b, xf, (const int64_t[]){0, 0}); break;
      case 3: r = ttpu_hlo_broadcast_to(b, xf, 2, (const int64_t[]){2, 4}); break;
      case 4:
        r = ttpu_hlo_dot_general(b, xf, xf, NULL, NULL, 0,
                                 (const int64_t[]){1}, (const int64_t[]){0},
                                 1, TTPU_F32, TTPU_PREC_DEFAULT);
        break;
      case 5: r = ttpu_hlo_reshape(b, xf, 1, (const int64_t[]){7}); break;
      case 6: ttpu_hlo_rng_bits(b, st2, TY(TTPU_F32, 1, 2), &r2, &r); break;
      case 7: r = ttpu_hlo_bitcast(b, xf, TY(TTPU_U16, 2, 2, 3)); break;
    }
    int ok = r == TTPU_VAL_ERROR && ttpu_hlo_status(b) &&
             ttpu_status_code(ttpu_hlo_status(b)) == TTPU_INVALID_ARGUMENT;
    if (!ok)
      ttpu_test_fail(t, __FILE__, __LINE__, "%s: not rejected", cases[i].what);
    ttpu_hlo_free(b);
    if (!ok) return;
  }
}

/* No fixed limits: a long chain of ops prints whole and in order. */
static void test_large_program(ttpu_test_ctx* t) {
  ttpu_hlo* b = ttpu_hlo_create();
  TTPU_CHECK(t, b);
  ttpu_val x = ttpu_hlo_param(b, TY(TTPU_F32, 2, 8, 8), -1);
  ttpu_val acc = x;
  for (int i = 0; i < 20000; i++)
    acc = ttpu_hlo_binary(b, i % 2 ? TTPU_MUL : TTPU_ADD, acc, x);
  ttpu_hlo_return(b, &acc, 1);
  size_t n = 0;
  char* text = print_or_fail(t, b, &n);
  ttpu_hlo_free(b);
  TTPU_CHECK(t, text);
  int ok = n > 20000 * 60 && strstr(text, "%19999 = \"stablehlo.multiply\"") &&
           strstr(text, "\"func.return\"(%19999)") && !well_formed(text);
  free(text);
  TTPU_CHECK(t, ok);
}

/* The plugin parses and compiles the kitchen-sink program, as built and
 * with the builder's optimizations on (every output still there). */
static void compiles_on_plugin(ttpu_test_ctx* t, int optimize) {
  ttpu_pjrt_plugin* p = ttpu_test_plugin(t);
  if (!p) return;
  ttpu_pjrt_client* c = NULL;
  TTPU_CHECK_OK(t, ttpu_pjrt_client_create(p, 1, &c));
  ttpu_hlo* b = build_kitchen_sink(optimize);
  size_t n = 0;
  char* text = b ? print_or_fail(t, b, &n) : NULL;
  ttpu_hlo_free(b);
  ttpu_pjrt_exec* e = NULL;
  ttpu_status* s = text ? ttpu_pjrt_compile(c, text, n, NULL, 0, &e) : NULL;
  int ok = text && !s && e;
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "compile: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  if (e) {
    ok = ok && ttpu_pjrt_exec_num_outputs(c, e) == 16;
    ttpu_pjrt_exec_destroy(c, e);
  }
  free(text);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK(t, ok);
}

static void test_compiles_on_plugin(ttpu_test_ctx* t) { compiles_on_plugin(t, 0); }
static void test_optimized_compiles_on_plugin(ttpu_test_ctx* t) {
  compiles_on_plugin(t, 1);
}

static const ttpu_test kTests[] = {
    {"deterministic", test_deterministic},
    {"golden_text", test_golden_text},
    {"constants_exact", test_constants_exact},
    {"errors_stick", test_errors_stick},
    {"large_program", test_large_program},
    {"compiles_on_plugin", test_compiles_on_plugin},
    {"optimized_compiles_on_plugin", test_optimized_compiles_on_plugin},
    {NULL, NULL},
};
TTPU_TEST_SUITE(hlo, kTests)
