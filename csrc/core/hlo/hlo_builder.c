/* hlo_builder.c - builder state, values, scopes, op emission and printing. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

typedef struct {
  ttpu_type type;
  int param;   /* parameter index, or -1 */
  int name;    /* SSA number (%N) when not a parameter */
  int sub;     /* result number of a multi-result op (%N#sub), or -1 */
  int scope;   /* id of the region that defines it; 0 = function body */
  /* What defined it, for the folding helpers (ttpu_hloi_def): one of
   * TTPU_HLOI_DEF_*, its operand, and a transpose's permutation or a
   * broadcast's dimension map. */
  int def;
  int src;
  signed char perm[TTPU_MAX_DIMS];
} hlo_value;

/* One op of the function body, for dead-code removal: its text in the
 * body, its results and its operands (values used by ops inside its
 * regions count as its operands). */
typedef struct {
  size_t start, end;
  int first, n_res;
  int ops_at, n_ops;
  int removable; /* 0 for ops with effects beyond their results */
} hlo_rec;

/* The common-subexpression table: an op's text after its result name
 * (name, operands, attributes, types) maps to the value it defined. */
typedef struct {
  char* key;
  uint64_t hash;
  int val;
} hlo_cse;

typedef struct {
  ttpu_hloi_buf text;
  int id;
} hlo_scope;

struct ttpu_hlo {
  hlo_value* vals;
  int n_vals, cap_vals;
  int* params; /* value ids of the parameters, in order */
  int* aliases;
  int n_params, cap_params;
  int next_name;
  int next_scope_id;
  /* scopes[0] is the function body; deeper entries are open regions. */
  hlo_scope* scopes;
  int depth, cap_scopes;
  int* results;
  int n_results;
  int returned;
  ttpu_status* err;
  int oom; /* an allocation failed outside any text buffer */
  /* ttpu_hlo_set_optimize: reuse identical pure ops, drop unused ones. */
  int optimize;
  hlo_cse* cse;
  int n_cse, cap_cse;
  hlo_rec* recs;
  int n_recs, cap_recs;
  int* rec_ops;
  int n_rec_ops, cap_rec_ops;
  int* pending; /* function-body values used inside the open regions */
  int n_pending, cap_pending;
  /* ttpu_hlo_call: the callees and the text defining each, printed once
   * after main in the order of their first call. */
  char** callees;
  char** callee_texts;
  int n_callees, cap_callees;
};

/* ------------------------------------------------------------ text buffer */

static int buf_reserve(ttpu_hloi_buf* s, size_t extra) {
  if (s->oom) return 0;
  if (s->n + extra + 1 <= s->cap) return 1;
  size_t cap = s->cap ? s->cap : 256;
  while (cap < s->n + extra + 1) cap *= 2;
  char* p = realloc(s->p, cap);
  if (!p) {
    s->oom = 1;
    return 0;
  }
  s->p = p;
  s->cap = cap;
  return 1;
}

void ttpu_hloi_buf_free(ttpu_hloi_buf* s) {
  free(s->p);
  memset(s, 0, sizeof *s);
}

void ttpu_hloi_buf_put(ttpu_hloi_buf* s, const char* str) {
  size_t k = strlen(str);
  if (!buf_reserve(s, k)) return;
  memcpy(s->p + s->n, str, k + 1);
  s->n += k;
}

static void buf_putn(ttpu_hloi_buf* s, const char* str, size_t k) {
  if (!buf_reserve(s, k)) return;
  memcpy(s->p + s->n, str, k);
  s->n += k;
  s->p[s->n] = 0;
}

