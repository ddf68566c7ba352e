/* test_pjrt.c - the PJRT layer against the real CPU plugin. */
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h" /* only to ask which device a buffer is on */
#include "ttpu_test.h"

#define ADD_PROGRAM                                                        \
  "module @m { func.func public @main(%arg0: tensor<4xf32>, %arg1: "       \
  "tensor<4xf32>) -> (tensor<4xf32>) { %0 = \"stablehlo.add\"(%arg0, "     \
  "%arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>  "             \
  "\"func.return\"(%0) : (tensor<4xf32>) -> () } }"

/* arg0 is donated to result 0, as an in-place x.add_(y) would be. */
#define DONATE_PROGRAM                                                     \
  "module @m { func.func public @main(%arg0: tensor<4xf32> "               \
  "{tf.aliasing_output = 0 : i32}, %arg1: tensor<4xf32>) -> "              \
  "(tensor<4xf32>) { %0 = \"stablehlo.add\"(%arg0, %arg1) : "              \
  "(tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>  "                      \
  "\"func.return\"(%0) : (tensor<4xf32>) -> () } }"

static const float kA[4] = {1, 2, 3, 4};
static const float kB[4] = {10, 20, 30, 40};
static const int64_t kDims4[1] = {4};

static int device_of(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b) {
  ttpu_pjrt_abi_buffer_device_args a;
  TTPU_PJRT_INIT_ARGS(a, ttpu_pjrt_abi_buffer_device_args, device);
  a.buffer = (ttpu_pjrt_abi_buffer*)b;
  ttpu_status* s = TTPU_PJRT_CALL(c->api, buffer_device, a);
  if (s) {
    ttpu_status_free(s);
    return -1;
  }
  for (int i = 0; i < c->num_devices; i++)
    if (c->devices[i] == a.device) return i;
  return -1;
}

static ttpu_pjrt_client* make_client(ttpu_test_ctx* t, int ndev) {
  ttpu_pjrt_plugin* p = ttpu_test_plugin(t);
  if (!p) return NULL;
  ttpu_pjrt_client* c = NULL;
  ttpu_status* s = ttpu_pjrt_client_create(p, ndev, &c);
  if (s) {
    ttpu_test_fail(t, __FILE__, __LINE__, "client_create: %s",
                   ttpu_status_message(s));
    ttpu_status_free(s);
  }
  return c;
}

static void test_plugin_load_version(ttpu_test_ctx* t) {
  const char* path = ttpu_test_plugin_path(t);
  TTPU_CHECK(t, path);
  ttpu_pjrt_plugin* p = NULL;
  TTPU_CHECK_OK(t, ttpu_pjrt_plugin_load(path, &p));
  int major = -1, minor = -1;
  ttpu_pjrt_plugin_version(p, &major, &minor);
  int path_ok = strcmp(ttpu_pjrt_plugin_path(p), path) == 0;
  ttpu_pjrt_plugin_unload(p);
  TTPU_CHECK(t, major == 0);
  TTPU_CHECK(t, minor >= TTPU_PJRT_MIN_MINOR);
  TTPU_CHECK(t, path_ok);
}

static void test_plugin_missing_file(ttpu_test_ctx* t) {
  const char* bad = "/nonexistent/torchtpu/libnope_pjrt.so";
  ttpu_pjrt_plugin* p = (ttpu_pjrt_plugin*)1;
  ttpu_status* s = ttpu_pjrt_plugin_load(bad, &p);
  TTPU_CHECK(t, s);
  int ok = ttpu_status_code(s) == TTPU_NOT_FOUND &&
           strstr(ttpu_status_message(s), bad) != NULL;
  ttpu_status_free(s);
  TTPU_CHECK(t, ok);
  TTPU_CHECK(t, p == NULL);
}

static void test_plugin_not_a_plugin(ttpu_test_ctx* t) {
  ttpu_pjrt_plugin* p = NULL;
  ttpu_status* s = ttpu_pjrt_plugin_load("libm.so.6", &p);
  TTPU_CHECK(t, s);
  int ok = ttpu_status_code(s) == TTPU_INVALID_ARGUMENT &&
           strstr(ttpu_status_message(s), "GetPjrtApi") &&
           strstr(ttpu_status_message(s), "libm.so.6");
  ttpu_status_free(s);
  TTPU_CHECK(t, ok);
  TTPU_CHECK(t, p == NULL);
}

