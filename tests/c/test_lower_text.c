/* test_lower_text.c - ops/ stands on hlo/ alone: an op call packed by hand
 * lowers to StableHLO text through the lowering context (ops/ttpu_lower_ctx.h)
 * with no runtime, no plugin and no storages: the framer here makes each
 * input tensor a program parameter and prints what the record's lowering
 * built. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo/ttpu_hlo.h"
#include "ops/ttpu_lower_ctx.h"
#include "ttpu_test.h"

#define MAX_TENSORS 4
#define MAX_RESULTS 8

/* Lowering never looks inside a storage, but a tensor without a buffer is
 * None or empty to it (ttpu_op.h), so each tensor names one of these
 * stand-ins for storages no runtime made. Never dereferenced. */
static max_align_t g_storages[MAX_TENSORS];
#define STORAGE(k) ((ttpu_buffer*)&g_storages[k])

/* The framer: each tensor of the call is parameter i of the program. */
typedef struct {
  ttpu_val param[MAX_TENSORS];
  int reads[MAX_TENSORS]; /* read_input calls per tensor */
} params;

static ttpu_val read_param(void* user, ttpu_lower* L, int tensor) {
  (void)L;
  params* ps = user;
  ps->reads[tensor]++;
  return ps->param[tensor];
}

/* One call lowered to a program's text. */
typedef struct {
  const ttpu_op_call* call;
  const int* arg_scalar; /* per argument; NULL: no runtime Scalars */
  int n_f;               /* floats in the pack (0: no pack) */
  int rng;               /* give the op an rng state (and return it) */
  /* out */
  char* text;
  params ps;
  int has_check;
  ttpu_code check_code;
  char check_fmt[TTPU_L_CHECK_FMT_MAX];
} lowered;

/* Parameters (the tensors, the float pack, the rng state), the op, then a
 * return of every output, the rng state and the check's info. */
static ttpu_status* lower_one(lowered* w) {
  const ttpu_op_call* call = w->call;
  if (call->n_tensors > MAX_TENSORS || call->n_outputs + 2 > MAX_RESULTS)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "test call too large");
  ttpu_hlo* b = ttpu_hlo_create();
  if (!b) return ttpu_status_oom();
  ttpu_hlo_set_optimize(b, 1);
  memset(&w->ps, 0, sizeof(w->ps));
  for (int i = 0; i < call->n_tensors; ++i) {
    const ttpu_tensor* x = &call->tensors[i];
    w->ps.param[i] = ttpu_hlo_param(b, ttpu_type_make(x->dtype, x->ndim, x->sizes), -1);
  }
  ttpu_lower_setup su = {.read_input = read_param,
                         .user = &w->ps,
                         .fpack = TTPU_VAL_ERROR,
                         .ipack = TTPU_VAL_ERROR,
                         .arg_scalar = w->arg_scalar,
                         .rng_state = TTPU_VAL_ERROR};
  if (w->n_f) {
    int64_t n = w->n_f;
    su.fpack = ttpu_hlo_param(b, ttpu_type_make(TTPU_F64, 1, &n), -1);
  }
  if (w->rng) {
    int64_t two = 2;
    su.rng_state = ttpu_hlo_param(b, ttpu_type_make(TTPU_U64, 1, &two), -1);
  }
  const ttpu_op_def* def = ttpu_op_def_get(call->op);
  ttpu_lower* L = NULL;
  ttpu_status* s = def ? ttpu_lower_begin(b, def, call, &su, &L)
                       : ttpu_status_make(TTPU_INVALID_ARGUMENT, "no op %d", call->op);
  if (!s) s = ttpu_lower_run(L);
  if (!s) {
    ttpu_val res[MAX_RESULTS];
    int n = 0;
    for (int o = 0; o < call->n_outputs; ++o) res[n++] = ttpu_lower_output(L, o);
    if (w->rng) res[n++] = ttpu_lower_rng_state(L);
    const char* fmt;
    ttpu_val info = ttpu_lower_check(L, &w->check_code, &fmt);
    w->has_check = info != TTPU_VAL_ERROR;
    if (w->has_check) {
      res[n++] = info;
      snprintf(w->check_fmt, sizeof(w->check_fmt), "%s", fmt);
    }
    ttpu_hlo_return(b, res, n);
    s = ttpu_hlo_take_status(b);
    size_t len;
    if (!s) s = ttpu_hlo_print(b, &w->text, &len);
  }
  ttpu_lower_end(L);
  if (s) ttpu_status_free(ttpu_hlo_take_status(b));
  ttpu_hlo_free(b);
  return s;
}

static ttpu_tensor tensor(int storage, ttpu_dtype dt, int ndim,
                          const int64_t* sizes, const int64_t* strides) {
  ttpu_tensor t = {STORAGE(storage), dt, ndim, sizes, strides, 0};
  return t;
}