void ttpu_hloi_buf_printf(ttpu_hloi_buf* s, const char* fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (k < 0) {
    s->oom = 1;
    return;
  }
  if (!buf_reserve(s, (size_t)k)) return;
  if ((size_t)k < sizeof small) {
    memcpy(s->p + s->n, small, (size_t)k + 1);
  } else {
    va_start(ap, fmt);
    vsnprintf(s->p + s->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
  }
  s->n += (size_t)k;
}

char* ttpu_hloi_buf_take(ttpu_hloi_buf* s) {
  if (s->oom) {
    ttpu_hloi_buf_free(s);
    return NULL;
  }
  if (!buf_reserve(s, 0)) return NULL;
  if (s->n == 0) s->p[0] = '\0';
  char* p = s->p;
  memset(s, 0, sizeof *s);
  return p;
}

/* ------------------------------------------------------------ types */

int ttpu_hloi_bits(ttpu_dtype t) {
  switch (t) {
    case TTPU_BOOL: case TTPU_U8: case TTPU_I8: return 8;
    case TTPU_I16: case TTPU_U16: case TTPU_F16: case TTPU_BF16: return 16;
    case TTPU_I32: case TTPU_U32: case TTPU_F32: return 32;
    case TTPU_I64: case TTPU_U64: case TTPU_F64: case TTPU_C64: return 64;
    case TTPU_C128: return 128;
    default: return 0;
  }
}

const char* ttpu_hloi_mlir(ttpu_dtype t) {
  if (!ttpu_hloi_dtype_valid(t)) return "?";
  return ttpu_dtype_mlir(t);
}

void ttpu_hloi_put_type(ttpu_hloi_buf* s, const ttpu_type* t) {
  ttpu_hloi_buf_put(s, "tensor<");
  for (int i = 0; i < t->ndim; i++)
    ttpu_hloi_buf_printf(s, "%lldx", (long long)t->dims[i]);
  ttpu_hloi_buf_put(s, ttpu_hloi_mlir(t->dtype));
  ttpu_hloi_buf_put(s, ">");
}

void ttpu_hloi_put_array(ttpu_hloi_buf* s, const int64_t* v, int n) {
  ttpu_hloi_buf_put(s, n ? "array<i64: " : "array<i64");
  for (int i = 0; i < n; i++)
    ttpu_hloi_buf_printf(s, i ? ", %lld" : "%lld", (long long)v[i]);
  ttpu_hloi_buf_put(s, ">");
}

void ttpu_hloi_put_list(ttpu_hloi_buf* s, const int64_t* v, int n) {
  ttpu_hloi_buf_put(s, "[");
  for (int i = 0; i < n; i++)
    ttpu_hloi_buf_printf(s, i ? ", %lld" : "%lld", (long long)v[i]);
  ttpu_hloi_buf_put(s, "]");
}

void ttpu_hloi_type_desc(const ttpu_type* t, char* out, size_t cap) {
  size_t k = 0;
  int w = snprintf(out, cap, "%s[",
                   ttpu_hloi_dtype_valid(t->dtype) ? ttpu_dtype_name(t->dtype)
                                                   : "?");
  if (w < 0) return;
  k = (size_t)w;
  for (int i = 0; i < t->ndim && i < TTPU_MAX_DIMS && k < cap; i++) {
    w = snprintf(out + k, cap - k, i ? ",%lld" : "%lld",
                 (long long)t->dims[i]);
    if (w < 0) return;
    k += (size_t)w;
  }
  if (k < cap) snprintf(out + k, cap - k, "]");
}

ttpu_type ttpu_type_make(ttpu_dtype dtype, int ndim, const int64_t* dims) {
  ttpu_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  /* An impossible rank is kept visible (-1) so the op that receives the
   * type reports it, rather than being silently truncated here. */
  if (ndim < 0 || ndim > TTPU_MAX_DIMS) {
    t.ndim = -1;
    return t;
  }
  t.ndim = ndim;
  for (int i = 0; i < ndim; i++) t.dims[i] = dims ? dims[i] : 1;
  return t;
}

int64_t ttpu_type_numel(const ttpu_type* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->dims[i];
  return n;
}

ttpu_type ttpu_hloi_scalar_type(ttpu_dtype dt) {
  return ttpu_type_make(dt, 0, NULL);
}

int ttpu_hloi_same_dims(const ttpu_type* a, const ttpu_type* b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

int ttpu_hloi_same_type(const ttpu_type* a, const ttpu_type* b) {
  return a->dtype == b->dtype && ttpu_hloi_same_dims(a, b);
}

/* ------------------------------------------------------------ lifecycle */

ttpu_hlo* ttpu_hlo_create(void) {
  ttpu_hlo* b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->scopes = calloc(4, sizeof *b->scopes);
  if (!b->scopes) {
    free(b);
    return NULL;
  }
  b->cap_scopes = 4;
  b->depth = 1;
  b->scopes[0].id = 0;
  b->next_scope_id = 1;
  return b;
}

void ttpu_hlo_free(ttpu_hlo* b) {
  if (!b) return;
  for (int i = 0; i < b->cap_cse; i++) free(b->cse[i].key);
  free(b->cse);
  free(b->recs);
  free(b->rec_ops);
  free(b->pending);
  for (int i = 0; i < b->depth; i++) ttpu_hloi_buf_free(&b->scopes[i].text);
  free(b->scopes);
  free(b->vals);
  free(b->params);
  free(b->aliases);
  free(b->results);
  for (int i = 0; i < b->n_callees; i++) {
    free(b->callees[i]);
    free(b->callee_texts[i]);
  }
  free(b->callees);
  free(b->callee_texts);
  if (b->err) ttpu_status_free(b->err);
  free(b);
}

const ttpu_status* ttpu_hlo_status(const ttpu_hlo* b) { return b->err; }

ttpu_status* ttpu_hlo_take_status(ttpu_hlo* b) {
  ttpu_status* s = b->err;
  b->err = NULL;
  return s;
}

int ttpu_hloi_failed(const ttpu_hlo* b) { return b->err != NULL; }

ttpu_val ttpu_hlo_fail(ttpu_hlo* b, ttpu_code code, const char* fmt, ...) {
  if (b->err) return TTPU_VAL_ERROR;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  b->err = ttpu_status_make(code, "%s", msg);
  return TTPU_VAL_ERROR;
}

/* ------------------------------------------------------------ values */

static int scope_visible(const ttpu_hlo* b, int scope) {
  for (int i = 0; i < b->depth; i++)
    if (b->scopes[i].id == scope) return 1;
  return 0;
}

const ttpu_type* ttpu_hlo_type(const ttpu_hlo* b, ttpu_val v) {
  if (v < 0 || v >= b->n_vals) return NULL;
  return &b->vals[v].type;
}

const ttpu_type* ttpu_hloi_check(ttpu_hlo* b, ttpu_val v, const char* what) {
  if (b->err) return NULL;
  if (v < 0 || v >= b->n_vals) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "%s: invalid value id %d", what, v);
    return NULL;
  }
  if (!scope_visible(b, b->vals[v].scope)) {
    ttpu_hlo_fail(b, TTPU_INTERNAL,
                  "%s: value %d belongs to a region that is not open", what,
                  v);
    return NULL;
  }
  return &b->vals[v].type;
}

