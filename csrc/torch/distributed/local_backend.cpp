// The c10d backend for ranks that are threads of this process, each on its
// own tpu device of the one PJRT client (torchtpu.distributed chooses it
// when every rank of a group reports this process and distinct devices;
// PyTorch runs ranks as threads with its thread-local world, as its
// threaded process groups do).
//
// Each collective is a rendezvous: every rank brings its part (tensors on
// its device and the collective's signature) and returns at once with a
// work; the last rank to arrive checks that the signatures agree and
// launches the collective for everyone, as ONE XLA collective program over
// all ranks' devices where one exists (broadcast, all_reduce, reduce,
// all_gather, reduce_scatter, equal-split all_to_all), or as device-to-
// device copies where the shapes are irregular (uneven all_to_all, gather,
// scatter, send/recv). Results are enqueued (pending device buffers) before
// any rank's work completes, so a rank that waits and then reads sees them;
// the work's future completes without blocking anyone (DDP asks for it
// from inside backward). A rank that never arrives makes the others' waits
// fail with a DistBackendError naming the collective and the missing ranks
// after the group's timeout.
#include "python/coll_binding.h"
#include "distributed/backend_base.h"
#include "runtime/runtime.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace torchtpu {

namespace {

using c10d::OpType;
using Future = c10::intrusive_ptr<c10::ivalue::Future>;

using Op = Collective;

// One rank's share of one collective. in[j]/out[j] are the j-th tensor
// pair (coalesced calls have several), on the rank's device.
struct Part {
  Op op = Op::barrier;
  std::string what;           // for messages: "all_reduce(float32[6], op=SUM)"
  std::vector<int64_t> sig;   // must be equal on every rank
  std::vector<at::Tensor> in, out;
  std::vector<at::Tensor> list;  // gather/scatter/all_to_all per-rank tensors
  ttpu_reduce_op reduce = TTPU_REDUCE_SUM;
  double premul = 1.0;
  int root = -1;
  std::vector<int64_t> in_rows, out_rows;  // all_to_all_single splits (rows)
  std::vector<std::function<void()>> after;  // copy-backs, after the launch
  std::vector<at::Tensor> result;            // the future's value
  Future future;
};

// How an error reaches every waiting rank: re-created per rank, so no
// exception object is shared between threads.
enum class ErrKind { runtime, value, not_implemented, type, index, dist };

struct Rendezvous {
  explicit Rendezvous(int n) : parts(n), joined(n, false) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Part>> parts;
  std::vector<bool> joined;
  bool done = false;
  bool failed = false;
  ErrKind err_kind = ErrKind::runtime;
  std::string err;
};

[[noreturn]] void throw_kind(ErrKind kind, const std::string& msg) {
  const c10::SourceLocation loc{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  switch (kind) {
    case ErrKind::value: throw c10::ValueError(loc, msg);
    case ErrKind::not_implemented: throw c10::NotImplementedError(loc, msg);
    case ErrKind::type: throw c10::TypeError(loc, msg);
    case ErrKind::index: throw c10::IndexError(loc, msg);
    case ErrKind::dist: throw c10::DistBackendError(loc, msg);
    case ErrKind::runtime: break;
  }
  throw c10::Error(loc, msg);
}

std::exception_ptr make_error(ErrKind kind, const std::string& msg) {
  try {
    throw_kind(kind, msg);
  } catch (...) {
    return std::current_exception();
  }
}

// The kind and message of the exception being handled.
std::pair<ErrKind, std::string> classify_current() {
  try {
    throw;
  } catch (const c10::DistError& e) {
    return {ErrKind::dist, e.what_without_backtrace()};
  } catch (const c10::ValueError& e) {
    return {ErrKind::value, e.what_without_backtrace()};
  } catch (const c10::NotImplementedError& e) {
    return {ErrKind::not_implemented, e.what_without_backtrace()};
  } catch (const c10::TypeError& e) {
    return {ErrKind::type, e.what_without_backtrace()};
  } catch (const c10::IndexError& e) {
    return {ErrKind::index, e.what_without_backtrace()};
  } catch (const c10::Error& e) {
    return {ErrKind::runtime, e.what_without_backtrace()};
  } catch (const std::exception& e) {
    return {ErrKind::runtime, e.what()};
  } catch (...) {
    return {ErrKind::runtime, "unknown error"};
  }
}

// c10d's reduce op as the engine's; BAND/BOR/BXOR have no XLA collective.
ttpu_reduce_op engine_reduce(const c10d::ReduceOp& op, const char* what) {
  switch (op.op_) {
    case RedOpType::SUM: return TTPU_REDUCE_SUM;
    case RedOpType::AVG: return TTPU_REDUCE_AVG;
    case RedOpType::PRODUCT: return TTPU_REDUCE_PRODUCT;
    case RedOpType::MIN: return TTPU_REDUCE_MIN;
    case RedOpType::MAX: return TTPU_REDUCE_MAX;
    case RedOpType::PREMUL_SUM: return TTPU_REDUCE_PREMUL_SUM;
    default: break;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, what, ": reduce op ", reduce_op_name(op.op_),
                              " is not supported by the tpu backend's in-process "
                              "path (XLA collectives reduce with SUM, AVG, PRODUCT, "
                              "MIN, MAX, PREMUL_SUM)");
}

double premul_value(const c10d::ReduceOp& op) {
  return premul_factor(op).to(at::kDouble).item<double>();
}

// --------------------------------------------------------------- finishing

std::vector<at::Tensor> column(const std::vector<Part*>& p, bool inputs, size_t j) {
  std::vector<at::Tensor> out;
  for (Part* x : p) out.push_back(inputs ? x->in[j] : x->out[j]);
  return out;
}

// Reductions: the engine applies one premul factor to every member, so
// differing per-rank factors are applied here first (one multiply each).
void run_reduction(const std::vector<Part*>& p, ttpu_coll_kind kind, size_t j,
                   const std::string& name) {
  XlaCollective c;
  c.kind = kind;
  c.op = p[0]->reduce;
  c.premul = p[0]->premul;
  std::vector<at::Tensor> ins = column(p, true, j);
  if (c.op == TTPU_REDUCE_PREMUL_SUM) {
    bool same = std::all_of(p.begin(), p.end(),
                            [&](Part* x) { return x->premul == c.premul; });
    if (!same) {
      for (size_t r = 0; r < p.size(); ++r) ins[r] = ins[r] * p[r]->premul;
      c.op = TTPU_REDUCE_SUM;
    }
  }
  run_xla_collective(c, ins, column(p, false, j), name);
}

// All-to-all by device copies: rank i's rows for rank j land in rank j's
// output at rank i's place. rows[i][j]: rows rank i sends to rank j.
void all_to_all_copies(const std::vector<Part*>& p) {
  const size_t n = p.size();
  int64_t moved = 0;
  for (size_t j = 0; j < n; ++j) {
    int64_t at_out = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t at_in = 0;
      for (size_t k = 0; k < j; ++k) at_in += p[i]->in_rows[k];
      const int64_t rows = p[i]->in_rows[j];
      if (rows > 0) {
        at::Tensor dst = p[j]->out[0].narrow(0, at_out, rows);
        dst.copy_(p[i]->in[0].narrow(0, at_in, rows));
        moved += bytes_of(dst);
      }
      at_out += rows;
    }
  }
  count_path(kPathCopy, "all_to_all_single", moved / static_cast<int64_t>(n));
}

// Runs the collective for every rank (the last rank to arrive calls it).
void run_parts(const std::vector<Part*>& p) {
  const Op op = p[0]->op;
  const size_t n = p.size();
  const std::string name = collective_name(op);
  switch (op) {
    case Op::barrier:
      return;
    case Op::broadcast: {
      XlaCollective c;
      c.kind = TTPU_COLL_BROADCAST;
      c.root = p[0]->root;
      run_xla_collective(c, column(p, true, 0), column(p, false, 0), name);
      return;
    }
    case Op::all_reduce:
      for (size_t j = 0; j < p[0]->in.size(); ++j)
        run_reduction(p, TTPU_COLL_ALL_REDUCE, j, name);
      return;
    case Op::reduce:
      run_reduction(p, TTPU_COLL_ALL_REDUCE, 0, name);
      return;
    case Op::all_gather:
    case Op::all_gather_into_tensor:
      for (size_t j = 0; j < p[0]->in.size(); ++j) {
        XlaCollective c;
        c.kind = TTPU_COLL_ALL_GATHER;
        run_xla_collective(c, column(p, true, j), column(p, false, j), name);
      }
      return;
    case Op::reduce_scatter:
    case Op::reduce_scatter_tensor:
      for (size_t j = 0; j < p[0]->in.size(); ++j)
        run_reduction(p, TTPU_COLL_REDUCE_SCATTER, j, name);
      return;
    case Op::all_to_all:
    case Op::all_to_all_single: {
      for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
          TORCH_CHECK(p[i]->in_rows[j] == p[j]->out_rows[i],
                      "split sizes disagree: rank ", i, " sends ", p[i]->in_rows[j],
                      op == Op::all_to_all ? " elements" : " rows", " to rank ", j,
                      " but rank ", j, " expects ", p[j]->out_rows[i], " from rank ", i);
      bool even = true;
      for (Part* x : p)
        for (size_t k = 0; k < n; ++k)
          even = even && x->in_rows[k] == p[0]->in_rows[0] &&
                 x->out_rows[k] == p[0]->in_rows[0];
      if (even && p[0]->in[0].numel() % static_cast<int64_t>(n) == 0) {
        XlaCollective c;
        c.kind = TTPU_COLL_ALL_TO_ALL;
        run_xla_collective(c, column(p, true, 0), column(p, false, 0), name);
      } else {
        all_to_all_copies(p);
      }
      return;
    }
    case Op::gather: {
      Part* root = p[static_cast<size_t>(p[0]->root)];
      for (size_t i = 0; i < n; ++i) root->list[i].copy_(p[i]->in[0]);
      count_path(kPathCopy, name, bytes_of(p[0]->in[0]));
      return;
    }
    case Op::scatter: {
      Part* root = p[static_cast<size_t>(p[0]->root)];
      for (size_t i = 0; i < n; ++i) p[i]->out[0].copy_(root->list[i]);
      count_path(kPathCopy, name, bytes_of(p[0]->out[0]));
      return;
    }
    case Op::send_recv:
      p[1]->out[0].copy_(p[0]->in[0]);
      count_path(kPathCopy, name, bytes_of(p[0]->in[0]));
      return;
  }
}

// The first disagreement between the parts, as an error message, or "".
std::string mismatch(const std::vector<Part*>& p, const std::string& context) {
  for (size_t r = 1; r < p.size(); ++r) {
    if (p[r]->sig == p[0]->sig) continue;
    std::ostringstream s;
    if (p[0]->op == Op::send_recv) {
      s << "torchtpu c10d: send/recv mismatch " << context << ": " << p[0]->what
        << " but " << p[1]->what << " (the sizes and dtypes of a send and its "
        << "recv must agree)";
    } else {
      s << "torchtpu c10d: collective mismatch at " << context << ": rank 0 called "
        << p[0]->what << " but rank " << r << " called " << p[r]->what;
      if (p[0]->what == p[r]->what) {
        // Same description: say which signature word differs.
        s << " (signatures differ:";
        for (const auto* x : {p[0], p[r]}) {
          s << " [";
          for (size_t k = 0; k < x->sig.size(); ++k) s << (k ? " " : "") << x->sig[k];
          s << "]";
        }
        s << ")";
      }
    }
    return s.str();
  }
  return "";
}

// ------------------------------------------------------------------ group

// The ranks of one process group that live in this process.
class LocalGroup {
 public:
  // Adds `part` at `slot` of the rendezvous named `key` (n slots); the last
  // to arrive runs it, on this thread, before returning.
  std::shared_ptr<Rendezvous> join(const std::string& key, int n, int slot,
                                   std::unique_ptr<Part> part,
                                   const std::string& context) {
    std::shared_ptr<Rendezvous> r;
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(key);
      if (it == pending_.end()) {
        it = pending_.emplace(key, std::make_shared<Rendezvous>(n)).first;
      }
      r = it->second;
      std::lock_guard<std::mutex> rl(r->mu);
      r->parts[static_cast<size_t>(slot)] = std::move(part);
      r->joined[static_cast<size_t>(slot)] = true;
      last = std::all_of(r->joined.begin(), r->joined.end(), [](bool b) { return b; });
      if (last) pending_.erase(it);
    }
    if (last) finish(*r, context);
    return r;
  }

