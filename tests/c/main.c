/* main.c - runs every registered C test; last line "N passed, N failed". */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_test.h"

#ifndef TTPU_DEFAULT_SITE_PACKAGES
#define TTPU_DEFAULT_SITE_PACKAGES ""
#endif

/* Test-runner state; a test binary has exactly one run. */
static ttpu_test_suite* g_suites;

static struct {
  const char* dirs[2];
  char* plugin_path;
  int plugin_path_tried;
  ttpu_pjrt_plugin* plugin;
  int plugin_tried;
  char* plugin_error;
} g_run;

void ttpu_test_register(ttpu_test_suite* s) {
  /* Insert sorted by name so the order does not depend on link order. */
  ttpu_test_suite** p = &g_suites;
  while (*p && strcmp((*p)->name, s->name) < 0) p = &(*p)->next;
  s->next = *p;
  *p = s;
}

static char g_first_failure[512];

void ttpu_test_fail(ttpu_test_ctx* t, const char* file, int line,
                    const char* fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stdout, "    %s:%d: %s\n", file, line, msg);
  /* The first failure of each test is repeated in the closing summary, so
   * a log's tail says what failed. */
  if (!t->failed)
    snprintf(g_first_failure, sizeof g_first_failure, "%s:%d: %s", file, line,
             msg);
  t->failed = 1;
}

const char* const* ttpu_test_search_dirs(void) { return g_run.dirs; }

const char* ttpu_test_plugin_path(ttpu_test_ctx* t) {
  if (!g_run.plugin_path_tried) {
    g_run.plugin_path_tried = 1;
    ttpu_status* s = ttpu_plugin_find(g_run.dirs, &g_run.plugin_path);
    if (s) {
      g_run.plugin_error = strdup(ttpu_status_message(s));
      ttpu_status_free(s);
    }
  }
  if (!g_run.plugin_path)
    ttpu_test_fail(t, __FILE__, __LINE__, "no plugin: %s",
                   g_run.plugin_error ? g_run.plugin_error : "?");
  return g_run.plugin_path;
}

ttpu_runtime* ttpu_test_runtime(ttpu_test_ctx* t, int devices) {
  ttpu_runtime_options o = {0};
  o.plugin_path = ttpu_test_plugin_path(t);
  o.cpu_device_count = devices;
  ttpu_runtime* rt = NULL;
  ttpu_status* s = ttpu_runtime_create(&o, &rt);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "runtime: %s", ttpu_status_message(s));
    ttpu_status_free(s);
    return NULL;
  }
  return rt;
}

ttpu_buffer* ttpu_test_upload_f32(ttpu_test_ctx* t, ttpu_runtime* rt,
                                  const float* v, int64_t n) {
  ttpu_buffer* b = NULL;
  ttpu_status* s = ttpu_buffer_create(rt, 0, (size_t)n * 4, &b);
  if (!s) s = ttpu_buffer_upload(b, v, TTPU_F32, &n, 1);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "upload: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return b;
}

/* op(x, y[, alpha]) into out, as a call of autograd pass `task`. */
static ttpu_status* binary_in_pass(ttpu_runtime* rt, const char* op,
                                   const ttpu_tensor* x, const ttpu_tensor* y,
                                   const ttpu_tensor* out, const double* alpha,
                                   int task) {
  ttpu_tensor ts[2] = {*x, *y};
  ttpu_arg args[3] = {{0}};
  args[0].kind = TTPU_ARG_TENSOR;
  args[0].tensor = 0;
  args[1].kind = TTPU_ARG_TENSOR;
  args[1].tensor = 1;
  if (alpha) {
    args[2].kind = TTPU_ARG_SCALAR;
    args[2].f = *alpha;
    args[2].scalar_dtype = TTPU_F64;
  }
  ttpu_op_call c = {0};
  c.op = ttpu_op_lookup(op);
  c.n_args = alpha ? 3 : 2;
  c.args = args;
  c.n_tensors = 2;
  c.tensors = ts;
  c.n_outputs = 1;
  c.outputs = out;
  c.common_dtype = TTPU_F32;
  c.autograd_task = task;
  return ttpu_op_run(rt, &c);
}

ttpu_status* ttpu_test_binary(ttpu_runtime* rt, const char* op,
                              const ttpu_tensor* x, const ttpu_tensor* y,
                              const ttpu_tensor* out, const double* alpha) {
  return binary_in_pass(rt, op, x, y, out, alpha, 0);
}

