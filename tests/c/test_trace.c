/* test_trace.c - the trace hook: compile begin/end around a cache miss and
 * not a hit, every launch followed by its DONE with a later time, fused
 * windows reported as one launch, nothing once the hook is removed. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "ttpu_test.h"

#define MAX_EVENTS 64

typedef struct {
  pthread_mutex_t mu;
  int n;
  ttpu_trace_event ev[MAX_EVENTS];
  char what[MAX_EVENTS][96];
  int dones;
  unsigned want; /* what the hook answers */
} recorder;

static unsigned record(void* user, const ttpu_trace_event* e) {
  recorder* r = user;
  pthread_mutex_lock(&r->mu);
  if (r->n < MAX_EVENTS) {
    r->ev[r->n] = *e;
    snprintf(r->what[r->n], sizeof(r->what[0]), "%s", e->what ? e->what : "");
    r->n++;
  }
  if (e->kind == TTPU_TRACE_DONE) r->dones++;
  unsigned want = r->want;
  pthread_mutex_unlock(&r->mu);
  return want;
}

static ttpu_status* hook(ttpu_runtime* rt, recorder* r, unsigned what) {
  r->want = what;
  return ttpu_runtime_set_trace_hook(rt, record, r, what);
}

/* DONE may come from a plugin thread just after synchronize returns. */
static int wait_dones(recorder* r, int want) {
  for (int i = 0; i < 2000; ++i) {
    pthread_mutex_lock(&r->mu);
    int have = r->dones;
    pthread_mutex_unlock(&r->mu);
    if (have >= want) return have;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

static int count_kind(recorder* r, ttpu_trace_kind k) {
  int n = 0;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->n; ++i) n += r->ev[i].kind == k;
  pthread_mutex_unlock(&r->mu);
  return n;
}

/* A runtime, a recorder, and two float32 vectors of 4 on device 0: x
 * (1, 2, 3, 4) and an output o. */
typedef struct {
  ttpu_runtime* rt;
  recorder r;
  int64_t sz[1], st[1];
  ttpu_tensor x, o;
} fixture;

static int fixture_init(ttpu_test_ctx* t, fixture* f) {
  memset(f, 0, sizeof(*f));
  f->rt = ttpu_test_runtime(t, 1);
  if (!f->rt) return 0;
  pthread_mutex_init(&f->r.mu, NULL);
  const float xv[4] = {1, 2, 3, 4};
  f->sz[0] = 4;
  f->st[0] = 1;
  f->x = (ttpu_tensor){ttpu_test_upload_f32(t, f->rt, xv, 4), TTPU_F32, 1, f->sz, f->st, 0};
  f->o = (ttpu_tensor){NULL, TTPU_F32, 1, f->sz, f->st, 0};
  ttpu_status* s = ttpu_buffer_create(f->rt, 0, 16, &f->o.buffer);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "buffer_create: %s", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return f->x.buffer && f->o.buffer;
}

static void fixture_free(fixture* f) {
  if (f->x.buffer) ttpu_buffer_release(f->x.buffer);
  if (f->o.buffer) ttpu_buffer_release(f->o.buffer);
  if (f->rt) {
    ttpu_runtime_destroy(f->rt);
    pthread_mutex_destroy(&f->r.mu);
  }
}

static void test_compiles_and_launches(ttpu_test_ctx* t) {
  fixture f;
  if (!fixture_init(t, &f)) {
    fixture_free(&f);
    return;
  }
  ttpu_runtime* rt = f.rt;
  recorder* r = &f.r;
  const ttpu_tensor x = f.x, o = f.o;
  TTPU_CHECK_OK(t, hook(rt, r, TTPU_TRACE_COMPILES | TTPU_TRACE_LAUNCHES));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &o, 1.0)); /* compiles */
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &o, 2.0)); /* cache hit */
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK(t, wait_dones(r, 2) == 2);
  TTPU_CHECK(t, count_kind(r, TTPU_TRACE_COMPILE_BEGIN) == 1);
  TTPU_CHECK(t, count_kind(r, TTPU_TRACE_COMPILE_END) == 1);
  TTPU_CHECK(t, count_kind(r, TTPU_TRACE_LAUNCH) == 2);
  /* order: BEGIN, END, then each LAUNCH before its DONE */
  TTPU_CHECK(t, r->ev[0].kind == TTPU_TRACE_COMPILE_BEGIN);
  TTPU_CHECK(t, r->ev[1].kind == TTPU_TRACE_COMPILE_END);
  TTPU_CHECK(t, !strcmp(r->what[0], "add.Tensor") && !strcmp(r->what[1], "add.Tensor"));
  TTPU_CHECK(t, !r->ev[1].failed && !r->ev[1].from_disk);
  for (int i = 0; i < r->n; ++i) {
    if (r->ev[i].kind != TTPU_TRACE_LAUNCH) continue;
    TTPU_CHECK(t, !strcmp(r->what[i], "add.Tensor") && r->ev[i].n_ops == 1);
    int found = 0;
    for (int j = i + 1; j < r->n; ++j)
      if (r->ev[j].kind == TTPU_TRACE_DONE && r->ev[j].launch == r->ev[i].launch) {
        found = 1;
        TTPU_CHECK(t, !r->ev[j].failed);
        TTPU_CHECK(t, r->ev[j].time_ns >= r->ev[i].time_ns);
        TTPU_CHECK(t, r->ev[j].device == 0);
      }
    TTPU_CHECK(t, found);
  }

  /* Compiles only: no launch is timed. */
  TTPU_CHECK_OK(t, hook(rt, r, TTPU_TRACE_COMPILES));
  int before = r->n;
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &o, 3.0));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK(t, r->n == before);

  /* A fused window is one launch of its ops. */
  TTPU_CHECK_OK(t, hook(rt, r, TTPU_TRACE_LAUNCHES));
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_FUSED));
  before = r->n;
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &x, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &o, &x, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK(t, wait_dones(r, 3) == 3);
  TTPU_CHECK(t, r->n == before + 2); /* no compile reported: not asked for */
  TTPU_CHECK(t, r->ev[before].kind == TTPU_TRACE_LAUNCH);
  TTPU_CHECK(t, r->ev[before].n_ops == 2);
  TTPU_CHECK(t, !strcmp(r->what[before], "fused window (2 ops)"));
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_STRICT));

  /* A hook answering 0 from a LAUNCH ends itself: that launch still gets
   * its DONE, later ones report nothing. */
  pthread_mutex_lock(&r->mu);
  r->want = 0;
  before = r->n;
  int dones = r->dones;
  pthread_mutex_unlock(&r->mu);
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &o, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &o, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK(t, wait_dones(r, dones + 1) == dones + 1);
  TTPU_CHECK(t, r->n == before + 2);

  /* Removed: nothing more. */
  TTPU_CHECK_OK(t, hook(rt, r, TTPU_TRACE_COMPILES | TTPU_TRACE_LAUNCHES));
  TTPU_CHECK_OK(t, ttpu_runtime_set_trace_hook(rt, NULL, NULL, 0));
  before = r->n;
  TTPU_CHECK_OK(t, ttpu_test_add(rt, &x, &o, &o, 1.0));
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  TTPU_CHECK(t, r->n == before);
  fixture_free(&f);
}

