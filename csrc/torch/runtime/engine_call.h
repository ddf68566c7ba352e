// One engine op called directly, for glue whose calls do not follow an
// ATen schema the boxed kernel could pack (functions of JAX's, torchvision's
// ops with extra outputs): arguments in the engine op's order, outputs
// preallocated by the caller. Used on the thread that builds it; keeps the
// tensors alive until run() returns.
#pragma once

#include "runtime/runtime.h"

#include <ATen/Tensor.h>

#include <string>
#include <vector>

namespace torchtpu {

class EngineCall {
 public:
  // `op` names an engine op ("torchvision::nms"); `what` prefixes errors
  // (the op's name unless given).
  explicit EngineCall(const char* op) : EngineCall(op, op) {}
  EngineCall(const char* op, std::string what);

  EngineCall& tensor(const at::Tensor& t);
  EngineCall& tensors(const std::vector<at::Tensor>& ts);
  EngineCall& integer(int64_t v);
  EngineCall& boolean(bool v);
  EngineCall& floating(double v);
  EngineCall& str(const std::string& s);
  EngineCall& output(const at::Tensor& t);

  // Runs the op on the tensors' tpu device (all must share it); throws
  // the PyTorch exception for a failed status. Callers from Python release
  // the GIL around it.
  void run();

 private:
  void add_tensor(const at::Tensor& t, const char* role);
  // Appends a non-tensor argument of `kind`; the caller sets its value.
  ttpu_arg& value(ttpu_arg_kind kind);

  int op_;
  std::string what_;
  c10::DeviceIndex device_ = -1;
  std::vector<ttpu_arg> args_;
  std::vector<std::string> strings_;
  std::vector<at::Tensor> inputs_;
  std::vector<at::Tensor> outputs_;
};

}  // namespace torchtpu
