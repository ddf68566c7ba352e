/* lower.c - the lowering context: what a record's lowering asks through
 * ttpu_l_* (arguments, runtime scalars, outputs, checks, random bits), and
 * running the lowering of one call (ttpu_lower_ctx.h). It stands on hlo/
 * alone: input values come from the framer's read_input, runtime scalars
 * from the packs it names, so an op lowers to text with no runtime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower_ctx.h"
#include "complex.h"

struct ttpu_lower {
  ttpu_hlo* b;
  const ttpu_op_def* def;
  const ttpu_op_call* call;
  ttpu_lower_setup su;
  ttpu_val* in;      /* per call tensor, valid when in_done */
  char* in_done;
  ttpu_val* out;     /* per output, set by the lowering */
  ttpu_val rng_state; /* current rng state value (advanced by draws) */
  ttpu_val check;     /* ttpu_l_check's info, or ERROR */
  ttpu_code check_code;
  char check_fmt[TTPU_L_CHECK_FMT_MAX];
};

ttpu_status* ttpu_lower_begin(ttpu_hlo* b, const ttpu_op_def* def,
                              const ttpu_op_call* call,
                              const ttpu_lower_setup* setup, ttpu_lower** out) {
  *out = NULL;
  ttpu_lower* L = calloc(1, sizeof(*L));
  if (!L) return ttpu_status_oom();
  L->b = b;
  L->def = def;
  L->call = call;
  L->su = *setup;
  L->rng_state = setup->rng_state;
  L->check = TTPU_VAL_ERROR;
  L->in = calloc((size_t)call->n_tensors + 1, sizeof(ttpu_val));
  L->in_done = calloc((size_t)call->n_tensors + 1, 1);
  L->out = malloc(((size_t)call->n_outputs + 1) * sizeof(ttpu_val));
  if (!L->in || !L->in_done || !L->out) {
    ttpu_lower_end(L);
    return ttpu_status_oom();
  }
  for (int k = 0; k < call->n_outputs; ++k) L->out[k] = TTPU_VAL_ERROR;
  *out = L;
  return NULL;
}

void ttpu_lower_end(ttpu_lower* L) {
  if (!L) return;
  free(L->in);
  free(L->in_done);
  free(L->out);
  free(L);
}

ttpu_status* ttpu_lower_run(ttpu_lower* L) {
  const ttpu_op_call* call = L->call;
  /* Complex operands take the complex lowering of the op, or its own
   * lowering where that is listed as correct for complex values. */
  ttpu_status* s = ttpu_op_refusal(call);
  if (s) return s;
  ttpu_lower_fn fn = ttpu_complex_call(call) ? ttpu_complex_lowering(L->def, call) : L->def->fn;
  s = fn(L);
  if (!s) s = ttpu_hlo_take_status(L->b);
  if (s) return s;
  /* Every output with a storage to go to needs a value of its sizes; one
   * without (an undefined return) may stay unset. */
  for (int o = 0; o < call->n_outputs; ++o) {
    const ttpu_tensor* t = &call->outputs[o];
    if (!t->buffer) continue;
    ttpu_val v = L->out[o];
    if (v == TTPU_VAL_ERROR)
      return ttpu_status_make(TTPU_INTERNAL, "%s did not set output %d",
                              ttpu_op_name(call->op), o);
    const ttpu_type* vt = ttpu_hlo_type(L->b, v);
    if (!vt) {
      s = ttpu_hlo_take_status(L->b);
      return s ? s : ttpu_status_make(TTPU_INTERNAL, "%s set output %d to no value",
                                      ttpu_op_name(call->op), o);
    }
    int same_shape = vt->ndim == t->ndim;
    for (int d = 0; same_shape && d < t->ndim; ++d)
      same_shape = vt->dims[d] == t->sizes[d];
    if (!same_shape)
      return ttpu_status_make(TTPU_INTERNAL,
                              "%s produced output %d with the wrong shape",
                              ttpu_op_name(call->op), o);
  }
  return NULL;
}

