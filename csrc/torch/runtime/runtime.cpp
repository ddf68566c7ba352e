#include "runtime/runtime.h"

#include "runtime/allocator.h"

#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/COW.h>
#include <pybind11/pybind11.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace torchtpu {

namespace {

std::mutex runtime_mutex;
std::atomic<ttpu_runtime*> runtime_instance{nullptr};
std::string last_runtime_error;
std::vector<std::string> search_dirs;
uint64_t seed_at_creation = c10::default_rng_seed_val;

int env_device_count() {
  const char* value = std::getenv("TORCHTPU_NUM_DEVICES");
  if (value == nullptr || *value == '\0') {
    return 1;
  }
  char* end = nullptr;
  long count = std::strtol(value, &end, 10);
  TORCH_CHECK_VALUE(
      end != value && *end == '\0' && count > 0 && count <= 1024,
      "TORCHTPU_NUM_DEVICES must be a positive integer, got '", value, "'");
  return static_cast<int>(count);
}

// Creates the runtime or returns the engine's status (runtime_mutex held).
ttpu_status* create_runtime_locked() {
  ttpu_runtime_options options{};
  const char* plugin = std::getenv("TORCHTPU_PLUGIN");
  options.plugin_path = (plugin != nullptr && *plugin != '\0') ? plugin : nullptr;
  options.cpu_device_count = env_device_count();
  std::vector<const char*> dirs;
  for (const std::string& dir : search_dirs) {
    dirs.push_back(dir.c_str());
  }
  dirs.push_back(nullptr);
  options.search_dirs = dirs.data();
  ttpu_runtime* created = nullptr;
  ttpu_status* status = ttpu_runtime_create(&options, &created);
  for (int device = 0; status == nullptr &&
                      device < ttpu_runtime_device_count(created);
       ++device) {
    status = ttpu_runtime_manual_seed(created, device, seed_at_creation);
  }
  if (status != nullptr && created != nullptr) {
    ttpu_runtime_destroy(created);
  }
  if (status == nullptr) {
    // The runtime is never destroyed: tensors (and their buffers) can
    // outlive every static destructor at interpreter shutdown, and releasing
    // a buffer after its runtime is gone would crash the exiting process.
    runtime_instance.store(created, std::memory_order_release);
    last_runtime_error.clear();
  }
  return status;
}

thread_local c10::DeviceIndex thread_current_device = 0;

}  // namespace

void set_plugin_search_dirs(const std::vector<std::string>& dirs) {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  search_dirs = dirs;
}

uint64_t initial_seed() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  return seed_at_creation;
}

bool set_initial_seed_if_not_created(uint64_t seed) {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  if (runtime_if_created() != nullptr) {
    return false;
  }
  seed_at_creation = seed;
  return true;
}

ttpu_runtime* runtime_if_created() {
  return runtime_instance.load(std::memory_order_acquire);
}

ttpu_runtime* runtime() {
  ttpu_runtime* existing = runtime_if_created();
  if (existing != nullptr) {
    return existing;
  }
  std::lock_guard<std::mutex> lock(runtime_mutex);
  existing = runtime_if_created();
  if (existing != nullptr) {
    return existing;
  }
  ttpu_status* status = create_runtime_locked();
  if (status == nullptr) {
    return runtime_if_created();
  }
  std::string message = ttpu_status_message(status);
  // A setting the engine refused (an environment variable's value) is not
  // a missing plugin.
  const bool bad_setting = ttpu_status_code(status) == TTPU_INVALID_ARGUMENT;
  ttpu_status_free(status);
  last_runtime_error = message;
  // The engine's message says what it looked for; add what to do about it
  // when it does not already.
  const bool says_what_to_install =
      bad_setting || message.find("pip install") != std::string::npos;
  TORCH_CHECK(
      false, "torchtpu could not start the tpu runtime: ", message,
      says_what_to_install
          ? ""
          : ". Install a PJRT plugin (`pip install xla-cpu-pjrt` for the CPU "
            "plugin, `pip install libtpu` on a TPU VM) or set "
            "TORCHTPU_PLUGIN to the path of a PJRT plugin library.");
}

