/* segment.c - segment_reduce and _segment_reduce_backward.
 *
 * data is viewed as (O, N, I) around `axis`; lengths (or offsets, which
 * win when both are given, as on CPU) as (O, S) (or (O, S + 1)). Each
 * position p of a row belongs to the segment s whose range holds it: the
 * number of segment ends <= p, from a scatter of ones at the ends and a
 * cumulative sum. The reduction is a scatter into (O * S, I) rows starting
 * from `initial` (or the reduction's identity), so the program depends
 * only on the shapes. Positions outside every segment (unsafe lengths that
 * do not cover the row, offsets not starting at 0) count nowhere.
 *
 * The CPU's semantics are kept: max/min propagate NaN; mean of an empty
 * segment is NaN, or `initial` when given, and otherwise (initial + sum) /
 * length; the backward of max/min gives every element equal to the result
 * (or NaN) the gradient, divided by their count when there are several and
 * the gradient is positive; prod's backward uses the product of the others
 * for zeros and NaNs. Half types accumulate in float32.
 */
#include <math.h>
#include <string.h>

#include "ttpu_lower.h"

#define ERR TTPU_VAL_ERROR

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD } red_kind;

typedef struct {
  int64_t o, n, i, s;   /* outer, axis length, inner, segment count */
  ttpu_dtype dt, acc;   /* data dtype, accumulation dtype */
  red_kind red;
  ttpu_val len;         /* (O, S) i64 segment lengths */
  ttpu_val tgt;         /* (O*N) i64: o*S + segment, or O*S outside */
  ttpu_val valid;       /* (O*N) bool */
  ttpu_val init;        /* 0-d acc: initial or the identity */
  int has_initial;
} seg_plan;

static ttpu_val konst(ttpu_hlo* b, ttpu_dtype dt, int ndim, const int64_t* dims,
                      double f, int64_t i) {
  return ttpu_hlo_const(b, ttpu_type_make(dt, ndim, dims), f, i);
}

static int parse_reduce(ttpu_hlo* b, const char* s, red_kind* r) {
  static const struct { const char* name; red_kind r; } names[] = {
      {"sum", R_SUM}, {"mean", R_MEAN}, {"max", R_MAX}, {"min", R_MIN},
      {"prod", R_PROD}};
  for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); ++k)
    if (!strcmp(s, names[k].name)) {
      *r = names[k].r;
      return 1;
    }
  ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                "reduce argument must be either sum, prod, mean, amax or amin, "
                "got %s", s);
  return 0;
}

/* Sets up p from the call: data at arg 0 of the call's tensor `data_arg`,
 * lengths/offsets/axis/initial at the given args. Returns 0 (with the
 * builder's error set) on bad input. */
