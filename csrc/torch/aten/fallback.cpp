// Ops without a tpu kernel: a NotImplementedError naming the op and the
// switch, or (opt-in, TORCHTPU_CPU_FALLBACK=1) a counted run on the CPU.
#include "aten/ops.h"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace torchtpu {

namespace {

bool env_enables_fallback() {
  const char* value = std::getenv("TORCHTPU_CPU_FALLBACK");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

std::atomic<bool> fallback_enabled{env_enables_fallback()};
std::mutex counts_mutex;
std::map<std::string, int64_t> counts;

}  // namespace

bool cpu_fallback_enabled() {
  return fallback_enabled.load();
}

void set_cpu_fallback_enabled(bool enabled) {
  fallback_enabled.store(enabled);
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  return counts;
}

bool try_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!cpu_fallback_enabled()) {
    return false;
  }
  const std::string name = c10::toString(op.operator_name());
  bool first_use = false;
  {
    std::lock_guard<std::mutex> lock(counts_mutex);
    first_use = counts[name]++ == 0;
  }
  // TORCH_WARN_ONCE is once per call site, not per op: keep our own set.
  if (first_use) {
    TORCH_WARN("The operator '", name, "' is not implemented for device "
               "'tpu' and runs on the CPU (TORCHTPU_CPU_FALLBACK=1). This is "
               "slow: its data goes to the host and back.");
  }
  at::native::cpu_fallback(op, stack);
  return true;
}

void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (try_cpu_fallback(op, stack)) {
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "The operator '", c10::toString(op.operator_name()),
      "' is not implemented for device 'tpu'. Set TORCHTPU_CPU_FALLBACK=1 to "
      "run it on the CPU (slow).");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
}

}  // namespace torchtpu
