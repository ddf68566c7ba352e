#include "runtime/engine_call.h"

#include <c10/util/Exception.h>

#include <utility>

namespace torchtpu {

EngineCall::EngineCall(const char* op, std::string what)
    : op_(ttpu_op_lookup(op)), what_(std::move(what)) {
  TORCH_CHECK(op_ >= 0, what_, ": the engine has no op ", op);
}

void EngineCall::add_tensor(const at::Tensor& t, const char* role) {
  TORCH_CHECK(t.defined(), what_, ": an undefined ", role);
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what_, ": ", role, " ",
              inputs_.size() + outputs_.size(), " is on ", t.device(), "; every tensor must be on tpu");
  if (device_ < 0) {
    device_ = t.device().index();
  }
  TORCH_CHECK(t.device().index() == device_, what_, ": a ", role, " is on ", t.device(),
              ", another tensor on tpu:", static_cast<int>(device_));
}

EngineCall& EngineCall::tensor(const at::Tensor& t) {
  add_tensor(t, "input");
  ttpu_arg arg{};
  arg.kind = TTPU_ARG_TENSOR;
  arg.tensor = static_cast<int>(inputs_.size());
  arg.scalar_dtype = TTPU_DTYPE_NONE;
  inputs_.push_back(t);
  args_.push_back(arg);
  return *this;
}

EngineCall& EngineCall::tensors(const std::vector<at::Tensor>& ts) {
  ttpu_arg arg{};
  arg.kind = TTPU_ARG_TENSORS;
  arg.tensor = static_cast<int>(inputs_.size());
  arg.n = static_cast<int>(ts.size());
  arg.scalar_dtype = TTPU_DTYPE_NONE;
  for (const at::Tensor& t : ts) {
    add_tensor(t, "input");
    inputs_.push_back(t);
  }
  args_.push_back(arg);
  return *this;
}

ttpu_arg& EngineCall::value(ttpu_arg_kind kind) {
  ttpu_arg arg{};
  arg.kind = kind;
  arg.tensor = -1;
  arg.scalar_dtype = TTPU_DTYPE_NONE;
  args_.push_back(arg);
  return args_.back();
}

EngineCall& EngineCall::integer(int64_t v) {
  value(TTPU_ARG_INT).i = v;
  return *this;
}

EngineCall& EngineCall::boolean(bool v) {
  value(TTPU_ARG_BOOL).i = v ? 1 : 0;
  return *this;
}

EngineCall& EngineCall::floating(double v) {
  value(TTPU_ARG_FLOAT).f = v;
  return *this;
}

EngineCall& EngineCall::str(const std::string& s) {
  strings_.push_back(s);
  value(TTPU_ARG_STR);
  return *this;
}

EngineCall& EngineCall::output(const at::Tensor& t) {
  add_tensor(t, "output");
  outputs_.push_back(t);
  return *this;
}

void EngineCall::run() {
  TORCH_CHECK(!outputs_.empty(), what_, ": a call needs at least one output");
  // The strings' storage is final now: point the STR args at it.
  size_t next_string = 0;
  for (ttpu_arg& arg : args_) {
    if (arg.kind == TTPU_ARG_STR) {
      arg.str = strings_[next_string++].c_str();
    }
  }
  std::vector<ttpu_tensor> in;
  std::vector<ttpu_tensor> out;
  in.reserve(inputs_.size());
  out.reserve(outputs_.size());
  for (const at::Tensor& t : inputs_) {
    in.push_back(engine_tensor(t));
  }
  for (const at::Tensor& t : outputs_) {
    out.push_back(engine_tensor(t));
  }
  ttpu_op_call call{};
  call.op = op_;
  call.n_args = static_cast<int>(args_.size());
  call.args = args_.data();
  call.n_tensors = static_cast<int>(in.size());
  call.tensors = in.data();
  call.n_outputs = static_cast<int>(out.size());
  call.outputs = out.data();
  call.common_dtype = TTPU_DTYPE_NONE;
  call.device = device_;
  ttpu_runtime* rt = runtime();
  check(ttpu_op_run(rt, &call), what_.c_str());
}

}  // namespace torchtpu