static int plan(ttpu_lower* L, int data_arg, int reduce_arg, int lengths_arg,
                int offsets_arg, int axis_arg, int initial_arg, seg_plan* p) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  memset(p, 0, sizeof(*p));
  const ttpu_tensor* dd = ttpu_l_tensor_desc(L, data_arg, -1);
  if (!dd) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "segment_reduce(): data must be a tensor");
    return 0;
  }
  if (!parse_reduce(b, ttpu_l_str(L, reduce_arg, ""), &p->red)) return 0;
  p->dt = dd->dtype;
  if (p->dt != TTPU_F32 && p->dt != TTPU_F64 && p->dt != TTPU_F16 && p->dt != TTPU_BF16) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"segment_reduce\" not implemented for '%s'",
                  ttpu_dtype_torch_title(p->dt));
    return 0;
  }
  p->acc = p->dt == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  int use_off = !ttpu_l_is_none(L, offsets_arg);
  if (!use_off && ttpu_l_is_none(L, lengths_arg)) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "segment_reduce(): Either lengths or offsets must be defined.");
    return 0;
  }
  int la = use_off ? offsets_arg : lengths_arg;
  const ttpu_tensor* ld = ttpu_l_tensor_desc(L, la, -1);
  if (!ld || (ld->dtype != TTPU_I64 && ld->dtype != TTPU_I32)) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"segment_reduce\" not implemented for '%s' %s",
                  ld ? ttpu_dtype_torch_title(ld->dtype) : "?",
                  use_off ? "offsets" : "lengths");
    return 0;
  }
  int nd = dd->ndim;
  int64_t axis = ttpu_l_dim(L, ttpu_l_int(L, axis_arg, 0), nd);
  if (ttpu_hlo_status(b)) return 0;
  if (ld->ndim - 1 != axis) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "segment_reduce(): Expected axis to be the last dimension of "
                  "%s but got %lld.", use_off ? "offsets" : "lengths", (long long)axis);
    return 0;
  }
  int64_t numel = 1;
  p->o = 1;
  p->i = 1;
  for (int d = 0; d < nd; ++d) {
    numel *= dd->sizes[d];
    if (d < axis) p->o *= dd->sizes[d];
    if (d > axis) p->i *= dd->sizes[d];
  }
  if (numel == 0) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "segment_reduce(): Expected data.numel() > 0");
    return 0;
  }
  p->n = dd->sizes[axis];
  int64_t lo = 1;
  for (int d = 0; d < ld->ndim - 1; ++d) lo *= ld->sizes[d];
  int64_t last = ld->sizes[ld->ndim - 1];
  p->s = use_off ? last - 1 : last;
  if (lo != p->o || p->s < 0) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                  "segment_reduce(): %s must have data's sizes before axis",
                  use_off ? "offsets" : "lengths");
    return 0;
  }

  int64_t os[2] = {p->o, p->s};
  ttpu_val lv = ttpu_hlo_convert(b, ttpu_l_tensor(L, la), TTPU_I64);
  ttpu_val starts, ends;
  if (use_off) {
    int64_t od[2] = {p->o, last};
    lv = ttpu_hlo_reshape(b, lv, 2, od);
    int64_t a0[2] = {0, 0}, a1[2] = {p->o, p->s}, b0[2] = {0, 1}, b1[2] = {p->o, last},
            st[2] = {1, 1};
    starts = ttpu_hlo_slice(b, lv, a0, a1, st);
    ends = ttpu_hlo_slice(b, lv, b0, b1, st);
    p->len = ttpu_hlo_binary(b, TTPU_SUB, ends, starts);
  } else {
    p->len = ttpu_hlo_reshape(b, lv, 2, os);
    ends = ttpu_hlo_cumulative(b, p->len, TTPU_RED_SUM, 1);
    starts = ttpu_hlo_binary(b, TTPU_SUB, ends, p->len);
  }

  /* segment of each position: the count of ends <= p in its row */
  int64_t on = p->o * p->n, on1 = p->o * (p->n + 1);
  ttpu_val seg;
  if (p->s > 0) {
    ttpu_type tos = ttpu_type_make(TTPU_I64, 2, os);
    ttpu_val in = ttpu_hlo_binary(
        b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, ends, ttpu_hlo_const(b, tos, 0, 0)),
        ttpu_hlo_compare(b, TTPU_LE, ends, ttpu_hlo_const(b, tos, 0, p->n)));
    ttpu_val at = ttpu_hlo_binary(
        b, TTPU_ADD, ends,
        ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_iota(b, tos, 0), ttpu_hlo_const(b, tos, 0, p->n + 1)));
    at = ttpu_hlo_select(b, in, at, ttpu_hlo_const(b, tos, 0, on1));
    int64_t os1 = p->o * p->s;
    ttpu_val marks = ttpu_hlo_put(b, konst(b, TTPU_I64, 1, &on1, 0, 0),
                                  ttpu_hlo_reshape(b, at, 1, &os1),
                                  konst(b, TTPU_I64, 1, &os1, 0, 1), TTPU_ADD);
    int64_t rd[2] = {p->o, p->n + 1}, z[2] = {0, 0}, e[2] = {p->o, p->n}, st[2] = {1, 1};
    marks = ttpu_hlo_reshape(b, marks, 2, rd);
    seg = ttpu_hlo_slice(b, ttpu_hlo_cumulative(b, marks, TTPU_RED_SUM, 1), z, e, st);
  } else {
    int64_t e[2] = {p->o, p->n};
    seg = konst(b, TTPU_I64, 2, e, 0, 0);
  }
  int64_t e[2] = {p->o, p->n};
  ttpu_type ton = ttpu_type_make(TTPU_I64, 2, e);
  ttpu_val valid = ttpu_hlo_compare(b, TTPU_LT, seg, ttpu_hlo_const(b, ton, 0, p->s));
  if (p->s > 0) {
    int64_t z[2] = {0, 0}, f[2] = {p->o, 1}, st[2] = {1, 1}, m0 = 0;
    ttpu_val first = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, starts, z, f, st), 1, &p->o);
    first = ttpu_hlo_broadcast_in_dim(b, first, ton, &m0);
    valid = ttpu_hlo_binary(b, TTPU_AND, valid,
                            ttpu_hlo_compare(b, TTPU_GE, ttpu_hlo_iota(b, ton, 1), first));
  }
  ttpu_val tgt = ttpu_hlo_binary(
      b, TTPU_ADD, seg,
      ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_iota(b, ton, 0), ttpu_hlo_const(b, ton, 0, p->s)));
  tgt = ttpu_hlo_select(b, valid, tgt, ttpu_hlo_const(b, ton, 0, p->o * p->s));
  p->tgt = ttpu_hlo_reshape(b, tgt, 1, &on);
  p->valid = ttpu_hlo_reshape(b, valid, 1, &on);

  p->has_initial = !ttpu_l_is_none(L, initial_arg);
  if (p->has_initial) {
    /* CPU converts initial to the data's dtype first */
    p->init = ttpu_hlo_convert(b, ttpu_l_scalar(L, initial_arg, p->dt), p->acc);
  } else {
    double v = p->red == R_MAX ? -INFINITY : p->red == R_MIN ? INFINITY
               : p->red == R_PROD ? 1.0 : 0.0;
    p->init = ttpu_hlo_const_f(b, p->acc, v);
  }
  return !ttpu_hlo_status(b);
}

