/* test_reliability.c - the bounded program cache, fork children, and
 * plugin calls that fail mid-run. */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "ttpu_test.h"

static int retired_count;
static void count_retired(void* ctx, ttpu_cache_entry* e) {
  (void)ctx;
  retired_count++;
  free(e->results);
}

static ttpu_status* put(ttpu_cache* c, int64_t k, ttpu_cache_entry** out) {
  ttpu_cache_entry e = {0};
  e.results = malloc(8); /* owned by the cache from here on */
  return ttpu_cache_insert(c, &k, 1, &e, out);
}

static void test_cache_lru(ttpu_test_ctx* t) {
  ttpu_cache* c = NULL;
  retired_count = 0;
  TTPU_CHECK_OK(t, ttpu_cache_create(3, count_retired, NULL, &c));
  ttpu_cache_entry* e;
  for (int64_t k = 1; k <= 3; ++k) TTPU_CHECK_OK(t, put(c, k, &e));
  int64_t k1 = 1, k2 = 2, k4 = 4, k9 = 9;
  TTPU_CHECK(t, ttpu_cache_find(c, &k1, 1) != NULL); /* 1 is now newest */
  TTPU_CHECK_OK(t, put(c, 4, &e));                   /* evicts 2 */
  TTPU_CHECK(t, ttpu_cache_size(c) == 3);
  TTPU_CHECK(t, retired_count == 1);
  TTPU_CHECK(t, ttpu_cache_find(c, &k2, 1) == NULL);
  TTPU_CHECK(t, ttpu_cache_was_evicted(c, &k2, 1));
  TTPU_CHECK(t, !ttpu_cache_was_evicted(c, &k9, 1));
  TTPU_CHECK(t, ttpu_cache_find(c, &k1, 1) != NULL);
  /* A pinned entry stays, however old. */
  ttpu_cache_entry* four = ttpu_cache_find(c, &k4, 1);
  TTPU_CHECK(t, four != NULL);
  four->pins = 1;
  for (int64_t k = 10; k < 20; ++k) TTPU_CHECK_OK(t, put(c, k, &e));
  TTPU_CHECK(t, ttpu_cache_find(c, &k4, 1) == four);
  TTPU_CHECK(t, ttpu_cache_size(c) == 3);
  /* Shrinking evicts at once; everything pinned may exceed the bound. */
  ttpu_cache_set_capacity(c, 1);
  TTPU_CHECK(t, ttpu_cache_size(c) == 1);
  TTPU_CHECK(t, ttpu_cache_find(c, &k4, 1) == four);
  TTPU_CHECK_OK(t, put(c, 30, &e));
  TTPU_CHECK(t, ttpu_cache_size(c) == 2); /* 4 pinned, 30 just handed out */
  four->pins = 0;
  ttpu_cache_set_capacity(c, 0); /* unbounded */
  for (int64_t k = 100; k < 400; ++k) TTPU_CHECK_OK(t, put(c, k, &e));
  TTPU_CHECK(t, ttpu_cache_size(c) == 302);
  TTPU_CHECK(t, ttpu_cache_evictions(c) == retired_count);
  ttpu_cache_destroy(c, NULL);
}

/* out[0..n) = x + y for float32 vectors of n elements. */
static ttpu_status* add_n(ttpu_test_ctx* t, ttpu_runtime* rt, int64_t n,
                          float* result) {
  float* v = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) v[i] = (float)i;
  ttpu_buffer* x = ttpu_test_upload_f32(t, rt, v, n);
  ttpu_buffer* o = NULL;
  ttpu_status* s = ttpu_buffer_create(rt, 0, (size_t)n * 4, &o);
  int64_t st = 1;
  if (!s && x) {
    ttpu_tensor tx = {x, TTPU_F32, 1, &n, &st, 0};
    ttpu_tensor to = {o, TTPU_F32, 1, &n, &st, 0};
    s = ttpu_test_add(rt, &tx, &tx, &to, 1.0);
  }
  if (!s && result) s = ttpu_buffer_download(o, result, (size_t)n * 4);
  free(v);
  ttpu_buffer_release(x);
  ttpu_buffer_release(o);
  return s;
}

