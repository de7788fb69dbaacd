// Nested (strided-layout) tpu tensors: a NestedTensorImpl whose buffer is a
// 1-D tpu tensor and whose metadata (sizes, strides, offsets per component)
// lives on the host, as on CUDA. This serves nn.TransformerEncoder's fast
// path (padded batch -> nested -> fused layers -> padded) and the everyday
// basics: construction, .to()/.cpu(), to_padded_tensor, unbind, clone.
//
// Contracts:
// - Making a nested tensor from a padding mask reads the mask's row lengths
//   to the host (one sync, the lengths are metadata); the data itself is
//   packed on tpu from the valid rows, never copied through the host.
// - Kernels work on the buffer or the components (views of it) with dense
//   tpu ops (each a tpu program or a fused-cluster op). Packing and padding
//   rows is one gather whose row indices come from the host metadata.
// - Any other op on a tpu nested tensor raises NotImplementedError naming
//   the op and saying what to do instead.
#include <ATen/ATen.h>
#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <ATen/ops/detach_native.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace tt::backend {
namespace {

using at::native::get_nested_tensor_impl;

std::string op_name(const c10::OperatorHandle& op) {
  const auto& n = op.schema().operator_name();
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// Per-component shapes of a nested tensor (host metadata).
std::vector<std::vector<int64_t>> component_sizes(const at::Tensor& nt) {
  const at::Tensor& sizes = get_nested_tensor_impl(nt)->get_nested_sizes();
  std::vector<std::vector<int64_t>> out;
  if (sizes.dim() != 2) return out;
  const int64_t n = sizes.size(0), d = sizes.size(1);
  const int64_t* p = sizes.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) out.emplace_back(p + i * d, p + (i + 1) * d);
  return out;
}

// The components of a nested tensor as dense tpu views of its storage.
std::vector<at::Tensor> components(const at::Tensor& nt) {
  auto* impl = get_nested_tensor_impl(nt);
  const auto shapes = component_sizes(nt);
  const at::Tensor& strides = impl->get_nested_strides();
  const at::Tensor& offsets = impl->get_storage_offsets();
  at::Tensor storage = impl->get_unsafe_storage_as_tensor();
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int64_t d = static_cast<int64_t>(shapes[i].size());
    const int64_t* s = strides.data_ptr<int64_t>() + i * d;
    out.push_back(storage.as_strided(shapes[i], at::IntArrayRef(s, d), offsets.data_ptr<int64_t>()[i]));
  }
  return out;
}