int ttpu_hloi_type_ok(ttpu_hlo* b, const ttpu_type* t, const char* what) {
  if (b->err) return 0;
  if (!ttpu_hloi_dtype_valid(t->dtype)) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: invalid dtype %d", what,
                  (int)t->dtype);
    return 0;
  }
  if (t->ndim < 0 || t->ndim > TTPU_MAX_DIMS) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: rank %d out of [0, %d]",
                  what, t->ndim, TTPU_MAX_DIMS);
    return 0;
  }
  for (int i = 0; i < t->ndim; i++) {
    if (t->dims[i] < 0) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "%s: negative size %lld",
                    what, (long long)t->dims[i]);
      return 0;
    }
  }
  return 1;
}

static ttpu_val new_value(ttpu_hlo* b, const ttpu_type* t, int param,
                          int name, int sub) {
  if (b->n_vals == b->cap_vals) {
    int cap = b->cap_vals ? b->cap_vals * 2 : 64;
    hlo_value* v = realloc(b->vals, (size_t)cap * sizeof *v);
    if (!v) {
      b->oom = 1;
      return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED,
                           "hlo builder: out of memory");
    }
    b->vals = v;
    b->cap_vals = cap;
  }
  hlo_value* v = &b->vals[b->n_vals];
  v->type = *t;
  v->param = param;
  v->name = name;
  v->sub = sub;
  v->scope = b->scopes[b->depth - 1].id;
  v->def = TTPU_HLOI_DEF_OTHER;
  v->src = -1;
  return b->n_vals++;
}

void ttpu_hlo_set_optimize(ttpu_hlo* b, int on) { b->optimize = on != 0; }

void ttpu_hloi_set_def(ttpu_hlo* b, ttpu_val v, int def, ttpu_val src,
                       const int64_t* perm) {
  if (v < 0 || v >= b->n_vals) return;
  hlo_value* x = &b->vals[v];
  x->def = def;
  x->src = src;
  if (perm) {
    /* a transpose's permutation has the value's rank; a broadcast's map
     * has its operand's */
    int n = def == TTPU_HLOI_DEF_BROADCAST ? b->vals[src].type.ndim : x->type.ndim;
    for (int i = 0; i < n; i++) x->perm[i] = (signed char)perm[i];
  }
}

int ttpu_hloi_def(const ttpu_hlo* b, ttpu_val v, ttpu_val* src,
                  int64_t* perm) {
  if (!b->optimize || v < 0 || v >= b->n_vals) return TTPU_HLOI_DEF_OTHER;
  const hlo_value* x = &b->vals[v];
  if (x->def == TTPU_HLOI_DEF_OTHER || x->src < 0) return TTPU_HLOI_DEF_OTHER;
  /* A fold must not reach into a region that is closed, nor use a value
   * of the body from a region (the pending-use bookkeeping sees only
   * operands): fold only within one scope. */
  if (b->vals[x->src].scope != x->scope ||
      x->scope != b->scopes[b->depth - 1].id)
    return TTPU_HLOI_DEF_OTHER;
  if (src) *src = x->src;
  if (perm) {
    int n = x->def == TTPU_HLOI_DEF_BROADCAST ? b->vals[x->src].type.ndim
                                              : x->type.ndim;
    for (int i = 0; i < n; i++) perm[i] = x->perm[i];
  }
  return x->def;
}

