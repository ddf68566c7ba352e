/* mechanisms.c - how one compiled program can serve a bucket of sizes of
 * one dimension: three mechanisms measured on hand-written StableHLO,
 * through the engine's PJRT layer directly (no runtime, no lowering).
 *
 *   exact    one program per size n (today's behaviour)
 *   pad      one program per bucket B: inputs padded to B rows, the true
 *            size n a run-time i64 (a 1-element pack, as plan.c's int
 *            pack), ops that mix rows mask the padding (select)
 *   bounded  one program per bucket B: XLA bounded dynamic dimensions
 *            (stablehlo.set_dimension_size to n, #stablehlo.bounds<B, ?>
 *            types, XLA's dynamic padder does the masking)
 *
 * Every tensor is [rows, D] with rows the dynamic dimension. Padded rows
 * hold NaN, so a missing mask shows up as a wrong value, not by luck.
 * For each op and n: compile time, median time per call (execute + wait
 * for its completion event; inputs and the n pack uploaded beforehand, as
 * the engine keeps packs on the device), and the max abs error against a
 * double-precision reference. Then the cost of padding an exact-size
 * buffer to B and slicing back (programs that are per n by nature),
 * probes of what bounded dynamism does at the PJRT boundary, a sweep
 * n = B/2+1..B, and compiles for a TPU topology through libtpu.
 *
 * Build and run: see benchmarks/shapes/README.md. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pjrt/pjrt_internal.h" /* only to ask a buffer for its dynamic dims */
#include "pjrt/ttpu_pjrt.h"
#include "ttpu_aot.h"

/* ------------------------------------------------------------ utilities */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
  char* p;
  size_t n, cap;
} sbuf;

static void sb_printf(sbuf* s, const char* fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0,
                      fmt, ap);
    va_end(ap);
    if (s->p && (size_t)k < s->cap - s->n) {
      s->n += (size_t)k;
      return;
    }
    size_t cap = s->cap ? s->cap * 2 : 4096;
    while (cap < s->n + (size_t)k + 1) cap *= 2;
    s->p = realloc(s->p, cap);
    if (!s->p) abort();
    s->cap = cap;
  }
}

static int cmp_d(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* The first line of a status message, at most n chars, for tables. */
static void short_msg(const char* m, char* out, size_t n) {
  size_t k = 0;
  for (; m && m[k] && m[k] != '\n' && k + 1 < n; ++k)
    out[k] = m[k] == '|' ? '/' : m[k];
  out[k] = 0;
}

/* PJRT_Buffer_UnpaddedDimensions and PJRT_Buffer_DynamicDimensionIndices,
 * which the engine's layer does not wrap (pjrt_c_api.h's layout). */
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  const int64_t* unpadded_dims;
  size_t num_dims;
} unpadded_args;
typedef struct {
  size_t struct_size;
  void* extension_start;
  ttpu_pjrt_abi_buffer* buffer;
  const size_t* dynamic_dim_indices;
  size_t num_dynamic_dims;
} dyn_index_args;

/* "unpadded AxB, dynamic dims [i]" for b, or the plugin's error. */
static void dyn_info(ttpu_pjrt_client* c, ttpu_pjrt_buffer* b, char* out,
                     size_t n) {
  const ttpu_pjrt_abi_api* api = c->api;
  typedef ttpu_pjrt_abi_error* (*unpadded_fn)(unpadded_args*);
  typedef ttpu_pjrt_abi_error* (*dyn_fn)(dyn_index_args*);
  unpadded_args u;
  memset(&u, 0, sizeof u);
  u.struct_size = sizeof u;
  u.buffer = (ttpu_pjrt_abi_buffer*)b;
  dyn_index_args d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.buffer = (ttpu_pjrt_abi_buffer*)b;
  ttpu_status* s = ttpu_pjrt_status_from_error(
      api, ((unpadded_fn)api->buffer_unpadded_dimensions)(&u),
      "Buffer_UnpaddedDimensions");
  size_t k = 0;
  if (s) {
    k += (size_t)snprintf(out, n, "unpadded dims: error %s",
                          ttpu_status_message(s));
    ttpu_status_free(s);
  } else {
    k += (size_t)snprintf(out, n, "unpadded dims ");
    for (size_t i = 0; i < u.num_dims && k < n; ++i)
      k += (size_t)snprintf(out + k, n - k, "%s%lld", i ? "x" : "",
                            (long long)u.unpadded_dims[i]);
  }
  s = ttpu_pjrt_status_from_error(
      api, ((dyn_fn)api->buffer_dynamic_dimension_indices)(&d),
      "Buffer_DynamicDimensionIndices");
  if (k >= n) return;
  if (s) {
    char m[200];
    short_msg(ttpu_status_message(s), m, sizeof m);
    snprintf(out + k, n - k, ", dynamic dims: error %s", m);
    ttpu_status_free(s);
  } else {
    k += (size_t)snprintf(out + k, n - k, ", dynamic dims [");
    for (size_t i = 0; i < d.num_dynamic_dims && k < n; ++i)
      k += (size_t)snprintf(out + k, n - k, "%s%zu", i ? "," : "",
                            d.dynamic_dim_indices[i]);
    if (k < n) snprintf(out + k, n - k, "]");
  }
}

/* ------------------------------------------------------------ the ops */

typedef enum {
  OP_EW,      /* y = x * tanh(x) + 0.5             [rows, D] */
  OP_SUM,     /* sum over rows                       [D] */
  OP_MEAN,    /* mean over rows                      [D] */
  OP_SOFTMAX, /* softmax over rows (dim 0)           [rows, D] */
  OP_MATMUL,  /* x^T w, contracting rows             [D, D] */
  OP_CUMSUM,  /* cumsum along rows                   [rows, D] */
  OP_ATTN,    /* softmax(q k^T / sqrt(D)) v, k,v [rows, D]   [Q, D] */
  OP_SORT,    /* ascending sort along rows           [rows, D] */
  OP_ARGMAX,  /* first index of the max over rows, as f32   [D] */
  N_OPS
} op_kind;

static const char* const kOpName[N_OPS] = {"elementwise", "sum", "mean",
                                           "softmax", "matmul", "cumsum",
                                           "attention", "sort", "argmax"};

typedef enum { M_EXACT, M_PAD, M_BOUNDED, N_MECH } mech;
static const char* const kMechName[N_MECH] = {"exact", "pad+mask", "bounded"};

enum { Q = 16 };
static int g_mask_i64; /* --mask-i64: pad+mask masks built in i64 */

/* Number of row-tensor inputs (besides q for attention). */
static int n_row_inputs(op_kind op) {
  return op == OP_MATMUL || op == OP_ATTN ? 2 : 1;
}
/* 1 when the output has the dynamic rows dim first. */
static int out_has_rows(op_kind op) {
  return op == OP_EW || op == OP_SOFTMAX || op == OP_CUMSUM || op == OP_SORT;
}

/* Variants of a program's interface, for probes. */
typedef struct {
  int bounded_out; /* bounded: return the bounded value itself */
  int bounded_in;  /* bounded: parameters are bounded types, no n pack */
} variant;

/* Emits the program text of `op` under mechanism m: R = n (exact) or the
 * bucket B. */
