/* test_pad.c - a padded version's true elements gathered in row-major
 * order (ttpu_pad_compact, what a download of a padded storage does). */
#include <stdint.h>
#include <string.h>

#include "prog/storage.h"
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

static const ttpu_test kTests[] = {
    {"inner_dim", test_inner_dim},
    {"two_dims_and_last", test_two_dims_and_last},
    {"unpadded", test_unpadded},
    {NULL, NULL},
};
TTPU_TEST_SUITE(pad, kTests)
