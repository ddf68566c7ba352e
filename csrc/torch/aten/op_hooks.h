// Per-op attributes of the boxed engine kernel (engine_kernel.cpp): what an
// op's schema does not tell about how its call is packed. The generic path
// reads these from the op's info, resolved once when the info is built, and
// never tests op names itself.
#pragma once

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace torchtpu {

// Which operand layouts an op takes as they are (matrix_operands.h).
enum class MatrixOperands { kAsPassed, kProduct, kSolve };

struct OpHooks {
  // Arguments the op writes although its schema does not mark them
  // mutable: they are packed as extra outputs, like Tensor(a!) ones.
  std::vector<int> also_written;
  // The op writes one value everywhere it writes (fill_, zero_,
  // index_fill_): a write into a broadcast view (elements sharing memory)
  // is exact on the device, where for other ops which of the results
  // lands is undefined.
  bool writes_one_value = false;
  // An out= of as many elements as the result keeps its shape and strides
  // (arange, range, linspace, logspace: the CPU resizes only an out of
  // another size), where the meta kernel resizes it to the result's shape.
  bool out_keeps_numel_geometry = false;
  // With out_keeps_numel_geometry: a non-empty out of another count is
  // resized with the CPU's range-factory warning (arange, range), where
  // linspace and logspace resize it silently.
  bool warns_when_count_differs = false;
  // The argument whose uint8 index tensors (masks) draw the CPU's
  // deprecation warning, or -1.
  int byte_mask_arg = -1;
  // The op is nondeterministic unless its Boolean argument at this index
  // is true (put_ without accumulate: which of several writes to one
  // element lands is undefined): it raises the CPU's alert, named
  // nondeterministic_name, under torch.use_deterministic_algorithms. -1:
  // none.
  int deterministic_when_arg = -1;
  const char* nondeterministic_name = nullptr;
  // A Scalar argument the CPU kernel converts to self's dtype with its
  // checked conversion (fill_, masked_fill, index_fill): a value that
  // overflows that dtype fails with the CPU's message. -1: none.
  int scalar_fits_self_arg = -1;
  // PyTorch's meta kernel raises a nondeterminism alert meant for CUDA
  // (median/mode with indices, histc): the meta kernel runs with the
  // alerts off (meta_geometry.cpp).
  bool cuda_only_alert = false;
  // A class-index argument the CPU kernel takes as int64 or uint8 and
  // refuses in other dtypes (nll_loss's target, which PyTorch's meta
  // kernel takes in int32 and refuses in uint8): a uint8 one is read as
  // int64, another dtype fails with the CPU's message. -1: none.
  int long_or_byte_target_arg = -1;
  // A 4-d (unbatched) input is pooled as its batch of one, as the CPU
  // kernel does: where that batch is channels_last_3d contiguous, so are
  // the returns (the meta kernel makes them contiguous).
  bool unbatched_as_batch_of_one = false;
  // An argument whose dtype must be self's (argument 0), which the CPU
  // kernel checks and PyTorch's meta kernel does not (index_reduce_'s
  // source), or -1.
  int same_dtype_as_self_arg = -1;
  // The call is packed with one more int argument after its schema's: how
  // this host's CPU kernels lay out int4-packed weights
  // (host_layout.h), which the CPU's packing of
  // _convert_weight_to_int4pack_for_cpu depends on.
  bool appends_cpu_int4_layout = false;
  // float arguments the program takes at run time, as it takes a Scalar's,
  // rather than compiled in: calls that differ only in them share one
  // program (linalg_lstsq's rcond).
  std::vector<int> runtime_float_args;
  // The value a None float argument stands for, where the op defines one
  // from its other arguments (args: the call's), so that None and that
  // value share a program too; nullopt leaves the None. NULL: none.
  std::optional<double> (*none_float_means)(int index, const c10::IValue* args) = nullptr;
  // A matrix product (mm, bmm, addmm, baddbmm, ...) or triangular solve:
  // its operands reach the engine in few layouts (matrix_operands.h).
  MatrixOperands matrix_operands = MatrixOperands::kAsPassed;
};

// The hooks of the lowering table's op `name` ("native_batch_norm",
// "fill_.Scalar"); ops without any share one empty instance. The returned
// object lives for the process and is never changed (any thread may read
// it).
const OpHooks& op_hooks_for(const std::string& name);

}  // namespace torchtpu
