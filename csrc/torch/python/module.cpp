// torchtpu._C: what the Python package needs from the glue and the engine.
#include "distributed/distributed.h"
#include "runtime/generator.h"
#include "runtime/guard.h"
#include "aten/ops.h"
#include "runtime/runtime.h"

#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <string>
#include <vector>

namespace py = pybind11;

namespace torchtpu {

namespace {

c10::DeviceIndex resolve_device(int device) {
  return device < 0 ? current_device() : static_cast<c10::DeviceIndex>(device);
}

py::dict stats_dict(int device) {
  ttpu_stats stats{};
  ttpu_runtime_stats(runtime(), device, &stats);
  py::dict out;
  out["compiles"] = stats.compiles;
  out["compile_seconds"] = stats.compile_seconds;
  out["cache_hits"] = stats.cache_hits;
  out["executions"] = stats.executions;
  out["h2d_bytes"] = stats.h2d_bytes;
  out["d2h_bytes"] = stats.d2h_bytes;
  out["bytes_in_use"] = stats.bytes_in_use;
  out["peak_bytes_in_use"] = stats.peak_bytes_in_use;
  out["live_buffers"] = stats.live_buffers;
  out["disk_hits"] = stats.disk_hits;
  out["disk_load_seconds"] = stats.disk_load_seconds;
  out["disk_writes"] = stats.disk_writes;
  out["recompiles"] = stats.recompiles;
  out["graph_replays"] = stats.graph_replays;
  out["fused_windows"] = stats.windows;
  out["fused_ops"] = stats.window_ops;
  out["fused_max_ops"] = stats.window_max_ops;
  static const char* const kEnds[TTPU_END_COUNT] = {
      "host_read", "sync", "op_limit", "step_repeat", "device_change",
      "graph_end", "autograd_pass", "layer_repeat"};
  py::dict ends;
  for (int k = 0; k < TTPU_END_COUNT; ++k) {
    ends[kEnds[k]] = stats.window_ends[k];
  }
  out["fused_window_ends"] = ends;
  out["programs_loaded"] = stats.programs_loaded;
  out["programs_evicted"] = stats.programs_evicted;
  out["programs_reloaded"] = stats.programs_reloaded;
  out["programs_retired"] = stats.programs_retired;
  out["programs_shared"] = stats.programs_shared;
  out["program_cache_size"] = ttpu_runtime_program_cache_size(runtime());
  return out;
}

// The loaded plugin's capabilities (ttpu_runtime_caps), by name.
py::dict caps_dict() {
  ttpu_caps caps{};
  ttpu_runtime_caps(runtime(), &caps);
  py::dict out;
  out["serialize_executables"] = caps.serialize_executables != 0;
  out["topology_compile"] = caps.topology_compile != 0;
  out["memory_stats"] = caps.memory_stats != 0;
  out["cost_analysis"] = caps.cost_analysis != 0;
  out["cross_process_collectives"] = caps.cross_process_collectives != 0;
  out["host_code"] = caps.host_code != 0;
  return out;
}

py::tuple stream_tuple(const c10::Stream& stream) {
  return py::make_tuple(stream.id(), static_cast<int>(stream.device_index()),
                        static_cast<int>(stream.device_type()));
}

}  // namespace

}  // namespace torchtpu