static void test_plugin_find(ttpu_test_ctx* t) {
  const char* path = ttpu_test_plugin_path(t);
  TTPU_CHECK(t, path);
  char* saved = getenv("TORCHTPU_PLUGIN") ? strdup(getenv("TORCHTPU_PLUGIN"))
                                          : NULL;
  char* found = NULL;
  /* No dirs, no env: a NOT_FOUND that tells the user what to install. */
  unsetenv("TORCHTPU_PLUGIN");
  const char* const none[] = {"/nonexistent/site-packages", NULL};
  ttpu_status* s1 = ttpu_plugin_find(none, &found);
  int ok1 = s1 && ttpu_status_code(s1) == TTPU_NOT_FOUND &&
            strstr(ttpu_status_message(s1), "xla-cpu-pjrt==0.0.1") &&
            strstr(ttpu_status_message(s1), "TORCHTPU_PLUGIN") && !found;
  ttpu_status_free(s1);
  /* An explicit TORCHTPU_PLUGIN wins over the search dirs... */
  setenv("TORCHTPU_PLUGIN", path, 1);
  ttpu_status* s2 = ttpu_plugin_find(none, &found);
  int ok2 = !s2 && found && strcmp(found, path) == 0;
  ttpu_status_free(s2);
  free(found);
  found = NULL;
  /* ...and a wrong one is an error, not a silent fallback. */
  setenv("TORCHTPU_PLUGIN", "/nonexistent/x.so", 1);
  ttpu_status* s3 = ttpu_plugin_find(ttpu_test_search_dirs(), &found);
  int ok3 = s3 && ttpu_status_code(s3) == TTPU_NOT_FOUND &&
            strstr(ttpu_status_message(s3), "/nonexistent/x.so") && !found;
  ttpu_status_free(s3);
  if (saved)
    setenv("TORCHTPU_PLUGIN", saved, 1);
  else
    unsetenv("TORCHTPU_PLUGIN");
  free(saved);
  TTPU_CHECK(t, ok1);
  TTPU_CHECK(t, ok2);
  TTPU_CHECK(t, ok3);
}

static void test_client_two_devices(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  int n = ttpu_pjrt_client_device_count(c);
  int name_ok = strcmp(ttpu_pjrt_client_platform_name(c), "cpu") == 0;
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK(t, n == 2);
  TTPU_CHECK(t, name_ok);
}

/* Uploads, checks shape and dtype, downloads, compares bytes. */
static void roundtrip(ttpu_test_ctx* t, ttpu_pjrt_client* c, int device,
                      ttpu_dtype dt, const void* data, const int64_t* dims,
                      int ndim, size_t nbytes) {
  ttpu_pjrt_buffer* b = NULL;
  TTPU_CHECK_OK(t, ttpu_pjrt_buffer_from_host(c, device, data, dt, dims, ndim,
                                              &b));
  ttpu_dtype got_dt = TTPU_DTYPE_NONE;
  int64_t got_dims[TTPU_MAX_DIMS];
  int got_ndim = -1;
  ttpu_status* s = ttpu_pjrt_buffer_shape(c, b, &got_dt, got_dims, &got_ndim);
  unsigned char* back = malloc(nbytes ? nbytes : 1);
  if (!s) s = ttpu_pjrt_buffer_to_host(c, b, back, nbytes);
  int dev = device_of(c, b);
  ttpu_pjrt_buffer_destroy(c, b);
  int same = !s && (nbytes == 0 || memcmp(back, data, nbytes) == 0);
  free(back);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, same);
  TTPU_CHECK(t, got_dt == dt);
  TTPU_CHECK(t, got_ndim == ndim);
  for (int i = 0; i < ndim; i++) TTPU_CHECK(t, got_dims[i] == dims[i]);
  TTPU_CHECK(t, dev == device);
}

