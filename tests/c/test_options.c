/* test_options.c - runtime options read from the environment once, the
 * plugin's capabilities, and strict mode's kept scalar packs. */
#include <stdlib.h>
#include <string.h>

#include "ttpu_test.h"

/* Sets (value non-NULL) or unsets each variable; the old values are saved
 * in old[] (malloc'ed copies, NULL when unset) for restore_env. */
static const char* const kVars[] = {
    "TORCHTPU_EAGER_MODE", "TORCHTPU_FUSED_MAX_OPS", "TORCHTPU_RECOMPILE_WARN",
    "TORCHTPU_DISK_CACHE", "TORCHTPU_CACHE_MAX_MB", "TORCHTPU_DEBUG_HLO",
};
#define N_VARS (int)(sizeof(kVars) / sizeof(kVars[0]))

static void save_env(char** old) {
  for (int k = 0; k < N_VARS; ++k) {
    const char* v = getenv(kVars[k]);
    old[k] = v ? strdup(v) : NULL;
  }
}

static void restore_env(char** old) {
  for (int k = 0; k < N_VARS; ++k) {
    if (old[k]) setenv(kVars[k], old[k], 1);
    else unsetenv(kVars[k]);
    free(old[k]);
  }
}

static void test_from_env(ttpu_test_ctx* t) {
  char* old[N_VARS];
  save_env(old);
  for (int k = 0; k < N_VARS; ++k) unsetenv(kVars[k]);
  ttpu_runtime_options o;
  memset(&o, 0, sizeof(o));
  ttpu_runtime_options_from_env(&o);
  int defaults_ok = o.initialized == TTPU_OPTIONS_FROM_ENV &&
                    o.mode == TTPU_MODE_STRICT && o.recompile_warn == 8 &&
                    o.disk_cache == 1 && o.debug_hlo == 0;
  setenv("TORCHTPU_EAGER_MODE", "fused", 1);
  setenv("TORCHTPU_FUSED_MAX_OPS", "7", 1);
  setenv("TORCHTPU_RECOMPILE_WARN", "3", 1);
  setenv("TORCHTPU_DISK_CACHE", "0", 1);
  setenv("TORCHTPU_CACHE_MAX_MB", "5", 1);
  setenv("TORCHTPU_DEBUG_HLO", "1", 1);
  memset(&o, 0, sizeof(o));
  ttpu_runtime_options_from_env(&o);
  restore_env(old);
  TTPU_CHECK(t, defaults_ok);
  TTPU_CHECK(t, o.mode == TTPU_MODE_FUSED);
  TTPU_CHECK(t, o.fused_max_ops == 7);
  TTPU_CHECK(t, o.recompile_warn == 3);
  TTPU_CHECK(t, o.disk_cache == 0);
  TTPU_CHECK(t, o.cache_max_bytes == 5 * 1024 * 1024);
  TTPU_CHECK(t, o.debug_hlo == 1);
}

/* A runtime takes the options it is given, and a zeroed struct still
 * means "from the environment". */
static void test_options_taken(ttpu_test_ctx* t) {
  char* old[N_VARS];
  save_env(old);
  setenv("TORCHTPU_EAGER_MODE", "debug", 1);
  ttpu_runtime_options o;
  memset(&o, 0, sizeof(o));
  o.plugin_path = ttpu_test_plugin_path(t);
  ttpu_runtime* from_env = NULL;
  ttpu_status* s = ttpu_runtime_create(&o, &from_env);
  ttpu_runtime_options_from_env(&o);
  o.plugin_path = ttpu_test_plugin_path(t);
  o.mode = TTPU_MODE_FUSED;
  o.disk_cache = 0;
  ttpu_runtime* given = NULL;
  if (!s) s = ttpu_runtime_create(&o, &given);
  restore_env(old);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, ttpu_runtime_mode(from_env) == TTPU_MODE_DEBUG);
  TTPU_CHECK(t, ttpu_runtime_mode(given) == TTPU_MODE_FUSED);
  TTPU_CHECK(t, !strcmp(ttpu_runtime_cache_dir(given), ""));
  ttpu_runtime_destroy(from_env);
  ttpu_runtime_destroy(given);
}

