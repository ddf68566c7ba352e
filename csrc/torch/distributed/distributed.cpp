// The c10d backend for tpu tensors ("tpu" in init_process_group).
//
// A plugin that cannot reach other processes (the XLA CPU plugin) gets its
// collectives through host memory: a host backend (PyTorch's gloo, made by
// torchtpu.distributed) runs the collective on host tensors, in place as on
// NCCL. Where the plugin's device memory is host memory (the CPU plugin) and
// a tensor is all of its storage, the host tensor is the storage's own bytes
// (ttpu_buffer_host_begin): gloo reads and writes them where they lie, with
// no copy. Other tensors are copied into contiguous host tensors, and
// completing the work copies the results back. The copies run on the thread
// that issues or completes the collective; a zero-copy access ends when the
// host backend drops its last reference to the host tensor, on whichever
// thread that is.
//
// Before each collective the ranks exchange a small signature (op, dtype,
// element count, root, reduce op, split sizes): gloo aborts the process when
// the sizes of one collective differ between ranks, so a mismatch must be
// found before any data moves. The exchange is also where a dead or hung
// peer shows up, as an error naming the collective. TORCHTPU_DIST_CHECK=0
// skips it.
//
// The C++ class is needed because PyTorch binds c10d::Backend without a
// Python constructor; the policy (which host backend, registration) is in
// torchtpu/distributed.
#include "distributed/distributed.h"
#include "distributed/backend_base.h"
#include "runtime/runtime.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace torchtpu {

namespace {

using c10d::OpType;
using RedOpType = c10d::ReduceOp::RedOpType;
using Works = std::vector<c10::intrusive_ptr<c10d::Work>>;

// ------------------------------------------------------------- counters

// Per collective: how often it ran and how many bytes crossed between the
// device and the host for it (what torchtpu.debug.report() shows).
struct OpCounter {
  int64_t calls = 0;
  int64_t d2h_bytes = 0;
  int64_t h2d_bytes = 0;
  int64_t in_place_bytes = 0;  // tpu bytes the host backend used where they lie
};

std::mutex counters_mutex;
std::map<std::string, OpCounter> counters;

void count(const std::string& op, int64_t d2h, int64_t h2d, int64_t in_place) {
  std::lock_guard<std::mutex> lock(counters_mutex);
  OpCounter& c = counters[op];
  c.calls += 1;
  c.d2h_bytes += d2h;
  c.h2d_bytes += h2d;
  c.in_place_bytes += in_place;
}


// ------------------------------------------------------------- helpers

// AVG divides the sum by the group size; integers divide as C does.
void divide_in_place(at::Tensor& t, int size) {
  if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
    t.div_(size);
  } else {
    t.div_(size, "trunc");
  }
}

// ------------------------------------------------------------- work

[[noreturn]] void throw_dist(const std::string& msg) {
  throw c10::DistBackendError(
      c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      msg);
}

