/* test_compile_pool.c - the compile pool (prog/pool.h) on its own, and
 * strict mode compiling on it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prog/pool.h"
#include "ttpu_test.h"

/* add of two f32[n] */
static char* add_program(int n) {
  char* text = malloc(512);
  if (!text) return NULL;
  snprintf(text, 512,
           "module @m { func.func public @main(%%arg0: tensor<%dxf32>, "
           "%%arg1: tensor<%dxf32>) -> (tensor<%dxf32>) { %%0 = "
           "\"stablehlo.add\"(%%arg0, %%arg1) : (tensor<%dxf32>, "
           "tensor<%dxf32>) -> tensor<%dxf32>  \"func.return\"(%%0) : "
           "(tensor<%dxf32>) -> () } }",
           n, n, n, n, n, n, n);
  return text;
}

static ttpu_pjrt_client* make_client(ttpu_test_ctx* t) {
  ttpu_pjrt_plugin* p = ttpu_test_plugin(t);
  if (!p) return NULL;
  ttpu_pjrt_client* c = NULL;
  ttpu_status* s = ttpu_pjrt_client_create(p, 1, &c);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "client: %s", ttpu_status_message(s));
    ttpu_status_free(s);
    return NULL;
  }
  return c;
}

/* Jobs record the order they ran in; the first waits for a gate. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open;
  int order[64];
  int n;
} journal;

typedef struct {
  journal* j;
  int id;
  int gate;  /* waits until the journal's gate opens */
  int fail;  /* returns an error */
} step;

static ttpu_status* run_step(void* arg) {
  step* s = arg;
  pthread_mutex_lock(&s->j->mu);
  while (s->gate && !s->j->open) pthread_cond_wait(&s->j->cv, &s->j->mu);
  s->j->order[s->j->n++] = s->id;
  pthread_mutex_unlock(&s->j->mu);
  return s->fail ? ttpu_status_make(TTPU_INTERNAL, "step %d failed", s->id)
                 : NULL;
}

static void open_gate(journal* j) {
  pthread_mutex_lock(&j->mu);
  j->open = 1;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

/* Opens the gate after a pause (a thread's body). */
static void* open_gate_later(void* arg) {
  struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
  open_gate(arg);
  return NULL;
}

/* One thread runs its jobs in submission order; threads start lazily. */
static void test_order(ttpu_test_ctx* t) {
  journal j = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
  step st[20];
  ttpu_pool_job* jobs[20] = {0};
  ttpu_pool* p = NULL;
  TTPU_CHECK_OK(t, ttpu_pool_create(1, &p));
  TTPU_CHECK(t, ttpu_pool_started_threads(p) == 0);
  for (int k = 0; k < 20; ++k) {
    st[k] = (step){&j, k, k == 0, k == 7};
    TTPU_CHECK_OK(t, ttpu_pool_submit_fn(p, run_step, &st[k], &jobs[k]));
  }
  TTPU_CHECK(t, ttpu_pool_started_threads(p) == 1);
  TTPU_CHECK(t, !ttpu_pool_job_done(jobs[19]));
  open_gate(&j);
  ttpu_pool_job_wait(jobs[19]);
  for (int k = 0; k < 20; ++k) {
    TTPU_CHECK(t, ttpu_pool_job_done(jobs[k]));
    TTPU_CHECK(t, j.order[k] == k);
    /* A failing job keeps its own status; the others succeed. */
    const ttpu_status* s = ttpu_pool_job_status(jobs[k]);
    TTPU_CHECK(t, k == 7 ? s && strstr(ttpu_status_message(s), "step 7")
                         : s == NULL);
    ttpu_pool_job_free(jobs[k]);
  }
  ttpu_pool_destroy(p);
}

/* Many compiles on three threads: each gets its executable; a bad text
 * fails only its own job. */
static void test_many_compiles(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t);
  if (!c) return;
  ttpu_pool* p = NULL;
  TTPU_CHECK_OK(t, ttpu_pool_create(3, &p));
  enum { N = 24 };
  ttpu_pool_job* jobs[N] = {0};
  for (int k = 0; k < N; ++k) {
    char* text = k == 5 ? strdup("module { this is not stablehlo") : add_program(k + 1);
    TTPU_CHECK_OK(t, ttpu_pool_submit_compile(p, c, text, strlen(text), NULL,
                                              0, &jobs[k]));
  }
  for (int k = 0; k < N; ++k) {
    ttpu_pool_job_wait(jobs[k]);
    const ttpu_status* s = ttpu_pool_job_status(jobs[k]);
    if (k == 5) {
      TTPU_CHECK(t, s != NULL);
      TTPU_CHECK(t, ttpu_pool_job_take_exec(jobs[k]) == NULL);
    } else {
      TTPU_CHECK(t, s == NULL);
      TTPU_CHECK(t, ttpu_pool_job_seconds(jobs[k]) > 0);
    }
  }
  /* One executable taken and run: the compile is a real one. */
  ttpu_pjrt_exec* e = ttpu_pool_job_take_exec(jobs[3]);
  TTPU_CHECK(t, e && ttpu_pjrt_exec_num_outputs(c, e) == 1);
  ttpu_pjrt_exec_destroy(c, e);
  for (int k = 0; k < N; ++k) ttpu_pool_job_free(jobs[k]); /* frees the rest */
  ttpu_pool_destroy(p);
  ttpu_pjrt_client_destroy(c);
}

