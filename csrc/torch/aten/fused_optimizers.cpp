// The fused optimizer steps (torch.optim's fused=True: _fused_adam_,
// _fused_adamw_, _fused_sgd_, _fused_adagrad_), composed from tpu ops with
// the CPU's fused kernels' arithmetic: each element in float (the opmath
// type of bfloat16/half parameters), rounded once into each state it
// writes; grads unscaled in place by grad_scale; nothing written when
// found_inf is 1, decided on the device (no host read). PyTorch lets a
// PrivateUse1 device take fused=True, so scripts written for CUDA that ask
// for it run here. In fused mode the whole step records into the window.
#include <ATen/ATen.h>

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>
#include <vector>

namespace torchtpu {

namespace {

at::Tensor opmath(const at::Tensor& t) {
  return at::isReducedFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t;
}

// A 0-d device tensor of t's opmath dtype holding v.
at::Tensor scalar_like(const at::Tensor& t, double v) {
  return at::scalar_tensor(v, t.options().dtype(opmath(t).scalar_type()));
}

// lr as a 0-d tensor on the parameters' device.
at::Tensor lr_tensor(const at::Tensor& like, const std::optional<at::Tensor>& lr_t, double lr) {
  if (lr_t.has_value()) {
    return lr_t->to(like.device(), opmath(like).scalar_type()).reshape({});
  }
  return scalar_like(like, lr);
}

using List = std::vector<at::Tensor>;

// f(i) for each i < n. The steps below go stage by stage over the list,
// so each op runs back to back over the parameters' shapes: strict mode's
// recompile warning takes such a burst for a loop over a list, not for a
// dimension that keeps changing.
template <class F>
List each(size_t n, F f) {
  List r;
  r.reserve(n);
  for (size_t i = 0; i < n; ++i) r.push_back(f(i));
  return r;
}

std::optional<at::Tensor> skip_mask(const std::optional<at::Tensor>& found_inf, const at::Tensor& like) {
  if (!found_inf.has_value() || !found_inf->defined()) return std::nullopt;
  return at::eq(found_inf->to(like.device()).reshape({}), 1.0);
}

// values into dsts (rounded into their dtypes), or dsts left as they are
// where found_inf (a 0-d device tensor) is 1.
void write_all(at::TensorList dsts, const List& values, const std::optional<at::Tensor>& skip) {
  List cast = each(dsts.size(), [&](size_t i) { return values[i].to(dsts[i].scalar_type()); });
  if (skip.has_value()) cast = each(dsts.size(), [&](size_t i) { return at::where(*skip, dsts[i], cast[i]); });
  for (size_t i = 0; i < dsts.size(); ++i) dsts[i].copy_(cast[i]);
}

// The grads in opmath, unscaled (and written back unscaled) by grad_scale,
// negated when maximizing.
List grads_in(at::TensorList grads, const std::optional<at::Tensor>& grad_scale, bool maximize,
              const std::optional<at::Tensor>& skip) {
  const size_t n = grads.size();
  List g = each(n, [&](size_t i) { return opmath(grads[i]); });
  if (grad_scale.has_value() && grad_scale->defined() && n) {
    const at::Tensor scale = grad_scale->to(grads[0].device(), g[0].scalar_type()).reshape({});
    g = each(n, [&](size_t i) { return g[i] / scale; });
    write_all(grads, g, skip);
  }
  if (maximize) g = each(n, [&](size_t i) { return -g[i]; });
  return g;
}

void check_lists(at::TensorList a, at::TensorList b, const char* what) {
  TORCH_CHECK(a.size() == b.size(), what, ": the tensor lists must have the same length, got ", a.size(), " and ",
              b.size());
}

void adam_impl(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
               at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const std::optional<at::Tensor>& lr_t,
               double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
               const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf, bool adamw) {
  const char* name = adamw ? "_fused_adamw_" : "_fused_adam_";
  check_lists(params, grads, name);
  check_lists(params, exp_avgs, name);
  check_lists(params, exp_avg_sqs, name);
  check_lists(params, state_steps, name);
  if (amsgrad) check_lists(params, max_exp_avg_sqs, name);
  const size_t n = params.size();
  if (n == 0) return;
  const std::optional<at::Tensor> skip = skip_mask(found_inf, params[0]);
  const at::Tensor lr_v = lr_tensor(params[0], lr_t, lr);
  const at::ScalarType om = opmath(params[0]).scalar_type();
  // bias corrections in double, as the CPU's kernel computes them, per parameter's step
  const List steps = each(n, [&](size_t i) { return state_steps[i].to(params[i].device(), at::kDouble).reshape({}); });
  const List step_size =
      each(n, [&](size_t i) { return (lr_v.to(at::kDouble) / (1 - at::pow(beta1, steps[i]))).to(om); });
  const List bc2_sqrt = each(n, [&](size_t i) { return at::sqrt(1 - at::pow(beta2, steps[i])).to(om); });
  List g = grads_in(grads, grad_scale, maximize, skip);
  List p = each(n, [&](size_t i) { return opmath(params[i]); });
  if (weight_decay != 0) {
    if (adamw) {
      const at::Tensor keep = 1 - lr_v * weight_decay;
      p = each(n, [&](size_t i) { return p[i] * keep; });
    } else {
      const List wd = each(n, [&](size_t i) { return p[i] * weight_decay; });
      g = each(n, [&](size_t i) { return g[i] + wd[i]; });
    }
  }
  List m = each(n, [&](size_t i) { return opmath(exp_avgs[i]); });
  List d = each(n, [&](size_t i) { return g[i] - m[i]; });
  d = each(n, [&](size_t i) { return d[i] * (1 - beta1); });
  m = each(n, [&](size_t i) { return m[i] + d[i]; });
  List v = each(n, [&](size_t i) { return opmath(exp_avg_sqs[i]); });
  v = each(n, [&](size_t i) { return v[i] * beta2; });
  List q = each(n, [&](size_t i) { return g[i] * g[i]; });
  q = each(n, [&](size_t i) { return q[i] * (1 - beta2); });
  v = each(n, [&](size_t i) { return v[i] + q[i]; });
  List denom = v;
  if (amsgrad) {
    List vmax = each(n, [&](size_t i) { return opmath(max_exp_avg_sqs[i]); });
    denom = each(n, [&](size_t i) { return at::maximum(vmax[i], v[i]); });
    write_all(max_exp_avg_sqs, denom, skip);
  }
  denom = each(n, [&](size_t i) { return at::sqrt(denom[i]); });
  denom = each(n, [&](size_t i) { return denom[i] / bc2_sqrt[i]; });
  denom = each(n, [&](size_t i) { return denom[i] + eps; });
  List r = each(n, [&](size_t i) { return m[i] / denom[i]; });
  r = each(n, [&](size_t i) { return r[i] * step_size[i]; });
  p = each(n, [&](size_t i) { return p[i] - r[i]; });
  write_all(exp_avgs, m, skip);
  write_all(exp_avg_sqs, v, skip);
  write_all(params, p, skip);
}

void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  adam_impl(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, std::nullopt, lr, beta1, beta2,
            weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, false);
}

void fused_adam_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                          at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                          const at::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,
                          bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf) {
  adam_impl(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, 0, beta1, beta2, weight_decay,
            eps, amsgrad, maximize, grad_scale, found_inf, false);
}

