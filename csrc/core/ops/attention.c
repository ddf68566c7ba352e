/* attention.c - the fused inference kernels of PyTorch's transformer
 * modules: _native_multi_head_attention (nn.MultiheadAttention in eval
 * mode without grad) and _transformer_encoder_layer_fwd
 * (nn.TransformerEncoderLayer's fast path), each one program.
 *
 * Multi-head attention: q, k, v are the in-projections of query, key and
 * value (the three row blocks of qkv_weight / qkv_bias) split into heads;
 * p = softmax(q k^T / sqrt(d)) over the source positions, with the masked
 * ones excluded; the heads of p v are joined and out-projected. A float
 * mask masks where it is nonzero, as the CPU kernel turns it into a bool
 * mask; a row with every position masked is NaN, as on the CPU. The mask
 * broadcasts against the scores (batch, heads, L, S) by mask_type: 1 a
 * key padding mask (batch, S), 0 an attention mask (L, S), 2 a merged
 * (batch, heads or 1, L, S) one; without a mask_type a 2-d mask whose
 * first size is the batch is a key padding mask. The weights (when
 * output 1 is defined) are p, or its mean over the heads.
 *
 * Encoder layer, in the CPU kernel's order: x = src (layer-normed first
 * when norm_first), x = attention(x) + src, layer norm (post-norm), then
 * the feed-forward block linear -> relu or gelu (erf form) -> linear with
 * its residual, and the second layer norm (before the block when
 * norm_first, after it otherwise).
 *
 * Numerics follow the CPU's per-step rounding: products accumulate in f32
 * for bf16/f16 (f64 stays f64) and each step (projection with its bias,
 * scaling, scores, softmax, context, residual add, layer norm,
 * activation) is rounded to the input's dtype before the next reads it.
 *
 * The meta shapes (csrc/torch/aten/meta_shapes.cpp) have checked the
 * arguments' shapes and dtypes before a lowering runs. */
#include <math.h>

#include "elementwise.h"
#include "ttpu_lower.h"

/* The state of one lowering: the builder, the dtype values are rounded to
 * between steps, and the one math runs in. */
typedef struct {
  ttpu_lower* L;
  ttpu_hlo* b;
  ttpu_dtype dt;
  ttpu_dtype acc;
} ctx;

static ctx make_ctx(ttpu_lower* L) {
  ctx c;
  c.L = L;
  c.b = ttpu_l_hlo(L);
  c.dt = ttpu_l_out_type(L, 0).dtype;
  c.acc = c.dt == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  return c;
}

static ttpu_val round_dt(const ctx* c, ttpu_val v) {
  return ttpu_hlo_convert(c->b, ttpu_hlo_convert(c->b, v, c->dt), c->acc);
}

/* A tensor arg in the math dtype, rounded to the values' dtype first (an
 * input of the op's dtype is unchanged by that). */
static ttpu_val arg(const ctx* c, int a) {
  return round_dt(c, ttpu_l_tensor(c->L, a));
}

static ttpu_type type_of(const ctx* c, ttpu_val v) {
  return ttpu_l_type(c->L, v);
}

/* A 1-d vector v (n) added along the last dim of x. */
static ttpu_val add_last(const ctx* c, ttpu_val x, ttpu_val v) {
  ttpu_type t = type_of(c, x);
  int64_t map = t.ndim - 1;
  return ttpu_hlo_binary(c->b, TTPU_ADD, x, ttpu_hlo_broadcast_in_dim(c->b, v, t, &map));
}

/* x (..., in) @ w^T for w (out, in), plus bias (out) unless it is
 * TTPU_VAL_ERROR: one rounding, as addmm. */
static ttpu_val linear(const ctx* c, ttpu_val x, ttpu_val w, ttpu_val bias) {
  ttpu_type t = type_of(c, x);
  const int64_t lc = t.ndim - 1, rc = 1;
  ttpu_val xd = ttpu_hlo_convert(c->b, x, c->dt), wd = ttpu_hlo_convert(c->b, w, c->dt);
  ttpu_val y = ttpu_hlo_dot_general(c->b, xd, wd, NULL, NULL, 0, &lc, &rc, 1, c->acc,
                                    ttpu_l_precision(c->L, c->dt));
  if (bias != TTPU_VAL_ERROR) y = add_last(c, y, bias);
  return round_dt(c, y);
}