static ttpu_op_call make_call(const char* op, const ttpu_arg* args, int n_args,
                              const ttpu_tensor* in, int n_in,
                              const ttpu_tensor* out, ttpu_dtype common) {
  ttpu_op_call c = {.op = ttpu_op_lookup(op), .n_args = n_args, .args = args,
                    .n_tensors = n_in, .tensors = in, .n_outputs = 1,
                    .outputs = out, .common_dtype = common};
  return c;
}

/* Lowers w and checks that its text holds every string of want (NULL
 * ended); w->text is freed, what else lower_one filled in stays. */
static void expect_text(ttpu_test_ctx* t, lowered* w, const char* const* want) {
  TTPU_CHECK_OK(t, lower_one(w));
  for (const char* const* s = want; *s; ++s)
    if (!strstr(w->text, *s)) {
      ttpu_test_fail(t, __FILE__, __LINE__, "no \"%s\" in:\n%s", *s, w->text);
      break;
    }
  free(w->text);
  w->text = NULL;
}

#define TEXT(...) ((const char* const[]){__VA_ARGS__, NULL})

static const int64_t k23[2] = {2, 3}, k31[2] = {3, 1};

/* add.Tensor(x, y, alpha=2.5): alpha is a runtime Scalar read out of the
 * float pack, so the program does not depend on its value. */
static void test_add_alpha(ttpu_test_ctx* t) {
  ttpu_tensor in[2] = {tensor(0, TTPU_F32, 2, k23, k31), tensor(1, TTPU_F32, 2, k23, k31)};
  ttpu_tensor out[1] = {tensor(2, TTPU_F32, 2, k23, k31)};
  ttpu_arg args[3] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0},
                      {.kind = TTPU_ARG_TENSOR, .tensor = 1},
                      {.kind = TTPU_ARG_SCALAR, .f = 2.5, .scalar_dtype = TTPU_F64}};
  ttpu_op_call call = make_call("add.Tensor", args, 3, in, 2, out, TTPU_F32);
  static const int arg_scalar[3] = {-1, -1, 0};
  lowered w = {.call = &call, .arg_scalar = arg_scalar, .n_f = 1};
  expect_text(t, &w, TEXT("stablehlo.add", "stablehlo.multiply",
                          "tensor<1xf64>", "tensor<2x3xf32>"));
  if (t->failed) return;
  TTPU_CHECK(t, w.ps.reads[0] == 1 && w.ps.reads[1] == 1 && !w.has_check);
  /* Program text is hashed into cache keys: the same call, the same text,
   * whatever alpha is. */
  lowered a = w, c = w;
  args[2].f = -7.0;
  TTPU_CHECK_OK(t, lower_one(&a));
  args[2].f = 2.5;
  ttpu_status* s = lower_one(&c);
  int same = !s && !strcmp(a.text, c.text) && !strstr(c.text, "2.5");
  ttpu_status_free(s);
  free(a.text);
  free(c.text);
  TTPU_CHECK(t, same);
}

/* sum.dim_IntList(x, [1]): a reduce over dim 1. */
static void test_sum_dim(ttpu_test_ctx* t) {
  static const int64_t sz[2] = {4, 5}, st[2] = {5, 1}, osz[1] = {4}, ost[1] = {1};
  static const int64_t dims[1] = {1};
  ttpu_tensor in[1] = {tensor(0, TTPU_F32, 2, sz, st)};
  ttpu_tensor out[1] = {tensor(1, TTPU_F32, 1, osz, ost)};
  ttpu_arg args[4] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0},
                      {.kind = TTPU_ARG_INTS, .n = 1, .ints = dims},
                      {.kind = TTPU_ARG_BOOL, .i = 0},
                      {.kind = TTPU_ARG_NONE}};
  ttpu_op_call call = make_call("sum.dim_IntList", args, 4, in, 1, out, TTPU_F32);
  lowered w = {.call = &call};
  expect_text(t, &w, TEXT("stablehlo.reduce", "tensor<4x5xf32>", "tensor<4xf32>"));
}

/* mm(a, b): one dot_general. */
static void test_mm(ttpu_test_ctx* t) {
  static const int64_t bs[2] = {3, 4}, bst[2] = {4, 1}, os[2] = {2, 4};
  ttpu_tensor in[2] = {tensor(0, TTPU_F32, 2, k23, k31), tensor(1, TTPU_F32, 2, bs, bst)};
  ttpu_tensor out[1] = {tensor(2, TTPU_F32, 2, os, bst)};
  ttpu_arg args[2] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0},
                      {.kind = TTPU_ARG_TENSOR, .tensor = 1}};
  ttpu_op_call call = make_call("mm", args, 2, in, 2, out, TTPU_F32);
  lowered w = {.call = &call};
  expect_text(t, &w, TEXT("stablehlo.dot_general", "tensor<2x4xf32>"));
}

static const int64_t k3[1] = {3}, k1[1] = {1};

