/* extern.c - calls of functions defined outside the engine: StableHLO a
 * front end lowered for us (a JAX function, torchtpu.jax_op), run as the
 * op "torchtpu::extern_call(Tensor[] inputs, str callee)".
 *
 * ttpu_extern_define gives a callee its defining text once per process;
 * the lowering emits a func.call of it with the inputs' values and the
 * outputs' types, and the builder prints the text once after main, so a
 * callee lives inside strict programs, fused windows and graphs alike and
 * XLA optimizes across the call. The callee's name is part of the op's
 * signature (a STR argument), so its text must be a function of the name:
 * the front end derives the name from the text. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"

typedef struct {
  char* callee;
  char* text;
} extern_fn;

/* Append-only: a defined text is never freed or changed, so a pointer
 * handed out stays valid for the process. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static extern_fn* g_fns;
static int g_n, g_cap;

static const char* find_locked(const char* callee) {
  for (int i = 0; i < g_n; i++)
    if (!strcmp(g_fns[i].callee, callee)) return g_fns[i].text;
  return NULL;
}

ttpu_status* ttpu_extern_define(const char* callee, const char* text) {
  if (!callee || !callee[0] || !text || !text[0])
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "extern_define: a callee name and its text are required");
  if (!strstr(text, callee))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "extern_define: the text does not define @%s", callee);
  ttpu_status* st = NULL;
  pthread_mutex_lock(&g_lock);
  const char* old = find_locked(callee);
  if (old) {
    if (strcmp(old, text))
      st = ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "extern_define: @%s is already defined by another text",
                            callee);
    pthread_mutex_unlock(&g_lock);
    return st;
  }
  if (g_n == g_cap) {
    int cap = g_cap ? g_cap * 2 : 16;
    extern_fn* p = realloc(g_fns, (size_t)cap * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&g_lock);
      return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "extern_define: out of memory");
    }
    g_fns = p;
    g_cap = cap;
  }
  char* c = strdup(callee);
  char* t = strdup(text);
  if (!c || !t) {
    free(c);
    free(t);
    st = ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "extern_define: out of memory");
  } else {
    g_fns[g_n].callee = c;
    g_fns[g_n].text = t;
    g_n++;
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

ttpu_status* ttpu_extern_define_module(ttpu_hlo* b, const char* callee,
                                       char* name, size_t name_cap) {
  char* text = NULL;
  ttpu_status* s = ttpu_hlo_take_status(b);
  if (!s) s = ttpu_hlo_print(b, &text, NULL);
  if (s) return s;
  char* ctext = ttpu_hlo_module_as_callee(text, callee);
  free(text);
  if (!ctext) return ttpu_status_oom();
  s = ttpu_extern_define(callee, ctext);
  free(ctext);
  if (!s && name && name_cap) snprintf(name, name_cap, "%s", callee);
  return s;
}

const char* ttpu_extern_text(const char* callee) {
  if (!callee) return NULL;
  pthread_mutex_lock(&g_lock);
  const char* t = find_locked(callee);
  pthread_mutex_unlock(&g_lock);
  return t;
}

static ttpu_status* lower_extern_call(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const char* callee = ttpu_l_str(L, 1, NULL);
  const char* text = ttpu_extern_text(callee);
  if (!text)
    return ttpu_status_make(TTPU_NOT_FOUND,
                            "extern_call: no function @%s is defined "
                            "(ttpu_extern_define)",
                            callee ? callee : "(null)");
  int n = ttpu_l_count(L, 0);
  int nout = ttpu_l_nout(L);
  if (nout < 1)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "extern_call: @%s: a call needs at least one output", callee);
  ttpu_val* args = malloc((size_t)(n ? n : 1) * sizeof *args);
  ttpu_type* res = malloc((size_t)nout * sizeof *res);
  ttpu_val* outs = malloc((size_t)nout * sizeof *outs);
  if (!args || !res || !outs) {
    free(args);
    free(res);
    free(outs);
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "extern_call: out of memory");
  }
  for (int k = 0; k < n; k++) args[k] = ttpu_l_tensor_at(L, 0, k);
  for (int k = 0; k < nout; k++) res[k] = ttpu_l_out_type(L, k);
  ttpu_hlo_call(b, callee, text, args, n, res, nout, outs);
  for (int k = 0; k < nout; k++) ttpu_l_set_out(L, k, outs[k]);
  free(args);
  free(res);
  free(outs);
  return NULL;
}

const ttpu_op_def ttpu_ops_extern[] = {
    {"torchtpu::extern_call", lower_extern_call, .flags = TTPU_OP_COMPLEX_AS_IS},
    {0},
};
