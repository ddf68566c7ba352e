/* ctc.c - the connectionist temporal classification loss: _ctc_loss
 * (negative log likelihood and the log_alpha table) and
 * _ctc_loss_backward, the int-list overloads the composite ctc_loss calls
 * (reductions and zero_infinity's masking of the loss are composite).
 *
 * Both recursions run over time in a stablehlo.while, vectorised over the
 * batch and the extended target l' (blanks between and around the labels,
 * S' = 2 * max_target_length + 1 states). Each step is the CPU kernel's
 * formula term for term: the largest of the (up to) three predecessors is
 * factored out (0 when all are -inf), exp/add/log in the same order, then
 * the emission log-probability is added. Lengths are compile-time ints, so
 * every per-sample limit (input length, 2 * target length) is a constant
 * mask; entries the CPU leaves unwritten (t >= input length, s > 2 L) are
 * -inf here. The gradient's sum over the states that emit each class is a
 * max-shifted sum of exponentials (a product with the one-hot of l'),
 * where the CPU adds them one by one in log space: equal to rounding. */
#include <math.h>
#include <stdlib.h>

#include "ttpu_lower.h"

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_val kc(ttpu_hlo* b, ttpu_type t, double v) {
  return ttpu_hlo_const(b, t, v, (int64_t)v);
}

typedef struct {
  int64_t T, N, C, S;          /* time, batch, classes, extended states */
  const int64_t* il;           /* input lengths (N) */
  const int64_t* tl;           /* target lengths (N) */
  int64_t blank;
  ttpu_dtype dt;
  ttpu_val lpx;                /* (T, N, S) emission log-probs of l'[b, s] */
  ttpu_val step_ok;            /* (N, S) bool: the skip transition allowed */
  ttpu_val valid_s;            /* (N, S) bool: s <= 2 L_b */
  ttpu_val il_v;               /* (N) i64 input lengths */
} ctc;

static ttpu_type t_ns(const ctc* c, ttpu_dtype dt) {
  int64_t d[2] = {c->N, c->S};
  return ttpu_type_make(dt, 2, d);
}

/* x (N, S) moved along s by k: x[s - k] at s, `pad` (0-d) where that
 * falls outside. */
static ttpu_val shift_pad(ttpu_hlo* b, const ctc* c, ttpu_val x, int64_t k, ttpu_val pad) {
  int64_t lo[2] = {0, k > 0 ? k : 0}, hi[2] = {0, k < 0 ? -k : 0}, in[2] = {0, 0};
  ttpu_val p = ttpu_hlo_pad(b, x, pad, lo, hi, in);
  int64_t s0[2] = {0, k < 0 ? -k : 0}, s1[2] = {c->N, (k < 0 ? -k : 0) + c->S}, st[2] = {1, 1};
  return ttpu_hlo_slice(b, p, s0, s1, st);
}

/* log-space values: -inf outside */
static ttpu_val shift(ttpu_hlo* b, const ctc* c, ttpu_val x, int64_t k) {
  return shift_pad(b, c, x, k, ttpu_hlo_const_f(b, c->dt, -INFINITY));
}

/* labels: -1 (no label) outside */
static ttpu_val shift_i(ttpu_hlo* b, const ctc* c, ttpu_val x, int64_t k) {
  return shift_pad(b, c, x, k, ttpu_hlo_const_i(b, TTPU_I64, -1));
}

/* log(exp(x1 - m) + exp(x2 - m) + exp(x3 - m)) + m with m the largest
 * (0 when all are -inf), as the CPU writes it. */
static ttpu_val log_add3(ttpu_hlo* b, ttpu_val x1, ttpu_val x2, ttpu_val x3) {
  ttpu_type t = *ttpu_hlo_type(b, x1);
  ttpu_val m = x1;
  m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, x2, m), x2, m);
  m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_GT, x3, m), x3, m);
  m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, m, kc(b, t, -INFINITY)), kc(b, t, 0), m);
  ttpu_val e = bin(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, x1, m)),
                   ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, x2, m)));
  e = bin(b, TTPU_ADD, e, ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, x3, m)));
  return bin(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_LOG, e), m);
}

/* row t (N, S) of a (T, N, S) value, t a 0-d i64 */
static ttpu_val row(ttpu_hlo* b, const ctc* c, ttpu_val x, ttpu_val t) {
  ttpu_val z = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val st[3] = {t, z, z};
  int64_t sz[3] = {1, c->N, c->S}, d2[2] = {c->N, c->S};
  return ttpu_hlo_reshape(b, ttpu_hlo_dynamic_slice(b, x, st, sz), 2, d2);
}

