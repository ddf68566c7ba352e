/* test_coll.c - collectives among devices of one runtime (ttpu_coll.h),
 * on 2 and 4 CPU-plugin devices, against host arithmetic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"
#include "ttpu_coll.h"
#include "ttpu_test.h"

#define MAXM 4

/* A storage on `dev` holding n elements of dt from data, written with the
 * shape dims (NULL: flat). */
static ttpu_buffer* put(ttpu_test_ctx* t, ttpu_runtime* rt, int dev,
                        ttpu_dtype dt, const void* data, int64_t n,
                        const int64_t* dims, int ndim) {
  ttpu_buffer* b = NULL;
  ttpu_status* s = ttpu_buffer_create(rt, dev, (size_t)n * ttpu_dtype_size(dt), &b);
  if (!s && n) s = dims ? ttpu_buffer_upload(b, data, dt, dims, ndim)
                        : ttpu_buffer_upload(b, data, dt, &n, 1);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "put: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return b;
}

/* An unwritten storage of n elements of dt on dev. */
static ttpu_buffer* empty(ttpu_runtime* rt, int dev, ttpu_dtype dt, int64_t n) {
  ttpu_buffer* b = NULL;
  ttpu_status* s = ttpu_buffer_create(rt, dev, (size_t)n * ttpu_dtype_size(dt), &b);
  ttpu_status_free(s);
  return b;
}

static void release_all(ttpu_buffer** b, int n) {
  for (int i = 0; i < n; ++i)
    if (b[i]) ttpu_buffer_release(b[i]);
}

static ttpu_coll_call make_call(ttpu_coll_kind kind, ttpu_dtype dt, int n,
                                const ttpu_coll_member* m, int64_t count) {
  ttpu_coll_call c;
  memset(&c, 0, sizeof(c));
  c.kind = kind;
  c.dtype = dt;
  c.n_members = n;
  c.members = m;
  c.count = count;
  return c;
}

/* Input of member d, element i: distinct, signed, non-integral values. */
static float value(int d, int i) { return (float)((i + 1) * (d + 1)) * 0.5f - (float)d; }

/* Every all_reduce op, out of place, on n devices. */
static void all_reduce_ops(ttpu_test_ctx* t, int n) {
  ttpu_runtime* rt = ttpu_test_runtime(t, n);
  if (!rt) return;
  enum { N = 6 };
  ttpu_buffer* in[MAXM] = {0};
  ttpu_buffer* out[MAXM] = {0};
  ttpu_coll_member m[MAXM];
  for (int d = 0; d < n; ++d) {
    float v[N];
    for (int i = 0; i < N; ++i) v[i] = value(d, i);
    in[d] = put(t, rt, d, TTPU_F32, v, N, NULL, 0);
    out[d] = empty(rt, d, TTPU_F32, N);
    m[d].input = in[d];
    m[d].output = out[d];
  }
  for (int op = 0; op < TTPU_REDUCE_OP_COUNT; ++op) {
    ttpu_coll_call c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_F32, n, m, N);
    c.op = (ttpu_reduce_op)op;
    c.premul = 0.25;
    TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
    for (int d = 0; d < n; ++d) {
      float got[N];
      TTPU_CHECK_OK(t, ttpu_buffer_download(out[d], got, sizeof(got)));
      for (int i = 0; i < N; ++i) {
        double want = op == TTPU_REDUCE_PRODUCT ? 1 : op == TTPU_REDUCE_MIN ? INFINITY
                      : op == TTPU_REDUCE_MAX ? -INFINITY : 0;
        for (int r = 0; r < n; ++r) {
          double x = value(r, i);
          if (op == TTPU_REDUCE_PRODUCT) want *= x;
          else if (op == TTPU_REDUCE_MIN) want = fmin(want, x);
          else if (op == TTPU_REDUCE_MAX) want = fmax(want, x);
          else if (op == TTPU_REDUCE_PREMUL_SUM) want += x * 0.25;
          else want += x;
        }
        if (op == TTPU_REDUCE_AVG) want /= n;
        if (fabs(got[i] - want) > 1e-5 * fmax(1, fabs(want))) {
          ttpu_test_fail(t, __FILE__, __LINE__, "%s on %d devices: member %d "
                         "element %d = %g, want %g", ttpu_reduce_op_name(op), n,
                         d, i, got[i], want);
          return;
        }
      }
    }
  }
  release_all(in, n);
  release_all(out, n);
  ttpu_runtime_destroy(rt);
}