/* Rows [k * n, (k + 1) * n) of a 2-d weight, or of a 1-d bias. */
static ttpu_val block(const ctx* c, ttpu_val w, int64_t k, int64_t n) {
  ttpu_type t = type_of(c, w);
  int64_t lo[2] = {k * n, 0}, hi[2] = {(k + 1) * n, t.ndim > 1 ? t.dims[1] : 0},
          st[2] = {1, 1};
  return ttpu_hlo_slice(c->b, w, lo, hi, st);
}

/* The b x len x E projection x split into heads: (b, heads, len, d). */
static ttpu_val heads(const ctx* c, ttpu_val x, int64_t nb, int64_t len, int64_t nh,
                      int64_t d) {
  int64_t dims[4] = {nb, len, nh, d};
  static const int64_t perm[4] = {0, 2, 1, 3};
  return ttpu_hlo_transpose(c->b, ttpu_hlo_reshape(c->b, x, 4, dims), perm);
}

/* dot_general of two (b, heads, ., .) values over batch dims {0, 1},
 * contracting dim lc of x with dim rc of y, rounded. */
static ttpu_val batched(const ctx* c, ttpu_val x, ttpu_val y, int64_t lc, int64_t rc) {
  static const int64_t bd[2] = {0, 1};
  ttpu_val r = ttpu_hlo_dot_general(c->b, ttpu_hlo_convert(c->b, x, c->dt),
                                    ttpu_hlo_convert(c->b, y, c->dt), bd, bd, 2, &lc, &rc,
                                    1, c->acc, ttpu_l_precision(c->L, c->dt));
  return round_dt(c, r);
}

/* The "masked out" bool form of the mask at arg mask_arg (its mask_type
 * at type_arg) broadcast to the scores' type t, or TTPU_VAL_ERROR for
 * none. */
static ttpu_val masked_out(const ctx* c, int mask_arg, int type_arg, ttpu_type t) {
  ttpu_arg_kind k = ttpu_l_kind(c->L, mask_arg);
  ttpu_val m;
  if (k == TTPU_ARG_TENSOR)
    m = ttpu_hlo_convert(c->b, ttpu_l_tensor(c->L, mask_arg), TTPU_BOOL);
  else if (k == TTPU_ARG_SCALAR)
    m = ttpu_l_scalar(c->L, mask_arg, TTPU_BOOL);
  else
    return TTPU_VAL_ERROR;
  ttpu_type tm = type_of(c, m);
  int64_t mask_type = ttpu_l_int(c->L, type_arg, -1);
  if (mask_type < 0) mask_type = tm.ndim == 2 && tm.dims[0] == t.dims[0] ? 1 : 0;
  if (mask_type == 1) {
    if (tm.ndim != 2 || tm.dims[0] != t.dims[0] || tm.dims[1] != t.dims[3])
      return ttpu_hlo_fail(c->b, TTPU_INVALID_ARGUMENT,
                           "key padding mask must be (batch, source length)");
    int64_t dims[4] = {t.dims[0], 1, 1, t.dims[3]};
    m = ttpu_hlo_reshape(c->b, m, 4, dims);
  }
  return ttpu_hlo_broadcast_to(c->b, m, t.ndim, t.dims);
}

/* softmax over the last dim of x (math dtype), rounded. */
static ttpu_val softmax_last(const ctx* c, ttpu_val x) {
  ttpu_type t = type_of(c, x);
  int mask[TTPU_MAX_DIMS] = {0};
  mask[t.ndim - 1] = 1;
  ttpu_val mx = ttpu_l_bcast_back(c->L, ttpu_l_reduce_mask(c->L, x, TTPU_RED_MAX, mask), t, mask);
  ttpu_val e = ttpu_hlo_unary(c->b, TTPU_EXP, ttpu_hlo_binary(c->b, TTPU_SUB, x, mx));
  ttpu_val s = ttpu_l_bcast_back(c->L, ttpu_l_reduce_mask(c->L, e, TTPU_RED_SUM, mask), t, mask);
  return round_dt(c, ttpu_hlo_binary(c->b, TTPU_DIV, e, s));
}

/* Where an attention call keeps its arguments. */
typedef struct {
  int query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
      proj_bias, mask, mask_type;
} mha_args;

/* The attention of query/key/value (b, len, E) values in the math dtype;
 * *weights (when not NULL) receives p (b, heads, L, S), rounded. */
