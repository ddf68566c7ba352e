// The c10d backend for tpu tensors (see distributed.cpp).
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torchtpu {

// Adds the backend's constructor and its path counters to torchtpu._C.
void init_distributed(pybind11::module& m);

}  // namespace torchtpu
