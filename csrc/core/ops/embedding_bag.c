/* embedding_bag.c - embedding bags: _embedding_bag(_forward_only) and the
 * dense backward ops autograd reaches (_embedding_bag_backward,
 * _embedding_bag_dense_backward, _embedding_bag_per_sample_weights_backward).
 *
 * A bag is a run of indices starting at an offset; the ATen ops always see
 * 1-d indices (the functional form flattens 2-d input into bags of equal
 * length). Every index's bag comes from the offsets the way the CPU kernel
 * builds offset2bag: ones added at each offset, a cumulative sum, minus
 * one. The reduction is then a scatter into the bag rows, so nothing has a
 * data-dependent shape and the program depends only on the shapes.
 *
 * The auxiliary outputs carry what the CPU kernel writes, because the CPU's
 * backward reads them: bag_size is the count of non-padding indices per
 * bag for mean and max (zeros for sum), max_indices the row each maximum
 * came from (max), a copy of bag_size (mean) or zeros (sum). Where the CPU
 * takes its fast path for sum/mean (float/half/bfloat16 weight with unit
 * column stride, no padding_idx, unit-stride per_sample_weights) it reads
 * bags as offset ranges, so with include_last_offset the indices past the
 * last offset count in no bag; elsewhere they join the last bag. Both are
 * followed.
 *
 * Out-of-range indices and offsets that do not start at 0 or run past the
 * input are data: the program computes whether one occurred and the engine
 * raises CPU's RuntimeError after it runs (TORCHTPU_CHECK_INDICES=0 skips
 * the read back). Accumulation is in float32 for half types, rounded once.
 */
#include <math.h>
#include <string.h>

#include "ttpu_lower.h"

#define ERR TTPU_VAL_ERROR

enum { MODE_SUM = 0, MODE_MEAN = 1, MODE_MAX = 2 };

/* float32 -> bfloat16 rounding half away from zero (add half an ulp of
 * the result to the bits, truncate), as the CPU's fast path converts its
 * float32 sums; a plain convert rounds ties to even. */
static ttpu_val bf16_round_half_up(ttpu_hlo* b, ttpu_val x) {
  if (!ttpu_hlo_type(b, x)) return ERR;
  ttpu_type t = *ttpu_hlo_type(b, x);
  t.dtype = TTPU_U32;
  ttpu_val u = ttpu_hlo_bitcast(b, x, t);
  u = ttpu_hlo_binary(b, TTPU_ADD, u, ttpu_hlo_const(b, t, 32768, 32768));
  u = ttpu_hlo_binary(b, TTPU_SHR_L, u, ttpu_hlo_const(b, t, 16, 16));
  ttpu_val h = ttpu_hlo_convert(b, u, TTPU_U16);
  t.dtype = TTPU_BF16;
  return ttpu_hlo_bitcast(b, h, t);
}

/* The CPU's messages, by what is wrong (the check's flag: 1 an index, 2
 * offsets[0], 3 offsets[-1]); an index out of range is worded by the
 * kernel that meets it, the fast sum/mean path's or the general one's. */
#define BAD_OFFSETS                                                            \
  TTPU_CHECK_ALT                                                               \
  "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to " \
  "start from position 0. However, got %lld" TTPU_CHECK_ALT                    \
  "offsets[-1] can not be greater than input's length %lld but got offsets[-1] of %lld"
static const char kBadFast[] =
    "Index %lld of input takes value %lld which is not in the valid range [0, %lld)" BAD_OFFSETS;
static const char kBadSlow[] =
    "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be %lld" BAD_OFFSETS;

/* ------------------------------------------------------------ helpers */

static ttpu_val konst(ttpu_hlo* b, ttpu_dtype dt, int ndim, const int64_t* dims,
                      double f, int64_t i) {
  return ttpu_hlo_const(b, ttpu_type_make(dt, ndim, dims), f, i);
}

static ttpu_val flat_i64(ttpu_lower* L, int arg) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor(L, arg), TTPU_I64);
  ttpu_type t = ttpu_l_type(L, x);
  int64_t n = ttpu_type_numel(&t);
  return ttpu_hlo_reshape(b, x, 1, &n);
}

