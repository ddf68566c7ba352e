// Helpers the tpu c10d backends share (distributed.cpp: host-staged over
// gloo; local_backend.cpp: ranks in one process): how collectives and their
// arguments are named in messages, and PREMUL_SUM's factor.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <sstream>
#include <string>

namespace torchtpu {

using RedOpType = c10d::ReduceOp::RedOpType;

// The dtype as Python spells it ("float32").
inline std::string dtype_name(c10::ScalarType type) {
  return std::string(c10::getDtypeNames(type).first);
}

inline std::string describe_tensor(const at::Tensor& t) {
  std::ostringstream s;
  s << dtype_name(t.scalar_type()) << t.sizes();
  return s.str();
}

inline const char* reduce_op_name(RedOpType op) {
  switch (op) {
    case RedOpType::SUM: return "SUM";
    case RedOpType::AVG: return "AVG";
    case RedOpType::PRODUCT: return "PRODUCT";
    case RedOpType::MIN: return "MIN";
    case RedOpType::MAX: return "MAX";
    case RedOpType::BAND: return "BAND";
    case RedOpType::BOR: return "BOR";
    case RedOpType::BXOR: return "BXOR";
    case RedOpType::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// The factor of a PREMUL_SUM as a 0-d host tensor. The supplement's older
// name is the one every supported PyTorch release defines.
inline at::Tensor premul_factor(const c10d::ReduceOp& op) {
  TORCH_CHECK(op.supplement_, "PREMUL_SUM needs a factor: make the op with "
              "torch.distributed._make_nccl_premul_sum(factor)");
  const auto* s = static_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (s->tensor_factor.defined()) {
    return s->tensor_factor.detach().to(at::kCPU).reshape({});
  }
  return at::scalar_tensor(s->double_factor, at::kDouble);
}

}  // namespace torchtpu