static void test_buffer_roundtrip(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  const float f32[6] = {1.5f, -2, 3, 4e10f, -0.0f, 6};
  const int64_t d23[2] = {2, 3};
  const uint16_t bf16[4] = {0x3f80, 0xc000, 0x7f80, 0x0001}; /* 1,-2,inf,tiny */
  const int64_t i64[3] = {INT64_MIN, 0, INT64_MAX};
  const unsigned char b[5] = {1, 0, 0, 1, 1};
  const float scalar = 42.0f;
  const double f64[2] = {1e300, -3.25};
  const uint8_t u8[3] = {0, 128, 255};
  const int64_t d4[1] = {4}, d3[1] = {3}, d5[1] = {5}, d2[1] = {2},
                d0[2] = {3, 0};
  int ok = 1;
  ttpu_test_ctx sub = {0};
  /* Each call records its own failures; keep going to free the client. */
  roundtrip(&sub, c, 0, TTPU_F32, f32, d23, 2, sizeof(f32));
  roundtrip(&sub, c, 1, TTPU_BF16, bf16, d4, 1, sizeof(bf16));
  roundtrip(&sub, c, 0, TTPU_I64, i64, d3, 1, sizeof(i64));
  roundtrip(&sub, c, 1, TTPU_BOOL, b, d5, 1, sizeof(b));
  roundtrip(&sub, c, 0, TTPU_F32, &scalar, NULL, 0, sizeof(scalar));
  roundtrip(&sub, c, 1, TTPU_F64, f64, d2, 1, sizeof(f64));
  roundtrip(&sub, c, 0, TTPU_U8, u8, d3, 1, sizeof(u8));
  roundtrip(&sub, c, 0, TTPU_F16, bf16, d4, 1, sizeof(bf16));
  roundtrip(&sub, c, 0, TTPU_U64, i64, d3, 1, sizeof(i64));
  roundtrip(&sub, c, 0, TTPU_F32, NULL, d0, 2, 0); /* empty */
  ok = !sub.failed;
  ttpu_pjrt_client_destroy(c);
  if (!ok) ttpu_test_fail(t, __FILE__, __LINE__, "a round trip failed");
}

static void test_buffer_bad_input(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_buffer* b = NULL;
  const int64_t neg[1] = {-1};
  ttpu_status* s1 = ttpu_pjrt_buffer_from_host(c, 2, kA, TTPU_F32, kDims4, 1, &b);
  ttpu_status* s2 = ttpu_pjrt_buffer_from_host(c, 0, kA, TTPU_F32, neg, 1, &b);
  ttpu_status* s3 =
      ttpu_pjrt_buffer_from_host(c, 0, kA, (ttpu_dtype)99, kDims4, 1, &b);
  ttpu_status* s4 = ttpu_pjrt_buffer_from_host(c, 0, kA, TTPU_F32, kDims4, 1, &b);
  float small[2];
  ttpu_status* s5 = s4 ? NULL : ttpu_pjrt_buffer_to_host(c, b, small, sizeof(small));
  int ok = ttpu_status_code(s1) == TTPU_INDEX_ERROR &&
           ttpu_status_code(s2) == TTPU_INVALID_ARGUMENT &&
           ttpu_status_code(s3) == TTPU_INVALID_ARGUMENT && !s4 &&
           ttpu_status_code(s5) == TTPU_INVALID_ARGUMENT;
  ttpu_status_free(s1);
  ttpu_status_free(s2);
  ttpu_status_free(s3);
  ttpu_status_free(s4);
  ttpu_status_free(s5);
  ttpu_pjrt_buffer_destroy(c, b);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK(t, ok);
}

static void test_buffer_copy_device(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_buffer *b0 = NULL, *b1 = NULL, *b00 = NULL;
  float r1[4] = {0}, r00[4] = {0};
  ttpu_status* s = ttpu_pjrt_buffer_from_host(c, 0, kA, TTPU_F32, kDims4, 1, &b0);
  if (!s) s = ttpu_pjrt_buffer_copy_to_device(c, b0, 1, &b1);
  if (!s) s = ttpu_pjrt_buffer_copy_to_device(c, b0, 0, &b00);
  if (!s) s = ttpu_pjrt_buffer_to_host(c, b1, r1, sizeof(r1));
  if (!s) s = ttpu_pjrt_buffer_to_host(c, b00, r00, sizeof(r00));
  int d1 = b1 ? device_of(c, b1) : -1, d00 = b00 ? device_of(c, b00) : -1;
  int distinct = b00 != b0;
  ttpu_pjrt_buffer_destroy(c, b0);
  ttpu_pjrt_buffer_destroy(c, b1);
  ttpu_pjrt_buffer_destroy(c, b00);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, memcmp(r1, kA, sizeof(kA)) == 0);
  TTPU_CHECK(t, memcmp(r00, kA, sizeof(kA)) == 0);
  TTPU_CHECK(t, d1 == 1 && d00 == 0);
  TTPU_CHECK(t, distinct);
}

