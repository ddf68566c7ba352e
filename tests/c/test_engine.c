/* test_engine.c - the engine end to end from C: storages, op calls through
 * the lowering table, strided views, in-place writes, the compile cache. */
#include <math.h>
#include <string.h>

#include "ttpu_test.h"

static void test_add_and_cache(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  float xv[6] = {1, 2, 3, 4, 5, 6}, yv[6] = {10, 20, 30, 40, 50, 60};
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, xv, 6);
  ttpu_buffer* yb = ttpu_test_upload_f32(t, rt, yv, 6);
  ttpu_buffer* ob = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &ob));
  int64_t sz[2] = {2, 3}, st[2] = {3, 1};
  ttpu_tensor x = {xb, TTPU_F32, 2, sz, st, 0};
  ttpu_tensor y = {yb, TTPU_F32, 2, sz, st, 0};
  ttpu_tensor o = {ob, TTPU_F32, 2, sz, st, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &y, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &y, &o, 0.5)); /* new alpha: cache hit */
  float r[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == xv[i] + 0.5f * yv[i]);
  ttpu_stats st0;
  ttpu_runtime_stats(rt, -1, &st0);
  TTPU_CHECK(t, st0.compiles == 1);
  TTPU_CHECK(t, st0.cache_hits == 1);
  /* y transposed: a non-contiguous view gives a new program */
  int64_t tsz[2] = {2, 3}, tst[2] = {1, 2};
  ttpu_tensor yt = {yb, TTPU_F32, 2, tsz, tst, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &yt, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      TTPU_CHECK(t, r[i * 3 + j] == xv[i * 3 + j] + yv[i + 2 * j]);
  ttpu_runtime_stats(rt, -1, &st0);
  TTPU_CHECK(t, st0.compiles == 2);
  char reason[512];
  TTPU_CHECK(t, ttpu_runtime_last_compile_reason(rt, reason, sizeof(reason)) > 0);
  TTPU_CHECK(t, strstr(reason, "input 1") != NULL);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(yb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

/* x[:, 1] += y[:, 1] writes through a strided view of x's storage. */
static void test_inplace_through_view(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  float xv[6] = {1, 2, 3, 4, 5, 6}, yv[6] = {10, 20, 30, 40, 50, 60};
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, xv, 6);
  ttpu_buffer* yb = ttpu_test_upload_f32(t, rt, yv, 6);
  int64_t sz[1] = {2}, st[1] = {3};
  ttpu_tensor xc = {xb, TTPU_F32, 1, sz, st, 1};
  ttpu_tensor yc = {yb, TTPU_F32, 1, sz, st, 1};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &xc, &yc, &xc, 1.0));
  float r[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(xb, r, sizeof(r)));
  float want[6] = {1, 22, 3, 4, 55, 6};
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == want[i]);
  /* an overlapping read (as_strided windows) goes through a gather */
  int64_t wsz[2] = {2, 3}, wst[2] = {1, 1};
  ttpu_buffer* ob = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &ob));
  int64_t osz[2] = {2, 3}, ost[2] = {3, 1};
  ttpu_tensor w = {yb, TTPU_F32, 2, wsz, wst, 0};
  ttpu_tensor o = {ob, TTPU_F32, 2, osz, ost, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &w, &w, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) TTPU_CHECK(t, r[i * 3 + j] == 2 * yv[i + j]);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(yb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

static void test_unwritten_reads_zero(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer *a = NULL, *o = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &a));
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &o));
  int64_t sz[1] = {4}, st[1] = {1};
  ttpu_tensor x = {a, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor y = {o, TTPU_F32, 1, sz, st, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &y, 1.0));
  float r[4] = {1, 1, 1, 1};
  TTPU_CHECK_OK(t, ttpu_buffer_download(o, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == 0);
  ttpu_buffer_release(a);
  ttpu_buffer_release(o);
  ttpu_runtime_destroy(rt);
}

static void test_bad_calls(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  TTPU_CHECK(t, ttpu_op_lookup("no_such_op.default") == -1);
  ttpu_buffer* a = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &a));
  int64_t sz[1] = {8}, st[1] = {1};
  ttpu_tensor x = {a, TTPU_F32, 1, sz, st, 0}; /* 32 bytes > 16 */
  ttpu_status* s = ttpu_test_add(rt, &x, &x, &x, 1.0);
  TTPU_CHECK(t, s != NULL && ttpu_status_code(s) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(s);
  ttpu_buffer_release(a);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"add_and_cache", test_add_and_cache},
    {"inplace_through_view", test_inplace_through_view},
    {"unwritten_reads_zero", test_unwritten_reads_zero},
    {"bad_calls", test_bad_calls},
    {NULL, NULL},
};
TTPU_TEST_SUITE(engine, kTests)
