// torchtpu._C AOT entry points: compile StableHLO programs for TPU
// topologies through the engine's libtpu loader (ttpu_aot.h). Python's
// torchtpu.aot decides what to compile and prints the report; this file
// only translates.
#include "runtime/runtime.h"

#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <cstdlib>
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
  d["platform_name"] = ttpu_aot_target_platform_name(t);
  int major = 0, minor = 0;
  ttpu_aot_compiler_api_version(st.compiler, &major, &minor);
  d["api_version"] = py::make_tuple(major, minor);
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


// ------------------------------------------------ filling a TPU cache

// Programs the runtime lowered while the sink was installed. The sink runs
// on whichever thread compiles, under the runtime's lock and maybe without
// the GIL, so it only copies bytes under its own mutex.
struct FillProgram {
  std::string what, text, results, options;
  std::vector<int64_t> key;
  int n_results = 0;
  bool has_options = false;
};

struct FillCapture {
  std::mutex mu;
  std::vector<FillProgram> programs;
  bool on = false;
};

FillCapture& capture() {
  static FillCapture* c = new FillCapture();  // the sink may outlive a call
  return *c;
}

void capture_program(void* user, const char* what, const int64_t* key,
                     size_t n_key, const char* text, size_t text_len,
                     const void* results, size_t results_len, int n_results,
                     const void* options, size_t options_len) {
  auto* c = static_cast<FillCapture*>(user);
  FillProgram p;
  p.what = what ? what : "";
  p.key.assign(key, key + n_key);
  p.text.assign(text, text_len);
  p.results.assign(static_cast<const char*>(results), results_len);
  p.n_results = n_results;
  p.has_options = options != nullptr && options_len > 0;
  if (p.has_options)
    p.options.assign(static_cast<const char*>(options), options_len);
  std::lock_guard<std::mutex> lock(c->mu);
  c->programs.push_back(std::move(p));
}

// unload: the runtime's loaded programs are unloaded first, so that every
// program the recorded work runs is lowered again and seen, also those
// earlier work compiled (ttpu_aot_unload_programs).
void fill_begin(bool unload) {
  if (unload)
    check(ttpu_aot_unload_programs(runtime()), "torchtpu.aot");
  FillCapture& c = capture();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.programs.clear();
    c.on = true;
  }
  check(ttpu_aot_set_program_sink(runtime(), capture_program, &c),
        "torchtpu.aot");
}

// The programs recorded so far, taken; stop: the sink is removed first.
py::list fill_take(bool stop) {
  FillCapture& c = capture();
  if (stop)
    check(ttpu_aot_set_program_sink(runtime(), nullptr, nullptr),
          "torchtpu.aot");
  std::vector<FillProgram> got;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    got.swap(c.programs);
    if (stop) c.on = false;
  }
  py::list out;
  for (const auto& p : got) {
    py::dict d;
    d["what"] = p.what;
    d["key"] = py::tuple(py::cast(p.key));
    d["text"] = py::bytes(p.text);
    d["results"] = py::bytes(p.results);
    d["n_results"] = p.n_results;
    d["options"] = p.has_options ? py::object(py::bytes(p.options)) : py::none();
    out.append(d);
  }
  return out;
}

py::list fill_end() { return fill_take(true); }

// Open caches by (topology, directory), kept until exit like the targets.
std::map<std::pair<std::string, std::string>, ttpu_aot_cache*>& caches() {
  static auto* m = new std::map<std::pair<std::string, std::string>, ttpu_aot_cache*>();
  return *m;
}

// Caller holds st.mu.
ttpu_aot_cache* cache_locked(AotState& st, const std::string& topology,
                             const std::string& dir) {
  auto k = std::make_pair(topology, dir);
  auto it = caches().find(k);
  if (it != caches().end()) return it->second;
  ttpu_aot_target* t = target_locked(st, topology);
  ttpu_aot_cache* c = nullptr;
  check(ttpu_aot_cache_open(st.compiler, t, dir.c_str(), &c), "torchtpu.aot");
  caches()[k] = c;
  return c;
}

std::string fill_namespace(const std::string& topology, const std::string& dir) {
  AotState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return ttpu_aot_cache_namespace(cache_locked(st, topology, dir));
}