/* Runs `e` on `device` with kA, kB; checks out = kA + kB on that device. */
static void run_add(ttpu_test_ctx* t, ttpu_pjrt_client* c, ttpu_pjrt_exec* e,
                    int device) {
  ttpu_pjrt_buffer* args[2] = {NULL, NULL};
  ttpu_pjrt_buffer* out = NULL;
  ttpu_pjrt_event* done = NULL;
  float r[4] = {0};
  ttpu_status* s =
      ttpu_pjrt_buffer_from_host(c, device, kA, TTPU_F32, kDims4, 1, &args[0]);
  if (!s)
    s = ttpu_pjrt_buffer_from_host(c, device, kB, TTPU_F32, kDims4, 1,
                                   &args[1]);
  if (!s) s = ttpu_pjrt_execute(c, e, device, args, 2, &out, 1, &done);
  if (!s) s = ttpu_pjrt_event_await(c, done);
  int ready = done ? ttpu_pjrt_event_is_ready(c, done) : 0;
  if (!s) s = ttpu_pjrt_buffer_to_host(c, out, r, sizeof(r));
  int dev = out ? device_of(c, out) : -1;
  ttpu_pjrt_event_destroy(c, done);
  ttpu_pjrt_buffer_destroy(c, args[0]);
  ttpu_pjrt_buffer_destroy(c, args[1]);
  ttpu_pjrt_buffer_destroy(c, out);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, ready);
  TTPU_CHECK(t, dev == device);
  for (int i = 0; i < 4; i++) TTPU_CHECK(t, r[i] == kA[i] + kB[i]);
}

static void test_execute_add(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec* e = NULL;
  ttpu_status* s =
      ttpu_pjrt_compile(c, ADD_PROGRAM, strlen(ADD_PROGRAM), NULL, 0, &e);
  ttpu_test_ctx sub = {0};
  if (!s) {
    run_add(&sub, c, e, 0);
    run_add(&sub, c, e, 1); /* the same executable on another device */
  }
  int nout = e ? ttpu_pjrt_exec_num_outputs(c, e) : -1;
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, nout == 1);
  TTPU_CHECK(t, !sub.failed);
}

static void test_execute_bad_calls(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 1);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec* e = NULL;
  ttpu_pjrt_buffer* a = NULL;
  ttpu_pjrt_buffer* outs[2] = {NULL, NULL};
  ttpu_status* s =
      ttpu_pjrt_compile(c, ADD_PROGRAM, strlen(ADD_PROGRAM), NULL, 0, &e);
  if (!s) s = ttpu_pjrt_buffer_from_host(c, 0, kA, TTPU_F32, kDims4, 1, &a);
  ttpu_status *wrong_outs = NULL, *wrong_args = NULL, *wrong_dev = NULL;
  if (!s) {
    ttpu_pjrt_buffer* args[2] = {a, a};
    wrong_outs = ttpu_pjrt_execute(c, e, 0, args, 2, outs, 2, NULL);
    wrong_args = ttpu_pjrt_execute(c, e, 0, args, 1, outs, 1, NULL);
    wrong_dev = ttpu_pjrt_execute(c, e, 3, args, 2, outs, 1, NULL);
  }
  int ok = ttpu_status_code(wrong_outs) == TTPU_INVALID_ARGUMENT &&
           ttpu_status_code(wrong_args) == TTPU_PLUGIN_ERROR &&
           ttpu_status_code(wrong_dev) == TTPU_INDEX_ERROR && !outs[0];
  if (!ok)
    printf("    %s | %s | %s\n", ttpu_status_message(wrong_outs),
           ttpu_status_message(wrong_args), ttpu_status_message(wrong_dev));
  ttpu_status_free(wrong_outs);
  ttpu_status_free(wrong_args);
  ttpu_status_free(wrong_dev);
  ttpu_pjrt_buffer_destroy(c, a);
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, ok);
}