 private:
  static void finish(Rendezvous& r, const std::string& context) {
    std::vector<Part*> parts;
    for (auto& x : r.parts) parts.push_back(x.get());
    bool failed = false;
    ErrKind kind = ErrKind::runtime;
    std::string msg = mismatch(parts, context);
    if (!msg.empty()) {
      failed = true;
    } else {
      try {
        run_parts(parts);
        for (Part* x : parts)
          for (auto& step : x->after) step();
      } catch (...) {
        failed = true;
        std::tie(kind, msg) = classify_current();
        msg = "torchtpu c10d: " + parts[0]->what + " " + context + " failed: " + msg;
      }
    }
    {
      std::lock_guard<std::mutex> lock(r.mu);
      r.done = true;
      r.failed = failed;
      r.err_kind = kind;
      r.err = msg;
    }
    r.cv.notify_all();
    // Futures last, with no lock held: their callbacks (DDP's, a comm
    // hook's) run here.
    for (Part* x : parts) {
      if (!x->future) continue;
      if (failed) {
        x->future->setError(make_error(kind, msg));
      } else {
        x->future->markCompleted(c10::IValue(x->result));
      }
    }
    for (Part* x : parts) {
      x->after.clear();
      x->in.clear();
      x->list.clear();
    }
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Rendezvous>> pending_;
};

std::mutex groups_mutex;
std::map<std::string, std::weak_ptr<LocalGroup>> groups;

std::shared_ptr<LocalGroup> group_for(const std::string& key) {
  std::lock_guard<std::mutex> lock(groups_mutex);
  std::shared_ptr<LocalGroup> g = groups[key].lock();
  if (!g) {
    g = std::make_shared<LocalGroup>();
    groups[key] = g;
  }
  return g;
}

// ------------------------------------------------------------------- work

class LocalWork final : public c10d::Work {
 public:
  LocalWork(int rank, OpType type, std::string what, std::string context,
            std::vector<std::shared_ptr<Rendezvous>> rvs, Future future,
            std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
      : Work(rank, type),
        what_(std::move(what)),
        context_(std::move(context)),
        rvs_(std::move(rvs)),
        future_(std::move(future)),
        outputs_(std::move(outputs)),
        timeout_(timeout) {}

  bool isCompleted() override {
    for (auto& r : rvs_) {
      std::lock_guard<std::mutex> lock(r->mu);
      if (!r->done) return false;
    }
    return true;
  }

  bool isSuccess() const override {
    for (auto& r : rvs_) {
      std::lock_guard<std::mutex> lock(r->mu);
      if (!r->done || r->failed) return false;
    }
    return true;
  }

  std::exception_ptr exception() const override {
    for (auto& r : rvs_) {
      std::lock_guard<std::mutex> lock(r->mu);
      if (r->done && r->failed) return make_error(r->err_kind, r->err);
    }
    return nullptr;
  }

  std::vector<at::Tensor> result() override { return outputs_; }

  void synchronize() override { wait(kNoTimeout); }

  bool wait(std::chrono::milliseconds timeout) override {
    const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (auto& r : rvs_) {
      std::unique_lock<std::mutex> lock(r->mu);
      if (!r->cv.wait_until(lock, deadline, [&] { return r->done; })) {
        std::ostringstream s;
        s << "torchtpu c10d: " << what_ << " " << context_ << " timed out after "
          << limit.count() / 1000.0 << " s: rank";
        std::vector<size_t> missing;
        for (size_t i = 0; i < r->joined.size(); ++i)
          if (!r->joined[i]) missing.push_back(i);
        s << (missing.size() == 1 ? " " : "s ");
        for (size_t i = 0; i < missing.size(); ++i) s << (i ? ", " : "") << missing[i];
        s << " did not call it (the collective did not complete within the "
             "process group timeout: a peer rank may have died, hung, or not "
             "called it)";
        throw c10::DistBackendError(
            c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
            s.str());
      }
      if (r->failed) throw_kind(r->err_kind, r->err);
    }
    return true;
  }

  // Completed by the rank that launches the collective; waiting is not
  // needed to get it. A coalesced work has none of its own: it waits.
  Future getFuture() override {
    if (future_) return future_;
    wait(kNoTimeout);
    Future f = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    f->markCompleted(c10::IValue(outputs_));
    return f;
  }

 private:
  const std::string what_;
  const std::string context_;
  std::vector<std::shared_ptr<Rendezvous>> rvs_;
  Future future_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
};

// ---------------------------------------------------------------- backend

class LocalBackend final : public TpuBackendBase<std::shared_ptr<Rendezvous>> {
 public:
  LocalBackend(std::shared_ptr<LocalGroup> group, int rank, int size,
               std::chrono::milliseconds timeout, int device)
      : TpuBackendBase(rank, size, timeout), group_(std::move(group)),
        device_(static_cast<c10::DeviceIndex>(device)) {}

