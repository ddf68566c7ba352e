/* test_pad.c - a padded version's true elements gathered in row-major
 * order (ttpu_pad_compact, what a download of a padded storage does), and
 * a storage stored padded after the fact (ttpu_buffer_pad_dim). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prog/storage.h"
#include "ttpu.h"
#include "ttpu_test.h"

/* [2, 4, 3] padded in dim 1 to hold 2 true rows: element (i, j, k) of the
 * version is 100 i + 10 j + k. */
static void test_inner_dim(ttpu_test_ctx* t) {
  int32_t v[2 * 4 * 3], out[2 * 2 * 3];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) v[(i * 4 + j) * 3 + k] = 100 * i + 10 * j + k;
  int64_t cap[3] = {2, 4, 3};
  ttpu_pad pad = {1 << 1, 2};
  memset(out, 0xff, sizeof(out));
  ttpu_pad_compact(v, out, sizeof(int32_t), 3, cap, &pad);
  int at = 0, ok = 1;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) ok &= out[at++] == 100 * i + 10 * j + k;
  TTPU_CHECK(t, ok);
}

/* Two padded dims sharing one true size, and the last dim padded. */
static void test_two_dims_and_last(ttpu_test_ctx* t) {
  int16_t v[4 * 4], out[3 * 3];
  for (int i = 0; i < 16; ++i) v[i] = (int16_t)i;
  int64_t cap[2] = {4, 4};
  ttpu_pad pad = {3, 3};
  ttpu_pad_compact(v, out, sizeof(int16_t), 2, cap, &pad);
  int ok = 1;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) ok &= out[i * 3 + j] == i * 4 + j;
  TTPU_CHECK(t, ok);
  int64_t logical[2];
  ttpu_pad_logical(&pad, 2, cap, logical);
  TTPU_CHECK(t, logical[0] == 3 && logical[1] == 3);
}

/* Not padded: a plain copy. */
static void test_unpadded(ttpu_test_ctx* t) {
  double v[5] = {1, 2, 3, 4, 5}, out[5] = {0};
  int64_t cap[1] = {5};
  ttpu_pad pad = {0, 0};
  ttpu_pad_compact(v, out, sizeof(double), 1, cap, &pad);
  TTPU_CHECK(t, !memcmp(v, out, sizeof(v)));
}

/* ttpu_buffer_pad_dim: the values stay; a second call, a size too small
 * for its bucket and a dim out of range leave the storage as it is. */
static void test_pad_dim(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  enum { A = 3, N = 70, C = 5 };
  float* v = malloc(sizeof(float) * A * N * C);
  float* back = malloc(sizeof(float) * A * N * C);
  ttpu_buffer *b = NULL, *small = NULL;
  int padded = -1, ok = v && back;
  for (int i = 0; ok && i < A * N * C; ++i) v[i] = (float)i * 0.5f;
  int64_t dims[3] = {A, N, C}, sdims[2] = {4, 2};
  ok = ok && !ttpu_buffer_create(rt, 0, sizeof(float) * A * N * C, &b) &&
       !ttpu_buffer_upload(b, v, TTPU_F32, dims, 3) &&
       !ttpu_buffer_pad_dim(b, TTPU_F32, dims, 3, 1, &padded);
  TTPU_CHECK(t, ok && padded == 1);
  TTPU_CHECK(t, !ttpu_buffer_download(b, back, sizeof(float) * A * N * C));
  TTPU_CHECK(t, !memcmp(v, back, sizeof(float) * A * N * C));
  TTPU_CHECK(t, !ttpu_buffer_pad_dim(b, TTPU_F32, dims, 3, 1, &padded) && padded == 1);
  ttpu_status* s = ttpu_buffer_pad_dim(b, TTPU_F32, dims, 3, 3, &padded);
  TTPU_CHECK(t, s != NULL && padded == 0);
  ttpu_status_free(s);
  TTPU_CHECK(t, !ttpu_buffer_create(rt, 0, sizeof(float) * 8, &small) &&
                !ttpu_buffer_upload(small, v, TTPU_F32, sdims, 2) &&
                !ttpu_buffer_pad_dim(small, TTPU_F32, sdims, 2, 1, &padded) &&
                padded == 0);
  ttpu_buffer_release(small);
  ttpu_buffer_release(b);
  free(v);
  free(back);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"pad_dim", test_pad_dim},
    {"inner_dim", test_inner_dim},
    {"two_dims_and_last", test_two_dims_and_last},
    {"unpadded", test_unpadded},
    {NULL, NULL},
};
TTPU_TEST_SUITE(pad, kTests)