namespace torchtpu { void init_aot(py::module_& m); }  // aot_binding.cpp
namespace torchtpu { void init_coll(py::module_& m); }  // coll_binding.cpp
namespace torchtpu { void init_graph_replay(py::module_& m); }  // graph_replay.cpp
namespace torchtpu { void init_extern(py::module_& m); }  // extern_binding.cpp
namespace torchtpu { void init_profiler(py::module_& m); }  // runtime/profiler.cpp
namespace torchtpu { void init_device_api(py::module_& m); }  // runtime/runtime.cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace torchtpu;
  init_aot(m);
  init_graph_replay(m);
  init_extern(m);
  init_profiler(m);
  init_device_api(m);
  m.doc() = "torchtpu C++ glue: PrivateUse1 registration and engine access";

  m.def("_init", [] { runtime(); },
        "Creates the runtime now (raises if the plugin cannot be loaded).");
  m.def("_set_plugin_search_dirs", &set_plugin_search_dirs,
        "Directories searched for a PJRT plugin package (sys.path).");
  m.def("_is_initialized", [] { return runtime_if_created() != nullptr; });
  m.def("_runtime_error", &runtime_error_message,
        "Message of the last failed runtime creation.");
  m.def("_device_count", &device_count_noexcept);
  m.def("_get_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int device) {
    set_current_device(static_cast<c10::DeviceIndex>(device));
  });
  m.def("_exchange_device", [](int device) {
    const int previous = current_device();
    if (device >= 0) {
      set_current_device(static_cast<c10::DeviceIndex>(device));
    }
    return previous;
  });
  m.def("_synchronize", [](int device) {
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_synchronize(runtime(), device), "tpu synchronize");
  }, py::arg("device") = -1);

  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(resolve_device(device))));
  });

  m.def("_manual_seed_all", &manual_seed_all);
  m.def("_initial_seed_at_creation", &initial_seed);

  m.def("_memory_stats", &stats_dict, py::arg("device") = -1);
  m.def("_caps", &caps_dict);
  m.def("_reset_peak_memory_stats", [](int device) {
    ttpu_runtime_reset_peak(runtime(), device);
  });
  m.def("_platform", [] {
    ttpu_runtime* rt = runtime();
    int major = 0;
    int minor = 0;
    ttpu_runtime_plugin_api_version(rt, &major, &minor);
    py::dict out;
    out["name"] = ttpu_runtime_platform_name(rt);
    out["version"] = ttpu_runtime_platform_version(rt);
    out["plugin_path"] = ttpu_runtime_plugin_path(rt);
    out["api_version"] = py::make_tuple(major, minor);
    out["device_count"] = ttpu_runtime_device_count(rt);
    out["compile_threads"] = ttpu_runtime_compile_threads(rt);
    out["compile_options"] = ttpu_runtime_compile_options_id(rt);
    return out;
  });
  m.def("_compile_stats", [] { return stats_dict(-1); });
  m.def("_last_compile_reason", [] {
    char reason[512];
    ttpu_runtime_last_compile_reason(runtime(), reason, sizeof(reason));
    return std::string(reason);
  });

  m.def("_fallback_counts", &fallback_counts);
  m.def("_cpu_replay_counts", &cpu_replay_counts);
  m.def("_set_eager_mode", [](const std::string& mode) {
    ttpu_mode m = TTPU_MODE_STRICT;
    if (mode == "debug") {
      m = TTPU_MODE_DEBUG;
    } else if (mode == "fused") {
      m = TTPU_MODE_FUSED;
    } else if (mode != "strict") {
      throw py::value_error("eager mode must be 'debug', 'strict' or 'fused', not '" +
                            mode + "'");
    }
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_set_mode(runtime(), m), "set_eager_mode");
  });
  m.def("_eager_mode", [] {
    switch (ttpu_runtime_mode(runtime())) {
      case TTPU_MODE_DEBUG:
        return "debug";
      case TTPU_MODE_FUSED:
        return "fused";
      default:
        return "strict";
    }
  });
  m.def("_flush", [] {
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_flush(runtime()), "tpu fused window");
  });
  m.def("_begin_graph", [](const std::string& name) {
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_begin_graph(runtime(), name.c_str()), "compiled graph");
  });
  m.def("_end_graph", [] {
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_end_graph(runtime()), "compiled graph");
  });
  m.def("_set_fused_window_limit", [](int max_ops) {
    ttpu_runtime_set_window_limit(runtime(), max_ops);
  });
  m.def("_compile_log", [] {
    py::list out;
    const int n = ttpu_runtime_compile_log_count(runtime());
    for (int i = 0; i < n; ++i) {
      ttpu_compile_record r{};
      if (!ttpu_runtime_compile_log_get(runtime(), i, &r)) break;
      py::dict d;
      d["what"] = std::string(r.what);
      d["reason"] = std::string(r.reason);
      d["seconds"] = r.seconds;
      d["from_disk"] = r.from_disk != 0;
      d["ops"] = r.n_ops;
      out.append(d);
    }
    return out;
  });
  m.def("_clear_compile_log", [] { ttpu_runtime_compile_log_clear(runtime()); });
  m.def("_programs", [] {
    // The count can grow between the two calls: take what the second gives.
    std::vector<ttpu_program_info> infos(
        static_cast<size_t>(ttpu_runtime_programs(runtime(), nullptr, 0)) + 16);
    const int n = std::min<int>(
        ttpu_runtime_programs(runtime(), infos.data(), static_cast<int>(infos.size())),
        static_cast<int>(infos.size()));
    py::list out;
    for (int i = 0; i < n; ++i) {
      const ttpu_program_info& p = infos[static_cast<size_t>(i)];
      py::dict d;
      d["what"] = std::string(p.what);
      d["hits"] = p.hits;
      d["code_bytes"] = p.code_bytes;
      d["temp_bytes"] = p.temp_bytes;
      d["argument_bytes"] = p.argument_bytes;
      d["output_bytes"] = p.output_bytes;
      out.append(d);
    }
    return out;
  });
  m.def("_set_cache_dir", [](const std::string& dir, int64_t max_bytes) {
    check(ttpu_runtime_set_cache_dir(runtime(), dir.c_str(), max_bytes),
          "set_cache_dir");
  }, py::arg("dir"), py::arg("max_bytes") = 0);
  m.def("_cache_dir", [] { return std::string(ttpu_runtime_cache_dir(runtime())); });
  m.def("_set_program_cache_size", [](int64_t n) {
    TORCH_CHECK_VALUE(n >= 0, "program cache size must be >= 0 (0: no bound), got ", n);
    ttpu_runtime_set_program_cache_size(runtime(), n);
  });
  m.def("_program_cache_size", [] {
    return ttpu_runtime_program_cache_size(runtime());
  });
  m.def("_inject_plugin_fault", [](const std::string& slot, int skip, int count) {
    ttpu_debug_inject_plugin_fault(slot.c_str(), skip, count);
  }, py::arg("slot"), py::arg("skip") = 0, py::arg("count") = 1,
     "Testing aid: the next `count` calls of PJRT function `slot` (after "
     "`skip`) fail as a failing plugin would.");
  m.def("_cpu_fallback_enabled", &cpu_fallback_enabled);
  m.def("_set_cpu_fallback", &set_cpu_fallback_enabled);

  m.def("_register_kernels", [] {
    const KernelRegistration& registration = register_engine_kernels();
    return py::make_tuple(registration.registered, registration.skipped);
  }, "Registers the engine's ops; returns (registered, {skipped: why}).");
  m.def("_engine_ops", [] {
    std::vector<std::string> names;
    for (int id = 0; id < ttpu_op_count(); ++id) {
      names.emplace_back(ttpu_op_name(id));
    }
    return names;
  });

  init_distributed(m);
  init_coll(m);

  m.def("_current_stream", [](int device) {
    return stream_tuple(current_stream(resolve_device(device)));
  });
  m.def("_default_stream", [](int device) {
    return stream_tuple(default_stream(resolve_device(device)));
  });
  m.def("_set_stream", [](int64_t stream_id, int device) {
    exchange_stream(c10::Stream(c10::Stream::UNSAFE,
                                tpu_device(resolve_device(device)), stream_id));
  });
}