static ttpu_val put_row(ttpu_hlo* b, const ctc* c, ttpu_val all, ttpu_val r, ttpu_val t) {
  ttpu_val z = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val st[3] = {t, z, z};
  int64_t d3[3] = {1, c->N, c->S};
  return ttpu_hlo_dynamic_update_slice(b, all, ttpu_hlo_reshape(b, r, 3, d3), st);
}

/* (N, S) bool: t < bound_b (bound per sample, `off` added to il) */
static ttpu_val before(ttpu_hlo* b, const ctc* c, ttpu_val t, int64_t off, ttpu_cmp cmp) {
  int64_t n = c->N, zero = 0;
  ttpu_val lim = bin(b, TTPU_ADD, c->il_v, ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &n), 0, off));
  ttpu_val ok = ttpu_hlo_compare(b, cmp, ttpu_hlo_broadcast_to(b, t, 1, &n), lim);
  ttpu_type tb = t_ns(c, TTPU_BOOL);
  return ttpu_hlo_broadcast_in_dim(b, ok, tb, &zero);
}

/* ---- forward: alpha over t = 1 .. T-1; state {t, alpha_{t-1}, table} */
static ttpu_val alpha_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  const ctc* c = ctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0], ttpu_hlo_const_i(b, TTPU_I64, c->T));
}

static void alpha_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const ctc* c = ctx;
  ttpu_type tf = t_ns(c, c->dt);
  ttpu_val prev = st[1], ninf = kc(b, tf, -INFINITY);
  ttpu_val la2 = shift(b, c, prev, 1);
  ttpu_val la3 = ttpu_hlo_select(b, c->step_ok, shift(b, c, prev, 2), ninf);
  ttpu_val a = bin(b, TTPU_ADD, log_add3(b, prev, la2, la3), row(b, c, c->lpx, st[0]));
  ttpu_val live = bin(b, TTPU_AND, c->valid_s, before(b, c, st[0], 0, TTPU_LT));
  a = ttpu_hlo_select(b, live, a, ninf);
  next[0] = bin(b, TTPU_ADD, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = a;
  next[2] = put_row(b, c, st[2], a, st[0]);
}

/* ---- backward: beta over t = T-1 .. 0; state {t, beta_{t+1}, table} */
static ttpu_val beta_cond(ttpu_hlo* b, void* ctx, const ttpu_val* st) {
  (void)ctx;
  return ttpu_hlo_compare(b, TTPU_GE, st[0], ttpu_hlo_const_i(b, TTPU_I64, 0));
}

typedef struct {
  const ctc* c;
  ttpu_val step_ok_b;  /* (N, S): s < 2L - 1 and l'[s + 2] != l'[s] */
  ttpu_val below_top;  /* (N, S): s < 2L */
  ttpu_val start;      /* (N, S): s == 2L or (s == 2L - 1 and L > 0) */
} beta_ctx;

static void beta_body(ttpu_hlo* b, void* ctx, const ttpu_val* st, ttpu_val* next) {
  const beta_ctx* bc = ctx;
  const ctc* c = bc->c;
  ttpu_type tf = t_ns(c, c->dt);
  ttpu_val nxt = st[1], ninf = kc(b, tf, -INFINITY);
  ttpu_val lp = row(b, c, c->lpx, st[0]);
  ttpu_val lb2 = ttpu_hlo_select(b, bc->below_top, shift(b, c, nxt, -1), ninf);
  ttpu_val lb3 = ttpu_hlo_select(b, bc->step_ok_b, shift(b, c, nxt, -2), ninf);
  ttpu_val rec = bin(b, TTPU_ADD, log_add3(b, nxt, lb2, lb3), lp);
  rec = ttpu_hlo_select(b, bin(b, TTPU_AND, c->valid_s, before(b, c, st[0], -1, TTPU_LT)), rec, ninf);
  ttpu_val init = ttpu_hlo_select(b, bc->start, lp, ninf);
  ttpu_val v = ttpu_hlo_select(b, before(b, c, st[0], -1, TTPU_EQ), init, rec);
  next[0] = bin(b, TTPU_SUB, st[0], ttpu_hlo_const_i(b, TTPU_I64, 1));
  next[1] = v;
  next[2] = put_row(b, c, st[2], v, st[0]);
}