/* Destroy with jobs queued and running: the running one finishes, the
 * queued ones are cancelled, and every job can still be freed after. A job
 * freed before it started is cancelled. */
static void test_destroy_in_flight(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t);
  if (!c) return;
  journal j = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
  step first = {&j, 0, 1, 0};
  ttpu_pool* p = NULL;
  TTPU_CHECK_OK(t, ttpu_pool_create(1, &p));
  ttpu_pool_job* gate = NULL;
  ttpu_pool_job* jobs[6] = {0};
  TTPU_CHECK_OK(t, ttpu_pool_submit_fn(p, run_step, &first, &gate));
  for (int k = 0; k < 6; ++k) {
    char* text = add_program(100 + k);
    TTPU_CHECK_OK(t, ttpu_pool_submit_compile(p, c, text, strlen(text), NULL,
                                              0, &jobs[k]));
  }
  ttpu_pool_job_free(jobs[0]); /* queued: cancelled, not waited for */
  jobs[0] = NULL;
  /* The gate opens shortly after destroy began waiting. */
  pthread_t opener;
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
  TTPU_CHECK(t, pthread_create(&opener, NULL, open_gate_later, &j) == 0);
  ttpu_pool_destroy(p);
  pthread_join(opener, NULL);
  TTPU_CHECK(t, ttpu_pool_job_done(gate) && !ttpu_pool_job_status(gate));
  int cancelled = 0;
  for (int k = 1; k < 6; ++k) {
    TTPU_CHECK(t, ttpu_pool_job_done(jobs[k]));
    const ttpu_status* s = ttpu_pool_job_status(jobs[k]);
    if (s && strstr(ttpu_status_message(s), "cancelled")) cancelled++;
  }
  TTPU_CHECK(t, cancelled >= 4); /* all but perhaps one taken meanwhile */
  ttpu_pool_job_free(gate);
  for (int k = 0; k < 6; ++k) ttpu_pool_job_free(jobs[k]);
  ttpu_pjrt_client_destroy(c);
}

/* A pool of no threads runs each job inside submit. */
static void test_inline(ttpu_test_ctx* t) {
  journal j = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, {0}, 0};
  step st = {&j, 3, 0, 0};
  ttpu_pool* p = NULL;
  TTPU_CHECK_OK(t, ttpu_pool_create(0, &p));
  ttpu_pool_job* job = NULL;
  TTPU_CHECK_OK(t, ttpu_pool_submit_fn(p, run_step, &st, &job));
  TTPU_CHECK(t, j.n == 1 && ttpu_pool_job_done(job));
  TTPU_CHECK(t, ttpu_pool_started_threads(p) == 0);
  ttpu_pool_job_free(job);
  ttpu_pool_destroy(p);
  TTPU_CHECK(t, ttpu_pool_default_threads() >= 1);
}

