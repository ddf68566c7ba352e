// torchtpu._C AOT entry points: compile StableHLO programs for TPU
// topologies through the engine's libtpu loader (ttpu_aot.h). Python's
// torchtpu.aot decides what to compile and prints the report; this file
// only translates.
#include "runtime/runtime.h"

#include <torch/extension.h>

#include <chrono>
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

// Compiles every text for the topology on `threads` compile threads
// (ttpu_aot_compile_many): per program its stats or its error ("error",
// and "oom" for RESOURCE_EXHAUSTED) and the seconds its compile took; and
// the wall time of the whole batch.
py::dict compile_many(const std::string& name,
                      const std::vector<std::string>& texts, int num_replicas,
                      int num_partitions, int threads) {
  AotState& st = state();
  const size_t n = texts.size();
  std::vector<const char*> ptrs(n);
  std::vector<size_t> lens(n);
  for (size_t k = 0; k < n; ++k) {
    ptrs[k] = texts[k].data();
    lens[k] = texts[k].size();
  }
  std::vector<ttpu_aot_stats> stats(n);
  std::vector<ttpu_status*> status(n, nullptr);
  std::vector<double> seconds(n, 0.0);
  double wall = 0;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ttpu_aot_target* t = target_locked(st, name);
    ttpu_status* s;
    {
      py::gil_scoped_release no_gil;
      auto t0 = std::chrono::steady_clock::now();
      s = ttpu_aot_compile_many(t, static_cast<int>(n), ptrs.data(),
                                lens.data(), num_replicas, num_partitions,
                                threads, stats.data(), status.data(),
                                seconds.data());
      wall = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           t0)
                 .count();
    }
    if (s != nullptr) {
      for (ttpu_status* e : status) ttpu_status_free(e);
      check(s, "torchtpu.aot");
    }
  }
  py::list programs;
  for (size_t k = 0; k < n; ++k) {
    py::dict d;
    d["seconds"] = seconds[k];
    if (status[k] != nullptr) {
      d["code"] = ttpu_status_code(status[k]) == TTPU_RESOURCE_EXHAUSTED
                      ? "oom"
                      : "error";
      d["error"] = std::string(ttpu_status_message(status[k]));
      ttpu_status_free(status[k]);
      programs.append(d);
      continue;
    }
    const ttpu_aot_stats& a = stats[k];
    d["argument_bytes"] = a.argument_bytes;
    d["output_bytes"] = a.output_bytes;
    d["alias_bytes"] = a.alias_bytes;
    d["temp_bytes"] = a.temp_bytes;
    d["generated_code_bytes"] = a.generated_code_bytes;
    d["peak_bytes"] = a.peak_bytes;
    d["flops"] = a.flops;
    d["transcendentals"] = a.transcendentals;
    d["bytes_accessed"] = a.bytes_accessed;
    d["optimal_seconds"] = a.optimal_seconds;
    programs.append(d);
  }
  py::dict out;
  out["programs"] = programs;
  out["wall_seconds"] = wall;
  return out;
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
  m.def("_aot_compile_many", &compile_many, py::arg("topology"),
        py::arg("texts"), py::arg("num_replicas") = 1,
        py::arg("num_partitions") = 1, py::arg("threads") = 1,
        "Compiles a list of StableHLO texts for the topology on that many "
        "compile threads: per program its stats or error, and the seconds "
        "it took; the batch's wall time.");
}

}  // namespace torchtpu