static int64_t len1(ttpu_lower* L, ttpu_val v) {
  return ttpu_l_type(L, v).dims[0];
}

/* x[lo:hi] of a 1-d value. */
static ttpu_val slice1(ttpu_hlo* b, ttpu_val x, int64_t lo, int64_t hi) {
  int64_t st = 1;
  return ttpu_hlo_slice(b, x, &lo, &hi, &st);
}

/* x[i] of a 1-d value as a 0-d value. */
static ttpu_val elem(ttpu_hlo* b, ttpu_val x, int64_t i) {
  return ttpu_hlo_reshape(b, slice1(b, x, i, i + 1), 0, NULL);
}

/* The bag of each of n indices from the first k offsets (offs, 1-d i64):
 * the number of offsets <= position, minus one. Offsets past n fall out
 * of the scatter and count nowhere, as in the CPU kernel. */
static ttpu_val bag_of(ttpu_hlo* b, ttpu_val offs, int64_t k, int64_t n) {
  int64_t n1 = n + 1;
  ttpu_val marks = konst(b, TTPU_I64, 1, &n1, 0, 0);
  if (k > 0) {
    ttpu_val o = slice1(b, offs, 0, k);
    marks = ttpu_hlo_put(b, marks, o, konst(b, TTPU_I64, 1, &k, 0, 1), TTPU_ADD);
  }
  ttpu_val c = slice1(b, ttpu_hlo_cumulative(b, marks, TTPU_RED_SUM, 0), 0, n);
  return ttpu_hlo_binary(b, TTPU_SUB, c, konst(b, TTPU_I64, 1, &n, 0, 1));
}

/* v (1-d, length n) broadcast along a new trailing dim of size d. */
static ttpu_val cols(ttpu_hlo* b, ttpu_val v, int64_t d) {
  const ttpu_type* t = ttpu_hlo_type(b, v);
  if (!t) return ERR;
  int64_t dims[2] = {t->dims[0], d}, map = 0;
  return ttpu_hlo_broadcast_in_dim(b, v, ttpu_type_make(t->dtype, 2, dims), &map);
}

/* The accumulation dtype of a float dtype. */
static ttpu_dtype acc_of(ttpu_dtype dt) {
  return dt == TTPU_F64 ? TTPU_F64 : TTPU_F32;
}

/* Writes v (any shape that fits) into output k converted to its dtype, or
 * a zero of the output's type when v is ERR. */
static void set_out(ttpu_lower* L, int k, ttpu_val v) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, k);
  if (v == ERR) v = ttpu_hlo_const(b, ot, 0, 0);
  ttpu_l_set_out(L, k, ttpu_hlo_convert(b, ttpu_l_reshape_to(b, v, ot), ot.dtype));
}

/* A 1-d value of length len: v's first min(len, |v|) entries, then zeros. */
static ttpu_val fit1(ttpu_hlo* b, ttpu_val v, int64_t have, int64_t len) {
  if (have == len) return v;
  if (have > len) return slice1(b, v, 0, len);
  int64_t lo = 0, hi = len - have, in = 0;
  const ttpu_type* t = ttpu_hlo_type(b, v);
  if (!t) return ERR;
  return ttpu_hlo_pad(b, v, ttpu_hlo_const(b, ttpu_type_make(t->dtype, 0, NULL), 0, 0),
                      &lo, &hi, &in);
}

/* ------------------------------------------------------------ forward */

/* _embedding_bag(Tensor weight, Tensor indices, Tensor offsets,
 * bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights,
 * bool include_last_offset, int padding_idx) -> (output, offset2bag,
 * bag_size, max_indices); _embedding_bag_forward_only alike. */