/* TORCHTPU_COMPILE_THREADS: its value, else the usable cores (at most
 * 16). */
static void test_option_from_env(ttpu_test_ctx* t) {
  const char* v = getenv("TORCHTPU_COMPILE_THREADS");
  char* old = v ? strdup(v) : NULL;
  ttpu_runtime_options o;
  unsetenv("TORCHTPU_COMPILE_THREADS");
  ttpu_runtime_options_from_env(&o);
  int dflt = o.compile_threads;
  setenv("TORCHTPU_COMPILE_THREADS", "3", 1);
  ttpu_runtime_options_from_env(&o);
  int three = o.compile_threads;
  setenv("TORCHTPU_COMPILE_THREADS", "0", 1);
  ttpu_runtime_options_from_env(&o);
  int zero = o.compile_threads;
  if (old) setenv("TORCHTPU_COMPILE_THREADS", old, 1);
  else unsetenv("TORCHTPU_COMPILE_THREADS");
  free(old);
  int cores = ttpu_pool_default_threads();
  TTPU_CHECK(t, dflt == (cores > 16 ? 16 : cores));
  TTPU_CHECK(t, three == 3);
  TTPU_CHECK(t, zero == 0);
}

/* ------------------------------------------------------------ strict */

/* The shape of every tensor below: 4 contiguous floats. */
static const int64_t kLen4 = 4, kStride1 = 1;
static const float kX[4] = {1, 2, 3, 4};

static ttpu_tensor vec4(ttpu_buffer* b) {
  ttpu_tensor v = {b, TTPU_F32, 1, &kLen4, &kStride1, 0};
  return v;
}

/* A runtime with `threads` compile threads, x = kX uploaded on it and its
 * tensor; NULL (a failure recorded) when either fails. */
static ttpu_runtime* pool_setup(ttpu_test_ctx* t, int threads, ttpu_buffer** x,
                                ttpu_tensor* tx);

/* A fresh 16-byte storage (caller releases), or NULL after recording a
 * failure. */
static ttpu_buffer* new_vec4(ttpu_test_ctx* t, ttpu_runtime* rt) {
  ttpu_buffer* b = NULL;
  ttpu_status* s = ttpu_buffer_create(rt, 0, 16, &b);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "buffer: %s", ttpu_status_message(s));
    ttpu_status_free(s);
    return NULL;
  }
  return b;
}

static ttpu_runtime* pool_runtime(ttpu_test_ctx* t, int threads) {
  ttpu_runtime_options o;
  ttpu_runtime_options_from_env(&o);
  o.plugin_path = ttpu_test_plugin_path(t);
  o.cpu_device_count = 1;
  o.compile_threads = threads;
  o.disk_cache = 0;
  ttpu_runtime* rt = NULL;
  ttpu_status* s = ttpu_runtime_create(&o, &rt);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "runtime: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return rt;
}

static ttpu_runtime* pool_setup(ttpu_test_ctx* t, int threads, ttpu_buffer** x,
                                ttpu_tensor* tx) {
  ttpu_runtime* rt = pool_runtime(t, threads);
  if (!rt) return NULL;
  *x = ttpu_test_upload_f32(t, rt, kX, 4);
  if (!*x) {
    ttpu_runtime_destroy(rt);
    return NULL;
  }
  *tx = vec4(*x);
  return rt;
}

/* A chain of ops whose programs compile on the pool, each reading what
 * the one before wrote, with an in-place op and a storage released while
 * its reader waits: the values and the compile log's order are those of
 * program order. */
