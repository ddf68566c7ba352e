/* test_retarget.c - a program's JAX callees swapped for their text lowered
 * for another platform (ttpu_aot_define_callee / ttpu_aot_retarget): only
 * whole, known blocks change; everything else is kept byte for byte. */
#include <stdlib.h>
#include <string.h>

#include "ttpu.h"
#include "ttpu_aot.h"
#include "ttpu_test.h"

/* The retargeted text, or NULL when the call failed or its length is
 * wrong. */
static char* retarget(const char* text, const char* platform) {
  char* out = NULL;
  size_t n = 0;
  ttpu_status* s = ttpu_aot_retarget(text, strlen(text), platform, &out, &n);
  if (s || !out || strlen(out) != n) {
    ttpu_status_free(s);
    free(out);
    return NULL;
  }
  return out;
}

static void test_swaps_known_blocks(ttpu_test_ctx* t) {
  TTPU_CHECK(t, ttpu_aot_define_callee(
                    "tpu", "jx_a1",
                    "// torchtpu.jax_op jx_a1\nfunc.func private @jx_a1() "
                    "{ mosaic }\n// end jx_a1\n") == NULL);
  const char* program =
      "module {\nfunc.func @main() { call @jx_a1() }\n"
      "// torchtpu.jax_op jx_a1\nfunc.func private @jx_a1() { interpret }\n"
      "// end jx_a1\n"
      "// torchtpu.jax_op jx_b2\nfunc.func private @jx_b2() { other }\n"
      "// end jx_b2\n}\n";
  char* out = retarget(program, "tpu");
  TTPU_CHECK(t, out != NULL);
  TTPU_CHECK(t, strstr(out, "{ mosaic }") != NULL);
  TTPU_CHECK(t, strstr(out, "{ interpret }") == NULL);
  TTPU_CHECK(t, strstr(out, "{ other }") != NULL); /* no tpu text: kept */
  TTPU_CHECK(t, !strncmp(out, "module {\nfunc.func @main() { call @jx_a1() }\n",
                         strlen("module {\nfunc.func @main() { call @jx_a1() }\n")));
  TTPU_CHECK(t, strlen(out) > 2 && !strcmp(out + strlen(out) - 2, "}\n"));
  free(out);
  /* Another platform has no texts: the program comes back unchanged. */
  out = retarget(program, "cuda");
  TTPU_CHECK(t, out && !strcmp(out, program));
  free(out);
}

static void test_incomplete_block_is_kept(ttpu_test_ctx* t) {
  const char* program = "a\n// torchtpu.jax_op jx_a1\nno end line\n";
  char* out = retarget(program, "tpu");
  TTPU_CHECK(t, out && !strcmp(out, program));
  free(out);
}

static void test_redefinition_must_match(ttpu_test_ctx* t) {
  const char* text = "// torchtpu.jax_op jx_c3\nx\n// end jx_c3\n";
  TTPU_CHECK(t, ttpu_aot_define_callee("tpu", "jx_c3", text) == NULL);
  TTPU_CHECK(t, ttpu_aot_define_callee("tpu", "jx_c3", text) == NULL);
  ttpu_status* s = ttpu_aot_define_callee("tpu", "jx_c3", "other");
  TTPU_CHECK(t, s && ttpu_status_code(s) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(s);
  s = ttpu_aot_define_callee("tpu", "", text);
  TTPU_CHECK(t, s && ttpu_status_code(s) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(s);
}

static const ttpu_test kTests[] = {
    {"swaps_known_blocks", test_swaps_known_blocks},
    {"incomplete_block_is_kept", test_incomplete_block_is_kept},
    {"redefinition_must_match", test_redefinition_must_match},
    {NULL, NULL},
};
TTPU_TEST_SUITE(retarget, kTests)
