// Functions defined outside the engine (torchtpu.jax_op): the Python side
// defines a callee's StableHLO text once and calls it on tpu tensors with
// preallocated outputs, as the engine op "torchtpu::extern_call".
#include "runtime/runtime.h"

#include <torch/extension.h>

#include <string>
#include <vector>

namespace py = pybind11;

namespace torchtpu {

namespace {

ttpu_tensor describe(const at::Tensor& t, const char* role, size_t index,
                     c10::DeviceIndex* device) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "extern call: ",
              role, " ", index, " is on ", t.device(), "; every tensor must be on tpu");
  if (*device < 0) {
    *device = t.device().index();
  }
  TORCH_CHECK(t.device().index() == *device, "extern call: ", role, " ", index,
              " is on ", t.device(), ", another tensor on tpu:", *device);
  return engine_tensor(t);
}

void extern_call(const std::string& callee, const std::vector<at::Tensor>& inputs,
                 const std::vector<at::Tensor>& outputs) {
  static const int op = ttpu_op_lookup("torchtpu::extern_call");
  TORCH_CHECK(op >= 0, "extern call: the engine has no extern_call op");
  TORCH_CHECK(!outputs.empty(), "extern call: @", callee, " needs at least one output");
  c10::DeviceIndex device = -1;
  std::vector<ttpu_tensor> in;
  std::vector<ttpu_tensor> out;
  in.reserve(inputs.size());
  out.reserve(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(describe(inputs[i], "input", i, &device));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    out.push_back(describe(outputs[i], "output", i, &device));
  }
  ttpu_arg args[2]{};
  args[0].kind = TTPU_ARG_TENSORS;
  args[0].tensor = 0;
  args[0].n = static_cast<int>(in.size());
  args[0].scalar_dtype = TTPU_DTYPE_NONE;
  args[1].kind = TTPU_ARG_STR;
  args[1].str = callee.c_str();
  args[1].tensor = -1;
  args[1].scalar_dtype = TTPU_DTYPE_NONE;
  ttpu_op_call call{};
  call.op = op;
  call.n_args = 2;
  call.args = args;
  call.n_tensors = static_cast<int>(in.size());
  call.tensors = in.data();
  call.n_outputs = static_cast<int>(out.size());
  call.outputs = out.data();
  call.common_dtype = TTPU_DTYPE_NONE;
  call.device = device;
  ttpu_runtime* rt = runtime();
  ttpu_status* st = nullptr;
  {
    py::gil_scoped_release no_gil;
    st = ttpu_op_run(rt, &call);
  }
  check(st, ("calling @" + callee).c_str());
}

}  // namespace

void init_extern(py::module_& m) {
  m.def("_extern_define", [](const std::string& callee, const std::string& text) {
    check(ttpu_extern_define(callee.c_str(), text.c_str()), "extern define");
  });
  m.def("_extern_call", &extern_call);
}

}  // namespace torchtpu