static ttpu_status* lower_embedding_bag(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  const ttpu_tensor* wd = ttpu_l_tensor_desc(L, 0, -1);
  const ttpu_tensor* id = ttpu_l_tensor_desc(L, 1, -1);
  const ttpu_tensor* ofd = ttpu_l_tensor_desc(L, 2, -1);
  if (!wd || !id || !ofd)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "embedding_bag: weight, indices and offsets are tensors");
  /* the CPU kernel's checks, in its order */
  if (id->ndim != 1 && id->ndim != 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "input has to be a 1D or 2D Tensor, but got Tensor "
                            "of dimension %d", id->ndim);
  if (id->ndim == 1 && ofd->ndim != 1)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "offsets has to be a 1D Tensor, but got Tensor of "
                            "dimension %d", ofd->ndim);
  if (wd->ndim != 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "weight has to be a 2D Tensor, but got Tensor of "
                            "dimension %d", wd->ndim);
  if (id->ndim != 1)
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "_embedding_bag on tpu takes 1-d indices with "
                            "offsets (nn.functional.embedding_bag flattens "
                            "2-d input itself)");
  int mode = (int)ttpu_l_int(L, 4, MODE_SUM);
  int ilo = ttpu_l_bool(L, 7, 0);
  int64_t pad = ttpu_l_int(L, 8, -1);
  int has_psw = !ttpu_l_is_none(L, 6);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t nb = ot.dims[0], dd = ot.dims[1];
  ttpu_dtype wdt = wd->dtype, acc = acc_of(wdt);

  ttpu_val w = ttpu_l_tensor(L, 0);
  int64_t nv = ttpu_l_type(L, w).dims[0];
  ttpu_val idx = flat_i64(L, 1), offs = flat_i64(L, 2);
  int64_t n = len1(L, idx), m = len1(L, offs);
  int fast = (wdt == TTPU_F32 || wdt == TTPU_F16 || wdt == TTPU_BF16) &&
             (wd->strides[1] == 1) && pad < 0;
  if (fast && has_psw) {
    const ttpu_tensor* pd = ttpu_l_tensor_desc(L, 6, -1);
    fast = pd && pd->strides[0] == 1;
  }

  /* the check, in the CPU's order: offsets[0] == 0, offsets[-1] <= n,
   * then 0 <= idx < nv; its values are each message's, in order */
  if (m > 0 || n > 0) {
    ttpu_val k0 = ttpu_hlo_const_i(b, TTPU_I64, 0);
    ttpu_val kind = k0, a = k0, v = k0, c = k0;
    if (n > 0) {
      int64_t zero = 0;
      ttpu_val bad = ttpu_hlo_binary(
          b, TTPU_OR, ttpu_hlo_compare(b, TTPU_LT, idx, konst(b, TTPU_I64, 1, &n, 0, 0)),
          ttpu_hlo_compare(b, TTPU_GE, idx, konst(b, TTPU_I64, 1, &n, 0, nv)));
      ttpu_val pos = ttpu_hlo_select(b, bad, ttpu_hlo_iota(b, ttpu_type_make(TTPU_I64, 1, &n), 0),
                                     konst(b, TTPU_I64, 1, &n, 0, n));
      ttpu_val first = ttpu_hlo_reduce(b, pos, TTPU_RED_MIN, &zero, 1);
      kind = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_LT, first, ttpu_hlo_const_i(b, TTPU_I64, n)),
                              TTPU_I64);
      int64_t one = 1;
      ttpu_val at = ttpu_hlo_binary(b, TTPU_MIN, first, ttpu_hlo_const_i(b, TTPU_I64, n - 1));
      ttpu_val found = ttpu_hlo_reshape(b, ttpu_hlo_dynamic_slice(b, idx, &at, &one), 0, NULL);
      if (fast && mode != MODE_MAX) {
        a = first;
        v = found;
        c = ttpu_hlo_const_i(b, TTPU_I64, nv);
      } else {
        a = found;
      }
    }
    if (m > 0) {
      ttpu_val o0 = elem(b, offs, 0), ol = elem(b, offs, m - 1);
      ttpu_val bad0 = ttpu_hlo_compare(b, TTPU_NE, o0, k0);
      ttpu_val badl = ttpu_hlo_compare(b, TTPU_GT, ol, ttpu_hlo_const_i(b, TTPU_I64, n));
      kind = ttpu_hlo_select(b, badl, ttpu_hlo_const_i(b, TTPU_I64, 3), kind);
      kind = ttpu_hlo_select(b, bad0, ttpu_hlo_const_i(b, TTPU_I64, 2), kind);
      a = ttpu_hlo_select(b, bad0, o0,
                          ttpu_hlo_select(b, badl, ttpu_hlo_const_i(b, TTPU_I64, n), a));
      v = ttpu_hlo_select(b, badl, ol, v);
    }
    int64_t one = 1;
    ttpu_val parts[4] = {kind, a, v, c};
    for (int i = 0; i < 4; ++i) parts[i] = ttpu_hlo_reshape(b, parts[i], 1, &one);
    ttpu_l_check(L, ttpu_hlo_concat(b, parts, 4, 0), TTPU_INVALID_ARGUMENT,
                 fast && mode != MODE_MAX ? kBadFast : kBadSlow);
  }

  /* bag of each index (offset2bag), from the offsets without the last one
   * when include_last_offset */
  int64_t k = ilo ? (m > 0 ? m - 1 : 0) : m;
  ttpu_val seg = n > 0 ? bag_of(b, offs, k, n) : ERR;

  /* bag sizes: offset differences, the last bag running to the input's end */
  ttpu_val size = ERR;
  if (nb > 0) {
    ttpu_val start = slice1(b, offs, 0, nb);
    ttpu_val next = nb > 1 ? slice1(b, offs, 1, nb) : ERR;
    int64_t one = 1;
    ttpu_val last = konst(b, TTPU_I64, 1, &one, 0, n);
    ttpu_val ends = next == ERR ? last : ttpu_hlo_concat(b, (ttpu_val[]){next, last}, 2, 0);
    size = ttpu_hlo_binary(b, TTPU_SUB, ends, start);
  }

  ttpu_val keep = ERR, segk = ERR, rows = ERR;
  if (n > 0) {
    ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
    keep = konst(b, TTPU_BOOL, 1, &n, 1, 1);
    if (pad >= 0) {
      ttpu_val is_pad = ttpu_hlo_compare(b, TTPU_EQ, idx, ttpu_hlo_const(b, tn, 0, pad));
      keep = ttpu_hlo_unary(b, TTPU_NOT, is_pad);
      if (size != ERR) /* padding leaves the count of its bag */
        size = ttpu_hlo_put(b, size, ttpu_hlo_select(b, is_pad, seg, ttpu_hlo_const(b, tn, 0, nb)),
                            ttpu_hlo_const(b, tn, 0, -1), TTPU_ADD);
    }
    if (nv > 0) {
      ttpu_val ic = ttpu_hlo_clamp(b, ttpu_hlo_const_i(b, TTPU_I64, 0), idx,
                                   ttpu_hlo_const_i(b, TTPU_I64, nv - 1));
      rows = ttpu_l_gather_dim(b, w, 0, ic);
    } else {
      int64_t rd[2] = {n, dd};
      rows = konst(b, wdt, 2, rd, 0, 0);
    }
  }

  ttpu_val out = ERR, maxi = ERR;
  int64_t od[2] = {nb, dd};
  if (mode != MODE_MAX) {
    if (n > 0 && nb > 0) {
      ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
      ttpu_val in_bag = keep;
      if (fast && ilo && m > 0) /* offset ranges: past the last offset is no bag */
        in_bag = ttpu_hlo_binary(
            b, TTPU_AND, in_bag,
            ttpu_hlo_compare(b, TTPU_LT, ttpu_hlo_iota(b, tn, 0),
                             ttpu_hlo_broadcast_to(b, elem(b, offs, m - 1), 1, &n)));
      segk = ttpu_hlo_select(b, in_bag, seg, ttpu_hlo_const(b, tn, 0, nb));
      ttpu_val c = ttpu_hlo_convert(b, rows, acc);
      if (has_psw) {
        ttpu_val p = ttpu_hlo_convert(b, ttpu_hlo_reshape(b, ttpu_l_tensor(L, 6), 1, &n), acc);
        c = ttpu_hlo_binary(b, TTPU_MUL, c, cols(b, p, dd));
      }
      out = ttpu_l_scatter_dim(b, konst(b, acc, 2, od, 0, 0), 0, segk, c, TTPU_ADD);
      out = fast && wdt == TTPU_BF16 ? bf16_round_half_up(b, out) : ttpu_hlo_convert(b, out, wdt);
    } else {
      out = konst(b, wdt, 2, od, 0, 0);
    }
    if (mode == MODE_MEAN && nb > 0) {
      ttpu_val s = ttpu_hlo_binary(b, TTPU_MAX, size, konst(b, TTPU_I64, 1, &nb, 0, 1));
      out = ttpu_hlo_binary(b, TTPU_DIV, out, cols(b, ttpu_hlo_convert(b, s, wdt), dd));
    }
  } else if (n > 0 && nb > 0 && dd > 0) {
    /* CPU: the first index of a bag sets the value, each later one that is
     * strictly greater replaces it; so a NaN wins only in first place, and
     * ties keep the earliest index. */
    ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
    int64_t nd[2] = {n, dd}, nbd = nb * dd;
    ttpu_type tnd = ttpu_type_make(TTPU_I64, 2, nd);
    segk = ttpu_hlo_select(b, keep, seg, ttpu_hlo_const(b, tn, 0, nb));
    ttpu_val nan = ttpu_hlo_compare(b, TTPU_NE, rows, rows);
    ttpu_val neg_inf = konst(b, wdt, 2, nd, -INFINITY, 0);
    ttpu_val v = ttpu_hlo_select(b, nan, neg_inf, rows);
    ttpu_val mx = ttpu_l_scatter_dim(b, konst(b, wdt, 2, od, -INFINITY, 0), 0, segk, v, TTPU_MAX);
    ttpu_val pos = ttpu_hlo_iota(b, tn, 0);
    ttpu_val fpos = ttpu_hlo_put(b, konst(b, TTPU_I64, 1, &nb, 0, n), segk, pos, TTPU_MIN);
    ttpu_val empty = ttpu_hlo_compare(b, TTPU_EQ, fpos, konst(b, TTPU_I64, 1, &nb, 0, n));
    ttpu_val fc = ttpu_hlo_binary(b, TTPU_MIN, fpos, konst(b, TTPU_I64, 1, &nb, 0, n - 1));
    ttpu_val fv = ttpu_l_gather_dim(b, rows, 0, fc);
    ttpu_val fidx = ttpu_hlo_take(b, idx, fc);
    ttpu_val fnan = ttpu_hlo_compare(b, TTPU_NE, fv, fv);
    /* the earliest position holding the maximum, per (bag, column) */
    ttpu_val flat = ttpu_hlo_binary(b, TTPU_ADD,
                                    ttpu_hlo_binary(b, TTPU_MUL, cols(b, segk, dd),
                                                    ttpu_hlo_const(b, tnd, 0, dd)),
                                    ttpu_hlo_iota(b, tnd, 1));
    ttpu_val mxf = ttpu_hlo_reshape(b, mx, 1, &nbd);
    ttpu_val flat_c = ttpu_hlo_binary(b, TTPU_MIN, flat, ttpu_hlo_const(b, tnd, 0, nbd - 1));
    ttpu_val hit = ttpu_hlo_binary(
        b, TTPU_AND, ttpu_hlo_compare(b, TTPU_EQ, rows, ttpu_hlo_take(b, mxf, flat_c)),
        cols(b, keep, dd));
    ttpu_val at = ttpu_hlo_put(b, konst(b, TTPU_I64, 1, &nbd, 0, n - 1),
                               ttpu_hlo_select(b, hit, flat, ttpu_hlo_const(b, tnd, 0, nbd)),
                               cols(b, pos, dd), TTPU_MIN);
    ttpu_val amax = ttpu_hlo_reshape(b, ttpu_hlo_take(b, idx, at), 2, od);
    ttpu_val emp2 = cols(b, empty, dd);
    out = ttpu_hlo_select(b, ttpu_hlo_binary(b, TTPU_AND, fnan, ttpu_hlo_unary(b, TTPU_NOT, emp2)),
                          fv, mx);
    out = ttpu_hlo_select(b, emp2, konst(b, wdt, 2, od, 0, 0), out);
    maxi = ttpu_hlo_select(b, fnan, cols(b, fidx, dd), amax);
    maxi = ttpu_hlo_select(b, emp2, konst(b, TTPU_I64, 2, od, 0, 0), maxi);
  } else {
    out = konst(b, wdt, 2, od, 0, 0);
  }
  set_out(L, 0, out);

  /* offset2bag. The CPU leaves it empty on the sum fast path (its
   * backward rebuilds it); ours marks the indices that are in no bag there
   * with an out-of-range bag, so the backward leaves them out too. */
  ttpu_type t1 = ttpu_l_out_type(L, 1);
  ttpu_val o2b = mode == MODE_SUM && fast && segk != ERR ? segk : seg;
  set_out(L, 1, ttpu_type_numel(&t1) > 0 ? o2b : ERR);

  ttpu_type t2 = ttpu_l_out_type(L, 2);
  ttpu_val bag_size = mode == MODE_SUM || size == ERR ? ERR : fit1(b, size, nb, t2.dims[0]);
  set_out(L, 2, bag_size);
  if (mode == MODE_MAX) {
    set_out(L, 3, maxi);
  } else {
    ttpu_type t3 = ttpu_l_out_type(L, 3);
    set_out(L, 3, bag_size == ERR ? ERR : fit1(b, bag_size, t2.dims[0], t3.dims[0]));
  }
  return NULL;
}

