/* test_modes.c - fused windows, graphs, debug mode and the persistent
 * compile cache, from C. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ttpu_test.h"

/* A storage holding v0, v0 + 1, ... (n float32 values). */
static ttpu_buffer* make_f32(ttpu_test_ctx* t, ttpu_runtime* rt, float v0,
                             int64_t n) {
  float* v = malloc((size_t)n * sizeof(float));
  if (!v) return NULL;
  for (int64_t i = 0; i < n; ++i) v[i] = v0 + (float)i;
  ttpu_buffer* b = ttpu_test_upload_f32(t, rt, v, n);
  free(v);
  return b;
}

/* out = a + alpha * b, all dense 1-d views of n elements. */
static ttpu_status* add(ttpu_runtime* rt, ttpu_buffer* a, ttpu_buffer* b,
                        ttpu_buffer* out, int64_t* n, double alpha) {
  static const int64_t one = 1;
  ttpu_tensor x = {a, TTPU_F32, 1, n, &one, 0}, y = {b, TTPU_F32, 1, n, &one, 0};
  ttpu_tensor o = {out, TTPU_F32, 1, n, &one, 0};
  return ttpu_test_add(rt, &x, &y, &o, alpha);
}

/* A chain of adds through temporaries in fused mode: one program, the
 * temporaries never results, the same values as strict mode. */
static void test_fused_chain(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  int64_t n = 8;
  ttpu_buffer* x = make_f32(t, rt, 1, n);
  ttpu_buffer* y = make_f32(t, rt, 10, n);
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_FUSED));
  TTPU_CHECK(t, ttpu_runtime_mode(rt) == TTPU_MODE_FUSED);
  ttpu_buffer* acc = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, (size_t)n * 4, &acc));
  TTPU_CHECK_OK(t, add(rt, x, y, acc, &n, 1.0));
  for (int k = 0; k < 5; ++k) {
    ttpu_buffer* tmp = NULL;
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, (size_t)n * 4, &tmp));
    TTPU_CHECK_OK(t, add(rt, acc, y, tmp, &n, 0.5));
    TTPU_CHECK_OK(t, add(rt, tmp, x, acc, &n, 2.0));
    ttpu_buffer_release(tmp); /* dies inside the window */
  }
  ttpu_stats st;
  ttpu_runtime_stats(rt, -1, &st); /* flushes (memory figures are live) */
  TTPU_CHECK(t, st.windows == 1 && st.window_ops == 11 && st.executions == 1);
  float r[8];
  TTPU_CHECK_OK(t, ttpu_buffer_download(acc, r, sizeof(r)));
  for (int i = 0; i < 8; ++i) {
    float xv = 1.0f + (float)i, yv = 10.0f + (float)i, a = xv + yv;
    for (int k = 0; k < 5; ++k) a = (a + 0.5f * yv) + 2.0f * xv;
    TTPU_CHECK(t, r[i] == a);
  }
  /* same ops again: the window's program is reused */
  TTPU_CHECK_OK(t, add(rt, x, y, acc, &n, 1.0));
  for (int k = 0; k < 5; ++k) {
    ttpu_buffer* tmp = NULL;
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, (size_t)n * 4, &tmp));
    TTPU_CHECK_OK(t, add(rt, acc, y, tmp, &n, 0.5));
    TTPU_CHECK_OK(t, add(rt, tmp, x, acc, &n, 2.0));
    ttpu_buffer_release(tmp);
  }
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.windows == 2 && st.compiles == 1);
  TTPU_CHECK(t, ttpu_runtime_compile_log_count(rt) == 1);
  ttpu_compile_record rec;
  TTPU_CHECK(t, ttpu_runtime_compile_log_get(rt, 0, &rec));
  TTPU_CHECK(t, strstr(rec.what, "fused window (11 ops)") != NULL);
  ttpu_buffer_release(acc);
  ttpu_buffer_release(x);
  ttpu_buffer_release(y);
  ttpu_runtime_destroy(rt);
}

/* out = a + b, dense 1-d views of n elements, as a call of autograd pass
 * `task` (0: none). */
