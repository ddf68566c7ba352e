/* test_aot.c - compiling for TPU topologies with libtpu, no TPU present.
 *
 * Where libtpu is not installed, every test that needs it prints why it is
 * skipped and passes: the suite must not fail on a machine without it. */
#include <stdlib.h>
#include <string.h>

#include "ttpu_aot.h"
#include "ttpu_test.h"

/* 8x16 @ 16x4 in f32: 2*8*16*4 = 1024 flops. */
#define MATMUL_PROGRAM                                                      \
  "module @m { func.func public @main(%arg0: tensor<8x16xf32>, %arg1: "     \
  "tensor<16x4xf32>) -> (tensor<8x4xf32>) { %0 = "                          \
  "\"stablehlo.dot_general\"(%arg0, %arg1) {dot_dimension_numbers = "       \
  "#stablehlo.dot<lhs_contracting_dimensions = [1], "                       \
  "rhs_contracting_dimensions = [0]>} : (tensor<8x16xf32>, "                \
  "tensor<16x4xf32>) -> tensor<8x4xf32>  \"func.return\"(%0) : "            \
  "(tensor<8x4xf32>) -> () } }"

/* 5 Gi f32 elements in, doubled out: 40 GiB, more than any chip's HBM. */
#define TOO_BIG_PROGRAM                                                     \
  "module @m { func.func public @main(%arg0: tensor<5368709120xf32>) -> "   \
  "(tensor<5368709120xf32>) { %0 = \"stablehlo.add\"(%arg0, %arg0) : "      \
  "(tensor<5368709120xf32>, tensor<5368709120xf32>) -> "                    \
  "tensor<5368709120xf32>  \"func.return\"(%0) : "                          \
  "(tensor<5368709120xf32>) -> () } }"

static struct {
  int tried;
  ttpu_aot_compiler* compiler;
  char* why; /* why there is none */
} g_aot;

/* The libtpu compiler loaded once for the run, or NULL after printing why
 * the calling test is skipped (a load failure of an installed libtpu is a
 * failure, not a skip). */
static ttpu_aot_compiler* compiler_or_skip(ttpu_test_ctx* t) {
  if (!g_aot.tried) {
    g_aot.tried = 1;
    char* path = NULL;
    ttpu_status* s = ttpu_aot_find_compiler(ttpu_test_search_dirs(), &path);
    if (s) {
      g_aot.why = strdup(ttpu_status_message(s));
      ttpu_status_free(s);
    } else {
      s = ttpu_aot_compiler_load(path, &g_aot.compiler);
      if (s) {
        ttpu_test_fail(t, __FILE__, __LINE__, "loading %s: %s", path,
                       ttpu_status_message(s));
        ttpu_status_free(s);
        g_aot.why = strdup("libtpu failed to load (see above)");
      }
    }
    free(path);
  }
  if (!g_aot.compiler) printf("    SKIP: %s\n", g_aot.why ? g_aot.why : "?");
  return g_aot.compiler;
}

static ttpu_aot_target* target(ttpu_test_ctx* t, ttpu_aot_compiler* c,
                               const char* name) {
  ttpu_aot_target* tg = NULL;
  ttpu_status* s = ttpu_aot_target_create(c, name, &tg);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "target %s: %s", name,
                   ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return tg;
}

/* Needs no libtpu: an explicit path that is wrong is an error, and with
 * nothing to search the message says how to install libtpu. */
static void test_find_compiler(ttpu_test_ctx* t) {
  const char* old = getenv("TORCHTPU_LIBTPU");
  char* saved = old ? strdup(old) : NULL;
  char* path = NULL;
  setenv("TORCHTPU_LIBTPU", "/nonexistent/libtpu.so", 1);
  ttpu_status* s = ttpu_aot_find_compiler(NULL, &path);
  int explicit_ok = s && ttpu_status_code(s) == TTPU_NOT_FOUND &&
                    strstr(ttpu_status_message(s), "TORCHTPU_LIBTPU");
  ttpu_status_free(s);
  unsetenv("TORCHTPU_LIBTPU");
  s = ttpu_aot_find_compiler(NULL, &path);
  int hint_ok = s && ttpu_status_code(s) == TTPU_NOT_FOUND &&
                strstr(ttpu_status_message(s), "pip install");
  ttpu_status_free(s);
  if (saved) setenv("TORCHTPU_LIBTPU", saved, 1);
  free(saved);
  TTPU_CHECK(t, explicit_ok);
  TTPU_CHECK(t, hint_ok);
  TTPU_CHECK(t, path == NULL);
}