ttpu_val ttpu_lower_output(const ttpu_lower* L, int k) {
  return k >= 0 && k < L->call->n_outputs ? L->out[k] : TTPU_VAL_ERROR;
}

ttpu_val ttpu_lower_rng_state(const ttpu_lower* L) { return L->rng_state; }

ttpu_val ttpu_lower_check(const ttpu_lower* L, ttpu_code* code,
                          const char** fmt) {
  *code = L->check_code;
  *fmt = L->check_fmt;
  return L->check;
}

/* ------------------------------------------------------------ arguments */

ttpu_hlo* ttpu_l_hlo(ttpu_lower* L) { return L->b; }
const ttpu_op_call* ttpu_l_call(ttpu_lower* L) { return L->call; }
int ttpu_l_nargs(ttpu_lower* L) { return L->call->n_args; }
ttpu_dtype ttpu_l_common_dtype(ttpu_lower* L) { return L->call->common_dtype; }
int ttpu_l_nout(ttpu_lower* L) { return L->call->n_outputs; }
int64_t ttpu_l_param(ttpu_lower* L) { return L->def->param; }

static const ttpu_arg* arg_at(ttpu_lower* L, int a) {
  if (a < 0 || a >= L->call->n_args) return NULL;
  return &L->call->args[a];
}

ttpu_arg_kind ttpu_l_kind(ttpu_lower* L, int arg) {
  const ttpu_arg* g = arg_at(L, arg);
  return g ? g->kind : TTPU_ARG_NONE;
}

int ttpu_l_is_none(ttpu_lower* L, int arg) {
  return ttpu_l_kind(L, arg) == TTPU_ARG_NONE;
}

ttpu_val ttpu_l_tensor(ttpu_lower* L, int arg) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g || g->kind != TTPU_ARG_TENSOR)
    return ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: argument %d is not a tensor",
                         ttpu_op_name(L->call->op), arg);
  return ttpu_l_tensor_at(L, arg, -1);
}

int ttpu_l_count(ttpu_lower* L, int arg) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g) return 0;
  if (g->kind == TTPU_ARG_TENSORS || g->kind == TTPU_ARG_INTS ||
      g->kind == TTPU_ARG_FLOATS || g->kind == TTPU_ARG_SCALARS)
    return g->n;
  return g->kind == TTPU_ARG_NONE ? 0 : 1;
}

static int tensor_index(ttpu_lower* L, int arg, int k) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g) return -1;
  if (g->kind == TTPU_ARG_TENSOR && k < 0) return g->tensor;
  if (g->kind == TTPU_ARG_TENSORS && k >= 0 && k < g->n) return g->tensor + k;
  if (g->kind == TTPU_ARG_TENSOR && k == 0) return g->tensor;
  return -1;
}

const ttpu_tensor* ttpu_l_tensor_desc(ttpu_lower* L, int arg, int k) {
  int i = tensor_index(L, arg, k);
  return i < 0 ? NULL : &L->call->tensors[i];
}

int ttpu_l_dyn_dims(ttpu_lower* L, int arg, int k) {
  int i = tensor_index(L, arg, k);
  return i < 0 || !L->su.tensor_dyn ? 0 : L->su.tensor_dyn[i];
}

ttpu_val ttpu_l_dyn_size(ttpu_lower* L) {
  if (!L->su.tensor_dyn) return TTPU_VAL_ERROR;
  return ttpu_lower_int_scalar(L, L->su.dyn_at);
}

ttpu_val ttpu_l_dyn_past(ttpu_lower* L, ttpu_type t, int d) {
  ttpu_type ti = ttpu_type_make(TTPU_I64, t.ndim, t.dims);
  int64_t no_dims[1] = {0};
  ttpu_val n = ttpu_hlo_broadcast_in_dim(L->b, ttpu_l_dyn_size(L), ti, no_dims);
  return ttpu_hlo_compare(L->b, TTPU_GE, ttpu_hlo_iota(L->b, ti, d), n);
}

