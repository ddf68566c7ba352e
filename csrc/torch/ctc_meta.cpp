// Meta kernel for _ctc_loss_backward, which PyTorch ships without one: the
// engine kernel sizes its output by running the op on meta tensors first.
// The gradient has log_probs' shape and dtype.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torchtpu {

namespace {

at::Tensor ctc_loss_backward_meta(const at::Tensor& /*grad*/, const at::Tensor& log_probs,
                                  const at::Tensor& /*targets*/, at::IntArrayRef /*input_lengths*/,
                                  at::IntArrayRef /*target_lengths*/,
                                  const at::Tensor& /*neg_log_likelihood*/,
                                  const at::Tensor& /*log_alpha*/, int64_t /*blank*/,
                                  bool /*zero_infinity*/) {
  return at::empty_like(log_probs);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_ctc_loss_backward", ctc_loss_backward_meta);
}

}  // namespace torchtpu