static int push_int(int** a, int* n, int* cap, int v) {
  if (*n == *cap) {
    int c = *cap ? *cap * 2 : 64;
    int* p = realloc(*a, (size_t)c * sizeof *p);
    if (!p) return -1;
    *a = p;
    *cap = c;
  }
  (*a)[(*n)++] = v;
  return 0;
}

/* Ops that must stay even when nothing uses their results, and ops two
 * of which with the same operands may differ (stateful random numbers,
 * collectives, calls into the plugin). */
static int op_has_effects(const char* name) {
  static const char* const effects[] = {
      "custom_call", "all_reduce", "all_gather", "reduce_scatter",
      "all_to_all", "collective", "send", "recv", "infeed", "outfeed",
      "optimization_barrier", "after_all", "rng", "partition_id",
      "replica_id"};
  for (size_t i = 0; i < sizeof effects / sizeof *effects; i++)
    if (strstr(name, effects[i])) return 1;
  return 0;
}

static uint64_t text_hash(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* The value an earlier op with this text defined, or -1. */
static int cse_find(const ttpu_hlo* b, const char* key, size_t n,
                    uint64_t h) {
  if (!b->cap_cse) return -1;
  for (size_t i = h & (size_t)(b->cap_cse - 1);;
       i = (i + 1) & (size_t)(b->cap_cse - 1)) {
    const hlo_cse* e = &b->cse[i];
    if (!e->key) return -1;
    if (e->hash == h && !strncmp(e->key, key, n) && !e->key[n]) return e->val;
  }
}

static void cse_put(ttpu_hlo* b, const char* key, size_t n, uint64_t h,
                    int val) {
  if ((b->n_cse + 1) * 2 > b->cap_cse) {
    int cap = b->cap_cse ? b->cap_cse * 2 : 256;
    hlo_cse* t = calloc((size_t)cap, sizeof *t);
    if (!t) return; /* the table is an optimization: go on without it */
    for (int i = 0; i < b->cap_cse; i++) {
      if (!b->cse[i].key) continue;
      size_t j = b->cse[i].hash & (size_t)(cap - 1);
      while (t[j].key) j = (j + 1) & (size_t)(cap - 1);
      t[j] = b->cse[i];
    }
    free(b->cse);
    b->cse = t;
    b->cap_cse = cap;
  }
  char* k = malloc(n + 1);
  if (!k) return;
  memcpy(k, key, n);
  k[n] = 0;
  size_t j = h & (size_t)(b->cap_cse - 1);
  while (b->cse[j].key) j = (j + 1) & (size_t)(b->cap_cse - 1);
  b->cse[j].key = k;
  b->cse[j].hash = h;
  b->cse[j].val = val;
  b->n_cse++;
}

static void put_ref(ttpu_hlo* b, ttpu_hloi_buf* s, ttpu_val id) {
  const hlo_value* v = &b->vals[id];
  if (v->param >= 0)
    ttpu_hloi_buf_printf(s, "%%arg%d", v->param);
  else if (v->sub >= 0)
    ttpu_hloi_buf_printf(s, "%%%d#%d", v->name, v->sub);
  else
    ttpu_hloi_buf_printf(s, "%%%d", v->name);
}

static ttpu_hloi_buf* cur_text(ttpu_hlo* b) {
  return &b->scopes[b->depth - 1].text;
}

static void indent(ttpu_hlo* b, ttpu_hloi_buf* s) {
  for (int i = 0; i < b->depth + 1; i++) ttpu_hloi_buf_put(s, "  ");
}

ttpu_val ttpu_hlo_param(ttpu_hlo* b, ttpu_type t, int alias_output) {
  if (b->err) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_type_ok(b, &t, "param")) return TTPU_VAL_ERROR;
  if (b->depth != 1)
    return ttpu_hlo_fail(b, TTPU_INTERNAL, "param: added inside a region");
  if (b->n_params == b->cap_params) {
    int cap = b->cap_params ? b->cap_params * 2 : 16;
    int* p = realloc(b->params, (size_t)cap * sizeof *p);
    if (!p) return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "param: oom");
    b->params = p;
    int* a = realloc(b->aliases, (size_t)cap * sizeof *a);
    if (!a) return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "param: oom");
    b->aliases = a;
    b->cap_params = cap;
  }
  ttpu_val v = new_value(b, &t, b->n_params, -1, -1);
  if (v == TTPU_VAL_ERROR) return v;
  b->params[b->n_params] = v;
  b->aliases[b->n_params] = alias_output < 0 ? -1 : alias_output;
  b->n_params++;
  return v;
}

