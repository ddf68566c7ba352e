/* coll.c - collectives among devices of one runtime (ttpu_coll.h): one
 * replicated StableHLO program per call, launched on every member's device
 * by a single execute.
 *
 * Every member is a device of this process's client, whatever the plugin
 * can do: reaching other processes (the cross_process_collectives
 * capability, ttpu_runtime_caps) would need a multi-process client, which
 * the engine does not create; the distributed backend reads that
 * capability when it picks a group's path. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "ttpu_coll.h"
#include "../exec/internal.h"
#include "../prog/program.h"

/* First key word of every collective program (and of the one-device
 * flattening programs), so they never meet an op's or a window's key. */
#define COLL_TAG (-0x74747075636f6c6cll)
#define FLAT_TAG (-0x74747075666c6174ll)

const char* ttpu_coll_kind_name(ttpu_coll_kind k) {
  switch (k) {
    case TTPU_COLL_ALL_REDUCE: return "all_reduce";
    case TTPU_COLL_BROADCAST: return "broadcast";
    case TTPU_COLL_ALL_GATHER: return "all_gather";
    case TTPU_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case TTPU_COLL_ALL_TO_ALL: return "all_to_all";
    case TTPU_COLL_PERMUTE: return "collective_permute";
    default: return "collective";
  }
}

const char* ttpu_reduce_op_name(ttpu_reduce_op op) {
  switch (op) {
    case TTPU_REDUCE_SUM: return "sum";
    case TTPU_REDUCE_AVG: return "avg";
    case TTPU_REDUCE_PRODUCT: return "product";
    case TTPU_REDUCE_MIN: return "min";
    case TTPU_REDUCE_MAX: return "max";
    case TTPU_REDUCE_PREMUL_SUM: return "premul_sum";
    default: return "?";
  }
}

static int reduces(ttpu_coll_kind k) {
  return k == TTPU_COLL_ALL_REDUCE || k == TTPU_COLL_REDUCE_SCATTER;
}

int64_t ttpu_coll_output_count(const ttpu_coll_call* c) {
  if (!c || c->n_members <= 0 || c->count < 0) return -1;
  switch (c->kind) {
    case TTPU_COLL_ALL_GATHER: return c->count * c->n_members;
    case TTPU_COLL_REDUCE_SCATTER:
      return c->count % c->n_members ? -1 : c->count / c->n_members;
    case TTPU_COLL_ALL_TO_ALL:
      return c->count % c->n_members ? -1 : c->count;
    case TTPU_COLL_ALL_REDUCE:
    case TTPU_COLL_BROADCAST:
    case TTPU_COLL_PERMUTE:
      return c->count;
    default: return -1;
  }
}

/* ------------------------------------------------------------ checks */

