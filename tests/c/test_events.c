/* test_events.c - events (pending while the work before them runs, done
 * after, in record order, timed by the device), the non-blocking device
 * query, device information and the storage memory counts. */
#include <stdlib.h>
#include <string.h>

#include "ttpu_test.h"

/* The long work: dependent 1024x1024 matmuls, each far longer than
 * enqueueing it (a = b @ x, b = a @ x, ...; x = 1/N keeps ones ones). */
#define N 1024
#define MMS 12

typedef struct {
  ttpu_buffer* xb;
  ttpu_buffer* ab;
  ttpu_buffer* bb;
  int64_t sz[2], st[2];
  ttpu_tensor x, a, b;
} big_work;

static ttpu_buffer* upload_filled(ttpu_test_ctx* t, ttpu_runtime* rt,
                                  float value) {
  float* host = malloc((size_t)N * N * sizeof(float));
  if (!host) {
    ttpu_test_fail(t, __FILE__, __LINE__, "out of host memory");
    return NULL;
  }
  for (int i = 0; i < N * N; ++i) host[i] = value;
  ttpu_buffer* b = ttpu_test_upload_f32(t, rt, host, (int64_t)N * N);
  free(host);
  return b;
}

static int big_setup(ttpu_test_ctx* t, ttpu_runtime* rt, big_work* w) {
  memset(w, 0, sizeof(*w));
  w->xb = upload_filled(t, rt, 1.0f / N);
  w->bb = upload_filled(t, rt, 1.0f);
  if (!w->xb || !w->bb) return 0;
  ttpu_status* s = ttpu_buffer_create(rt, 0, (size_t)N * N * 4, &w->ab);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "%s", ttpu_status_message(s));
    ttpu_status_free(s);
    return 0;
  }
  w->sz[0] = w->sz[1] = N;
  w->st[0] = N;
  w->st[1] = 1;
  ttpu_tensor x = {w->xb, TTPU_F32, 2, w->sz, w->st, 0};
  ttpu_tensor a = {w->ab, TTPU_F32, 2, w->sz, w->st, 0};
  ttpu_tensor b = {w->bb, TTPU_F32, 2, w->sz, w->st, 0};
  w->x = x;
  w->a = a;
  w->b = b;
  return 1;
}

static ttpu_status* mm(ttpu_runtime* rt, const ttpu_tensor* x,
                       const ttpu_tensor* y, const ttpu_tensor* out) {
  return ttpu_test_binary(rt, "mm", x, y, out, NULL);
}

/* Enqueues `n` dependent matmuls (an even n leaves the result in b). */
static ttpu_status* big_enqueue(ttpu_runtime* rt, big_work* w, int n) {
  for (int i = 0; i < n; ++i) {
    ttpu_status* s = i % 2 ? mm(rt, &w->a, &w->x, &w->b)
                           : mm(rt, &w->b, &w->x, &w->a);
    if (s) return s;
  }
  return NULL;
}

static void big_free(big_work* w) {
  ttpu_buffer_release(w->xb);
  ttpu_buffer_release(w->ab);
  ttpu_buffer_release(w->bb);
}