// A contiguous 1-D buffer holding `parts` one after another.
at::Tensor concat_flat(const std::vector<at::Tensor>& parts, const at::TensorOptions& options) {
  if (parts.empty()) return at::empty({0}, options);
  std::vector<at::Tensor> flat;
  for (const auto& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

at::Tensor sizes_tensor(const std::vector<std::vector<int64_t>>& shapes, int64_t dim) {
  at::Tensor s = at::empty({static_cast<int64_t>(shapes.size()), dim}, at::kLong);
  int64_t* p = s.data_ptr<int64_t>();
  for (const auto& shape : shapes)
    for (int64_t v : shape) *p++ = v;
  return s;
}

// Row indices as a tpu tensor: built on the host from nested sizes
// (metadata), uploaded, and used by one gather; the data stays on tpu.
at::Tensor index_on(const std::vector<int64_t>& idx, const at::Device& device) {
  return at::tensor(idx, at::kLong).to(device);
}

// Packs the first lengths[i] rows of padded[i] into a nested tensor whose
// components are (lengths[i], padded.sizes()[2:]): one gather of rows.
at::Tensor pack_rows(const at::Tensor& padded, const std::vector<int64_t>& lengths) {
  const int64_t n = padded.size(0), max_len = padded.size(1);
  std::vector<int64_t> rest = padded.sizes().slice(2).vec(), idx;
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK(lengths[i] >= 0 && lengths[i] <= max_len, "nested component length ", lengths[i],
                " is outside [0, ", max_len, "]");
    for (int64_t j = 0; j < lengths[i]; ++j) idx.push_back(i * max_len + j);
    shapes.push_back({lengths[i]});
    shapes.back().insert(shapes.back().end(), rest.begin(), rest.end());
  }
  at::Tensor buffer = idx.empty() || padded.numel() == 0 ? at::empty({0}, padded.options())
                                  : padded.reshape({n * max_len, -1}).index_select(0, index_on(idx, padded.device()))
                                        .reshape({-1});
  return at::native::wrap_buffer(buffer, sizes_tensor(shapes, padded.dim() - 1));
}

// The inverse for a contiguous nested tensor of (lengths[i], rest...)
// components: (N, max_len, rest...), rows past lengths[i] = padding. One
// gather from the buffer's rows plus one padding row.
at::Tensor unpack_rows(const at::Tensor& nt, const std::vector<int64_t>& lengths, at::IntArrayRef rest,
                       int64_t max_len, double padding) {
  const int64_t n = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> shape{n, max_len};
  shape.insert(shape.end(), rest.begin(), rest.end());
  const auto options = nt.options().layout(at::kStrided);
  int64_t total = 0;
  for (int64_t len : lengths) total += len;
  if (total == 0 || c10::multiply_integers(shape) == 0) return at::full(shape, padding, options);
  at::Tensor rows = get_nested_tensor_impl(nt)->get_buffer().view({total, -1});
  rows = at::cat({rows, at::full({1, rows.size(1)}, padding, options)});
  std::vector<int64_t> idx;
  int64_t offset = 0;
  for (int64_t len : lengths) {
    for (int64_t j = 0; j < max_len; ++j) idx.push_back(j < len ? offset + j : total);
    offset += len;
  }
  return rows.index_select(0, index_on(idx, rows.device())).view(shape);
}

void check_mask_args(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.dim() == 2, "Padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "Input should be a 3D tensor, N * L * D");
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1), "Mask size should match input size");
}

// True where each row of `mask` (true = keep) is a run of trues then falses.
at::Tensor left_aligned_flag(const at::Tensor& mask, const at::Tensor& lengths) {
  at::Tensor positions = at::arange(mask.size(1), lengths.options());
  return at::eq(mask.to(at::kBool), positions.unsqueeze(0) < lengths.unsqueeze(1)).all();
}

bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of ScalarType Bool, but got ",
              mask.scalar_type(), " instead.");
  check_mask_args(t, mask);
  return left_aligned_flag(mask, mask.sum(1)).item<bool>();  // sync: the answer steers Python
}

at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  check_mask_args(t, mask);
  at::Tensor lengths = mask.to(at::kBool).sum(1);
  // One host read: the row lengths (and, checked, the alignment flag).
  at::Tensor host = mask_check ? at::cat({lengths, left_aligned_flag(mask, lengths).to(at::kLong).view({1})})
                               : lengths;
  host = host.cpu();
  const int64_t n = t.size(0);
  TORCH_CHECK(!mask_check || host.data_ptr<int64_t>()[n] == 1, "Mask must be left-aligned without gaps");
  std::vector<int64_t> lens(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + n);
  return pack_rows(t, lens);
}

at::Tensor nested_from_padded(const at::Tensor& padded, const at::Tensor& cpu_nested_shape_example,
                              bool fuse_transform_0213) {
  TORCH_CHECK_NOT_IMPLEMENTED(!fuse_transform_0213,
                              "_nested_from_padded with fuse_transform_0213=True is not supported on tpu");
  TORCH_CHECK(cpu_nested_shape_example.dim() == 2 && cpu_nested_shape_example.size(1) == padded.dim() - 1,
              "_nested_from_padded: expected sizes of shape (N, ", padded.dim() - 1, "), got ",
              cpu_nested_shape_example.sizes());
  at::Tensor sizes = cpu_nested_shape_example.to(at::kCPU, at::kLong).contiguous();
  std::vector<at::Tensor> parts;
  const int64_t d = sizes.size(1);
  for (int64_t i = 0; i < sizes.size(0); ++i) {
    at::Tensor part = padded.select(0, i);
    for (int64_t j = 0; j < d; ++j) part = part.narrow(j, 0, sizes.data_ptr<int64_t>()[i * d + j]);
    parts.push_back(part);
  }
  return at::native::wrap_buffer(concat_flat(parts, padded.options()), sizes.clone());
}