static void test_program_cache_bound(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_runtime_set_program_cache_size(rt, 4);
  TTPU_CHECK(t, ttpu_runtime_program_cache_size(rt) == 4);
  float r[16];
  for (int64_t n = 1; n <= 12; ++n) {
    TTPU_CHECK_OK(t, add_n(t, rt, n, r));
    for (int64_t i = 0; i < n; ++i) TTPU_CHECK(t, r[i] == 2.0f * (float)i);
  }
  ttpu_stats st;
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.programs_loaded <= 4);
  TTPU_CHECK(t, st.programs_evicted == st.compiles - st.programs_loaded);
  int64_t compiles = st.compiles, recompiles = st.recompiles;
  /* The first program again: a reload, not a recompile of a new shape. */
  TTPU_CHECK_OK(t, add_n(t, rt, 1, r));
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.compiles == compiles + 1);
  TTPU_CHECK(t, st.recompiles == recompiles);
  TTPU_CHECK(t, st.programs_reloaded == 1);
  char reason[512];
  TTPU_CHECK(t, ttpu_runtime_last_compile_reason(rt, reason, sizeof(reason)) > 0);
  TTPU_CHECK(t, strstr(reason, "reloaded") != NULL);
  /* Everything finished: nothing waits to be unloaded. */
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.programs_retired == 0);
  ttpu_runtime_destroy(rt);
}

/* Programs evicted while their executions are still queued: they stay
 * loaded until the work is done, and the results are right. */
static void test_evict_while_running(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  ttpu_runtime_set_program_cache_size(rt, 1);
  enum { N = 24 };
  ttpu_buffer* outs[N] = {0};
  float v[64];
  for (int i = 0; i < 64; ++i) v[i] = (float)i;
  /* Each input a storage of its own: a shrinking view of one storage
   * would be read through one bucketed program. */
  ttpu_buffer* xs[N] = {0};
  for (int k = 0; k < N; ++k) {
    int64_t n = 64 - k, st = 1;
    ttpu_buffer* x = xs[k] = ttpu_test_upload_f32(t, rt, v, n);
    if (!x) return;
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, (size_t)n * 4, &outs[k]));
    ttpu_tensor tx = {x, TTPU_F32, 1, &n, &st, 0};
    ttpu_tensor to = {outs[k], TTPU_F32, 1, &n, &st, 0};
    TTPU_CHECK_OK(t, ttpu_test_add(rt, &tx, &tx, &to, (double)k));
  }
  /* The last executions' events are still held: their programs wait. */
  ttpu_stats st;
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.programs_retired >= 1);
  for (int k = 0; k < N; ++k) {
    float r[64];
    int64_t n = 64 - k;
    TTPU_CHECK_OK(t, ttpu_buffer_download(outs[k], r, (size_t)n * 4));
    for (int64_t i = 0; i < n; ++i)
      TTPU_CHECK(t, r[i] == (float)i * (1.0f + (float)k));
    ttpu_buffer_release(outs[k]);
  }
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.programs_loaded == 1);
  TTPU_CHECK(t, st.programs_retired == 0);
  for (int k = 0; k < N; ++k) ttpu_buffer_release(xs[k]);
  ttpu_runtime_destroy(rt);
}

/* Versions replaced, and storages released, while executions that read
 * them are still queued (large matmuls, so the queue is long): the old
 * buffers are destroyed once those executions finish, the host does not
 * wait for them, and every result is right. */