int device_count_noexcept() {
  try {
    return ttpu_runtime_device_count(runtime());
  } catch (const std::exception&) {
    return 0;
  }
}

std::string runtime_error_message() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  return last_runtime_error;
}

void throw_status(ttpu_status* status, const char* what) {
  const ttpu_code code = ttpu_status_code(status);
  std::string message = ttpu_status_message(status);
  ttpu_status_free(status);
  // A linear algebra error names the function the way the CPU's does
  // ("linalg.inv: ..."): the message is the CPU's, word for word.
  if (code == TTPU_LINALG_ERROR) {
    TORCH_CHECK_LINALG(false, message);
  }
  if (what != nullptr && *what != '\0') {
    message = std::string(what) + ": " + message;
  }
  switch (code) {
    case TTPU_INDEX_ERROR:
      TORCH_CHECK_INDEX(false, message);
    case TTPU_UNIMPLEMENTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, message);
    case TTPU_RESOURCE_EXHAUSTED:
      TORCH_CHECK_WITH(OutOfMemoryError, false, message);
    default:
      TORCH_CHECK(false, message);
  }
}

ttpu_dtype to_ttpu_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool: return TTPU_BOOL;
    case c10::ScalarType::Byte: return TTPU_U8;
    case c10::ScalarType::Char: return TTPU_I8;
    case c10::ScalarType::Short: return TTPU_I16;
    case c10::ScalarType::Int: return TTPU_I32;
    case c10::ScalarType::Long: return TTPU_I64;
    case c10::ScalarType::Half: return TTPU_F16;
    case c10::ScalarType::BFloat16: return TTPU_BF16;
    case c10::ScalarType::Float: return TTPU_F32;
    case c10::ScalarType::Double: return TTPU_F64;
    case c10::ScalarType::UInt16: return TTPU_U16;
    case c10::ScalarType::UInt32: return TTPU_U32;
    case c10::ScalarType::UInt64: return TTPU_U64;
    case c10::ScalarType::ComplexFloat: return TTPU_C64;
    case c10::ScalarType::ComplexDouble: return TTPU_C128;
    default: return TTPU_DTYPE_NONE;
  }
}

ttpu_dtype to_ttpu_dtype_checked(c10::ScalarType type) {
  ttpu_dtype dtype = to_ttpu_dtype(type);
  TORCH_CHECK_NOT_IMPLEMENTED(
      dtype != TTPU_DTYPE_NONE, "dtype ", type,
      " is not supported on device 'tpu'");
  return dtype;
}

ttpu_buffer* buffer_of(const at::Tensor& tensor) {
  return static_cast<ttpu_buffer*>(
      tensor.unsafeGetTensorImpl()->unsafe_storage().data_ptr().get());
}

void materialize_if_cow(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) {
    return;
  }
  c10::StorageImpl* storage =
      tensor.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (storage != nullptr && c10::impl::cow::is_cow_data_ptr(storage->data_ptr())) {
    // Copies through the allocator's copy_data (a buffer copy) unless this
    // storage holds the last reference.
    (void)storage->mutable_data_ptr();
  }
}

ttpu_buffer* writable_buffer_of(const at::Tensor& tensor) {
  materialize_if_cow(tensor);
  return buffer_of(tensor);
}

bool covers_whole_storage(const at::Tensor& tensor) {
  return tensor.is_contiguous() && tensor.storage_offset() == 0 &&
         static_cast<size_t>(tensor.numel()) * tensor.element_size() ==
             tensor.unsafeGetTensorImpl()->unsafe_storage().nbytes();
}

ttpu_tensor engine_tensor(const at::Tensor& tensor) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      tensor.dim() <= TTPU_MAX_DIMS, "tpu tensors have at most ",
      TTPU_MAX_DIMS, " dimensions, got ", tensor.dim());
  ttpu_tensor desc{};
  desc.buffer = buffer_of(tensor);
  desc.dtype = to_ttpu_dtype_checked(tensor.scalar_type());
  desc.ndim = static_cast<int>(tensor.dim());
  desc.sizes = tensor.sizes().data();
  desc.strides = tensor.strides().data();
  desc.offset = tensor.storage_offset();
  return desc;
}