void ttpu_hlo_return(ttpu_hlo* b, const ttpu_val* vals, int n) {
  if (b->err) return;
  if (b->returned) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "return: called twice");
    return;
  }
  if (b->depth != 1) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "return: a region is still open");
    return;
  }
  if (n < 0) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "return: negative count");
    return;
  }
  for (int i = 0; i < n; i++)
    if (!ttpu_hloi_check(b, vals[i], "return")) return;
  b->results = malloc((size_t)(n ? n : 1) * sizeof *b->results);
  if (!b->results) {
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "return: oom");
    return;
  }
  if (n) memcpy(b->results, vals, (size_t)n * sizeof *vals);
  b->n_results = n;
  b->returned = 1;
}

/* ------------------------------------------------------------ emission */

ttpu_val ttpu_hloi_emit(ttpu_hlo* b, const char* name, const ttpu_val* ops,
                        int n_ops, const char* regions, const char* attrs,
                        const ttpu_type* res, int n_res, ttpu_val* outs) {
  for (int i = 0; i < n_res; i++)
    if (outs) outs[i] = TTPU_VAL_ERROR;
  if (b->err) return TTPU_VAL_ERROR;
  for (int i = 0; i < n_ops; i++)
    if (!ttpu_hloi_check(b, ops[i], name)) return TTPU_VAL_ERROR;
  for (int i = 0; i < n_res; i++)
    if (!ttpu_hloi_type_ok(b, &res[i], name)) return TTPU_VAL_ERROR;

  int ssa = b->next_name++;
  ttpu_hloi_buf* s = cur_text(b);
  size_t line_start = s->n;
  indent(b, s);
  size_t key_start = 0;
  if (n_res == 1)
    ttpu_hloi_buf_printf(s, "%%%d = ", ssa);
  else if (n_res > 1)
    ttpu_hloi_buf_printf(s, "%%%d:%d = ", ssa, n_res);
  key_start = s->n;
  ttpu_hloi_buf_printf(s, "\"%s\"(", name);
  for (int i = 0; i < n_ops; i++) {
    if (i) ttpu_hloi_buf_put(s, ", ");
    put_ref(b, s, ops[i]);
  }
  ttpu_hloi_buf_put(s, ")");
  if (regions) {
    ttpu_hloi_buf_put(s, " ");
    ttpu_hloi_buf_put(s, regions);
  }
  if (attrs && attrs[0]) {
    ttpu_hloi_buf_put(s, " {");
    ttpu_hloi_buf_put(s, attrs);
    ttpu_hloi_buf_put(s, "}");
  }
  ttpu_hloi_buf_put(s, " : (");
  for (int i = 0; i < n_ops; i++) {
    if (i) ttpu_hloi_buf_put(s, ", ");
    ttpu_hloi_put_type(s, &b->vals[ops[i]].type);
  }
  ttpu_hloi_buf_put(s, ") -> ");
  if (n_res != 1) ttpu_hloi_buf_put(s, "(");
  for (int i = 0; i < n_res; i++) {
    if (i) ttpu_hloi_buf_put(s, ", ");
    ttpu_hloi_put_type(s, &res[i]);
  }
  if (n_res != 1) ttpu_hloi_buf_put(s, ")");
  ttpu_hloi_buf_put(s, "\n");

  int effects = b->optimize ? op_has_effects(name) : 1;
  uint64_t h = 0;
  size_t key_len = 0;
  if (b->optimize && !s->oom) {
    if (b->depth > 1) {
      /* Body values used inside a region are uses by the op that will
       * own the region. */
      for (int i = 0; i < n_ops; i++)
        if (b->vals[ops[i]].scope == 0 &&
            push_int(&b->pending, &b->n_pending, &b->cap_pending, ops[i]))
          b->oom = 1;
    } else if (n_res == 1 && !regions && !effects) {
      key_len = s->n - key_start;
      h = text_hash(s->p + key_start, key_len);
      int old = cse_find(b, s->p + key_start, key_len, h);
      if (old >= 0) {
        s->n = line_start;
        s->p[line_start] = 0;
        b->next_name--;
        if (outs) outs[0] = old;
        return old;
      }
    }
  }

  ttpu_val first = TTPU_VAL_ERROR;
  for (int i = 0; i < n_res; i++) {
    ttpu_val v = new_value(b, &res[i], -1, ssa, n_res == 1 ? -1 : i);
    if (v == TTPU_VAL_ERROR) return v;
    if (outs) outs[i] = v;
    if (i == 0) first = v;
  }
  if (b->optimize && b->depth == 1 && !s->oom) {
    if (key_len) cse_put(b, s->p + key_start, key_len, h, first);
    if (b->n_recs == b->cap_recs) {
      int cap = b->cap_recs ? b->cap_recs * 2 : 64;
      hlo_rec* r = realloc(b->recs, (size_t)cap * sizeof *r);
      if (!r) {
        b->oom = 1;
        return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED,
                             "hlo builder: out of memory");
      }
      b->recs = r;
      b->cap_recs = cap;
    }
    hlo_rec* r = &b->recs[b->n_recs++];
    r->start = line_start;
    r->end = s->n;
    r->first = first;
    r->n_res = n_res;
    r->removable = !effects;
    r->ops_at = b->n_rec_ops;
    for (int i = 0; i < n_ops; i++)
      if (push_int(&b->rec_ops, &b->n_rec_ops, &b->cap_rec_ops, ops[i]))
        b->oom = 1;
    for (int i = 0; i < b->n_pending; i++)
      if (push_int(&b->rec_ops, &b->n_rec_ops, &b->cap_rec_ops,
                   b->pending[i]))
        b->oom = 1;
    b->n_pending = 0;
    r->n_ops = b->n_rec_ops - r->ops_at;
  }
  return first;
}