py::tuple fill_one(const std::string& topology, const std::string& dir,
                   const std::vector<int64_t>& key, const std::string& text,
                   const std::string& results, int n_results,
                   const py::object& options) {
  TORCH_CHECK_VALUE(!key.empty(), "torchtpu.aot: empty program key");
  std::string opts;
  if (!options.is_none()) opts = options.cast<std::string>();
  AotState& st = state();
  ttpu_aot_fill_outcome outcome = TTPU_AOT_FILL_COMPILED;
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ttpu_aot_cache* c = cache_locked(st, topology, dir);
    ttpu_status* s;
    {
      py::gil_scoped_release no_gil;
      s = ttpu_aot_cache_fill(c, key.data(), key.size(), text.data(),
                              text.size(), results.data(), results.size(),
                              n_results, opts.empty() ? nullptr : opts.data(),
                              opts.size(), &outcome, &bytes);
    }
    check(s, "");
  }
  return py::make_tuple(outcome == TTPU_AOT_FILL_CACHED ? "cached" : "compiled",
                        bytes);
}

std::string namespace_id(const std::string& name, const std::string& version,
                         int major, int minor, const py::object& options_id,
                         bool host_code) {
  char out[17];
  std::string oid;
  if (!options_id.is_none()) oid = options_id.cast<std::string>();
  ttpu_aot_namespace_id(name.c_str(), version.c_str(), major, minor,
                        options_id.is_none() ? nullptr : oid.c_str(),
                        host_code ? 1 : 0, out);
  return out;
}

py::object read_entry(const std::string& path) {
  ttpu_aot_entry e;
  if (!ttpu_aot_read_entry(path.c_str(), &e)) return py::none();
  py::dict d;
  d["namespace"] = std::string(e.ns);
  d["key"] = py::tuple(py::cast(std::vector<int64_t>(e.key, e.key + e.n_key)));
  d["n_results"] = e.n_results;
  d["exe_bytes"] = e.exe_len;
  ttpu_aot_entry_free(&e);
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
  m.def("_aot_define_callee", [](const std::string& platform, const std::string& callee,
                                 const std::string& text) {
    check(ttpu_aot_define_callee(platform.c_str(), callee.c_str(), text.c_str()),
          "torchtpu.kernels");
  }, py::arg("platform"), py::arg("callee"), py::arg("text"),
        "A JAX callee's text lowered for another platform (ttpu_aot.h).");
  m.def("_aot_retarget", [](py::bytes text, const std::string& platform) {
    const std::string in = text;
    char* out = nullptr;
    size_t n = 0;
    check(ttpu_aot_retarget(in.data(), in.size(), platform.c_str(), &out, &n),
          "torchtpu.kernels");
    py::bytes result(out, n);
    std::free(out);
    return result;
  }, py::arg("text"), py::arg("platform"),
        "The program's text with each JAX callee defined for platform swapped in.");
  m.def("_aot_fill_take", [] { return fill_take(false); },
        "The programs recorded since _aot_fill_begin or the last take.");
  m.def("_aot_fill_begin", &fill_begin, py::arg("unload") = false,
        "Starts recording every disk-cacheable program the runtime lowers.");
  m.def("_aot_fill_end", &fill_end,
        "Stops recording; the programs (key, text, result plans, options).");
  m.def("_aot_fill_namespace", &fill_namespace, py::arg("topology"),
        py::arg("dir"),
        "The namespace directory a libtpu client for the topology reads.");
  m.def("_aot_fill_one", &fill_one, py::arg("topology"), py::arg("dir"),
        py::arg("key"), py::arg("text"), py::arg("results"),
        py::arg("n_results"), py::arg("options") = py::none(),
        "Compiles one recorded program for the topology into the cache "
        "directory: ('compiled' | 'cached', bytes written).");
  m.def("_disk_namespace_id", &namespace_id, py::arg("platform_name"),
        py::arg("platform_version"), py::arg("api_major"),
        py::arg("api_minor"), py::arg("options_id") = py::none(),
        py::arg("host_code") = false,
        "The disk cache namespace id for a plugin reporting these.");
  m.def("_compile_options_id", [] { return std::string(ttpu_aot_options_id()); });
  m.def("_disk_read_entry", &read_entry, py::arg("path"),
        "A disk cache entry file checked and parsed (not loaded), or None.");
  m.def("_aot_compile_many", &compile_many, py::arg("topology"),
        py::arg("texts"), py::arg("num_replicas") = 1,
        py::arg("num_partitions") = 1, py::arg("threads") = 1,
        "Compiles a list of StableHLO texts for the topology on that many "
        "compile threads: per program its stats or error, and the seconds "
        "it took; the batch's wall time.");
}

}  // namespace torchtpu