/* v (O*S) broadcast to (O*S, I) */
static ttpu_val per_seg(ttpu_hlo* b, ttpu_val v, const seg_plan* p) {
  const ttpu_type* t = ttpu_hlo_type(b, v);
  if (!t) return ERR;
  int64_t d[2] = {p->o * p->s, p->i}, map = 0, os = p->o * p->s;
  ttpu_dtype dt = t->dtype;
  v = ttpu_hlo_reshape(b, v, 1, &os);
  return ttpu_hlo_broadcast_in_dim(b, v, ttpu_type_make(dt, 2, d), &map);
}

/* v (O*N) broadcast to (O*N, I) */
static ttpu_val per_pos(ttpu_hlo* b, ttpu_val v, const seg_plan* p) {
  const ttpu_type* t = ttpu_hlo_type(b, v);
  if (!t) return ERR;
  int64_t d[2] = {p->o * p->n, p->i}, map = 0;
  return ttpu_hlo_broadcast_in_dim(b, v, ttpu_type_make(t->dtype, 2, d), &map);
}

/* The values of x (O*S, I) at each position's segment: (O*N, I), junk
 * where !valid. */
static ttpu_val at_pos(ttpu_hlo* b, ttpu_val x, const seg_plan* p) {
  ttpu_val c = ttpu_hlo_clamp(b, ttpu_hlo_const_i(b, TTPU_I64, 0), p->tgt,
                              ttpu_hlo_const_i(b, TTPU_I64, p->o * p->s - 1));
  return ttpu_l_gather_dim(b, x, 0, c);
}

/* Scatter-combines upd (O*N, I) into a (O*S, I) value starting at init. */
static ttpu_val reduce_into(ttpu_hlo* b, ttpu_val init, ttpu_val upd, int combine,
                            const seg_plan* p) {
  return ttpu_l_scatter_dim(b, init, 0, p->tgt, upd, combine);
}

static ttpu_val data_rows(ttpu_lower* L, int arg, const seg_plan* p) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int64_t d[2] = {p->o * p->n, p->i};
  return ttpu_hlo_reshape(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, arg), p->acc), 2, d);
}

