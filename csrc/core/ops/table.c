/* table.c - the one lowering table: every op family's records, expanded
 * once (each record's derived in-place and out= overloads after it) into a
 * flat array indexed by op id, and a hash of the names. Adding a family:
 * define its array in its own file and list it in `families` below. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"
#include "complex.h"

extern const ttpu_op_def ttpu_ops_copy[];
extern const ttpu_op_def ttpu_ops_elementwise[];
extern const ttpu_op_def ttpu_ops_unary[];
extern const ttpu_op_def ttpu_ops_activation[];
extern const ttpu_op_def ttpu_ops_index[];
extern const ttpu_op_def ttpu_ops_shape[];
extern const ttpu_op_def ttpu_ops_sort[];
extern const ttpu_op_def ttpu_ops_reduce[];
extern const ttpu_op_def ttpu_ops_nn[];
extern const ttpu_op_def ttpu_ops_random[];
extern const ttpu_op_def ttpu_ops_foreach[];
extern const ttpu_op_def ttpu_ops_linalg[];
extern const ttpu_op_def ttpu_ops_conv[];
extern const ttpu_op_def ttpu_ops_amp[];
extern const ttpu_op_def ttpu_ops_special[];
extern const ttpu_op_def ttpu_ops_scan[];
extern const ttpu_op_def ttpu_ops_matrix[];
extern const ttpu_op_def ttpu_ops_layout[];
extern const ttpu_op_def ttpu_ops_lu[];
extern const ttpu_op_def ttpu_ops_ldl[];
extern const ttpu_op_def ttpu_ops_setops[];
extern const ttpu_op_def ttpu_ops_polynomial[];
extern const ttpu_op_def ttpu_ops_margin[];
extern const ttpu_op_def ttpu_ops_qr[];
extern const ttpu_op_def ttpu_ops_rrelu[];
extern const ttpu_op_def ttpu_ops_rnn[];
extern const ttpu_op_def ttpu_ops_svd[];
extern const ttpu_op_def ttpu_ops_bessel[];
extern const ttpu_op_def ttpu_ops_eigh[];
extern const ttpu_op_def ttpu_ops_eig[];
extern const ttpu_op_def ttpu_ops_matrix_exp[];
extern const ttpu_op_def ttpu_ops_unique[];
extern const ttpu_op_def ttpu_ops_upsample_bicubic[];
extern const ttpu_op_def ttpu_ops_histogram[];
extern const ttpu_op_def ttpu_ops_intmath[];
extern const ttpu_op_def ttpu_ops_quant[];
extern const ttpu_op_def ttpu_ops_fractional_pool[];
extern const ttpu_op_def ttpu_ops_lstsq[];
extern const ttpu_op_def ttpu_ops_ctc[];
extern const ttpu_op_def ttpu_ops_complex[];
extern const ttpu_op_def ttpu_ops_fft[];
extern const ttpu_op_def ttpu_ops_embedding_bag[];
extern const ttpu_op_def ttpu_ops_segment[];
extern const ttpu_op_def ttpu_ops_grid_sample[];
extern const ttpu_op_def ttpu_ops_upsample_aa[];
extern const ttpu_op_def ttpu_ops_attention[];
extern const ttpu_op_def ttpu_ops_bincount[];
extern const ttpu_op_def ttpu_ops_extern[];
extern const ttpu_op_def ttpu_ops_weight_norm[];
extern const ttpu_op_def ttpu_ops_vision[];

static const ttpu_op_def* const families[] = {
    ttpu_ops_copy,
    ttpu_ops_elementwise,
    ttpu_ops_unary,
    ttpu_ops_activation,
    ttpu_ops_index,
    ttpu_ops_shape,
    ttpu_ops_sort,
    ttpu_ops_reduce,
    ttpu_ops_nn,
    ttpu_ops_random,
    ttpu_ops_foreach,
    ttpu_ops_linalg,
    ttpu_ops_conv,
    ttpu_ops_amp,
    ttpu_ops_special,
    ttpu_ops_scan,
    ttpu_ops_matrix,
    ttpu_ops_layout,
    ttpu_ops_lu,
    ttpu_ops_ldl,
    ttpu_ops_setops,
    ttpu_ops_polynomial,
    ttpu_ops_margin,
    ttpu_ops_qr,
    ttpu_ops_rrelu,
    ttpu_ops_rnn,
    ttpu_ops_svd,
    ttpu_ops_bessel,
    ttpu_ops_eigh,
    ttpu_ops_eig,
    ttpu_ops_matrix_exp,
    ttpu_ops_unique,
    ttpu_ops_upsample_bicubic,
    ttpu_ops_histogram,
    ttpu_ops_intmath,
    ttpu_ops_quant,
    ttpu_ops_fractional_pool,
    ttpu_ops_lstsq,
    ttpu_ops_ctc,
    ttpu_ops_complex,
    ttpu_ops_fft,
    ttpu_ops_embedding_bag,
    ttpu_ops_segment,
    ttpu_ops_grid_sample,
    ttpu_ops_upsample_aa,
    ttpu_ops_attention,
    ttpu_ops_bincount,
    ttpu_ops_extern,
    ttpu_ops_weight_norm,
    ttpu_ops_vision,
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

/* The expanded table: built once (pthread_once), then immutable, so
 * lookups take no lock. Derived records own their names (`names`); both
 * live for the process. */