ttpu_val ttpu_l_tensor_at(ttpu_lower* L, int arg, int k) {
  int i = tensor_index(L, arg, k);
  if (i < 0 || i >= L->call->n_tensors)
    return ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: no tensor at argument %d[%d]",
                         ttpu_op_name(L->call->op), arg, k);
  const ttpu_tensor* t = &L->call->tensors[i];
  if (!t->buffer) {
    /* None in a list; or an empty tensor, which has no storage */
    if (t->dtype == TTPU_DTYPE_NONE) return TTPU_VAL_ERROR;
    return ttpu_hlo_const(L->b, ttpu_type_make(t->dtype, t->ndim, t->sizes), 0, 0);
  }
  if (!L->in_done[i]) {
    L->in[i] = L->su.read_input
                   ? L->su.read_input(L->su.user, L, i)
                   : ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: no way to read tensor %d",
                                   ttpu_op_name(L->call->op), i);
    L->in_done[i] = 1;
  }
  return L->in[i];
}

int64_t ttpu_l_int(ttpu_lower* L, int arg, int64_t dflt) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g) return dflt;
  switch (g->kind) {
    case TTPU_ARG_INT:
    case TTPU_ARG_BOOL:
      return g->i;
    case TTPU_ARG_FLOAT:
      return (int64_t)g->f;
    default:
      return dflt;
  }
}

double ttpu_l_float(ttpu_lower* L, int arg, double dflt) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g) return dflt;
  switch (g->kind) {
    case TTPU_ARG_INT:
    case TTPU_ARG_BOOL:
      return (double)g->i;
    case TTPU_ARG_FLOAT:
      return g->f;
    default:
      return dflt;
  }
}

int ttpu_l_bool(ttpu_lower* L, int arg, int dflt) {
  return ttpu_l_int(L, arg, dflt) != 0;
}

const char* ttpu_l_str(ttpu_lower* L, int arg, const char* dflt) {
  const ttpu_arg* g = arg_at(L, arg);
  return g && g->kind == TTPU_ARG_STR ? g->str : dflt;
}

const int64_t* ttpu_l_ints(ttpu_lower* L, int arg, int* n) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g || g->kind != TTPU_ARG_INTS) {
    if (g && (g->kind == TTPU_ARG_INT)) {
      *n = 1;
      return &g->i;
    }
    *n = 0;
    return NULL;
  }
  *n = g->n;
  return g->ints;
}

const double* ttpu_l_floats(ttpu_lower* L, int arg, int* n) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g || (g->kind != TTPU_ARG_FLOATS)) {
    *n = 0;
    return NULL;
  }
  *n = g->n;
  return g->floats;
}

/* ------------------------------------------------------------ scalars */

/* The pack index of the op's float (int) scalar j. */
static int f_index(const ttpu_lower* L, int j) {
  return L->su.f_map ? L->su.f_map[j] : L->su.f_off + j;
}
static int i_index(const ttpu_lower* L, int j) {
  return L->su.i_map ? L->su.i_map[j] : L->su.i_off + j;
}

/* Element `index` of a scalar pack as a 0-d value of dt. The pack is
 * converted to dt as a whole (one op, shared by every element read as dt:
 * the builder reuses identical ops) before the element is sliced out. */
static ttpu_val pack_element(ttpu_lower* L, ttpu_val pack, int index,
                             ttpu_dtype dt) {
  int64_t lo = index, hi = index + 1, one = 1;
  ttpu_val v = ttpu_hlo_convert(L->b, pack, dt);
  v = ttpu_hlo_slice(L->b, v, &lo, &hi, &one);
  return ttpu_hlo_reshape(L->b, v, 0, NULL);
}

ttpu_val ttpu_lower_int_scalar(ttpu_lower* L, int j) {
  return pack_element(L, L->su.ipack, i_index(L, j), TTPU_I64);
}

int ttpu_l_scalar_static(ttpu_lower* L, int arg, double* value) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g || g->kind != TTPU_ARG_SCALAR || L->su.arg_scalar[arg] >= 0) return 0;
  *value = ttpu_dtype_is_float(g->scalar_dtype) || ttpu_dtype_is_complex(g->scalar_dtype)
               ? g->f
               : (double)g->i;
  return 1;
}

