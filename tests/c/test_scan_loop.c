/* test_scan_loop.c - a loop body recorded as a function (never run) and a
 * scan over it as one stablehlo.while (forward and reversed), run through
 * torchtpu::extern_call in strict and fused mode; the body's refusals (a
 * tensor it is not given, a host read inside it, an end without a begin). */
#include <stdlib.h>
#include <string.h>

#include "ttpu_test.h"

static int64_t k4[1] = {4}, k34[2] = {3, 4}, s1[1] = {1}, s34[2] = {4, 1};

static ttpu_tensor vec(ttpu_buffer* b) {
  return (ttpu_tensor){b, TTPU_F32, 1, k4, s1, 0};
}

static ttpu_buffer* fresh(ttpu_test_ctx* t, ttpu_runtime* rt, size_t nbytes) {
  ttpu_buffer* b = NULL;
  ttpu_status* s = ttpu_buffer_create(rt, 0, nbytes, &b);
  if (s) ttpu_test_fail(t, __FILE__, __LINE__, "buffer: %s", ttpu_status_message(s));
  ttpu_status_free(s);
  return b;
}

/* body(c, x) = (c + 2x, c + 2x + c) */
static ttpu_status* define_body(ttpu_test_ctx* t, ttpu_runtime* rt, char* name) {
  float z[4] = {0};
  ttpu_buffer* cb = ttpu_test_upload_f32(t, rt, z, 4);
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, z, 4);
  ttpu_buffer* nb = fresh(t, rt, 16);
  ttpu_buffer* yb = fresh(t, rt, 16);
  ttpu_tensor c = vec(cb), x = vec(xb), n = vec(nb), y = vec(yb);
  ttpu_status* s = ttpu_runtime_begin_function(rt);
  if (!s) {
    s = ttpu_test_add(rt, &c, &x, &n, 2.0);
    if (!s) s = ttpu_test_add(rt, &n, &c, &y, 1.0);
    ttpu_tensor params[2] = {c, x}, results[2] = {n, y};
    ttpu_status* e = ttpu_runtime_end_function(rt, params, 2, s ? NULL : results, 2,
                                               name, 128);
    if (!s) s = e;
    else ttpu_status_free(e);
  }
  ttpu_buffer_release(cb);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(nb);
  ttpu_buffer_release(yb);
  return s;
}

static void test_scan_runs(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  for (int run = 0; run < 4; ++run) {
    int fused = run & 1, reverse = run >> 1;
    TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, fused ? TTPU_MODE_FUSED : TTPU_MODE_STRICT));
    char body[128], loop[128];
    TTPU_CHECK_OK(t, define_body(t, rt, body));
    TTPU_CHECK(t, !strncmp(body, "ttpu_fn_", 8) && ttpu_extern_text(body));
    ttpu_tensor carry = {NULL, TTPU_F32, 1, k4, s1, 0};
    ttpu_tensor xs = {NULL, TTPU_F32, 2, k34, s34, 0};
    TTPU_CHECK_OK(t, ttpu_scan_define(body, 3, reverse, &carry, 1, &xs, 1, NULL, 0, &carry, 1,
                                      loop, sizeof loop));
    const char* text = ttpu_extern_text(loop);
    TTPU_CHECK(t, text && strstr(text, "stablehlo.while") && strstr(text, body));

    float c0[4] = {1, 2, 3, 4}, xv[12];
    for (int i = 0; i < 12; ++i) xv[i] = (float)(i * i);
    ttpu_buffer* cb = ttpu_test_upload_f32(t, rt, c0, 4);
    ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, xv, 12);
    ttpu_buffer* ob = fresh(t, rt, 16);
    ttpu_buffer* yb = fresh(t, rt, 48);
    ttpu_tensor in[2] = {vec(cb), {xb, TTPU_F32, 2, k34, s34, 0}};
    ttpu_tensor out[2] = {vec(ob), {yb, TTPU_F32, 2, k34, s34, 0}};
    TTPU_CHECK_OK(t, ttpu_test_extern_call(rt, loop, in, 2, out, 2));
    float r[4], ys[12], c[4];
    TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof r));
    TTPU_CHECK_OK(t, ttpu_buffer_download(yb, ys, sizeof ys));
    memcpy(c, c0, sizeof c);
    int ok = 1;
    for (int k = 0; k < 3; ++k) {
      int step = reverse ? 2 - k : k;
      for (int i = 0; i < 4; ++i) {
        float old = c[i];
        c[i] = old + 2 * xv[4 * step + i];
        ok &= ys[4 * step + i] == c[i] + old;
      }
    }
    for (int i = 0; i < 4; ++i) ok &= r[i] == c[i];
    TTPU_CHECK(t, ok);
    ttpu_buffer_release(cb);
    ttpu_buffer_release(xb);
    ttpu_buffer_release(ob);
    ttpu_buffer_release(yb);
  }
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_STRICT));
  ttpu_runtime_destroy(rt);
}

static void test_body_refusals(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  char name[128];
  ttpu_status* s = ttpu_runtime_end_function(rt, NULL, 0, NULL, 0, name, sizeof name);
  TTPU_CHECK(t, s && ttpu_status_code(s) == TTPU_FAILED_PRECONDITION);
  ttpu_status_free(s);

  float v[4] = {1, 2, 3, 4};
  ttpu_buffer* ab = ttpu_test_upload_f32(t, rt, v, 4);
  ttpu_buffer* bb = ttpu_test_upload_f32(t, rt, v, 4);
  ttpu_buffer* ob = fresh(t, rt, 16);
  ttpu_tensor a = vec(ab), b = vec(bb), o = vec(ob);
  /* b is read but not given */
  TTPU_CHECK_OK(t, ttpu_runtime_begin_function(rt));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &a, &b, &o, 1.0));
  s = ttpu_runtime_end_function(rt, &a, 1, &o, 1, name, sizeof name);
  TTPU_CHECK(t, s && ttpu_status_code(s) == TTPU_INVALID_ARGUMENT &&
                    strstr(ttpu_status_message(s), "not one of its inputs"));
  ttpu_status_free(s);
  /* a host read inside the body fails; the body is dropped */
  TTPU_CHECK_OK(t, ttpu_runtime_begin_function(rt));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &a, &b, &o, 1.0));
  float r[4];
  s = ttpu_buffer_download(ob, r, sizeof r);
  TTPU_CHECK(t, s && strstr(ttpu_status_message(s), "loop body"));
  ttpu_status_free(s);
  TTPU_CHECK_OK(t, ttpu_runtime_end_function(rt, NULL, 0, NULL, 0, name, sizeof name));
  /* the runtime goes on as before */
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &a, &b, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof r));
  TTPU_CHECK(t, r[0] == 2 && r[3] == 8);
  ttpu_buffer_release(ab);
  ttpu_buffer_release(bb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"scan_runs", test_scan_runs},
    {"body_refusals", test_body_refusals},
    {NULL, NULL},
};
TTPU_TEST_SUITE(scan_loop, kTests)
