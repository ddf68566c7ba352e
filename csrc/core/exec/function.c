/* function.c - a function's body recorded, lowered and never run: what a
 * loop (torchtpu.scan, scan_layers) calls once per iteration.
 *
 * Between begin and end the ops go into a window of their own, whatever
 * the mode and inside a graph too (the window in force is set aside and
 * comes back at the end), so the body is planned and lowered by the same
 * code as any fused window. At the end the window's program (parameters:
 * the storages it read, then its scalar packs; results: the storages asked
 * for) is wrapped into a function of the caller's tensors: parameters of
 * their logical shapes, the packs as the constants they were at the
 * recording, results of the outputs' logical shapes. The function is
 * defined for the process under a name derived from its text, exactly as
 * a JAX function's (ops/extern.c), so a loop's program calls it the same
 * way in strict mode, fused windows and graphs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "window.h"
#include "../ops/ttpu_lower.h"

/* ------------------------------------------------------------ executor */

static void function_destroy(ttpu_runtime* rt) {
  free(rt->function.owner);
  rt->function.owner = NULL;
}

const ttpu_executor_ops ttpu_executor_function = {
    .name = "function",
    .submit = ttpu_window_record,
    .flush = ttpu_window_flush, /* fails: the owner never runs the window */
    .touch = ttpu_window_touch,
    .destroy = function_destroy,
};

static void owner_ran(void* user) { (void)user; }
static int owner_wants_capture(void* user) {
  (void)user;
  return 0;
}

ttpu_status* ttpu_runtime_begin_function(ttpu_runtime* rt) {
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) return s;
  ttpu_function_state* f = &rt->function;
  if (f->depth == TTPU_FUNCTION_DEPTH) {
    pthread_mutex_unlock(&rt->mu);
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "loop bodies nest at most %d deep",
                            TTPU_FUNCTION_DEPTH);
  }
  /* Nothing is flushed: a fused window or a graph being recorded stays
   * recorded, set aside (the body is never run, so it needs only the
   * shapes of what they write), and the loop's call joins it as any op
   * does. A fused step that traces its bodies (the first) then records
   * the windows of every later step, which trace nothing. (Strict and
   * debug modes hold nothing back here.) */
  if (!f->owner) {
    f->owner = calloc(1, sizeof(*f->owner));
    if (!f->owner) {
      pthread_mutex_unlock(&rt->mu);
      return ttpu_status_oom();
    }
    *f->owner = (ttpu_window_owner){.user = rt,
                                    .name = "loop body",
                                    .ran = owner_ran,
                                    .wants_capture = owner_wants_capture,
                                    .never_run = 1};
  }
  f->saved[f->depth].window = rt->window;
  f->saved[f->depth].exec = rt->exec;
  rt->window = NULL;
  s = ttpu_window_set_owner(rt, f->owner); /* a new window */
  if (s) {
    rt->window = f->saved[f->depth].window;
  } else {
    f->depth++;
    rt->prog.exact++;
    rt->exec = &ttpu_executor_function;
  }
  pthread_mutex_unlock(&rt->mu);
  return s;
}

/* ------------------------------------------------------------ the wrapper */

static int64_t numel_of(int ndim, const int64_t* dims) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= dims[d];
  return n;
}

/* Whether t is dense, row-major, at offset 0 and covers its storage. */
static int covers(const ttpu_tensor* t) {
  if (!t->buffer || t->offset) return 0;
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    if (t->sizes[d] != 1 && t->strides[d] != expect) return 0;
    expect *= t->sizes[d];
  }
  return (size_t)expect * ttpu_dtype_size(t->dtype) == ttpu_buffer_nbytes(t->buffer);
}

/* The pack of values as a 1-d constant. */
static ttpu_val pack_const(ttpu_hlo* b, const double* f, const int64_t* i,
                           int n) {
  if (i) return ttpu_hlo_const_i64s(b, i, n);
  ttpu_val* parts = malloc((size_t)n * sizeof(*parts));
  if (!parts) return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "function: oom");
  int64_t one = 1;
  for (int k = 0; k < n; ++k)
    parts[k] = ttpu_hlo_reshape(b, ttpu_hlo_const_f(b, TTPU_F64, f[k]), 1, &one);
  ttpu_val v = n == 1 ? parts[0] : ttpu_hlo_concat(b, parts, n, 0);
  free(parts);
  return v;
}