static ttpu_val attention(const ctx* c, const mha_args* a, ttpu_val query, ttpu_val key,
                          ttpu_val value, ttpu_val* weights) {
  const int64_t e = ttpu_l_int(c->L, a->embed_dim, 0);
  const int64_t nh = ttpu_l_int(c->L, a->num_head, 1);
  if (nh <= 0 || e % nh)
    return ttpu_hlo_fail(c->b, TTPU_INVALID_ARGUMENT,
                         "embed_dim %lld must be divisible by num_head %lld", (long long)e,
                         (long long)nh);
  const int64_t d = e / nh;
  ttpu_type tq = type_of(c, query), tk = type_of(c, key);
  if (tq.ndim != 3 || tk.ndim != 3)
    return ttpu_hlo_fail(c->b, TTPU_INVALID_ARGUMENT, "expected 3-d query, key and value");
  const int64_t nb = tq.dims[0], l = tq.dims[1], s = tk.dims[1];
  ttpu_val w = arg(c, a->qkv_weight), bias = arg(c, a->qkv_bias);
  ttpu_val q = linear(c, query, block(c, w, 0, e), block(c, bias, 0, e));
  ttpu_val k = linear(c, key, block(c, w, 1, e), block(c, bias, 1, e));
  ttpu_val v = linear(c, value, block(c, w, 2, e), block(c, bias, 2, e));
  q = heads(c, q, nb, l, nh, d);
  q = round_dt(c, ttpu_hlo_binary(c->b, TTPU_DIV, q, ttpu_l_const_like(c->L, q, sqrt((double)d))));
  k = heads(c, k, nb, s, nh, d);
  v = heads(c, v, nb, s, nh, d);
  ttpu_val scores = batched(c, q, k, 3, 3); /* (b, heads, L, S) */
  ttpu_val masked = masked_out(c, a->mask, a->mask_type, type_of(c, scores));
  if (masked != TTPU_VAL_ERROR)
    scores = ttpu_hlo_select(c->b, masked, ttpu_l_const_like(c->L, scores, -INFINITY), scores);
  ttpu_val p = softmax_last(c, scores);
  if (weights) *weights = p;
  ttpu_val ctx_heads = batched(c, p, v, 3, 2); /* (b, heads, L, d) */
  static const int64_t perm[4] = {0, 2, 1, 3};
  int64_t joined[3] = {nb, l, e};
  ttpu_val attended =
      ttpu_hlo_reshape(c->b, ttpu_hlo_transpose(c->b, ctx_heads, perm), 3, joined);
  return linear(c, attended, arg(c, a->proj_weight), arg(c, a->proj_bias));
}

/* _native_multi_head_attention(query, key, value, int embed_dim,
 * int num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, Tensor? mask,
 * bool need_weights, bool average_attn_weights, int? mask_type)
 * -> (out, weights); output 1 is undefined when need_weights is false. */
static ttpu_status* lower_native_mha(ttpu_lower* L) {
  static const mha_args a = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12};
  ctx c = make_ctx(L);
  const ttpu_tensor* w1 = ttpu_l_nout(L) > 1 ? &ttpu_l_call(L)->outputs[1] : NULL;
  const int want = w1 && w1->buffer && w1->dtype != TTPU_DTYPE_NONE;
  ttpu_val p = TTPU_VAL_ERROR;
  ttpu_val out = attention(&c, &a, arg(&c, 0), arg(&c, 1), arg(&c, 2), want ? &p : NULL);
  ttpu_l_set_out(L, 0, out);
  if (!want) return NULL;
  if (ttpu_l_bool(L, 11, 1)) {
    const int64_t nh = ttpu_l_int(L, 4, 1);
    int mask[TTPU_MAX_DIMS] = {0, 1, 0, 0};
    ttpu_val sum = round_dt(&c, ttpu_l_reduce_mask(L, p, TTPU_RED_SUM, mask));
    p = round_dt(&c, ttpu_hlo_binary(c.b, TTPU_DIV, sum, ttpu_l_const_like(L, sum, (double)nh)));
  }
  ttpu_l_set_out(L, 1, p);
  return NULL;
}