static void test_all_reduce_2(ttpu_test_ctx* t) { all_reduce_ops(t, 2); }
static void test_all_reduce_4(ttpu_test_ctx* t) { all_reduce_ops(t, 4); }

/* In place, integers: AVG truncates toward zero as C (and PyTorch's
 * "trunc" division) does; the storages keep their 2-d shape; a second run
 * reads the first's pending result; the program is compiled once. */
static void test_all_reduce_in_place_int(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 4);
  if (!rt) return;
  ttpu_buffer* b[MAXM] = {0};
  ttpu_coll_member m[MAXM];
  int64_t dims[2] = {2, 3};
  for (int d = 0; d < 4; ++d) {
    int32_t v[6];
    for (int i = 0; i < 6; ++i) v[i] = (i - 3) * (d + 2) + d;
    b[d] = put(t, rt, d, TTPU_I32, v, 6, dims, 2);
    m[d].input = m[d].output = b[d];
  }
  ttpu_coll_call c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_I32, 4, m, 6);
  c.op = TTPU_REDUCE_AVG;
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  ttpu_stats before;
  ttpu_runtime_stats(rt, 0, &before);
  c.op = TTPU_REDUCE_AVG;
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  ttpu_stats after;
  ttpu_runtime_stats(rt, 0, &after);
  TTPU_CHECK(t, after.compiles == before.compiles);
  TTPU_CHECK(t, after.cache_hits == before.cache_hits + 1);
  for (int d = 0; d < 4; ++d) {
    int32_t got[6];
    TTPU_CHECK_OK(t, ttpu_buffer_download(b[d], got, sizeof(got)));
    for (int i = 0; i < 6; ++i) {
      int32_t s = 0;
      for (int r = 0; r < 4; ++r) s += (i - 3) * (r + 2) + r;
      int32_t once = s / 4; /* every member now holds `once` */
      int32_t want = (once * 4) / 4;
      TTPU_CHECK(t, got[i] == want);
    }
  }
  release_all(b, 4);
  ttpu_runtime_destroy(rt);
}

/* Broadcast copies the root's bits exactly (-0.0, NaN payloads, inf). */
static void test_broadcast(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 4);
  if (!rt) return;
  ttpu_buffer* b[MAXM] = {0};
  ttpu_coll_member m[MAXM];
  uint32_t bits[4] = {0x80000000u, 0x7fc01234u, 0x7f800000u, 0x3f800001u};
  for (int d = 0; d < 4; ++d) {
    float v[4];
    if (d == 2) {
      memcpy(v, bits, sizeof(v));
    } else {
      for (int i = 0; i < 4; ++i) v[i] = (float)(d * 10 + i);
    }
    b[d] = put(t, rt, d, TTPU_F32, v, 4, NULL, 0);
    m[d].input = m[d].output = b[d];
  }
  ttpu_coll_call c = make_call(TTPU_COLL_BROADCAST, TTPU_F32, 4, m, 4);
  c.root = 2;
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int d = 0; d < 4; ++d) {
    uint32_t got[4];
    TTPU_CHECK_OK(t, ttpu_buffer_download(b[d], got, sizeof(got)));
    TTPU_CHECK(t, memcmp(got, bits, sizeof(bits)) == 0);
  }
  /* bool, root 0 */
  ttpu_buffer* q[2] = {0};
  ttpu_coll_member mq[2];
  uint8_t pattern[5] = {1, 0, 1, 1, 0}, zeros[5] = {0};
  q[0] = put(t, rt, 0, TTPU_BOOL, pattern, 5, NULL, 0);
  q[1] = put(t, rt, 1, TTPU_BOOL, zeros, 5, NULL, 0);
  for (int d = 0; d < 2; ++d) mq[d].input = mq[d].output = q[d];
  c = make_call(TTPU_COLL_BROADCAST, TTPU_BOOL, 2, mq, 5);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  uint8_t got[5];
  TTPU_CHECK_OK(t, ttpu_buffer_download(q[1], got, sizeof(got)));
  TTPU_CHECK(t, memcmp(got, pattern, 5) == 0);
  release_all(q, 2);
  release_all(b, 4);
  ttpu_runtime_destroy(rt);
}