c10::DeviceIndex current_device() {
  return thread_current_device;
}

void check_device_index(c10::DeviceIndex index) {
  const int count = ttpu_runtime_device_count(runtime());
  TORCH_CHECK_INDEX(
      index >= 0 && index < count, "tpu device index ", static_cast<int>(index),
      " is out of range: torchtpu has ", count, " device(s)");
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  thread_current_device = index;
}

}  // namespace torchtpu

// ------------------------------------------------------------ device API
// What torch.tpu's device and memory functions need beyond PyTorch's own
// hooks: device properties, memory figures, the allocator's statistics.

namespace torchtpu {

namespace {

namespace cda = c10::CachingDeviceAllocator;

c10::DeviceIndex resolve_index(int device) {
  const c10::DeviceIndex index =
      device < 0 ? current_device() : static_cast<c10::DeviceIndex>(device);
  check_device_index(index);
  return index;
}

pybind11::dict stat_dict(const cda::Stat& stat) {
  pybind11::dict out;
  out["current"] = stat.current;
  out["peak"] = stat.peak;
  out["allocated"] = stat.allocated;
  out["freed"] = stat.freed;
  return out;
}

// Only the "all" pool: storages are not split into small and large pools.
pybind11::dict pool_dict(const cda::StatArray& stats) {
  pybind11::dict out;
  out["all"] = stat_dict(stats[static_cast<size_t>(cda::StatType::AGGREGATE)]);
  return out;
}

}  // namespace

void init_device_api(pybind11::module_& m) {
  m.def("_device_properties", [](int device) {
    ttpu_device_info info{};
    check(ttpu_runtime_device_info(runtime(), resolve_index(device), &info),
          "tpu device properties");
    pybind11::dict out;
    out["kind"] = std::string(info.kind);
    out["id"] = info.id;
    out["bytes_limit"] = info.bytes_limit;
    out["plugin_bytes_in_use"] = info.bytes_in_use;
    return out;
  }, pybind11::arg("device") = -1,
     "What the plugin says about a device: kind, global id, memory limit "
     "(-1: not reported).");
  m.def("_release_host_heap", [] {
    if (ttpu_runtime* rt = runtime_if_created()) ttpu_runtime_release_host_heap(rt);
  },
        "On the CPU plugin, returns the free heap memory kept for reuse to "
        "the system.");
  m.def("_keeps_host_heap", [] { return ttpu_runtime_keeps_host_heap(runtime()) != 0; },
        "Whether the CPU plugin's freed memory is kept for reuse.");
  m.def("_mem_get_info", [](int device) {
    const auto info = memory_info(resolve_index(device));
    return pybind11::make_tuple(info.first, info.second);
  }, pybind11::arg("device") = -1, "(free, total) bytes of a device.");
  m.def("_device_memory_stats", [](int device) {
    const cda::DeviceStats stats = device_stats(resolve_index(device));
    pybind11::dict out;
    out["allocation"] = pool_dict(stats.allocation);
    out["segment"] = pool_dict(stats.segment);
    out["active"] = pool_dict(stats.active);
    out["inactive_split"] = pool_dict(stats.inactive_split);
    out["allocated_bytes"] = pool_dict(stats.allocated_bytes);
    out["reserved_bytes"] = pool_dict(stats.reserved_bytes);
    out["active_bytes"] = pool_dict(stats.active_bytes);
    out["inactive_split_bytes"] = pool_dict(stats.inactive_split_bytes);
    out["requested_bytes"] = pool_dict(stats.requested_bytes);
    out["num_alloc_retries"] = stats.num_alloc_retries;
    out["num_device_alloc"] = stats.num_device_alloc;
    out["num_device_free"] = stats.num_device_free;
    return out;
  }, pybind11::arg("device") = -1,
     "The allocator's statistics of a device, nested as PyTorch's.");
  m.def("_reset_accumulated_memory_stats", [](int device) {
    ttpu_runtime_reset_accumulated(runtime(), resolve_index(device));
  }, pybind11::arg("device") = -1);
}

}  // namespace torchtpu