/* The data-dependent checks on the lengths / offsets. */
static void length_check(ttpu_lower* L, const seg_plan* p, int lengths_given, int unsafe) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (p->s == 0) return;
  int64_t all[2] = {0, 1}, one = 1;
  ttpu_val minlen = ttpu_hlo_reduce(b, p->len, TTPU_RED_MIN, all, 2);
  ttpu_val neg = ttpu_hlo_compare(b, TTPU_LT, minlen, ttpu_hlo_const_i(b, TTPU_I64, 0));
  ttpu_val flag = neg, a = minlen, c = ttpu_hlo_const_i(b, TTPU_I64, p->n);
  const char* fmt = "Expected segment_length >= 0 to be true, but got false "
                    "(a segment length is %lld).";
  if (lengths_given && !unsafe) {
    ttpu_val sums = ttpu_hlo_reduce(b, p->len, TTPU_RED_SUM, all + 1, 1);
    ttpu_val off = ttpu_hlo_compare(b, TTPU_NE, sums, konst(b, TTPU_I64, 1, &p->o, 0, p->n));
    int64_t z = 0;
    ttpu_val any = ttpu_hlo_reduce(b, off, TTPU_RED_OR, &z, 1);
    flag = ttpu_hlo_binary(b, TTPU_OR, neg, any);
    fmt = "segment_reduce(): lengths contains negative value (smallest %lld) or "
          "a row of lengths along axis does not sum to data.size(axis) = "
          "%lld when !unsafe.";
    a = minlen;
  }
  ttpu_val parts[4] = {ttpu_hlo_convert(b, flag, TTPU_I64), a, c, c};
  for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
  ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_INVALID_ARGUMENT, fmt);
}

/* segment_reduce(Tensor data, str reduce, *, Tensor? lengths=None,
 * Tensor? indices=None, Tensor? offsets=None, int axis=0,
 * bool unsafe=False, Scalar? initial=None) */
static ttpu_status* lower_segment_reduce(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  if (!ttpu_l_is_none(L, 3))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "segment_reduce(): indices based reduction is not "
                            "supported yet.");
  seg_plan p;
  if (!plan(L, 0, 1, 2, 4, 5, 7, &p)) return NULL;
  length_check(L, &p, ttpu_l_is_none(L, 4), ttpu_l_bool(L, 6, 0));
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t sd[2] = {p.o * p.s, p.i};
  if (p.o * p.s * p.i == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  ttpu_val init = ttpu_hlo_broadcast_to(b, p.init, 2, sd);
  ttpu_val r = init;
  if (p.n > 0 && p.i > 0) {
    ttpu_val x = data_rows(L, 0, &p);
    int comb = p.red == R_MAX ? TTPU_MAX : p.red == R_MIN ? TTPU_MIN
               : p.red == R_PROD ? TTPU_MUL : TTPU_ADD;
    if (p.red == R_MAX || p.red == R_MIN) {
      /* a NaN anywhere in a segment is its result (as on CPU); the
       * scatter's combiner need not propagate it, so it is counted apart */
      int64_t nd[2] = {p.o * p.n, p.i};
      ttpu_val nan = ttpu_hlo_compare(b, TTPU_NE, x, x);
      x = ttpu_hlo_select(b, nan, konst(b, p.acc, 2, nd, p.red == R_MAX ? -INFINITY : INFINITY, 0), x);
      ttpu_val cnt = reduce_into(b, konst(b, p.acc, 2, sd, 0, 0), ttpu_hlo_convert(b, nan, p.acc),
                                 TTPU_ADD, &p);
      r = reduce_into(b, init, x, comb, &p);
      r = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, cnt, konst(b, p.acc, 2, sd, 0, 0)),
                          konst(b, p.acc, 2, sd, NAN, 0), r);
    } else {
      r = reduce_into(b, init, x, comb, &p);
    }
  }
  if (p.red == R_MEAN) {
    ttpu_val len = per_seg(b, p.len, &p);
    ttpu_type tl = ttpu_l_type(L, len);
    ttpu_val pos = ttpu_hlo_compare(b, TTPU_GT, len, ttpu_hlo_const(b, tl, 0, 0));
    ttpu_val q = ttpu_hlo_binary(b, TTPU_DIV, r, ttpu_hlo_convert(b, len, p.acc));
    ttpu_val empty = p.has_initial ? r : konst(b, p.acc, 2, sd, NAN, 0);
    r = ttpu_hlo_select(b, pos, q, empty);
  }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_convert(b, r, ot.dtype), ot));
  return NULL;
}

/* _segment_reduce_backward(Tensor grad, Tensor output, Tensor data,
 * str reduce, *, Tensor? lengths=None, Tensor? offsets=None, int axis=0,
 * Scalar? initial=None) */