static void test_drop_while_running(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  enum { N = 256, STEPS = 6 };
  float* v = malloc(sizeof(float) * N * N);
  float* r = malloc(sizeof(float) * N * N);
  if (!v || !r) {
    free(v);
    free(r);
    TTPU_CHECK(t, 0);
    ttpu_runtime_destroy(rt);
    return;
  }
  for (int i = 0; i < N * N; ++i) v[i] = (float)(i % 7) / 8.0f;
  int64_t dims[2] = {N, N}, st[2] = {N, 1};
  ttpu_buffer* x = ttpu_test_upload_f32(t, rt, v, (int64_t)N * N);
  ttpu_buffer* acc = ttpu_test_upload_f32(t, rt, v, (int64_t)N * N);
  if (!x || !acc) goto out;
  ttpu_stats s;
  ttpu_runtime_stats(rt, -1, &s);
  int64_t live = s.live_buffers;
  for (int k = 0; k < STEPS; ++k) {
    /* a temporary read by the matmul, released at once */
    ttpu_buffer* tmp = NULL;
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, sizeof(float) * N * N, &tmp));
    if (!tmp) break;
    ttpu_tensor tx = {x, TTPU_F32, 2, dims, st, 0};
    ttpu_tensor tt = {tmp, TTPU_F32, 2, dims, st, 0};
    ttpu_tensor ta = {acc, TTPU_F32, 2, dims, st, 0};
    TTPU_CHECK_OK(t, ttpu_test_add(rt, &tx, &tx, &tt, 1.0));
    ttpu_buffer* prod = NULL;
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, sizeof(float) * N * N, &prod));
    if (!prod) {
      ttpu_buffer_release(tmp);
      break;
    }
    ttpu_tensor tp = {prod, TTPU_F32, 2, dims, st, 0};
    TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mm", &tt, &tx, &tp, NULL));
    ttpu_buffer_release(tmp);
    /* acc's version replaced while the matmul above may still run */
    TTPU_CHECK_OK(t, ttpu_test_add(rt, &ta, &tp, &ta, 0.0));
    ttpu_buffer_release(prod);
  }
  /* acc = x + 0 * products: x again, read through every replaced version */
  TTPU_CHECK_OK(t, ttpu_buffer_download(acc, r, sizeof(float) * N * N));
  int same = 1;
  for (int i = 0; i < N * N; ++i) same &= r[i] == v[i];
  TTPU_CHECK(t, same);
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_runtime_stats(rt, -1, &s);
  TTPU_CHECK(t, s.live_buffers == live);
out:
  ttpu_buffer_release(x);
  ttpu_buffer_release(acc);
  free(v);
  free(r);
  ttpu_runtime_destroy(rt);
}

/* The byte the child wrote to fd within `seconds` (-1: none); then reaps
 * the child, killing it if it lingers. The verdict travels through a pipe,
 * not the exit status: a memory checker running the child may replace that
 * with its own (the child leaves the parent's objects alone, by design). */