/* x.add_(x): the donated buffer is also the other argument. The plugin
 * refuses that donation, so execute marks duplicated arguments
 * non-donatable: the result is right and x stays valid. */
static void test_execute_donated_duplicate(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 1);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec* e = NULL;
  ttpu_pjrt_buffer* x = NULL;
  ttpu_pjrt_buffer* out = NULL;
  float r[4] = {0}, xr[4] = {0};
  ttpu_status* s =
      ttpu_pjrt_compile(c, DONATE_PROGRAM, strlen(DONATE_PROGRAM), NULL, 0, &e);
  if (!s) s = ttpu_pjrt_buffer_from_host(c, 0, kA, TTPU_F32, kDims4, 1, &x);
  ttpu_pjrt_buffer* args[2] = {x, x};
  if (!s) s = ttpu_pjrt_execute(c, e, 0, args, 2, &out, 1, NULL);
  if (!s) s = ttpu_pjrt_buffer_to_host(c, out, r, sizeof(r));
  if (!s) s = ttpu_pjrt_buffer_to_host(c, x, xr, sizeof(xr));
  ttpu_pjrt_buffer_destroy(c, x);
  ttpu_pjrt_buffer_destroy(c, out);
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  for (int i = 0; i < 4; i++) TTPU_CHECK(t, r[i] == 2 * kA[i]);
  TTPU_CHECK(t, memcmp(xr, kA, sizeof(kA)) == 0);
}

/* Without compile_portable_executable the executable is bound to device 0
 * and the plugin refuses another execute_device. Documents why the default
 * options carry the portable flag. */
static void test_execute_nonportable(ttpu_test_ctx* t) {
  static const unsigned char opts[] = {0x1a, 0x04, 0x20, 0x01, 0x28, 0x01};
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec* e = NULL;
  ttpu_pjrt_buffer* args[2] = {NULL, NULL};
  ttpu_pjrt_buffer* out = NULL;
  ttpu_status* s = ttpu_pjrt_compile(c, ADD_PROGRAM, strlen(ADD_PROGRAM), opts,
                                     sizeof(opts), &e);
  ttpu_test_ctx sub = {0};
  if (!s) run_add(&sub, c, e, 0);
  if (!s) s = ttpu_pjrt_buffer_from_host(c, 1, kA, TTPU_F32, kDims4, 1, &args[0]);
  if (!s) s = ttpu_pjrt_buffer_from_host(c, 1, kB, TTPU_F32, kDims4, 1, &args[1]);
  ttpu_status* se = s ? NULL : ttpu_pjrt_execute(c, e, 1, args, 2, &out, 1, NULL);
  int refused = ttpu_status_code(se) == TTPU_PLUGIN_ERROR && !out;
  ttpu_status_free(se);
  ttpu_pjrt_buffer_destroy(c, out);
  ttpu_pjrt_buffer_destroy(c, args[0]);
  ttpu_pjrt_buffer_destroy(c, args[1]);
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, !sub.failed);
  TTPU_CHECK(t, refused);
}

static void test_compile_malformed(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 1);
  TTPU_CHECK(t, c);
  const char* bad =
      "module @m { func.func public @main(%arg0: tensor<4xf32>) -> "
      "(tensor<4xf32>) { %0 = \"stablehlo.nonsense\"(%arg0 : "
      "(tensor<4xf32>) -> tensor<4xf32> } }";
  ttpu_pjrt_exec* e = (ttpu_pjrt_exec*)1;
  ttpu_status* s = ttpu_pjrt_compile(c, bad, strlen(bad), NULL, 0, &e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK(t, s);
  const char* m = ttpu_status_message(s);
  /* The plugin's own parser text must survive, with our call name. */
  int ok = ttpu_status_code(s) == TTPU_PLUGIN_ERROR &&
           strstr(m, "client_compile: ") && strstr(m, "error: expected");
  if (!ok) printf("    message: %s\n", m);
  ttpu_status_free(s);
  TTPU_CHECK(t, ok);
  TTPU_CHECK(t, e == NULL);
}

