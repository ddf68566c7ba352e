// Ops composed from other ops on the tpu tensors: results that are not
// tensors (the engine's programs return tensors only), and the fused
// inference kernels PyTorch's transformer modules call in eval mode.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <optional>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace torchtpu {

namespace {

// torch.equal: same sizes and every element equal (NaN never is), any
// dtypes (compared after promotion, as on the CPU). One host read.
bool equal_kernel(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(),
              "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  if (!self.is_same_size(other)) {
    return false;
  }
  return at::eq(self, other).all().item<bool>();
}

// The boolean "masked out" form of a fused-attention mask, shaped to
// broadcast against the scores (batch, heads, L, S). Like the CPU kernel,
// a float mask masks where it is nonzero; mask_type 1 is a key padding
// mask (batch, S), 0 an attention mask (L, S), 2 a merged (batch, heads or
// 1, L, S) mask.
at::Tensor masked_out(const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type,
                      int64_t batch, int64_t s) {
  if (!mask || !mask->defined()) {
    return at::Tensor();
  }
  at::Tensor m = mask->scalar_type() == at::kBool ? *mask : mask->ne(0);
  if (mask_type.value_or(m.dim() == 2 && m.size(0) == batch ? 1 : 0) == 1) {
    TORCH_CHECK(m.dim() == 2 && m.size(0) == batch && m.size(1) == s,
                "key padding mask must be (batch, source length), got ", m.sizes());
    return m.view({batch, 1, 1, s});
  }
  return m;
}

// The fused multi-head attention of nn.MultiheadAttention's inference
// path: in-projection, softmax(q k^T / sqrt(d)) v with masked positions
// excluded (a row with every position masked is NaN, as on the CPU),
// out-projection.
std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask,
    bool need_weights, bool average_attn_weights, std::optional<int64_t> mask_type) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
                "expected query, key and value to be 3-D (batch, length, embed_dim), got ",
                query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(num_head > 0 && embed_dim % num_head == 0 && query.size(2) == embed_dim,
              "embed_dim ", embed_dim, " must equal the query's last dimension and be "
              "divisible by num_head ", num_head);
  TORCH_CHECK(qkv_weight.dim() == 2 && qkv_weight.size(0) == 3 * embed_dim &&
                  qkv_weight.size(1) == embed_dim,
              "qkv_weight must be (3 * embed_dim, embed_dim), got ", qkv_weight.sizes());
  const int64_t batch = query.size(0), l = query.size(1), s = key.size(1);
  const int64_t d = embed_dim / num_head;
  const auto w = qkv_weight.chunk(3, 0);
  const auto b = qkv_bias.chunk(3, 0);
  auto heads = [&](const at::Tensor& x, int64_t k, int64_t len) {
    return at::linear(x, w[k], b[k]).view({batch, len, num_head, d}).transpose(1, 2);
  };
  const at::Tensor q = heads(query, 0, l).div(std::sqrt(static_cast<double>(d)));
  const at::Tensor k = heads(key, 1, s), v = heads(value, 2, s);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));
  const at::Tensor masked = masked_out(mask, mask_type, batch, s);
  if (masked.defined()) {
    scores = scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor p = at::softmax(scores, -1);
  const at::Tensor attended = at::matmul(p, v).transpose(1, 2).reshape({batch, l, embed_dim});
  at::Tensor out = at::linear(attended, proj_weight, proj_bias);
  if (!need_weights) {
    return {out, at::Tensor()};
  }
  return {out, average_attn_weights ? p.sum(1).div(static_cast<double>(num_head)) : p};
}

// nn.TransformerEncoderLayer's inference path, in the CPU kernel's order.
at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2,
    const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
    const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
    std::optional<int64_t> mask_type) {
  auto norm = [&](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    return at::layer_norm(x, {embed_dim}, weight, bias, eps);
  };
  at::Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                              proj_weight, proj_bias, mask, false, true,
                                              mask_type))
          .add(src);
  if (!norm_first) {
    x = norm(x, norm_weight_1, norm_bias_1);
  }
  const at::Tensor residual = x;
  if (norm_first) {
    x = norm(x, norm_weight_2, norm_bias_2);
  }
  x = at::linear(x, ffn_weight_1, ffn_bias_1);
  x = use_gelu ? at::gelu(x) : at::relu(x);
  x = at::linear(x, ffn_weight_2, ffn_bias_2).add(residual);
  return norm_first ? x : norm(x, norm_weight_2, norm_bias_2);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", equal_kernel);
  m.impl("_native_multi_head_attention", native_multi_head_attention);
  m.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd);
}

}  // namespace torchtpu