ttpu_val ttpu_hloi_op(ttpu_hlo* b, const char* name, const ttpu_val* ops,
                      int n_ops, const char* attrs, ttpu_type res) {
  return ttpu_hloi_emit(b, name, ops, n_ops, NULL, attrs, &res, 1, NULL);
}

/* ------------------------------------------------------------ calls */

/* An MLIR bare identifier of at most 256 characters. */
static int symbol_ok(const char* name) {
  if (!name || !name[0] || !(isalpha((unsigned char)name[0]) || name[0] == '_') ||
      strlen(name) > 256)
    return 0;
  for (const char* c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.' && *c != '$')
      return 0;
  return 1;
}

/* Records callee's defining text the first time a program calls it. The
 * same callee must come with the same text. */
static int add_callee(ttpu_hlo* b, const char* callee, const char* text) {
  for (int i = 0; i < b->n_callees; i++) {
    if (strcmp(b->callees[i], callee)) continue;
    if (strcmp(b->callee_texts[i], text)) {
      ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                    "call: @%s is defined by two different texts", callee);
      return -1;
    }
    return 0;
  }
  if (b->n_callees == b->cap_callees) {
    int cap = b->cap_callees ? b->cap_callees * 2 : 4;
    char** n = realloc(b->callees, (size_t)cap * sizeof *n);
    if (n) b->callees = n;
    char** t = n ? realloc(b->callee_texts, (size_t)cap * sizeof *t) : NULL;
    if (t) b->callee_texts = t;
    if (!n || !t) {
      ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "call: out of memory");
      return -1;
    }
    b->cap_callees = cap;
  }
  char* name = strdup(callee);
  char* copy = strdup(text);
  if (!name || !copy) {
    free(name);
    free(copy);
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "call: out of memory");
    return -1;
  }
  b->callees[b->n_callees] = name;
  b->callee_texts[b->n_callees] = copy;
  b->n_callees++;
  return 0;
}

void ttpu_hlo_call(ttpu_hlo* b, const char* callee, const char* text,
                   const ttpu_val* args, int n, const ttpu_type* res,
                   int n_res, ttpu_val* outs) {
  for (int i = 0; i < n_res; i++) outs[i] = TTPU_VAL_ERROR;
  if (b->err) return;
  if (!symbol_ok(callee)) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "call: '%s' is not a symbol name",
                  callee ? callee : "(null)");
    return;
  }
  if (n_res < 1 || n < 0 || !text) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "call: @%s needs a defining text and at least one result",
                  callee);
    return;
  }
  if (add_callee(b, callee, text)) return;
  char attrs[320];
  snprintf(attrs, sizeof attrs, "callee = @%s", callee);
  ttpu_hloi_emit(b, "func.call", args, n, NULL, attrs, res, n_res, outs);
}

ttpu_val ttpu_hlo_opaque(ttpu_hlo* b, ttpu_val x) {
  if (!ttpu_hloi_check(b, x, "opaque")) return TTPU_VAL_ERROR;
  return ttpu_hloi_op(b, "stablehlo.optimization_barrier", &x, 1, NULL,
                      b->vals[x].type);
}

