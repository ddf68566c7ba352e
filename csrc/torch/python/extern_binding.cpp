// Functions defined outside the engine (torchtpu.jax_op): the Python side
// defines a callee's StableHLO text once and calls it on tpu tensors with
// preallocated outputs, as the engine op "torchtpu::extern_call".
#include "runtime/engine_call.h"

#include <torch/csrc/utils/pybind.h>

#include <optional>
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

// Engine views of tensors: the tensors stay alive (held by the caller's
// list) while the views are used.
std::vector<ttpu_tensor> engine_tensors(const std::vector<at::Tensor>& ts) {
  std::vector<ttpu_tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(engine_tensor(t));
  return out;
}

// A loop body (torchtpu.scan): the ops between begin and end are recorded
// as a function of params returning results; no results drops them.
std::string end_function(const std::vector<at::Tensor>& params,
                         const std::optional<std::vector<at::Tensor>>& results) {
  std::vector<ttpu_tensor> p, r;
  char name[128];
  try {
    p = engine_tensors(params);
    if (results) r = engine_tensors(*results);
  } catch (...) {
    // The body ends whatever happens: the engine would go on recording.
    ttpu_status_free(ttpu_runtime_end_function(runtime(), nullptr, 0, nullptr, 0, name,
                                               sizeof(name)));
    throw;
  }
  py::gil_scoped_release no_gil;
  check(ttpu_runtime_end_function(runtime(), p.data(), static_cast<int>(p.size()),
                                  results ? r.data() : nullptr,
                                  static_cast<int>(r.size()), name, sizeof(name)),
        "tracing a loop body");
  return name;
}

std::string scan_define(const std::string& body, int64_t length, bool reverse,
                        const std::vector<at::Tensor>& carry,
                        const std::vector<at::Tensor>& xs,
                        const std::vector<at::Tensor>& consts,
                        const std::vector<at::Tensor>& ys) {
  std::vector<ttpu_tensor> c = engine_tensors(carry), x = engine_tensors(xs),
                           k = engine_tensors(consts), y = engine_tensors(ys);
  char name[128];
  check(ttpu_scan_define(body.c_str(), length, reverse ? 1 : 0, c.data(), static_cast<int>(c.size()),
                         x.data(), static_cast<int>(x.size()), k.data(),
                         static_cast<int>(k.size()), y.data(),
                         static_cast<int>(y.size()), name, sizeof(name)),
        "scan");
  return name;
}

}  // namespace

void init_extern(py::module_& m) {
  m.def("_extern_define", [](const std::string& callee, const std::string& text) {
    check(ttpu_extern_define(callee.c_str(), text.c_str()), "extern define");
  });
  m.def("_extern_call", &extern_call);
  m.def("_begin_function", [] {
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_begin_function(runtime()), "tracing a loop body");
  });
  m.def("_end_function", &end_function, py::arg("params"), py::arg("results") = py::none());
  m.def("_scan_define", &scan_define);
}

}  // namespace torchtpu
