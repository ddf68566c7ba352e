/* rnn.c - the fused LSTM and GRU cells ATen's recurrent layers call on
 * accelerator devices (nn.LSTM, nn.GRU, nn.LSTMCell, nn.GRUCell), and
 * their backwards.
 *
 * The gates arrive already multiplied by the weights (input_gates = x W_ih^T,
 * hidden_gates = h W_hh^T, (batch, k * hidden)); a cell adds the biases,
 * applies the gate functions and returns its new state and a workspace the
 * backward reads:
 *   LSTM, k = 4, gates i f g o: cy = f cx + i g, hy = o tanh(cy);
 *        workspace (batch, 4 hidden) = [i, f, g, o] after their functions.
 *   GRU, k = 3, gates r z n: r, z from input + hidden gates,
 *        n = tanh(in + r hn), hy = n + z (hx - n);
 *        workspace (batch, 5 hidden) = [r, z, n, hn, hx].
 * Half types compute in float32 and round once, as the CUDA kernels do. */
#include "ttpu_lower.h"
#include "elementwise.h"

static ttpu_val in_math(ttpu_lower* L, int arg, ttpu_dtype md) {
  return ttpu_hlo_convert(ttpu_l_hlo(L), ttpu_l_tensor(L, arg), md);
}

/* Columns [k h, (k + 1) h) of a (batch, n h) value. */
static ttpu_val chunk(ttpu_lower* L, ttpu_val x, int k, int64_t h) {
  ttpu_type t = ttpu_l_type(L, x);
  int64_t start[2] = {0, k * h}, limit[2] = {t.dims[0], (k + 1) * h}, stride[2] = {1, 1};
  return ttpu_hlo_slice(ttpu_l_hlo(L), x, start, limit, stride);
}

/* gates + bias (a (k h) vector broadcast over the batch), if given. */
static ttpu_val plus_bias(ttpu_lower* L, ttpu_val gates, int bias_arg, ttpu_dtype md) {
  if (ttpu_l_is_none(L, bias_arg)) return gates;
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type t = ttpu_l_type(L, gates);
  ttpu_val bias = ttpu_hlo_broadcast_to(b, in_math(L, bias_arg, md), t.ndim, t.dims);
  return ttpu_hlo_binary(b, TTPU_ADD, gates, bias);
}

static ttpu_val sigmoid(ttpu_hlo* b, ttpu_val x) { return ttpu_hlo_unary(b, TTPU_LOGISTIC, x); }

/* The derivatives of the gate functions from their values: sigmoid's
 * y (1 - y), tanh's 1 - y^2. */
static ttpu_val dsigmoid(ttpu_hlo* b, ttpu_val y) {
  return ttpu_ew_mul(b, y, ttpu_ew_ksub(b, 1, y));
}
static ttpu_val dtanh(ttpu_hlo* b, ttpu_val y) {
  return ttpu_ew_ksub(b, 1, ttpu_ew_mul(b, y, y));
}

/* the sum over the batch of a (batch, n) gradient: a bias's */
static ttpu_val batch_sum(ttpu_lower* L, ttpu_val g) {
  const int mask[2] = {1, 0};
  return ttpu_l_reduce_mask(L, g, TTPU_RED_SUM, mask);
}

static void set_out(ttpu_lower* L, int k, ttpu_val v) {
  ttpu_l_set_out(L, k, ttpu_hlo_convert(ttpu_l_hlo(L), v, ttpu_l_out_type(L, k).dtype));
}

/* _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
 * hidden_bias?) -> (hy, cy, workspace) */
static ttpu_status* lower_lstm_cell(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md = ttpu_ew_opmath(ttpu_l_out_type(L, 0).dtype);
  int64_t h = ttpu_l_out_type(L, 0).dims[1];
  ttpu_val gates = ttpu_ew_add(b, plus_bias(L, in_math(L, 0, md), 3, md),
                       plus_bias(L, in_math(L, 1, md), 4, md));
  ttpu_val cx = in_math(L, 2, md);
  ttpu_val i = sigmoid(b, chunk(L, gates, 0, h));
  ttpu_val f = sigmoid(b, chunk(L, gates, 1, h));
  ttpu_val g = ttpu_hlo_unary(b, TTPU_TANH, chunk(L, gates, 2, h));
  ttpu_val o = sigmoid(b, chunk(L, gates, 3, h));
  ttpu_val cy = ttpu_ew_add(b, ttpu_ew_mul(b, f, cx), ttpu_ew_mul(b, i, g));
  ttpu_val hy = ttpu_ew_mul(b, o, ttpu_hlo_unary(b, TTPU_TANH, cy));
  ttpu_val parts[4] = {i, f, g, o};
  set_out(L, 0, hy);
  set_out(L, 1, cy);
  set_out(L, 2, ttpu_hlo_concat(b, parts, 4, 1));
  return NULL;
}

/* _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy,
 * workspace, has_bias) -> (grad_gates, grad_cx, grad_bias): the gradient
 * of the gates before their functions (the same for the input and the
 * hidden gates), of cx, and of a bias (grad_gates summed over the batch;
 * an output only with has_bias). */