/* ------------------------------------------------------------ backward */

/* The weight gradient (num_weights, D) of grad (B, D) for indices idx (n),
 * their bags seg (n) and bag_size (B), in grad's dtype. */
static ttpu_status* dense_backward(ttpu_lower* L, ttpu_val grad, ttpu_val idx,
                                   ttpu_val seg, ttpu_val bag_size, ttpu_val maxi,
                                   int sgbf, int mode, ttpu_val psw, int64_t pad) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t nw = ot.dims[0], dd = ot.dims[1];
  ttpu_type tg = ttpu_l_type(L, grad);
  int64_t nb = tg.dims[0], n = len1(L, idx);
  ttpu_dtype acc = acc_of(ot.dtype);
  ttpu_val g = ttpu_hlo_convert(b, grad, acc);
  ttpu_val gw = konst(b, acc, 2, ot.dims, 0, 0);
  if (mode == MODE_MAX) {
    /* the gradient of each nonempty bag goes to the rows its maxima came
     * from */
    if (nb > 0 && dd > 0 && nw > 0) {
      int64_t bd[2] = {nb, dd}, nbd = nb * dd, nwd = nw * dd;
      ttpu_type tbd = ttpu_type_make(TTPU_I64, 2, bd);
      ttpu_val mi = ttpu_hlo_convert(b, maxi, TTPU_I64);
      ttpu_val flat = ttpu_hlo_binary(b, TTPU_ADD,
                                      ttpu_hlo_binary(b, TTPU_MUL, mi, ttpu_hlo_const(b, tbd, 0, dd)),
                                      ttpu_hlo_iota(b, tbd, 1));
      /* bag_size may have one entry per offset (include_last_offset) */
      ttpu_val bs = ttpu_hlo_convert(b, bag_size, TTPU_I64);
      bs = fit1(b, bs, ttpu_l_type(L, bs).dims[0], nb);
      ttpu_val live = ttpu_hlo_compare(b, TTPU_NE, bs,
                                       konst(b, TTPU_I64, 1, &nb, 0, 0));
      flat = ttpu_hlo_select(b, cols(b, live, dd), flat, ttpu_hlo_const(b, tbd, 0, nwd));
      ttpu_val r = ttpu_hlo_put(b, konst(b, acc, 1, &nwd, 0, 0),
                                ttpu_hlo_reshape(b, flat, 1, &nbd),
                                ttpu_hlo_reshape(b, g, 1, &nbd), TTPU_ADD);
      gw = ttpu_hlo_reshape(b, r, 2, ot.dims);
    }
    ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, gw, ot.dtype));
    return NULL;
  }
  if (n > 0 && nb > 0 && nw > 0) {
    ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
    ttpu_val sc = ttpu_hlo_clamp(b, ttpu_hlo_const_i(b, TTPU_I64, 0), seg,
                                 ttpu_hlo_const_i(b, TTPU_I64, nb - 1));
    ttpu_val scale = konst(b, TTPU_F64, 1, &n, 1, 1);
    if (psw != ERR)
      scale = ttpu_hlo_convert(b, ttpu_hlo_reshape(b, psw, 1, &n), TTPU_F64);
    if (sgbf) {
      /* The CPU kernel divides the k-th distinct index's gradient by the
       * count of sorted(indices)[k] rather than its own count; matched. */
      ttpu_val ic = ttpu_hlo_clamp(b, ttpu_hlo_const_i(b, TTPU_I64, 0), idx,
                                   ttpu_hlo_const_i(b, TTPU_I64, nw - 1));
      ttpu_val cnt = ttpu_hlo_put(b, konst(b, TTPU_I64, 1, &nw, 0, 0), ic,
                                  ttpu_hlo_const(b, tn, 0, 1), TTPU_ADD);
      ttpu_val present = ttpu_hlo_convert(
          b, ttpu_hlo_compare(b, TTPU_GT, cnt, konst(b, TTPU_I64, 1, &nw, 0, 0)), TTPU_I64);
      ttpu_val rank = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_cumulative(b, present, TTPU_RED_SUM, 0),
                                      present);
      ttpu_val sorted;
      ttpu_hlo_sort(b, ic, NULL, 0, 0, 0, &sorted);
      ttpu_val k = ttpu_hlo_take(b, rank, ic);
      ttpu_val div = ttpu_hlo_take(b, cnt, ttpu_hlo_take(b, sorted, k));
      scale = ttpu_hlo_binary(b, TTPU_DIV, scale, ttpu_hlo_convert(b, div, TTPU_F64));
    }
    if (mode == MODE_MEAN) {
      ttpu_val bs = ttpu_hlo_take(b, ttpu_hlo_convert(b, bag_size, TTPU_I64), sc);
      ttpu_val nz = ttpu_hlo_compare(b, TTPU_NE, bs, ttpu_hlo_const(b, tn, 0, 0));
      scale = ttpu_hlo_select(b, nz, ttpu_hlo_binary(b, TTPU_DIV, scale, ttpu_hlo_convert(b, bs, TTPU_F64)),
                              scale);
    }
    /* CPU scales in the gradient's dtype */
    scale = ttpu_hlo_convert(b, ttpu_hlo_convert(b, scale, ot.dtype), acc);
    ttpu_val rows = ttpu_hlo_binary(b, TTPU_MUL, ttpu_l_gather_dim(b, g, 0, sc), cols(b, scale, dd));
    /* padding and indices in no bag add nothing */
    ttpu_val drop = ttpu_hlo_unary(b, TTPU_NOT, ttpu_hlo_compare(b, TTPU_EQ, seg, sc));
    if (pad >= 0)
      drop = ttpu_hlo_binary(b, TTPU_OR, drop,
                             ttpu_hlo_compare(b, TTPU_EQ, idx, ttpu_hlo_const(b, tn, 0, pad)));
    ttpu_val to = ttpu_hlo_select(b, drop, ttpu_hlo_const(b, tn, 0, nw), idx);
    gw = ttpu_l_scatter_dim(b, gw, 0, to, rows, TTPU_ADD);
  }
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, gw, ot.dtype));
  return NULL;
}