/* Reads the shared arguments: log_probs at lp_arg, targets after it, the
 * two length lists, blank at blank_arg. Builds l' (N, S), the emissions
 * and the masks. Returns 0 on a bad call (error set in the builder). */
static int setup(ttpu_lower* L, ctc* c, int lp_arg, int blank_arg, int64_t S, ttpu_val* lprime) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val lp = ttpu_l_tensor(L, lp_arg), tg = ttpu_l_tensor(L, lp_arg + 1);
  ttpu_type tl = ttpu_l_type(L, lp), tt = ttpu_l_type(L, tg);
  int nil = 0, ntl = 0;
  c->il = ttpu_l_ints(L, lp_arg + 2, &nil);
  c->tl = ttpu_l_ints(L, lp_arg + 3, &ntl);
  c->blank = ttpu_l_int(L, blank_arg, 0);
  if (tl.ndim != 3 || nil != tl.dims[1] || ntl != tl.dims[1] || tt.ndim < 1 || tt.ndim > 2) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "ctc_loss: unexpected argument shapes");
    return 0;
  }
  if (tl.dtype != TTPU_F32 && tl.dtype != TTPU_F64) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "\"ctc_loss_cpu\" not implemented for '%s'",
                  ttpu_dtype_torch_title(tl.dtype));
    return 0;
  }
  c->T = tl.dims[0];
  c->N = tl.dims[1];
  c->C = tl.dims[2];
  c->S = S;
  c->dt = tl.dtype;
  int64_t N = c->N;
  if (N > 4096 || S > 1 << 16) {
    ttpu_hlo_fail(b, TTPU_UNIMPLEMENTED, "ctc_loss on tpu: batch or target too long");
    return 0;
  }
  /* flat positions in targets of each odd state's label, -1 elsewhere */
  int64_t* pos = malloc((size_t)(N * S) * sizeof(int64_t));
  int64_t* tlv = malloc((size_t)N * sizeof(int64_t));
  if (!pos || !tlv) {
    free(pos);
    free(tlv);
    ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "ctc_loss: out of memory");
    return 0;
  }
  int64_t total = ttpu_type_numel(&tt), off = 0;
  for (int64_t i = 0; i < N; ++i) {
    int64_t base = tt.ndim == 1 ? off : i * tt.dims[1];
    for (int64_t s = 0; s < S; ++s) {
      int64_t j = (s - 1) / 2;
      int ok = (s & 1) && j < c->tl[i] && base + j < total;
      pos[i * S + s] = ok ? base + j : -1;
    }
    off += c->tl[i];
    tlv[i] = c->tl[i];
  }
  int64_t ns[2] = {N, S}, zero = 0;
  ttpu_type ti = ttpu_type_make(TTPU_I64, 2, ns);
  ttpu_val pv = ttpu_hlo_reshape(b, ttpu_hlo_const_i64s(b, pos, (int)(N * S)), 2, ns);
  ttpu_val tlen = ttpu_hlo_const_i64s(b, tlv, (int)N);
  free(pos);
  for (int64_t i = 0; i < N; ++i) tlv[i] = c->il[i];
  c->il_v = ttpu_hlo_const_i64s(b, tlv, (int)N);
  free(tlv);

  ttpu_val has = ttpu_hlo_compare(b, TTPU_GE, pv, kc(b, ti, 0));
  ttpu_val flat_t = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, tg, TTPU_I64), 1, &total);
  ttpu_val lab = total > 0 ? ttpu_hlo_take(b, flat_t, ttpu_hlo_select(b, has, pv, kc(b, ti, 0)))
                           : kc(b, ti, 0);
  ttpu_val lpr = ttpu_hlo_select(b, has, lab, kc(b, ti, (double)c->blank));
  /* labels outside [0, C) would read elsewhere: clamped (the CPU reads
   * out of bounds there) */
  lpr = ttpu_hlo_clamp(b, kc(b, ti, 0), lpr, kc(b, ti, (double)(c->C - 1)));
  *lprime = lpr;

  /* emissions lpx[t, b, s] = lp[t, b, l'[b, s]] */
  int64_t d3[3] = {c->T, N, S}, m12[2] = {1, 2};
  ttpu_type t3 = ttpu_type_make(TTPU_I64, 3, d3);
  ttpu_val idx = bin(b, TTPU_ADD, bin(b, TTPU_MUL, ttpu_hlo_iota(b, t3, 0), kc(b, t3, (double)(N * c->C))),
                     bin(b, TTPU_MUL, ttpu_hlo_iota(b, t3, 1), kc(b, t3, (double)c->C)));
  idx = bin(b, TTPU_ADD, idx, ttpu_hlo_broadcast_in_dim(b, lpr, t3, m12));
  int64_t all = c->T * N * c->C;
  c->lpx = all > 0 ? ttpu_hlo_take(b, ttpu_hlo_reshape(b, lp, 1, &all), idx)
                   : ttpu_hlo_const(b, ttpu_type_make(c->dt, 3, d3), -INFINITY, 0);

  /* masks over (N, S) */
  ttpu_val s_io = ttpu_hlo_iota(b, ti, 1);
  ttpu_val two_l = ttpu_hlo_broadcast_in_dim(b, bin(b, TTPU_MUL, tlen, ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &N), 2, 2)),
                                             ti, &zero);
  c->valid_s = ttpu_hlo_compare(b, TTPU_LE, s_io, two_l);
  ttpu_val differs = ttpu_hlo_compare(b, TTPU_NE, lpr, shift_i(b, c, lpr, 2));
  c->step_ok = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_GT, s_io, kc(b, ti, 1)), differs);
  return 1;
}