static ttpu_op_def* all;
static int n_all;
static char* names;        /* the derived names, back to back */
static int* slots;         /* open-addressed hash of names: id + 1, 0 empty */
static size_t n_slots;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t hash_name(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The name of variant v of "op.OV" / "op" into buf (room for n), or 0
 * when the variant has no such name. */
static int variant_name(const char* base, int v, char* buf, size_t n) {
  const char* dot = strchr(base, '.');
  int op_len = dot ? (int)(dot - base) : (int)strlen(base);
  const char* ov = dot ? dot + 1 : NULL;
  int k;
  if (v == TTPU_V_INPLACE)
    k = ov ? snprintf(buf, n, "%.*s_.%s", op_len, base, ov)
           : snprintf(buf, n, "%s_", base);
  else if (v == TTPU_V_OUT)
    k = snprintf(buf, n, "%.*s.out", op_len, base);
  else if (ov)
    k = snprintf(buf, n, "%s_out", base);
  else
    return 0;
  return k > 0 && (size_t)k < n;
}

static const int kVariants[] = {TTPU_V_INPLACE, TTPU_V_OUT, TTPU_V_OV_OUT};
#define N_VARIANTS (int)(sizeof(kVariants) / sizeof(kVariants[0]))
#define NAME_MAX_LEN 128

static void build(void) {
  int n = 0;
  size_t chars = 0;
  for (size_t f = 0; f < N_FAMILIES; ++f)
    for (const ttpu_op_def* d = families[f]; d->name; ++d) {
      ++n;
      for (int v = 0; v < N_VARIANTS; ++v)
        if (d->variants & kVariants[v]) {
          ++n;
          chars += strlen(d->name) + 8;
        }
    }
  ttpu_op_def* t = calloc((size_t)n, sizeof(*t));
  char* nm = malloc(chars ? chars : 1);
  size_t ns = 16;
  while (ns < 2 * (size_t)n) ns *= 2;
  int* hs = calloc(ns, sizeof(*hs));
  if (!t || !nm || !hs) {
    free(t);
    free(nm);
    free(hs);
    return; /* an empty table: every lookup fails */
  }
  int k = 0;
  char* w = nm;
  for (size_t f = 0; f < N_FAMILIES; ++f)
    for (const ttpu_op_def* d = families[f]; d->name; ++d) {
      t[k] = *d;
      t[k++].variants = 0;
      for (int v = 0; v < N_VARIANTS; ++v) {
        char buf[NAME_MAX_LEN];
        if (!(d->variants & kVariants[v]) ||
            !variant_name(d->name, kVariants[v], buf, sizeof(buf)))
          continue;
        size_t len = strlen(buf) + 1;
        memcpy(w, buf, len);
        t[k] = *d;
        t[k].variants = 0;
        t[k++].name = w;
        w += len;
      }
    }
  for (int id = 0; id < k; ++id) {
    size_t h = (size_t)hash_name(t[id].name) & (ns - 1);
    while (hs[h]) h = (h + 1) & (ns - 1);
    hs[h] = id + 1;
  }
  names = nm;
  slots = hs;
  n_slots = ns;
  n_all = k;
  all = t;
}

static void ensure_built(void) { pthread_once(&once, build); }

const ttpu_op_def* ttpu_op_def_get(int op) {
  ensure_built();
  return op >= 0 && op < n_all ? &all[op] : NULL;
}

int ttpu_op_count(void) {
  ensure_built();
  return n_all;
}

const char* ttpu_op_name(int op) {
  const ttpu_op_def* d = ttpu_op_def_get(op);
  return d ? d->name : "?";
}

int ttpu_op_lookup(const char* name) {
  ensure_built();
  if (!name || !n_slots) return -1;
  for (size_t h = (size_t)hash_name(name) & (n_slots - 1); slots[h];
       h = (h + 1) & (n_slots - 1))
    if (!strcmp(all[slots[h] - 1].name, name)) return slots[h] - 1;
  return -1;
}

ttpu_status* ttpu_op_refusal(const ttpu_op_call* call) {
  const ttpu_op_def* def = ttpu_op_def_get(call->op);
  if (!def) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "no op with id %d", call->op);
  if (def->flags & TTPU_OP_SAME_DTYPE_OUT) {
    ttpu_dtype in = ttpu_call_input_dtype(call);
    if (in != TTPU_DTYPE_NONE && call->n_outputs > 0 && call->outputs[0].dtype != in)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT, "Found dtype %s but expected %s",
                              ttpu_dtype_torch_title(call->outputs[0].dtype),
                              ttpu_dtype_torch_title(in));
  }
  if (ttpu_complex_call(call) && !ttpu_complex_lowering(def, call))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "The operator 'aten::%s' does not support "
                            "complex dtypes on device 'tpu'", def->name);
  return ttpu_op_check_kinds(def, call);
}

ttpu_status* ttpu_op_check_kinds(const ttpu_op_def* def,
                                 const ttpu_op_call* call) {
  if (!def || !def->kinds) return NULL;
  ttpu_dtype dt = def->flags & TTPU_OP_KINDS_OF_OUT ? TTPU_DTYPE_NONE : call->common_dtype;
  if (dt == TTPU_DTYPE_NONE && call->n_outputs > 0) dt = call->outputs[0].dtype;
  if (dt == TTPU_DTYPE_NONE || ttpu_dtype_is_complex(dt)) return NULL;
  /* A complex call checks only where it runs the real lowering. */
  if (ttpu_complex_call(call) && ttpu_complex_lowering(def, call) != def->fn)
    return NULL;
  int kind = dt == TTPU_BOOL ? TTPU_K_BOOL
             : ttpu_dtype_is_float(dt) ? TTPU_K_FLOAT
                                       : TTPU_K_INT;
  if (def->kinds & kind) return NULL;
  return ttpu_status_make(TTPU_UNIMPLEMENTED, "\"%s\" not implemented for '%s'",
                          def->kernel ? def->kernel : def->name,
                          ttpu_dtype_torch_title(dt));
}