static ttpu_status* check_call(const ttpu_runtime* rt, const ttpu_coll_call* c) {
  const char* what = ttpu_coll_kind_name(c->kind);
  if ((int)c->kind < 0 || c->kind >= TTPU_COLL_KIND_COUNT)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "unknown collective %d",
                            (int)c->kind);
  if (c->n_members < 1 || c->n_members > TTPU_MAX_DEVICES || !c->members)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s: %d members; a collective takes 1 to %d, one "
                            "per device", what, c->n_members, TTPU_MAX_DEVICES);
  if ((int)c->dtype < 0 || c->dtype >= TTPU_DTYPE_COUNT)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: invalid dtype %d",
                            what, (int)c->dtype);
  if (c->count < 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: negative count", what);
  int64_t out_count = ttpu_coll_output_count(c);
  if (out_count < 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s: the input's %lld elements do not split evenly "
                            "into %d members' chunks", what,
                            (long long)c->count, c->n_members);
  size_t es = ttpu_dtype_size(c->dtype);
  int seen[TTPU_MAX_DEVICES] = {0};
  for (int i = 0; i < c->n_members; ++i) {
    const ttpu_coll_member* m = &c->members[i];
    if (!m->input || !m->output)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: member %d has no input or output storage",
                              what, i);
    if (m->input->rt != rt || m->output->rt != rt)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: member %d belongs to another runtime", what,
                              i);
    int dev = m->input->device;
    if (m->output->device != dev)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: member %d's input is on tpu:%d but its "
                              "output on tpu:%d", what, i, dev,
                              m->output->device);
    if (dev < 0 || dev >= ttpu_runtime_device_count(rt))
      return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: invalid device tpu:%d",
                              what, dev);
    if (seen[dev])
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: two members on tpu:%d; each member needs "
                              "its own device", what, dev);
    seen[dev] = 1;
    if (m->input->nbytes != (size_t)c->count * es)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: member %d's input holds %zu bytes, not %lld "
                              "%s elements", what, i, m->input->nbytes,
                              (long long)c->count, ttpu_dtype_name(c->dtype));
    if (m->output == m->input && out_count != c->count)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: member %d's output cannot be its input "
                              "(the sizes differ)", what, i);
    if (m->output->nbytes != (size_t)out_count * es)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "%s: member %d's output holds %zu bytes, not %lld "
                              "%s elements", what, i, m->output->nbytes,
                              (long long)out_count, ttpu_dtype_name(c->dtype));
  }
  if (c->kind == TTPU_COLL_BROADCAST &&
      (c->root < 0 || c->root >= c->n_members))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "broadcast: root %d is not a member (0..%d)",
                            c->root, c->n_members - 1);
  if (c->kind == TTPU_COLL_PERMUTE) {
    if (!c->peer)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "collective_permute: no peers given");
    int target[TTPU_MAX_DEVICES] = {0};
    for (int i = 0; i < c->n_members; ++i) {
      int p = c->peer[i];
      if (p == -1) continue;
      if (p < 0 || p >= c->n_members)
        return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                                "collective_permute: member %d sends to %d, "
                                "not a member (0..%d)", i, p,
                                c->n_members - 1);
      if (target[p]++)
        return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                                "collective_permute: member %d receives from "
                                "two members", p);
    }
  }
  if (reduces(c->kind)) {
    if ((int)c->op < 0 || c->op >= TTPU_REDUCE_OP_COUNT)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT, "%s: unknown reduce op %d",
                              what, (int)c->op);
    if (c->dtype == TTPU_BOOL &&
        (c->op == TTPU_REDUCE_AVG || c->op == TTPU_REDUCE_PREMUL_SUM))
      return ttpu_status_make(TTPU_UNIMPLEMENTED,
                              "%s: %s is not defined for bool", what,
                              ttpu_reduce_op_name(c->op));
  }
  return NULL;
}

/* ------------------------------------------------------------ program text */

typedef struct {
  char* p;
  size_t n, cap;
  int oom;
  int next; /* next SSA value number */
} text;

__attribute__((format(printf, 2, 3)))
static void put(text* t, const char* fmt, ...) {
  if (t->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt,
                      ap);
    va_end(ap);
    if (k < 0) {
      t->oom = 1;
      return;
    }
    if (t->p && t->n + (size_t)k < t->cap) {
      t->n += (size_t)k;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->n + (size_t)k + 1) cap *= 2;
    char* q = realloc(t->p, cap);
    if (!q) {
      t->oom = 1;
      return;
    }
    t->p = q;
    t->cap = cap;
  }
}

/* "tensor<4x8xf32>"; rank 0 is "tensor<f32>". */
typedef struct {
  char s[48 + 24 * TTPU_MAX_DIMS];
} tstr;

static tstr ttype(ttpu_dtype dt, int nd, const int64_t* dims) {
  tstr r;
  size_t k = (size_t)snprintf(r.s, sizeof(r.s), "tensor<");
  for (int d = 0; d < nd; ++d)
    k += (size_t)snprintf(r.s + k, sizeof(r.s) - k, "%lldx", (long long)dims[d]);
  snprintf(r.s + k, sizeof(r.s) - k, "%s>", ttpu_dtype_mlir(dt));
  return r;
}

static tstr tflat(ttpu_dtype dt, int64_t n) { return ttype(dt, 1, &n); }