static char* gen(op_kind op, mech m, int R, int D, variant v) {
  sbuf s = {0};
  char xt[128], st_[128], qt[64], ot[128], rowt[64];
  int bnd = m == M_BOUNDED;
  snprintf(rowt, sizeof rowt, "tensor<%dx%dxf32>", R, D);
  if (bnd)
    snprintf(xt, sizeof xt, "tensor<?x%dxf32, #stablehlo.bounds<%d, ?>>", D,
             R);
  else
    snprintf(xt, sizeof xt, "%s", rowt);
  /* attention scores [Q, rows] */
  if (bnd)
    snprintf(st_, sizeof st_, "tensor<%dx?xf32, #stablehlo.bounds<?, %d>>", Q,
             R);
  else
    snprintf(st_, sizeof st_, "tensor<%dx%dxf32>", Q, R);
  snprintf(qt, sizeof qt, "tensor<%dx%dxf32>", Q, D);
  switch (op) {
    case OP_SUM:
    case OP_MEAN:
    case OP_ARGMAX:
      snprintf(ot, sizeof ot, "tensor<%dxf32>", D);
      break;
    case OP_MATMUL:
      snprintf(ot, sizeof ot, "tensor<%dx%dxf32>", D, D);
      break;
    case OP_ATTN:
      snprintf(ot, sizeof ot, "%s", qt);
      break;
    default:
      snprintf(ot, sizeof ot, "%s", bnd && v.bounded_out ? xt : rowt);
  }
  const char* in_t = bnd && v.bounded_in ? xt : rowt;
  int has_n = m != M_EXACT && !(bnd && v.bounded_in);

  sb_printf(&s,
            "module @m attributes {mhlo.num_partitions = 1 : i32, "
            "mhlo.num_replicas = 1 : i32} {\n  func.func public @main(");
  if (op == OP_ATTN) sb_printf(&s, "%%q: %s, ", qt);
  sb_printf(&s, "%%x0: %s", in_t);
  if (n_row_inputs(op) > 1) sb_printf(&s, ", %%x1: %s", in_t);
  if (has_n) sb_printf(&s, ", %%np: tensor<1xi64>");
  sb_printf(&s, ") -> %s {\n", ot);
#define E(...) sb_printf(&s, "    " __VA_ARGS__)
  E("%%z = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n");
  E("%%ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>\n");
  /* x: the row inputs as the op sees them (a, b) */
  const char* a = "%x0";
  const char* b = "%x1";
  if (has_n) {
    E("%%n = stablehlo.reshape %%np : (tensor<1xi64>) -> tensor<i64>\n");
  }
  /* the masks compare an iota with n, in i32 unless --mask-i64 (TPUs
   * have no 64-bit integer vector unit: an i64 iota is emulated) */
  const char* mi = g_mask_i64 ? "i64" : "i32";
  if (m == M_PAD) {
    E("%%nm = stablehlo.convert %%n : (tensor<i64>) -> tensor<%s>\n", mi);
    E("%%io = stablehlo.iota dim = 0 : tensor<%dx%dx%s>\n", R, D, mi);
    E("%%nb = stablehlo.broadcast_in_dim %%nm, dims = [] : (tensor<%s>) -> "
      "tensor<%dx%dx%s>\n", mi, R, D, mi);
    E("%%mask = stablehlo.compare LT, %%io, %%nb : (tensor<%dx%dx%s>, "
      "tensor<%dx%dx%s>) -> tensor<%dx%dxi1>\n", R, D, mi, R, D, mi, R, D);
  }
  if (bnd && !v.bounded_in) {
    E("%%n32 = stablehlo.convert %%n : (tensor<i64>) -> tensor<i32>\n");
    E("%%a = stablehlo.set_dimension_size %%x0, %%n32, dim = 0 : (%s, "
      "tensor<i32>) -> %s\n", rowt, xt);
    a = "%a";
    if (n_row_inputs(op) > 1) {
      E("%%b = stablehlo.set_dimension_size %%x1, %%n32, dim = 0 : (%s, "
        "tensor<i32>) -> %s\n", rowt, xt);
      b = "%b";
    }
  }
  /* A splat constant of the row type: static, or static then resized. */
#define ROW_SPLAT(name, val)                                                \
  do {                                                                      \
    if (bnd) {                                                              \
      E("%%%s_s = stablehlo.constant dense<%s> : %s\n", name, val, rowt);   \
      E("%%%s = stablehlo.set_dimension_size %%%s_s, %%n32, dim = 0 : (%s, " \
        "tensor<i32>) -> %s\n", name, name, rowt, xt);                      \
    } else {                                                                \
      E("%%%s = stablehlo.constant dense<%s> : %s\n", name, val, rowt);     \
    }                                                                       \
  } while (0)
  /* A [D] value broadcast over rows. */
#define ROW_BCAST(dst, src)                                                 \
  do {                                                                      \
    if (bnd) {                                                              \
      E("%%%s_s = stablehlo.broadcast_in_dim %s, dims = [1] : "             \
        "(tensor<%dxf32>) -> %s\n", dst, src, D, rowt);                     \
      E("%%%s = stablehlo.set_dimension_size %%%s_s, %%n32, dim = 0 : (%s, " \
        "tensor<i32>) -> %s\n", dst, dst, rowt, xt);                        \
    } else {                                                                \
      E("%%%s = stablehlo.broadcast_in_dim %s, dims = [1] : "               \
        "(tensor<%dxf32>) -> %s\n", dst, src, D, xt);                       \
    }                                                                       \
  } while (0)
  if (bnd && v.bounded_in) {
    /* no n pack: the size comes with the parameter */
    E("%%n32 = stablehlo.get_dimension_size %%x0, dim = 0 : (%s) -> "
      "tensor<i32>\n", xt);
  }
  const char* result = NULL;
  switch (op) {
    case OP_EW: {
      ROW_SPLAT("half", "5.000000e-01");
      E("%%t = stablehlo.tanh %s : %s\n", a, xt);
      E("%%m = stablehlo.multiply %s, %%t : %s\n", a, xt);
      E("%%y = stablehlo.add %%m, %%half : %s\n", xt);
      result = "%y";
      break;
    }
    case OP_SUM:
    case OP_MEAN: {
      if (m == M_PAD) {
        E("%%zs = stablehlo.constant dense<0.000000e+00> : %s\n", rowt);
        E("%%xm = stablehlo.select %%mask, %s, %%zs : tensor<%dx%dxi1>, %s\n",
          a, R, D, rowt);
        a = "%xm";
      }
      E("%%r = stablehlo.reduce(%s init: %%z) applies stablehlo.add across "
        "dimensions = [0] : (%s, tensor<f32>) -> tensor<%dxf32>\n", a, xt, D);
      result = "%r";
      if (op == OP_MEAN) {
        if (m == M_EXACT) {
          E("%%nf = stablehlo.constant dense<%d.0> : tensor<%dxf32>\n", R, D);
        } else {
          if (bnd) {
            /* the size as XLA sees it, not the pack */
            E("%%gn = stablehlo.get_dimension_size %s, dim = 0 : (%s) -> "
              "tensor<i32>\n", a, xt);
            E("%%n0 = stablehlo.convert %%gn : (tensor<i32>) -> tensor<f32>\n");
          } else {
            E("%%n0 = stablehlo.convert %%n : (tensor<i64>) -> tensor<f32>\n");
          }
          E("%%nf = stablehlo.broadcast_in_dim %%n0, dims = [] : (tensor<f32>) "
            "-> tensor<%dxf32>\n", D);
        }
        E("%%mean = stablehlo.divide %%r, %%nf : tensor<%dxf32>\n", D);
        result = "%mean";
      }
      break;
    }
    case OP_SOFTMAX: {
      if (m == M_PAD) {
        E("%%ninfs = stablehlo.constant dense<0xFF800000> : %s\n", rowt);
        E("%%xm = stablehlo.select %%mask, %s, %%ninfs : tensor<%dx%dxi1>, "
          "%s\n", a, R, D, rowt);
        a = "%xm";
      }
      E("%%mx = stablehlo.reduce(%s init: %%ninf) applies stablehlo.maximum "
        "across dimensions = [0] : (%s, tensor<f32>) -> tensor<%dxf32>\n", a,
        xt, D);
      ROW_BCAST("mxb", "%mx");
      E("%%sh = stablehlo.subtract %s, %%mxb : %s\n", a, xt);
      E("%%e = stablehlo.exponential %%sh : %s\n", xt);
      E("%%se = stablehlo.reduce(%%e init: %%z) applies stablehlo.add across "
        "dimensions = [0] : (%s, tensor<f32>) -> tensor<%dxf32>\n", xt, D);
      ROW_BCAST("seb", "%se");
      E("%%y = stablehlo.divide %%e, %%seb : %s\n", xt);
      result = "%y";
      break;
    }
    case OP_MATMUL: {
      if (m == M_PAD) {
        E("%%zs = stablehlo.constant dense<0.000000e+00> : %s\n", rowt);
        E("%%xm = stablehlo.select %%mask, %s, %%zs : tensor<%dx%dxi1>, %s\n",
          a, R, D, rowt);
        E("%%wm = stablehlo.select %%mask, %s, %%zs : tensor<%dx%dxi1>, %s\n",
          b, R, D, rowt);
        a = "%xm";
        b = "%wm";
      }
      E("%%y = stablehlo.dot_general %s, %s, contracting_dims = [0] x [0] : "
        "(%s, %s) -> tensor<%dx%dxf32>\n", a, b, xt, xt, D, D);
      result = "%y";
      break;
    }
    case OP_CUMSUM: {
      E("%%y = \"stablehlo.reduce_window\"(%s, %%z) ({\n", a);
      E("  ^bb0(%%ra: tensor<f32>, %%rb: tensor<f32>):\n");
      E("    %%rs = stablehlo.add %%ra, %%rb : tensor<f32>\n");
      E("    stablehlo.return %%rs : tensor<f32>\n");
      E("  }) {window_dimensions = array<i64: %d, 1>, padding = dense<[[%d, "
        "0], [0, 0]]> : tensor<2x2xi64>} : (%s, tensor<f32>) -> %s\n", R,
        R - 1, xt, xt);
      result = "%y";
      break;
    }
    case OP_ATTN: {
      char sst[64];
      snprintf(sst, sizeof sst, "tensor<%dx%dxf32>", Q, R);
      E("%%s = stablehlo.dot_general %%q, %s, contracting_dims = [1] x [1] : "
        "(%s, %s) -> %s\n", a, qt, xt, st_);
      if (bnd) {
        E("%%sc_s = stablehlo.constant dense<%.9e> : %s\n", 1.0 / sqrt(D),
          sst);
        E("%%sc = stablehlo.set_dimension_size %%sc_s, %%n32, dim = 1 : (%s, "
          "tensor<i32>) -> %s\n", sst, st_);
      } else {
        E("%%sc = stablehlo.constant dense<%.9e> : %s\n", 1.0 / sqrt(D), sst);
      }
      E("%%ss = stablehlo.multiply %%s, %%sc : %s\n", st_);
      const char* sv = "%ss";
      const char* vv = b;
      if (m == M_PAD) {
        E("%%io2 = stablehlo.iota dim = 1 : tensor<%dx%dx%s>\n", Q, R, mi);
        E("%%nb2 = stablehlo.broadcast_in_dim %%nm, dims = [] : (tensor<%s>) "
          "-> tensor<%dx%dx%s>\n", mi, Q, R, mi);
        E("%%mask2 = stablehlo.compare LT, %%io2, %%nb2 : (tensor<%dx%dx%s>, "
          "tensor<%dx%dx%s>) -> tensor<%dx%dxi1>\n", Q, R, mi, Q, R, mi, Q, R);
        E("%%ninfs = stablehlo.constant dense<0xFF800000> : %s\n", sst);
        E("%%sm = stablehlo.select %%mask2, %%ss, %%ninfs : tensor<%dx%dxi1>, "
          "%s\n", Q, R, sst);
        E("%%zs = stablehlo.constant dense<0.000000e+00> : %s\n", rowt);
        E("%%vm = stablehlo.select %%mask, %s, %%zs : tensor<%dx%dxi1>, %s\n",
          b, R, D, rowt);
        sv = "%sm";
        vv = "%vm";
      }
      E("%%mx = stablehlo.reduce(%s init: %%ninf) applies stablehlo.maximum "
        "across dimensions = [1] : (%s, tensor<f32>) -> tensor<%dxf32>\n", sv,
        st_, Q);
      if (bnd) {
        E("%%mxb_s = stablehlo.broadcast_in_dim %%mx, dims = [0] : "
          "(tensor<%dxf32>) -> %s\n", Q, sst);
        E("%%mxb = stablehlo.set_dimension_size %%mxb_s, %%n32, dim = 1 : "
          "(%s, tensor<i32>) -> %s\n", sst, st_);
      } else {
        E("%%mxb = stablehlo.broadcast_in_dim %%mx, dims = [0] : "
          "(tensor<%dxf32>) -> %s\n", Q, st_);
      }
      E("%%sh = stablehlo.subtract %s, %%mxb : %s\n", sv, st_);
      E("%%e = stablehlo.exponential %%sh : %s\n", st_);
      E("%%se = stablehlo.reduce(%%e init: %%z) applies stablehlo.add across "
        "dimensions = [1] : (%s, tensor<f32>) -> tensor<%dxf32>\n", st_, Q);
      if (bnd) {
        E("%%seb_s = stablehlo.broadcast_in_dim %%se, dims = [0] : "
          "(tensor<%dxf32>) -> %s\n", Q, sst);
        E("%%seb = stablehlo.set_dimension_size %%seb_s, %%n32, dim = 1 : "
          "(%s, tensor<i32>) -> %s\n", sst, st_);
      } else {
        E("%%seb = stablehlo.broadcast_in_dim %%se, dims = [0] : "
          "(tensor<%dxf32>) -> %s\n", Q, st_);
      }
      E("%%p = stablehlo.divide %%e, %%seb : %s\n", st_);
      E("%%o = stablehlo.dot_general %%p, %s, contracting_dims = [1] x [0] : "
        "(%s, %s) -> %s\n", vv, st_, xt, qt);
      result = "%o";
      break;
    }
    case OP_SORT: {
      if (m == M_PAD) { /* padding sorts last */
        E("%%infs = stablehlo.constant dense<0x7F800000> : %s\n", rowt);
        E("%%xm = stablehlo.select %%mask, %s, %%infs : tensor<%dx%dxi1>, "
          "%s\n", a, R, D, rowt);
        a = "%xm";
      }
      E("%%y = \"stablehlo.sort\"(%s) ({\n", a);
      E("  ^bb0(%%sl: tensor<f32>, %%sr: tensor<f32>):\n");
      E("    %%lt = stablehlo.compare LT, %%sl, %%sr, FLOAT : (tensor<f32>, "
        "tensor<f32>) -> tensor<i1>\n");
      E("    stablehlo.return %%lt : tensor<i1>\n");
      E("  }) {dimension = 0 : i64, is_stable = true} : (%s) -> %s\n", xt, xt);
      result = "%y";
      break;
    }
    case OP_ARGMAX: {
      char it[128];
      if (bnd)
        snprintf(it, sizeof it, "tensor<?x%dxi64, #stablehlo.bounds<%d, ?>>",
                 D, R);
      else
        snprintf(it, sizeof it, "tensor<%dx%dxi64>", R, D);
      if (m == M_PAD) {
        E("%%ninfs = stablehlo.constant dense<0xFF800000> : %s\n", rowt);
        E("%%xm = stablehlo.select %%mask, %s, %%ninfs : tensor<%dx%dxi1>, "
          "%s\n", a, R, D, rowt);
        a = "%xm";
      }
      if (bnd) {
        E("%%ix_s = stablehlo.iota dim = 0 : tensor<%dx%dxi64>\n", R, D);
        E("%%ix = stablehlo.set_dimension_size %%ix_s, %%n32, dim = 0 : "
          "(tensor<%dx%dxi64>, tensor<i32>) -> %s\n", R, D, it);
      } else {
        E("%%ix = stablehlo.iota dim = 0 : %s\n", it);
      }
      E("%%i0 = stablehlo.constant dense<0> : tensor<i64>\n");
      E("%%am:2 = \"stablehlo.reduce\"(%s, %%ix, %%ninf, %%i0) ({\n", a);
      E("  ^bb0(%%pv: tensor<f32>, %%pi: tensor<i64>, %%qv: tensor<f32>, "
        "%%qi: tensor<i64>):\n");
      E("    %%gt = stablehlo.compare GT, %%pv, %%qv, FLOAT : (tensor<f32>, "
        "tensor<f32>) -> tensor<i1>\n");
      E("    %%eq = stablehlo.compare EQ, %%pv, %%qv, FLOAT : (tensor<f32>, "
        "tensor<f32>) -> tensor<i1>\n");
      E("    %%li = stablehlo.compare LT, %%pi, %%qi, SIGNED : (tensor<i64>, "
        "tensor<i64>) -> tensor<i1>\n");
      E("    %%tie = stablehlo.and %%eq, %%li : tensor<i1>\n");
      E("    %%pk = stablehlo.or %%gt, %%tie : tensor<i1>\n");
      E("    %%v = stablehlo.select %%pk, %%pv, %%qv : tensor<i1>, tensor<f32>\n");
      E("    %%i = stablehlo.select %%pk, %%pi, %%qi : tensor<i1>, tensor<i64>\n");
      E("    stablehlo.return %%v, %%i : tensor<f32>, tensor<i64>\n");
      E("  }) {dimensions = array<i64: 0>} : (%s, %s, tensor<f32>, "
        "tensor<i64>) -> (tensor<%dxf32>, tensor<%dxi64>)\n", xt, it, D, D);
      E("%%amf = stablehlo.convert %%am#1 : (tensor<%dxi64>) -> "
        "tensor<%dxf32>\n", D, D);
      result = "%amf";
      break;
    }
    default:
      break;
  }
  if (bnd && out_has_rows(op) && !v.bounded_out) {
    /* back to a static [B, D] value (the padded region unspecified) */
    E("%%cB = stablehlo.constant dense<%d> : tensor<i32>\n", R);
    E("%%out = stablehlo.set_dimension_size %s, %%cB, dim = 0 : (%s, "
      "tensor<i32>) -> %s\n", result, xt, rowt);
    result = "%out";
  }
  E("return %s : %s\n", result, ot);
  sb_printf(&s, "  }\n}\n");
#undef E
#undef ROW_SPLAT
#undef ROW_BCAST
  return s.p;
}