/* all_gather (f64), reduce_scatter (sum, avg), all_to_all (i64). */
static void test_gather_scatter_all_to_all(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 4);
  if (!rt) return;
  enum { K = 3 };
  ttpu_buffer* in[MAXM] = {0};
  ttpu_buffer* out[MAXM] = {0};
  ttpu_coll_member m[MAXM];
  /* all_gather: K elements each, 4K out */
  for (int d = 0; d < 4; ++d) {
    double v[K];
    for (int i = 0; i < K; ++i) v[i] = d * 100 + i + 0.5;
    in[d] = put(t, rt, d, TTPU_F64, v, K, NULL, 0);
    out[d] = empty(rt, d, TTPU_F64, 4 * K);
    m[d].input = in[d];
    m[d].output = out[d];
  }
  ttpu_coll_call c = make_call(TTPU_COLL_ALL_GATHER, TTPU_F64, 4, m, K);
  TTPU_CHECK(t, ttpu_coll_output_count(&c) == 4 * K);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int d = 0; d < 4; ++d) {
    double got[4 * K];
    TTPU_CHECK_OK(t, ttpu_buffer_download(out[d], got, sizeof(got)));
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < K; ++i) TTPU_CHECK(t, got[r * K + i] == r * 100 + i + 0.5);
  }
  release_all(in, 4);
  release_all(out, 4);

  /* reduce_scatter: 4K elements each, K out */
  for (int d = 0; d < 4; ++d) {
    float v[4 * K];
    for (int i = 0; i < 4 * K; ++i) v[i] = (float)(i * (d + 1));
    in[d] = put(t, rt, d, TTPU_F32, v, 4 * K, NULL, 0);
    out[d] = empty(rt, d, TTPU_F32, K);
    m[d].input = in[d];
    m[d].output = out[d];
  }
  for (int avg = 0; avg < 2; ++avg) {
    c = make_call(TTPU_COLL_REDUCE_SCATTER, TTPU_F32, 4, m, 4 * K);
    c.op = avg ? TTPU_REDUCE_AVG : TTPU_REDUCE_SUM;
    TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
    for (int d = 0; d < 4; ++d) {
      float got[K];
      TTPU_CHECK_OK(t, ttpu_buffer_download(out[d], got, sizeof(got)));
      for (int i = 0; i < K; ++i) {
        float want = (float)((d * K + i) * (1 + 2 + 3 + 4)) / (avg ? 4.0f : 1.0f);
        TTPU_CHECK(t, got[i] == want);
      }
    }
  }
  release_all(in, 4);
  release_all(out, 4);

  /* all_to_all: chunk j of member i -> chunk i of member j */
  for (int d = 0; d < 4; ++d) {
    int64_t v[4 * K];
    for (int i = 0; i < 4 * K; ++i) v[i] = d * 1000 + i;
    in[d] = put(t, rt, d, TTPU_I64, v, 4 * K, NULL, 0);
    out[d] = empty(rt, d, TTPU_I64, 4 * K);
    m[d].input = in[d];
    m[d].output = out[d];
  }
  c = make_call(TTPU_COLL_ALL_TO_ALL, TTPU_I64, 4, m, 4 * K);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int j = 0; j < 4; ++j) {
    int64_t got[4 * K];
    TTPU_CHECK_OK(t, ttpu_buffer_download(out[j], got, sizeof(got)));
    for (int i = 0; i < 4; ++i)
      for (int e = 0; e < K; ++e) TTPU_CHECK(t, got[i * K + e] == i * 1000 + j * K + e);
  }
  release_all(in, 4);
  release_all(out, 4);
  ttpu_runtime_destroy(rt);
}