static void test_serialize_roundtrip(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec *e = NULL, *e2 = NULL;
  void* bytes = NULL;
  size_t len = 0;
  ttpu_status* s =
      ttpu_pjrt_compile(c, ADD_PROGRAM, strlen(ADD_PROGRAM), NULL, 0, &e);
  if (!s) s = ttpu_pjrt_exec_serialize(c, e, &bytes, &len);
  if (!s) s = ttpu_pjrt_exec_deserialize(c, bytes, len, &e2);
  ttpu_test_ctx sub = {0};
  if (!s) {
    run_add(&sub, c, e2, 0);
    run_add(&sub, c, e2, 1);
  }
  /* Garbage bytes must be an error, not a crash. */
  static const char junk[] = "definitely not an executable";
  ttpu_pjrt_exec* e3 = NULL;
  ttpu_status* sj = ttpu_pjrt_exec_deserialize(c, junk, sizeof(junk), &e3);
  int junk_ok = sj && !e3;
  ttpu_status_free(sj);
  ttpu_pjrt_exec_destroy(c, e3);
  free(bytes);
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_exec_destroy(c, e2);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, len > 0);
  TTPU_CHECK(t, !sub.failed);
  TTPU_CHECK(t, junk_ok);
}

static void test_execute_donated(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec* e = NULL;
  ttpu_pjrt_buffer* args[2] = {NULL, NULL};
  ttpu_pjrt_buffer* out = NULL;
  float r[4] = {0}, stale[4];
  const int device = 1;
  ttpu_status* s =
      ttpu_pjrt_compile(c, DONATE_PROGRAM, strlen(DONATE_PROGRAM), NULL, 0, &e);
  if (!s) s = ttpu_pjrt_buffer_from_host(c, device, kA, TTPU_F32, kDims4, 1, &args[0]);
  if (!s) s = ttpu_pjrt_buffer_from_host(c, device, kB, TTPU_F32, kDims4, 1, &args[1]);
  if (!s) s = ttpu_pjrt_execute(c, e, device, args, 2, &out, 1, NULL);
  if (!s) s = ttpu_pjrt_buffer_to_host(c, out, r, sizeof(r));
  /* The donated input is gone: reading it is an error, never a crash. */
  ttpu_status* sd = s ? NULL : ttpu_pjrt_buffer_to_host(c, args[0], stale, sizeof(stale));
  /* The non-donated one is intact. */
  float kept[4] = {0};
  ttpu_status* sk = s ? NULL : ttpu_pjrt_buffer_to_host(c, args[1], kept, sizeof(kept));
  int dev = out ? device_of(c, out) : -1;
  int donated_gone = sd != NULL;
  if (sd) printf("    reading the donated buffer: %s\n", ttpu_status_message(sd));
  ttpu_status_free(sd);
  ttpu_pjrt_buffer_destroy(c, args[0]);
  ttpu_pjrt_buffer_destroy(c, args[1]);
  ttpu_pjrt_buffer_destroy(c, out);
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK_OK(t, sk);
  TTPU_CHECK(t, memcmp(kept, kB, sizeof(kB)) == 0);
  for (int i = 0; i < 4; i++) TTPU_CHECK(t, r[i] == kA[i] + kB[i]);
  TTPU_CHECK(t, dev == device);
  TTPU_CHECK(t, donated_gone);
}

static void test_execute_scalar_no_args(ttpu_test_ctx* t) {
  /* 0-d output, no parameters. */
  const char* prog =
      "module @m { func.func public @main() -> (tensor<f32>) { %0 = "
      "\"stablehlo.constant\"() {value = dense<2.5> : tensor<f32>} : () -> "
      "tensor<f32>  \"func.return\"(%0) : (tensor<f32>) -> () } }";
  ttpu_pjrt_client* c = make_client(t, 2);
  TTPU_CHECK(t, c);
  ttpu_pjrt_exec* e = NULL;
  ttpu_pjrt_buffer* out = NULL;
  float r = 0;
  ttpu_status* s = ttpu_pjrt_compile(c, prog, strlen(prog), NULL, 0, &e);
  if (!s) s = ttpu_pjrt_execute(c, e, 1, NULL, 0, &out, 1, NULL);
  if (!s) s = ttpu_pjrt_buffer_to_host(c, out, &r, sizeof(r));
  ttpu_pjrt_memory_stats ms;
  ttpu_status* sm = e ? ttpu_pjrt_exec_memory_stats(c, e, &ms) : NULL;
  int ms_ok = !sm || ttpu_status_code(sm) == TTPU_UNIMPLEMENTED;
  ttpu_status_free(sm);
  ttpu_pjrt_buffer_destroy(c, out);
  ttpu_pjrt_exec_destroy(c, e);
  ttpu_pjrt_client_destroy(c);
  TTPU_CHECK_OK(t, s);
  TTPU_CHECK(t, r == 2.5f);
  TTPU_CHECK(t, ms_ok);
}

