// torchvision's detection ops on tpu: nms, roi_align and roi_pool with
// their backwards, registered under torchvision's own names. The
// registration holds whether or not torchvision is installed (the
// dispatcher keeps a kernel for an op defined later), and torchvision is no
// dependency: when it loads, its ops find their tpu kernels, and its
// Autograd kernels (registered for every backend) call the backwards below.
//
// Under torch.autocast("tpu") they run in float32, as torchvision has
// them on CUDA. Each kernel checks its arguments as torchvision's CPU kernel does (the
// same messages) and calls the engine op of the same name
// (csrc/core/ops/vision.c). nms keeps a data-dependent number of boxes:
// the pattern of dynamic_shape.h, one host read of the count, as the
// CUDA kernel has.
#include "aten/dynamic_shape.h"
#include "runtime/engine_call.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <tuple>

namespace torchtpu {

namespace {

// The dtypes torchvision's CPU kernels dispatch: float and double, and
// half where `half` (AT_DISPATCH_FLOATING_TYPES(_AND_HALF)).
void check_float_dtype(const at::Tensor& t, const char* kernel, bool half) {
  const c10::ScalarType type = t.scalar_type();
  const bool ok = type == at::kFloat || type == at::kDouble || (half && type == at::kHalf);
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", kernel, "\" not implemented for '", c10::toString(type), "'");
}

at::Tensor nms_tpu(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  TORCH_CHECK(dets.dim() == 2, "boxes should be a 2d tensor, got ", dets.dim(), "D");
  TORCH_CHECK(dets.size(1) == 4, "boxes should have 4 elements in dimension 1, got ", dets.size(1));
  TORCH_CHECK(scores.dim() == 1, "scores should be a 1d tensor, got ", scores.dim(), "D");
  TORCH_CHECK(dets.size(0) == scores.size(0),
              "boxes and scores should have same number of elements in dimension 0, got ", dets.size(0),
              " and ", scores.size(0));
  check_float_dtype(dets, "nms_kernel", false);
  TORCH_CHECK(dets.scalar_type() == scores.scalar_type(), "dets should have the same type as scores");
  const at::TensorOptions longs = dets.options().dtype(at::kLong);
  if (dets.numel() == 0) {
    return at::empty({0}, longs);
  }
  at::Tensor keep = at::empty({dets.size(0)}, longs);
  at::Tensor count = at::empty({}, longs);
  EngineCall("torchvision::nms")
      .tensor(dets)
      .tensor(scores)
      .floating(iou_threshold)
      .output(keep)
      .output(count)
      .run();
  BoundedRun run;
  run.outputs = {{keep, 0, 0}};
  run.counts = {count};
  return trim_bounded(run)[0];
}

void check_rois(const at::Tensor& rois, const at::Tensor& other, const char* same_type) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "rois must have shape as Tensor[K, 5]");
  TORCH_CHECK(other.scalar_type() == rois.scalar_type(), same_type);
}

at::Tensor roi_align_tpu(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                         int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  check_rois(rois, input, "input should have the same type as rois");
  TORCH_CHECK(input.dim() == 4, "input must be a 4d tensor [N, C, H, W], got ", input.dim(), "D");
  check_float_dtype(input, "roi_align_forward_kernel", true);
  at::Tensor output = at::zeros({rois.size(0), input.size(1), pooled_height, pooled_width}, input.options());
  if (output.numel() == 0 || input.numel() == 0) {
    return output;
  }
  EngineCall("torchvision::roi_align")
      .tensor(input)
      .tensor(rois)
      .floating(spatial_scale)
      .integer(pooled_height)
      .integer(pooled_width)
      .integer(sampling_ratio)
      .boolean(aligned)
      .output(output)
      .run();
  return output;
}

at::Tensor roi_align_backward_tpu(const at::Tensor& grad, const at::Tensor& rois, double spatial_scale,
                                  int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                                  int64_t channels, int64_t height, int64_t width, int64_t sampling_ratio,
                                  bool aligned) {
  check_rois(rois, grad, "grad should have the same type as rois");
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == rois.size(0) && grad.size(1) == channels &&
                  grad.size(2) == pooled_height && grad.size(3) == pooled_width,
              "grad must have shape [K, C, pooled_height, pooled_width] = [", rois.size(0), ", ", channels,
              ", ", pooled_height, ", ", pooled_width, "], got ", grad.sizes());
  check_float_dtype(grad, "roi_align_backward_kernel", true);
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0 || grad_input.numel() == 0) {
    return grad_input;
  }
  EngineCall("torchvision::_roi_align_backward")
      .tensor(grad)
      .tensor(rois)
      .floating(spatial_scale)
      .integer(pooled_height)
      .integer(pooled_width)
      .integer(batch_size)
      .integer(channels)
      .integer(height)
      .integer(width)
      .integer(sampling_ratio)
      .boolean(aligned)
      .output(grad_input)
      .run();
  return grad_input;
}