/* nll_b from alpha at t = il_b - 1 (compile-time per sample): -alpha[0]
 * for an empty target, else the CPU's log-add of the last two states;
 * an empty input gives 0 (empty target) or inf. */
static ttpu_val final_nll(ttpu_hlo* b, const ctc* c, ttpu_val table) {
  int64_t N = c->N, S = c->S, all = c->T * N * S;
  int64_t* i1 = malloc((size_t)N * sizeof(int64_t));
  int64_t* i2 = malloc((size_t)N * sizeof(int64_t));
  int64_t* kind = malloc((size_t)N * sizeof(int64_t));
  if (!i1 || !i2 || !kind) {
    free(i1);
    free(i2);
    free(kind);
    return ttpu_hlo_fail(b, TTPU_RESOURCE_EXHAUSTED, "ctc_loss: out of memory");
  }
  for (int64_t i = 0; i < N; ++i) {
    int64_t t = c->il[i] > 0 ? c->il[i] - 1 : 0, L2 = 2 * c->tl[i];
    if (L2 >= S) L2 = S - 1;
    i1[i] = (t * N + i) * S + L2;
    i2[i] = (t * N + i) * S + (L2 > 0 ? L2 - 1 : 0);
    kind[i] = c->il[i] == 0 ? (c->tl[i] == 0 ? 0 : 1) : (c->tl[i] == 0 ? 2 : 3);
  }
  ttpu_type tv = ttpu_type_make(c->dt, 1, &N);
  ttpu_val ninf = kc(b, tv, -INFINITY);
  ttpu_val flat = all > 0 ? ttpu_hlo_reshape(b, table, 1, &all) : TTPU_VAL_ERROR;
  ttpu_val l1 = all > 0 ? ttpu_hlo_take(b, flat, ttpu_hlo_const_i64s(b, i1, (int)N)) : ninf;
  ttpu_val l2 = all > 0 ? ttpu_hlo_take(b, flat, ttpu_hlo_const_i64s(b, i2, (int)N)) : ninf;
  ttpu_val k = ttpu_hlo_const_i64s(b, kind, (int)N);
  free(i1);
  free(i2);
  free(kind);
  ttpu_val m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_LT, l1, l2), l2, l1);
  m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, m, ninf), kc(b, tv, 0), m);
  ttpu_val ll = bin(b, TTPU_ADD,
                    ttpu_hlo_unary(b, TTPU_LOG, bin(b, TTPU_ADD, ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, l1, m)),
                                                   ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, l2, m)))),
                    m);
  ttpu_type tk = ttpu_type_make(TTPU_I64, 1, &N);
  ttpu_val r = ttpu_hlo_unary(b, TTPU_NEG, ll);
  r = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, kc(b, tk, 2)), ttpu_hlo_unary(b, TTPU_NEG, l1), r);
  r = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, kc(b, tk, 1)), kc(b, tv, INFINITY), r);
  return ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, k, kc(b, tk, 0)), kc(b, tv, 0), r);
}

static ttpu_val table_init(ttpu_hlo* b, const ctc* c) {
  int64_t d3[3] = {c->T, c->N, c->S};
  return ttpu_hlo_const(b, ttpu_type_make(c->dt, 3, d3), -INFINITY, 0);
}

/* _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
 * zero_infinity) -> (neg_log_likelihood, log_alpha) */