static ttpu_status* lower_lstm_cell_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md = ttpu_ew_opmath(ttpu_l_out_type(L, 0).dtype);
  ttpu_val cx = in_math(L, 2, md), cy = in_math(L, 3, md), ws = in_math(L, 4, md);
  ttpu_type ts = ttpu_l_type(L, cx);
  int64_t h = ts.dims[1];
  ttpu_val zero = ttpu_hlo_const(b, ts, 0, 0);
  ttpu_val ghy = ttpu_l_is_none(L, 0) ? zero : in_math(L, 0, md);
  ttpu_val gcy = ttpu_l_is_none(L, 1) ? zero : in_math(L, 1, md);
  ttpu_val i = chunk(L, ws, 0, h), f = chunk(L, ws, 1, h);
  ttpu_val g = chunk(L, ws, 2, h), o = chunk(L, ws, 3, h);
  ttpu_val tcy = ttpu_hlo_unary(b, TTPU_TANH, cy);
  /* the gradient reaching cy: through hy = o tanh(cy), and directly */
  ttpu_val gc = ttpu_ew_add(b, ttpu_ew_mul(b, ttpu_ew_mul(b, ghy, o), dtanh(b, tcy)), gcy);
  ttpu_val gi = ttpu_ew_mul(b, ttpu_ew_mul(b, gc, g), dsigmoid(b, i));
  ttpu_val gf = ttpu_ew_mul(b, ttpu_ew_mul(b, gc, cx), dsigmoid(b, f));
  ttpu_val gg = ttpu_ew_mul(b, ttpu_ew_mul(b, gc, i), dtanh(b, g));
  ttpu_val go = ttpu_ew_mul(b, ttpu_ew_mul(b, ghy, tcy), dsigmoid(b, o));
  ttpu_val parts[4] = {gi, gf, gg, go};
  ttpu_val gates = ttpu_hlo_concat(b, parts, 4, 1);
  set_out(L, 0, gates);
  set_out(L, 1, ttpu_ew_mul(b, gc, f));
  if (ttpu_l_bool(L, 5, 0)) set_out(L, 2, batch_sum(L, gates));
  return NULL;
}

/* _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
 * hidden_bias?) -> (hy, workspace) */
static ttpu_status* lower_gru_cell(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md = ttpu_ew_opmath(ttpu_l_out_type(L, 0).dtype);
  int64_t h = ttpu_l_out_type(L, 0).dims[1];
  ttpu_val ig = plus_bias(L, in_math(L, 0, md), 3, md);
  ttpu_val hg = plus_bias(L, in_math(L, 1, md), 4, md);
  ttpu_val hx = in_math(L, 2, md);
  ttpu_val r = sigmoid(b, ttpu_ew_add(b, chunk(L, ig, 0, h), chunk(L, hg, 0, h)));
  ttpu_val z = sigmoid(b, ttpu_ew_add(b, chunk(L, ig, 1, h), chunk(L, hg, 1, h)));
  ttpu_val hn = chunk(L, hg, 2, h);
  ttpu_val n_in = ttpu_ew_add(b, chunk(L, ig, 2, h), ttpu_ew_mul(b, r, hn));
  ttpu_val n = ttpu_hlo_unary(b, TTPU_TANH, n_in);
  ttpu_val hy = ttpu_ew_add(b, n, ttpu_ew_mul(b, z, ttpu_ew_sub(b, hx, n)));
  ttpu_val parts[5] = {r, z, n, hn, hx};
  set_out(L, 0, hy);
  set_out(L, 1, ttpu_hlo_concat(b, parts, 5, 1));
  return NULL;
}

/* _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
 * (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
 * grad_hidden_bias); the biases' only with has_bias. */
static ttpu_status* lower_gru_cell_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_dtype md = ttpu_ew_opmath(ttpu_l_out_type(L, 0).dtype);
  ttpu_val gy = in_math(L, 0, md), ws = in_math(L, 1, md);
  int64_t h = ttpu_l_type(L, gy).dims[1];
  ttpu_val r = chunk(L, ws, 0, h), z = chunk(L, ws, 1, h), n = chunk(L, ws, 2, h);
  ttpu_val hn = chunk(L, ws, 3, h), hx = chunk(L, ws, 4, h);
  ttpu_val gz = ttpu_ew_mul(b, ttpu_ew_mul(b, gy, ttpu_ew_sub(b, hx, n)), dsigmoid(b, z));
  ttpu_val gn = ttpu_ew_mul(b, ttpu_ew_mul(b, gy, ttpu_ew_ksub(b, 1, z)), dtanh(b, n));
  ttpu_val ghn = ttpu_ew_mul(b, gn, r);
  ttpu_val gr = ttpu_ew_mul(b, ttpu_ew_mul(b, gn, hn), dsigmoid(b, r));
  ttpu_val in_parts[3] = {gr, gz, gn}, hid_parts[3] = {gr, gz, ghn};
  ttpu_val gi = ttpu_hlo_concat(b, in_parts, 3, 1);
  ttpu_val gh = ttpu_hlo_concat(b, hid_parts, 3, 1);
  set_out(L, 0, gi);
  set_out(L, 1, gh);
  set_out(L, 2, ttpu_ew_mul(b, gy, z));
  if (ttpu_l_bool(L, 2, 0)) {
    set_out(L, 3, batch_sum(L, gi));
    set_out(L, 4, batch_sum(L, gh));
  }
  return NULL;
}

const ttpu_op_def ttpu_ops_rnn[] = {
    {"_thnn_fused_lstm_cell", lower_lstm_cell, .kinds = TTPU_K_FLOAT},
    {"_thnn_fused_lstm_cell_backward_impl", lower_lstm_cell_backward, .kinds = TTPU_K_FLOAT},
    {"_thnn_fused_gru_cell", lower_gru_cell, .kinds = TTPU_K_FLOAT},
    {"_thnn_fused_gru_cell_backward", lower_gru_cell_backward, .kinds = TTPU_K_FLOAT},
    {0},
};