static void test_caps(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_caps c;
  memset(&c, 0x7f, sizeof(c));
  ttpu_runtime_caps(rt, &c);
  const char* platform = ttpu_runtime_platform_name(rt);
  if (platform && !strcmp(platform, "cpu")) {
    TTPU_CHECK(t, c.host_code == 1);
    TTPU_CHECK(t, c.cross_process_collectives == 0);
    TTPU_CHECK(t, c.serialize_executables == 1);
  }
  TTPU_CHECK(t, c.memory_stats == 0 || c.memory_stats == 1);
  TTPU_CHECK(t, c.cost_analysis == 0 || c.cost_analysis == 1);
  TTPU_CHECK(t, c.topology_compile == 0 || c.topology_compile == 1);
  ttpu_runtime_destroy(rt);
}

/* The reason is copied out, always terminated, its full length returned. */
static void test_reason_copy(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  char none[8] = "x";
  TTPU_CHECK(t, ttpu_runtime_last_compile_reason(rt, none, sizeof(none)) == 0);
  TTPU_CHECK(t, none[0] == '\0');
  float v[4] = {1, 2, 3, 4};
  ttpu_buffer* x = ttpu_test_upload_f32(t, rt, v, 4);
  ttpu_buffer* o = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, sizeof(v), &o));
  int64_t n = 4, st = 1;
  ttpu_tensor xt = {x, TTPU_F32, 1, &n, &st, 0};
  ttpu_tensor ot = {o, TTPU_F32, 1, &n, &st, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &xt, &xt, &ot, 1.0));
  char full[512], small[6];
  int len = ttpu_runtime_last_compile_reason(rt, full, sizeof(full));
  TTPU_CHECK(t, len > 5 && (size_t)len == strlen(full));
  TTPU_CHECK(t, ttpu_runtime_last_compile_reason(rt, small, sizeof(small)) == len);
  TTPU_CHECK(t, strlen(small) == 5 && !strncmp(small, full, 5));
  ttpu_buffer_release(x);
  ttpu_buffer_release(o);
  ttpu_runtime_destroy(rt);
}

/* Strict mode keeps scalar packs on the device: ops alternating between
 * two alpha values, and more alphas than packs kept, all compute with
 * their own value. */
static void test_kept_packs(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  float xv[3] = {1, 2, 3}, yv[3] = {10, 20, 30};
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, xv, 3);
  ttpu_buffer* yb = ttpu_test_upload_f32(t, rt, yv, 3);
  int64_t n = 3, st = 1;
  ttpu_tensor x = {xb, TTPU_F32, 1, &n, &st, 0};
  ttpu_tensor y = {yb, TTPU_F32, 1, &n, &st, 0};
  enum { N_OUT = 40 };
  ttpu_buffer* ob[N_OUT] = {0};
  for (int k = 0; k < N_OUT; ++k) {
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, sizeof(xv), &ob[k]));
    ttpu_tensor o = {ob[k], TTPU_F32, 1, &n, &st, 0};
    /* 0.5 and 2 alternate for the first ten, then 30 distinct values */
    double alpha = k < 10 ? (k % 2 ? 2.0 : 0.5) : (double)k;
    TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &y, &o, alpha));
  }
  for (int k = 0; k < N_OUT; ++k) {
    float r[3];
    TTPU_CHECK_OK(t, ttpu_buffer_download(ob[k], r, sizeof(r)));
    double alpha = k < 10 ? (k % 2 ? 2.0 : 0.5) : (double)k;
    for (int i = 0; i < 3; ++i)
      TTPU_CHECK(t, r[i] == (float)(xv[i] + alpha * yv[i]));
    ttpu_buffer_release(ob[k]);
  }
  ttpu_stats s;
  ttpu_runtime_stats(rt, -1, &s);
  TTPU_CHECK(t, s.compiles == 1);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(yb);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"from_env", test_from_env},
    {"options_taken", test_options_taken},
    {"caps", test_caps},
    {"reason_copy", test_reason_copy},
    {"kept_packs", test_kept_packs},
    {NULL, NULL},
};
TTPU_TEST_SUITE(options, kTests)