static void test_pending_then_done(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  big_work w;
  if (!big_setup(t, rt, &w)) {
    big_free(&w);
    ttpu_runtime_destroy(rt);
    return;
  }
  /* Compiled and idle before anything is measured. */
  TTPU_CHECK_OK(t, big_enqueue(rt, &w, 2));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  int idle = 0;
  TTPU_CHECK_OK(t, ttpu_runtime_query(rt, 0, &idle));
  TTPU_CHECK(t, idle == 1);

  ttpu_event *start = NULL, *end = NULL, *after = NULL;
  TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &start));
  TTPU_CHECK(t, ttpu_event_device(start) == 0);
  TTPU_CHECK_OK(t, big_enqueue(rt, &w, MMS));
  TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &end));
  int done = -1;
  /* Nothing ran before start; the matmuls are still running at end. */
  TTPU_CHECK_OK(t, ttpu_event_query(start, &done));
  TTPU_CHECK(t, done == 1);
  TTPU_CHECK_OK(t, ttpu_event_query(end, &done));
  TTPU_CHECK(t, done == 0);
  TTPU_CHECK_OK(t, ttpu_runtime_query(rt, 0, &idle));
  TTPU_CHECK(t, idle == 0);
  double ms = 0;
  ttpu_status* s = ttpu_event_elapsed_ms(start, end, &ms);
  TTPU_CHECK(t, s && ttpu_status_code(s) == TTPU_FAILED_PRECONDITION);
  ttpu_status_free(s);

  /* Once synchronize returns, the event has completed. */
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, 0));
  TTPU_CHECK_OK(t, ttpu_event_query(end, &done));
  TTPU_CHECK(t, done == 1);
  TTPU_CHECK_OK(t, ttpu_event_wait(end));
  TTPU_CHECK_OK(t, ttpu_runtime_query(rt, 0, &idle));
  TTPU_CHECK(t, idle == 1);
  TTPU_CHECK_OK(t, ttpu_event_elapsed_ms(start, end, &ms));
  TTPU_CHECK(t, ms > 0);
  TTPU_CHECK_OK(t, ttpu_event_elapsed_ms(end, start, &ms));
  TTPU_CHECK(t, ms < 0);

  /* Nothing pending: done at once, and not before end. */
  TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &after));
  TTPU_CHECK_OK(t, ttpu_event_query(after, &done));
  TTPU_CHECK(t, done == 1);
  TTPU_CHECK_OK(t, ttpu_event_elapsed_ms(end, after, &ms));
  TTPU_CHECK(t, ms >= 0);

  /* The matmuls really ran (ones stay ones, up to rounding). */
  float* all = malloc((size_t)N * N * 4);
  TTPU_CHECK(t, all != NULL);
  ttpu_status* d = ttpu_buffer_download(w.bb, all, (size_t)N * N * 4);
  float first = all[0], last = all[N * N - 1];
  free(all);
  TTPU_CHECK_OK(t, d);
  TTPU_CHECK(t, first > 0.999f && first < 1.001f);
  TTPU_CHECK(t, last > 0.999f && last < 1.001f);

  ttpu_event_release(start);
  ttpu_event_release(end);
  ttpu_event_release(after);
  big_free(&w);
  ttpu_runtime_destroy(rt);
}

static void test_record_order(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  big_work w;
  if (!big_setup(t, rt, &w)) {
    big_free(&w);
    ttpu_runtime_destroy(rt);
    return;
  }
  TTPU_CHECK_OK(t, big_enqueue(rt, &w, 2));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  /* Many events among the work, released at once or kept: each one done
   * implies every earlier one done. */
  enum { EVENTS = 8 };
  ttpu_event* ev[EVENTS] = {0};
  for (int i = 0; i < EVENTS; ++i) {
    TTPU_CHECK_OK(t, big_enqueue(rt, &w, 2));
    TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &ev[i]));
    ttpu_event* dropped = NULL;
    TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &dropped));
    ttpu_event_release(dropped); /* pending: its callbacks keep it */
  }
  for (int round = 0; round < 3; ++round) {
    int seen_pending = 0;
    for (int i = 0; i < EVENTS; ++i) {
      int done = 0;
      TTPU_CHECK_OK(t, ttpu_event_query(ev[i], &done));
      if (!done) seen_pending = 1;
      TTPU_CHECK(t, !(done && seen_pending));
    }
  }
  TTPU_CHECK_OK(t, ttpu_event_wait(ev[EVENTS - 1]));
  for (int i = 0; i < EVENTS; ++i) {
    int done = 0;
    TTPU_CHECK_OK(t, ttpu_event_query(ev[i], &done));
    TTPU_CHECK(t, done == 1);
  }
  for (int i = 1; i < EVENTS; ++i) {
    double ms = -1;
    TTPU_CHECK_OK(t, ttpu_event_elapsed_ms(ev[i - 1], ev[i], &ms));
    TTPU_CHECK(t, ms >= 0);
  }
  /* An event nobody waits for, left pending at destroy. */
  TTPU_CHECK_OK(t, big_enqueue(rt, &w, 4));
  ttpu_event* left = NULL;
  TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &left));
  ttpu_event_release(left);
  for (int i = 0; i < EVENTS; ++i) ttpu_event_release(ev[i]);
  big_free(&w);
  ttpu_runtime_destroy(rt);
}

static void test_fused_window_before_event(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  float xv[4] = {1, 2, 3, 4};
  ttpu_buffer* xb = ttpu_test_upload_f32(t, rt, xv, 4);
  ttpu_buffer* ob = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &ob));
  int64_t sz[1] = {4}, st[1] = {1};
  ttpu_tensor x = {xb, TTPU_F32, 1, sz, st, 0};
  ttpu_tensor o = {ob, TTPU_F32, 1, sz, st, 0};
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_FUSED));
  ttpu_stats before, after;
  ttpu_runtime_stats(rt, 0, &before);
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &o, 1.0));
  ttpu_event* ev = NULL;
  TTPU_CHECK_OK(t, ttpu_event_record(rt, 0, &ev));
  ttpu_runtime_stats(rt, 0, &after);
  TTPU_CHECK(t, after.windows == before.windows + 1);
  TTPU_CHECK_OK(t, ttpu_event_wait(ev));
  float out[4];
  TTPU_CHECK_OK(t, ttpu_buffer_download(ob, out, sizeof(out)));
  TTPU_CHECK(t, out[0] == 2 && out[3] == 8);
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_STRICT));
  ttpu_event_release(ev);
  ttpu_buffer_release(xb);
  ttpu_buffer_release(ob);
  ttpu_runtime_destroy(rt);
}