static ttpu_status* add_in_pass(ttpu_runtime* rt, ttpu_buffer* a,
                                ttpu_buffer* b, ttpu_buffer* out, int64_t* n,
                                int task) {
  static const int64_t one = 1;
  ttpu_tensor x = {a, TTPU_F32, 1, n, &one, 0}, y = {b, TTPU_F32, 1, n, &one, 0};
  ttpu_tensor o = {out, TTPU_F32, 1, n, &one, 0};
  return ttpu_test_add_in_pass(rt, &x, &y, &o, task);
}

/* Forward, backward and update ops (autograd passes 0, 3, 0) on storages
 * of n floats, then a host read of x, which the window only reads: how
 * many windows ran, and how many of them ended at a pass. */
static void record_passes(ttpu_test_ctx* t, ttpu_runtime* rt, int64_t n,
                          int64_t* windows, int64_t* at_pass,
                          int64_t* at_read) {
  ttpu_buffer* x = make_f32(t, rt, 1, n);
  ttpu_buffer* acc = make_f32(t, rt, 0, n);
  float* r = malloc((size_t)n * sizeof(float));
  if (!x || !acc || !r) {
    ttpu_test_fail(t, __FILE__, __LINE__, "setup failed");
    goto done;
  }
  ttpu_stats st0, st;
  ttpu_runtime_stats(rt, -1, &st0);
  static const int task[] = {0, 0, 3, 3, 0};
  for (int k = 0; k < 5; ++k)
    TTPU_CHECK_OK(t, add_in_pass(rt, acc, x, acc, &n, task[k]));
  TTPU_CHECK_OK(t, ttpu_buffer_download(x, r, (size_t)n * sizeof(float)));
  ttpu_runtime_stats(rt, -1, &st);
  *windows = st.windows - st0.windows;
  *at_pass = st.window_ends[TTPU_END_PASS] - st0.window_ends[TTPU_END_PASS];
  *at_read = st.window_ends[TTPU_END_READ] - st0.window_ends[TTPU_END_READ];
  TTPU_CHECK_OK(t, ttpu_buffer_download(acc, r, (size_t)n * sizeof(float)));
  for (int64_t i = 0; i < n; i += n / 4)
    TTPU_CHECK(t, r[i] == (float)i + 5.0f * (1.0f + (float)i));
done:
  free(r);
  ttpu_buffer_release(acc);
  ttpu_buffer_release(x);
}

/* A fused window that has written 32 MiB ends where an autograd pass
 * begins or ends (forward, backward and update run as three windows); a
 * smaller one stays whole. Either ends at a host read, even of a storage
 * it only reads. */
static void test_window_ends_at_passes_and_reads(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_FUSED));
  int64_t windows = -1, at_pass = -1, at_read = -1;
  record_passes(t, rt, 8, &windows, &at_pass, &at_read);
  TTPU_CHECK(t, windows == 1 && at_pass == 0 && at_read == 1);
  record_passes(t, rt, (int64_t)8 << 20, &windows, &at_pass, &at_read);
  TTPU_CHECK(t, windows == 3 && at_pass == 2 && at_read == 1);
  ttpu_runtime_destroy(rt);
}

/* A graph is one program whatever the op limit. */
static void test_graph_ignores_limit(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  int64_t n = 4;
  ttpu_buffer* x = make_f32(t, rt, 0, n);
  ttpu_runtime_set_window_limit(rt, 3);
  TTPU_CHECK_OK(t, ttpu_runtime_begin_graph(rt, "g"));
  for (int k = 0; k < 10; ++k) TTPU_CHECK_OK(t, add(rt, x, x, x, &n, 1.0));
  TTPU_CHECK_OK(t, ttpu_runtime_end_graph(rt));
  TTPU_CHECK(t, ttpu_runtime_mode(rt) == TTPU_MODE_STRICT);
  float r[4];
  TTPU_CHECK_OK(t, ttpu_buffer_download(x, r, sizeof(r)));
  for (int i = 0; i < 4; ++i) TTPU_CHECK(t, r[i] == (float)i * 1024.0f);
  ttpu_stats st;
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.windows == 1 && st.window_ops == 10);
  TTPU_CHECK(t, st.window_ends[TTPU_END_GRAPH] == 1);
  ttpu_buffer_release(x);
  ttpu_runtime_destroy(rt);
}

