// unique and its kin (_unique2, _unique, unique_consecutive, unique_dim,
// unique_dim_consecutive): how many values come out depends on the data,
// the pattern of dynamic_shape.h. The engine's lowering of the .out
// overload is the bounded op: it runs with outputs sized for the most
// there can be (one per element or slice), fills the first K and leaves
// the counts after them zero; K is the number of non-zero counts, and the
// results are trimmed to it. The .out overloads' meta shapes (the sizes
// the caller gave) are in meta_shapes.cpp.
#include "aten/dynamic_shape.h"
#include "aten/ops.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace torchtpu {

namespace {

using Triple = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

const c10::OperatorHandle& out_op(const char* name) {
  // One handle per name, looked up once (the names are string literals).
  static std::mutex mutex;
  static std::map<std::string, c10::OperatorHandle> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = handles.find(name);
  if (found == handles.end()) {
    found = handles
                .emplace(name, c10::Dispatcher::singleton().findSchemaOrThrow(name, "out"))
                .first;
  }
  return found->second;
}

at::Tensor empty_long(const at::Tensor& self, c10::IntArrayRef sizes) {
  return at::empty(sizes, self.options().dtype(at::kLong));
}

// Runs the engine's lowering of `name`.out on args + (values, inverse,
// counts), values and counts holding a slot per element (or per slice
// along dim), and trims them to the count found: one host read.
Triple run_padded(const char* name, std::vector<c10::IValue> args, at::Tensor values, at::Tensor inverse,
                  at::Tensor counts, std::optional<int64_t> dim) {
  torch::jit::Stack stack(std::move(args));
  stack.emplace_back(values);
  stack.emplace_back(inverse);
  stack.emplace_back(counts);
  run_engine_op(out_op(name), &stack);
  BoundedRun run;
  run.outputs = {{values, dim.value_or(0), 0, dim.has_value()}, {inverse}, {counts, 0, 0}};
  run.counts = {at::count_nonzero(counts)};
  const std::vector<at::Tensor> trimmed = trim_bounded(run);
  return {trimmed[0], trimmed[1], trimmed[2]};
}

// Elements, sorted (_unique2, _unique) or consecutive.
Triple unique_flat(const char* name, const at::Tensor& self, std::vector<c10::IValue> args, bool return_inverse,
                   bool return_counts) {
  const int64_t n = self.numel();
  at::Tensor inverse = return_inverse ? empty_long(self, self.sizes()) : empty_long(self, {0});
  if (n == 0) {
    return {at::empty({0}, self.options()), inverse, empty_long(self, {0})};
  }
  auto [values, inv, counts] = run_padded(name, std::move(args), at::empty({n}, self.options()), inverse,
                                          empty_long(self, {n}), std::nullopt);
  return {values, inv, return_counts ? counts : empty_long(self, {0})};
}

// Slices along dim (unique_dim, unique_dim_consecutive): the CPU returns
// the inverse and the counts whether asked or not.
Triple unique_slices(const char* name, const at::Tensor& self, int64_t dim, std::vector<c10::IValue> args) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) {
    for (int64_t d = 0; d < self.dim(); ++d) {
      TORCH_CHECK(d == dim || self.size(d) != 0,
                  "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    }
    return {at::empty(self.sizes(), self.options()), empty_long(self, {0}), empty_long(self, {0})};
  }
  const int64_t n = self.size(dim);
  return run_padded(name, std::move(args), at::empty(self.sizes(), self.options()), empty_long(self, {n}),
                    empty_long(self, {n}), dim);
}

Triple unique2_tpu(const at::Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  return unique_flat("aten::_unique2", self, {self, sorted, return_inverse, return_counts}, return_inverse,
                     return_counts);
}

std::tuple<at::Tensor, at::Tensor> unique1_tpu(const at::Tensor& self, bool sorted, bool return_inverse) {
  auto [values, inverse, counts] = unique_flat("aten::_unique2", self, {self, sorted, return_inverse, true},
                                               return_inverse, false);
  return {values, inverse};
}

Triple unique_consecutive_tpu(const at::Tensor& self, bool return_inverse, bool return_counts,
                          std::optional<int64_t> dim) {
  if (dim) {
    return unique_slices("aten::unique_dim_consecutive", self, *dim,
                         {self, at::maybe_wrap_dim(*dim, self.dim()), return_inverse, return_counts});
  }
  return unique_flat("aten::unique_consecutive", self, {self, return_inverse, return_counts, c10::IValue()},
                     return_inverse, return_counts);
}

Triple unique_dim_tpu(const at::Tensor& self, int64_t dim, bool sorted, bool return_inverse, bool return_counts) {
  return unique_slices("aten::unique_dim", self, dim, {self, dim, sorted, return_inverse, return_counts});
}

Triple unique_dim_consecutive_tpu(const at::Tensor& self, int64_t dim, bool return_inverse, bool return_counts) {
  return unique_slices("aten::unique_dim_consecutive", self, dim, {self, dim, return_inverse, return_counts});
}

// out= forms: the results copied into the given tensors, resized as the
// CPU kernels resize them.
void into(at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "Expected out tensor to have dtype ",
              result.scalar_type(), ", but got ", out.scalar_type(), " instead");
  out.resize_(result.sizes());
  out.copy_(result);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> into3(const Triple& r, at::Tensor& a, at::Tensor& b,
                                                        at::Tensor& c) {
  into(a, std::get<0>(r));
  into(b, std::get<1>(r));
  into(c, std::get<2>(r));
  return {a, b, c};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique2_out(const at::Tensor& self, bool sorted, bool inv, bool cnt,
                                                              at::Tensor& o0, at::Tensor& o1, at::Tensor& o2) {
  return into3(unique2_tpu(self, sorted, inv, cnt), o0, o1, o2);
}

std::tuple<at::Tensor&, at::Tensor&> unique1_out(const at::Tensor& self, bool sorted, bool inv, at::Tensor& o0,
                                                 at::Tensor& o1) {
  auto [values, inverse] = unique1_tpu(self, sorted, inv);
  into(o0, values);
  into(o1, inverse);
  return {o0, o1};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique_consecutive_out(const at::Tensor& self, bool inv, bool cnt,
                                                                         std::optional<int64_t> dim, at::Tensor& o0,
                                                                         at::Tensor& o1, at::Tensor& o2) {
  return into3(unique_consecutive_tpu(self, inv, cnt, dim), o0, o1, o2);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique_dim_out(const at::Tensor& self, int64_t dim, bool sorted,
                                                                 bool inv, bool cnt, at::Tensor& o0, at::Tensor& o1,
                                                                 at::Tensor& o2) {
  return into3(unique_dim_tpu(self, dim, sorted, inv, cnt), o0, o1, o2);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> unique_dim_consecutive_out(const at::Tensor& self, int64_t dim,
                                                                             bool inv, bool cnt, at::Tensor& o0,
                                                                             at::Tensor& o1, at::Tensor& o2) {
  return into3(unique_dim_consecutive_tpu(self, dim, inv, cnt), o0, o1, o2);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique2", TORCH_FN(unique2_tpu));
  m.impl("_unique", TORCH_FN(unique1_tpu));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive_tpu));
  m.impl("unique_dim", TORCH_FN(unique_dim_tpu));
  m.impl("unique_dim_consecutive", TORCH_FN(unique_dim_consecutive_tpu));
  m.impl("_unique2.out", TORCH_FN(unique2_out));
  m.impl("_unique.out", TORCH_FN(unique1_out));
  m.impl("unique_consecutive.out", TORCH_FN(unique_consecutive_out));
  m.impl("unique_dim.out", TORCH_FN(unique_dim_out));
  m.impl("unique_dim_consecutive.out", TORCH_FN(unique_dim_consecutive_out));
}

}  // namespace torchtpu
