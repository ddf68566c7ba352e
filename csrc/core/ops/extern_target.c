/* extern_target.c - a program's JAX callees for another platform: a
 * program captured on one platform (the CPU plugin) and compiled ahead of
 * time for another (TPU) calls each JAX function as lowered for the first;
 * the front end lowers it again for the target (Pallas kernels become
 * Mosaic kernels) and hands that text here, and ttpu_aot_retarget swaps
 * each callee's block in the program for it.
 *
 * A callee's block is the text the front end defined (ttpu_extern_define),
 * which starts with the line "// torchtpu.jax_op NAME" and ends with
 * "// end NAME"; the builder prints it once after main. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu.h"
#include "ttpu_aot.h"

#define BEGIN_MARK "// torchtpu.jax_op "
#define END_MARK "// end "

typedef struct {
  char* platform;
  char* callee;
  char* text;
} variant;

/* Append-only, like the callees themselves (ops/extern.c). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static variant* g_vars;
static int g_n, g_cap;

static const variant* find_locked(const char* platform, const char* callee,
                                  size_t callee_len) {
  for (int i = 0; i < g_n; i++)
    if (!strcmp(g_vars[i].platform, platform) &&
        strlen(g_vars[i].callee) == callee_len &&
        !strncmp(g_vars[i].callee, callee, callee_len))
      return &g_vars[i];
  return NULL;
}

ttpu_status* ttpu_aot_define_callee(const char* platform, const char* callee,
                                    const char* text) {
  if (!platform || !*platform || !callee || !*callee || !text || !*text)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "define_callee: a platform, a callee and its text "
                            "are required");
  pthread_mutex_lock(&g_lock);
  const variant* v = find_locked(platform, callee, strlen(callee));
  ttpu_status* s = NULL;
  if (v) {
    if (strcmp(v->text, text))
      s = ttpu_status_make(TTPU_INVALID_ARGUMENT,
                           "define_callee: %s has another text for %s already",
                           callee, platform);
  } else if (g_n == g_cap) {
    int cap = g_cap ? 2 * g_cap : 8;
    variant* grown = realloc(g_vars, (size_t)cap * sizeof(*grown));
    if (!grown) s = ttpu_status_oom();
    else {
      g_vars = grown;
      g_cap = cap;
    }
  }
  if (!s && !v) {
    variant nv = {strdup(platform), strdup(callee), strdup(text)};
    if (!nv.platform || !nv.callee || !nv.text) {
      free(nv.platform);
      free(nv.callee);
      free(nv.text);
      s = ttpu_status_oom();
    } else {
      g_vars[g_n++] = nv;
    }
  }
  pthread_mutex_unlock(&g_lock);
  return s;
}

/* A growing output buffer. */
typedef struct {
  char* p;
  size_t n, cap;
  int oom;
} outbuf;

static void put(outbuf* o, const char* s, size_t n) {
  if (o->oom) return;
  if (o->n + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 256;
    while (o->n + n + 1 > cap) cap *= 2;
    char* grown = realloc(o->p, cap);
    if (!grown) {
      o->oom = 1;
      return;
    }
    o->p = grown;
    o->cap = cap;
  }
  memcpy(o->p + o->n, s, n);
  o->n += n;
  o->p[o->n] = 0;
}

/* In text[0..len), the first BEGIN_MARK at a line start from `from`, or
 * NULL. */
static const char* next_block(const char* text, size_t len, const char* from) {
  const char* end = text + len;
  size_t m = strlen(BEGIN_MARK);
  for (const char* p = from; p + m <= end; ++p) {
    if ((p == text || p[-1] == '\n') && !memcmp(p, BEGIN_MARK, m)) return p;
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return NULL;
    p = nl;
  }
  return NULL;
}

ttpu_status* ttpu_aot_retarget(const char* text, size_t len,
                               const char* platform, char** out,
                               size_t* out_len) {
  if (!out || !out_len)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  *out_len = 0;
  if (!text || !platform)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "retarget: a text and a platform are required");
  outbuf o = {0};
  const char* end = text + len;
  const char* at = text;
  pthread_mutex_lock(&g_lock);
  for (const char* b = next_block(text, len, at); b;
       b = next_block(text, len, at)) {
    const char* name = b + strlen(BEGIN_MARK);
    const char* eol = memchr(name, '\n', (size_t)(end - name));
    if (!eol) break;
    size_t name_len = (size_t)(eol - name);
    /* The block ends at the line "// end NAME". */
    const char* stop = NULL;
    for (const char* p = eol + 1; p < end;) {
      const char* nl = memchr(p, '\n', (size_t)(end - p));
      const char* line_end = nl ? nl : end;
      size_t em = strlen(END_MARK);
      if ((size_t)(line_end - p) == em + name_len && !memcmp(p, END_MARK, em) &&
          !memcmp(p + em, name, name_len)) {
        stop = nl ? nl + 1 : end;
        break;
      }
      p = nl ? nl + 1 : end;
    }
    if (!stop) break; /* not a whole block: left as it is */
    const variant* v = find_locked(platform, name, name_len);
    put(&o, at, (size_t)(b - at));
    if (v) {
      put(&o, v->text, strlen(v->text));
      if (o.n && o.p[o.n - 1] != '\n') put(&o, "\n", 1);
    } else {
      put(&o, b, (size_t)(stop - b)); /* not lowered for platform: kept */
    }
    at = stop;
  }
  pthread_mutex_unlock(&g_lock);
  put(&o, at, (size_t)(end - at));
  if (o.oom || !o.p) {
    free(o.p);
    return o.oom ? ttpu_status_oom() : ttpu_status_make(TTPU_INTERNAL, "empty");
  }
  *out = o.p;
  *out_len = o.n;
  return NULL;
}