static ttpu_status* lower_ctc_loss(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type o1 = ttpu_l_out_type(L, 1);
  ctc c;
  ttpu_val lpr;
  if (o1.ndim != 3 || !setup(L, &c, 0, 4, o1.dims[2], &lpr)) return NULL;
  ttpu_val table = table_init(b, &c);
  if (c.T > 0) {
    ttpu_type tf = t_ns(&c, c.dt), ti = t_ns(&c, TTPU_I64);
    int64_t N = c.N, zero = 0;
    ttpu_val s_io = ttpu_hlo_iota(b, ti, 1);
    /* t = 0: states 0 and (if L > 0) 1, for samples with input */
    ttpu_val first = bin(b, TTPU_OR, ttpu_hlo_compare(b, TTPU_EQ, s_io, kc(b, ti, 0)),
                         bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_EQ, s_io, kc(b, ti, 1)), c.valid_s));
    ttpu_val has_in = ttpu_hlo_compare(b, TTPU_GT, c.il_v, ttpu_hlo_const(b, ttpu_type_make(TTPU_I64, 1, &N), 0, 0));
    first = bin(b, TTPU_AND, first, ttpu_hlo_broadcast_in_dim(b, has_in, t_ns(&c, TTPU_BOOL), &zero));
    ttpu_val t0 = ttpu_hlo_const_i(b, TTPU_I64, 0);
    ttpu_val a0 = ttpu_hlo_select(b, first, row(b, &c, c.lpx, t0), kc(b, tf, -INFINITY));
    table = put_row(b, &c, table, a0, t0);
    ttpu_val init[3] = {ttpu_hlo_const_i(b, TTPU_I64, 1), a0, table}, fin[3];
    ttpu_hlo_while(b, init, 3, alpha_cond, alpha_body, &c, fin);
    table = fin[2];
  }
  ttpu_l_set_out(L, 0, final_nll(b, &c, table));
  int64_t perm[3] = {1, 0, 2};
  ttpu_l_set_out(L, 1, ttpu_hlo_transpose(b, table, perm));
  return NULL;
}

/* _ctc_loss_backward(grad, log_probs, targets, input_lengths,
 * target_lengths, neg_log_likelihood, log_alpha, blank, zero_infinity) */
