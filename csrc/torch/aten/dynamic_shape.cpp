// The one path of data-dependent output sizes (dynamic_shape.h).
#include "aten/dynamic_shape.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace torchtpu {

std::vector<int64_t> read_counts(c10::ArrayRef<at::Tensor> counts) {
  if (counts.empty()) {
    return {};
  }
  if (counts.size() == 1) {
    return {counts[0].item<int64_t>()};
  }
  std::vector<at::Tensor> flat;
  flat.reserve(counts.size());
  for (const at::Tensor& count : counts) {
    TORCH_INTERNAL_ASSERT(count.numel() == 1);
    flat.push_back(count.reshape({}).to(at::kLong));
  }
  const at::Tensor host = at::stack(flat).cpu();
  const int64_t* values = host.const_data_ptr<int64_t>();
  return std::vector<int64_t>(values, values + counts.size());
}

std::vector<at::Tensor> trim_bounded(const BoundedRun& run) {
  const std::vector<int64_t> counts = read_counts(run.counts);
  std::vector<at::Tensor> trimmed;
  trimmed.reserve(run.outputs.size());
  for (const BoundedOutput& output : run.outputs) {
    if (output.dim < 0) {
      trimmed.push_back(output.tensor);
      continue;
    }
    TORCH_INTERNAL_ASSERT(output.count < counts.size());
    at::Tensor narrowed = output.tensor.narrow(output.dim, 0, counts[output.count]);
    trimmed.push_back(output.contiguous ? narrowed.contiguous() : narrowed);
  }
  return trimmed;
}

}  // namespace torchtpu