/* %vK = "stablehlo.<op>"(%vX) : (from) -> to */
static int unary(text* t, const char* op, int x, tstr from, tstr to) {
  int v = t->next++;
  put(t, "    %%v%d = \"stablehlo.%s\"(%%v%d) : (%s) -> %s\n", v, op, x, from.s,
      to.s);
  return v;
}

static int binary(text* t, const char* op, int x, int y, tstr ty) {
  int v = t->next++;
  put(t, "    %%v%d = \"stablehlo.%s\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", v, op,
      x, y, ty.s, ty.s, ty.s);
  return v;
}

/* A splat constant: literal is MLIR's spelling of one element. */
static int splat(text* t, const char* literal, tstr ty) {
  int v = t->next++;
  put(t, "    %%v%d = \"stablehlo.constant\"() {value = dense<%s> : %s} : () "
      "-> %s\n", v, literal, ty.s, ty.s);
  return v;
}

/* The storage value x (dtype pd, dims pdims, nbytes in all) as a flat
 * array of n elements of dt: reshape, and reinterpret the bits where the
 * storage was last written as another dtype. */
static int flatten(text* t, int x, ttpu_dtype pd, int pnd, const int64_t* pdims,
                   size_t nbytes, ttpu_dtype dt, ttpu_status** err) {
  size_t ps = ttpu_dtype_size(pd), es = ttpu_dtype_size(dt);
  int64_t pn = (int64_t)(nbytes / ps), n = (int64_t)(nbytes / es);
  if (!(pnd == 1 && pdims[0] == pn))
    x = unary(t, "reshape", x, ttype(pd, pnd, pdims), tflat(pd, pn));
  if (pd == dt) return x;
  if (pd == TTPU_BOOL || dt == TTPU_BOOL) {
    if (ps == 1 && es == 1) return unary(t, "convert", x, tflat(pd, pn), tflat(dt, n));
    *err = ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "a collective cannot read a %s storage as %s",
                            ttpu_dtype_name(pd), ttpu_dtype_name(dt));
    return x;
  }
  if (ps == es) return unary(t, "bitcast_convert", x, tflat(pd, pn), tflat(dt, n));
  if (ps > es) {
    int64_t d2[2] = {pn, (int64_t)(ps / es)};
    x = unary(t, "bitcast_convert", x, tflat(pd, pn), ttype(dt, 2, d2));
    return unary(t, "reshape", x, ttype(dt, 2, d2), tflat(dt, n));
  }
  int64_t d2[2] = {n, (int64_t)(es / ps)};
  x = unary(t, "reshape", x, tflat(pd, pn), ttype(pd, 2, d2));
  return unary(t, "bitcast_convert", x, ttype(pd, 2, d2), tflat(dt, n));
}

static void module_head(text* t, int replicas, tstr param, int alias,
                        tstr result) {
  put(t, "module @ttpu_coll attributes {mhlo.num_partitions = 1 : i32, "
      "mhlo.num_replicas = %d : i32} {\n", replicas);
  put(t, "  func.func public @main(%%v0: %s%s) -> %s {\n", param.s,
      alias ? " {tf.aliasing_output = 0 : i32}" : "", result.s);
  t->next = 1;
}

static void module_tail(text* t, int v, tstr result) {
  put(t, "    \"func.return\"(%%v%d) : (%s) -> ()\n  }\n}\n", v, result.s);
}

/* dense<[[0, 1, ..., n-1]]> : tensor<1xnxi64> */
static void replica_groups(text* t, int n) {
  put(t, "replica_groups = dense<[[");
  for (int i = 0; i < n; ++i) put(t, i ? ", %d" : "%d", i);
  put(t, "]]> : tensor<1x%dxi64>", n);
}

/* The combiner of a reduction over dt: XLA's CPU collectives recognise
 * add, multiply, minimum and maximum (and/or for bool). */
static const char* combiner(ttpu_reduce_op op, ttpu_dtype dt) {
  int b = dt == TTPU_BOOL;
  switch (op) {
    case TTPU_REDUCE_PRODUCT: return b ? "and" : "multiply";
    case TTPU_REDUCE_MIN: return b ? "and" : "minimum";
    case TTPU_REDUCE_MAX: return b ? "or" : "maximum";
    default: return b ? "or" : "add";
  }
}