static ttpu_status* lower_segment_reduce_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  seg_plan p;
  if (!plan(L, 2, 3, 4, 5, 6, 7, &p)) return NULL;
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t on = p.o * p.n, nd[2] = {on, p.i}, sd[2] = {p.o * p.s, p.i};
  if (on * p.i == 0 || p.o * p.s == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  ttpu_val g = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), p.acc), 2, sd);
  ttpu_val zero = konst(b, p.acc, 2, nd, 0, 0);
  ttpu_val valid = per_pos(b, p.valid, &p);
  ttpu_val gi;
  if (p.red == R_SUM) {
    gi = at_pos(b, g, &p);
  } else if (p.red == R_MEAN) {
    gi = at_pos(b, ttpu_hlo_binary(b, TTPU_DIV, g,
                                   ttpu_hlo_convert(b, per_seg(b, p.len, &p), p.acc)), &p);
  } else {
    ttpu_val x = data_rows(L, 2, &p);
    ttpu_val out = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), p.acc), 2, sd);
    ttpu_val go = at_pos(b, g, &p), oo = at_pos(b, out, &p);
    ttpu_val nan = ttpu_hlo_compare(b, TTPU_NE, x, x);
    if (p.red == R_MAX || p.red == R_MIN) {
      ttpu_val match = ttpu_hlo_binary(
          b, TTPU_AND, valid,
          ttpu_hlo_binary(b, TTPU_OR, nan, ttpu_hlo_compare(b, TTPU_EQ, x, oo)));
      ttpu_val one = ttpu_hlo_convert(b, match, p.acc);
      ttpu_val cnt = at_pos(b, reduce_into(b, konst(b, p.acc, 2, sd, 0, 0), one, TTPU_ADD, &p), &p);
      gi = ttpu_hlo_select(b, match, go, zero);
      ttpu_val split = ttpu_hlo_binary(
          b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GE, cnt, konst(b, p.acc, 2, nd, 2, 2)),
          ttpu_hlo_compare(b, TTPU_GT, gi, zero));
      gi = ttpu_hlo_select(b, split, ttpu_hlo_binary(b, TTPU_DIV, gi, cnt), gi);
    } else { /* prod */
      ttpu_val z = ttpu_hlo_compare(b, TTPU_EQ, x, zero);
      ttpu_val special = ttpu_hlo_binary(b, TTPU_OR, z, nan);
      ttpu_val onev = konst(b, p.acc, 2, nd, 1, 1);
      ttpu_val xr = ttpu_hlo_select(b, special, onev, x);
      ttpu_val pnz = at_pos(b, reduce_into(b, konst(b, p.acc, 2, sd, 1, 1), xr, TTPU_MUL, &p), &p);
      ttpu_val zf = ttpu_hlo_convert(b, z, p.acc), nf = ttpu_hlo_convert(b, nan, p.acc);
      ttpu_val zs = at_pos(b, reduce_into(b, konst(b, p.acc, 2, sd, 0, 0), zf, TTPU_ADD, &p), &p);
      ttpu_val ns = at_pos(b, reduce_into(b, konst(b, p.acc, 2, sd, 0, 0), nf, TTPU_ADD, &p), &p);
      ttpu_val oz = ttpu_hlo_compare(b, TTPU_GT, ttpu_hlo_binary(b, TTPU_SUB, zs, zf), zero);
      ttpu_val on_ = ttpu_hlo_compare(b, TTPU_GT, ttpu_hlo_binary(b, TTPU_SUB, ns, nf), zero);
      ttpu_val factor = ttpu_hlo_select(b, on_, konst(b, p.acc, 2, nd, NAN, 0),
                                        ttpu_hlo_select(b, oz, zero, onev));
      ttpu_val init = ttpu_hlo_broadcast_to(b, p.has_initial ? p.init : ttpu_hlo_const_f(b, p.acc, 1), 2, nd);
      ttpu_val excl = ttpu_hlo_binary(b, TTPU_MUL, ttpu_hlo_binary(b, TTPU_MUL, init, pnz), factor);
      ttpu_val plain = ttpu_hlo_binary(b, TTPU_DIV, ttpu_hlo_binary(b, TTPU_MUL, go, oo), x);
      gi = ttpu_hlo_select(b, special, ttpu_hlo_binary(b, TTPU_MUL, go, excl), plain);
    }
  }
  gi = ttpu_hlo_select(b, valid, gi, zero);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_convert(b, gi, ot.dtype), ot));
  return NULL;
}

const ttpu_op_def ttpu_ops_segment[] = {
    {"segment_reduce", lower_segment_reduce, .flags = 0},
    {"_segment_reduce_backward", lower_segment_reduce_backward, .flags = 0},
    {0},
};