// A collective in flight: the host works it waits for and the steps (copy
// results back into tpu tensors) that complete it. Completion happens in
// wait(), isCompleted() or getFuture(), on the caller's thread.
class StagedWork final : public c10d::Work {
 public:
  StagedWork(int rank, OpType type, std::string what, std::string context,
             Works host, std::vector<std::function<void()>> finish,
             std::vector<at::Tensor> outputs)
      : Work(rank, type),
        what_(std::move(what)),
        context_(std::move(context)),
        host_(std::move(host)),
        finish_(std::move(finish)),
        outputs_(std::move(outputs)),
        future_(new_tensor_list_future()) {}

  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      for (auto& w : host_) {
        if (!w->isCompleted()) return false;
      }
      complete_locked(kNoTimeout);
    }
    return true;
  }

  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_ && !error_;
  }

  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

  std::vector<at::Tensor> result() override { return outputs_; }

  void synchronize() override { wait(kNoTimeout); }

  bool wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    complete_locked(timeout);
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  // The future completes only when the tpu tensors hold the result, and the
  // copy back must run on a thread of ours: asking for the future completes
  // the work (DDP asks right after issuing a bucket's all_reduce).
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(mutex_);
    complete_locked(kNoTimeout);
    return future_;
  }

 private:
  void complete_locked(std::chrono::milliseconds timeout) {
    if (done_) return;
    try {
      for (auto& w : host_) w->wait(timeout);
      for (auto& step : finish_) step();
    } catch (...) {
      std::string msg = message_of(std::current_exception());
      std::string hint;
      if (msg.find("imed out") != std::string::npos ||
          msg.find("imeout") != std::string::npos) {
        hint = " (the collective did not complete within the process group "
               "timeout: a peer rank may have died, hung, or not called it)";
      } else if (msg.find("onnection") != std::string::npos) {
        hint = " (a peer rank closed its connection: it may have died)";
      }
      error_ = std::make_exception_ptr(c10::DistBackendError(
          c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          "torchtpu c10d: " + what_ + " " + context_ + " failed" + hint + ": " + msg));
    }
    done_ = true;
    host_.clear();
    finish_.clear();
    if (error_) {
      future_->setError(error_);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

  const std::string what_;
  const std::string context_;
  mutable std::mutex mutex_;
  bool done_ = false;
  std::exception_ptr error_;
  Works host_;
  std::vector<std::function<void()>> finish_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// ------------------------------------------------------------- signatures

// What every rank must agree on for one collective. Fields that do not
// apply stay 0; splits are only used by the all-to-alls.
using Coll = Collective;

constexpr int64_t kMagic = 0x7470752d63313064;  // "tpu-c10d"
constexpr int kMaxDims = 5;
// magic, op, dtype, numel, root, reduce op, ndim, dims
constexpr int kFixed = 7 + kMaxDims;

struct Signature {
  Coll op = Coll::barrier;
  int64_t dtype = -1;
  int64_t numel = 0;  // elements that must match (per rank's piece)
  int64_t root = -1;
  int64_t reduce = -1;
  std::vector<int64_t> shape;  // for messages only
  std::vector<int64_t> in_splits, out_splits;  // elements to/from each rank
};

std::string describe(const Signature& s) {
  std::ostringstream o;
  o << collective_name(s.op) << "(";
  if (s.dtype >= 0) {
    o << dtype_name(static_cast<c10::ScalarType>(s.dtype)) << "[";
    for (size_t i = 0; i < s.shape.size(); ++i) o << (i ? ", " : "") << s.shape[i];
    if (static_cast<int64_t>(s.shape.size()) == kMaxDims) o << ", ...";
    o << "]";
  }
  if (s.root >= 0) o << ", root=" << s.root;
  if (s.reduce >= 0) o << ", op=" << reduce_op_name(static_cast<RedOpType>(s.reduce));
  o << ")";
  return o.str();
}

int64_t red(const c10d::ReduceOp& op) { return static_cast<int64_t>(op.op_); }

Signature signature(Coll op, const at::Tensor& t, int64_t root = -1,
                    int64_t reduce = -1) {
  Signature s;
  s.op = op;
  s.root = root;
  s.reduce = reduce;
  if (t.defined()) {
    s.dtype = static_cast<int64_t>(t.scalar_type());
    s.numel = t.numel();
    for (int64_t d = 0; d < t.dim() && d < kMaxDims; ++d) s.shape.push_back(t.size(d));
  }
  return s;
}

// ------------------------------------------------------------- backend

class TpuBackend final : public TpuBackendBase<c10::intrusive_ptr<c10d::Work>> {
 public:
  TpuBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
             std::chrono::milliseconds timeout, bool check, bool in_place)
      : TpuBackendBase(rank, size, timeout),
        host_(std::move(host)),
        check_(check),
        in_place_(in_place) {
    init();
  }

  void setTimeout(std::chrono::milliseconds timeout) override {
    TpuBackendBase::setTimeout(timeout);
    host_->setTimeout(timeout);
  }

  // A checked send completes before gloo has written its data (see send);
  // those writes must finish before the connections close, or the peer's
  // recv reads a reset instead of the bytes it was sent.
  void shutdown() override {
    finish_sends();
    host_->shutdown();
  }

  ~TpuBackend() override { finish_sends(); }

  // Completing it waits for the host works of the coalesced collectives.
  c10::intrusive_ptr<c10d::Work> coalesced_work(Works works) override {
    return c10::make_intrusive<StagedWork>(
        rank_, OpType::COALESCED, "coalesced collectives",
        "on rank " + std::to_string(rank_) + " of " + std::to_string(size_),
        std::move(works), std::vector<std::function<void()>>{},
        std::vector<at::Tensor>{});
  }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override {
    const at::Tensor& t = single(tensors, "broadcast");
    const bool root = opts.rootRank == rank_;
    Issue issue(this, Coll::broadcast, signature(Coll::broadcast, t, opts.rootRank));
    std::vector<at::Tensor> host{root ? issue.stage_in(t) : issue.host_like(t)};
    issue.launch([&] { return host_->broadcast(host, opts); });
    if (!root) issue.copy_back(t, host[0]);
    return issue.finish(OpType::BROADCAST, {t});
  }

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override {
    const at::Tensor& t = single(tensors, "all_reduce");
    Issue issue(this, Coll::all_reduce,
                signature(Coll::all_reduce, t, -1, red(opts.reduceOp)));
    add_allreduce(issue, t, opts.reduceOp, opts.timeout);
    return issue.finish(OpType::ALLREDUCE, {t});
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override {
    Issue issue(this, Coll::all_reduce, Signature{});
    for (const auto& t : tensors) {
      issue.check(signature(Coll::all_reduce, t, -1, red(opts.reduceOp)));
      add_allreduce(issue, t, opts.reduceOp, opts.timeout);
    }
    return issue.finish(OpType::ALLREDUCE_COALESCED, tensors);
  }

  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts) override {
    const at::Tensor& t = single(tensors, "reduce");
    Issue issue(this, Coll::reduce,
                signature(Coll::reduce, t, opts.rootRank, red(opts.reduceOp)));
    const bool root = opts.rootRank == rank_;
    auto [host, op] = stage_reduction(issue, t, opts.reduceOp,
                                      root ? Use::in_out : Use::scratch);
    c10d::ReduceOptions host_opts = opts;
    host_opts.reduceOp = op;
    std::vector<at::Tensor> hv{host};
    issue.launch([&] { return host_->reduce(hv, host_opts); });
    if (opts.rootRank == rank_) {
      post_reduce(issue, host, opts.reduceOp);
      issue.copy_back(t, host);
    }
    return issue.finish(OpType::REDUCE, {t});
  }

  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    const at::Tensor& in = single(inputs, "all_gather");
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "all_gather: expected a list of ", size_, " output tensors");
    Issue issue(this, Coll::all_gather, signature(Coll::all_gather, in));
    std::vector<at::Tensor> hin{issue.stage_in(in)};
    std::vector<std::vector<at::Tensor>> hout(1);
    for (const auto& o : outputs[0]) {
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "all_gather: output tensors must match the input's dtype and "
                  "size, got ", describe_tensor(o), " for input ", describe_tensor(in));
      hout[0].push_back(issue.host_like(o));
    }
    issue.launch([&] { return host_->allgather(hout, hin, opts); });
    for (size_t i = 0; i < hout[0].size(); ++i) issue.copy_back(outputs[0][i], hout[0][i]);
    return issue.finish(OpType::ALLGATHER, outputs[0]);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override {
    Issue issue(this, Coll::all_gather_into_tensor,
                signature(Coll::all_gather_into_tensor, input));
    add_allgather_base(issue, output, input, opts);
    return issue.finish(OpType::_ALLGATHER_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "all_gather_into_tensor_coalesced: ", outputs.size(),
                " outputs for ", inputs.size(), " inputs");
    Issue issue(this, Coll::all_gather_into_tensor, Signature{});
    for (size_t i = 0; i < inputs.size(); ++i) {
      issue.check(signature(Coll::all_gather_into_tensor, inputs[i]));
      add_allgather_base(issue, outputs[i], inputs[i], opts);
    }
    return issue.finish(OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    TORCH_CHECK(output_lists.size() == inputs.size(),
                "all_gather_coalesced: ", output_lists.size(),
                " output lists for ", inputs.size(), " inputs");
    Issue issue(this, Coll::all_gather, Signature{});
    std::vector<at::Tensor> all_outputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      issue.check(signature(Coll::all_gather, inputs[i]));
      std::vector<at::Tensor> hin{issue.stage_in(inputs[i])};
      std::vector<std::vector<at::Tensor>> hout(1);
      for (const auto& o : output_lists[i]) hout[0].push_back(issue.host_like(o));
      issue.launch([&] { return host_->allgather(hout, hin, opts); });
      for (size_t j = 0; j < hout[0].size(); ++j) {
        issue.copy_back(output_lists[i][j], hout[0][j]);
        all_outputs.push_back(output_lists[i][j]);
      }
    }
    return issue.finish(OpType::ALLGATHER_COALESCED, all_outputs);
  }

  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override {
    const at::Tensor& in = single(inputs, "gather");
    const bool root = opts.rootRank == rank_;
    Issue issue(this, Coll::gather, signature(Coll::gather, in, opts.rootRank));
    std::vector<at::Tensor> hin{issue.stage_in(in)};
    std::vector<std::vector<at::Tensor>> hout;
    if (root) {
      TORCH_CHECK(outputs.size() == 1, "gather: the root needs one output list");
      hout.emplace_back();
      for (const auto& o : outputs[0]) hout[0].push_back(issue.host_like(o));
    }
    issue.launch([&] { return host_->gather(hout, hin, opts); });
    std::vector<at::Tensor> results;
    if (root) {
      for (size_t i = 0; i < hout[0].size(); ++i) {
        issue.copy_back(outputs[0][i], hout[0][i]);
        results.push_back(outputs[0][i]);
      }
    }
    return issue.finish(OpType::GATHER, results);
  }

  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "scatter");
    const bool root = opts.rootRank == rank_;
    Issue issue(this, Coll::scatter, signature(Coll::scatter, out, opts.rootRank));
    std::vector<std::vector<at::Tensor>> hin;
    if (root) {
      TORCH_CHECK(inputs.size() == 1, "scatter: the root needs one input list");
      hin.emplace_back();
      for (const auto& i : inputs[0]) hin[0].push_back(issue.stage_in(i));
    }
    std::vector<at::Tensor> hout{issue.host_like(out)};
    issue.launch([&] { return host_->scatter(hout, hin, opts); });
    issue.copy_back(out, hout[0]);
    return issue.finish(OpType::SCATTER, {out});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "reduce_scatter: expected a list of ", size_, " input tensors");
    Issue issue(this, Coll::reduce_scatter,
                signature(Coll::reduce_scatter, out, -1, red(opts.reduceOp)));
    std::vector<std::vector<at::Tensor>> hin(1);
    c10d::ReduceOp op = opts.reduceOp;
    for (const auto& i : inputs[0]) {
      auto staged = stage_reduction(issue, i, opts.reduceOp);
      hin[0].push_back(staged.first);
      op = staged.second;
    }
    std::vector<at::Tensor> hout{issue.host_like(out)};
    c10d::ReduceScatterOptions host_opts = opts;
    host_opts.reduceOp = op;
    issue.launch([&] { return host_->reduce_scatter(hout, hin, host_opts); });
    post_reduce(issue, hout[0], opts.reduceOp);
    issue.copy_back(out, hout[0]);
    return issue.finish(OpType::REDUCE_SCATTER, {out});
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override {
    Issue issue(this, Coll::reduce_scatter_tensor,
                signature(Coll::reduce_scatter_tensor, input, -1, red(opts.reduceOp)));
    add_reduce_scatter_base(issue, output, input, opts);
    return issue.finish(OpType::_REDUCE_SCATTER_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "reduce_scatter_tensor_coalesced: ", outputs.size(),
                " outputs for ", inputs.size(), " inputs");
    Issue issue(this, Coll::reduce_scatter_tensor, Signature{});
    for (size_t i = 0; i < inputs.size(); ++i) {
      issue.check(signature(Coll::reduce_scatter_tensor, inputs[i], -1,
                            red(opts.reduceOp)));
      add_reduce_scatter_base(issue, outputs[i], inputs[i], opts);
    }
    return issue.finish(kReduceScatterTensorCoalesced, outputs);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override {
    Signature sig = signature(Coll::all_to_all_single, input);
    // Elements per dim-0 row must agree; the splits are checked pairwise.
    const int64_t row = input.dim() > 0 && input.size(0) > 0
                            ? input.numel() / input.size(0) : input.numel();
    sig.numel = row;
    sig.in_splits = row_splits(input, input_splits, row, "input");
    sig.out_splits = row_splits(output, output_splits, row, "output");
    Issue issue(this, Coll::all_to_all_single, sig);
    std::vector<at::Tensor> hin{issue.stage_in(input)};
    std::vector<at::Tensor> hout{issue.host_like(output)};
    issue.launch([&] {
      return host_->alltoall_base(hout[0], hin[0], output_splits, input_splits, opts);
    });
    issue.copy_back(output, hout[0]);
    return issue.finish(OpType::ALLTOALL_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override {
    TORCH_CHECK(static_cast<int>(outputs.size()) == size_ &&
                    static_cast<int>(inputs.size()) == size_,
                "all_to_all: expected ", size_, " input and output tensors");
    Signature sig = signature(Coll::all_to_all, inputs[0]);
    sig.numel = 0;
    for (int r = 0; r < size_; ++r) {
      sig.in_splits.push_back(inputs[r].numel());
      sig.out_splits.push_back(outputs[r].numel());
    }
    for (int r = 0; r < size_; ++r) {
      TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                      outputs[r].scalar_type() == inputs[0].scalar_type(),
                  "all_to_all: every input and output tensor must have the same dtype (",
                  inputs[0].scalar_type(), "), got ",
                  (inputs[r].scalar_type() != inputs[0].scalar_type() ? inputs[r] : outputs[r])
                      .scalar_type());
    }
    Issue issue(this, Coll::all_to_all, sig);
    // One alltoall_base over the tensors laid end to end, each rank's
    // element count its split: gloo's list form is not in every supported
    // torch (2.11's has none).
    std::vector<at::Tensor> hin;
    int64_t out_total = 0;
    for (int r = 0; r < size_; ++r) {
      hin.push_back(issue.stage_in(inputs[r]).reshape({-1}));
      out_total += sig.out_splits[r];
    }
    at::Tensor in_flat = at::cat(hin);
    at::Tensor out_flat = at::empty({out_total}, inputs[0].options().device(at::kCPU));
    std::vector<int64_t> in_counts(sig.in_splits), out_counts(sig.out_splits);
    issue.launch([&] {
      return host_->alltoall_base(out_flat, in_flat, out_counts, in_counts, opts);
    });
    int64_t offset = 0;
    for (int r = 0; r < size_; ++r) {
      issue.copy_back(outputs[r], out_flat.narrow(0, offset, sig.out_splits[r]));
      offset += sig.out_splits[r];
    }
    return issue.finish(OpType::ALLTOALL, outputs);
  }

  // A send and its recv each post a small header (dtype, element count) to
  // the other side when issued, and compare the peer's when completing.
  // The sender posts its data at issue too; a receiver posts its data recv
  // only once the header agrees (else it drains the bytes into scratch
  // memory instead of letting gloo abort on the size), so both sides raise
  // a clear error and neither hangs. Nothing is awaited at issue, and the
  // sender's work does not wait for its data to be taken (it sends from a
  // private host copy, kept alive until gloo is done with it): completing
  // a send never depends on the peer completing its recv, so isend/irecv
  // in any order and any wait order (batch_isend_irecv) cannot deadlock.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dst, int tag) override {
    const at::Tensor& t = single(tensors, "send");
    Issue issue(this, "send", "to rank " + std::to_string(dst));
    std::vector<at::Tensor> host{issue.stage_in(t)};
    if (check_) {
      std::vector<at::Tensor> mine{p2p_header(t)};
      std::vector<at::Tensor> theirs{at::zeros({kP2pHeader}, at::kLong)};
      issue.launch([&] { return host_->send(mine, dst, send_header_tag(tag)); });
      issue.launch([&] { return host_->recv(theirs, dst, reply_header_tag(tag)); });
      const std::string me = describe_tensor(t);
      const int rank = rank_;
      issue.after([mine, theirs, me, rank, dst]() {
        check_p2p(mine[0], theirs[0], rank, dst, me, /*sending=*/true);
      });
      in_flight_sends_.erase(
          std::remove_if(in_flight_sends_.begin(), in_flight_sends_.end(),
                         [](const c10::intrusive_ptr<c10d::Work>& w) {
                           return w->isCompleted();
                         }),
          in_flight_sends_.end());
      try {
        in_flight_sends_.push_back(host_->send(host, dst, tag));
      } catch (...) {
        issue.fail(std::current_exception());
      }
      return issue.finish(OpType::SEND, {});
    }
    issue.launch([&] { return host_->send(host, dst, tag); });
    return issue.finish(OpType::SEND, {});
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int src, int tag) override {
    const at::Tensor& t = single(tensors, "recv");
    Issue issue(this, "recv", "from rank " + std::to_string(src));
    std::vector<at::Tensor> host{issue.host_like(t)};
    if (!check_) {
      issue.launch([&] { return host_->recv(host, src, tag); });
      issue.copy_back(t, host[0]);
      return issue.finish(OpType::RECV, {t});
    }
    std::vector<at::Tensor> mine{p2p_header(t)};
    std::vector<at::Tensor> theirs{at::zeros({kP2pHeader}, at::kLong)};
    issue.launch([&] { return host_->recv(theirs, src, send_header_tag(tag)); });
    issue.launch([&] { return host_->send(mine, src, reply_header_tag(tag)); });
    const std::string me = describe_tensor(t);
    const int rank = rank_;
    c10::intrusive_ptr<c10d::Backend> hb = host_;
    issue.after([hb, host, mine, theirs, me, rank, src, tag]() mutable {
      const int64_t* h = theirs[0].data_ptr<int64_t>();
      const bool agree = h[0] == kMagic && h[1] == mine[0].data_ptr<int64_t>()[1] &&
                         h[2] == mine[0].data_ptr<int64_t>()[2];
      if (agree) {
        hb->recv(host, src, tag)->wait();
        return;
      }
      // Take the sender's bytes off the wire, then report.
      if (h[0] == kMagic && h[3] > 0) {
        std::vector<at::Tensor> scratch{at::empty({h[3]}, at::kByte)};
        hb->recv(scratch, src, tag)->wait();
      }
      check_p2p(mine[0], theirs[0], rank, src, me, /*sending=*/false);
    });
    issue.copy_back(t, host[0]);
    return issue.finish(OpType::RECV, {t});
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    Issue issue(this, Coll::barrier, signature(Coll::barrier, at::Tensor()));
    // The signature exchange already met every rank; without it the host
    // backend's barrier does.
    if (!check_) issue.launch([&] { return host_->barrier(opts); });
    return issue.finish(OpType::BARRIER, {});
  }

 private:
  // A signature exchange in flight: this rank's row, every rank's rows
  // (gloo writes them) and the host work doing it.
  struct PendingCheck {
    Signature sig;
    at::Tensor mine, all;
    c10::intrusive_ptr<c10d::Work> work;
    std::exception_ptr error;  // from starting it
  };

  // One collective being issued: checks it against the peers, stages tensors
  // and collects what its work must wait for and do.
  class Issue {
   public:
    Issue(TpuBackend* backend, Coll op, const Signature& sig)
        : b_(backend), name_(collective_name(op)) {
      context_ = "#" + std::to_string(++b_->seq_) + " on rank " +
                 std::to_string(b_->rank_) + " of " + std::to_string(b_->size_);
      if (sig.dtype >= 0 || op == Coll::barrier) {
        what_ = describe(sig);
        check(sig);
      } else {
        what_ = name_ + " (coalesced)";
      }
    }

    // Point-to-point: nothing to agree on with the whole group.
    Issue(TpuBackend* backend, const char* name, const std::string& peer)
        : b_(backend), name_(name) {
      context_ = "#" + std::to_string(++b_->seq_) + " on rank " +
                 std::to_string(b_->rank_) + " of " + std::to_string(b_->size_) +
                 " " + peer;
      what_ = name;
    }

    // Starts the exchange of sig with the peers. It is settled (awaited
    // and compared) before the first host operation is launched, so that
    // the staging in between (which waits for the programs that write the
    // tensors, e.g. a DDP bucket's gradients) overlaps its round trip.
    void check(const Signature& sig) {
      if (b_->check_) checks_.push_back(b_->start_check(sig));
    }

    // Throws on a disagreement or a peer that did not arrive.
    void settle() {
      for (auto& c : checks_) b_->finish_check(c, context_);
      checks_.clear();
    }

    // A host tensor holding what the collective reads of `t`: its bytes
    // in place where it can be (not to be written), else a host copy.
    at::Tensor stage_in(const at::Tensor& t) {
      check_tensor(t);
      if (t.is_cpu()) return t.contiguous();
      if (auto h = in_place(t, /*write=*/false)) return *h;
      return stage_copy(t);
    }

    // A host copy of `t`, for a host backend that uses its input as
    // scratch (gloo's reduce overwrites it on every rank).
    at::Tensor stage_copy(const at::Tensor& t) {
      check_tensor(t);
      if (t.is_cpu()) return t.contiguous();
      d2h_ += bytes_of(t);
      return t.to(t.options().device(at::kCPU), /*non_blocking=*/false,
                  /*copy=*/false, at::MemoryFormat::Contiguous);
    }

    // The same for a tensor the collective reads and overwrites in place
    // (all_reduce): the host backend's result is t's, with no copy back.
    at::Tensor stage_in_out(const at::Tensor& t) {
      check_tensor(t);
      if (!t.is_cpu()) {
        if (auto h = in_place(t, /*write=*/true)) return *h;
      }
      return stage_in(t);
    }

    // A host tensor the collective writes, shaped like `t`: t's bytes in
    // place where it can be, else a fresh one that copy_back writes to t.
    at::Tensor host_like(const at::Tensor& t) {
      check_tensor(t);
      if (!t.is_cpu()) {
        if (auto h = in_place(t, /*write=*/true)) return *h;
      }
      return at::empty(t.sizes(), t.options().device(at::kCPU),
                       at::MemoryFormat::Contiguous);
    }

    // Whether `host` is a tpu tensor's own bytes (from in_place).
    bool is_in_place(const at::Tensor& host) const {
      return std::find(direct_.begin(), direct_.end(), host.data_ptr()) != direct_.end();
    }

    template <typename F>
    void launch(F&& start) {
      settle();
      try {
        works_.push_back(start());
      } catch (...) {
        fail(std::current_exception());
      }
    }

    void after(std::function<void()> step) { finish_.push_back(std::move(step)); }

    // Completing the work writes `host` into the tpu tensor `dst`.
    void copy_back(const at::Tensor& dst, const at::Tensor& host) {
      if (dst.is_cpu() && dst.data_ptr() == host.data_ptr()) return;
      if (is_in_place(host)) return;
      if (!dst.is_cpu()) h2d_ += bytes_of(dst);
      at::Tensor d = dst;
      at::Tensor h = host;
      finish_.push_back([d, h]() mutable {
        d.copy_(h.view(d.sizes()));
      });
    }

    c10::intrusive_ptr<c10d::Work> finish(OpType type, std::vector<at::Tensor> outputs) {
      settle();
      count(name_, d2h_, h2d_, in_place_bytes_);
      c10::intrusive_ptr<c10d::Work> work = c10::make_intrusive<StagedWork>(
          b_->rank_, type, what_, context_, std::move(works_), std::move(finish_),
          std::move(outputs));
      b_->collect(work);
      return work;
    }

    [[noreturn]] void fail(const std::exception_ptr& e) {
      throw_dist("torchtpu c10d: " + what_ + " " + context_ + " failed: " +
                 message_of(e));
    }

   private:
    // t's storage bytes as a host tensor (a zero-copy host access), when
    // the backend may, the plugin's memory is the host's and t is all of
    // its storage; nullopt otherwise. The access ends with the last
    // reference to the host tensor: the host backend's work keeps one for
    // as long as it uses the bytes.
    std::optional<at::Tensor> in_place(const at::Tensor& t, bool write) {
      if (!b_->in_place_ || t.numel() == 0 || !covers_whole_storage(t)) return std::nullopt;
      // A storage the collective both reads and writes (an in-place
      // all_to_all) is copied: gloo would read bytes it already wrote.
      ttpu_buffer* buffer = write ? writable_buffer_of(t) : buffer_of(t);
      for (const auto& [seen, wrote] : storages_) {
        if (seen == buffer && (write || wrote)) return std::nullopt;
      }
      void* data = nullptr;
      ttpu_host_access* access = nullptr;
      ttpu_status* s = ttpu_buffer_host_begin(buffer, write ? 1 : 0, &data, &access);
      if (s != nullptr && ttpu_status_code(s) == TTPU_UNIMPLEMENTED) {
        ttpu_status_free(s);
        return std::nullopt;
      }
      torchtpu::check(s, name_.c_str());
      at::Tensor host;
      try {
        host = at::from_blob(
            data, t.sizes(), [access](void*) { ttpu_buffer_host_end(access); },
            t.options().device(at::kCPU));
      } catch (...) {
        ttpu_buffer_host_end(access);
        throw;
      }
      in_place_bytes_ += bytes_of(t);
      direct_.push_back(host.data_ptr());
      storages_.emplace_back(buffer, write);
      return host;
    }

    void check_tensor(const at::Tensor& t) {
      TORCH_CHECK(t.defined(), name_, ": undefined tensor");
      TORCH_CHECK(t.layout() == at::kStrided, name_,
                  ": only dense (strided) tensors are supported, got ", t.layout());
    }

    TpuBackend* b_;
    std::string name_;
    std::string what_;
    std::string context_;
    Works works_;
    std::vector<std::function<void()>> finish_;
    int64_t d2h_ = 0;
    int64_t h2d_ = 0;
    int64_t in_place_bytes_ = 0;
    std::vector<PendingCheck> checks_;  // signature exchanges not yet settled
    std::vector<const void*> direct_;  // data of the in-place host tensors
    std::vector<std::pair<ttpu_buffer*, bool>> storages_;  // and whether written
  };

  static const at::Tensor& single(const std::vector<at::Tensor>& tensors,
                                  const char* op) {
    return single_tensor(tensors, op);
  }

  // Splits in elements for the signature; empty splits mean equal parts.
  std::vector<int64_t> row_splits(const at::Tensor& t,
                                  const std::vector<int64_t>& splits,
                                  int64_t row, const char* which) const {
    std::vector<int64_t> out;
    if (splits.empty()) {
      const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
      TORCH_CHECK(rows % size_ == 0, "all_to_all_single: the ", which,
                  " tensor's first dimension (", rows,
                  ") must divide evenly by the group size (", size_, ")");
      out.assign(size_, rows / size_ * row);
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == size_, "all_to_all_single: ",
                  which, " split sizes must have one entry per rank (", size_, ")");
      for (int64_t s : splits) out.push_back(s * row);
    }
    return out;
  }

  // Host input of a reduction and the op the host backend runs: PREMUL_SUM
  // multiplies here and sums there; AVG sums there and divides when the
  // work completes (post_reduce), so no host backend needs them.
  // How a reduction uses its input's host tensor: only reads it, writes
  // its result there (all_reduce; the root of reduce), or overwrites it
  // as scratch (the other ranks of gloo's reduce), which must be a copy.
  enum class Use { read, in_out, scratch };

  std::pair<at::Tensor, c10d::ReduceOp> stage_reduction(
      Issue& issue, const at::Tensor& t, const c10d::ReduceOp& op,
      Use use = Use::read) {
    const bool in_out = use == Use::in_out;
    at::Tensor host = in_out ? issue.stage_in_out(t)
                      : use == Use::scratch ? issue.stage_copy(t)
                                            : issue.stage_in(t);
    if (op.op_ == RedOpType::PREMUL_SUM) {
      at::Tensor f = premul_factor(op);
      if (!in_out && ((t.is_cpu() && host.data_ptr() == t.data_ptr()) ||
                      issue.is_in_place(host))) {
        host = host.clone();
      }
      host.mul_(f.to(host.scalar_type()));
      return {host, c10d::ReduceOp(RedOpType::SUM)};
    }
    if (op.op_ == RedOpType::AVG) {
      return {host, c10d::ReduceOp(RedOpType::SUM)};
    }
    return {host, op};
  }

  void post_reduce(Issue& issue, at::Tensor host, const c10d::ReduceOp& op) {
    if (op.op_ == RedOpType::AVG) {
      const int size = size_;
      issue.after([host, size]() mutable { divide_in_place(host, size); });
    }
  }

  void add_allreduce(Issue& issue, const at::Tensor& t, const c10d::ReduceOp& op,
                     std::chrono::milliseconds timeout) {
    auto [host, host_op] = stage_reduction(issue, t, op, Use::in_out);
    c10d::AllreduceOptions host_opts;
    host_opts.reduceOp = host_op;
    host_opts.timeout = timeout;
    std::vector<at::Tensor> hv{host};
    issue.launch([&] { return host_->allreduce(hv, host_opts); });
    post_reduce(issue, host, op);
    issue.copy_back(t, host);
  }

  void add_allgather_base(Issue& issue, at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts) {
    TORCH_CHECK(output.numel() == input.numel() * size_ &&
                    output.scalar_type() == input.scalar_type(),
                "all_gather_into_tensor: the output must hold group size (", size_,
                ") times the input's elements in its dtype, got output ",
                describe_tensor(output), " for input ", describe_tensor(input));
    at::Tensor hin = issue.stage_in(input);
    at::Tensor hout = issue.host_like(output);
    issue.launch([&] { return host_->_allgather_base(hout, hin, opts); });
    issue.copy_back(output, hout);
  }

  void add_reduce_scatter_base(Issue& issue, at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) {
    TORCH_CHECK(input.numel() == output.numel() * size_ &&
                    output.scalar_type() == input.scalar_type(),
                "reduce_scatter_tensor: the input must hold group size (", size_,
                ") times the output's elements in its dtype, got input ",
                describe_tensor(input), " for output ", describe_tensor(output));
    auto [hin, op] = stage_reduction(issue, input, opts.reduceOp);
    at::Tensor hout = issue.host_like(output);
    c10d::ReduceScatterOptions host_opts = opts;
    host_opts.reduceOp = op;
    issue.launch([&] { return host_->_reduce_scatter_base(hout, hin, host_opts); });
    post_reduce(issue, hout, opts.reduceOp);
    issue.copy_back(output, hout);
  }

  // Starts exchanging `sig` with every rank (finish_check compares).
  PendingCheck start_check(const Signature& sig) {
    const int64_t width = kFixed + 2 * static_cast<int64_t>(size_);
    PendingCheck c;
    c.sig = sig;
    c.mine = at::zeros({width}, at::kLong);
    int64_t* m = c.mine.data_ptr<int64_t>();
    m[0] = kMagic;
    m[1] = static_cast<int64_t>(sig.op);
    m[2] = sig.dtype;
    m[3] = sig.numel;
    m[4] = sig.root;
    m[5] = sig.reduce;
    m[6] = static_cast<int64_t>(sig.shape.size());
    for (size_t i = 0; i < sig.shape.size(); ++i) m[7 + i] = sig.shape[i];
    for (size_t i = 0; i < sig.in_splits.size(); ++i) m[kFixed + i] = sig.in_splits[i];
    for (size_t i = 0; i < sig.out_splits.size(); ++i) {
      m[kFixed + size_ + i] = sig.out_splits[i];
    }
    c.all = at::empty({size_ * width}, at::kLong);
    try {
      c10d::AllgatherOptions opts;
      c.work = host_->_allgather_base(c.all, c.mine, opts);
    } catch (...) {
      c.error = std::current_exception();
    }
    return c;
  }

  // Waits for the exchange and throws on any disagreement.
  void finish_check(PendingCheck& c, const std::string& context) {
    const Signature& sig = c.sig;
    const int64_t width = kFixed + 2 * static_cast<int64_t>(size_);
    try {
      if (c.error) std::rethrow_exception(c.error);
      c.work->wait();
    } catch (...) {
      std::string msg = message_of(std::current_exception());
      throw_dist("torchtpu c10d: " + describe(sig) + " " + context +
                 ": the ranks did not all reach this collective within the "
                 "process group timeout (" +
                 std::to_string(timeout_.count() / 1000.0).substr(0, 6) +
                 " s), or a peer died: " + msg);
    }
    const at::Tensor& all = c.all;
    const int64_t* a = all.data_ptr<int64_t>();
    auto decode = [&](int r) {
      const int64_t* row = a + r * width;
      Signature s;
      s.op = static_cast<Coll>(row[1]);
      s.dtype = row[2];
      s.numel = row[3];
      s.root = row[4];
      s.reduce = row[5];
      s.shape.assign(row + 7, row + 7 + std::min<int64_t>(row[6], kMaxDims));
      if (!sig.in_splits.empty()) {
        s.in_splits.assign(row + kFixed, row + kFixed + size_);
        s.out_splits.assign(row + kFixed + size_, row + kFixed + 2 * size_);
      }
      return s;
    };
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const Signature peer = decode(r);
      std::string what;
      if (a[r * width] != kMagic || peer.op != sig.op) {
        what = "a different collective";
      } else if (peer.dtype != sig.dtype) {
        what = "a different dtype";
      } else if (peer.numel != sig.numel) {
        what = sig.op == Coll::all_to_all_single ? "a different row size"
                                                 : "a different number of elements";
      } else if (peer.root != sig.root) {
        what = "a different root";
      } else if (peer.reduce != sig.reduce) {
        what = "a different reduce op";
      } else if (!sig.in_splits.empty() &&
                 (peer.in_splits[rank_] != sig.out_splits[r] ||
                  peer.out_splits[rank_] != sig.in_splits[r])) {
        what = "split sizes that do not match this rank's (rank " + std::to_string(r) +
               " sends " + std::to_string(peer.in_splits[rank_]) + " and expects " +
               std::to_string(peer.out_splits[rank_]) + " elements; this rank expects " +
               std::to_string(sig.out_splits[r]) + " and sends " +
               std::to_string(sig.in_splits[r]) + ")";
      }
      if (!what.empty()) {
        TORCH_CHECK(false, "torchtpu c10d: collective mismatch at ", context,
                    ": this rank called ", describe(sig), " but rank ", r,
                    " called ", describe(peer), " (", what, ")");
      }
    }
  }

  // Header of a point-to-point transfer: magic, dtype, elements, bytes.
  static constexpr int64_t kP2pHeader = 4;

  // Headers travel on their own gloo tags, one per direction, so that a
  // rank that both sends to and receives from a peer (a ring of two) never
  // matches a header with data or a sender's header with a receiver's:
  // gloo matches messages first-in first-out per (peer, tag). User tags
  // below 2^29 keep their headers apart.
  static int send_header_tag(int tag) { return 0x40000000 | (tag & 0x1fffffff); }
  static int reply_header_tag(int tag) { return 0x60000000 | (tag & 0x1fffffff); }

  static at::Tensor p2p_header(const at::Tensor& t) {
    at::Tensor h = at::zeros({kP2pHeader}, at::kLong);
    int64_t* p = h.data_ptr<int64_t>();
    p[0] = kMagic;
    p[1] = static_cast<int64_t>(t.scalar_type());
    p[2] = t.numel();
    p[3] = bytes_of(t);
    return h;
  }

  // Throws when the peer's header disagrees with ours.
  static void check_p2p(const at::Tensor& mine, const at::Tensor& theirs, int rank,
                        int peer, const std::string& me, bool sending) {
    const int64_t* a = mine.data_ptr<int64_t>();
    const int64_t* b = theirs.data_ptr<int64_t>();
    if (b[0] == kMagic && a[1] == b[1] && a[2] == b[2]) return;
    std::ostringstream o;
    o << "torchtpu c10d: send/recv mismatch: rank " << rank
      << (sending ? " sends " : " receives into ") << me
      << (sending ? " to rank " : " from rank ") << peer << " but rank " << peer;
    if (b[0] != kMagic) {
      o << " sent no matching header";
    } else {
      o << (sending ? " receives into " : " sends ")
        << dtype_name(static_cast<c10::ScalarType>(b[1])) << " with " << b[2]
        << " elements";
    }
    o << " (the dtype and number of elements of a send and its recv must agree)";
    TORCH_CHECK(false, o.str());
  }

  // Waits for every checked send's data write; a failed one was already
  // reported by its recv on the peer, so errors are dropped here.
  void finish_sends() noexcept {
    for (auto& w : in_flight_sends_) {
      try {
        w->wait(timeout_);
      } catch (...) {
      }
    }
    in_flight_sends_.clear();
  }

  c10::intrusive_ptr<c10d::Backend> host_;
  const bool check_;
  const bool in_place_;  // use tpu storages' bytes in place where it can
  int64_t seq_ = 0;
  Works in_flight_sends_;  // checked sends' data, until gloo is done with it
};

}  // namespace