 protected:
  // Completing it waits for the rendezvous of the coalesced collectives.
  c10::intrusive_ptr<c10d::Work> coalesced_work(
      std::vector<std::shared_ptr<Rendezvous>> rvs) override {
    return c10::make_intrusive<LocalWork>(
        rank_, OpType::COALESCED, "coalesced collectives", context(seq_), std::move(rvs),
        Future(), std::vector<at::Tensor>{}, timeout_);
  }

 public:

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    auto p = part(Op::broadcast);
    const at::Tensor& t = single(tensors, "broadcast");
    p->root = static_cast<int>(opts.rootRank);
    add_pair(*p, t, t);
    p->what = describe_call(*p, t, ", root=" + std::to_string(opts.rootRank));
    p->sig.push_back(opts.rootRank);
    return issue(std::move(p), OpType::BROADCAST, {t});
  }

  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    return allreduce_list(tensors, opts.reduceOp, OpType::ALLREDUCE);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override {
    return allreduce_list(tensors, opts.reduceOp, OpType::ALLREDUCE_COALESCED);
  }

  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    auto p = part(Op::reduce);
    const at::Tensor& t = single(tensors, "reduce");
    set_reduce(*p, opts.reduceOp, "reduce");
    p->root = static_cast<int>(opts.rootRank);
    // Every rank reduces; only the root keeps the result.
    if (rank_ == opts.rootRank) {
      add_pair(*p, t, t);
    } else {
      at::Tensor in = on_device(t);
      p->in.push_back(in);
      p->out.push_back(at::empty_like(in, at::MemoryFormat::Contiguous));
      p->sig.push_back(static_cast<int64_t>(t.scalar_type()));
      p->sig.push_back(t.numel());
      p->result.push_back(t);
    }
    p->what = describe_call(*p, t, ", root=" + std::to_string(opts.rootRank) +
                                       ", op=" + reduce_op_name(opts.reduceOp.op_));
    p->sig.push_back(opts.rootRank);
    return issue(std::move(p), OpType::REDUCE, {t});
  }

  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions&) override {
    const at::Tensor& in = single(inputs, "all_gather");
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "all_gather: expected a list of ", size_, " output tensors");
    auto p = part(Op::all_gather);
    add_gather_list(*p, in, outputs[0]);
    p->what = describe_call(*p, in, "");
    return issue(std::move(p), OpType::ALLGATHER, outputs[0]);
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions&) override {
    TORCH_CHECK(output_lists.size() == inputs.size(), "all_gather_coalesced: ",
                output_lists.size(), " output lists for ", inputs.size(), " inputs");
    auto p = part(Op::all_gather);
    std::vector<at::Tensor> all;
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK(static_cast<int>(output_lists[i].size()) == size_,
                  "all_gather_coalesced: expected lists of ", size_, " output tensors");
      add_gather_list(*p, inputs[i], output_lists[i]);
      all.insert(all.end(), output_lists[i].begin(), output_lists[i].end());
    }
    p->what = "all_gather (coalesced, " + std::to_string(inputs.size()) + " tensors)";
    return issue(std::move(p), OpType::ALLGATHER_COALESCED, all);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) override {
    auto p = part(Op::all_gather_into_tensor);
    add_sized(*p, output, input, size_, 1, "all_gather_into_tensor");
    p->what = describe_call(*p, input, "");
    return issue(std::move(p), OpType::_ALLGATHER_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "all_gather_into_tensor_coalesced: ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    auto p = part(Op::all_gather_into_tensor);
    for (size_t i = 0; i < inputs.size(); ++i)
      add_sized(*p, outputs[i], inputs[i], size_, 1, "all_gather_into_tensor");
    p->what = "all_gather_into_tensor (coalesced, " + std::to_string(inputs.size()) +
              " tensors)";
    return issue(std::move(p), OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override {
    const at::Tensor& in = single(inputs, "gather");
    auto p = part(Op::gather);
    p->root = static_cast<int>(opts.rootRank);
    p->in.push_back(in);  // read by the root's device copies
    std::vector<at::Tensor> results;
    if (rank_ == opts.rootRank) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                  "gather: the root needs a list of ", size_, " output tensors");
      for (const auto& o : outputs[0]) {
        TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                    "gather: output tensors must match the input's dtype and size, got ",
                    describe_tensor(o), " for input ", describe_tensor(in));
        p->list.push_back(o);
        results.push_back(o);
      }
    }
    p->what = describe_call(*p, in, ", root=" + std::to_string(opts.rootRank));
    p->sig.insert(p->sig.end(), {opts.rootRank, static_cast<int64_t>(in.scalar_type()),
                                 in.numel()});
    p->result = results;
    return issue(std::move(p), OpType::GATHER, results);
  }

  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "scatter");
    auto p = part(Op::scatter);
    p->root = static_cast<int>(opts.rootRank);
    p->out.push_back(out);
    if (rank_ == opts.rootRank) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                  "scatter: the root needs a list of ", size_, " input tensors");
      for (const auto& i : inputs[0]) {
        TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                    "scatter: input tensors must match the output's dtype and size, got ",
                    describe_tensor(i), " for output ", describe_tensor(out));
        p->list.push_back(i);
      }
    }
    p->what = describe_call(*p, out, ", root=" + std::to_string(opts.rootRank));
    p->sig.insert(p->sig.end(), {opts.rootRank, static_cast<int64_t>(out.scalar_type()),
                                 out.numel()});
    p->result.push_back(out);
    return issue(std::move(p), OpType::SCATTER, {out});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    const at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "reduce_scatter: expected a list of ", size_, " input tensors");
    std::vector<at::Tensor> flat;
    for (const auto& i : inputs[0]) {
      TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                  "reduce_scatter: input tensors must match the output's dtype and "
                  "size, got ", describe_tensor(i), " for output ", describe_tensor(out));
      flat.push_back(on_device(i).reshape({-1}));
    }
    auto p = part(Op::reduce_scatter);
    set_reduce(*p, opts.reduceOp, "reduce_scatter");
    add_sized(*p, out, at::cat(flat), 1, size_, "reduce_scatter");
    p->what = describe_call(*p, out, std::string(", op=") + reduce_op_name(opts.reduceOp.op_));
    return issue(std::move(p), OpType::REDUCE_SCATTER, {out});
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override {
    auto p = part(Op::reduce_scatter_tensor);
    set_reduce(*p, opts.reduceOp, "reduce_scatter_tensor");
    add_sized(*p, output, input, 1, size_, "reduce_scatter_tensor");
    p->what = describe_call(*p, input, std::string(", op=") + reduce_op_name(opts.reduceOp.op_));
    return issue(std::move(p), OpType::_REDUCE_SCATTER_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(), "reduce_scatter_tensor_coalesced: ",
                outputs.size(), " outputs for ", inputs.size(), " inputs");
    auto p = part(Op::reduce_scatter_tensor);
    set_reduce(*p, opts.reduceOp, "reduce_scatter_tensor");
    for (size_t i = 0; i < inputs.size(); ++i)
      add_sized(*p, outputs[i], inputs[i], 1, size_, "reduce_scatter_tensor");
    p->what = "reduce_scatter_tensor (coalesced, " + std::to_string(inputs.size()) +
              " tensors)";
    return issue(std::move(p), kReduceScatterTensorCoalesced, outputs);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits, const c10d::AllToAllOptions&) override {
    auto p = part(Op::all_to_all_single);
    p->in_rows = rows(input, input_splits, "input");
    p->out_rows = rows(output, output_splits, "output");
    add_pair(*p, input, output, /*same_size=*/false);
    const int64_t row = input.dim() > 0 && input.size(0) > 0
                            ? input.numel() / input.size(0) : input.numel();
    p->what = describe_call(*p, input, "");
    p->sig = {static_cast<int64_t>(Op::all_to_all_single),
              static_cast<int64_t>(input.scalar_type()), row};
    return issue(std::move(p), OpType::ALLTOALL_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions&) override {
    TORCH_CHECK(static_cast<int>(outputs.size()) == size_ &&
                    static_cast<int>(inputs.size()) == size_,
                "all_to_all: expected ", size_, " input and output tensors");
    auto p = part(Op::all_to_all);
    // One flat input and output of the pieces in rank order; the splits
    // are the pieces' element counts.
    std::vector<at::Tensor> flat_in;
    int64_t out_total = 0;
    for (int r = 0; r < size_; ++r) {
      TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                      outputs[r].scalar_type() == inputs[0].scalar_type(),
                  "all_to_all: every tensor must have one dtype");
      flat_in.push_back(on_device(inputs[r]).reshape({-1}));
      p->in_rows.push_back(inputs[r].numel());
      p->out_rows.push_back(outputs[r].numel());
      out_total += outputs[r].numel();
    }
    at::Tensor in = at::cat(flat_in);
    at::Tensor out = at::empty({out_total}, in.options());
    p->in.push_back(in);
    p->out.push_back(out);
    int64_t at_out = 0;
    for (int r = 0; r < size_; ++r) {
      at::Tensor dst = outputs[r];
      at::Tensor src = out.narrow(0, at_out, outputs[r].numel());
      at_out += outputs[r].numel();
      p->after.push_back([dst, src]() mutable { dst.copy_(src.view(dst.sizes())); });
    }
    p->what = describe_call(*p, inputs[0], "");
    p->sig = {static_cast<int64_t>(Op::all_to_all),
              static_cast<int64_t>(inputs[0].scalar_type())};
    return issue(std::move(p), OpType::ALLTOALL, outputs);
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override {
    const at::Tensor& t = single(tensors, "send");
    check_peer(dst, "send");
    return p2p(t, rank_, dst, tag, /*sending=*/true);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override {
    const at::Tensor& t = single(tensors, "recv");
    check_peer(src, "recv");
    return p2p(t, src, rank_, tag, /*sending=*/false);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    auto p = part(Op::barrier);
    p->what = "barrier()";
    return issue(std::move(p), OpType::BARRIER, {});
  }

 private:
  std::string context(int64_t seq) const {
    return "#" + std::to_string(seq) + " on rank " + std::to_string(rank_) + " of " +
           std::to_string(size_);
  }

  std::unique_ptr<Part> part(Op op) const {
    auto p = std::make_unique<Part>();
    p->op = op;
    p->sig.push_back(static_cast<int64_t>(op));
    return p;
  }

  static const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
    const at::Tensor& t = single_tensor(tensors, op);
    TORCH_CHECK(t.defined(), op, ": undefined tensor");
    return t;
  }

  void check_peer(int peer, const char* op) const {
    TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, op, ": invalid peer rank ",
                peer, " (this is rank ", rank_, " of ", size_, ")");
  }

  // `t` on this rank's device (a copy if it lives elsewhere: the host, or
  // another rank's device).
  at::Tensor on_device(const at::Tensor& t) const {
    TORCH_CHECK(t.layout() == at::kStrided, "only dense (strided) tensors are supported");
    if (t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device_)
      return t;
    return t.to(tpu_device(device_));
  }

  // out is written with what the collective puts in a tensor shaped like
  // it: through a temporary on this rank's device when `out` is not there.
  at::Tensor writable(Part& p, const at::Tensor& out) const {
    at::Tensor w = on_device(out);
    if (!w.is_same(out)) {
      at::Tensor dst = out;
      p.after.push_back([dst, w]() mutable { dst.copy_(w); });
    }
    return w;
  }

  void add_pair(Part& p, const at::Tensor& in, const at::Tensor& out,
                bool same_size = true) const {
    if (same_size) {
      TORCH_CHECK(in.numel() == out.numel() && in.scalar_type() == out.scalar_type(),
                  collective_name(p.op), ": input ", describe_tensor(in), " and output ", describe_tensor(out),
                  " differ");
    }
    at::Tensor i = on_device(in);
    at::Tensor o = in.is_same(out) ? i : writable(p, out);
    if (in.is_same(out) && !i.is_same(in)) {
      at::Tensor dst = out;
      p.after.push_back([dst, i]() mutable { dst.copy_(i); });
    }
    p.in.push_back(i);
    p.out.push_back(o);
    p.sig.push_back(static_cast<int64_t>(in.scalar_type()));
    p.sig.push_back(in.numel());
    p.result.push_back(out);
  }

  // Output and input whose element counts relate by out_mul/in_mul (group
  // size for gathers and scatters).
  void add_sized(Part& p, const at::Tensor& out, const at::Tensor& in, int out_mul,
                 int in_mul, const char* what) const {
    TORCH_CHECK(out.numel() * in_mul == in.numel() * out_mul &&
                    out.scalar_type() == in.scalar_type(),
                what, ": the ", out_mul > 1 ? "output" : "input",
                " must hold group size (", size_, ") times the ",
                out_mul > 1 ? "input" : "output", "'s elements in its dtype, got output ",
                describe_tensor(out), " for input ", describe_tensor(in));
    p.in.push_back(on_device(in));
    p.out.push_back(writable(p, out));
    p.sig.push_back(static_cast<int64_t>(in.scalar_type()));
    p.sig.push_back(in.numel());
    p.result.push_back(out);
  }

  // all_gather into a list: one program into a flat temporary, then the
  // pieces copied into the caller's tensors.
  void add_gather_list(Part& p, const at::Tensor& in, const std::vector<at::Tensor>& outs) const {
    for (const auto& o : outs) {
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "all_gather: output tensors must match the input's dtype and size, got ",
                  describe_tensor(o), " for input ", describe_tensor(in));
    }
    at::Tensor i = on_device(in);
    at::Tensor flat = at::empty({in.numel() * size_}, i.options());
    for (int r = 0; r < size_; ++r) {
      at::Tensor dst = outs[static_cast<size_t>(r)];
      at::Tensor src = flat.narrow(0, r * in.numel(), in.numel());
      p.after.push_back([dst, src]() mutable { dst.copy_(src.view(dst.sizes())); });
    }
    p.in.push_back(i);
    p.out.push_back(flat);
    p.sig.push_back(static_cast<int64_t>(in.scalar_type()));
    p.sig.push_back(in.numel());
    p.result.insert(p.result.end(), outs.begin(), outs.end());
  }

  void set_reduce(Part& p, const c10d::ReduceOp& op, const char* what) const {
    p.reduce = engine_reduce(op, what);
    if (op.op_ == RedOpType::PREMUL_SUM) p.premul = premul_value(op);
    p.sig.push_back(static_cast<int64_t>(op.op_));
  }

  // Rows each rank gets (dim 0); empty splits mean equal parts.
  std::vector<int64_t> rows(const at::Tensor& t, const std::vector<int64_t>& splits,
                            const char* which) const {
    if (splits.empty()) {
      const int64_t n = t.dim() > 0 ? t.size(0) : 1;
      TORCH_CHECK(n % size_ == 0, "all_to_all_single: the ", which,
                  " tensor's first dimension (", n,
                  ") must divide evenly by the group size (", size_, ")");
      return std::vector<int64_t>(static_cast<size_t>(size_), n / size_);
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == size_, "all_to_all_single: ", which,
                " split sizes must have one entry per rank (", size_, ")");
    int64_t total = 0;
    for (int64_t x : splits) total += x;
    TORCH_CHECK(total == (t.dim() > 0 ? t.size(0) : 1), "all_to_all_single: the ", which,
                " split sizes add up to ", total, " rows, the tensor has ",
                t.dim() > 0 ? t.size(0) : 1);
    return splits;
  }

  static std::string describe_call(const Part& p, const at::Tensor& t,
                                   const std::string& extra) {
    return std::string(collective_name(p.op)) + "(" + describe_tensor(t) + extra + ")";
  }

  c10::intrusive_ptr<c10d::Work> allreduce_list(std::vector<at::Tensor>& tensors,
                                                const c10d::ReduceOp& op, OpType type) {
    TORCH_CHECK(!tensors.empty(), "all_reduce: no tensors");
    auto p = part(Op::all_reduce);
    set_reduce(*p, op, "all_reduce");
    for (const auto& t : tensors) {
      TORCH_CHECK(t.defined(), "all_reduce: undefined tensor");
      add_pair(*p, t, t);
    }
    p->what = tensors.size() == 1
                  ? describe_call(*p, tensors[0], std::string(", op=") + reduce_op_name(op.op_))
                  : "all_reduce (coalesced, " + std::to_string(tensors.size()) +
                        " tensors, op=" + reduce_op_name(op.op_) + ")";
    return issue(std::move(p), type, tensors);
  }

  c10::intrusive_ptr<c10d::Work> p2p(const at::Tensor& t, int src, int dst, int tag,
                                     bool sending) {
    auto p = part(Op::send_recv);
    const std::string key_tail =
        std::to_string(src) + "/" + std::to_string(dst) + "/" + std::to_string(tag);
    int64_t& counter = (sending ? sends_ : recvs_)[key_tail];
    const std::string key = "p2p/" + key_tail + "/" + std::to_string(counter++);
    // A send and its recv must agree on dtype and element count: the
    // signature says so, and the message names both sides.
    p->sig.push_back(static_cast<int64_t>(t.scalar_type()));
    p->sig.push_back(t.numel());
    if (sending) {
      p->in.push_back(t);
      p->what = "rank " + std::to_string(src) + " sends " + describe_tensor(t) + " to rank " +
                std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
    } else {
      p->out.push_back(t);
      p->result.push_back(t);
      p->what = "rank " + std::to_string(dst) + " receives into " + describe_tensor(t) +
                " from rank " + std::to_string(src);
    }
    const std::string ctx = "#" + std::to_string(++seq_) + " between ranks " +
                            std::to_string(src) + " and " + std::to_string(dst);
    const std::string what = p->what;
    std::vector<at::Tensor> outs = p->result;
    p->future = new_future();
    Future f = p->future;
    auto r = group_->join(key, 2, sending ? 0 : 1, std::move(p), ctx);
    collect(r);
    return c10::make_intrusive<LocalWork>(
        rank_, sending ? OpType::SEND : OpType::RECV, what, ctx,
        std::vector<std::shared_ptr<Rendezvous>>{r}, f, outs, timeout_);
  }

  static Future new_future() { return new_tensor_list_future(); }

  c10::intrusive_ptr<c10d::Work> issue(std::unique_ptr<Part> p, OpType type,
                                       std::vector<at::Tensor> outputs) {
    const int64_t seq = ++seq_;
    const std::string ctx = context(seq);
    const std::string what = p->what;
    p->future = new_future();
    Future f = p->future;
    auto r = group_->join("c/" + std::to_string(seq), size_, rank_, std::move(p), ctx);
    collect(r);
    return c10::make_intrusive<LocalWork>(rank_, type, what, ctx,
                                          std::vector<std::shared_ptr<Rendezvous>>{r}, f,
                                          std::move(outputs), timeout_);
  }

  std::shared_ptr<LocalGroup> group_;
  const c10::DeviceIndex device_;
  int64_t seq_ = 0;
  std::map<std::string, int64_t> sends_, recvs_;
};

}  // namespace

void init_local_backend(py::module& m) {
  m.def(
      "_dist_local_backend",
      [](const std::string& key, int rank, int size, double timeout_s,
         int device) -> c10::intrusive_ptr<c10d::Backend> {
        TORCH_CHECK_VALUE(size >= 1 && rank >= 0 && rank < size, "invalid rank ", rank,
                          " of ", size);
        check_device_index(static_cast<c10::DeviceIndex>(device));
        return c10::make_intrusive<LocalBackend>(
            group_for(key), rank, size,
            timeout_from_seconds(timeout_s), device);
      },
      "A c10d backend for ranks that are threads of this process (one device each): "
      "collectives run as XLA collective programs over the ranks' devices.");
}

}  // namespace torchtpu