void fused_adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                 at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize,
                 const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  adam_impl(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, std::nullopt, lr, beta1, beta2,
            weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, true);
}

void fused_adamw_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                           at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                           const at::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,
                           bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                           const std::optional<at::Tensor>& found_inf) {
  adam_impl(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, 0, beta1, beta2, weight_decay,
            eps, amsgrad, maximize, grad_scale, found_inf, true);
}

void sgd_impl(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
              double momentum, const std::optional<at::Tensor>& lr_t, double lr, double dampening, bool nesterov,
              bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
              const std::optional<at::Tensor>& found_inf) {
  check_lists(params, grads, "_fused_sgd_");
  if (momentum != 0) check_lists(params, momentum_buffers, "_fused_sgd_");
  const size_t n = params.size();
  if (n == 0) return;
  const std::optional<at::Tensor> skip = skip_mask(found_inf, params[0]);
  const at::Tensor lr_v = lr_tensor(params[0], lr_t, lr);
  List g = grads_in(grads, grad_scale, maximize, skip);
  List p = each(n, [&](size_t i) { return opmath(params[i]); });
  if (weight_decay != 0) {
    const List wd = each(n, [&](size_t i) { return p[i] * weight_decay; });
    g = each(n, [&](size_t i) { return g[i] + wd[i]; });
  }
  if (momentum != 0) {
    List buf = g;
    if (!is_first_step) {
      buf = each(n, [&](size_t i) { return opmath(momentum_buffers[i]); });
      buf = each(n, [&](size_t i) { return buf[i] * momentum; });
      const List gd = each(n, [&](size_t i) { return g[i] * (1 - dampening); });
      buf = each(n, [&](size_t i) { return buf[i] + gd[i]; });
    }
    write_all(momentum_buffers, buf, skip);
    if (nesterov) {
      const List bm = each(n, [&](size_t i) { return buf[i] * momentum; });
      g = each(n, [&](size_t i) { return g[i] + bm[i]; });
    } else {
      g = buf;
    }
  }
  g = each(n, [&](size_t i) { return g[i] * lr_v; });
  p = each(n, [&](size_t i) { return p[i] - g[i]; });
  write_all(params, p, skip);
}

void fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
               double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
               const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  sgd_impl(params, grads, momentum_buffers, weight_decay, momentum, std::nullopt, lr, dampening, nesterov, maximize,
           is_first_step, grad_scale, found_inf);
}

void fused_sgd_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers,
                         double weight_decay, double momentum, const at::Tensor& lr, double dampening, bool nesterov,
                         bool maximize, bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                         const std::optional<at::Tensor>& found_inf) {
  sgd_impl(params, grads, momentum_buffers, weight_decay, momentum, lr, 0, dampening, nesterov, maximize,
           is_first_step, grad_scale, found_inf);
}

void adagrad_impl(at::TensorList params, at::TensorList grads, at::TensorList state_sums,
                  at::TensorList state_steps, const std::optional<at::Tensor>& lr_t, double lr, double lr_decay,
                  double weight_decay, double eps, bool maximize, const std::optional<at::Tensor>& grad_scale,
                  const std::optional<at::Tensor>& found_inf) {
  check_lists(params, grads, "_fused_adagrad_");
  check_lists(params, state_sums, "_fused_adagrad_");
  check_lists(params, state_steps, "_fused_adagrad_");
  const size_t n = params.size();
  if (n == 0) return;
  const std::optional<at::Tensor> skip = skip_mask(found_inf, params[0]);
  const at::Tensor lr_v = lr_tensor(params[0], lr_t, lr).to(at::kDouble);
  const at::ScalarType om = opmath(params[0]).scalar_type();
  const List clr = each(n, [&](size_t i) {
    const at::Tensor step = state_steps[i].to(params[i].device(), at::kDouble).reshape({});
    return (lr_v / (1 + (step - 1) * lr_decay)).to(om);
  });
  List g = grads_in(grads, grad_scale, maximize, skip);
  List p = each(n, [&](size_t i) { return opmath(params[i]); });
  if (weight_decay != 0) {
    const List wd = each(n, [&](size_t i) { return p[i] * weight_decay; });
    g = each(n, [&](size_t i) { return g[i] + wd[i]; });
  }
  List s = each(n, [&](size_t i) { return opmath(state_sums[i]); });
  const List gg = each(n, [&](size_t i) { return g[i] * g[i]; });
  s = each(n, [&](size_t i) { return s[i] + gg[i]; });
  List std_ = each(n, [&](size_t i) { return at::sqrt(s[i]); });
  std_ = each(n, [&](size_t i) { return std_[i] + eps; });
  List r = each(n, [&](size_t i) { return g[i] / std_[i]; });
  r = each(n, [&](size_t i) { return r[i] * clr[i]; });
  p = each(n, [&](size_t i) { return p[i] - r[i]; });
  write_all(state_sums, s, skip);
  write_all(params, p, skip);
}

void fused_adagrad(at::TensorList params, at::TensorList grads, at::TensorList state_sums, at::TensorList state_steps,
                   double lr, double lr_decay, double weight_decay, double eps, bool maximize,
                   const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  adagrad_impl(params, grads, state_sums, state_steps, std::nullopt, lr, lr_decay, weight_decay, eps, maximize,
               grad_scale, found_inf);
}

void fused_adagrad_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList state_sums,
                             at::TensorList state_steps, const at::Tensor& lr, double lr_decay, double weight_decay,
                             double eps, bool maximize, const std::optional<at::Tensor>& grad_scale,
                             const std::optional<at::Tensor>& found_inf) {
  adagrad_impl(params, grads, state_sums, state_steps, lr, 0, lr_decay, weight_decay, eps, maximize, grad_scale,
               found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", fused_adam);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr);
  m.impl("_fused_adamw_", fused_adamw);
  m.impl("_fused_adamw_.tensor_lr", fused_adamw_tensor_lr);
  m.impl("_fused_sgd_", fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr);
  m.impl("_fused_adagrad_", fused_adagrad);
  m.impl("_fused_adagrad_.tensor_lr", fused_adagrad_tensor_lr);
}

}  // namespace torchtpu
