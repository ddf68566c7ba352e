/* test_host_access.c - the host working on a storage's bytes in place
 * (ttpu_buffer_host_begin/end) on the CPU plugin, whose device memory is
 * host memory: ordering against ops, a version replaced while open, an
 * unwritten storage, and the layouts it refuses. */
#include <string.h>

#include "ttpu_test.h"

static const float kX[6] = {1, 2, 3, 4, 5, 6};
static const float kY[6] = {10, 20, 30, 40, 50, 60};

static void test_caps(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_caps caps;
  ttpu_runtime_caps(rt, &caps);
  TTPU_CHECK(t, caps.host_code == 1);
  TTPU_CHECK(t, caps.host_access == 1);
  ttpu_runtime_destroy(rt);
}

/* The host's writes are the storage's content for the ops after the end. */
static void test_write_in_place(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, kX, 6);
  void* data = NULL;
  ttpu_host_access* a = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(xb, 1, &data, &a));
  TTPU_CHECK(t, data != NULL && a != NULL);
  if (!a) return;
  float* f = data;
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, f[i] == kX[i]);
  for (int i = 0; i < 6; ++i) f[i] *= 10;
  ttpu_buffer_host_end(a);
  float r[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(xb, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == 10 * kX[i]);
  /* and a program reads them */
  ttpu_buffer* ob = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &ob));
  int64_t sz[1] = {6}, st[1] = {1};
  ttpu_tensor x = {xb, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor o = {ob, TTPU_F32, 1, sz, st, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == 20 * kX[i]);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

/* A read access sees the op that wrote the storage just before; a write
 * access begins only once the ops reading the old bytes are done. */
static void test_ordering(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, kX, 6);
  ttpu_buffer* yb = ttpu_test_upload_f32(t, rt, kY, 6);
  ttpu_buffer *sb = NULL, *ob = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &sb));
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &ob));
  int64_t sz[1] = {6}, st[1] = {1};
  ttpu_tensor x = {xb, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor y = {yb, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor s = {sb, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor o = {ob, TTPU_F32, 1, sz, st, 0};
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &y, &s, 1.0)); /* s = x + y */
  void* data = NULL;
  ttpu_host_access* a = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(sb, 0, &data, &a));
  for (int i = 0; a && i < 6; ++i) TTPU_CHECK(t, ((float*)data)[i] == kX[i] + kY[i]);
  ttpu_buffer_host_end(a);
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &s, &s, &o, 1.0)); /* o reads s */
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(sb, 1, &data, &a));
  if (a) memset(data, 0, 24);
  ttpu_buffer_host_end(a);
  float r[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == 2 * (kX[i] + kY[i]));
  TTPU_CHECK_OK(t, ttpu_buffer_download(sb, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == 0);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(yb);
  ttpu_buffer_release(sb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

/* An op replaces the version while the host works on it: the op neither
 * donates nor frees the bytes the host holds, and its result wins. */
static void test_replaced_while_open(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, kX, 6);
  ttpu_buffer* yb = ttpu_test_upload_f32(t, rt, kY, 6);
  int64_t sz[1] = {6}, st[1] = {1};
  ttpu_tensor x = {xb, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor y = {yb, TTPU_F32, 1, sz, st, 0};
  void *d1 = NULL, *d2 = NULL;
  ttpu_host_access *a1 = NULL, *a2 = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(xb, 1, &d1, &a1));
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(xb, 0, &d2, &a2)); /* nested */
  TTPU_CHECK(t, d1 == d2);
  for (int k = 0; k < 3; ++k) TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &y, &x, 1.0));
  float r[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(xb, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == kX[i] + 3 * kY[i]);
  /* the held bytes are still the old version's, and still writable */
  float* f = d1;
  for (int i = 0; a1 && i < 6; ++i) TTPU_CHECK(t, f[i] == kX[i]);
  for (int i = 0; a1 && i < 6; ++i) f[i] = -1;
  ttpu_buffer_host_end(a2);
  ttpu_buffer_host_end(a1);
  TTPU_CHECK_OK(t, ttpu_buffer_download(xb, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == kX[i] + 3 * kY[i]);
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_buffer_release(xb);
  ttpu_buffer_release(yb);
  ttpu_runtime_destroy(rt);
}

/* The storage may go while an access is open: the access keeps it. */
static void test_release_while_open(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, kX, 6);
  void* data = NULL;
  ttpu_host_access* a = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(xb, 1, &data, &a));
  ttpu_buffer_release(xb);
  for (int i = 0; a && i < 6; ++i) TTPU_CHECK(t, ((float*)data)[i] == kX[i]);
  ttpu_buffer_host_end(a);
  ttpu_runtime_destroy(rt);
}

static void test_unwritten_is_zeros(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer* b = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &b));
  void* data = NULL;
  ttpu_host_access* a = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_host_begin(b, 1, &data, &a));
  float* f = data;
  for (int i = 0; a && i < 6; ++i) TTPU_CHECK(t, f[i] == 0);
  for (int i = 0; a && i < 6; ++i) f[i] = kY[i];
  ttpu_buffer_host_end(a);
  float r[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(b, r, sizeof(r)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == kY[i]);
  ttpu_buffer_release(b);
  ttpu_runtime_destroy(rt);
}

/* A version written with a shape of rank 2 is refused (its layout is the
 * plugin's choice); the caller copies instead. */
static void test_refuses_shaped_version(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_buffer* b = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &b));
  int64_t dims[2] = {2, 3};
  TTPU_CHECK_OK(t, ttpu_buffer_upload(b, kX, TTPU_F32, dims, 2));
  void* data = NULL;
  ttpu_host_access* a = NULL;
  ttpu_status* s = ttpu_buffer_host_begin(b, 0, &data, &a);
  TTPU_CHECK(t, s != NULL && ttpu_status_code(s) == TTPU_UNIMPLEMENTED);
  TTPU_CHECK(t, a == NULL && data == NULL);
  ttpu_status_free(s);
  ttpu_buffer_release(b);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"caps", test_caps},
    {"write_in_place", test_write_in_place},
    {"ordering", test_ordering},
    {"replaced_while_open", test_replaced_while_open},
    {"release_while_open", test_release_while_open},
    {"unwritten_is_zeros", test_unwritten_is_zeros},
    {"refuses_shaped_version", test_refuses_shaped_version},
    {NULL, NULL},
};
TTPU_TEST_SUITE(host_access, kTests)