/* ------------------------------------------------------------ regions */

void ttpu_hloi_region_begin(ttpu_hlo* b, const ttpu_type* arg_types, int n,
                            ttpu_val* args) {
  for (int i = 0; i < n; i++) args[i] = TTPU_VAL_ERROR;
  if (b->depth == b->cap_scopes) {
    int cap = b->cap_scopes * 2;
    hlo_scope* sc = realloc(b->scopes, (size_t)cap * sizeof *sc);
    if (!sc) {
      ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "region: oom");
      /* Still push nothing; region_end notices the missing scope. */
      return;
    }
    b->scopes = sc;
    b->cap_scopes = cap;
  }
  hlo_scope* sc = &b->scopes[b->depth++];
  memset(sc, 0, sizeof *sc);
  sc->id = b->next_scope_id++;
  ttpu_hloi_buf* s = &sc->text;
  indent(b, s);
  ttpu_hloi_buf_put(s, "^bb0(");
  for (int i = 0; i < n; i++) {
    int ssa = b->next_name++;
    if (i) ttpu_hloi_buf_put(s, ", ");
    ttpu_hloi_buf_printf(s, "%%%d: ", ssa);
    ttpu_hloi_put_type(s, &arg_types[i]);
    if (!b->err) args[i] = new_value(b, &arg_types[i], -1, ssa, -1);
  }
  ttpu_hloi_buf_put(s, "):\n");
}

char* ttpu_hloi_region_end(ttpu_hlo* b, const ttpu_val* rets, int n) {
  if (b->depth <= 1) {
    ttpu_hlo_fail(b, TTPU_INTERNAL, "region_end without region_begin");
    return NULL;
  }
  if (!b->err) {
    ttpu_hloi_buf* s = cur_text(b);
    for (int i = 0; i < n; i++)
      if (!ttpu_hloi_check(b, rets[i], "region return")) break;
    if (!b->err && b->optimize)
      for (int i = 0; i < n; i++)
        if (b->vals[rets[i]].scope == 0 &&
            push_int(&b->pending, &b->n_pending, &b->cap_pending, rets[i]))
          b->oom = 1;
    if (!b->err) {
      indent(b, s);
      ttpu_hloi_buf_put(s, "\"stablehlo.return\"(");
      for (int i = 0; i < n; i++) {
        if (i) ttpu_hloi_buf_put(s, ", ");
        put_ref(b, s, rets[i]);
      }
      ttpu_hloi_buf_put(s, ") : (");
      for (int i = 0; i < n; i++) {
        if (i) ttpu_hloi_buf_put(s, ", ");
        ttpu_hloi_put_type(s, &b->vals[rets[i]].type);
      }
      ttpu_hloi_buf_put(s, ") -> ()\n");
    }
  }
  hlo_scope* sc = &b->scopes[--b->depth];
  if (b->err) {
    ttpu_hloi_buf_free(&sc->text);
    return NULL;
  }
  ttpu_hloi_buf out = {0};
  ttpu_hloi_buf_put(&out, "{\n");
  if (sc->text.p) ttpu_hloi_buf_put(&out, sc->text.p);
  indent(b, &out);
  ttpu_hloi_buf_put(&out, "}");
  if (sc->text.oom) out.oom = 1;
  ttpu_hloi_buf_free(&sc->text);
  char* r = ttpu_hloi_buf_take(&out);
  if (!r) ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "region: oom");
  return r;
}

/* ------------------------------------------------------------ printing */

/* Appends the function body without the ops nothing needs: walking back
 * from the returned values, an op stays when one of its results is used
 * by an op that stays, or when it has effects. Text outside the recorded
 * ops is kept as it is. */
static int put_live_body(ttpu_hlo* b, ttpu_hloi_buf* out) {
  unsigned char* live = calloc((size_t)b->n_vals + 1, 1);
  unsigned char* keep = calloc((size_t)b->n_recs + 1, 1);
  if (!live || !keep) {
    free(live);
    free(keep);
    return -1;
  }
  for (int i = 0; i < b->n_results; i++) live[b->results[i]] = 1;
  for (int k = b->n_recs - 1; k >= 0; k--) {
    const hlo_rec* r = &b->recs[k];
    int used = !r->removable;
    for (int j = 0; j < r->n_res && !used; j++) used = live[r->first + j];
    if (!used) continue;
    keep[k] = 1;
    for (int j = 0; j < r->n_ops; j++) live[b->rec_ops[r->ops_at + j]] = 1;
  }
  const char* text = b->scopes[0].text.p;
  size_t at = 0;
  for (int k = 0; k < b->n_recs; k++) {
    const hlo_rec* r = &b->recs[k];
    if (r->start > at) buf_putn(out, text + at, r->start - at);
    if (keep[k]) buf_putn(out, text + r->start, r->end - r->start);
    at = r->end;
  }
  ttpu_hloi_buf_put(out, text + at);
  int oom = out->oom;
  free(live);
  free(keep);
  return oom ? -1 : 0;
}