ttpu_dtype ttpu_l_scalar_dtype(ttpu_lower* L, int arg) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g) return TTPU_DTYPE_NONE;
  switch (g->kind) {
    case TTPU_ARG_SCALAR:
    case TTPU_ARG_SCALARS:
      return g->scalar_dtype;
    case TTPU_ARG_INT:
      return TTPU_I64;
    case TTPU_ARG_BOOL:
      return TTPU_BOOL;
    case TTPU_ARG_FLOAT:
      return TTPU_F64;
    default:
      return TTPU_DTYPE_NONE;
  }
}

ttpu_val ttpu_l_scalar_at(ttpu_lower* L, int arg, int k, ttpu_dtype dt) {
  const ttpu_arg* g = arg_at(L, arg);
  if (!g)
    return ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: no argument %d",
                         ttpu_op_name(L->call->op), arg);
  const int* arg_scalar = L->su.arg_scalar;
  switch (g->kind) {
    case TTPU_ARG_SCALAR:
      if (arg_scalar[arg] < 0) {
        /* compile-time (TTPU_OP_STATIC_SCALARS): the value as a constant,
         * converted as the pack's element would be */
        if (ttpu_dtype_is_complex(g->scalar_dtype)) {
          ttpu_dtype comp = ttpu_dtype_is_complex(dt) ? ttpu_dtype_real(dt) : TTPU_F64;
          ttpu_val re = ttpu_hlo_convert(L->b, ttpu_hlo_const_f(L->b, TTPU_F64, g->f), comp);
          ttpu_val im = ttpu_hlo_convert(L->b, ttpu_hlo_const_f(L->b, TTPU_F64, g->fi), comp);
          return ttpu_hlo_convert(L->b, ttpu_hlo_complex(L->b, re, im), dt);
        }
        if (ttpu_dtype_is_float(g->scalar_dtype))
          return ttpu_hlo_convert(L->b, ttpu_hlo_const_f(L->b, TTPU_F64, g->f), dt);
        ttpu_val v = ttpu_hlo_const_i(L->b, TTPU_I64, g->i);
        /* a uint64 value beyond int64's: its bits, read as unsigned */
        if (g->scalar_dtype == TTPU_U64) v = ttpu_hlo_convert(L->b, v, TTPU_U64);
        return ttpu_hlo_convert(L->b, v, dt);
      }
      if (ttpu_dtype_is_complex(g->scalar_dtype)) { /* (re, im) in the pack */
        int at = arg_scalar[arg];
        ttpu_dtype comp = ttpu_dtype_is_complex(dt) ? ttpu_dtype_real(dt)
                                                    : TTPU_F64;
        ttpu_val c = ttpu_hlo_complex(
            L->b, pack_element(L, L->su.fpack, f_index(L, at), comp),
            pack_element(L, L->su.fpack, f_index(L, at + 1), comp));
        return ttpu_hlo_convert(L->b, c, dt);
      }
      if (ttpu_dtype_is_float(g->scalar_dtype))
        return pack_element(L, L->su.fpack, f_index(L, arg_scalar[arg]), dt);
      if (g->scalar_dtype == TTPU_U64)
        return ttpu_hlo_convert(L->b, pack_element(L, L->su.ipack, i_index(L, arg_scalar[arg]), TTPU_U64), dt);
      return pack_element(L, L->su.ipack, i_index(L, arg_scalar[arg]), dt);
    case TTPU_ARG_SCALARS:
      if (k < 0 || k >= g->n)
        return ttpu_hlo_fail(L->b, TTPU_INTERNAL, "scalar list index %d", k);
      return pack_element(L, L->su.fpack,
                          f_index(L, L->su.list_at[arg_scalar[arg] + k]), dt);
    case TTPU_ARG_INT:
    case TTPU_ARG_BOOL:
      if (ttpu_dtype_is_float(dt)) return ttpu_hlo_const_f(L->b, dt, (double)g->i);
      return ttpu_hlo_const_i(L->b, dt, g->i);
    case TTPU_ARG_FLOAT:
      if (ttpu_dtype_is_float(dt) || ttpu_dtype_is_complex(dt))
        return ttpu_hlo_const_f(L->b, dt, g->f);
      return ttpu_hlo_const_i(L->b, dt, (int64_t)g->f);
    case TTPU_ARG_INTS:
      if (k >= 0 && k < g->n) {
        if (ttpu_dtype_is_float(dt))
          return ttpu_hlo_const_f(L->b, dt, (double)g->ints[k]);
        return ttpu_hlo_const_i(L->b, dt, g->ints[k]);
      }
      break;
    case TTPU_ARG_FLOATS:
      if (k >= 0 && k < g->n) {
        if (ttpu_dtype_is_float(dt)) return ttpu_hlo_const_f(L->b, dt, g->floats[k]);
        return ttpu_hlo_const_i(L->b, dt, (int64_t)g->floats[k]);
      }
      break;
    default:
      break;
  }
  return ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: argument %d is not a scalar",
                       ttpu_op_name(L->call->op), arg);
}