/* %v = "stablehlo.<coll>"(%x) ({ combiner region }) {attrs} : (in) -> out */
static int reduction(text* t, const char* coll, int x, const char* combine,
                     ttpu_dtype dt, const char* attrs, int n, tstr in,
                     tstr out) {
  int v = t->next++;
  int a = t->next++, b = t->next++, r = t->next++;
  tstr s = ttype(dt, 0, NULL);
  put(t, "    %%v%d = \"stablehlo.%s\"(%%v%d) ({\n", v, coll, x);
  put(t, "    ^bb0(%%v%d: %s, %%v%d: %s):\n", a, s.s, b, s.s);
  put(t, "      %%v%d = \"stablehlo.%s\"(%%v%d, %%v%d) : (%s, %s) -> %s\n", r,
      combine, a, b, s.s, s.s, s.s);
  put(t, "      \"stablehlo.return\"(%%v%d) : (%s) -> ()\n", r, s.s);
  put(t, "    }) {%s", attrs);
  if (*attrs) put(t, ", ");
  replica_groups(t, n);
  put(t, "} : (%s) -> %s\n", in.s, out.s);
  return v;
}

/* MLIR's spelling of a double as an f64 element: exact hex bits. */
static void f64_literal(char* buf, size_t n, double f) {
  uint64_t bits;
  memcpy(&bits, &f, sizeof(bits));
  snprintf(buf, n, "0x%016llX", (unsigned long long)bits);
}

/* x * premul, with the factor first converted to the dtype and 16-bit
 * floats multiplied in float32 and rounded once, as PyTorch does. */
static int premultiply(text* t, int x, ttpu_dtype dt, int64_t n, double f) {
  tstr ty = tflat(dt, n);
  char lit[40];
  if (ttpu_dtype_is_float(dt)) {
    f64_literal(lit, sizeof(lit), f);
    int c = splat(t, lit, tflat(TTPU_F64, n));
    c = unary(t, "convert", c, tflat(TTPU_F64, n), ty);
    if (ttpu_dtype_size(dt) >= 4) return binary(t, "multiply", x, c, ty);
    tstr wide = tflat(TTPU_F32, n);
    int xw = unary(t, "convert", x, ty, wide);
    int cw = unary(t, "convert", c, ty, wide);
    return unary(t, "convert", binary(t, "multiply", xw, cw, wide), wide, ty);
  }
  snprintf(lit, sizeof(lit), "%lld", (long long)f);
  int c = splat(t, lit, tflat(TTPU_I64, n));
  c = unary(t, "convert", c, tflat(TTPU_I64, n), ty);
  return binary(t, "multiply", x, c, ty);
}

/* The unsigned integer type of dt's width (broadcast moves raw bits). */
static ttpu_dtype bits_type(ttpu_dtype dt) {
  switch (ttpu_dtype_size(dt)) {
    case 1: return TTPU_U8;
    case 2: return TTPU_U16;
    case 4: return TTPU_U32;
    default: return TTPU_U64;
  }
}

/* The signature of one collective program: what its text depends on. */
typedef struct {
  const ttpu_coll_call* c;
  int64_t out_count;
  ttpu_dtype pd; /* the input parameter's type (shared by all replicas) */
  int pnd;
  int64_t pdims[TTPU_MAX_DIMS];
  int in_place;  /* every member writes its input: the result keeps the
                    parameter's type and aliases it */
} coll_sig;