/* collective_permute: a ring, and a single send (the others get zeros). */
static void test_permute(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 4);
  if (!rt) return;
  ttpu_buffer* in[MAXM] = {0};
  ttpu_buffer* out[MAXM] = {0};
  ttpu_coll_member m[MAXM];
  for (int d = 0; d < 4; ++d) {
    float v[3] = {(float)d, (float)d + 0.5f, -1.0f};
    in[d] = put(t, rt, d, TTPU_F32, v, 3, NULL, 0);
    out[d] = empty(rt, d, TTPU_F32, 3);
    m[d].input = in[d];
    m[d].output = out[d];
  }
  int ring[4] = {1, 2, 3, 0};
  ttpu_coll_call c = make_call(TTPU_COLL_PERMUTE, TTPU_F32, 4, m, 3);
  c.peer = ring;
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int d = 0; d < 4; ++d) {
    float got[3];
    TTPU_CHECK_OK(t, ttpu_buffer_download(out[d], got, sizeof(got)));
    int from = (d + 3) % 4;
    TTPU_CHECK(t, got[0] == (float)from && got[1] == (float)from + 0.5f);
  }
  int one[4] = {-1, -1, 0, -1}; /* member 2 sends to member 0 */
  c.peer = one;
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int d = 0; d < 4; ++d) {
    float got[3];
    TTPU_CHECK_OK(t, ttpu_buffer_download(out[d], got, sizeof(got)));
    if (d == 0) TTPU_CHECK(t, got[0] == 2.0f && got[1] == 2.5f && got[2] == -1.0f);
    else TTPU_CHECK(t, got[0] == 0 && got[1] == 0 && got[2] == 0);
  }
  release_all(in, 4);
  release_all(out, 4);
  ttpu_runtime_destroy(rt);
}

/* Inputs written with different shapes and dtypes, or never written, and
 * 16-bit floats. */
static void test_layouts(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 2);
  if (!rt) return;
  ttpu_buffer* b[2] = {0};
  ttpu_coll_member m[2];
  float v[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {3, 2};
  b[0] = put(t, rt, 0, TTPU_F32, v, 6, dims, 2);
  b[1] = put(t, rt, 1, TTPU_F32, v, 6, NULL, 0);
  for (int d = 0; d < 2; ++d) m[d].input = m[d].output = b[d];
  ttpu_coll_call c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_F32, 2, m, 6);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int d = 0; d < 2; ++d) {
    float got[6];
    TTPU_CHECK_OK(t, ttpu_buffer_download(b[d], got, sizeof(got)));
    for (int i = 0; i < 6; ++i) TTPU_CHECK(t, got[i] == 2 * v[i]);
  }
  /* read as int32 bits: a max over the bit patterns of positive floats is
   * the larger float */
  c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_I32, 2, m, 6);
  c.op = TTPU_REDUCE_MAX;
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  float got[6];
  TTPU_CHECK_OK(t, ttpu_buffer_download(b[1], got, sizeof(got)));
  for (int i = 0; i < 6; ++i) TTPU_CHECK(t, got[i] == 2 * v[i]);
  release_all(b, 2);

  /* one member never written: reads as zeros */
  b[0] = empty(rt, 0, TTPU_F32, 4);
  float w[4] = {1, -2, 3, -4};
  b[1] = put(t, rt, 1, TTPU_F32, w, 4, NULL, 0);
  for (int d = 0; d < 2; ++d) m[d].input = m[d].output = b[d];
  c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_F32, 2, m, 4);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  float z[4];
  TTPU_CHECK_OK(t, ttpu_buffer_download(b[0], z, sizeof(z)));
  TTPU_CHECK(t, memcmp(z, w, sizeof(w)) == 0);
  release_all(b, 2);

  /* bfloat16 (raw bits of 1.5 and 2.25) summed, in place */
  uint16_t x0[2] = {0x3fc0, 0x4010}, x1[2] = {0x3fc0, 0x3fc0};
  b[0] = put(t, rt, 0, TTPU_BF16, x0, 2, NULL, 0);
  b[1] = put(t, rt, 1, TTPU_BF16, x1, 2, NULL, 0);
  for (int d = 0; d < 2; ++d) m[d].input = m[d].output = b[d];
  c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_BF16, 2, m, 2);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  uint16_t r[2];
  TTPU_CHECK_OK(t, ttpu_buffer_download(b[1], r, sizeof(r)));
  TTPU_CHECK(t, r[0] == 0x4040 && r[1] == 0x4070); /* 3.0, 3.75 */
  release_all(b, 2);
  ttpu_runtime_destroy(rt);
}

