/* engine_op_latency.c - the engine's own cost of one op call, without
 * PyTorch: add.Tensor of two 1,000-element float32 storages through
 * ttpu_op_run, strict mode, program cached, timed over N calls; and how
 * many host allocations the engine makes per call (the binary is linked
 * with --wrap=malloc,calloc,realloc, which counts the engine's own calls
 * and not the plugin's).
 *
 *   make engine-op-latency          (N = 200000; ARGS="SITE_PACKAGES N")
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ttpu.h"

long ttpu_bench_allocs;
void* __real_malloc(size_t n);
void* __real_calloc(size_t a, size_t b);
void* __real_realloc(void* p, size_t n);
void* __wrap_malloc(size_t n);
void* __wrap_calloc(size_t a, size_t b);
void* __wrap_realloc(void* p, size_t n);
void* __wrap_malloc(size_t n) { ttpu_bench_allocs++; return __real_malloc(n); }
void* __wrap_calloc(size_t a, size_t b) { ttpu_bench_allocs++; return __real_calloc(a, b); }
void* __wrap_realloc(void* p, size_t n) { ttpu_bench_allocs++; return __real_realloc(p, n); }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fail(ttpu_status* s) {
  fprintf(stderr, "%s\n", ttpu_status_message(s));
  ttpu_status_free(s);
  return 1;
}

int main(int argc, char** argv) {
  const char* dirs[] = {argc > 1 ? argv[1] : NULL, NULL};
  long n_calls = argc > 2 ? atol(argv[2]) : 200000;
  ttpu_runtime_options o;
  memset(&o, 0, sizeof(o));
  o.search_dirs = dirs[0] ? dirs : NULL;
  ttpu_runtime* rt = NULL;
  ttpu_status* s = ttpu_runtime_create(&o, &rt);
  if (s) return fail(s);
  if ((s = ttpu_runtime_set_cache_dir(rt, NULL, 0))) return fail(s);
  int64_t n = 1000, stride = 1;
  float host[1000];
  for (int i = 0; i < 1000; ++i) host[i] = (float)i;
  ttpu_buffer* b[3];
  for (int k = 0; k < 3; ++k)
    if ((s = ttpu_buffer_create(rt, 0, sizeof(host), &b[k]))) return fail(s);
  for (int k = 0; k < 2; ++k)
    if ((s = ttpu_buffer_upload(b[k], host, TTPU_F32, &n, 1))) return fail(s);
  ttpu_tensor ts[2] = {{b[0], TTPU_F32, 1, &n, &stride, 0},
                       {b[1], TTPU_F32, 1, &n, &stride, 0}};
  ttpu_tensor out = {b[2], TTPU_F32, 1, &n, &stride, 0};
  ttpu_arg args[3];
  memset(args, 0, sizeof(args));
  args[0].kind = TTPU_ARG_TENSOR;
  args[0].tensor = 0;
  args[1].kind = TTPU_ARG_TENSOR;
  args[1].tensor = 1;
  args[2].kind = TTPU_ARG_SCALAR;
  args[2].f = 1.0;
  args[2].scalar_dtype = TTPU_F64;
  ttpu_op_call call;
  memset(&call, 0, sizeof(call));
  call.op = ttpu_op_lookup("add.Tensor");
  call.n_args = 3;
  call.args = args;
  call.n_tensors = 2;
  call.tensors = ts;
  call.n_outputs = 1;
  call.outputs = &out;
  call.common_dtype = TTPU_F32;
  for (int i = 0; i < 200; ++i)
    if ((s = ttpu_op_run(rt, &call))) return fail(s);
  if ((s = ttpu_runtime_synchronize(rt, -1))) return fail(s);
  long allocs0 = ttpu_bench_allocs;
  double t0 = now();
  for (long i = 0; i < n_calls; ++i)
    if ((s = ttpu_op_run(rt, &call))) return fail(s);
  double t_enqueue = now() - t0;
  long allocs = ttpu_bench_allocs - allocs0;
  if ((s = ttpu_runtime_synchronize(rt, -1))) return fail(s);
  double t_all = now() - t0;
  printf("engine add.Tensor, 1k float32, strict, cached, %ld calls:\n", n_calls);
  printf("  enqueue      %6.2f us/call\n", t_enqueue / (double)n_calls * 1e6);
  printf("  incl. sync   %6.2f us/call\n", t_all / (double)n_calls * 1e6);
  printf("  engine host allocations per call: %.3f\n",
         (double)allocs / (double)n_calls);
  for (int k = 0; k < 3; ++k) ttpu_buffer_release(b[k]);
  ttpu_runtime_destroy(rt);
  return 0;
}