/* layer_norm over the last dim of x with weight and bias (1-d), rounded. */
static ttpu_val layer_norm(const ctx* c, ttpu_val x, ttpu_val w, ttpu_val bias, double eps) {
  ttpu_type t = type_of(c, x);
  int mask[TTPU_MAX_DIMS] = {0};
  mask[t.ndim - 1] = 1;
  ttpu_val n = ttpu_l_const_like(c->L, x, (double)t.dims[t.ndim - 1]);
  ttpu_val mean = ttpu_hlo_binary(
      c->b, TTPU_DIV,
      ttpu_l_bcast_back(c->L, ttpu_l_reduce_mask(c->L, x, TTPU_RED_SUM, mask), t, mask), n);
  ttpu_val xc = ttpu_hlo_binary(c->b, TTPU_SUB, x, mean);
  ttpu_val var = ttpu_hlo_binary(
      c->b, TTPU_DIV,
      ttpu_l_bcast_back(c->L,
                        ttpu_l_reduce_mask(c->L, ttpu_hlo_binary(c->b, TTPU_MUL, xc, xc),
                                           TTPU_RED_SUM, mask),
                        t, mask),
      n);
  ttpu_val rstd = ttpu_hlo_unary(
      c->b, TTPU_RSQRT, ttpu_hlo_binary(c->b, TTPU_ADD, var, ttpu_l_const_like(c->L, var, eps)));
  int64_t map = t.ndim - 1;
  ttpu_val y = ttpu_hlo_binary(c->b, TTPU_MUL, xc, rstd);
  y = ttpu_hlo_binary(c->b, TTPU_MUL, y, ttpu_hlo_broadcast_in_dim(c->b, w, t, &map));
  return round_dt(c, add_last(c, y, bias));
}

static ttpu_val add_round(const ctx* c, ttpu_val x, ttpu_val y) {
  return round_dt(c, ttpu_hlo_binary(c->b, TTPU_ADD, x, y));
}

/* _transformer_encoder_layer_fwd(src, int embed_dim, int num_heads,
 * qkv_weight, qkv_bias, proj_weight, proj_bias, bool use_gelu,
 * bool norm_first, float eps, norm_weight_1, norm_bias_1, norm_weight_2,
 * norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
 * Tensor? mask, int? mask_type) */
static ttpu_status* lower_encoder_layer(ttpu_lower* L) {
  static const mha_args a = {0, 0, 0, 1, 2, 3, 4, 5, 6, 18, 19};
  ctx c = make_ctx(L);
  const int use_gelu = ttpu_l_bool(L, 7, 0), norm_first = ttpu_l_bool(L, 8, 0);
  const double eps = ttpu_l_float(L, 9, 1e-5);
  ttpu_val src = arg(&c, 0);
  ttpu_val nw1 = arg(&c, 10), nb1 = arg(&c, 11), nw2 = arg(&c, 12), nb2 = arg(&c, 13);
  ttpu_val x = norm_first ? layer_norm(&c, src, nw1, nb1, eps) : src;
  x = add_round(&c, attention(&c, &a, x, x, x, NULL), src);
  if (!norm_first) x = layer_norm(&c, x, nw1, nb1, eps);
  ttpu_val residual = x;
  if (norm_first) x = layer_norm(&c, x, nw2, nb2, eps);
  x = linear(&c, x, arg(&c, 14), arg(&c, 15));
  if (use_gelu) {
    ttpu_val e = ttpu_ew_erf(c.b, ttpu_hlo_binary(c.b, TTPU_MUL, x, ttpu_l_const_like(L, x, M_SQRT1_2)));
    ttpu_val half = ttpu_hlo_binary(c.b, TTPU_MUL, x, ttpu_l_const_like(L, x, 0.5));
    x = ttpu_hlo_binary(c.b, TTPU_MUL, half,
                        ttpu_hlo_binary(c.b, TTPU_ADD, e, ttpu_l_const_like(L, e, 1.0)));
  } else {
    x = ttpu_ew_max(c.b, x, ttpu_l_const_like(L, x, 0.0));
  }
  x = round_dt(&c, x);
  x = add_round(&c, linear(&c, x, arg(&c, 16), arg(&c, 17)), residual);
  if (!norm_first) x = layer_norm(&c, x, nw2, nb2, eps);
  ttpu_l_set_out(L, 0, x);
  return NULL;
}

const ttpu_op_def ttpu_ops_attention[] = {
    {"_native_multi_head_attention", lower_native_mha, .kinds = TTPU_K_FLOAT,
     .kernel = "native_multi_head_attention"},
    {"_transformer_encoder_layer_fwd", lower_encoder_layer, .kinds = TTPU_K_FLOAT,
     .kernel = "transformer_encoder_layer_forward"},
    {0},
};