/* A code generator level reaches the plugin as an option override: every
 * level compiles and runs, each has its own options identity (the disk
 * cache's namespace), and levels outside 0-3 are refused. The plugin's
 * default level still carries the CPU options (XNNPACK off): an identity
 * of its own too. */
static void test_opt_level(ttpu_test_ctx* t) {
  ttpu_pjrt_client* c = make_client(t, 1);
  TTPU_CHECK(t, c);
  if (!c) return;
  const char* dflt = ttpu_pjrt_compile_options_id();
  TTPU_CHECK(t, !strcmp(ttpu_pjrt_client_options_id(c), dflt));
  ttpu_status* bad = ttpu_pjrt_client_set_opt_level(c, 4);
  TTPU_CHECK(t, bad && ttpu_status_code(bad) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(bad);
  bad = ttpu_pjrt_client_set_opt_level(c, -2);
  TTPU_CHECK(t, bad && ttpu_status_code(bad) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(bad);
  char seen[4][96] = {{0}};
  for (int level = 0; level <= 3; ++level) {
    ttpu_status* s = ttpu_pjrt_client_set_opt_level(c, level);
    TTPU_CHECK_OK(t, s);
    snprintf(seen[level], sizeof(seen[level]), "%s",
             ttpu_pjrt_client_options_id(c));
    TTPU_CHECK(t, strcmp(seen[level], dflt) != 0);
    for (int k = 0; k < level; ++k) TTPU_CHECK(t, strcmp(seen[level], seen[k]));
    ttpu_pjrt_exec* e = NULL;
    s = ttpu_pjrt_compile(c, ADD_PROGRAM, strlen(ADD_PROGRAM), NULL, 0, &e);
    TTPU_CHECK_OK(t, s);
    if (e) run_add(t, c, e, 0);
    ttpu_pjrt_exec_destroy(c, e);
  }
  TTPU_CHECK_OK(t, ttpu_pjrt_client_set_opt_level(c, -1));
  TTPU_CHECK(t, strcmp(ttpu_pjrt_client_options_id(c), dflt) != 0);
  for (int k = 0; k <= 3; ++k)
    TTPU_CHECK(t, strcmp(ttpu_pjrt_client_options_id(c), seen[k]) != 0);
  ttpu_pjrt_client_destroy(c);
}

/* Small programs: the largest tensor type of a program text, and the
 * CPU plugin's older loop emitters for programs at or under the bound,
 * which then compile and run as the others do, under an options identity
 * of their own. */
static void test_small_programs(ttpu_test_ctx* t) {
  static const struct {
    const char* text;
    int64_t n;
  } kTexts[] = {
      {"%0 = stablehlo.add %a, %b : tensor<4x8xf32>", 32},
      {"(tensor<f32>, tensor<3xi64>) -> tensor<2x2xcomplex<f32>>", 4},
      {"tensor<0x7xf32> tensor<5xf32>", 5},
      {"stablehlo.iota dim = 0 : tensor<16x1024xbf16>", 16384},
      {"tensor<?x4xf32, #stablehlo.bounds<8, ?>>", INT64_MAX},
      {"no types here, only a tensor< and a tens", 1},
      {"", 0},
  };
  for (size_t i = 0; i < sizeof(kTexts) / sizeof(kTexts[0]); ++i) {
    int64_t n = ttpu_pjrt_largest_tensor(kTexts[i].text, strlen(kTexts[i].text));
    if (n != kTexts[i].n) printf("  largest tensor of \"%s\": %lld\n", kTexts[i].text, (long long)n);
    TTPU_CHECK(t, n == kTexts[i].n);
  }
  ttpu_pjrt_client* c = make_client(t, 1);
  TTPU_CHECK(t, c);
  if (!c) return;
  TTPU_CHECK_OK(t, ttpu_pjrt_client_set_opt_level(c, 2));
  char plain[96];
  snprintf(plain, sizeof(plain), "%s", ttpu_pjrt_client_options_id(c));
  ttpu_status* bad = ttpu_pjrt_client_set_small_programs(c, -1);
  TTPU_CHECK(t, bad && ttpu_status_code(bad) == TTPU_INVALID_ARGUMENT);
  ttpu_status_free(bad);
  TTPU_CHECK(t, !strcmp(ttpu_pjrt_client_options_id(c), plain));
  char seen[2][96] = {{0}};
  for (int bound = 3; bound <= 4; ++bound) { /* ADD_PROGRAM's tensors: 4 */
    TTPU_CHECK_OK(t, ttpu_pjrt_client_set_small_programs(c, bound));
    snprintf(seen[bound - 3], sizeof(seen[0]), "%s", ttpu_pjrt_client_options_id(c));
    TTPU_CHECK(t, strcmp(seen[bound - 3], plain) != 0);
    ttpu_pjrt_exec* e = NULL;
    ttpu_status* s = ttpu_pjrt_compile(c, ADD_PROGRAM, strlen(ADD_PROGRAM), NULL, 0, &e);
    TTPU_CHECK_OK(t, s);
    if (e) run_add(t, c, e, 0);
    ttpu_pjrt_exec_destroy(c, e);
  }
  TTPU_CHECK(t, strcmp(seen[0], seen[1]) != 0);
  TTPU_CHECK_OK(t, ttpu_pjrt_client_set_small_programs(c, 0));
  TTPU_CHECK(t, !strcmp(ttpu_pjrt_client_options_id(c), plain));
  ttpu_pjrt_client_destroy(c);
}

static void test_status_basics(ttpu_test_ctx* t) {
  ttpu_status* s = ttpu_status_make(TTPU_NOT_FOUND, "x=%d", 3);
  s = ttpu_status_annotate(s, "loading %s", "y");
  int ok = ttpu_status_code(s) == TTPU_NOT_FOUND &&
           strcmp(ttpu_status_message(s), "loading y: x=3") == 0;
  ttpu_status_free(s);
  TTPU_CHECK(t, ok);
  TTPU_CHECK(t, ttpu_status_annotate(NULL, "z") == NULL);
  TTPU_CHECK(t, ttpu_status_code(NULL) == TTPU_OK);
  TTPU_CHECK(t, ttpu_dtype_size(TTPU_BF16) == 2);
  TTPU_CHECK(t, strcmp(ttpu_dtype_mlir(TTPU_U8), "ui8") == 0);
  TTPU_CHECK(t, strcmp(ttpu_dtype_name(TTPU_BOOL), "bool") == 0);
  TTPU_CHECK(t, ttpu_dtype_is_float(TTPU_BF16) && !ttpu_dtype_is_int(TTPU_BOOL));
  TTPU_CHECK(t, ttpu_dtype_size((ttpu_dtype)77) == 0);
}

static const ttpu_test kTests[] = {
    {"status_basics", test_status_basics},
    {"plugin_load_version", test_plugin_load_version},
    {"plugin_missing_file", test_plugin_missing_file},
    {"plugin_not_a_plugin", test_plugin_not_a_plugin},
    {"plugin_find", test_plugin_find},
    {"client_two_devices", test_client_two_devices},
    {"buffer_roundtrip", test_buffer_roundtrip},
    {"buffer_bad_input", test_buffer_bad_input},
    {"buffer_copy_device", test_buffer_copy_device},
    {"execute_add", test_execute_add},
    {"execute_bad_calls", test_execute_bad_calls},
    {"execute_scalar_no_args", test_execute_scalar_no_args},
    {"execute_donated", test_execute_donated},
    {"execute_donated_duplicate", test_execute_donated_duplicate},
    {"execute_nonportable", test_execute_nonportable},
    {"compile_malformed", test_compile_malformed},
    {"serialize_roundtrip", test_serialize_roundtrip},
    {"opt_level", test_opt_level},
    {"small_programs", test_small_programs},
    {NULL, NULL},
};
TTPU_TEST_SUITE(pjrt, kTests)
