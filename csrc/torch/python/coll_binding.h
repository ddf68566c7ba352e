// Collectives among the devices of this process as XLA collective programs
// (the engine's ttpu_coll.h), for tpu tensors: the list API of
// torchtpu.distributed.comm and the in-process c10d backend build on this.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include "ttpu_coll.h"
}

namespace torchtpu {

// What to run besides the tensors (ttpu_coll_call's scalar fields).
struct XlaCollective {
  ttpu_coll_kind kind = TTPU_COLL_ALL_REDUCE;
  ttpu_reduce_op op = TTPU_REDUCE_SUM;
  double premul = 1.0;
  int root = 0;
  std::vector<int> peer;  // PERMUTE
};

// Runs one collective program over inputs[i] -> outputs[i], one pair per
// device (outputs[i] may be inputs[i]: in place). Tensors must be tpu
// tensors of one dtype; each is read or written as its elements in
// row-major order. A tensor that is not a whole contiguous storage goes
// through a contiguous temporary (a device copy before or after). Counts
// the call under `name` for torchtpu.debug.report(). Call without the GIL.
void run_xla_collective(const XlaCollective& c,
                        const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs,
                        const std::string& name);

// True when `t` is exactly its storage (contiguous, offset 0, every byte).
bool covers_storage(const at::Tensor& t);

// Paths a collective can take, as the report names them.
extern const char* const kPathXla;      // "xla collective program"
extern const char* const kPathCopy;     // "in-process device copies"

// Counts one call of collective `name` on `path` moving `bytes` per member.
void count_path(const char* path, const std::string& name, int64_t bytes);

// Adds _coll_run, the path counters and the in-process c10d backend
// (distributed/local_backend.cpp) to torchtpu._C.
void init_coll(pybind11::module& m);
void init_local_backend(pybind11::module& m);

}  // namespace torchtpu