void init_distributed(pybind11::module& m) {
  m.def(
      "_dist_backend",
      [](c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
         double timeout_s, bool check,
         bool in_place) -> c10::intrusive_ptr<c10d::Backend> {
        TORCH_CHECK(host, "the tpu backend needs a host backend");
        return c10::make_intrusive<TpuBackend>(
            std::move(host), rank, size,
            timeout_from_seconds(timeout_s), check, in_place);
      },
      pybind11::arg("host"), pybind11::arg("rank"), pybind11::arg("size"),
      pybind11::arg("timeout_s"), pybind11::arg("check"),
      pybind11::arg("in_place") = true,
      "A c10d backend for tpu tensors staging through `host` (a gloo Backend).");
  m.def(
      "_dist_counters",
      [] {
        pybind11::dict out;
        std::lock_guard<std::mutex> lock(counters_mutex);
        for (const auto& [name, c] : counters) {
          pybind11::dict d;
          d["calls"] = c.calls;
          d["d2h_bytes"] = c.d2h_bytes;
          d["h2d_bytes"] = c.h2d_bytes;
          d["in_place_bytes"] = c.in_place_bytes;
          out[pybind11::str(name)] = d;
        }
        return out;
      },
      "Collectives run by the tpu backend in this process, per op.");
  m.def("_dist_reset_counters", [] {
    std::lock_guard<std::mutex> lock(counters_mutex);
    counters.clear();
  });
}

}  // namespace torchtpu