/* neg(x) into out, an op call on x's device. */
static ttpu_status* negate(ttpu_runtime* rt, ttpu_buffer* x, ttpu_buffer* out,
                           int64_t* n) {
  static const int64_t unit = 1;
  ttpu_tensor in = {x, TTPU_F32, 1, n, &unit, 0};
  ttpu_tensor o = {out, TTPU_F32, 1, n, &unit, 0};
  ttpu_arg arg = {0};
  arg.kind = TTPU_ARG_TENSOR;
  ttpu_op_call c = {0};
  c.op = ttpu_op_lookup("neg");
  c.n_args = 1;
  c.args = &arg;
  c.n_tensors = 1;
  c.tensors = &in;
  c.n_outputs = 1;
  c.outputs = &o;
  c.common_dtype = TTPU_F32;
  c.device = ttpu_buffer_device(x);
  return ttpu_op_run(rt, &c);
}

/* Ops before a collective are ordered before it and ops after it read its
 * result, in strict and in fused mode (the window runs first). */
static void test_ordering(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 2);
  if (!rt) return;
  for (int fused = 0; fused < 2; ++fused) {
    TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, fused ? TTPU_MODE_FUSED
                                                     : TTPU_MODE_STRICT));
    int64_t n = 5;
    ttpu_buffer* x[2] = {0};
    ttpu_buffer* y[2] = {0};
    ttpu_coll_member m[2];
    for (int d = 0; d < 2; ++d) {
      float v[5] = {1, 2, 3, 4, (float)d};
      x[d] = put(t, rt, d, TTPU_F32, v, 5, NULL, 0);
      y[d] = empty(rt, d, TTPU_F32, 5);
      TTPU_CHECK_OK(t, negate(rt, x[d], y[d], &n)); /* y = -x */
      m[d].input = m[d].output = y[d];
    }
    ttpu_coll_call c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_F32, 2, m, 5);
    TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
    for (int d = 0; d < 2; ++d) TTPU_CHECK_OK(t, negate(rt, y[d], x[d], &n));
    TTPU_CHECK_OK(t, ttpu_runtime_flush(rt));
    for (int d = 0; d < 2; ++d) {
      float got[5];
      TTPU_CHECK_OK(t, ttpu_buffer_download(x[d], got, sizeof(got)));
      TTPU_CHECK(t, got[0] == 2 && got[3] == 8 && got[4] == 1);
    }
    release_all(x, 2);
    release_all(y, 2);
  }
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_STRICT));
  ttpu_runtime_destroy(rt);
}

/* Members on some of the devices, in any order: member order, not device
 * order, decides where each piece goes. */