/* add.Tensor of complex64 tensors with a complex alpha: the record's
 * complex lowering runs, alpha's (re, im) come out of the float pack. */
static void test_complex_add(ttpu_test_ctx* t) {
  ttpu_tensor in[2] = {tensor(0, TTPU_C64, 1, k3, k1), tensor(1, TTPU_C64, 1, k3, k1)};
  ttpu_tensor out[1] = {tensor(2, TTPU_C64, 1, k3, k1)};
  ttpu_arg args[3] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0},
                      {.kind = TTPU_ARG_TENSOR, .tensor = 1},
                      {.kind = TTPU_ARG_SCALAR, .f = 1.0, .fi = 2.0,
                       .scalar_dtype = TTPU_C128}};
  ttpu_op_call call = make_call("add.Tensor", args, 3, in, 2, out, TTPU_C64);
  static const int arg_scalar[3] = {-1, -1, 0};
  lowered w = {.call = &call, .arg_scalar = arg_scalar, .n_f = 2};
  expect_text(t, &w, TEXT("stablehlo.complex", "stablehlo.add",
                          "tensor<3xcomplex<f32>>", "tensor<2xf64>"));
}

/* An op without a complex lowering refuses complex values before its
 * lowering runs, as ttpu_op_run would. */
static void test_complex_refused(ttpu_test_ctx* t) {
  ttpu_tensor in[1] = {tensor(0, TTPU_C64, 1, k3, k1)};
  ttpu_tensor out[1] = {tensor(1, TTPU_C64, 1, k3, k1)};
  ttpu_arg args[1] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0}};
  ttpu_op_call call = make_call("relu", args, 1, in, 1, out, TTPU_C64);
  lowered w = {.call = &call};
  ttpu_status* s = lower_one(&w);
  int ok = s && ttpu_status_code(s) == TTPU_UNIMPLEMENTED &&
           strstr(ttpu_status_message(s), "complex") != NULL;
  ttpu_status_free(s);
  TTPU_CHECK(t, ok);
  TTPU_CHECK(t, w.text == NULL && w.ps.reads[0] == 0);
}

/* uniform_(x, 0, 1): draws from the rng state it was given (threefry over
 * the counter, in the program's own integer ops) and hands the advanced
 * state back; its input's value is never read. */
static void test_random(ttpu_test_ctx* t) {
  static const int64_t sz[1] = {8};
  ttpu_tensor x[1] = {tensor(0, TTPU_F32, 1, sz, k1)};
  ttpu_arg args[4] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0},
                      {.kind = TTPU_ARG_FLOAT, .f = 0.0},
                      {.kind = TTPU_ARG_FLOAT, .f = 1.0},
                      {.kind = TTPU_ARG_NONE}};
  ttpu_op_call call = make_call("uniform_", args, 4, x, 1, x, TTPU_DTYPE_NONE);
  lowered w = {.call = &call, .rng = 1};
  expect_text(t, &w, TEXT("stablehlo.xor", "stablehlo.shift_left", "tensor<2xui64>"));
  TTPU_CHECK(t, w.ps.reads[0] == 0);
  /* Without a state to draw from the lowering fails, never draws garbage. */
  lowered none = {.call = &call};
  ttpu_status* s = lower_one(&none);
  TTPU_CHECK(t, s != NULL);
  ttpu_status_free(s);
}

/* index_select(x, 0, idx): a data-dependent check comes back with its
 * code and message. */
static void test_check(ttpu_test_ctx* t) {
  static const int64_t xs[2] = {5, 3}, is[1] = {2};
  ttpu_tensor in[2] = {tensor(0, TTPU_F32, 2, xs, k31), tensor(1, TTPU_I64, 1, is, k1)};
  ttpu_tensor out[1] = {tensor(2, TTPU_F32, 2, k23, k31)};
  ttpu_arg args[3] = {{.kind = TTPU_ARG_TENSOR, .tensor = 0},
                      {.kind = TTPU_ARG_INT, .i = 0},
                      {.kind = TTPU_ARG_TENSOR, .tensor = 1}};
  ttpu_op_call call = make_call("index_select", args, 3, in, 2, out, TTPU_F32);
  lowered w = {.call = &call};
  expect_text(t, &w, TEXT("tensor<4xi64>", "tensor<2x3xf32>"));
  TTPU_CHECK(t, w.has_check && w.check_code == TTPU_INDEX_ERROR);
  TTPU_CHECK(t, strstr(w.check_fmt, "index out of range") != NULL);
}

static const ttpu_test kTests[] = {
    {"add_alpha", test_add_alpha},
    {"sum_dim", test_sum_dim},
    {"mm", test_mm},
    {"complex_add", test_complex_add},
    {"complex_refused", test_complex_refused},
    {"random", test_random},
    {"check", test_check},
    {NULL, NULL},
};
TTPU_TEST_SUITE(lower_text, kTests)
