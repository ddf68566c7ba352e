// The base both tpu c10d backends share (distributed.cpp: host-staged over
// gloo; local_backend.cpp: ranks in one process): the backend's name,
// options and timeout, coalescing, the collectives and how they and their
// arguments are named in messages, argument checks, PREMUL_SUM's factor.
//
// Thread rule: a backend is used by the thread of its rank (c10d's rule);
// the free functions keep no state.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace torchtpu {

using RedOpType = c10d::ReduceOp::RedOpType;

// The collectives, numbered as the ranks exchange them in signatures (the
// values never change).
enum class Collective : int64_t {
  broadcast = 1, all_reduce, reduce, all_gather, all_gather_into_tensor,
  gather, scatter, reduce_scatter, reduce_scatter_tensor, all_to_all_single,
  all_to_all, barrier, send_recv,
};

// The work type of reduce_scatter_tensor_coalesced: c10d's own OpType for
// it where the torch has one (2.13 and later; 2.11's c10d lacks it), else
// the generic COALESCED.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
constexpr c10d::OpType kReduceScatterTensorCoalesced = c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#else
constexpr c10d::OpType kReduceScatterTensorCoalesced = c10d::OpType::COALESCED;
#endif

// As messages name it ("all_reduce", "send/recv").
const char* collective_name(Collective c);

// The process-group timeout Python passes (seconds) as c10d keeps it.
std::chrono::milliseconds timeout_from_seconds(double seconds);

// Bytes of the tensor's elements.
int64_t bytes_of(const at::Tensor& t);

// The message of an exception (c10 errors without their backtrace).
std::string message_of(const std::exception_ptr& e);

// A not-yet-completed future of a list of tensors (a work's result).
c10::intrusive_ptr<c10::ivalue::Future> new_tensor_list_future();

// The one tensor of a per-rank list: each backend takes one tensor per
// rank.
const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* op);

// What both backends are: c10d's Backend named "tpu", with a timeout, and
// coalescing. `Pending` is what a backend collects of each collective
// issued between startCoalescing and endCoalescing; the work endCoalescing
// returns (made by coalesced_work) completes them all (torch.distributed's
// _coalescing_manager and batch_isend_irecv use this).
template <typename Pending>
class TpuBackendBase : public c10d::Backend {
 public:
  TpuBackendBase(int rank, int size, std::chrono::milliseconds timeout)
      : Backend(rank, size), timeout_(timeout) {}

  const std::string getBackendName() const override { return "tpu"; }

  c10::intrusive_ptr<Options> getBackendOptions() override {
    return c10::make_intrusive<Options>("tpu", timeout_);
  }

  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

  bool supportsCoalescing() const override { return true; }

  void startCoalescing() override {
    TORCH_CHECK(!coalescing_, "tpu backend: startCoalescing called twice");
    coalescing_ = true;
    coalesced_.clear();
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    TORCH_CHECK(coalescing_, "tpu backend: endCoalescing without startCoalescing");
    coalescing_ = false;
    std::vector<Pending> pending = std::move(coalesced_);
    coalesced_.clear();
    return coalesced_work(std::move(pending));
  }

 protected:
  // The work that completes every collective collected while coalescing.
  virtual c10::intrusive_ptr<c10d::Work> coalesced_work(std::vector<Pending> pending) = 0;

  // Collects a collective just issued when coalescing.
  void collect(const Pending& pending) {
    if (coalescing_) coalesced_.push_back(pending);
  }

  std::chrono::milliseconds timeout_;

 private:
  bool coalescing_ = false;
  std::vector<Pending> coalesced_;
};

// The dtype as Python spells it ("float32").
inline std::string dtype_name(c10::ScalarType type) {
  return std::string(c10::getDtypeNames(type).first);
}

inline std::string describe_tensor(const at::Tensor& t) {
  std::ostringstream s;
  s << dtype_name(t.scalar_type()) << t.sizes();
  return s.str();
}

inline const char* reduce_op_name(RedOpType op) {
  switch (op) {
    case RedOpType::SUM: return "SUM";
    case RedOpType::AVG: return "AVG";
    case RedOpType::PRODUCT: return "PRODUCT";
    case RedOpType::MIN: return "MIN";
    case RedOpType::MAX: return "MAX";
    case RedOpType::BAND: return "BAND";
    case RedOpType::BOR: return "BOR";
    case RedOpType::BXOR: return "BXOR";
    case RedOpType::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// The factor of a PREMUL_SUM as a 0-d host tensor. The supplement's older
// name is the one every supported PyTorch release defines.
inline at::Tensor premul_factor(const c10d::ReduceOp& op) {
  TORCH_CHECK(op.supplement_, "PREMUL_SUM needs a factor: make the op with "
              "torch.distributed._make_nccl_premul_sum(factor)");
  const auto* s = static_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (s->tensor_factor.defined()) {
    return s->tensor_factor.detach().to(at::kCPU).reshape({});
  }
  return at::scalar_tensor(s->double_factor, at::kDouble);
}

}  // namespace torchtpu