static int child_verdict(pid_t pid, int fd, int seconds) {
  struct pollfd p = {fd, POLLIN, 0};
  unsigned char verdict = 0xff;
  int got = poll(&p, 1, seconds * 1000) == 1 && read(fd, &verdict, 1) == 1;
  for (int i = 0; i < seconds * 10; ++i) {
    if (waitpid(pid, NULL, WNOHANG) == pid) return got ? verdict : -1;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return got ? verdict : -1;
}

static int refused(ttpu_status* s) {
  int ok = s && ttpu_status_code(s) == TTPU_FAILED_PRECONDITION &&
           strstr(ttpu_status_message(s), "forked child") &&
           strstr(ttpu_status_message(s), "spawn");
  ttpu_status_free(s);
  return ok;
}

static void test_fork_child_refuses(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  float v[4] = {1, 2, 3, 4}, r[4];
  ttpu_buffer* x = ttpu_test_upload_f32(t, rt, v, 4);
  if (!x) return;
  TTPU_CHECK_OK(t, add_n(t, rt, 4, r));
  int fds[2];
  TTPU_CHECK(t, pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: every call refuses, nothing hangs or crashes. */
    int bad = 0;
    int64_t n = 4, st = 1;
    ttpu_tensor tx = {x, TTPU_F32, 1, &n, &st, 0};
    bad |= !refused(ttpu_test_add(rt, &tx, &tx, &tx, 1.0));
    bad |= !refused(ttpu_buffer_download(x, r, sizeof(r)));
    bad |= !refused(ttpu_runtime_synchronize(rt, -1));
    ttpu_buffer* b = NULL;
    bad |= !refused(ttpu_buffer_create(rt, 0, 16, &b));
    bad |= !refused(ttpu_buffer_upload(x, v, TTPU_F32, &n, 1));
    ttpu_buffer_release(x); /* left alone */
    ttpu_runtime_destroy(rt); /* left alone */
    unsigned char verdict = (unsigned char)bad;
    _exit(write(fds[1], &verdict, 1) == 1 ? 0 : 1);
  }
  close(fds[1]);
  TTPU_CHECK(t, pid > 0);
  int verdict = child_verdict(pid, fds[0], 300);
  close(fds[0]);
  TTPU_CHECK(t, verdict == 0);
  /* The parent is unaffected. */
  TTPU_CHECK_OK(t, ttpu_buffer_download(x, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == v[i]);
  TTPU_CHECK_OK(t, add_n(t, rt, 4, r));
  TTPU_CHECK(t, r[3] == 6.0f);
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

static int names(ttpu_status* s, const char* what) {
  int ok = s && strstr(ttpu_status_message(s), what) != NULL;
  ttpu_status_free(s);
  return ok;
}

/* A runtime that compiles on the calling thread (the compile threads
 * option at 1), so that a failing plugin call fails the op that made it. */
static ttpu_runtime* runtime_compiling_inline(ttpu_test_ctx* t) {
  ttpu_runtime_options o;
  ttpu_runtime_options_from_env(&o);
  o.plugin_path = ttpu_test_plugin_path(t);
  o.cpu_device_count = 1;
  o.compile_threads = 1;
  ttpu_runtime* rt = NULL;
  ttpu_status* s = ttpu_runtime_create(&o, &rt);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "runtime: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return rt;
}

static void test_injected_plugin_faults(ttpu_test_ctx* t) {
  ttpu_runtime* rt = runtime_compiling_inline(t);
  if (!rt) return;
  float v[4] = {1, 2, 3, 4}, r[4];
  ttpu_buffer* x = ttpu_test_upload_f32(t, rt, v, 4);
  if (!x) return;
  int64_t n = 4, st = 1;
  ttpu_tensor tx = {x, TTPU_F32, 1, &n, &st, 0};
  /* An execute that fails leaves its output as it was. */
  ttpu_debug_inject_plugin_fault("loaded_executable_execute", 0, 1);
  TTPU_CHECK(t, names(ttpu_test_add(rt, &tx, &tx, &tx, 1.0),
                      "loaded_executable_execute"));
  TTPU_CHECK_OK(t, ttpu_buffer_download(x, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == v[i]);
  /* A failed compile is not cached: the next call compiles again. */
  ttpu_debug_inject_plugin_fault("client_compile", 0, 1);
  TTPU_CHECK(t, names(add_n(t, rt, 7, NULL), "client_compile"));
  TTPU_CHECK_OK(t, add_n(t, rt, 7, NULL));
  /* A failed read can be retried. */
  ttpu_debug_inject_plugin_fault("buffer_to_host_buffer", 0, 1);
  TTPU_CHECK(t, names(ttpu_buffer_download(x, r, sizeof(r)),
                      "buffer_to_host_buffer"));
  TTPU_CHECK_OK(t, ttpu_buffer_download(x, r, sizeof(r)));
  TTPU_CHECK(t, r[0] == 1.0f);
  /* An asynchronous failure is reported by the next synchronize, once. */
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &tx, &tx, &tx, 1.0));
  ttpu_debug_inject_plugin_fault("event_await", 0, 1);
  TTPU_CHECK(t, names(ttpu_runtime_synchronize(rt, -1), "event_await"));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK_OK(t, ttpu_buffer_download(x, r, sizeof(r)));
  TTPU_CHECK(t, r[3] == 8.0f);
  ttpu_debug_inject_plugin_fault(NULL, 0, 0);
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"cache_lru", test_cache_lru},
    {"program_cache_bound", test_program_cache_bound},
    {"evict_while_running", test_evict_while_running},
    {"drop_while_running", test_drop_while_running},
    {"fork_child_refuses", test_fork_child_refuses},
    {"injected_plugin_faults", test_injected_plugin_faults},
    {NULL, NULL},
};
TTPU_TEST_SUITE(reliability, kTests)