/* offset2bag as given, or from the offsets when the forward left it empty
 * (the sum fast path), as the CPU backward does. */
static ttpu_val seg_arg(ttpu_lower* L, int o2b_arg, ttpu_val offs, int64_t n) {
  ttpu_val o2b = flat_i64(L, o2b_arg);
  if (len1(L, o2b) == n || n == 0) return o2b;
  return bag_of(ttpu_l_hlo(L), offs, len1(L, offs), n);
}

/* _embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets,
 * Tensor offset2bag, Tensor bag_size, Tensor maximum_indices,
 * SymInt num_weights, bool scale_grad_by_freq, int mode, bool sparse,
 * Tensor? per_sample_weights, int padding_idx=-1) */
static ttpu_status* lower_embedding_bag_backward(ttpu_lower* L) {
  if (ttpu_l_bool(L, 9, 0))
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "embedding_bag with sparse=True: sparse gradients "
                            "are not supported on device 'tpu'; use "
                            "sparse=False");
  ttpu_val idx = flat_i64(L, 1), offs = flat_i64(L, 2);
  ttpu_val seg = seg_arg(L, 3, offs, len1(L, idx));
  return dense_backward(L, ttpu_l_tensor(L, 0), idx, seg, ttpu_l_tensor(L, 4),
                        ttpu_l_tensor(L, 5), ttpu_l_bool(L, 7, 0),
                        (int)ttpu_l_int(L, 8, 0),
                        ttpu_l_is_none(L, 10) ? ERR : ttpu_l_tensor(L, 10),
                        ttpu_l_int(L, 11, -1));
}

