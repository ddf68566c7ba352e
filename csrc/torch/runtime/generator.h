#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <array>
#include <cstdint>
#include <functional>

namespace torchtpu {

// Random state of a tpu device lives in the engine (a ui64[2] THREE_FRY
// state, advanced by every random op). The default generator of a device is
// a view of that state; any other generator keeps its own state and lends it
// to the engine for the duration of an op (see with_generator_state).
struct TpuGeneratorImpl final : public c10::GeneratorImpl {
  using State = std::array<uint64_t, 2>;

  TpuGeneratorImpl(c10::DeviceIndex device, bool is_default);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  static c10::DeviceType device_type() {
    return c10::DeviceType::PrivateUse1;
  }

  bool is_default() const {
    return is_default_;
  }
  // The state of this generator (reads the engine for a default one).
  State engine_state() const;
  void set_engine_state(const State& state);

 private:
  TpuGeneratorImpl* clone_impl() const override;

  bool is_default_;
  uint64_t seed_;
  // Own state of a non-default generator; derived from seed_ on first use.
  mutable bool own_state_valid_ = false;
  mutable State own_state_{};
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
// Seeds every device; before the runtime exists, only records the seed
// (applied when it is created) so seeding never loads the plugin.
void manual_seed_all(uint64_t seed);

// Runs `body` with `generator`'s state installed as the device's engine
// state when it is not the device's default generator, then stores the
// advanced state back into it and restores the device's own state.
void with_generator_state(const at::Generator& generator,
                          c10::DeviceIndex device,
                          const std::function<void()>& body);

}  // namespace torchtpu