static void test_bad_device(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_event* ev = NULL;
  ttpu_status* s = ttpu_event_record(rt, 1, &ev);
  TTPU_CHECK(t, s != NULL && ev == NULL);
  ttpu_status_free(s);
  int idle = 0;
  s = ttpu_runtime_query(rt, -1, &idle);
  TTPU_CHECK(t, s != NULL);
  ttpu_status_free(s);
  ttpu_device_info info;
  s = ttpu_runtime_device_info(rt, 5, &info);
  TTPU_CHECK(t, s != NULL);
  ttpu_status_free(s);
  ttpu_runtime_destroy(rt);
}

static void test_device_info(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 2);
  if (!rt) return;
  for (int d = 0; d < 2; ++d) {
    ttpu_device_info info;
    TTPU_CHECK_OK(t, ttpu_runtime_device_info(rt, d, &info));
    TTPU_CHECK(t, info.kind[0] != 0);
    TTPU_CHECK(t, info.id >= 0);
    int64_t free_b = 0, total_b = 0;
    TTPU_CHECK_OK(t, ttpu_runtime_memory_info(rt, d, &free_b, &total_b));
    TTPU_CHECK(t, total_b > 0 && free_b >= 0 && free_b <= total_b);
  }
  ttpu_device_info a, b;
  TTPU_CHECK_OK(t, ttpu_runtime_device_info(rt, 0, &a));
  TTPU_CHECK_OK(t, ttpu_runtime_device_info(rt, 1, &b));
  TTPU_CHECK(t, a.id != b.id);
  ttpu_runtime_destroy(rt);
}

static void test_memory_counts(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_memory_stats m0, m1, m2;
  ttpu_runtime_reset_accumulated(rt, -1);
  ttpu_runtime_reset_peak(rt, -1);
  ttpu_runtime_memory_stats(rt, 0, &m0);
  TTPU_CHECK(t, m0.allocations == 0 && m0.frees == 0);
  TTPU_CHECK(t, m0.peak_bytes_in_use == m0.bytes_in_use);
  TTPU_CHECK(t, m0.peak_buffers_in_use == m0.buffers_in_use);
  ttpu_buffer *a = NULL, *b = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 1000, &a));
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &b));
  ttpu_buffer_release(a);
  ttpu_runtime_memory_stats(rt, 0, &m1);
  TTPU_CHECK(t, m1.allocations == 2 && m1.frees == 1);
  TTPU_CHECK(t, m1.allocated_bytes == 1024 && m1.freed_bytes == 1000);
  TTPU_CHECK(t, m1.bytes_in_use == m0.bytes_in_use + 24);
  TTPU_CHECK(t, m1.peak_bytes_in_use == m0.bytes_in_use + 1024);
  TTPU_CHECK(t, m1.buffers_in_use == m0.buffers_in_use + 1);
  TTPU_CHECK(t, m1.peak_buffers_in_use == m0.buffers_in_use + 2);
  ttpu_runtime_reset_peak(rt, 0);
  ttpu_runtime_memory_stats(rt, -1, &m2);
  TTPU_CHECK(t, m2.peak_bytes_in_use == m2.bytes_in_use);
  TTPU_CHECK(t, m2.peak_buffers_in_use == m2.buffers_in_use);
  TTPU_CHECK(t, m2.allocations == 2);
  ttpu_runtime_reset_accumulated(rt, 0);
  ttpu_runtime_memory_stats(rt, 0, &m2);
  TTPU_CHECK(t, m2.allocations == 0 && m2.allocated_bytes == 0);
  TTPU_CHECK(t, m2.bytes_in_use == m1.bytes_in_use);
  ttpu_buffer_release(b);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"pending_then_done", test_pending_then_done},
    {"record_order", test_record_order},
    {"fused_window_before_event", test_fused_window_before_event},
    {"bad_device", test_bad_device},
    {"device_info", test_device_info},
    {"memory_counts", test_memory_counts},
    {NULL, NULL},
};
TTPU_TEST_SUITE(events, kTests)