static void test_topology(ttpu_test_ctx* t) {
  ttpu_aot_compiler* c = compiler_or_skip(t);
  if (!c) return;
  ttpu_aot_target* tg = target(t, c, "v5e:2x2");
  if (!tg) return;
  int n = ttpu_aot_target_device_count(tg);
  const char* kind = ttpu_aot_target_device_kind(tg);
  int kind_ok = strstr(kind, "v5") != NULL;
  int name_ok = strcmp(ttpu_aot_target_name(tg), "v5e:2x2") == 0;
  ttpu_aot_target_destroy(tg);
  TTPU_CHECK(t, n == 4);
  TTPU_CHECK(t, kind_ok);
  TTPU_CHECK(t, name_ok);

  /* A name the compiler does not know keeps the compiler's reason. */
  ttpu_aot_target* bad = NULL;
  ttpu_status* s = ttpu_aot_target_create(c, "v5e-no-such", &bad);
  int bad_ok = s && strstr(ttpu_status_message(s), "v5e-no-such");
  ttpu_status_free(s);
  TTPU_CHECK(t, bad == NULL);
  TTPU_CHECK(t, bad_ok);
}

/* One chip and all four chips of v5e:2x2 and v6e:2x2: the program
 * compiles, and memory stats and cost analysis come back. */
static void test_compile_matmul(ttpu_test_ctx* t) {
  ttpu_aot_compiler* c = compiler_or_skip(t);
  if (!c) return;
  static const char* const kTopologies[] = {"v5e:2x2", "v6e:2x2"};
  for (int i = 0; i < 2; i++) {
    ttpu_aot_target* tg = target(t, c, kTopologies[i]);
    if (!tg) return;
    for (int replicas = 1; replicas <= 4; replicas += 3) {
      ttpu_aot_stats st;
      ttpu_status* s = ttpu_aot_compile(tg, MATMUL_PROGRAM,
                                        strlen(MATMUL_PROGRAM), replicas, 1,
                                        &st);
      if (s) {
        ttpu_test_fail(t, __FILE__, __LINE__, "%s x%d: %s", kTopologies[i],
                       replicas, ttpu_status_message(s));
        ttpu_status_free(s);
        ttpu_aot_target_destroy(tg);
        return;
      }
      /* Padded to TPU tiles, so at least the logical sizes. */
      TTPU_CHECK(t, st.argument_bytes >= (8 * 16 + 16 * 4) * 4);
      TTPU_CHECK(t, st.output_bytes >= 8 * 4 * 4);
      TTPU_CHECK(t, st.peak_bytes >= st.argument_bytes);
      TTPU_CHECK(t, st.flops == 1024.0);
      TTPU_CHECK(t, st.bytes_accessed > 0);
    }
    ttpu_aot_target_destroy(tg);
  }
}

static void test_compile_errors(ttpu_test_ctx* t) {
  ttpu_aot_compiler* c = compiler_or_skip(t);
  if (!c) return;
  ttpu_aot_target* tg = target(t, c, "v5e:2x2");
  if (!tg) return;
  /* More replicas than chips: refused before the compiler is asked. */
  ttpu_status* s = ttpu_aot_compile(tg, MATMUL_PROGRAM,
                                    strlen(MATMUL_PROGRAM), 8, 1, NULL);
  int many_ok = s && ttpu_status_code(s) == TTPU_INVALID_ARGUMENT;
  ttpu_status_free(s);
  /* A program that cannot be parsed: the compiler's message comes back. */
  s = ttpu_aot_compile(tg, "module {", 8, 1, 1, NULL);
  int parse_ok = s && ttpu_status_code(s) == TTPU_PLUGIN_ERROR;
  ttpu_status_free(s);
  /* Larger than a v5e chip's 16 GiB of HBM. */
  s = ttpu_aot_compile(tg, TOO_BIG_PROGRAM, strlen(TOO_BIG_PROGRAM), 1, 1,
                       NULL);
  int big_ok = s && ttpu_status_code(s) == TTPU_RESOURCE_EXHAUSTED &&
               strstr(ttpu_status_message(s), "does not fit in the HBM");
  if (s && !big_ok) printf("    too-big program: %s\n", ttpu_status_message(s));
  if (!s) printf("    too-big program compiled\n");
  ttpu_status_free(s);
  ttpu_aot_target_destroy(tg);
  TTPU_CHECK(t, many_ok);
  TTPU_CHECK(t, parse_ok);
  TTPU_CHECK(t, big_ok);
}

/* Last: releases the compiler so leak checkers see a clean exit. */
static void test_unload(ttpu_test_ctx* t) {
  (void)t;
  ttpu_aot_compiler_unload(g_aot.compiler);
  g_aot.compiler = NULL;
  free(g_aot.why);
  g_aot.why = NULL;
}

static const ttpu_test kTests[] = {{"find_compiler", test_find_compiler},
                                   {"topology", test_topology},
                                   {"compile_matmul", test_compile_matmul},
                                   {"compile_errors", test_compile_errors},
                                   {"unload", test_unload},
                                   {NULL, NULL}};
TTPU_TEST_SUITE(aot, kTests)
