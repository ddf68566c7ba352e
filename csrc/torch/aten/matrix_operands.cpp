// The matrix ops' operand layouts (matrix_operands.h).
#include "aten/matrix_operands.h"

#include <ATen/ops/as_strided_native.h>

#include <algorithm>
#include <vector>

namespace torchtpu {

namespace {

// The strides of a contiguous tensor of t's sizes.
std::vector<int64_t> contiguous_strides(const at::Tensor& t) {
  std::vector<int64_t> strides(static_cast<size_t>(t.dim()));
  int64_t next = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = next;
    next *= std::max<int64_t>(t.size(d), 1);
  }
  return strides;
}

}  // namespace

bool dense_ignoring_unit_dims(const at::Tensor& t) {
  const std::vector<int64_t> want = contiguous_strides(t);
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) != want[static_cast<size_t>(d)]) {
      return false;
    }
  }
  return true;
}

bool matrix_layout_direct(const at::Tensor& t) {
  // A broadcast dim (stride 0) is read as it is, for free: it counts as
  // a dim of size 1 below.
  auto extent = [&](int64_t d) { return t.stride(d) == 0 ? std::min<int64_t>(t.size(d), 1) : t.size(d); };
  const int64_t n = t.dim();
  if (n == 0) {
    return true;
  }
  if (n == 1) {
    return extent(0) <= 1 || t.stride(0) == 1;
  }
  const int64_t r = extent(n - 2), c = extent(n - 1);
  const int64_t sr = t.stride(n - 2), sc = t.stride(n - 1);
  // a row-major or column-major matrix, its leading stride at least the
  // extent it steps over (a slice of a wider matrix)
  const bool row_major = (c <= 1 || sc == 1) && (r <= 1 || sr >= std::max<int64_t>(c, 1));
  const bool col_major = (r <= 1 || sr == 1) && (c <= 1 || sc >= std::max<int64_t>(r, 1));
  if (!row_major && !col_major) {
    return false;
  }
  // batch dims outside the matrix, outer ones outside inner
  int64_t span = (r > 1 ? (r - 1) * sr : 0) + (c > 1 ? (c - 1) * sc : 0) + 1;
  for (int64_t d = n - 3; d >= 0; --d) {
    const int64_t size = extent(d), stride = t.stride(d);
    if (size <= 1) {
      continue;
    }
    if (stride < span) {
      return false;
    }
    span += (size - 1) * stride;
  }
  return true;
}

at::Tensor with_canonical_unit_strides(const at::Tensor& t) {
  const std::vector<int64_t> want = contiguous_strides(t);
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  bool changed = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const size_t k = static_cast<size_t>(d);
    if (t.size(d) == 1 && strides[k] != want[k]) {
      strides[k] = want[k];
      changed = true;
    }
  }
  if (!changed) {
    return t;
  }
  return at::native::as_strided_tensorimpl(t, t.sizes(), strides, t.storage_offset());
}

}  // namespace torchtpu
