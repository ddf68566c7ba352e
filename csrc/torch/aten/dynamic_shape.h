// Ops whose output sizes depend on the data (nonzero and what builds on it:
// masked_select, boolean-mask indexing; unique and its kin;
// repeat_interleave without output_size; bincount). The engine runs
// programs of static shape only, so each such op is one pattern:
//
//   1. engine ops of static shape run: a bounded op writes outputs sized
//      for the most there can be (unique's .out lowerings, one slot per
//      element or slice), and
//      other engine ops compute the counts (device scalars) that say how
//      much of each output is real;
//   2. every count comes to the host in one read (a synchronization, as on
//      CUDA);
//   3. the outputs are narrowed to their counts.
//
// An op with no static bound (repeat_interleave's total, bincount's
// length), or whose bound would make its result's storage much larger than
// the result (nonzero: one row per element), reads its counts first (step
// 2, through read_counts) and runs an engine op of that exact size.
//
// Called on the thread of the op's dispatcher call; nothing is kept.
#pragma once

#include <ATen/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace torchtpu {

// Step 2: the values of `counts` (tensors of one element each, any
// integral or bool dtype, on any device), read to the host in one read.
std::vector<int64_t> read_counts(c10::ArrayRef<at::Tensor> counts);

// One output of a bounded op as the engine wrote it.
struct BoundedOutput {
  at::Tensor tensor;
  int64_t dim = -1;         // narrowed along this dim; -1: kept whole
  size_t count = 0;         // to the value of counts[count]
  bool contiguous = false;  // made contiguous once narrowed
};

struct BoundedRun {
  std::vector<BoundedOutput> outputs;
  std::vector<at::Tensor> counts;
};

// Steps 2 and 3: the outputs of `run` narrowed to their counts (in the
// order of run.outputs), the counts read in one host read.
std::vector<at::Tensor> trim_bounded(const BoundedRun& run);

}  // namespace torchtpu
