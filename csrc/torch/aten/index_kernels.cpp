// Ops whose output shape depends on data: nonzero, masked_select, indexing
// with boolean masks, repeat_interleave without output_size, bincount. They
// follow the one pattern of dynamic_shape.h: each reads its sizes (the
// nonzero count, the repeats' total, bincount's length) in one host read
// and runs engine ops of that size: nonzero_static (masked_select and
// boolean masks become nonzero coordinates, then index.Tensor with
// integer indices), repeat_interleave.Tensor with output_size, bincount
// with its length.
#include "aten/dynamic_shape.h"
#include "aten/ops.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/ops/unfold_native.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

namespace torchtpu {

namespace {

// A defined tensor in a Tensor?[] list (Python indexing passes slices as
// undefined tensors, not None).
bool is_index(const c10::IValue& e) {
  return e.isTensor() && e.toTensor().defined();
}

bool is_mask(const at::Tensor& t) {
  return t.defined() &&
         (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte);
}

// A Tensor?[] index list with its boolean masks replaced by their nonzero
// coordinates (IndexError on a mask whose shape does not match, as CPU).
c10::List<std::optional<at::Tensor>> expand_masks(
    const at::Tensor& self, const c10::IValue& list) {
  c10::List<std::optional<at::Tensor>> in;
  for (const c10::IValue& e : list.toListRef()) {
    in.push_back(is_index(e) ? std::optional<at::Tensor>(e.toTensor())
                             : std::nullopt);
  }
  const std::vector<at::Tensor> expanded = at::native::expandTensors(self, in);
  c10::List<std::optional<at::Tensor>> out;
  for (const at::Tensor& t : expanded) {
    out.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
  }
  return out;
}

// Index tensors must be integers or masks and broadcast together:
// IndexError with CPU's message (meta kernels raise RuntimeError). An
// integer index into a dim of size 0 is out of bounds whatever its values;
// the call may have no elements to compute, so no program would see them.
void check_indices(const at::Tensor& self, const c10::IValue& list) {
  std::vector<int64_t> shape;
  bool first = true;
  std::string shapes;
  bool ok = true;
  int64_t dim = 0;  // the first dim of self the entry indexes
  for (const c10::IValue& e : list.toListRef()) {
    if (!is_index(e)) {
      dim++;
      continue;
    }
    const at::Tensor& t = e.toTensor();
    TORCH_CHECK_INDEX(t.scalar_type() == at::kLong ||
                          t.scalar_type() == at::kInt || is_mask(t),
                      "tensors used as indices must be long, int, byte or "
                      "bool tensors");
    if (is_mask(t)) {
      dim += t.dim();
    } else {
      TORCH_CHECK_INDEX(dim >= self.dim() || self.size(dim) != 0 ||
                            t.numel() == 0,
                        "index is out of bounds for dimension with size 0");
      dim++;
    }
    shapes += (shapes.empty() ? "" : ", ") + c10::str(t.sizes());
    if (first) {
      shape = t.sizes().vec();
      first = false;
      continue;
    }
    try {
      shape = at::infer_size(shape, t.sizes());
    } catch (const std::exception&) {
      ok = false;
    }
  }
  TORCH_CHECK_INDEX(ok, "shape mismatch: indexing tensors could not be "
                    "broadcast together with shapes ", shapes);
}

// index.Tensor(Tensor self, Tensor?[] indices)
void index_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 2;
  const c10::IValue& list = (*stack)[base + 1];
  bool any_mask = false;
  for (const c10::IValue& e : list.toListRef()) {
    any_mask = any_mask || (is_index(e) && is_mask(e.toTensor()));
  }
  if (any_mask) {
    (*stack)[base + 1] = expand_masks((*stack)[base].toTensor(), list);
  }
  check_indices((*stack)[base].toTensor(), (*stack)[base + 1]);
  run_engine_op(op, stack);
}

// _index_put_impl_(Tensor(a!) self, Tensor?[] indices, Tensor values,
// bool accumulate, bool unsafe). The engine lowers one boolean mask alone
// as a select (no host read); other mixes of masks go through nonzero.
void index_put_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 5;
  const c10::IValue& list = (*stack)[base + 1];
  int defined = 0;
  int masks = 0;
  for (const c10::IValue& e : list.toListRef()) {
    if (is_index(e)) {
      defined++;
      masks += is_mask(e.toTensor()) ? 1 : 0;
    }
  }
  // With no elements to write no program checks a lone mask's shape, so
  // it is expanded too (IndexError on a mismatch, as on the CPU).
  const bool empty = (*stack)[base].toTensor().numel() == 0;
  if (masks > 0 && (empty || !(defined == 1 && masks == 1))) {
    (*stack)[base + 1] = expand_masks((*stack)[base].toTensor(), list);
  }
  check_indices((*stack)[base].toTensor(), (*stack)[base + 1]);
  run_engine_op(op, stack);
}

// repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None)
void repeat_interleave_kernel(const c10::OperatorHandle& op,
                              torch::jit::Stack* stack) {
  const size_t base = stack->size() - 2;
  const at::ScalarType rtype = (*stack)[base].toTensor().scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(rtype == at::kLong || rtype == at::kInt,
                              "\"repeat_interleave\" not implemented for '",
                              c10::toString(rtype), "'");
  if ((*stack)[base + 1].isNone()) {
    const at::Tensor& repeats = (*stack)[base].toTensor();
    TORCH_CHECK(repeats.dim() <= 1,
                "repeat_interleave only accept 1D vector as repeat");
    if (repeats.numel() == 0) {
      (*stack)[base + 1] = int64_t{0};
    } else {
      // the smallest repeat too: when they add up to nothing, no program
      // runs to refuse a negative one
      const std::vector<int64_t> got = read_counts({repeats.sum(), repeats.min()});
      TORCH_CHECK(got[1] >= 0, "repeats can not be negative");
      (*stack)[base + 1] = got[0];
    }
  }
  run_engine_op(op, stack);
}

// nonzero(Tensor self): the count first (one host read), then the
// coordinates with that static size (nonzero_static). Bounded by the
// element count, nonzero_static could run first and be narrowed, but its
// result would then keep a storage sized for every element: memory, and a
// storage size that enters the signature of every program reading it.
at::Tensor nonzero_tpu(const at::Tensor& self) {
  TORCH_CHECK(self.numel() < std::numeric_limits<int>::max(),
              "nonzero is not supported for tensors with more than INT_MAX "
              "elements");
  const int64_t count = read_counts({at::count_nonzero(self)})[0];
  return at::nonzero_static(self, count, -1);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.device() == self.device(),
              "Expected all tensors to be on the same device, but found at least two "
              "devices, ", self.device(), " and ", out.device(), "! (nonzero's out)");
  at::Tensor result = nonzero_tpu(self);
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got "
              "scalar type ", out.scalar_type());
  out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

// masked_select(Tensor self, Tensor mask): self[mask] after broadcasting.
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_select: expected BoolTensor for mask");
  auto [s, m] = at::expand_outplace(self, mask);
  if (s->dim() == 0) {
    return at::index(s->reshape({1}), {m->reshape({1})});
  }
  return at::index(*s, {*m});
}

// bincount(Tensor self, Tensor? weights=None, SymInt minlength=0): the
// length is max(self) + 1, read to the host together with the min (one
// read, which also finds a negative value); the engine op counts with the
// larger of it and minlength as its minlength (ops/bincount.c). The
// output's dtype and the argument checks are the op's meta shape.
void bincount_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t base = stack->size() - 3;
  const at::Tensor& self = (*stack)[base].toTensor();
  const c10::IValue& given = (*stack)[base + 2];
  const int64_t minlength = given.isSymInt()
                                ? given.toSymInt().guard_int(__FILE__, __LINE__)
                                : given.toInt();
  if (self.dim() == 1 && self.numel() > 0 && minlength >= 0 &&
      at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    auto [lo, hi] = at::aminmax(self);
    const std::vector<int64_t> v = read_counts({lo, hi});
    TORCH_CHECK(v[0] >= 0,
                "bincount only supports 1-d non-negative integral inputs.");
    (*stack)[base + 2] = std::max(minlength, v[1] + 1);
  }
  run_engine_op(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor",
         torch::CppFunction::makeFromBoxedFunction<&index_kernel>());
  m.impl("_index_put_impl_",
         torch::CppFunction::makeFromBoxedFunction<&index_put_kernel>());
  m.impl("repeat_interleave.Tensor",
         torch::CppFunction::makeFromBoxedFunction<&repeat_interleave_kernel>());
  m.impl("nonzero", TORCH_FN(nonzero_tpu));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("bincount",
         torch::CppFunction::makeFromBoxedFunction<&bincount_kernel>());
  // A strided view like any other: ATen's generic one serves (its backward,
  // unfold_backward, is an engine op).
  m.impl("unfold", TORCH_FN(at::native::unfold));
}

}  // namespace torchtpu