/* Store k's buffer for a replay: the one standing for `from` at capture. */
static void map_store(const ttpu_graph_replay* g, ttpu_buffer** bufs,
                      const ttpu_buffer* from, ttpu_buffer* to) {
  for (int k = 0; k < ttpu_graph_replay_store_count(g); ++k)
    if (ttpu_graph_replay_store(g, k, NULL) == from) bufs[k] = to;
}

/* A graph captured once runs again from other storages; storages that do
 * not match the capture run nothing. */
static void test_graph_replay(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  int64_t n = 4;
  ttpu_buffer* x = make_f32(t, rt, 0, n);
  ttpu_buffer* y = make_f32(t, rt, 10, n);
  ttpu_buffer *tmp = NULL, *out = NULL, *out2 = NULL, *big = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &tmp));
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &out));
  TTPU_CHECK_OK(t, ttpu_runtime_begin_graph(rt, "g"));
  TTPU_CHECK_OK(t, add(rt, x, y, tmp, &n, 2.0));
  TTPU_CHECK_OK(t, add(rt, tmp, x, out, &n, 1.0));
  ttpu_buffer_release(tmp); /* a temporary: not a store of the replay */
  ttpu_graph_replay* g = NULL;
  TTPU_CHECK_OK(t, ttpu_runtime_end_graph_capture(rt, &g));
  TTPU_CHECK(t, g != NULL);
  if (!g) return;
  TTPU_CHECK(t, ttpu_graph_replay_store_count(g) == 3);
  TTPU_CHECK(t, ttpu_graph_replay_op_count(g) == 2);
  ttpu_buffer* x2 = make_f32(t, rt, 100, n);
  ttpu_buffer* y2 = make_f32(t, rt, 1, n);
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &out2));
  ttpu_buffer* bufs[3] = {NULL, NULL, NULL};
  map_store(g, bufs, x, x2);
  map_store(g, bufs, y, y2);
  map_store(g, bufs, out, out2);
  int ran = 0;
  TTPU_CHECK_OK(t, ttpu_runtime_graph_replay(rt, g, bufs, &ran));
  TTPU_CHECK(t, ran == 1);
  float r[4];
  TTPU_CHECK_OK(t, ttpu_buffer_download(out2, r, sizeof(r)));
  for (int i = 0; i < 4; ++i)
    TTPU_CHECK(t, r[i] == 2.0f * (100.0f + (float)i) + 2.0f * (1.0f + (float)i));
  /* the capture's own storages are untouched */
  TTPU_CHECK_OK(t, ttpu_buffer_download(out, r, sizeof(r)));
  TTPU_CHECK(t, r[0] == 20.0f);
  /* one storage in two roles, a storage of another size: nothing runs */
  ttpu_buffer* dup[3] = {NULL, NULL, NULL};
  map_store(g, dup, x, x2);
  map_store(g, dup, y, x2);
  map_store(g, dup, out, out2);
  TTPU_CHECK_OK(t, ttpu_runtime_graph_replay(rt, g, dup, &ran));
  TTPU_CHECK(t, ran == 0);
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 32, &big));
  map_store(g, bufs, y, big);
  TTPU_CHECK_OK(t, ttpu_runtime_graph_replay(rt, g, bufs, &ran));
  TTPU_CHECK(t, ran == 0);
  ttpu_stats st;
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.graph_replays == 1 && st.windows == 1);
  ttpu_graph_replay_free(rt, g);
  ttpu_buffer* all[] = {x, y, out, x2, y2, out2, big};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) ttpu_buffer_release(all[i]);
  ttpu_runtime_destroy(rt);
}

static void test_debug_mode_names_op(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, TTPU_MODE_DEBUG));
  int64_t n = 4, m = 5;
  ttpu_buffer* x = make_f32(t, rt, 0, n);
  ttpu_buffer* y = make_f32(t, rt, 0, m);
  ttpu_buffer* o = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 16, &o));
  /* y's view reaches past its storage: refused, named with shapes */
  int64_t big = 9;
  ttpu_status* s = add(rt, x, y, o, &big, 1.0);
  TTPU_CHECK(t, s != NULL);
  ttpu_status_free(s);
  TTPU_CHECK_OK(t, add(rt, x, x, o, &n, 1.0));
  s = ttpu_runtime_set_mode(rt, (ttpu_mode)7);
  TTPU_CHECK(t, s != NULL && ttpu_runtime_mode(rt) == TTPU_MODE_DEBUG);
  ttpu_status_free(s);
  ttpu_buffer_release(x);
  ttpu_buffer_release(y);
  ttpu_buffer_release(o);
  ttpu_runtime_destroy(rt);
}

