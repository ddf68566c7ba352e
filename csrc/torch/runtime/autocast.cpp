// torch.autocast(device_type="tpu"): the cast policy of the
// AutocastPrivateUse1 dispatch key. PyTorch's own op lists (ATen's
// autocast_mode.h, the ones CUDA and the other backends register) are the
// policy: contractions run in the autocast dtype (bfloat16 by default, the
// TPU's native matmul type), ops whose accuracy suffers in 16 bits
// (exp/log/pow, norms, losses, softmax, sums) run in float32, and
// multi-input ops promote to the widest input type. The casts happen here,
// above autograd, so backward sees the same dtypes as forward.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torchtpu {
namespace {

// bfloat16 unless the user sets another: a TPU has no fast float16 path.
// The autocast dtype is per thread; the importing thread is where models
// are usually run, and torch.autocast(dtype=...) sets it explicitly.
const bool kDefaultDtypeSet = [] {
  at::autocast::set_autocast_dtype(at::kPrivateUse1, at::kBFloat16);
  return true;
}();

// The shared op lists name ATen types unqualified, and which types differs
// between torch releases (DimnameList up to 2.11, gone in 2.13): all of at
// is visible here.
using namespace at;  // NOLINT(google-build-using-namespace)

// Ops with no policy run as they are.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TTPU_LOWER_PRECISION_FP(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TTPU_LOWER_PRECISION_FP)
#undef TTPU_LOWER_PRECISION_FP

#define TTPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TTPU_FP32)
  // Beyond the shared list (CPU autocast has it too): cross_entropy passes
  // its input's dtype to log_softmax, which would keep a bfloat16 loss.
  TTPU_FP32(cross_entropy_loss)
#undef TTPU_FP32

#define TTPU_FP32_SET_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TTPU_FP32_SET_OPT_DTYPE)
  // Beyond PyTorch's list: a mean is a sum, and a 16-bit mean feeds
  // variances (RMSNorm, hand-written norms) with 8 bits of mantissa.
  TTPU_FP32_SET_OPT_DTYPE(mean)
  TTPU_FP32_SET_OPT_DTYPE(mean, dim)
#undef TTPU_FP32_SET_OPT_DTYPE

  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

#define TTPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TTPU_PROMOTE)
  // As every backend registers them besides the shared list.
  TTPU_PROMOTE(cat)
  TTPU_PROMOTE(stack)
  TTPU_PROMOTE(index_copy)
#undef TTPU_PROMOTE
}

}  // namespace
}  // namespace torchtpu