static void test_device_subset(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 4);
  if (!rt) return;
  int devs[3] = {3, 0, 2};
  ttpu_buffer* in[3] = {0};
  ttpu_buffer* out[3] = {0};
  ttpu_coll_member m[3];
  for (int k = 0; k < 3; ++k) {
    int32_t v[2] = {10 * k, 10 * k + 1};
    in[k] = put(t, rt, devs[k], TTPU_I32, v, 2, NULL, 0);
    out[k] = empty(rt, devs[k], TTPU_I32, 6);
    m[k].input = in[k];
    m[k].output = out[k];
  }
  ttpu_coll_call c = make_call(TTPU_COLL_ALL_GATHER, TTPU_I32, 3, m, 2);
  TTPU_CHECK_OK(t, ttpu_coll_run(rt, &c));
  for (int k = 0; k < 3; ++k) {
    int32_t got[6];
    TTPU_CHECK_OK(t, ttpu_buffer_download(out[k], got, sizeof(got)));
    for (int i = 0; i < 6; ++i) TTPU_CHECK(t, got[i] == 10 * (i / 2) + i % 2);
  }
  release_all(in, 3);
  release_all(out, 3);
  ttpu_runtime_destroy(rt);
}

static void expect_error(ttpu_test_ctx* t, ttpu_runtime* rt,
                         const ttpu_coll_call* c, ttpu_code code,
                         const char* text) {
  ttpu_status* s = ttpu_coll_run(rt, c);
  if (!s || ttpu_status_code(s) != code ||
      !strstr(ttpu_status_message(s), text))
    ttpu_test_fail(t, __FILE__, __LINE__, "want [%d] '%s', got %s", (int)code,
                   text, s ? ttpu_status_message(s) : "success");
  ttpu_status_free(s);
}

static void test_errors(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 2);
  if (!rt) return;
  float v[4] = {1, 2, 3, 4};
  ttpu_buffer* a = put(t, rt, 0, TTPU_F32, v, 4, NULL, 0);
  ttpu_buffer* a2 = put(t, rt, 0, TTPU_F32, v, 4, NULL, 0);
  ttpu_buffer* b = put(t, rt, 1, TTPU_F32, v, 3, NULL, 0);
  ttpu_buffer* b4 = put(t, rt, 1, TTPU_F32, v, 4, NULL, 0);
  ttpu_coll_member m[2] = {{a, a}, {a2, a2}};
  ttpu_coll_call c = make_call(TTPU_COLL_ALL_REDUCE, TTPU_F32, 2, m, 4);
  expect_error(t, rt, &c, TTPU_INVALID_ARGUMENT, "two members on tpu:0");
  m[1].input = m[1].output = b;
  expect_error(t, rt, &c, TTPU_INVALID_ARGUMENT, "member 1's input holds 12 bytes");
  m[1].input = m[1].output = b4;
  c.kind = TTPU_COLL_BROADCAST;
  c.root = 2;
  expect_error(t, rt, &c, TTPU_INVALID_ARGUMENT, "root 2 is not a member");
  c.kind = TTPU_COLL_REDUCE_SCATTER;
  c.count = 4;
  m[0].output = b; /* wrong device */
  expect_error(t, rt, &c, TTPU_INVALID_ARGUMENT, "output on tpu:1");
  m[0].output = a;
  expect_error(t, rt, &c, TTPU_INVALID_ARGUMENT, "cannot be its input");
  int dup[2] = {1, 1};
  c.kind = TTPU_COLL_PERMUTE;
  c.peer = dup;
  expect_error(t, rt, &c, TTPU_INVALID_ARGUMENT, "receives from two members");
  c.kind = TTPU_COLL_ALL_REDUCE;
  c.dtype = TTPU_BOOL;
  c.count = 16;
  c.op = TTPU_REDUCE_AVG;
  expect_error(t, rt, &c, TTPU_UNIMPLEMENTED, "avg is not defined for bool");
  ttpu_buffer_release(a);
  ttpu_buffer_release(a2);
  ttpu_buffer_release(b);
  ttpu_buffer_release(b4);
  ttpu_runtime_destroy(rt);
}

/* What the XLA CPU plugin offers for several processes, pinned: it takes
 * the multi-process create options and PJRT's key-value callbacks without
 * complaint, never calls the callbacks, and stays a single-process client
 * (only its own devices), so a program replicated over devices of another
 * process cannot compile. Collectives across processes therefore stage
 * through host memory over gloo (torchtpu.distributed). */