/* The padding programs: exact [n, D] -> [B, D] by stablehlo.pad (kind 0)
 * or dynamic_update_slice into zeros (1); [B, D] -> [n, D] by slice (2). */
static char* gen_pad(int kind, int n, int B, int D) {
  sbuf s = {0};
  sb_printf(&s,
            "module @m attributes {mhlo.num_partitions = 1 : i32, "
            "mhlo.num_replicas = 1 : i32} {\n  func.func public @main(");
  if (kind == 0) {
    sb_printf(&s,
              "%%x: tensor<%dx%dxf32>) -> tensor<%dx%dxf32> {\n"
              "    %%z = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
              "    %%y = stablehlo.pad %%x, %%z, low = [0, 0], high = [%d, 0], "
              "interior = [0, 0] : (tensor<%dx%dxf32>, tensor<f32>) -> "
              "tensor<%dx%dxf32>\n"
              "    return %%y : tensor<%dx%dxf32>\n",
              n, D, B, D, B - n, n, D, B, D, B, D);
  } else if (kind == 1) {
    sb_printf(&s,
              "%%x: tensor<%dx%dxf32>) -> tensor<%dx%dxf32> {\n"
              "    %%zb = stablehlo.constant dense<0.000000e+00> : "
              "tensor<%dx%dxf32>\n"
              "    %%c0 = stablehlo.constant dense<0> : tensor<i64>\n"
              "    %%y = stablehlo.dynamic_update_slice %%zb, %%x, %%c0, %%c0 : "
              "(tensor<%dx%dxf32>, tensor<%dx%dxf32>, tensor<i64>, "
              "tensor<i64>) -> tensor<%dx%dxf32>\n"
              "    return %%y : tensor<%dx%dxf32>\n",
              n, D, B, D, B, D, B, D, n, D, B, D, B, D);
  } else {
    sb_printf(&s,
              "%%x: tensor<%dx%dxf32>) -> tensor<%dx%dxf32> {\n"
              "    %%y = stablehlo.slice %%x [0:%d, 0:%d] : (tensor<%dx%dxf32>) "
              "-> tensor<%dx%dxf32>\n"
              "    return %%y : tensor<%dx%dxf32>\n",
              B, D, n, D, n, D, B, D, n, D, n, D);
  }
  sb_printf(&s, "  }\n}\n");
  return s.p;
}