static ttpu_status* coll_text(const coll_sig* g, char** out, size_t* len) {
  const ttpu_coll_call* c = g->c;
  int n = c->n_members;
  ttpu_dtype dt = c->dtype;
  int64_t cnt = c->count, oc = g->out_count;
  size_t es = ttpu_dtype_size(dt);
  tstr param = ttype(g->pd, g->pnd, g->pdims);
  tstr result = g->in_place ? param : tflat(dt, oc);
  tstr in = tflat(dt, cnt), ot = tflat(dt, oc);
  text t = {0};
  ttpu_status* err = NULL;
  module_head(&t, n, param, g->in_place, result);
  int x = flatten(&t, 0, g->pd, g->pnd, g->pdims, (size_t)cnt * es, dt, &err);
  int y = x;
  char attrs[128];
  switch (c->kind) {
    case TTPU_COLL_ALL_REDUCE:
    case TTPU_COLL_REDUCE_SCATTER: {
      if (c->op == TTPU_REDUCE_PREMUL_SUM) x = premultiply(&t, x, dt, cnt, c->premul);
      int rs = c->kind == TTPU_COLL_REDUCE_SCATTER;
      if (rs) snprintf(attrs, sizeof(attrs), "scatter_dimension = 0 : i64");
      else attrs[0] = 0;
      y = reduction(&t, rs ? "reduce_scatter" : "all_reduce", x,
                    combiner(c->op, dt), dt, attrs, n, in, ot);
      if (c->op == TTPU_REDUCE_AVG) {
        char lit[32];
        snprintf(lit, sizeof(lit), "%d", n);
        int k = unary(&t, "convert", splat(&t, lit, tflat(TTPU_I64, oc)),
                      tflat(TTPU_I64, oc), ot);
        y = binary(&t, "divide", y, k, ot);
      }
      break;
    }
    case TTPU_COLL_BROADCAST: {
      /* Every member but the root contributes zero bits; the maximum over
       * unsigned bit patterns is then the root's bits, exactly (a sum
       * would turn -0.0 into 0.0). */
      ttpu_dtype ut = bits_type(dt);
      tstr ub = tflat(ut, cnt);
      int u = unary(&t, dt == TTPU_BOOL ? "convert" : "bitcast_convert", x, in, ub);
      int rid = t.next++;
      put(&t, "    %%v%d = \"stablehlo.replica_id\"() : () -> tensor<ui32>\n", rid);
      char lit[32];
      snprintf(lit, sizeof(lit), "%d", c->root);
      tstr u32 = ttype(TTPU_U32, 0, NULL), b0 = ttype(TTPU_BOOL, 0, NULL);
      int root = splat(&t, lit, u32);
      int is_root = t.next++;
      put(&t, "    %%v%d = \"stablehlo.compare\"(%%v%d, %%v%d) "
          "{comparison_direction = #stablehlo<comparison_direction EQ>} : "
          "(%s, %s) -> %s\n", is_root, rid, root, u32.s, u32.s, b0.s);
      int zero = splat(&t, "0", ub);
      int sel = t.next++;
      put(&t, "    %%v%d = \"stablehlo.select\"(%%v%d, %%v%d, %%v%d) : (%s, %s, "
          "%s) -> %s\n", sel, is_root, u, zero, b0.s, ub.s, ub.s, ub.s);
      int r = reduction(&t, "all_reduce", sel, "maximum", ut, "", n, ub, ub);
      y = unary(&t, dt == TTPU_BOOL ? "convert" : "bitcast_convert", r, ub, ot);
      break;
    }
    case TTPU_COLL_ALL_GATHER:
      y = t.next++;
      put(&t, "    %%v%d = \"stablehlo.all_gather\"(%%v%d) {all_gather_dim = 0 "
          ": i64, ", y, x);
      replica_groups(&t, n);
      put(&t, "} : (%s) -> %s\n", in.s, ot.s);
      break;
    case TTPU_COLL_ALL_TO_ALL:
      y = t.next++;
      put(&t, "    %%v%d = \"stablehlo.all_to_all\"(%%v%d) {concat_dimension = "
          "0 : i64, ", y, x);
      replica_groups(&t, n);
      put(&t, ", split_count = %d : i64, split_dimension = 0 : i64} : (%s) -> "
          "%s\n", n, in.s, ot.s);
      break;
    case TTPU_COLL_PERMUTE: {
      int pairs = 0;
      for (int i = 0; i < n; ++i) pairs += c->peer[i] >= 0;
      if (!pairs) {
        y = splat(&t, dt == TTPU_BOOL ? "false" : ttpu_dtype_is_float(dt) ? "0.0" : "0", ot);
        break;
      }
      /* No channel handle: with one partition the pairs name replicas
       * (a channel id makes the CPU plugin abort on this program). */
      y = t.next++;
      put(&t, "    %%v%d = \"stablehlo.collective_permute\"(%%v%d) "
          "{source_target_pairs = dense<[", y, x);
      int k = 0;
      for (int i = 0; i < n; ++i)
        if (c->peer[i] >= 0) put(&t, k++ ? ", [%d, %d]" : "[%d, %d]", i, c->peer[i]);
      put(&t, "]> : tensor<%dx2xi64>} : (%s) -> %s\n", pairs, in.s, ot.s);
      break;
    }
    default:
      break;
  }
  if (g->in_place && !(g->pnd == 1 && g->pdims[0] == oc))
    y = unary(&t, "reshape", y, ot, result);
  module_tail(&t, y, result);
  if (err || t.oom) {
    free(t.p);
    return err ? err : ttpu_status_oom();
  }
  *out = t.p;
  *len = t.n;
  return NULL;
}