ttpu_status* ttpu_hlo_print(ttpu_hlo* b, char** out, size_t* len) {
  *out = NULL;
  if (len) *len = 0;
  if (b->err)
    return ttpu_status_make(ttpu_status_code(b->err), "%s",
                            ttpu_status_message(b->err));
  if (!b->returned)
    return ttpu_status_make(TTPU_INTERNAL,
                            "hlo print: ttpu_hlo_return was not called");
  if (b->depth != 1)
    return ttpu_status_make(TTPU_INTERNAL, "hlo print: a region is open");
  if (b->oom || b->scopes[0].text.oom)
    return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "hlo print: oom");

  ttpu_hloi_buf s = {0};
  ttpu_hloi_buf_put(&s,
                    "module @ttpu attributes {mhlo.num_partitions = 1 : i32, "
                    "mhlo.num_replicas = 1 : i32} {\n"
                    "  func.func public @main(");
  for (int i = 0; i < b->n_params; i++) {
    if (i) ttpu_hloi_buf_put(&s, ", ");
    ttpu_hloi_buf_printf(&s, "%%arg%d: ", i);
    ttpu_hloi_put_type(&s, &b->vals[b->params[i]].type);
    if (b->aliases[i] >= 0)
      ttpu_hloi_buf_printf(&s, " {tf.aliasing_output = %d : i32}",
                           b->aliases[i]);
  }
  ttpu_hloi_buf_put(&s, ") -> (");
  for (int i = 0; i < b->n_results; i++) {
    if (i) ttpu_hloi_buf_put(&s, ", ");
    ttpu_hloi_put_type(&s, &b->vals[b->results[i]].type);
  }
  ttpu_hloi_buf_put(&s, ") {\n");
  if (b->optimize && b->scopes[0].text.p) {
    if (put_live_body(b, &s)) {
      ttpu_hloi_buf_free(&s);
      return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "hlo print: oom");
    }
  } else if (b->scopes[0].text.p) {
    ttpu_hloi_buf_put(&s, b->scopes[0].text.p);
  }
  ttpu_hloi_buf_put(&s, "    \"func.return\"(");
  for (int i = 0; i < b->n_results; i++) {
    if (i) ttpu_hloi_buf_put(&s, ", ");
    put_ref(b, &s, b->results[i]);
  }
  ttpu_hloi_buf_put(&s, ") : (");
  for (int i = 0; i < b->n_results; i++) {
    if (i) ttpu_hloi_buf_put(&s, ", ");
    ttpu_hloi_put_type(&s, &b->vals[b->results[i]].type);
  }
  ttpu_hloi_buf_put(&s, ") -> ()\n  }\n");
  for (int i = 0; i < b->n_callees; i++) {
    ttpu_hloi_buf_put(&s, b->callee_texts[i]);
    size_t k = strlen(b->callee_texts[i]);
    if (k && b->callee_texts[i][k - 1] != '\n') ttpu_hloi_buf_put(&s, "\n");
  }
  ttpu_hloi_buf_put(&s, "}\n");
  size_t n = s.n;
  char* text = ttpu_hloi_buf_take(&s);
  if (!text) return ttpu_status_make(TTPU_RESOURCE_EXHAUSTED, "hlo print: oom");
  *out = text;
  if (len) *len = n;
  return NULL;
}

char* ttpu_hlo_module_as_callee(const char* text, const char* name) {
  static const char kMain[] = "func.func public @main(";
  if (!text || !symbol_ok(name)) return NULL;
  const char* first = strchr(text, '\n');
  const char* main = strstr(text, kMain);
  const char* close = strrchr(text, '}');
  if (strncmp(text, "module ", 7) || !first || !main || !close || close < main)
    return NULL;
  ttpu_hloi_buf s = {0};
  buf_putn(&s, first + 1, (size_t)(main - first - 1));
  ttpu_hloi_buf_printf(&s, "func.func private @%s(", name);
  const char* rest = main + sizeof(kMain) - 1;
  buf_putn(&s, rest, (size_t)(close - rest));
  return ttpu_hloi_buf_take(&s);
}
