// Facts about this host's CPU kernels that an op's result depends on and
// the engine cannot know: the glue learns them from the CPU kernels
// themselves and packs them into the calls that need them (op_hooks.h).
#pragma once

#include <cstdint>

namespace torchtpu {

// How _convert_weight_to_int4pack_for_cpu lays out its bytes on this host,
// as ops/quant.c reads it: BLOCK_N * 2 + split (its rows packed in blocks of
// BLOCK_N; split: a full block pairs row j with row j + BLOCK_N/2, as the
// AVX2 and AVX512 kernels do). Probed once by packing a small weight on the
// CPU; any thread may call.
int64_t cpu_int4_layout();

}  // namespace torchtpu