/* ------------------------------------------------------------ programs */

/* The program front door's lowering: the collective's text, made before
 * the program was looked for. */
typedef struct {
  char* text;
  size_t len;
} coll_text_ctx;

static ttpu_status* hand_text(void* ctx, char** text, size_t* len,
                              ttpu_result_plan** results, int* n_results) {
  coll_text_ctx* c = ctx;
  *text = c->text;
  *len = c->len;
  c->text = NULL;
  *results = NULL;
  *n_results = 0;
  return NULL;
}

/* Compiles a collective's text (taken: freed here) through the program
 * front door and caches it under key (under rt->mu). Collective programs
 * are bound to their devices and cheap to compile, so they stay out of the
 * disk cache. */
static ttpu_status* compile_text(ttpu_runtime* rt, int dev, const int64_t* key,
                                 size_t n_key, const char* what, char* text,
                                 size_t len, const void* options,
                                 size_t options_len, const char* dump_name,
                                 ttpu_cache_entry** out) {
  coll_text_ctx tc = {text, len};
  ttpu_prog_request req = {0};
  req.what = what;
  req.n_ops = 1;
  req.reason = "first compile";
  req.lower = hand_text;
  req.ctx = &tc;
  req.options = options;
  req.options_len = options_len;
  req.use_disk = 0;
  req.dump_name = dump_name;
  ttpu_status* s = ttpu_prog_compile(ttpu_rt_prog(rt), dev, key, n_key, &req, out);
  free(tc.text);
  return s;
}

/* Makes storage b (under rt->mu) hold its value as a flat array of n
 * elements of dt: the form every replica's parameter can share. An
 * unwritten storage becomes zeros; another shape runs a one-device
 * reshape/reinterpret program. The value is unchanged. */
static ttpu_status* make_flat(ttpu_runtime* rt, ttpu_buffer* b, ttpu_dtype dt,
                              int64_t n) {
  int dev = b->device;
  if (!b->pb) return ttpu_rt_zero_version(rt, b, dt);
  int64_t key[4 + TTPU_MAX_DIMS];
  size_t nk = 0;
  key[nk++] = FLAT_TAG;
  key[nk++] = b->phys_dtype;
  key[nk++] = dt;
  key[nk++] = b->phys_ndim;
  for (int d = 0; d < b->phys_ndim; ++d) key[nk++] = b->phys_dims[d];
  ttpu_cache_entry* e = ttpu_prog_find(ttpu_rt_prog(rt), dev, key, nk);
  ttpu_status* s = NULL;
  if (!e) {
    text t = {0};
    tstr param = ttype(b->phys_dtype, b->phys_ndim, b->phys_dims);
    tstr res = tflat(dt, n);
    module_head(&t, 1, param, 0, res);
    int v = flatten(&t, 0, b->phys_dtype, b->phys_ndim, b->phys_dims, b->nbytes,
                    dt, &s);
    module_tail(&t, v, res);
    if (!s && t.oom) s = ttpu_status_oom();
    if (s) {
      free(t.p);
      return s;
    }
    s = compile_text(rt, dev, key, nk, "collective input layout", t.p, t.n,
                     NULL, 0, "collective-input-layout", &e);
    if (s) return s;
  }
  ttpu_pjrt_buffer* outv = NULL;
  ttpu_pjrt_event* done = NULL;
  int64_t began = ttpu_rt_trace_clock(rt);
  s = ttpu_pjrt_execute(ttpu_rt_client(rt), e->exec, dev, &b->pb, 1, &outv, 1, &done);
  if (s) return s;
  ttpu_rt_stats(rt, dev)->executions++;
  ttpu_rt_trace_launch(rt, dev, "collective input layout", 1, began, done);
  ttpu_rt_add_pending(rt, dev, e, done);
  ttpu_prog_set_version(ttpu_rt_prog(rt), b, outv, dt, 1, &n);
  return NULL;
}