/* A group in strict mode: its ops run as one window (one program), the
 * mode stays strict, and later ops run one program each again; in fused
 * mode a group only marks its ops a composite's (grouped 2), in debug
 * mode it does nothing. */
static void test_strict_group(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  int64_t n = 8;
  ttpu_buffer* x = make_f32(t, rt, 1, n);
  ttpu_buffer* y = make_f32(t, rt, 10, n);
  ttpu_buffer *a = NULL, *o = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, (size_t)n * 4, &a));
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, (size_t)n * 4, &o));
  int grouped = -1;
  TTPU_CHECK_OK(t, ttpu_runtime_group_begin(rt, &grouped));
  TTPU_CHECK(t, grouped == 1 && ttpu_runtime_mode(rt) == TTPU_MODE_STRICT);
  TTPU_CHECK_OK(t, add(rt, x, y, a, &n, 1.0));
  TTPU_CHECK_OK(t, add(rt, a, x, o, &n, 2.0));
  TTPU_CHECK_OK(t, ttpu_runtime_group_end(rt, grouped));
  TTPU_CHECK_OK(t, add(rt, o, y, a, &n, 1.0)); /* strict again */
  TTPU_CHECK_OK(t, ttpu_runtime_synchronize(rt, -1));
  ttpu_stats st;
  ttpu_runtime_stats(rt, -1, &st);
  TTPU_CHECK(t, st.windows == 1 && st.window_ops == 2 && st.executions == 2);
  float r[8];
  TTPU_CHECK_OK(t, ttpu_buffer_download(a, r, sizeof(r)));
  for (int i = 0; i < 8; ++i) {
    float xv = 1.0f + (float)i, yv = 10.0f + (float)i;
    TTPU_CHECK(t, r[i] == ((xv + yv) + 2.0f * xv) + yv);
  }
  ttpu_mode others[2] = {TTPU_MODE_FUSED, TTPU_MODE_DEBUG};
  for (int k = 0; k < 2; ++k) {
    TTPU_CHECK_OK(t, ttpu_runtime_set_mode(rt, others[k]));
    TTPU_CHECK_OK(t, ttpu_runtime_group_begin(rt, &grouped));
    TTPU_CHECK(t, grouped == (others[k] == TTPU_MODE_FUSED ? 2 : 0));
    TTPU_CHECK_OK(t, ttpu_runtime_group_end(rt, grouped));
    TTPU_CHECK(t, ttpu_runtime_mode(rt) == others[k]);
  }
  ttpu_buffer_release(x);
  ttpu_buffer_release(y);
  ttpu_buffer_release(a);
  ttpu_buffer_release(o);
  ttpu_runtime_destroy(rt);
}

static int count_files(const char* dir) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "find '%s' -name '*.prog' | wc -l", dir);
  FILE* p = popen(cmd, "r");
  int n = -1;
  if (p) {
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
  }
  return n;
}

