#include "runtime/generator.h"

#include "runtime/runtime.h"

#include <ATen/Functions.h>
#include <ATen/core/Generator.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

namespace torchtpu {

namespace {

constexpr size_t kStateBytes = sizeof(TpuGeneratorImpl::State);

TpuGeneratorImpl::State read_device_state(c10::DeviceIndex device) {
  TpuGeneratorImpl::State state{};
  check(ttpu_runtime_get_rng_state(runtime(), device, state.data()),
        "reading the tpu rng state");
  return state;
}

void write_device_state(c10::DeviceIndex device,
                        const TpuGeneratorImpl::State& state) {
  check(ttpu_runtime_set_rng_state(runtime(), device, state.data()),
        "setting the tpu rng state");
}

// The engine owns the seed -> state mapping; a non-default generator asks
// it by seeding the device and reading the state back.
TpuGeneratorImpl::State state_for_seed(c10::DeviceIndex device, uint64_t seed) {
  const TpuGeneratorImpl::State saved = read_device_state(device);
  check(ttpu_runtime_manual_seed(runtime(), device, seed), "seeding tpu");
  const TpuGeneratorImpl::State seeded = read_device_state(device);
  write_device_state(device, saved);
  return seeded;
}

}  // namespace

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex device, bool is_default)
    : c10::GeneratorImpl(tpu_device(device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      is_default_(is_default),
      seed_(is_default ? initial_seed() : c10::default_rng_seed_val) {}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  if (is_default_) {
    check(ttpu_runtime_manual_seed(runtime(), device().index(), seed),
          "seeding tpu");
  } else {
    own_state_valid_ = false;
  }
}

void TpuGeneratorImpl::set_offset(uint64_t /*offset*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "tpu generators have no offset (the engine "
                              "keeps a THREE_FRY state, see get_state)");
}

uint64_t TpuGeneratorImpl::get_offset() const {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "tpu generators have no offset (the engine "
                              "keeps a THREE_FRY state, see get_state)");
}

uint64_t TpuGeneratorImpl::current_seed() const {
  return seed_;
}

uint64_t TpuGeneratorImpl::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom();
  set_current_seed(random);
  return random;
}

TpuGeneratorImpl::State TpuGeneratorImpl::engine_state() const {
  if (is_default_) {
    return read_device_state(device().index());
  }
  if (!own_state_valid_) {
    own_state_ = state_for_seed(device().index(), seed_);
    own_state_valid_ = true;
  }
  return own_state_;
}

void TpuGeneratorImpl::set_engine_state(const State& state) {
  if (is_default_) {
    write_device_state(device().index(), state);
  } else {
    own_state_ = state;
    own_state_valid_ = true;
  }
}

void TpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK_VALUE(static_cast<size_t>(new_state.numel()) == kStateBytes,
                    "RNG state of a tpu generator must be ", kStateBytes,
                    " bytes, got ", new_state.numel());
  State state{};
  std::memcpy(state.data(), new_state.data(), kStateBytes);
  set_engine_state(state);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  const State state = engine_state();
  at::Tensor bytes = at::empty({static_cast<int64_t>(kStateBytes)},
                               at::TensorOptions().dtype(at::kByte));
  std::memcpy(bytes.data_ptr(), state.data(), kStateBytes);
  return bytes.getIntrusivePtr();
}

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* copy = new TpuGeneratorImpl(device().index(), /*is_default=*/false);
  copy->seed_ = seed_;
  copy->own_state_ = engine_state();
  copy->own_state_valid_ = true;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::mutex mutex;
  // A deque keeps references stable as devices are added.
  static std::deque<at::Generator> generators;
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mutex);
  while (generators.size() <= static_cast<size_t>(device)) {
    generators.push_back(at::make_generator<TpuGeneratorImpl>(
        static_cast<c10::DeviceIndex>(generators.size()), /*is_default=*/true));
  }
  return generators[static_cast<size_t>(device)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  return at::make_generator<TpuGeneratorImpl>(device, /*is_default=*/false);
}

void manual_seed_all(uint64_t seed) {
  if (set_initial_seed_if_not_created(seed)) {
    return;
  }
  const int count = ttpu_runtime_device_count(runtime());
  for (int device = 0; device < count; ++device) {
    at::Generator generator =
        default_generator(static_cast<c10::DeviceIndex>(device));
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_current_seed(seed);
  }
}

void with_generator_state(const at::Generator& generator,
                          c10::DeviceIndex device,
                          const std::function<void()>& body) {
  auto* impl = generator.defined()
                   ? dynamic_cast<TpuGeneratorImpl*>(generator.unsafeGetGeneratorImpl())
                   : nullptr;
  if (impl == nullptr || impl->is_default()) {
    TORCH_CHECK(!generator.defined() || impl != nullptr,
                "expected a tpu generator, got one for ", generator.device());
    body();
    return;
  }
  TORCH_CHECK(impl->device().index() == device, "generator is on ",
              impl->device(), " but the op runs on tpu:",
              static_cast<int>(device));
  std::lock_guard<std::mutex> lock(impl->mutex_);
  const TpuGeneratorImpl::State saved = read_device_state(device);
  write_device_state(device, impl->engine_state());
  try {
    body();
  } catch (...) {
    write_device_state(device, saved);
    throw;
  }
  impl->set_engine_state(read_device_state(device));
  write_device_state(device, saved);
}

}  // namespace torchtpu