static int same_phys(const ttpu_buffer* a, const ttpu_buffer* b) {
  if (a->phys_dtype != b->phys_dtype || a->phys_ndim != b->phys_ndim) return 0;
  for (int d = 0; d < a->phys_ndim; ++d)
    if (a->phys_dims[d] != b->phys_dims[d]) return 0;
  return 1;
}

/* Everything but the enqueue: windows run, inputs brought to one shared
 * parameter type, the program found or compiled (under rt->mu). */
static ttpu_status* prepare(ttpu_runtime* rt, const ttpu_coll_call* c,
                            coll_sig* g, ttpu_cache_entry** entry) {
  int n = c->n_members;
  ttpu_status* s = NULL;
  for (int i = 0; i < n && !s; ++i) {
    s = ttpu_exec_touch(rt, c->members[i].input, 0);
    if (!s) s = ttpu_exec_touch(rt, c->members[i].output, 1);
  }
  if (s) return s;
  for (int i = 0; i < n; ++i)
    if (c->members[i].input->pad.mask)
      return ttpu_status_make(
          TTPU_UNIMPLEMENTED,
          "a collective over a tensor whose storage holds a bucket of sizes "
          "(TORCHTPU_BUCKETS): copy it to the CPU first, or "
          "set TORCHTPU_BUCKETS=off");
  /* Replicas share one program, so every input must arrive with the same
   * type; storages written with different shapes are flattened first. */
  int uniform = 1;
  for (int i = 0; i < n; ++i) {
    const ttpu_buffer* b = c->members[i].input;
    if (!b->pb || !same_phys(b, c->members[0].input)) uniform = 0;
  }
  if (!uniform)
    for (int i = 0; i < n && !s; ++i) {
      ttpu_buffer* b = c->members[i].input;
      if (!b->pb || b->phys_dtype != c->dtype || b->phys_ndim != 1)
        s = make_flat(rt, b, c->dtype, c->count);
    }
  if (s) return s;
  const ttpu_buffer* b0 = c->members[0].input;
  g->c = c;
  g->out_count = ttpu_coll_output_count(c);
  g->pd = b0->phys_dtype;
  g->pnd = b0->phys_ndim;
  memcpy(g->pdims, b0->phys_dims, sizeof(g->pdims));
  g->in_place = g->pd == c->dtype;
  for (int i = 0; i < n; ++i)
    if (c->members[i].output != c->members[i].input) g->in_place = 0;

  int64_t key[16 + 2 * TTPU_MAX_DIMS + 2 * TTPU_MAX_DEVICES];
  size_t nk = 0;
  key[nk++] = COLL_TAG;
  key[nk++] = c->kind;
  key[nk++] = c->dtype;
  key[nk++] = n;
  key[nk++] = c->count;
  key[nk++] = reduces(c->kind) ? (int64_t)c->op : -1;
  int64_t fbits = 0;
  if (reduces(c->kind) && c->op == TTPU_REDUCE_PREMUL_SUM)
    memcpy(&fbits, &c->premul, sizeof(fbits));
  key[nk++] = fbits;
  key[nk++] = c->kind == TTPU_COLL_BROADCAST ? c->root : -1;
  key[nk++] = g->in_place;
  key[nk++] = g->pd;
  key[nk++] = g->pnd;
  for (int d = 0; d < g->pnd; ++d) key[nk++] = g->pdims[d];
  int ids[TTPU_MAX_DEVICES];
  for (int i = 0; i < n; ++i) {
    ids[i] = ttpu_pjrt_client_device_id(ttpu_rt_client(rt), c->members[i].input->device);
    key[nk++] = ids[i];
    key[nk++] = c->kind == TTPU_COLL_PERMUTE ? c->peer[i] : 0;
  }
  if ((*entry = ttpu_prog_find(ttpu_rt_prog(rt), b0->device, key, nk))) return NULL;

  char what[96];
  snprintf(what, sizeof(what), "%s%s%s(%s[%lld]) over %d devices",
           ttpu_coll_kind_name(c->kind), reduces(c->kind) ? " " : "",
           reduces(c->kind) ? ttpu_reduce_op_name(c->op) : "",
           ttpu_dtype_mlir(c->dtype), (long long)c->count, n);
  char* prog = NULL;
  size_t len = 0;
  s = coll_text(g, &prog, &len);
  if (s) return ttpu_status_annotate(s, "%s", what);
  unsigned char opts[16 + 12 * TTPU_MAX_DEVICES];
  size_t olen = ttpu_pjrt_replicated_options(ids, n, opts, sizeof(opts));
  if (!olen) {
    free(prog);
    return ttpu_status_make(TTPU_INTERNAL, "compile options do not fit");
  }
  char dump_name[96];
  snprintf(dump_name, sizeof(dump_name), "collective-%s-%d-%lld",
           ttpu_coll_kind_name(c->kind), n, (long long)c->count);
  return compile_text(rt, b0->device, key, nk, what, prog, len, opts, olen,
                      dump_name, entry);
}

