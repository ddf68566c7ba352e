// torchtpu._C AOT entry points: compile StableHLO programs for TPU
// topologies through the engine's libtpu loader (ttpu_aot.h). Python's
// torchtpu.aot decides what to compile and prints the report; this file
// only translates.
#include "runtime/runtime.h"

#include <torch/extension.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "ttpu_aot.h"
}

namespace py = pybind11;

namespace torchtpu {

namespace {

// One compiler per process (a plugin cannot be reloaded), and its targets
// by topology name; both live until exit.
struct AotState {
  std::mutex mu;
  ttpu_aot_compiler* compiler = nullptr;
  std::map<std::string, ttpu_aot_target*> targets;
};

AotState& state() {
  static AotState* s = new AotState();  // never destroyed: see above
  return *s;
}

std::string find_compiler(const std::vector<std::string>& dirs) {
  std::vector<const char*> ptrs;
  for (const auto& d : dirs) ptrs.push_back(d.c_str());
  ptrs.push_back(nullptr);
  char* path = nullptr;
  ttpu_status* s = ttpu_aot_find_compiler(ptrs.data(), &path);
  if (s != nullptr) {
    std::string msg = ttpu_status_message(s);
    ttpu_status_free(s);
    throw py::import_error(msg);  // what Python raises for a missing package
  }
  std::string out = path;
  free(path);
  return out;
}

// Loads libtpu at `path` unless a compiler is already loaded; returns the
// loaded one's path (which may differ from `path`: the first load wins).
std::string load_compiler(const std::string& path) {
  AotState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.compiler == nullptr) {
    py::gil_scoped_release no_gil;
    check(ttpu_aot_compiler_load(path.c_str(), &st.compiler),
          "loading libtpu");
  }
  return ttpu_aot_compiler_path(st.compiler);
}

// Caller holds st.mu.
ttpu_aot_target* target_locked(AotState& st, const std::string& name) {
  TORCH_CHECK(st.compiler != nullptr,
              "torchtpu.aot: libtpu is not loaded (call _aot_load first)");
  auto it = st.targets.find(name);
  if (it != st.targets.end()) return it->second;
  ttpu_aot_target* t = nullptr;
  check(ttpu_aot_target_create(st.compiler, name.c_str(), &t),
        "torchtpu.aot");
  st.targets[name] = t;
  return t;
}

py::dict target_info(const std::string& name) {
  AotState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  ttpu_aot_target* t = target_locked(st, name);
  py::dict d;
  d["name"] = ttpu_aot_target_name(t);
  d["device_kind"] = ttpu_aot_target_device_kind(t);
  d["platform_version"] = ttpu_aot_target_platform_version(t);
  d["device_count"] = ttpu_aot_target_device_count(t);
  return d;
}

py::dict compile(const std::string& name, const std::string& mlir,
                 int num_replicas, int num_partitions) {
  AotState& st = state();
  ttpu_aot_stats stats{};
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ttpu_aot_target* t = target_locked(st, name);
    ttpu_status* s;
    {
      py::gil_scoped_release no_gil;
      s = ttpu_aot_compile(t, mlir.data(), mlir.size(), num_replicas,
                           num_partitions, &stats);
    }
    check(s, "");
  }
  py::dict d;
  d["argument_bytes"] = stats.argument_bytes;
  d["output_bytes"] = stats.output_bytes;
  d["alias_bytes"] = stats.alias_bytes;
  d["temp_bytes"] = stats.temp_bytes;
  d["generated_code_bytes"] = stats.generated_code_bytes;
  d["peak_bytes"] = stats.peak_bytes;
  d["flops"] = stats.flops;
  d["transcendentals"] = stats.transcendentals;
  d["bytes_accessed"] = stats.bytes_accessed;
  d["optimal_seconds"] = stats.optimal_seconds;
  return d;
}

}  // namespace

void init_aot(py::module_& m) {
  m.def("_aot_find", &find_compiler, py::arg("search_dirs"),
        "Path of libtpu.so ($TORCHTPU_LIBTPU or a libtpu package); "
        "ImportError saying how to install it.");
  m.def("_aot_load", &load_compiler, py::arg("path"),
        "Loads libtpu once per process; returns the loaded path.");
  m.def("_aot_target", &target_info, py::arg("topology"),
        "Describes a topology such as 'v5e:2x2' (device kind and count).");
  m.def("_aot_compile", &compile, py::arg("topology"), py::arg("mlir"),
        py::arg("num_replicas") = 1, py::arg("num_partitions") = 1,
        "Compiles StableHLO text for the topology; per-device memory stats "
        "and cost analysis.");
}

}  // namespace torchtpu
