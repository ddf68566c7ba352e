// torchtpu._C collectives over several tpu devices of this process: each
// call is one XLA collective program (ttpu_coll_run) over one tensor per
// device. Python's torchtpu.distributed.comm decides shapes and options;
// this file translates and stages.
#include "python/coll_binding.h"

#include "runtime/runtime.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <utility>

namespace py = pybind11;

namespace torchtpu {

const char* const kPathXla = "xla collective program";
const char* const kPathCopy = "in-process device copies";

namespace {

struct PathCounter {
  int64_t calls = 0;
  int64_t bytes = 0;
};

std::mutex counters_mutex;
std::map<std::string, std::map<std::string, PathCounter>> counters;

ttpu_dtype engine_dtype(const at::Tensor& t, const std::string& name) {
  ttpu_dtype dt = to_ttpu_dtype(t.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(dt != TTPU_DTYPE_NONE, name, ": dtype ",
                              t.scalar_type(), " has no tpu collective");
  return dt;
}

}  // namespace

void count_path(const char* path, const std::string& name, int64_t bytes) {
  std::lock_guard<std::mutex> lock(counters_mutex);
  PathCounter& c = counters[path][name];
  c.calls += 1;
  c.bytes += bytes;
}

bool covers_storage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage().nbytes() ==
             static_cast<size_t>(t.numel()) * static_cast<size_t>(t.element_size());
}

void run_xla_collective(const XlaCollective& c,
                        const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs,
                        const std::string& name) {
  const size_t n = inputs.size();
  TORCH_CHECK_VALUE(n >= 1 && outputs.size() == n, name,
                    ": one input and one output per device, got ", n,
                    " inputs and ", outputs.size(), " outputs");
  const ttpu_dtype dt = engine_dtype(inputs[0], name);
  for (size_t i = 0; i < n; ++i) {
    for (const at::Tensor* t : {&inputs[i], &outputs[i]}) {
      TORCH_CHECK_VALUE(t->defined() && t->device().type() == c10::DeviceType::PrivateUse1,
                        name, ": every tensor must be a tpu tensor (member ", i, ")");
      TORCH_CHECK_VALUE(t->layout() == at::kStrided, name,
                        ": only dense tensors are supported");
      TORCH_CHECK(t->scalar_type() == inputs[0].scalar_type(), name,
                  ": every tensor must have dtype ", inputs[0].scalar_type(),
                  ", member ", i, " has ", t->scalar_type());
    }
    TORCH_CHECK(inputs[i].numel() == inputs[0].numel(), name,
                ": every input must have the same number of elements; member 0 has ",
                inputs[0].numel(), ", member ", i, " has ", inputs[i].numel());
  }
  ttpu_coll_call call{};
  call.kind = c.kind;
  call.dtype = dt;
  call.n_members = static_cast<int>(n);
  call.count = inputs[0].numel();
  call.op = c.op;
  call.premul = c.premul;
  call.root = c.root;
  call.peer = c.peer.empty() ? nullptr : c.peer.data();
  const int64_t out_count = ttpu_coll_output_count(&call);
  TORCH_CHECK(out_count >= 0, name, ": ", inputs[0].numel(),
              " elements do not split into ", n, " equal chunks");
  for (size_t i = 0; i < n; ++i) {
    TORCH_CHECK(outputs[i].numel() == out_count, name, ": output ", i, " has ",
                outputs[i].numel(), " elements, the collective writes ", out_count);
  }
  if (call.count == 0 && out_count == 0) return;

  // Stage what is not a whole storage; remember what to copy back.
  std::vector<at::Tensor> staged_in(n), staged_out(n);
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (dst, src)
  std::vector<ttpu_coll_member> members(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& in = inputs[i];
    const at::Tensor& out = outputs[i];
    const bool in_whole = covers_storage(in);
    const bool out_whole = covers_storage(out);
    const bool in_place = in.is_same(out) ||
                          (in_whole && out_whole && buffer_of(in) == buffer_of(out));
    staged_in[i] = in_whole ? in : in.clone(at::MemoryFormat::Contiguous);
    if (in_place) {
      staged_out[i] = staged_in[i];
    } else {
      staged_out[i] = out_whole ? out : at::empty(out.sizes(), out.options());
    }
    if (!staged_out[i].is_same(out)) copy_back.emplace_back(out, staged_out[i]);
    members[i].input = buffer_of(staged_in[i]);
    members[i].output = writable_buffer_of(staged_out[i]);
  }
  call.members = members.data();
  check(ttpu_coll_run(runtime(), &call), "tpu collective");
  for (auto& [dst, src] : copy_back) {
    at::Tensor d = dst;
    d.copy_(src.view(d.sizes()));
  }
  count_path(kPathXla, name,
             std::max(call.count, out_count) * static_cast<int64_t>(inputs[0].element_size()));
}

void init_coll(py::module& m) {
  m.def(
      "_coll_run",
      [](int kind, const std::vector<at::Tensor>& inputs,
         const std::vector<at::Tensor>& outputs, int op, double premul, int root,
         const std::vector<int>& peer, const std::string& name) {
        TORCH_CHECK_VALUE(kind >= 0 && kind < TTPU_COLL_KIND_COUNT,
                          "unknown collective ", kind);
        TORCH_CHECK_VALUE(op >= 0 && op < TTPU_REDUCE_OP_COUNT, "unknown reduce op ", op);
        XlaCollective c;
        c.kind = static_cast<ttpu_coll_kind>(kind);
        c.op = static_cast<ttpu_reduce_op>(op);
        c.premul = premul;
        c.root = root;
        c.peer = peer;
        py::gil_scoped_release no_gil;
        run_xla_collective(c, inputs, outputs, name);
      },
      "One XLA collective program over one (input, output) pair per tpu device.");
  m.def(
      "_coll_counters",
      [] {
        py::dict out;
        std::lock_guard<std::mutex> lock(counters_mutex);
        for (const auto& [path, ops] : counters) {
          py::dict p;
          for (const auto& [name, c] : ops) {
            py::dict d;
            d["calls"] = c.calls;
            d["bytes"] = c.bytes;
            p[py::str(name)] = d;
          }
          out[py::str(path)] = p;
        }
        return out;
      },
      "In-process collectives run so far: {path: {name: {calls, bytes}}}.");
  m.def("_coll_reset_counters", [] {
    std::lock_guard<std::mutex> lock(counters_mutex);
    counters.clear();
  });
  init_local_backend(m);
}

}  // namespace torchtpu