static int kv_calls;
static void* count_kv_call(void* args) {
  (void)args;
  kv_calls++;
  return NULL;
}

static void test_cpu_plugin_is_single_process(ttpu_test_ctx* t) {
  ttpu_pjrt_plugin* pl = ttpu_test_plugin(t);
  if (!pl) return;
  static const char* const names[3] = {"node_id", "num_nodes", "cpu_device_count"};
  const int64_t values[3] = {1, 2, 2};
  ttpu_pjrt_abi_named_value opt[3];
  for (int i = 0; i < 3; ++i) {
    TTPU_PJRT_INIT_ARGS(opt[i], ttpu_pjrt_abi_named_value, value_size);
    opt[i].name = names[i];
    opt[i].name_size = strlen(names[i]);
    opt[i].type = TTPU_PJRT_NV_INT64;
    opt[i].value.int64_value = values[i];
    opt[i].value_size = 1;
  }
  ttpu_pjrt_abi_client_create_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_client_create_args, kv_try_get_user_arg);
  a.create_options = opt;
  a.num_options = 3;
  a.kv_get_callback = a.kv_put_callback = a.kv_try_get_callback = (void*)count_kv_call;
  kv_calls = 0;
  TTPU_CHECK_OK(t, TTPU_PJRT_CALL(pl->api, client_create, a));
  ttpu_pjrt_abi_client_devices_args d;
  TTPU_PJRT_INIT_ARGS(d, ttpu_pjrt_abi_client_devices_args, num_devices);
  d.client = a.client;
  ttpu_status* s = TTPU_PJRT_CALL(pl->api, client_addressable_devices, d);
  ttpu_pjrt_abi_client_args c;
  TTPU_PJRT_INIT_ARGS(c, ttpu_pjrt_abi_client_args, client);
  c.client = a.client;
  ttpu_status_free(TTPU_PJRT_CALL(pl->api, client_destroy, c));
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, kv_calls == 0);
  TTPU_CHECK(t, d.num_devices == 2); /* its own devices only, for "node 1 of 2" too */

  /* A program over 4 replicas on a 2-device client: devices 2 and 3 would
   * be another process's; the plugin does not know them. */
  ttpu_pjrt_client* client = NULL;
  TTPU_CHECK_OK(t, ttpu_pjrt_client_create(pl, 2, &client));
  static const char prog[] =
      "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : "
      "i32} {\n  func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
      "    \"func.return\"(%a) : (tensor<2xf32>) -> ()\n  }\n}\n";
  int ids[4] = {0, 1, 2, 3};
  unsigned char opts[128];
  size_t n = ttpu_pjrt_replicated_options(ids, 4, opts, sizeof(opts));
  ttpu_pjrt_exec* e = NULL;
  s = ttpu_pjrt_compile(client, prog, sizeof(prog) - 1, opts, n, &e);
  ttpu_pjrt_exec_destroy(client, e);
  ttpu_pjrt_client_destroy(client);
  TTPU_CHECK(t, s != NULL);
  TTPU_CHECK(t, strstr(ttpu_status_message(s), "No matching device found for device_id 2") != NULL);
  ttpu_status_free(s);
}

static const ttpu_test kTests[] = {
    {"all_reduce_2", test_all_reduce_2},
    {"all_reduce_4", test_all_reduce_4},
    {"all_reduce_in_place_int", test_all_reduce_in_place_int},
    {"broadcast", test_broadcast},
    {"gather_scatter_all_to_all", test_gather_scatter_all_to_all},
    {"permute", test_permute},
    {"layouts", test_layouts},
    {"ordering", test_ordering},
    {"device_subset", test_device_subset},
    {"errors", test_errors},
    {"cpu_plugin_is_single_process", test_cpu_plugin_is_single_process},
    {NULL, NULL},
};
TTPU_TEST_SUITE(coll, kTests)