// Dense (N, max sizes...) tensor; positions outside a component hold `padding`.
at::Tensor to_padded_tensor(const at::Tensor& self, double padding, at::OptionalIntArrayRef output_size) {
  const auto shapes = component_sizes(self);
  const int64_t n = static_cast<int64_t>(shapes.size());
  const int64_t d = n == 0 ? 0 : static_cast<int64_t>(shapes[0].size());
  std::vector<int64_t> target(d, 0);
  for (const auto& s : shapes)
    for (int64_t j = 0; j < d; ++j) target[j] = std::max(target[j], s[j]);
  if (output_size.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(output_size->size()) == d + 1, "Length of output_size does not match "
                "NestedTensor dims. Broadcasting is not supported.");
    for (int64_t j = 0; j < d; ++j) {
      TORCH_CHECK((*output_size)[j + 1] >= target[j], "Value in output_size is less than NestedTensor padded size. "
                  "Truncation is not supported.");
      target[j] = (*output_size)[j + 1];
    }
    TORCH_CHECK(n == 0 || (*output_size)[0] == n, "to_padded_tensor: output_size[0] ", (*output_size)[0],
                " does not match the number of components ", n);
  }
  if (n == 0) return at::full(output_size.has_value() ? output_size->vec() : std::vector<int64_t>{0}, padding,
                              self.options().layout(at::kStrided));
  bool same_rest = d > 0 && at::native::nested_tensor_impl_is_contiguous(get_nested_tensor_impl(self));
  for (const auto& s : shapes) same_rest = same_rest && std::equal(s.begin() + 1, s.end(), shapes[0].begin() + 1);
  if (same_rest) {  // one gather, then padding of trailing dims if output_size asks for it
    std::vector<int64_t> lengths;
    for (const auto& s : shapes) lengths.push_back(s[0]);
    at::Tensor out = unpack_rows(self, lengths, at::IntArrayRef(shapes[0]).slice(1), target[0], padding);
    std::vector<int64_t> pad;
    for (int64_t j = d - 1; j >= 1; --j) {
      pad.push_back(0);
      pad.push_back(target[j] - shapes[0][j]);
    }
    const bool trailing = std::any_of(pad.begin(), pad.end(), [](int64_t v) { return v != 0; });
    return trailing ? at::constant_pad_nd(out, pad, padding) : out;
  }
  const std::vector<at::Tensor> parts = components(self);
  std::vector<at::Tensor> padded;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> pad;  // constant_pad_nd lists the last dimension first
    for (int64_t j = d - 1; j >= 0; --j) {
      pad.push_back(0);
      pad.push_back(target[j] - shapes[i][j]);
    }
    padded.push_back(at::constant_pad_nd(parts[i], pad, padding));
  }
  return at::stack(padded);
}

// Nested input of TransformerEncoder's fast path: pad to (N, L, E), run the
// dense fused layer with the key padding mask, keep the valid rows.
at::Tensor nested_transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  TORCH_CHECK(!mask.has_value() || !mask->defined(),
              "_transformer_encoder_layer_fwd: a nested input takes no mask (its padding is its structure)");
  const auto shapes = component_sizes(src);
  std::vector<int64_t> lengths;
  int64_t max_len = 0;
  for (const auto& s : shapes) {
    TORCH_CHECK(s.size() == 2 && s[1] == embed_dim, "_transformer_encoder_layer_fwd: expected nested components "
                "of shape (L, ", embed_dim, "), got ", at::IntArrayRef(s));
    lengths.push_back(s[0]);
    max_len = std::max(max_len, s[0]);
  }
  const int64_t n = static_cast<int64_t>(lengths.size());
  if (n == 0 || max_len == 0) return at::native::wrap_buffer(at::empty({0}, src.options().layout(at::kStrided)),
                                                             get_nested_tensor_impl(src)->get_nested_sizes().clone());
  at::Tensor contiguous = src.is_contiguous() ? src : src.clone();
  at::Tensor padded = unpack_rows(contiguous, lengths, {embed_dim}, max_len, 0.0);
  at::Tensor key_padding = at::empty({n, max_len}, at::kBool);  // true = padding, from host metadata
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < max_len; ++j) key_padding.data_ptr<bool>()[i * max_len + j] = j >= lengths[i];
  at::Tensor out = at::_transformer_encoder_layer_fwd(
      padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
      norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
      key_padding.to(padded.device()), /*mask_type=*/1);
  return pack_rows(out, lengths);
}