ttpu_status* ttpu_coll_run(ttpu_runtime* rt, const ttpu_coll_call* c) {
  if (!rt || !c) return ttpu_status_make(TTPU_INVALID_ARGUMENT, "NULL argument");
  ttpu_status* s = check_call(rt, c);
  if (s) return s;
  int n = c->n_members;
  if (c->count == 0) return NULL; /* nothing moves; every storage is empty */
  ttpu_pjrt_buffer* args[TTPU_MAX_DEVICES];
  ttpu_pjrt_buffer* outs[TTPU_MAX_DEVICES];
  ttpu_pjrt_event* done[TTPU_MAX_DEVICES];
  s = ttpu_rt_enter(rt);
  if (s) return s;
  coll_sig g;
  ttpu_cache_entry* e = NULL;
  int64_t began = 0;
  s = prepare(rt, c, &g, &e);
  if (!s) {
    for (int i = 0; i < n; ++i) args[i] = c->members[i].input->pb;
    began = ttpu_rt_trace_clock(rt);
    s = ttpu_pjrt_execute_replicated(ttpu_rt_client(rt), e->exec, n, args, 1, outs, 1,
                                     done);
    if (s) s = ttpu_status_annotate(s, "running %s", ttpu_coll_kind_name(c->kind));
  }
  if (!s) {
    int64_t oc = g.out_count;
    for (int i = 0; i < n; ++i) {
      int dev = c->members[i].input->device;
      ttpu_rt_stats(rt, dev)->executions++;
      ttpu_rt_trace_launch(rt, dev, ttpu_coll_kind_name(c->kind), 1, began,
                           done[i]);
      ttpu_rt_add_pending(rt, dev, e, done[i]);
      if (g.in_place)
        ttpu_prog_set_version(ttpu_rt_prog(rt), c->members[i].output, outs[i], g.pd, g.pnd, g.pdims);
      else
        ttpu_prog_set_version(ttpu_rt_prog(rt), c->members[i].output, outs[i], c->dtype, 1, &oc);
    }
  }
  ttpu_mode mode = ttpu_rt_mode(rt);
  ttpu_rt_unlock(rt);
  if (!s && mode == TTPU_MODE_DEBUG)
    for (int i = 0; i < n && !s; ++i)
      s = ttpu_runtime_synchronize(rt, c->members[i].input->device);
  return s;
}