/* Compile, store, load in a second runtime, corrupt, rebuild. */
static void test_disk_cache(ttpu_test_ctx* t) {
  char dir[] = "/tmp/ttpu-ctest-cache-XXXXXX";
  if (!mkdtemp(dir)) {
    ttpu_test_fail(t, __FILE__, __LINE__, "mkdtemp");
    return;
  }
  for (int round = 0; round < 3; ++round) {
    ttpu_runtime* rt = ttpu_test_runtime(t, 1);
    if (!rt) break;
    TTPU_CHECK_OK(t, ttpu_runtime_set_cache_dir(rt, dir, 0));
    TTPU_CHECK(t, !strcmp(ttpu_runtime_cache_dir(rt), dir));
    int64_t n = 6;
    ttpu_buffer* x = make_f32(t, rt, 1, n);
    ttpu_buffer* o = NULL;
    TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 24, &o));
    TTPU_CHECK_OK(t, add(rt, x, x, o, &n, 3.0));
    float r[6];
    TTPU_CHECK_OK(t, ttpu_buffer_download(o, r, sizeof(r)));
    for (int i = 0; i < 6; ++i) TTPU_CHECK(t, r[i] == 4.0f * (1.0f + (float)i));
    ttpu_stats st;
    ttpu_runtime_stats(rt, -1, &st);
    if (round == 0) TTPU_CHECK(t, st.compiles == 1 && st.disk_writes == 1);
    if (round == 1) TTPU_CHECK(t, st.compiles == 0 && st.disk_hits == 1);
    if (round == 2) TTPU_CHECK(t, st.compiles == 1 && st.disk_hits == 0);
    TTPU_CHECK(t, count_files(dir) == 1);
    ttpu_buffer_release(x);
    ttpu_buffer_release(o);
    ttpu_runtime_destroy(rt);
    if (round == 1) { /* corrupt the entry: round 2 rebuilds it */
      char cmd[600];
      snprintf(cmd, sizeof(cmd),
               "for f in $(find '%s' -name '*.prog'); do "
               "printf 'garbage' | dd of=$f bs=1 seek=100 conv=notrunc "
               "2>/dev/null; done", dir);
      TTPU_CHECK(t, system(cmd) == 0);
    }
  }
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  TTPU_CHECK(t, system(cmd) == 0);
}

/* add.out after add.Tensor: the same program text, one executable held
 * by both signatures; it survives the eviction of each holder in turn. */
static void test_same_text_shares(ttpu_test_ctx* t) {
  ttpu_runtime* rt = ttpu_test_runtime(t, 1);
  if (!rt) return;
  TTPU_CHECK_OK(t, ttpu_runtime_set_cache_dir(rt, NULL, 0));
  int64_t n = 5;
  static const int64_t one = 1;
  ttpu_buffer* x = make_f32(t, rt, 1, n);
  ttpu_buffer* o1 = NULL;
  ttpu_buffer* o2 = NULL;
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 20, &o1));
  TTPU_CHECK_OK(t, ttpu_buffer_create(rt, 0, 20, &o2));
  ttpu_tensor tx = {x, TTPU_F32, 1, &n, &one, 0};
  ttpu_tensor t1 = {o1, TTPU_F32, 1, &n, &one, 0};
  ttpu_tensor t2 = {o2, TTPU_F32, 1, &n, &one, 0};
  const double alpha = 2.0;
  for (int round = 0; round < 3; ++round) {
    if (round) { /* evict both holders, then each alone */
      ttpu_runtime_set_program_cache_size(rt, 1);
      ttpu_runtime_set_program_cache_size(rt, 0);
    }
    TTPU_CHECK_OK(t, ttpu_test_binary(rt, "add.Tensor", &tx, &tx, &t1, &alpha));
    float r[5];
    TTPU_CHECK_OK(t, ttpu_buffer_download(o1, r, sizeof(r)));
    if (round == 2) ttpu_runtime_set_program_cache_size(rt, 1);
    TTPU_CHECK_OK(t, ttpu_test_binary(rt, "add.out", &tx, &tx, &t2, &alpha));
    ttpu_runtime_set_program_cache_size(rt, 0);
    float r2[5];
    TTPU_CHECK_OK(t, ttpu_buffer_download(o2, r2, sizeof(r2)));
    for (int i = 0; i < 5; ++i)
      TTPU_CHECK(t, r[i] == 3.0f * (1.0f + (float)i) && r2[i] == r[i]);
    ttpu_stats st;
    ttpu_runtime_stats(rt, -1, &st);
    if (round == 0) TTPU_CHECK(t, st.compiles == 1 && st.programs_shared == 1);
  }
  ttpu_buffer_release(x);
  ttpu_buffer_release(o1);
  ttpu_buffer_release(o2);
  ttpu_runtime_destroy(rt);
}

static const ttpu_test kTests[] = {
    {"fused_chain", test_fused_chain},
    {"window_ends_at_passes_and_reads", test_window_ends_at_passes_and_reads},
    {"graph_ignores_limit", test_graph_ignores_limit},
    {"graph_replay", test_graph_replay},
    {"debug_mode_names_op", test_debug_mode_names_op},
    {"strict_group", test_strict_group},
    {"disk_cache", test_disk_cache},
    {"same_text_shares", test_same_text_shares},
    {NULL, NULL},
};
TTPU_TEST_SUITE(modes, kTests)