ttpu_val ttpu_l_scalar(ttpu_lower* L, int arg, ttpu_dtype dt) {
  return ttpu_l_scalar_at(L, arg, 0, dt);
}

/* ------------------------------------------------------------ outputs */

ttpu_type ttpu_l_out_type(ttpu_lower* L, int k) {
  if (k < 0 || k >= L->call->n_outputs) {
    ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: no output %d",
                  ttpu_op_name(L->call->op), k);
    ttpu_type e = {TTPU_F32, 0, {0}};
    return e;
  }
  const ttpu_tensor* t = &L->call->outputs[k];
  return ttpu_type_make(t->dtype, t->ndim, t->sizes);
}

void ttpu_l_set_out(ttpu_lower* L, int k, ttpu_val v) {
  if (k < 0 || k >= L->call->n_outputs) {
    ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: no output %d",
                  ttpu_op_name(L->call->op), k);
    return;
  }
  L->out[k] = v;
}

void ttpu_l_check(ttpu_lower* L, ttpu_val info, ttpu_code code,
                  const char* fmt) {
  const ttpu_type* t = ttpu_hlo_type(L->b, info);
  if (!t) return;
  if (t->dtype != TTPU_I64 || t->ndim != 1 || t->dims[0] != 4) {
    ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: check info must be i64[4]",
                  ttpu_op_name(L->call->op));
    return;
  }
  if (strlen(fmt) >= sizeof(L->check_fmt)) { /* never cut a conversion */
    ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: check message too long",
                  ttpu_op_name(L->call->op));
    return;
  }
  L->check = info;
  L->check_code = code;
  snprintf(L->check_fmt, sizeof(L->check_fmt), "%s", fmt);
}

/* ------------------------------------------------------------ random */

/* The draws are counter-based (threefry2x32 with 20 rounds, Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3"): element i of a draw, in
 * row-major order over its true shape, is threefry(key, counter + i), the
 * state being (key, counter); a draw of N elements advances the counter by
 * N. So a value depends on its index and the state only: a program that
 * draws over a bucket's padded shape gives the true elements the values an
 * exact draw gives them and advances the state alike, and every platform
 * (the CPU plugin, a TPU) draws the same numbers from a seed. */

static ttpu_val u32c(ttpu_hlo* b, ttpu_type t, uint32_t v) {
  return ttpu_hlo_const(b, t, (double)v, (int64_t)v);
}

static ttpu_val rotl32(ttpu_hlo* b, ttpu_type t, ttpu_val x, int r) {
  return ttpu_hlo_binary(b, TTPU_OR, ttpu_hlo_binary(b, TTPU_SHL, x, u32c(b, t, (uint32_t)r)),
                         ttpu_hlo_binary(b, TTPU_SHR_L, x, u32c(b, t, (uint32_t)(32 - r))));
}

