/* ttpu_test.h - the C test runner's tiny framework.
 *
 * Adding tests: create tests/c/test_<area>.c (the Makefile picks up every
 * .c file in tests/c), write `static void test_x(ttpu_test_ctx* t)` functions that
 * use TTPU_CHECK / TTPU_CHECK_OK, list them in a NULL-terminated array and
 * register the array once at the end of the file:
 *
 *   static const ttpu_test kTests[] = {{"x", test_x}, {NULL, NULL}};
 *   TTPU_TEST_SUITE(area, kTests)
 *
 * Registration runs before main (a constructor), so no shared list needs
 * editing. The runner orders suites by name, then tests as listed, and
 * names each test "<area>.<x>". `ttpu_ctest FILTER...` runs only tests
 * whose full name contains one of the FILTERs.
 */
#ifndef TTPU_TEST_H_
#define TTPU_TEST_H_

#include <stdio.h>

#include "pjrt/ttpu_pjrt.h"
#include "ttpu.h"

/* Per-test state; a test may make its own to run sub-checks and read
 * `failed` afterwards. */
typedef struct ttpu_test_ctx {
  int failed;
} ttpu_test_ctx;
typedef void (*ttpu_test_fn)(ttpu_test_ctx* t);

typedef struct {
  const char* name;
  ttpu_test_fn fn;
} ttpu_test;

typedef struct ttpu_test_suite {
  const char* name;
  const ttpu_test* tests;
  struct ttpu_test_suite* next;
} ttpu_test_suite;

void ttpu_test_register(ttpu_test_suite* s);

#define TTPU_TEST_SUITE(sname, tests_array)                              \
  static ttpu_test_suite ttpu_suite_##sname = {#sname, tests_array, NULL}; \
  __attribute__((constructor)) static void ttpu_suite_ctor_##sname(void) { \
    ttpu_test_register(&ttpu_suite_##sname);                             \
  }

/* Records a failure with its location (the test then returns). */
void ttpu_test_fail(ttpu_test_ctx* t, const char* file, int line,
                    const char* fmt, ...) __attribute__((format(printf, 4, 5)));

/* Path of the plugin found for this run (borrowed), or NULL (test fails). */
const char* ttpu_test_plugin_path(ttpu_test_ctx* t);
/* The plugin loaded once for the whole run (borrowed), or NULL after
 * recording a failure. */
ttpu_pjrt_plugin* ttpu_test_plugin(ttpu_test_ctx* t);
/* NULL-terminated site-packages list the runner searches (borrowed). */
const char* const* ttpu_test_search_dirs(void);
/* A runtime on this run's plugin with `devices` CPU devices (caller
 * destroys), or NULL after recording a failure. */
ttpu_runtime* ttpu_test_runtime(ttpu_test_ctx* t, int devices);
/* A storage on device 0 holding v[0..n) as float32 (caller releases), or
 * NULL after recording a failure. */
ttpu_buffer* ttpu_test_upload_f32(ttpu_test_ctx* t, ttpu_runtime* rt,
                                  const float* v, int64_t n);
/* Runs the float32 binary op `op` (e.g. "mm") on x and y into out, with
 * a trailing float scalar argument when alpha is not NULL. */
ttpu_status* ttpu_test_binary(ttpu_runtime* rt, const char* op,
                              const ttpu_tensor* x, const ttpu_tensor* y,
                              const ttpu_tensor* out, const double* alpha);
/* Runs add.Tensor: out = x + alpha * y (float32 views as given). */
ttpu_status* ttpu_test_add(ttpu_runtime* rt, const ttpu_tensor* x,
                           const ttpu_tensor* y, const ttpu_tensor* out,
                           double alpha);

/* out = x + y as a call of autograd pass `task` (ttpu_op_call's
 * autograd_task; 0: none). */
ttpu_status* ttpu_test_add_in_pass(ttpu_runtime* rt, const ttpu_tensor* x,
                                   const ttpu_tensor* y,
                                   const ttpu_tensor* out, int task);

/* Runs torchtpu::extern_call of callee on in[0..n_in) into out[0..n_out). */
ttpu_status* ttpu_test_extern_call(ttpu_runtime* rt, const char* callee,
                                   const ttpu_tensor* in, int n_in,
                                   const ttpu_tensor* out, int n_out);

#define TTPU_CHECK(t, cond)                                          \
  do {                                                               \
    if (!(cond)) {                                                   \
      ttpu_test_fail((t), __FILE__, __LINE__, "check failed: %s", #cond); \
      return;                                                        \
    }                                                                \
  } while (0)

/* Fails (and frees the status) unless expr returns NULL. */
#define TTPU_CHECK_OK(t, expr)                                          \
  do {                                                                  \
    ttpu_status* ttpu_s_ = (expr);                                      \
    if (ttpu_s_) {                                                      \
      ttpu_test_fail((t), __FILE__, __LINE__, "%s failed: [%d] %s", #expr, \
                     (int)ttpu_status_code(ttpu_s_),                    \
                     ttpu_status_message(ttpu_s_));                     \
      ttpu_status_free(ttpu_s_);                                        \
      return;                                                           \
    }                                                                   \
  } while (0)

#endif /* TTPU_TEST_H_ */
