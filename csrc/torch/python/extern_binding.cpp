// Functions defined outside the engine (torchtpu.jax_op): the Python side
// defines a callee's StableHLO text once and calls it on tpu tensors with
// preallocated outputs, as the engine op "torchtpu::extern_call".
#include "runtime/engine_call.h"

#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

namespace py = pybind11;

namespace torchtpu {

namespace {

void extern_call(const std::string& callee, const std::vector<at::Tensor>& inputs,
                 const std::vector<at::Tensor>& outputs) {
  EngineCall call("torchtpu::extern_call", "calling @" + callee);
  call.tensors(inputs).str(callee);
  for (const at::Tensor& t : outputs) {
    call.output(t);
  }
  py::gil_scoped_release no_gil;
  call.run();
}

}  // namespace

void init_extern(py::module_& m) {
  m.def("_extern_define", [](const std::string& callee, const std::string& text) {
    check(ttpu_extern_define(callee.c_str(), text.c_str()), "extern define");
  });
  m.def("_extern_call", &extern_call);
}

}  // namespace torchtpu