/* threefry2x32-20 of the counter (x0, x1) under key (k0, k1): all u32 of
 * type t (the keys broadcast). */
static void threefry2x32(ttpu_hlo* b, ttpu_type t, ttpu_val k0, ttpu_val k1,
                         ttpu_val* x0, ttpu_val* x1) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  ttpu_val ks[3] = {k0, k1,
                    ttpu_hlo_binary(b, TTPU_XOR, u32c(b, t, 0x1BD11BDAu),
                                    ttpu_hlo_binary(b, TTPU_XOR, k0, k1))};
  ttpu_val a = ttpu_hlo_binary(b, TTPU_ADD, *x0, ks[0]);
  ttpu_val c = ttpu_hlo_binary(b, TTPU_ADD, *x1, ks[1]);
  for (int r = 0; r < 20; ++r) {
    a = ttpu_hlo_binary(b, TTPU_ADD, a, c);
    c = ttpu_hlo_binary(b, TTPU_XOR, rotl32(b, t, c, rot[r % 8]), a);
    if (r % 4 == 3) {
      int i = (r + 1) / 4;
      a = ttpu_hlo_binary(b, TTPU_ADD, a, ks[i % 3]);
      c = ttpu_hlo_binary(b, TTPU_ADD, ttpu_hlo_binary(b, TTPU_ADD, c, ks[(i + 1) % 3]),
                          u32c(b, t, (uint32_t)i));
    }
  }
  *x0 = a;
  *x1 = c;
}

/* Whether the call is bucketed with output 0 padded in the dims of t:
 * then those dims (a mask) hold the true size n (a 0-d u64). */
static int padded_draw(ttpu_lower* L, ttpu_type t, ttpu_val* n) {
  const ttpu_op_call* c = L->call;
  if (!L->su.out_dyn || L->su.dyn_at < 0 || c->n_outputs < 1) return 0;
  int dyn = L->su.out_dyn[0];
  const ttpu_tensor* o = &c->outputs[0];
  if (!dyn) return 0;
  if (o->ndim != t.ndim || memcmp(o->sizes, t.dims, sizeof(int64_t) * (size_t)t.ndim)) {
    ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: a draw of another shape than its bucketed output",
                  ttpu_op_name(c->op));
    return 0;
  }
  *n = ttpu_hlo_convert(L->b, ttpu_lower_int_scalar(L, L->su.dyn_at), TTPU_U64);
  return dyn;
}