std::tuple<at::Tensor, at::Tensor> roi_pool_tpu(const at::Tensor& input, const at::Tensor& rois,
                                                double spatial_scale, int64_t pooled_height,
                                                int64_t pooled_width) {
  // The CPU kernel reads rois as rows of 5 without checking; refuse
  // others instead of reading past them.
  check_rois(rois, input, "input should have the same type as rois");
  TORCH_CHECK(input.dim() == 4, "input must be a 4d tensor [N, C, H, W], got ", input.dim(), "D");
  const std::vector<int64_t> sizes{rois.size(0), input.size(1), pooled_height, pooled_width};
  at::Tensor output = at::zeros(sizes, input.options());
  at::Tensor argmax = at::zeros(sizes, input.options().dtype(at::kInt));
  if (output.numel() == 0) {
    return {output, argmax};
  }
  check_float_dtype(input, "roi_pool_forward_kernel", true);
  if (input.numel() == 0) {
    return {output, argmax.fill_(-1)};
  }
  EngineCall("torchvision::roi_pool")
      .tensor(input)
      .tensor(rois)
      .floating(spatial_scale)
      .integer(pooled_height)
      .integer(pooled_width)
      .output(output)
      .output(argmax)
      .run();
  return {output, argmax};
}

at::Tensor roi_pool_backward_tpu(const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& argmax,
                                 double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                                 int64_t batch_size, int64_t channels, int64_t height, int64_t width) {
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "Tensor rois should have shape as Tensor[K, 5]");
  TORCH_CHECK(grad.scalar_type() == rois.scalar_type(), "grad should have the same type as rois");
  TORCH_CHECK(grad.dim() == 4 && grad.sizes() == argmax.sizes() && grad.size(0) == rois.size(0),
              "grad and argmax must have shape [K, C, pooled_height, pooled_width], got ", grad.sizes(),
              " and ", argmax.sizes());
  at::Tensor grad_input = at::zeros({batch_size, channels, height, width}, grad.options());
  if (grad.numel() == 0 || grad_input.numel() == 0) {
    return grad_input;
  }
  check_float_dtype(grad, "roi_pool_backward_kernel", true);
  EngineCall("torchvision::_roi_pool_backward")
      .tensor(grad)
      .tensor(rois)
      .tensor(argmax)
      .floating(spatial_scale)
      .integer(pooled_height)
      .integer(pooled_width)
      .integer(batch_size)
      .integer(channels)
      .integer(height)
      .integer(width)
      .output(grad_input)
      .run();
  return grad_input;
}

// Under torch.autocast("tpu") the ops run in float32 and return the
// input's dtype, the policy torchvision gives them on CUDA.
at::Tensor fp32(const at::Tensor& t) {
  return at::autocast::cached_cast(at::kFloat, t, c10::DeviceType::PrivateUse1);
}

c10::OperatorHandle vision_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

at::Tensor nms_autocast(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastPrivateUse1);
  static const auto op = vision_op("torchvision::nms").typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  return op.call(fp32(dets), fp32(scores), iou_threshold);
}

at::Tensor roi_align_autocast(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                              c10::SymInt pooled_height, c10::SymInt pooled_width, int64_t sampling_ratio,
                              bool aligned) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastPrivateUse1);
  static const auto op =
      vision_op("torchvision::roi_align")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double, c10::SymInt, c10::SymInt, int64_t, bool)>();
  return op.call(fp32(input), fp32(rois), spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)
      .to(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> roi_pool_autocast(const at::Tensor& input, const at::Tensor& rois,
                                                     double spatial_scale, c10::SymInt pooled_height,
                                                     c10::SymInt pooled_width) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastPrivateUse1);
  static const auto op = vision_op("torchvision::roi_pool")
                             .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, double,
                                                                       c10::SymInt, c10::SymInt)>();
  auto [output, argmax] = op.call(fp32(input), fp32(rois), spatial_scale, pooled_height, pooled_width);
  return {output.to(input.scalar_type()), argmax};
}

}  // namespace

TORCH_LIBRARY_IMPL(torchvision, AutocastPrivateUse1, m) {
  m.impl("nms", TORCH_FN(nms_autocast));
  m.impl("roi_align", TORCH_FN(roi_align_autocast));
  m.impl("roi_pool", TORCH_FN(roi_pool_autocast));
}

TORCH_LIBRARY_IMPL(torchvision, PrivateUse1, m) {
  m.impl("nms", TORCH_FN(nms_tpu));
  m.impl("roi_align", TORCH_FN(roi_align_tpu));
  m.impl("_roi_align_backward", TORCH_FN(roi_align_backward_tpu));
  m.impl("roi_pool", TORCH_FN(roi_pool_tpu));
  m.impl("_roi_pool_backward", TORCH_FN(roi_pool_backward_tpu));
}

}  // namespace torchtpu