static ttpu_status* define_function(const ttpu_window_function* fn,
                                    const ttpu_tensor* params, int n_params,
                                    const ttpu_tensor* results, int n_results,
                                    char* name, size_t name_cap) {
  for (int j = 0; j < n_params; ++j)
    if (!covers(&params[j]))
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "loop body input %d is not a dense tensor "
                              "covering its storage", j);
  for (int k = 0; k < n_results; ++k)
    if (!covers(&results[k]))
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "loop body output %d is not a dense tensor "
                              "covering its storage", k);
  uint64_t h = ttpu_fnv1a(TTPU_FNV1A_SEED, fn->text, fn->len);
  h = ttpu_types_hash(h, params, n_params);
  h = ttpu_types_hash(h, results, n_results);
  h = ttpu_fnv1a(h, fn->f, (size_t)fn->n_f * sizeof(double));
  h = ttpu_fnv1a(h, fn->i, (size_t)fn->n_i * sizeof(int64_t));
  char outer[32], inner[48];
  snprintf(outer, sizeof(outer), "ttpu_fn_%016llx", (unsigned long long)h);
  snprintf(inner, sizeof(inner), "%s_body", outer);

  char* inner_text = ttpu_hlo_module_as_callee(fn->text, inner);
  ttpu_hlo* b = ttpu_hlo_create();
  ttpu_val* in = malloc(((size_t)n_params + 1) * sizeof(*in));
  ttpu_val* args = malloc(((size_t)fn->n_params + 1) * sizeof(*args));
  ttpu_type* res = malloc(((size_t)n_results + 1) * sizeof(*res));
  ttpu_val* outs = malloc(((size_t)n_results + 1) * sizeof(*outs));
  ttpu_status* s = NULL;
  if (!inner_text || !b || !in || !args || !res || !outs) {
    s = ttpu_status_oom();
    goto done;
  }
  ttpu_hlo_set_optimize(b, 1);
  for (int j = 0; j < n_params; ++j)
    in[j] = ttpu_hlo_param(
        b, ttpu_type_make(params[j].dtype, params[j].ndim, params[j].sizes), -1);
  for (int p = 0; p < fn->n_params && !s; ++p) {
    if (p == fn->f_param) {
      args[p] = pack_const(b, fn->f, NULL, fn->n_f);
      continue;
    }
    if (p == fn->i_param) {
      args[p] = pack_const(b, NULL, fn->i, fn->n_i);
      continue;
    }
    int j = 0;
    while (j < n_params && params[j].buffer != fn->param_buf[p]) ++j;
    const ttpu_prog_store* x = &fn->param[p];
    if (j == n_params)
      s = ttpu_status_make(
          TTPU_INVALID_ARGUMENT,
          "the loop body reads a tpu tensor that is not one of its inputs "
          "(a tensor captured from outside the body, or made on the host "
          "inside it): pass it to the loop as an input");
    else if (x->dtype != params[j].dtype ||
             numel_of(x->ndim, x->dims) != numel_of(params[j].ndim, params[j].sizes))
      s = ttpu_status_make(TTPU_UNIMPLEMENTED,
                           "loop body input %d of dtype %s: its storage holds "
                           "another type", j, ttpu_dtype_name(params[j].dtype));
    else
      args[p] = ttpu_hlo_reshape(b, in[j], x->ndim, x->dims);
  }
  for (int k = 0; k < n_results && !s; ++k) {
    const ttpu_result_plan* r = &fn->results[k];
    if (r->dtype != results[k].dtype ||
        numel_of(r->ndim, r->dims) != numel_of(results[k].ndim, results[k].sizes))
      s = ttpu_status_make(TTPU_UNIMPLEMENTED,
                           "loop body output %d of dtype %s: its storage holds "
                           "another type", k, ttpu_dtype_name(results[k].dtype));
    res[k] = ttpu_type_make(r->dtype, r->ndim, r->dims);
  }
  if (s) goto done;
  ttpu_hlo_call(b, inner, inner_text, args, fn->n_params, res, n_results, outs);
  for (int k = 0; k < n_results; ++k)
    outs[k] = ttpu_hlo_reshape(b, outs[k], results[k].ndim, results[k].sizes);
  ttpu_hlo_return(b, outs, n_results);
  s = ttpu_extern_define_module(b, outer, name, name_cap);
done:
  if (s) s = ttpu_status_annotate(s, "defining a loop body");
  ttpu_hlo_free(b);
  free(inner_text);
  free(in);
  free(args);
  free(res);
  free(outs);
  return s;
}

ttpu_status* ttpu_runtime_end_function(ttpu_runtime* rt,
                                       const ttpu_tensor* params, int n_params,
                                       const ttpu_tensor* results,
                                       int n_results, char* name,
                                       size_t name_cap) {
  if (name && name_cap) name[0] = 0;
  if (results && (n_results < 1 || n_params < 0 || (n_params && !params)))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "end_function: a body needs at least one output");
  ttpu_buffer** outs = calloc((size_t)n_results + 1, sizeof(*outs));
  if (!outs) return ttpu_status_oom();
  for (int k = 0; results && k < n_results; ++k) outs[k] = results[k].buffer;
  ttpu_status* s = ttpu_rt_enter(rt);
  if (s) {
    free(outs);
    return s;
  }
  ttpu_function_state* f = &rt->function;
  if (!f->depth) {
    pthread_mutex_unlock(&rt->mu);
    free(outs);
    return ttpu_status_make(TTPU_FAILED_PRECONDITION,
                            "end_function: no function is being recorded");
  }
  ttpu_window_function fn;
  memset(&fn, 0, sizeof(fn));
  if (results) s = ttpu_window_lower_function(rt, outs, n_results, &fn);
  ttpu_window_destroy(rt);
  f->depth--;
  rt->prog.exact--;
  rt->window = f->saved[f->depth].window;
  rt->exec = f->saved[f->depth].exec;
  pthread_mutex_unlock(&rt->mu);
  free(outs);
  if (!s && results)
    s = define_function(&fn, params, n_params, results, n_results, name,
                        name_cap);
  ttpu_window_function_free(&fn);
  return s;
}