at::Tensor nested_tensor_size(const at::Tensor& self) {
  return get_nested_tensor_impl(self)->get_nested_sizes().clone();
}
at::Tensor nested_tensor_strides(const at::Tensor& self) {
  return get_nested_tensor_impl(self)->get_nested_strides().clone();
}
at::Tensor nested_tensor_storage_offsets(const at::Tensor& self) {
  return get_nested_tensor_impl(self)->get_storage_offsets().clone();
}

// A contiguous copy: the components packed one after another.
at::Tensor clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  const auto format = memory_format.value_or(at::MemoryFormat::Preserve);
  TORCH_CHECK(format == at::MemoryFormat::Preserve || format == at::MemoryFormat::Contiguous,
              "Nested tensor clone supports Preserve and Contiguous memory formats, called clone with memory "
              "format: ", format);
  return at::native::wrap_buffer(concat_flat(components(self), self.options().layout(at::kStrided)),
                                 get_nested_tensor_impl(self)->get_nested_sizes().clone());
}

std::vector<at::Tensor> unbind(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(dim == 0, "NestedTensor can only be unbound along dimension 0 got dimension ", dim, " instead.");
  return components(self);
}

// .to(device/dtype) of a tpu nested tensor: a contiguous buffer converted
// as a dense tensor, with the same component sizes.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout.has_value() || *layout == self.layout(), "to(options) doesn't support converting to a "
              "different layout, but got self.layout being ", self.layout(), " and options.layout set as ", *layout);
  const auto format = memory_format.value_or(at::MemoryFormat::Preserve);
  TORCH_CHECK(format == at::MemoryFormat::Preserve || format == at::MemoryFormat::Contiguous,
              "to(): a nested tensor supports Preserve and Contiguous memory formats, got ", format);
  auto* impl = get_nested_tensor_impl(self);
  at::Tensor buffer = at::native::nested_tensor_impl_is_contiguous(impl)
                          ? impl->get_buffer()
                          : concat_flat(components(self), self.options().layout(at::kStrided));
  at::Tensor converted = at::_to_copy(buffer, dtype, std::optional<at::Layout>(at::kStrided), device, pin_memory,
                                      non_blocking, std::nullopt);
  return at::native::wrap_buffer(converted, get_nested_tensor_impl(self)->get_nested_sizes().clone());
}

// self (tpu, nested) <- src (nested, same component sizes, any device).
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(src.is_nested(), "copy_: only a nested tensor can be copied into a nested tensor");
  TORCH_CHECK(at::equal(get_nested_tensor_impl(self)->get_nested_sizes(),
                        get_nested_tensor_impl(src)->get_nested_sizes()),
              "copy_ only supports tensors that are the same size for Nested implementations");
  std::vector<at::Tensor> dst = components(self), from = src.unbind(0);
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(from[i], non_blocking);
  return self;
}

void nested_unsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu nested tensors do not support ", op_name(op),
                              ": convert with nt.to_padded_tensor(padding) to a dense tpu tensor (or "
                              "nt.unbind() to its components), or keep nested tensors on the CPU (nt.cpu()).");
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask_left_aligned", nested_tensor_from_mask_left_aligned);
  m.impl("_nested_tensor_from_mask", nested_tensor_from_mask);
  m.impl("_nested_from_padded", nested_from_padded);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", nested_transformer_encoder_layer_fwd);
  m.impl("to_padded_tensor", to_padded_tensor);
  m.impl("_nested_tensor_size", nested_tensor_size);
  m.impl("_nested_tensor_strides", nested_tensor_strides);
  m.impl("_nested_tensor_storage_offsets", nested_tensor_storage_offsets);
  m.impl("clone", clone);
  m.impl("unbind.int", unbind);
  m.impl("_to_copy", to_copy);
  m.impl("copy_", copy_);
  m.impl("detach", static_cast<at::Tensor (*)(const at::Tensor&)>(&at::native::detach));
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_unsupported>());
}

}  // namespace
}  // namespace tt::backend