ttpu_val ttpu_l_random_bits(ttpu_lower* L, ttpu_type t) {
  if (L->rng_state == TTPU_VAL_ERROR)
    return ttpu_hlo_fail(L->b, TTPU_INTERNAL,
                         "%s draws random bits but is not marked TTPU_OP_RANDOM",
                         ttpu_op_name(L->call->op));
  if (t.dtype != TTPU_U32 && t.dtype != TTPU_U64)
    return ttpu_hlo_fail(L->b, TTPU_INTERNAL, "%s: random bits must be u32 or u64",
                         ttpu_op_name(L->call->op));
  ttpu_hlo* b = L->b;
  ttpu_type s0 = ttpu_type_make(TTPU_U64, 0, NULL);
  ttpu_val n = TTPU_VAL_ERROR;
  int dyn = padded_draw(L, t, &n);
  /* Row-major index over the true shape, and the true count. */
  ttpu_type t64 = t;
  t64.dtype = TTPU_U64;
  ttpu_val idx = ttpu_hlo_const(b, t64, 0, 0);
  ttpu_val stride = ttpu_hlo_const(b, s0, 1, 1);
  for (int d = t.ndim - 1; d >= 0; --d) {
    ttpu_val sb = ttpu_hlo_broadcast_in_dim(b, stride, t64, NULL);
    idx = ttpu_hlo_binary(b, TTPU_ADD, idx,
                          ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_iota(b, t64, d), sb));
    ttpu_val size = (dyn >> d & 1) ? n : ttpu_hlo_const(b, s0, (double)t.dims[d], t.dims[d]);
    stride = ttpu_hlo_binary(b, TTPU_MUL, stride, size);
  }
  /* state = (key, counter) */
  int64_t one = 1, zero = 0, two = 2;
  ttpu_val key = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, L->rng_state, &zero, &one, &one), 0, NULL);
  ttpu_val ctr = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, L->rng_state, &one, &two, &one), 0, NULL);
  ttpu_val at = ttpu_hlo_binary(b, TTPU_ADD, idx, ttpu_hlo_broadcast_in_dim(b, ctr, t64, NULL));
  ttpu_type t32 = t;
  t32.dtype = TTPU_U32;
  ttpu_val c32 = u32c(b, t64, 32);
  ttpu_val x0 = ttpu_hlo_convert(b, at, TTPU_U32);
  ttpu_val x1 = ttpu_hlo_convert(b, ttpu_hlo_binary(b, TTPU_SHR_L, at, c32), TTPU_U32);
  ttpu_val k0 = ttpu_hlo_convert(b, key, TTPU_U32);
  ttpu_val k1 = ttpu_hlo_convert(
      b, ttpu_hlo_binary(b, TTPU_SHR_L, key, ttpu_hlo_const(b, s0, 32, 32)), TTPU_U32);
  threefry2x32(b, t32, ttpu_hlo_broadcast_in_dim(b, k0, t32, NULL),
               ttpu_hlo_broadcast_in_dim(b, k1, t32, NULL), &x0, &x1);
  ttpu_val bits = x0;
  if (t.dtype == TTPU_U64)
    bits = ttpu_hlo_binary(b, TTPU_OR, ttpu_hlo_convert(b, x0, TTPU_U64),
                           ttpu_hlo_binary(b, TTPU_SHL, ttpu_hlo_convert(b, x1, TTPU_U64), c32));
  ttpu_val parts[2] = {ttpu_hlo_reshape(b, key, 1, &one),
                       ttpu_hlo_reshape(b, ttpu_hlo_binary(b, TTPU_ADD, ctr, stride), 1, &one)};
  L->rng_state = ttpu_hlo_concat(b, parts, 2, 0);
  return bits;
}

ttpu_val ttpu_l_random_uniform(ttpu_lower* L, ttpu_type t) {
  ttpu_hlo* b = L->b;
  if (t.dtype == TTPU_F64) {
    /* 53 random mantissa bits scaled into [0, 1). */
    ttpu_type bt = t;
    bt.dtype = TTPU_U64;
    ttpu_val bits = ttpu_l_random_bits(L, bt);
    bits = ttpu_hlo_binary(b, TTPU_SHR_L, bits, ttpu_hlo_const(b, bt, 0, 11));
    ttpu_val f = ttpu_hlo_convert(b, bits, TTPU_F64);
    return ttpu_hlo_binary(b, TTPU_MUL, f,
                           ttpu_hlo_const(b, t, 1.0 / 9007199254740992.0, 0));
  }
  ttpu_type bt = t;
  bt.dtype = TTPU_U32;
  ttpu_val bits = ttpu_l_random_bits(L, bt);
  bits = ttpu_hlo_binary(b, TTPU_SHR_L, bits, ttpu_hlo_const(b, bt, 0, 8));
  ttpu_type ft = t;
  ft.dtype = TTPU_F32;
  ttpu_val f = ttpu_hlo_convert(b, bits, TTPU_F32);
  f = ttpu_hlo_binary(b, TTPU_MUL, f, ttpu_hlo_const(b, ft, 1.0 / 16777216.0, 0));
  if (t.dtype == TTPU_F32) return f;
  /* Rounding to a narrower float may reach 1.0: keep the interval open. */
  ttpu_val r = ttpu_hlo_convert(b, f, t.dtype);
  ttpu_val one = ttpu_hlo_const(b, t, 1.0, 0);
  double below = t.dtype == TTPU_BF16 ? 0.99609375 : 0.99951171875;
  return ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GE, r, one),
                         ttpu_hlo_const(b, t, below, 0), r);
}
