// host_layout.h: the CPU's int4 packing, told apart by its bytes for one
// weight whose candidates' packings all differ.
#include "aten/host_layout.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <vector>

namespace torchtpu {

namespace {

constexpr int64_t kRows = 64;
constexpr int64_t kCols = 2;

int32_t probe_value(int64_t n, int64_t k) {
  return static_cast<int32_t>((n * (1 + 2 * k) + k * 5 + n / 16) % 16);
}

// The bytes the CPU kernel writes for the probe under (block, split).
std::vector<uint8_t> candidate(int64_t block, bool split) {
  std::vector<uint8_t> bytes;
  for (int64_t start = 0; start < kRows; start += block) {
    const int64_t width = std::min(block, kRows - start);
    for (int64_t k = 0; k < kCols; ++k) {
      for (int64_t j = 0; j < width / 2; ++j) {
        const bool pairs_halves = split && width == block;
        const int64_t lo = start + (pairs_halves ? j : 2 * j);
        const int64_t hi = start + (pairs_halves ? j + width / 2 : 2 * j + 1);
        bytes.push_back(static_cast<uint8_t>((probe_value(hi, k) << 4) | probe_value(lo, k)));
      }
    }
  }
  return bytes;
}

int64_t probe() {
  at::Tensor weight = at::empty({kRows, kCols}, at::kInt);
  auto w = weight.accessor<int32_t, 2>();
  for (int64_t n = 0; n < kRows; ++n) {
    for (int64_t k = 0; k < kCols; ++k) {
      w[n][k] = probe_value(n, k);
    }
  }
  at::Tensor packed = at::_convert_weight_to_int4pack_for_cpu(weight, 2).contiguous();
  const auto* data = packed.const_data_ptr<uint8_t>();
  const std::vector<uint8_t> got(data, data + packed.numel());
  for (int64_t block : {16, 32, 64}) {
    for (bool split : {false, true}) {
      if (candidate(block, split) == got) {
        return block * 2 + (split ? 1 : 0);
      }
    }
  }
  TORCH_CHECK(false, "torchtpu: this host's CPU packs int4 weights in a layout the "
                     "tpu kernels do not know");
}

}  // namespace

int64_t cpu_int4_layout() {
  static const int64_t layout = probe();
  return layout;
}

}  // namespace torchtpu