static void test_strict_chain(ttpu_test_ctx* t) {
  ttpu_buffer* x = NULL;
  ttpu_tensor tx;
  ttpu_runtime* rt = pool_setup(t, 2, &x, &tx);
  if (!rt) return;
  const float* xv = kX;
  const char* ops[] = {"add.Tensor", "mul.Tensor", "sub.Tensor", "maximum"};
  ttpu_buffer* tmp = new_vec4(t, rt);
  ttpu_buffer* out = new_vec4(t, rt);
  if (!tmp || !out) return;
  ttpu_tensor tt = vec4(tmp), to = vec4(out);
  double one = 1.0;
  /* tmp = x + x; tmp = tmp * x (in place); out = tmp - x; out = max(out, x) */
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, ops[0], &tx, &tx, &tt, &one));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, ops[1], &tt, &tx, &tt, NULL));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, ops[2], &tt, &tx, &to, &one));
  ttpu_buffer_release(tmp); /* its reader may still be waiting */
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, ops[3], &to, &tx, &to, NULL));
  float r[4];
  TTPU_CHECK_OK(t, ttpu_buffer_download(out, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) {
    float a = (xv[i] + xv[i]) * xv[i] - xv[i];
    TTPU_CHECK(t, r[i] == (a > xv[i] ? a : xv[i]));
  }
  TTPU_CHECK(t, ttpu_runtime_compile_log_count(rt) == 4);
  for (int k = 0; k < 4; ++k) {
    ttpu_compile_record rec;
    TTPU_CHECK(t, ttpu_runtime_compile_log_get(rt, k, &rec));
    TTPU_CHECK(t, strcmp(rec.what, ops[k]) == 0);
  }
  ttpu_stats s;
  ttpu_runtime_stats(rt, -1, &s);
  TTPU_CHECK(t, s.compiles == 4 && s.executions == 4);
  ttpu_buffer_release(out);
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

/* A failed compile raises at the next point that reaches its op, named
 * with it; the storage it was to write keeps the error; later ops work.
 * div's program is compiled first, so that the injected fault hits mul's
 * compile (on two threads, div's could otherwise reach the plugin
 * first). */
static void test_strict_compile_error(ttpu_test_ctx* t) {
  ttpu_buffer* x = NULL;
  ttpu_tensor tx;
  ttpu_runtime* rt = pool_setup(t, 2, &x, &tx);
  if (!rt) return;
  const float* xv = kX;
  ttpu_buffer* a = new_vec4(t, rt);
  ttpu_buffer* b = new_vec4(t, rt);
  if (!a || !b) return;
  ttpu_tensor ta = vec4(a), tb = vec4(b);
  float r[4];
  ttpu_buffer* c = ttpu_test_upload_f32(t, rt, kX, 4);
  if (!c) return;
  ttpu_tensor tc = vec4(c);
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "div.Tensor", &tc, &tx, &tb, NULL));
  TTPU_CHECK_OK(t, ttpu_buffer_download(b, r, sizeof(r)));
  ttpu_buffer_release(c);
  ttpu_debug_inject_plugin_fault("client_compile", 0, 1);
  ttpu_status* s = ttpu_test_binary(rt, "mul.Tensor", &tx, &tx, &ta, NULL);
  TTPU_CHECK(t, s == NULL); /* compiling on the pool */
  /* The error comes at the next submit when the compile is over by then,
   * else at the read of what depends on it. */
  s = ttpu_test_binary(rt, "div.Tensor", &ta, &tx, &tb, NULL);
  if (!s) s = ttpu_buffer_download(b, r, sizeof(r));
  ttpu_debug_inject_plugin_fault(NULL, 0, 0);
  TTPU_CHECK(t, s && strstr(ttpu_status_message(s), "compiling mul.Tensor") &&
                    strstr(ttpu_status_message(s), "client_compile"));
  ttpu_status_free(s);
  /* The dropped ops' storages fail on read with the same error. */
  s = ttpu_buffer_download(a, r, sizeof(r));
  TTPU_CHECK(t, s && strstr(ttpu_status_message(s), "compiling mul.Tensor"));
  ttpu_status_free(s);
  /* Usable afterwards: the same ops compile and run. */
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mul.Tensor", &tx, &tx, &ta, NULL));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "div.Tensor", &ta, &tx, &tb, NULL));
  TTPU_CHECK_OK(t, ttpu_buffer_download(b, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == xv[i]);
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_buffer_release(a);
  ttpu_buffer_release(b);
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

/* A graph whose program compiles on the pool joins strict mode's FIFO: it
 * reads what a pending op will write, a pending op after it reads what it
 * writes, the values are program order's; the graph is captured for
 * replay while its program compiles, and a replay runs it. */
static void test_graph_queued(ttpu_test_ctx* t) {
  ttpu_buffer* x = NULL;
  ttpu_tensor tx;
  ttpu_runtime* rt = pool_setup(t, 2, &x, &tx);
  if (!rt) return;
  const float* xv = kX;
  ttpu_buffer* a = new_vec4(t, rt);
  ttpu_buffer* b = new_vec4(t, rt);
  ttpu_buffer* tmp = new_vec4(t, rt);
  ttpu_buffer* out = new_vec4(t, rt);
  ttpu_buffer* out2 = new_vec4(t, rt);
  if (!a || !b || !tmp || !out || !out2) return;
  ttpu_tensor ta = vec4(a), tb = vec4(b), tt = vec4(tmp), to = vec4(out);
  double one = 1.0;
  /* a = x * x (strict, compiling) */
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mul.Tensor", &tx, &tx, &ta, NULL));
  /* graph: tmp = a + x; out = tmp - x; a = a + a (in place) */
  TTPU_CHECK_OK(t, ttpu_runtime_begin_graph(rt, "queued"));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "add.Tensor", &ta, &tx, &tt, &one));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "sub.Tensor", &tt, &tx, &to, &one));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "add.Tensor", &ta, &ta, &ta, &one));
  ttpu_buffer_release(tmp);
  ttpu_graph_replay* g = NULL;
  TTPU_CHECK_OK(t, ttpu_runtime_end_graph_capture(rt, &g));
  TTPU_CHECK(t, g != NULL); /* captured while its program compiles */
  if (!g) return;
  /* b = out * a (strict, after the graph) */
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mul.Tensor", &to, &ta, &tb, NULL));
  float r[4];
  TTPU_CHECK_OK(t, ttpu_buffer_download(b, r, sizeof(r)));
  for (int i = 0; i < 4; ++i)
    TTPU_CHECK(t, r[i] == xv[i] * xv[i] * 2.0f * xv[i] * xv[i]);
  /* the replay, out2 for out: out2 = a, a doubled again */
  ttpu_buffer* bufs[3] = {NULL, NULL, NULL};
  TTPU_CHECK(t, ttpu_graph_replay_store_count(g) == 3);
  for (int k = 0; k < 3; ++k) {
    const ttpu_buffer* was = ttpu_graph_replay_store(g, k, NULL);
    bufs[k] = was == out ? out2 : was == a ? a : was == x ? x : NULL;
  }
  int ran = 0;
  TTPU_CHECK_OK(t, ttpu_runtime_graph_replay(rt, g, bufs, &ran));
  TTPU_CHECK(t, ran == 1);
  TTPU_CHECK_OK(t, ttpu_buffer_download(out2, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == 2.0f * xv[i] * xv[i]);
  TTPU_CHECK_OK(t, ttpu_buffer_download(a, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == 4.0f * xv[i] * xv[i]);
  /* x * x; the graph; out * a (two storages: another signature) */
  const char* logged[] = {"mul.Tensor", "graph queued (3 ops)", "mul.Tensor"};
  TTPU_CHECK(t, ttpu_runtime_compile_log_count(rt) == 3);
  for (int k = 0; k < 3; ++k) {
    ttpu_compile_record rec;
    TTPU_CHECK(t, ttpu_runtime_compile_log_get(rt, k, &rec));
    TTPU_CHECK(t, strcmp(rec.what, logged[k]) == 0);
  }
  ttpu_stats s;
  ttpu_runtime_stats(rt, -1, &s);
  TTPU_CHECK(t, s.windows == 1 && s.graph_replays == 1 && s.compiles == 3);
  /* the replay binding its program counts one hit, not two */
  TTPU_CHECK(t, s.cache_hits == 1);
  ttpu_graph_replay_free(rt, g);
  ttpu_buffer* all[] = {out, out2, a, b, x};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) ttpu_buffer_release(all[i]);
  ttpu_runtime_destroy(rt);
}