static ttpu_status* lower_ctc_loss_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val la = ttpu_l_tensor(L, 6);
  ttpu_type tla = ttpu_l_type(L, la);
  ttpu_type out = ttpu_l_out_type(L, 0);
  ctc c;
  ttpu_val lpr;
  if (tla.ndim != 3 || !setup(L, &c, 1, 7, tla.dims[2], &lpr)) return NULL;
  if (tla.dims[0] != c.N || tla.dims[1] != c.T) {
    ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT, "ctc_loss_backward: log_alpha has the wrong shape");
    return NULL;
  }
  int zero_inf = ttpu_l_bool(L, 8, 0);
  if (c.T == 0 || c.N == 0 || c.C == 0) {
    ttpu_l_set_out(L, 0, kc(b, out, 0));
    return NULL;
  }
  int64_t N = c.N, S = c.S, T = c.T, C = c.C, zero = 0;
  ttpu_type ti = t_ns(&c, TTPU_I64), tn = ttpu_type_make(TTPU_I64, 1, &N);
  ttpu_val s_io = ttpu_hlo_iota(b, ti, 1);
  ttpu_val tlen = ttpu_hlo_const_i64s(b, c.tl, (int)N);
  ttpu_val two_l = ttpu_hlo_broadcast_in_dim(b, bin(b, TTPU_MUL, tlen, kc(b, tn, 2)), ti, &zero);
  beta_ctx bc;
  bc.c = &c;
  bc.below_top = ttpu_hlo_compare(b, TTPU_LT, s_io, two_l);
  ttpu_val two_l_m1 = bin(b, TTPU_SUB, two_l, kc(b, ti, 1));
  bc.step_ok_b = bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_LT, s_io, two_l_m1),
                     ttpu_hlo_compare(b, TTPU_NE, lpr, shift_i(b, &c, lpr, -2)));
  bc.start = bin(b, TTPU_OR, ttpu_hlo_compare(b, TTPU_EQ, s_io, two_l),
                 bin(b, TTPU_AND, ttpu_hlo_compare(b, TTPU_EQ, s_io, two_l_m1),
                     ttpu_hlo_compare(b, TTPU_GT, two_l, kc(b, ti, 0))));
  ttpu_val init[3] = {ttpu_hlo_const_i(b, TTPU_I64, T - 1), kc(b, t_ns(&c, c.dt), -INFINITY),
                      table_init(b, &c)}, fin[3];
  ttpu_hlo_while(b, init, 3, beta_cond, beta_body, &bc, fin);

  /* alpha + beta over the live states, summed per class */
  int64_t perm[3] = {1, 0, 2}, d3[3] = {T, N, S};
  ttpu_type t3 = ttpu_type_make(c.dt, 3, d3), t3i = ttpu_type_make(TTPU_I64, 3, d3);
  ttpu_val alpha = ttpu_hlo_transpose(b, ttpu_hlo_convert(b, la, c.dt), perm);
  int64_t m1[1] = {1}, m12[2] = {1, 2};
  ttpu_val live = bin(b, TTPU_AND,
                      ttpu_hlo_compare(b, TTPU_LT, ttpu_hlo_iota(b, t3i, 0), ttpu_hlo_broadcast_in_dim(b, c.il_v, t3i, m1)),
                      ttpu_hlo_broadcast_in_dim(b, c.valid_s, ttpu_type_make(TTPU_BOOL, 3, d3), m12));
  ttpu_val ab = ttpu_hlo_select(b, live, bin(b, TTPU_ADD, alpha, fin[2]), kc(b, t3, -INFINITY));
  int64_t last = 2, tn2[2] = {T, N};
  ttpu_type t2 = ttpu_type_make(c.dt, 2, tn2);
  ttpu_val m = ttpu_hlo_reduce(b, ab, TTPU_RED_MAX, &last, 1);
  m = ttpu_hlo_select(b, ttpu_hlo_compare(b, TTPU_EQ, m, kc(b, t2, -INFINITY)), kc(b, t2, 0), m);
  int64_t m01[2] = {0, 1};
  ttpu_val e = ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, ab, ttpu_hlo_broadcast_in_dim(b, m, t3, m01)));
  int64_t dnsc[3] = {N, S, C};
  ttpu_type tnsc = ttpu_type_make(TTPU_I64, 3, dnsc);
  int64_t m01b[2] = {0, 1};
  ttpu_val onehot = ttpu_hlo_convert(b, ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_broadcast_in_dim(b, lpr, tnsc, m01b),
                                                         ttpu_hlo_iota(b, tnsc, 2)),
                                     c.dt);
  int64_t lb = 1, rb = 0, lc = 2, rc = 1;
  ttpu_val sums = ttpu_hlo_dot_general(b, e, onehot, &lb, &rb, 1, &lc, &rc, 1, c.dt, TTPU_PREC_HIGHEST);
  ttpu_val res = ttpu_hlo_transpose(b, ttpu_hlo_unary(b, TTPU_LOG, sums), perm);   /* (T, N, C) */
  int64_t dtnc[3] = {T, N, C};
  ttpu_type tg = ttpu_type_make(c.dt, 3, dtnc), tgi = ttpu_type_make(TTPU_I64, 3, dtnc);
  res = bin(b, TTPU_ADD, res, ttpu_hlo_broadcast_in_dim(b, m, tg, m01));

  ttpu_val lp = ttpu_hlo_convert(b, ttpu_l_tensor(L, 1), c.dt);
  ttpu_val nll = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 5), c.dt), tg, m1);
  ttpu_val gr = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, ttpu_l_tensor(L, 0), c.dt), tg, m1);
  ttpu_val g = bin(b, TTPU_MUL,
                   bin(b, TTPU_SUB, ttpu_hlo_unary(b, TTPU_EXP, lp),
                       ttpu_hlo_unary(b, TTPU_EXP, bin(b, TTPU_SUB, bin(b, TTPU_ADD, res, nll), lp))),
                   gr);
  ttpu_val keep = ttpu_hlo_compare(b, TTPU_LT, ttpu_hlo_iota(b, tgi, 0), ttpu_hlo_broadcast_in_dim(b, c.il_v, tgi, m1));
  if (zero_inf)
    keep = bin(b, TTPU_AND, keep, ttpu_hlo_compare(b, TTPU_NE, nll, kc(b, tg, INFINITY)));
  ttpu_l_set_out(L, 0, ttpu_hlo_select(b, keep, g, kc(b, tg, 0)));
  return NULL;
}

const ttpu_op_def ttpu_ops_ctc[] = {
    {"_ctc_loss", lower_ctc_loss, .flags = 0},
    {"_ctc_loss_backward", lower_ctc_loss_backward, .flags = 0},
    {0},
};