ttpu_status* ttpu_test_add_in_pass(ttpu_runtime* rt, const ttpu_tensor* x,
                                   const ttpu_tensor* y,
                                   const ttpu_tensor* out, int task) {
  static const double one = 1.0;
  return binary_in_pass(rt, "add.Tensor", x, y, out, &one, task);
}

ttpu_status* ttpu_test_add(ttpu_runtime* rt, const ttpu_tensor* x,
                           const ttpu_tensor* y, const ttpu_tensor* out,
                           double alpha) {
  return ttpu_test_binary(rt, "add.Tensor", x, y, out, &alpha);
}

ttpu_status* ttpu_test_extern_call(ttpu_runtime* rt, const char* callee,
                                   const ttpu_tensor* in, int n_in,
                                   const ttpu_tensor* out, int n_out) {
  ttpu_arg args[2];
  memset(args, 0, sizeof args);
  args[0].kind = TTPU_ARG_TENSORS;
  args[0].n = n_in;
  args[1].kind = TTPU_ARG_STR;
  args[1].tensor = -1;
  args[1].str = callee;
  ttpu_op_call call;
  memset(&call, 0, sizeof call);
  call.op = ttpu_op_lookup("torchtpu::extern_call");
  call.n_args = 2;
  call.args = args;
  call.n_tensors = n_in;
  call.tensors = in;
  call.n_outputs = n_out;
  call.outputs = out;
  return ttpu_op_run(rt, &call);
}

ttpu_pjrt_plugin* ttpu_test_plugin(ttpu_test_ctx* t) {
  const char* path = ttpu_test_plugin_path(t);
  if (!path) return NULL;
  if (!g_run.plugin_tried) {
    g_run.plugin_tried = 1;
    ttpu_status* s = ttpu_pjrt_plugin_load(path, &g_run.plugin);
    if (s) {
      free(g_run.plugin_error);
      g_run.plugin_error = strdup(ttpu_status_message(s));
      ttpu_status_free(s);
    }
  }
  if (!g_run.plugin)
    ttpu_test_fail(t, __FILE__, __LINE__, "plugin load failed: %s",
                   g_run.plugin_error ? g_run.plugin_error : "?");
  return g_run.plugin;
}

static int selected(const char* suite, const char* test, int argc,
                     char** argv) {
  if (argc < 2) return 1;
  char full[512];
  snprintf(full, sizeof(full), "%s.%s", suite, test);
  for (int i = 1; i < argc; i++)
    if (strstr(full, argv[i])) return 1;
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* env = getenv("TTPU_SITE_PACKAGES");
  /* Without a venv the Makefile passes "": search nothing rather than "/". */
  g_run.dirs[0] = env && *env ? env : TTPU_DEFAULT_SITE_PACKAGES;
  if (!*g_run.dirs[0]) g_run.dirs[0] = NULL;
  g_run.dirs[1] = NULL;
  /* Compile counts are part of what the tests check: no persistent cache
   * unless a test turns one on for itself. */
  setenv("TORCHTPU_DISK_CACHE", "0", 0);

  int passed = 0, failed = 0;
  enum { MAX_LISTED = 16 };
  char listed[MAX_LISTED][640];
  for (ttpu_test_suite* s = g_suites; s; s = s->next) {
    for (const ttpu_test* t = s->tests; t->name; t++) {
      if (!selected(s->name, t->name, argc, argv)) continue;
      printf("%s.%s ...\n", s->name, t->name);
      ttpu_test_ctx ctx = {0};
      t->fn(&ctx);
      printf("%s.%s %s\n", s->name, t->name, ctx.failed ? "FAIL" : "ok");
      if (ctx.failed && failed < MAX_LISTED)
        snprintf(listed[failed], sizeof listed[failed], "%s.%s (%s)", s->name,
                 t->name, g_first_failure);
      if (ctx.failed)
        failed++;
      else
        passed++;
    }
  }
  ttpu_pjrt_plugin_unload(g_run.plugin);
  free(g_run.plugin_path);
  free(g_run.plugin_error);
  for (int i = 0; i < failed && i < MAX_LISTED; i++)
    printf("FAILED %s\n", listed[i]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
