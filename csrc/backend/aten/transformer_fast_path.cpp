// The inference fast paths of nn.MultiheadAttention and
// nn.TransformerEncoderLayer (eval mode, no grad): PyTorch calls these fused
// ops on any device it allows, PrivateUse1 included. On tpu they are the
// same math in ATen ops, each of which runs as a tpu program (or is
// recorded into a fused cluster), so nothing falls back to the CPU. The
// nested-input form (TransformerEncoder's padded batch) is in nested_tensor.cpp.
//
// Mask contract (as PyTorch's CPU kernels): the mask is read as bool, true
// meaning "masked out"; mask_type 0 is an attention mask (L, S), 1 a key
// padding mask (B, S), anything else broadcasts to (B, H, L, S). A row with
// every key masked gives NaN, as on the CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

namespace tt::backend {
namespace {

struct Attention {
  at::Tensor out;      // (B, L, E), after the output projection
  at::Tensor weights;  // (B, H, L, S) softmax weights
};

Attention attend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
                 int64_t num_heads, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
                 const at::Tensor& proj_weight, const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask,
                 std::optional<int64_t> mask_type) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
              "expected batched (B, L, E) query, key and value, got ", query.sizes(), ", ", key.sizes(), ", ",
              value.sizes());
  TORCH_CHECK(num_heads > 0 && embed_dim % num_heads == 0, "embed_dim ", embed_dim,
              " is not divisible by num_heads ", num_heads);
  const int64_t B = query.size(0), L = query.size(1), S = key.size(1), d = embed_dim / num_heads;
  auto w = qkv_weight.chunk(3, 0);
  auto b = qkv_bias.chunk(3, 0);
  auto heads = [&](const at::Tensor& x, int i, int64_t len) {
    return at::linear(x, w[i], b[i]).view({B, len, num_heads, d}).transpose(1, 2);
  };
  at::Tensor q = heads(query, 0, L) / std::sqrt(static_cast<double>(d));
  at::Tensor k = heads(key, 1, S), v = heads(value, 2, S);
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2));
  if (mask.has_value() && mask->defined()) {
    at::Tensor m = mask->to(at::kBool);
    if (mask_type == 1) m = m.view({B, 1, 1, S});
    else if (m.dim() == 2) m = m.view({1, 1, L, S});
    scores = scores.masked_fill(m, -std::numeric_limits<double>::infinity());
  }
  at::Tensor weights = at::softmax(scores, -1);
  at::Tensor out = at::matmul(weights, v).transpose(1, 2).reshape({B, L, embed_dim});
  return {at::linear(out, proj_weight, proj_bias), weights};
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights,
    bool average_attn_weights, std::optional<int64_t> mask_type) {
  Attention a = attend(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                       mask_type);
  if (!need_weights) return {a.out, at::Tensor()};
  return {a.out, average_attn_weights ? a.weights.mean(1) : a.weights};
}

at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  const std::vector<int64_t> normalized{embed_dim};
  auto norm1 = [&](const at::Tensor& x) { return at::layer_norm(x, normalized, norm_weight_1, norm_bias_1, eps); };
  auto norm2 = [&](const at::Tensor& x) { return at::layer_norm(x, normalized, norm_weight_2, norm_bias_2, eps); };
  auto self_attention = [&](const at::Tensor& x) {
    return attend(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, mask_type).out;
  };
  auto feed_forward = [&](const at::Tensor& x) {
    at::Tensor h = at::linear(x, ffn_weight_1, ffn_bias_1);
    h = use_gelu ? at::gelu(h) : at::relu(h);
    return at::linear(h, ffn_weight_2, ffn_bias_2);
  };
  if (norm_first) {
    at::Tensor x = src + self_attention(norm1(src));
    return x + feed_forward(norm2(x));
  }
  at::Tensor x = norm1(src + self_attention(src));
  return norm2(x + feed_forward(x));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", native_multi_head_attention);
  m.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd);
}

}  // namespace
}  // namespace tt::backend