/* ------------------------------------------------------------ reference */

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float rnd(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(g_rng >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* out: the reference result of op on n rows (q: [Q, D], x, w: [n, D]). */
static void reference(op_kind op, int n, int D, const float* q, const float* x,
                      const float* w, double* out) {
  switch (op) {
    case OP_EW:
      for (int i = 0; i < n * D; ++i)
        out[i] = (double)x[i] * tanh((double)x[i]) + 0.5;
      break;
    case OP_SUM:
    case OP_MEAN:
      for (int j = 0; j < D; ++j) {
        double acc = 0;
        for (int i = 0; i < n; ++i) acc += x[i * D + j];
        out[j] = op == OP_MEAN ? acc / n : acc;
      }
      break;
    case OP_SOFTMAX:
      for (int j = 0; j < D; ++j) {
        double mx = -INFINITY, se = 0;
        for (int i = 0; i < n; ++i) mx = fmax(mx, x[i * D + j]);
        for (int i = 0; i < n; ++i) se += exp(x[i * D + j] - mx);
        for (int i = 0; i < n; ++i) out[i * D + j] = exp(x[i * D + j] - mx) / se;
      }
      break;
    case OP_MATMUL:
      for (int a = 0; a < D; ++a)
        for (int c = 0; c < D; ++c) {
          double acc = 0;
          for (int i = 0; i < n; ++i) acc += (double)x[i * D + a] * w[i * D + c];
          out[a * D + c] = acc;
        }
      break;
    case OP_CUMSUM:
      for (int j = 0; j < D; ++j) {
        double acc = 0;
        for (int i = 0; i < n; ++i) out[i * D + j] = acc += x[i * D + j];
      }
      break;
    case OP_ATTN: {
      double* p = malloc(sizeof(double) * (size_t)n);
      for (int r = 0; r < Q; ++r) {
        double mx = -INFINITY, se = 0;
        for (int i = 0; i < n; ++i) {
          double acc = 0;
          for (int c = 0; c < D; ++c) acc += (double)q[r * D + c] * x[i * D + c];
          p[i] = acc / sqrt(D);
          mx = fmax(mx, p[i]);
        }
        for (int i = 0; i < n; ++i) se += p[i] = exp(p[i] - mx);
        for (int c = 0; c < D; ++c) {
          double acc = 0;
          for (int i = 0; i < n; ++i) acc += p[i] / se * w[i * D + c];
          out[r * D + c] = acc;
        }
      }
      free(p);
      break;
    }
    case OP_SORT: {
      double* col = malloc(sizeof(double) * (size_t)n);
      for (int j = 0; j < D; ++j) {
        for (int i = 0; i < n; ++i) col[i] = x[i * D + j];
        qsort(col, (size_t)n, sizeof(double), cmp_d);
        for (int i = 0; i < n; ++i) out[i * D + j] = col[i];
      }
      free(col);
      break;
    }
    case OP_ARGMAX:
      for (int j = 0; j < D; ++j) {
        int best = 0;
        for (int i = 1; i < n; ++i)
          if (x[i * D + j] > x[best * D + j]) best = i;
        out[j] = best;
      }
      break;
    default:
      break;
  }
}

static int64_t out_elems(op_kind op, int n, int D) {
  switch (op) {
    case OP_SUM:
    case OP_MEAN:
    case OP_ARGMAX:
      return D;
    case OP_MATMUL:
      return (int64_t)D * D;
    case OP_ATTN:
      return (int64_t)Q * D;
    default:
      return (int64_t)n * D;
  }
}

/* ------------------------------------------------------------ running */

typedef struct {
  ttpu_pjrt_client* c;
  int reps;
  int warm;
  FILE* log; /* full error messages and program texts that failed */
} bench;

typedef struct {
  int ok;
  char err[400];
  double compile_ms;
  ttpu_pjrt_exec* e;
} compiled;
static int g_query_dyn; /* run_exec asks the output for its dynamic dims */

static compiled compile_text(bench* B, const char* text, const char* label) {
  compiled r;
  memset(&r, 0, sizeof r);
  double t0 = now_s();
  ttpu_status* s = ttpu_pjrt_compile(B->c, text, strlen(text), NULL, 0, &r.e);
  r.compile_ms = (now_s() - t0) * 1e3;
  if (s) {
    short_msg(ttpu_status_message(s), r.err, sizeof r.err);
    if (B->log)
      fprintf(B->log, "=== CPU compile failed: %s\n%s\n--- program:\n%s\n",
              label, ttpu_status_message(s), text);
    ttpu_status_free(s);
    r.e = NULL;
  } else {
    r.ok = 1;
  }
  return r;
}

/* Uploads a row tensor of `rows` rows whose first n rows are src and the
 * rest NaN. */
static ttpu_status* upload_rows(bench* B, const float* src, int n, int rows,
                                int D, ttpu_pjrt_buffer** out) {
  float* h = malloc(sizeof(float) * (size_t)rows * D);
  for (int i = 0; i < rows * D; ++i) h[i] = i < n * D ? src[i] : NAN;
  int64_t dims[2] = {rows, D};
  ttpu_status* s =
      ttpu_pjrt_buffer_from_host(B->c, 0, h, TTPU_F32, dims, 2, out);
  free(h);
  return s;
}

typedef struct {
  int ok;
  char err[400];
  double median_us;
  double max_err;
  int out_ndim;
  int64_t out_dims[4];
  char dyn[256]; /* the output's dynamic dims, when asked for */
} run_result;

/* Runs e on args reps times (after warm-ups): median wall time of
 * execute + completion; then checks output 0's first out_n elements
 * against ref. */
static run_result run_exec(bench* B, ttpu_pjrt_exec* e,
                           ttpu_pjrt_buffer* const* args, int n_args,
                           const double* ref, int64_t out_n, int reps) {
  run_result r;
  memset(&r, 0, sizeof r);
  double* t = malloc(sizeof(double) * (size_t)(reps + 1));
  ttpu_status* s = NULL;
  ttpu_pjrt_buffer* out = NULL;
  for (int i = 0; i < B->warm + reps && !s; ++i) {
    ttpu_pjrt_event* done = NULL;
    double t0 = now_s();
    s = ttpu_pjrt_execute(B->c, e, 0, args, n_args, &out, 1, &done);
    if (!s && done) s = ttpu_pjrt_event_await(B->c, done);
    double t1 = now_s();
    if (done) ttpu_pjrt_event_destroy(B->c, done);
    if (i >= B->warm) t[i - B->warm] = t1 - t0;
    if (!s && i + 1 < B->warm + reps) {
      ttpu_pjrt_buffer_destroy(B->c, out);
      out = NULL;
    }
  }
  if (!s) {
    ttpu_dtype dt;
    int nd = 0;
    s = ttpu_pjrt_buffer_shape(B->c, out, &dt, r.out_dims, &nd);
    r.out_ndim = nd;
    if (!s && g_query_dyn) dyn_info(B->c, out, r.dyn, sizeof r.dyn);
    int64_t total = 1;
    for (int d = 0; d < nd; ++d) total *= r.out_dims[d];
    float* h = malloc(sizeof(float) * (size_t)(total ? total : 1));
    if (!s) s = ttpu_pjrt_buffer_to_host(B->c, out, h, sizeof(float) * (size_t)total);
    if (!s) {
      if (total < out_n) {
        snprintf(r.err, sizeof r.err, "output has %lld elements, expected >= %lld",
                 (long long)total, (long long)out_n);
      } else {
        double me = 0;
        for (int64_t i = 0; i < out_n; ++i) {
          double d = fabs((double)h[i] - ref[i]);
          if (!(d <= me)) me = isnan(d) ? INFINITY : d;
        }
        r.max_err = me;
        qsort(t, (size_t)reps, sizeof(double), cmp_d);
        r.median_us = t[reps / 2] * 1e6;
        r.ok = 1;
      }
    }
    free(h);
  }
  if (out) ttpu_pjrt_buffer_destroy(B->c, out);
  if (s) {
    short_msg(ttpu_status_message(s), r.err, sizeof r.err);
    if (B->log) fprintf(B->log, "=== run failed: %s\n", ttpu_status_message(s));
    ttpu_status_free(s);
  }
  free(t);
  return r;
}

/* Inputs for one op at true size n (q, x, w host arrays of max rows). */
typedef struct {
  float *q, *x, *w;
} host_inputs;

/* Builds args for mechanism m with `rows` rows: [q,] x [, w] [, n]. Caller
 * destroys the first *n_args buffers. */
static ttpu_status* make_args(bench* B, op_kind op, const host_inputs* in,
                              int n, int rows, int D, int with_n,
                              ttpu_pjrt_buffer** args, int* n_args) {
  int k = 0;
  ttpu_status* s = NULL;
  if (op == OP_ATTN) {
    int64_t qd[2] = {Q, D};
    s = ttpu_pjrt_buffer_from_host(B->c, 0, in->q, TTPU_F32, qd, 2, &args[k]);
    if (!s) ++k;
  }
  if (!s) {
    s = upload_rows(B, in->x, n, rows, D, &args[k]);
    if (!s) ++k;
  }
  if (!s && n_row_inputs(op) > 1) {
    s = upload_rows(B, in->w, n, rows, D, &args[k]);
    if (!s) ++k;
  }
  if (!s && with_n) {
    int64_t one = 1, nv = n;
    s = ttpu_pjrt_buffer_from_host(B->c, 0, &nv, TTPU_I64, &one, 1, &args[k]);
    if (!s) ++k;
  }
  *n_args = k;
  return s;
}

static void free_args(bench* B, ttpu_pjrt_buffer** args, int n) {
  for (int i = 0; i < n; ++i) ttpu_pjrt_buffer_destroy(B->c, args[i]);
}

/* ------------------------------------------------------------ sections */

typedef struct {
  int bucket;
  int D;
  int n[3];
} bucket_case;

static void fmt_err(char* buf, size_t n, const run_result* r) {
  if (!r->ok) snprintf(buf, n, "FAIL");
  else if (isinf(r->max_err)) snprintf(buf, n, "NaN/inf");
  else snprintf(buf, n, "%.1e", r->max_err);
}

/* Table 1: per op, mechanism and n. The nine (mechanism, n) programs of
 * an op are timed interleaved, CHUNK calls each in turn, so that a change
 * in the machine's load hits them alike. */
enum { CHUNK = 10 };

typedef struct {
  compiled cp;
  int own;                 /* destroys cp.e */
  ttpu_pjrt_buffer* args[4];
  int na;
  double* t;               /* per-call seconds */
  int nt;
  ttpu_status* err;        /* first execute error */
} config;

static ttpu_status* time_calls(bench* B, ttpu_pjrt_exec* e,
                               ttpu_pjrt_buffer* const* args, int na, int k,
                               double* dst) {
  for (int i = 0; i < k; ++i) {
    ttpu_pjrt_buffer* out = NULL;
    ttpu_pjrt_event* done = NULL;
    double t0 = now_s();
    ttpu_status* s = ttpu_pjrt_execute(B->c, e, 0, args, na, &out, 1, &done);
    if (!s && done) s = ttpu_pjrt_event_await(B->c, done);
    double t1 = now_s();
    if (done) ttpu_pjrt_event_destroy(B->c, done);
    if (out) ttpu_pjrt_buffer_destroy(B->c, out);
    if (s) return s;
    if (dst) dst[i] = t1 - t0;
  }
  return NULL;
}

static void measure_bucket(bench* B, const bucket_case* bc) {
  int Bk = bc->bucket, D = bc->D;
  printf("\n### bucket %d, n = %d / %d / %d (D = %d, Q = %d): compile ms; "
         "run us, median of %d calls, interleaved; max abs error over the "
         "three n\n\n", Bk, bc->n[0], bc->n[1], bc->n[2], D, Q, B->reps);
  printf("| op | compile exact (per n) | compile pad+mask | compile bounded | "
         "run exact | run pad+mask | run bounded | max err exact / pad / "
         "bounded |\n");
  printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
  host_inputs in;
  in.q = malloc(sizeof(float) * Q * D);
  in.x = malloc(sizeof(float) * (size_t)Bk * D);
  in.w = malloc(sizeof(float) * (size_t)Bk * D);
  for (int i = 0; i < Q * D; ++i) in.q[i] = rnd();
  for (int i = 0; i < Bk * D; ++i) in.x[i] = rnd();
  for (int i = 0; i < Bk * D; ++i) in.w[i] = rnd();
  double* ref = malloc(sizeof(double) *
                       ((size_t)Bk * D + (size_t)D * D + (size_t)Q * D));
  variant v0 = {0, 0};
  int rounds = (B->reps + CHUNK - 1) / CHUNK;
  for (int op = 0; op < N_OPS; ++op) {
    config cf[N_MECH][3];
    memset(cf, 0, sizeof cf);
    /* compile: one program per n (exact), one per bucket (the others) */
    for (int m = 0; m < N_MECH; ++m) {
      for (int k = 0; k < 3; ++k) {
        config* c = &cf[m][k];
        int n = bc->n[k];
        if (m != M_EXACT && k > 0) {
          c->cp = cf[m][0].cp;
          continue;
        }
        char* text = gen((op_kind)op, (mech)m, m == M_EXACT ? n : Bk, D, v0);
        char label[64];
        snprintf(label, sizeof label, "%s %s R=%d", kOpName[op], kMechName[m],
                 m == M_EXACT ? n : Bk);
        c->cp = compile_text(B, text, label);
        c->own = c->cp.ok;
        free(text);
      }
    }
    /* inputs, and a warm-up */
    for (int m = 0; m < N_MECH; ++m)
      for (int k = 0; k < 3; ++k) {
        config* c = &cf[m][k];
        if (!c->cp.ok) continue;
        int n = bc->n[k];
        c->err = make_args(B, (op_kind)op, &in, n, m == M_EXACT ? n : Bk, D,
                           m != M_EXACT, c->args, &c->na);
        if (!c->err) c->err = time_calls(B, c->cp.e, c->args, c->na, B->warm, NULL);
        c->t = malloc(sizeof(double) * (size_t)rounds * CHUNK);
      }
    for (int r = 0; r < rounds; ++r)
      for (int m = 0; m < N_MECH; ++m)
        for (int k = 0; k < 3; ++k) {
          config* c = &cf[m][k];
          if (!c->cp.ok || c->err) continue;
          c->err = time_calls(B, c->cp.e, c->args, c->na, CHUNK, c->t + c->nt);
          if (!c->err) c->nt += CHUNK;
        }
    /* one row per op: compile ms, run us per n, worst error per mechanism */
    char cell_c[N_MECH][64], cell_r[N_MECH][96], cell_e[N_MECH][48];
    for (int m = 0; m < N_MECH; ++m) {
      cell_c[m][0] = cell_r[m][0] = 0;
      double worst = 0;
      int failed = 0;
      char why[512] = "";
      for (int k = 0; k < 3; ++k) {
        config* c = &cf[m][k];
        int n = bc->n[k];
        size_t lc = strlen(cell_c[m]), lr = strlen(cell_r[m]);
        if (m == M_EXACT || k == 0)
          snprintf(cell_c[m] + lc, sizeof cell_c[m] - lc, "%s%.0f",
                   k ? " / " : "", c->cp.compile_ms);
        if (!c->cp.ok) {
          failed = 1;
          snprintf(why, sizeof why, "compile: %s", c->cp.err);
          snprintf(cell_r[m] + lr, sizeof cell_r[m] - lr, "%s-", k ? " / " : "");
          continue;
        }
        run_result r;
        memset(&r, 0, sizeof r);
        if (c->err) {
          short_msg(ttpu_status_message(c->err), r.err, sizeof r.err);
        } else {
          /* one more call, its output checked */
          reference((op_kind)op, n, D, in.q, in.x, in.w, ref);
          r = run_exec(B, c->cp.e, c->args, c->na, ref,
                       out_elems((op_kind)op, n, D), 1);
        }
        if (r.ok && c->nt) {
          qsort(c->t, (size_t)c->nt, sizeof(double), cmp_d);
          snprintf(cell_r[m] + lr, sizeof cell_r[m] - lr, "%s%.0f",
                   k ? " / " : "", c->t[c->nt / 2] * 1e6);
          if (!(r.max_err <= worst)) worst = r.max_err;
        } else {
          failed = 1;
          snprintf(why, sizeof why, "run: %s", r.err);
          snprintf(cell_r[m] + lr, sizeof cell_r[m] - lr, "%s-", k ? " / " : "");
        }
      }
      if (failed) {
        snprintf(cell_e[m], sizeof cell_e[m], "FAIL");
        if (B->log) fprintf(B->log, "=== %s %s: %s\n", kOpName[op], kMechName[m], why);
      } else if (isinf(worst) || worst > 1e-3) {
        snprintf(cell_e[m], sizeof cell_e[m], "**%.1e WRONG**", worst);
      } else {
        snprintf(cell_e[m], sizeof cell_e[m], "%.0e", worst);
      }
    }
    printf("| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s |\n", kOpName[op],
           cell_c[M_EXACT], cell_c[M_PAD], cell_c[M_BOUNDED], cell_r[M_EXACT],
           cell_r[M_PAD], cell_r[M_BOUNDED], cell_e[M_EXACT], cell_e[M_PAD],
           cell_e[M_BOUNDED]);
    for (int m = 0; m < N_MECH; ++m)
      for (int k = 0; k < 3; ++k) {
        config* c = &cf[m][k];
        free_args(B, c->args, c->na);
        free(c->t);
        ttpu_status_free(c->err);
        if (c->own) ttpu_pjrt_exec_destroy(B->c, c->cp.e);
      }
    fflush(stdout);
  }
  free(in.q);
  free(in.x);
  free(in.w);
  free(ref);
}

/* Table 2: padding an exact buffer to B and slicing back. */
static void measure_padding(bench* B, const bucket_case* bc) {
  int Bk = bc->bucket, D = bc->D;
  static const char* const kKind[3] = {"pad [n,D]->[B,D]",
                                       "dynamic_update_slice into zeros",
                                       "slice [B,D]->[n,D]"};
  printf("\n### padding cost, bucket %d (D = %d)\n\n", Bk, D);
  printf("| program (one per n) | n | compile ms | run us |\n");
  printf("|---|---:|---:|---:|\n");
  float* x = malloc(sizeof(float) * (size_t)Bk * D);
  for (int i = 0; i < Bk * D; ++i) x[i] = rnd();
  double* ref = malloc(sizeof(double) * (size_t)Bk * D);
  for (int kind = 0; kind < 3; ++kind) {
    for (int k = 0; k < 3; ++k) {
      int n = bc->n[k];
      if (n == Bk) continue; /* nothing to pad */
      char* text = gen_pad(kind, n, Bk, D);
      compiled cp = compile_text(B, text, kKind[kind]);
      free(text);
      if (!cp.ok) {
        printf("| %s | %d | FAIL | %s |\n", kKind[kind], n, cp.err);
        continue;
      }
      int rows_in = kind == 2 ? Bk : n;
      int64_t out_n = kind == 2 ? (int64_t)n * D : (int64_t)Bk * D;
      for (int64_t i = 0; i < out_n; ++i)
        ref[i] = kind == 2 ? x[i] : (i < (int64_t)n * D ? x[i] : 0.0);
      ttpu_pjrt_buffer* in = NULL;
      ttpu_status* s = upload_rows(B, x, rows_in, rows_in, D, &in);
      run_result r;
      memset(&r, 0, sizeof r);
      if (s) {
        short_msg(ttpu_status_message(s), r.err, sizeof r.err);
        ttpu_status_free(s);
      } else {
        r = run_exec(B, cp.e, &in, 1, ref, out_n, B->reps);
        ttpu_pjrt_buffer_destroy(B->c, in);
      }
      if (r.ok && r.max_err == 0)
        printf("| %s | %d | %.1f | %.1f |\n", kKind[kind], n, cp.compile_ms,
               r.median_us);
      else
        printf("| %s | %d | %.1f | FAIL %s |\n", kKind[kind], n,
               cp.compile_ms, r.ok ? "(wrong values)" : r.err);
      ttpu_pjrt_exec_destroy(B->c, cp.e);
    }
  }
  free(x);
  free(ref);
  fflush(stdout);
}

/* Table 3: what bounded dynamism does at the PJRT boundary. */
static void probe_bounded(bench* B, int Bk, int D, int n) {
  printf("\n### bounded dynamic dimensions at the PJRT boundary "
         "(B = %d, n = %d, D = %d)\n\n", Bk, n, D);
  printf("| probe | op | result |\n|---|---|---|\n");
  host_inputs in;
  in.q = malloc(sizeof(float) * Q * D);
  in.x = malloc(sizeof(float) * (size_t)Bk * D);
  in.w = malloc(sizeof(float) * (size_t)Bk * D);
  for (int i = 0; i < Q * D; ++i) in.q[i] = rnd();
  for (int i = 0; i < Bk * D; ++i) in.x[i] = rnd();
  for (int i = 0; i < Bk * D; ++i) in.w[i] = rnd();
  double* ref = malloc(sizeof(double) * (size_t)Bk * D + sizeof(double) * D * D);
  static const op_kind kOps[] = {OP_EW, OP_SUM, OP_MEAN, OP_SOFTMAX};
  /* probe 0: a result of bounded type; 1: bounded parameters (the size
   * comes with the buffer), run with a buffer of n rows, then of B rows */
  for (int probe = 0; probe < 2; ++probe) {
    for (size_t oi = 0; oi < sizeof kOps / sizeof kOps[0]; ++oi) {
      op_kind op = kOps[oi];
      if (probe == 0 && !out_has_rows(op)) continue;
      variant v = {probe == 0, probe == 1};
      char* text = gen(op, M_BOUNDED, Bk, D, v);
      const char* what = probe == 0 ? "result of bounded type returned"
                                    : "bounded parameters (no n pack)";
      compiled cp = compile_text(B, text, what);
      free(text);
      if (!cp.ok) {
        printf("| %s | %s | compile fails: %s |\n", what, kOpName[op], cp.err);
        continue;
      }
      reference(op, n, D, in.q, in.x, in.w, ref);
      for (int rows_k = 0; rows_k < (probe == 1 ? 2 : 1); ++rows_k) {
        ttpu_pjrt_buffer* args[4];
        int na = 0;
        int rows = probe == 1 && rows_k == 0 ? n : Bk;
        ttpu_status* s =
            make_args(B, op, &in, n, rows, D, probe == 0, args, &na);
        run_result r;
        memset(&r, 0, sizeof r);
        if (s) {
          short_msg(ttpu_status_message(s), r.err, sizeof r.err);
          ttpu_status_free(s);
        } else {
          g_query_dyn = 1;
          r = run_exec(B, cp.e, args, na, ref, out_elems(op, n, D), 3);
          g_query_dyn = 0;
        }
        free_args(B, args, na);
        char eb[32];
        fmt_err(eb, sizeof eb, &r);
        char inb[48] = "";
        if (probe == 1) snprintf(inb, sizeof inb, "; input buffer of %d rows", rows);
        if (r.ok) {
          char dims[64] = "";
          for (int d = 0; d < r.out_ndim; ++d)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld",
                     d ? "x" : "", (long long)r.out_dims[d]);
          printf("| %s | %s | compiles (%.1f ms)%s: runs; output buffer dims "
                 "%s (%s); max abs err over the first n rows %s |\n", what,
                 kOpName[op], cp.compile_ms, inb, dims, r.dyn, eb);
        } else {
          printf("| %s | %s | compiles (%.1f ms)%s: execute fails: %s |\n",
                 what, kOpName[op], cp.compile_ms, inb, r.err);
        }
      }
      ttpu_pjrt_exec_destroy(B->c, cp.e);
    }
  }
  free(in.q);
  free(in.x);
  free(in.w);
  free(ref);
  fflush(stdout);
}

/* Table 3b: where bounded cumsum goes wrong: all-ones input, D = 4; the
 * first row whose value is not its index + 1. */
static void probe_cumsum(bench* B) {
  static const int kCases[][2] = {{32, 20},   {32, 32},    {128, 100},
                                  {128, 128}, {256, 200},  {256, 256},
                                  {512, 100}, {512, 300},  {1024, 513},
                                  {2048, 1500}};
  const int D = 4;
  printf("\n### bounded cumsum (reduce_window) on the CPU plugin: all-ones "
         "input, D = %d\n\n| B | n | first wrong row (value) |\n"
         "|---:|---:|---|\n", D);
  variant v0 = {0, 0};
  for (size_t c = 0; c < sizeof kCases / sizeof kCases[0]; ++c) {
    int Bk = kCases[c][0], n = kCases[c][1];
    char* text = gen(OP_CUMSUM, M_BOUNDED, Bk, D, v0);
    compiled cp = compile_text(B, text, "cumsum probe");
    free(text);
    if (!cp.ok) {
      printf("| %d | %d | compile fails: %s |\n", Bk, n, cp.err);
      continue;
    }
    host_inputs in;
    in.x = malloc(sizeof(float) * (size_t)Bk * D);
    for (int i = 0; i < Bk * D; ++i) in.x[i] = 1.0f;
    in.q = in.w = in.x;
    ttpu_pjrt_buffer* args[4];
    int na = 0;
    float* h = malloc(sizeof(float) * (size_t)Bk * D);
    ttpu_status* s = make_args(B, OP_CUMSUM, &in, n, Bk, D, 1, args, &na);
    ttpu_pjrt_buffer* out = NULL;
    ttpu_pjrt_event* done = NULL;
    if (!s) s = ttpu_pjrt_execute(B->c, cp.e, 0, args, na, &out, 1, &done);
    if (!s && done) s = ttpu_pjrt_event_await(B->c, done);
    if (done) ttpu_pjrt_event_destroy(B->c, done);
    if (!s) s = ttpu_pjrt_buffer_to_host(B->c, out, h, sizeof(float) * (size_t)Bk * D);
    if (s) {
      char e[200];
      short_msg(ttpu_status_message(s), e, sizeof e);
      printf("| %d | %d | fails: %s |\n", Bk, n, e);
      ttpu_status_free(s);
    } else {
      int bad = -1;
      for (int i = 0; i < n && bad < 0; ++i)
        if (h[i * D] != (float)(i + 1)) bad = i;
      if (bad < 0) printf("| %d | %d | none (correct) |\n", Bk, n);
      else printf("| %d | %d | %d (%g, expected %d) |\n", Bk, n, bad,
                  (double)h[bad * D], bad + 1);
    }
    if (out) ttpu_pjrt_buffer_destroy(B->c, out);
    free_args(B, args, na);
    free(h);
    free(in.x);
    ttpu_pjrt_exec_destroy(B->c, cp.e);
  }
  fflush(stdout);
}

/* Table 4: a growing length n = lo..hi through one op: exact compiles one
 * program per n, pad+mask one for the bucket. Wall time of all compiles
 * and one call per n. */
static void sweep(bench* B, op_kind op, int lo, int hi, int D) {
  int Bk = hi;
  host_inputs in;
  in.q = malloc(sizeof(float) * Q * D);
  in.x = malloc(sizeof(float) * (size_t)Bk * D);
  in.w = malloc(sizeof(float) * (size_t)Bk * D);
  for (int i = 0; i < Q * D; ++i) in.q[i] = rnd();
  for (int i = 0; i < Bk * D; ++i) in.x[i] = rnd();
  for (int i = 0; i < Bk * D; ++i) in.w[i] = rnd();
  printf("\n### sweep: %s, n = %d..%d (%d sizes), D = %d, one call per n\n\n",
         kOpName[op], lo, hi, hi - lo + 1, D);
  printf("| mechanism | programs | compile s | run s | total s |\n");
  printf("|---|---:|---:|---:|---:|\n");
  variant v0 = {0, 0};
  for (int m = 0; m < N_MECH; ++m) {
    double comp = 0, run = 0;
    int progs = 0, fails = 0;
    compiled cp = {0};
    for (int n = lo; n <= hi; ++n) {
      if (m == M_EXACT || n == lo) {
        char* text = gen(op, (mech)m, m == M_EXACT ? n : Bk, D, v0);
        cp = compile_text(B, text, "sweep");
        free(text);
        comp += cp.compile_ms / 1e3;
        ++progs;
        if (!cp.ok) {
          ++fails;
          break;
        }
      }
      ttpu_pjrt_buffer* args[4];
      int na = 0;
      ttpu_status* s = make_args(B, op, &in, n, m == M_EXACT ? n : Bk, D,
                                 m != M_EXACT, args, &na);
      if (s) {
        ttpu_status_free(s);
        ++fails;
      } else {
        double t0 = now_s();
        ttpu_pjrt_buffer* out = NULL;
        ttpu_pjrt_event* done = NULL;
        s = ttpu_pjrt_execute(B->c, cp.e, 0, args, na, &out, 1, &done);
        if (!s && done) s = ttpu_pjrt_event_await(B->c, done);
        run += now_s() - t0;
        if (done) ttpu_pjrt_event_destroy(B->c, done);
        if (out) ttpu_pjrt_buffer_destroy(B->c, out);
        if (s) {
          ttpu_status_free(s);
          ++fails;
        }
      }
      free_args(B, args, na);
      if (m == M_EXACT) ttpu_pjrt_exec_destroy(B->c, cp.e);
    }
    if (m != M_EXACT && cp.ok) ttpu_pjrt_exec_destroy(B->c, cp.e);
    if (fails)
      printf("| %s | %d | FAIL | | |\n", kMechName[m], progs);
    else
      printf("| %s | %d | %.2f | %.3f | %.2f |\n", kMechName[m], progs, comp,
             run, comp + run);
    fflush(stdout);
  }
  free(in.q);
  free(in.x);
  free(in.w);
}

/* Table 5: the same texts compiled for a TPU topology through libtpu. */
static void aot_compiles(bench* B, const char* const* dirs, const char* topo,
                         const bucket_case* bc) {
  printf("\n### libtpu ahead-of-time compile for %s (bucket %d, D = %d)\n\n",
         topo, bc->bucket, bc->D);
  char* path = NULL;
  ttpu_status* s = ttpu_aot_find_compiler(dirs, &path);
  ttpu_aot_compiler* comp = NULL;
  ttpu_aot_target* tg = NULL;
  if (!s) s = ttpu_aot_compiler_load(path, &comp);
  if (!s) s = ttpu_aot_target_create(comp, topo, &tg);
  free(path);
  if (s) {
    printf("libtpu unavailable: %s\n", ttpu_status_message(s));
    ttpu_status_free(s);
    if (comp) ttpu_aot_compiler_unload(comp);
    return;
  }
  printf("target: %s, %s, %d devices\n\n", ttpu_aot_target_device_kind(tg),
         ttpu_aot_target_platform_version(tg), ttpu_aot_target_device_count(tg));
  {
    /* one throwaway compile: the first pays the compiler's start-up */
    variant v0 = {0, 0};
    char* text = gen(OP_EW, M_EXACT, 8, bc->D, v0);
    ttpu_status_free(ttpu_aot_compile(tg, text, strlen(text), 1, 1, NULL));
    free(text);
  }
  printf("| op | program | compile ms | result |\n|---|---|---:|---|\n");
  int n_exact = bc->n[1];
  for (int op = 0; op < N_OPS; ++op) {
    for (int m = 0; m < N_MECH + 2; ++m) {
      /* exact, pad, bounded, bounded returning a bounded value, bounded
       * parameters */
      mech mm = m < N_MECH ? (mech)m : M_BOUNDED;
      variant v = {m == N_MECH, m == N_MECH + 1};
      if (m == N_MECH && !out_has_rows((op_kind)op)) continue;
      int R = mm == M_EXACT ? n_exact : bc->bucket;
      char* text = gen((op_kind)op, mm, R, bc->D, v);
      char label[96];
      snprintf(label, sizeof label, "%s%s%s R=%d", kMechName[mm],
               v.bounded_out ? " (bounded result)" : "",
               v.bounded_in ? " (bounded params)" : "", R);
      ttpu_aot_stats st;
      double t0 = now_s();
      s = ttpu_aot_compile(tg, text, strlen(text), 1, 1, &st);
      double ms = (now_s() - t0) * 1e3;
      if (s) {
        char e[400];
        short_msg(ttpu_status_message(s), e, sizeof e);
        printf("| %s | %s | %.1f | FAIL: %s |\n", kOpName[op], label, ms, e);
        if (B->log)
          fprintf(B->log, "=== libtpu compile failed: %s %s\n%s\n--- program:\n%s\n",
                  kOpName[op], label, ttpu_status_message(s), text);
        ttpu_status_free(s);
      } else {
        printf("| %s | %s | %.1f | ok, temp %lld B, flops %.3g |\n",
               kOpName[op], label, ms, (long long)st.temp_bytes, st.flops);
      }
      free(text);
      fflush(stdout);
    }
  }
  ttpu_aot_target_destroy(tg);
  ttpu_aot_compiler_unload(comp);
}

/* Table 6: bucket ladders (no plugin): the bucket of n under each. */
static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t ladder(int kind, int64_t n) {
  int64_t p = 1;
  switch (kind) {
    case 0: /* powers of two */
      while (p < n) p *= 2;
      return p;
    case 1: /* powers of two, at least 128 (a TPU lane tile) */
      while (p < n) p *= 2;
      return p < 128 ? 128 : p;
    case 2: /* quarter steps between powers of two, multiples of 8 */
      while (p * 2 < n) p *= 2;
      for (int q = 4; q <= 8; ++q) {
        int64_t b = round_up(p * q / 4, 8);
        if (b >= n) return b;
      }
      return round_up(p * 2, 8);
    case 3: /* 1.25x geometric from 128, multiples of 128 */
    default: {
      int64_t b = 128;
      while (b < n) b = round_up(b + b / 4, 128);
      return b;
    }
  }
}

static void ladders(void) {
  static const char* const kName[4] = {
      "powers of two", "powers of two, >= 128", "quarter steps of 2^k (x8)",
      "x1.25 from 128 (x128)"};
  printf("\n### bucket ladders for n = 1..4096 (waste = (B - n) / B)\n\n");
  printf("| ladder | buckets | worst waste n>=128 | mean waste n in "
         "[128, 4096] | programs for generate() 100+400 tokens |\n");
  printf("|---|---:|---:|---:|---:|\n");
  for (int k = 0; k < 4; ++k) {
    int64_t last = -1;
    int buckets = 0, gen = 0;
    double worst = 0, sum = 0;
    int cnt = 0;
    for (int64_t n = 1; n <= 4096; ++n) {
      int64_t b = ladder(k, n);
      if (b != last) ++buckets;
      last = b;
      if (n >= 128) {
        double w = (double)(b - n) / (double)b;
        if (w > worst) worst = w;
        sum += w;
        ++cnt;
      }
    }
    last = -1;
    for (int64_t n = 100; n <= 500; ++n) {
      int64_t b = ladder(k, n);
      if (b != last) ++gen;
      last = b;
    }
    printf("| %s | %d | %.0f%% | %.1f%% | %d |\n", kName[k], buckets,
           worst * 100, sum / cnt * 100, gen);
  }
  printf("\nladder samples:");
  for (int k = 0; k < 4; ++k) {
    printf("\n- %s:", kName[k]);
    int64_t last = -1;
    int shown = 0;
    for (int64_t n = 1; n <= 4096 && shown < 24; ++n) {
      int64_t b = ladder(k, n);
      if (b != last) {
        printf(" %lld", (long long)b);
        ++shown;
      }
      last = b;
    }
  }
  printf("\n");
}

/* ------------------------------------------------------------ main */

static void usage(void) {
  fprintf(stderr,
          "usage: mechanisms [--site DIR] [--reps N] [--opt L] [--no-aot]\n"
          "                  [--no-sweep] [--aot-only] [--mask-i64]\n"
          "                  [--topology T]\n"
          "                  [--log FILE]\n"
          "                  [--dump OP MECH R]\n");
}

int main(int argc, char** argv) {
  const char* site = NULL;
  const char* topo = "v5e:2x2";
  const char* logpath = "mechanisms.log";
  int reps = 200, opt = 2, do_aot = 1, do_sweep = 1, do_cpu = 1;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--site") && i + 1 < argc) site = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--opt") && i + 1 < argc) opt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-aot")) do_aot = 0;
    else if (!strcmp(argv[i], "--no-sweep")) do_sweep = 0;
    else if (!strcmp(argv[i], "--aot-only")) do_cpu = do_sweep = 0;
    else if (!strcmp(argv[i], "--mask-i64")) g_mask_i64 = 1;
    else if (!strcmp(argv[i], "--topology") && i + 1 < argc) topo = argv[++i];
    else if (!strcmp(argv[i], "--log") && i + 1 < argc) logpath = argv[++i];
    else if (!strcmp(argv[i], "--dump") && i + 3 < argc) {
      /* print one program's text and stop */
      int op = atoi(argv[i + 1]), m = atoi(argv[i + 2]), R = atoi(argv[i + 3]);
      variant v = {0, 0};
      if (op < 0 || op >= N_OPS || m < 0 || m >= N_MECH) return 2;
      char* t = gen((op_kind)op, (mech)m, R, 64, v);
      fputs(t, stdout);
      free(t);
      return 0;
    } else {
      usage();
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  const char* dirs[] = {site, NULL};
  char* plugin_path = NULL;
  ttpu_status* s = ttpu_plugin_find(site ? dirs : NULL, &plugin_path);
  ttpu_pjrt_plugin* plugin = NULL;
  if (!s) s = ttpu_pjrt_plugin_load(plugin_path, &plugin);
  bench B;
  memset(&B, 0, sizeof B);
  B.reps = reps;
  B.warm = 10;
  if (!s) s = ttpu_pjrt_client_create(plugin, 1, &B.c);
  if (!s && opt >= 0) s = ttpu_pjrt_client_set_opt_level(B.c, opt);
  if (s) {
    fprintf(stderr, "mechanisms: %s\n", ttpu_status_message(s));
    ttpu_status_free(s);
    return 1;
  }
  B.log = fopen(logpath, "w");
  int major = 0, minor = 0;
  ttpu_pjrt_plugin_version(plugin, &major, &minor);
  printf("# shape-bucket mechanisms\n\nplugin: %s (PJRT %d.%d, platform %s %s), "
         "CPU opt level %d\n", plugin_path, major, minor,
         ttpu_pjrt_client_platform_name(B.c),
         ttpu_pjrt_client_platform_version(B.c), opt);
  const bucket_case cases[2] = {{128, 64, {65, 100, 128}},
                                {1024, 64, {513, 1000, 1024}}};
  if (do_cpu) {
    for (int i = 0; i < 2; ++i) measure_bucket(&B, &cases[i]);
    for (int i = 0; i < 2; ++i) measure_padding(&B, &cases[i]);
    probe_bounded(&B, 128, 64, 100);
    probe_cumsum(&B);
  }
  if (do_sweep) {
    sweep(&B, OP_SOFTMAX, 65, 128, 64);
    sweep(&B, OP_ATTN, 65, 128, 64);
  }
  if (do_aot) aot_compiles(&B, site ? dirs : NULL, topo, &cases[0]);
  ladders();
  if (B.log) fclose(B.log);
  ttpu_pjrt_client_destroy(B.c);
  free(plugin_path);
  /* the plugin stays loaded: plugins cannot be unloaded safely */
  return 0;
}