/* A graph whose compile fails on the pool: the error, named with the
 * graph, is raised at the next point that waits; what it was to write
 * keeps the error; the runtime stays usable. */
static void test_graph_compile_error(ttpu_test_ctx* t) {
  ttpu_buffer* x = NULL;
  ttpu_tensor tx;
  ttpu_runtime* rt = pool_setup(t, 2, &x, &tx);
  if (!rt) return;
  const float* xv = kX;
  ttpu_buffer* out = new_vec4(t, rt);
  if (!out) return;
  ttpu_tensor to = vec4(out);
  double one = 1.0;
  TTPU_CHECK_OK(t, ttpu_runtime_begin_graph(rt, "bad"));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "add.Tensor", &tx, &tx, &to, &one));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mul.Tensor", &to, &tx, &to, NULL));
  ttpu_debug_inject_plugin_fault("client_compile", 0, 1);
  ttpu_graph_replay* g = NULL;
  ttpu_status* s = ttpu_runtime_end_graph_capture(rt, &g);
  TTPU_CHECK(t, s == NULL); /* compiling on the pool */
  s = ttpu_runtime_synchronize(rt, -1);
  ttpu_debug_inject_plugin_fault(NULL, 0, 0);
  TTPU_CHECK(t, s && strstr(ttpu_status_message(s), "compiling graph bad (2 ops)"));
  ttpu_status_free(s);
  /* its capture has no program to run: the caller records instead */
  ttpu_buffer* bufs[2] = {NULL, NULL};
  TTPU_CHECK(t, g && ttpu_graph_replay_store_count(g) == 2);
  for (int k = 0; k < 2; ++k) bufs[k] = (ttpu_buffer*)ttpu_graph_replay_store(g, k, NULL);
  int ran = 1;
  TTPU_CHECK_OK(t, ttpu_runtime_graph_replay(rt, g, bufs, &ran));
  TTPU_CHECK(t, ran == 0);
  ttpu_graph_replay_free(rt, g);
  float r[4];
  s = ttpu_buffer_download(out, r, sizeof(r));
  TTPU_CHECK(t, s && strstr(ttpu_status_message(s), "compiling graph bad"));
  ttpu_status_free(s);
  /* usable: the same graph compiles and runs */
  TTPU_CHECK_OK(t, ttpu_runtime_begin_graph(rt, "bad"));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "add.Tensor", &tx, &tx, &to, &one));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mul.Tensor", &to, &tx, &to, NULL));
  TTPU_CHECK_OK(t, ttpu_runtime_end_graph(rt));
  TTPU_CHECK_OK(t, ttpu_buffer_download(out, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == 2.0f * xv[i] * xv[i]);
  ttpu_buffer_release(out);
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

/* Destroying a runtime with ops waiting for their compiles runs them. */
static void test_strict_destroy_pending(ttpu_test_ctx* t) {
  ttpu_buffer* x = NULL;
  ttpu_tensor tx;
  ttpu_runtime* rt = pool_setup(t, 2, &x, &tx);
  if (!rt) return;
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "mul.Tensor", &tx, &tx, &tx, NULL));
  TTPU_CHECK_OK(t, ttpu_test_binary(rt, "atan2", &tx, &tx, &tx, NULL));
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"order", test_order},
    {"many_compiles", test_many_compiles},
    {"destroy_in_flight", test_destroy_in_flight},
    {"inline", test_inline},
    {"option_from_env", test_option_from_env},
    {"strict_chain", test_strict_chain},
    {"strict_compile_error", test_strict_compile_error},
    {"strict_destroy_pending", test_strict_destroy_pending},
    {"graph_queued", test_graph_queued},
    {"graph_compile_error", test_graph_compile_error},
    {NULL, NULL},
};
TTPU_TEST_SUITE(compile_pool, kTests)