/* _embedding_bag_dense_backward(Tensor grad, Tensor indices,
 * Tensor offset2bag, Tensor bag_size, Tensor maximum_indices,
 * SymInt num_weights, bool scale_grad_by_freq, int mode,
 * Tensor? per_sample_weights, int padding_idx=-1) */
static ttpu_status* lower_embedding_bag_dense_backward(ttpu_lower* L) {
  ttpu_val idx = flat_i64(L, 1);
  return dense_backward(L, ttpu_l_tensor(L, 0), idx, flat_i64(L, 2),
                        ttpu_l_tensor(L, 3), ttpu_l_tensor(L, 4),
                        ttpu_l_bool(L, 6, 0), (int)ttpu_l_int(L, 7, 0),
                        ttpu_l_is_none(L, 8) ? ERR : ttpu_l_tensor(L, 8),
                        ttpu_l_int(L, 9, -1));
}

/* _embedding_bag_per_sample_weights_backward(Tensor grad, Tensor weight,
 * Tensor indices, Tensor offsets, Tensor offset2bag, int mode,
 * int padding_idx=-1): each sample's gradient is its bag's gradient row
 * dotted with its embedding row (zero for padding). */
static ttpu_status* lower_psw_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val idx = flat_i64(L, 2), offs = flat_i64(L, 3);
  int64_t n = len1(L, idx), pad = ttpu_l_int(L, 6, -1);
  ttpu_val grad = ttpu_l_tensor(L, 0), w = ttpu_l_tensor(L, 1);
  ttpu_type tg = ttpu_l_type(L, grad), tw = ttpu_l_type(L, w);
  int64_t nb = tg.dims[0], nw = tw.dims[0];
  ttpu_dtype acc = acc_of(ot.dtype);
  if (n == 0 || nb == 0 || nw == 0) {
    set_out(L, 0, ERR);
    return NULL;
  }
  ttpu_val seg = seg_arg(L, 4, offs, n);
  ttpu_val sc = ttpu_hlo_clamp(b, ttpu_hlo_const_i(b, TTPU_I64, 0), seg,
                               ttpu_hlo_const_i(b, TTPU_I64, nb - 1));
  ttpu_val ic = ttpu_hlo_clamp(b, ttpu_hlo_const_i(b, TTPU_I64, 0), idx,
                               ttpu_hlo_const_i(b, TTPU_I64, nw - 1));
  ttpu_val gr = ttpu_l_gather_dim(b, ttpu_hlo_convert(b, grad, acc), 0, sc);
  ttpu_val wr = ttpu_l_gather_dim(b, ttpu_hlo_convert(b, w, acc), 0, ic);
  int64_t one = 1;
  ttpu_val dot = ttpu_hlo_reduce(b, ttpu_hlo_binary(b, TTPU_MUL, gr, wr), TTPU_RED_SUM, &one, 1);
  ttpu_val drop = ttpu_hlo_unary(b, TTPU_NOT, ttpu_hlo_compare(b, TTPU_EQ, seg, sc));
  if (pad >= 0) {
    ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
    drop = ttpu_hlo_binary(b, TTPU_OR, drop,
                           ttpu_hlo_compare(b, TTPU_EQ, idx, ttpu_hlo_const(b, tn, 0, pad)));
  }
  dot = ttpu_hlo_select(b, drop, konst(b, acc, 1, &n, 0, 0), dot);
  set_out(L, 0, dot);
  return NULL;
}

const ttpu_op_def ttpu_ops_embedding_bag[] = {
    {"_embedding_bag", lower_embedding_bag, .flags = 0},
    {"_embedding_bag_forward_only", lower_embedding_bag, .flags = 0},
    {"_embedding_bag_backward", lower_embedding_bag_backward, .flags = 0},
    {"_embedding_bag_dense_backward", lower_embedding_bag_dense_backward, .flags = 0},
    {"_embedding_bag_per_sample_weights_backward", lower_psw_backward, .flags = 0},
    {0},
};