/* A compile that fails still ends its BEGIN. */
static void test_failed_compile_ends(ttpu_test_ctx* t) {
  fixture f;
  if (!fixture_init(t, &f)) {
    fixture_free(&f);
    return;
  }
  ttpu_runtime* rt = f.rt;
  recorder* r = &f.r;
  const ttpu_tensor x = f.x, o = f.o;
  TTPU_CHECK_OK(t, hook(rt, r, TTPU_TRACE_COMPILES));
  ttpu_debug_inject_plugin_fault("client_compile", 0, 1);
  ttpu_status* s = ttpu_test_add(rt, &x, &x, &o, 1.0);
  ttpu_debug_inject_plugin_fault(NULL, 0, 0);
  TTPU_CHECK(t, s != NULL);
  ttpu_status_free(s);
  TTPU_CHECK(t, r->n == 2);
  TTPU_CHECK(t, r->ev[0].kind == TTPU_TRACE_COMPILE_BEGIN);
  TTPU_CHECK(t, r->ev[1].kind == TTPU_TRACE_COMPILE_END && r->ev[1].failed);
  fixture_free(&f);
}

static const ttpu_test kTests[] = {
    {"compiles_and_launches", test_compiles_and_launches},
    {"failed_compile_ends", test_failed_compile_ends},
    {NULL, NULL},
};
TTPU_TEST_SUITE(trace, kTests)
