// The write overlap rules of write_overlap.h.
// A write through memory that overlaps itself (a broadcast view) or another
// argument (a shifted view of the same storage) is refused by most CPU
// kernels ("unsupported operation: more than one element of the written-to
// tensor refers to a single memory location"), and meta kernels never check
// it. Which ops refuse is each CPU kernel's choice (fill_, index_put_ and
// the reductions accept), so such a call is asked of the CPU itself, on
// zero-filled stand-ins with the same geometry and aliasing (cpu_replay.h),
// and only its overlap error is raised; anything else is left to the meta
// kernel. The check is on every call, outside the meta cache, whose key
// does not see aliasing.
#include "aten/write_overlap.h"

#include "aten/call_args.h"
#include "aten/cpu_replay.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace torchtpu {

bool byte_span(const at::Tensor& t, int64_t* lo, int64_t* hi) {
  if (!t.defined() || t.is_cpu() || t.numel() == 0) {
    return false;
  }
  int64_t first = t.storage_offset();
  int64_t last = first;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t step = (t.size(d) - 1) * t.stride(d);
    (step < 0 ? first : last) += step;
  }
  *lo = first * static_cast<int64_t>(t.element_size());
  *hi = (last + 1) * static_cast<int64_t>(t.element_size());
  return true;
}

namespace {

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.storage_offset() == b.storage_offset() && a.dtype() == b.dtype();
}

// What a call's writes share with its arguments.
struct WriteOverlap {
  // A written tensor overlaps itself, or another argument partly (or as
  // another view): the CPU is asked on every such call.
  bool partial = false;
  // Written tensors that are also passed whole, as the same view, in
  // another argument ("arg.element=arg.element;..."), empty for none. Most
  // CPU kernels accept that (x.add_(x)); those that check for any overlap
  // (scatter_, index_fill_, index_copy_) refuse it whatever the sizes, so
  // the CPU's answer is kept per op and pattern.
  std::string full_alias;
};

WriteOverlap writes_overlap(const OpInfo& info, c10::ArrayRef<c10::IValue> args) {
  WriteOverlap overlap;
  // A functional op writes only the fresh outputs the glue allocates: no
  // work (and no allocation) on the common path.
  if (std::find(info.is_mutable.begin(), info.is_mutable.end(), true) ==
      info.is_mutable.end()) {
    return overlap;
  }
  struct Seen {
    at::Tensor tensor;
    size_t arg;
    size_t element;
  };
  // Tensors by storage, so a long list (a _foreach_ op's) costs O(n).
  std::unordered_map<const c10::StorageImpl*, std::vector<Seen>> by_storage;
  std::vector<Seen> written;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::vector<at::Tensor> tensors = tensors_of(args[i]);
    for (size_t j = 0; j < tensors.size(); ++j) {
      const at::Tensor& t = tensors[j];
      if (!t.defined() || t.is_cpu()) {
        continue;
      }
      by_storage[t.storage().unsafeGetStorageImpl()].push_back({t, i, j});
      if (info.is_mutable[i]) {
        written.push_back({t, i, j});
      }
    }
  }
  for (const Seen& w : written) {
    int64_t wlo = 0, whi = 0;
    if (!byte_span(w.tensor, &wlo, &whi)) {
      continue;
    }
    if (at::has_internal_overlap(w.tensor) == at::MemOverlap::Yes) {
      overlap.partial = true;
      return overlap;
    }
    for (const Seen& t : by_storage[w.tensor.storage().unsafeGetStorageImpl()]) {
      int64_t lo = 0, hi = 0;
      if ((t.arg == w.arg && t.element == w.element) || !byte_span(t.tensor, &lo, &hi)) {
        continue;
      }
      if (t.tensor.is_same(w.tensor) || same_view(t.tensor, w.tensor)) {
        overlap.full_alias += std::to_string(w.arg) + "." + std::to_string(w.element) +
                              "=" + std::to_string(t.arg) + "." +
                              std::to_string(t.element) + ";";
      } else if (lo < whi && wlo < hi) {
        overlap.partial = true;
        return overlap;
      }
    }
  }
  return overlap;
}

// Returns whether the CPU was asked (see ask_cpu_about_aliasing).
bool raise_cpu_overlap_error(const OpInfo& info, const c10::OperatorHandle& op,
                             c10::ArrayRef<c10::IValue> args) {
  const bool asked = ask_cpu_about_aliasing(op, args);
  // Where the CPU kernel accepts a write into a broadcast view, each
  // memory location keeps the last of the results written to it. The
  // engine writes a view back with one scatter, which keeps an unspecified
  // one of them, so only ops that write one value everywhere (an op hook)
  // are exact; any other such write refuses rather than give another
  // answer.
  if (info.hooks->writes_one_value) {
    return asked;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    for (const at::Tensor& t : tensors_of(args[i])) {
      TORCH_CHECK_NOT_IMPLEMENTED(
          !info.is_mutable[i] || !t.defined() || t.is_cpu() ||
              at::has_internal_overlap(t) != at::MemOverlap::Yes,
          "aten::", info.name, " on tpu cannot write into a tensor whose "
          "elements share memory (a broadcast view): which of the results "
          "lands there is not defined on the device; clone() it first");
    }
  }
  return asked;
}

// A call whose written tensors are also passed whole in other arguments
// (WriteOverlap::full_alias): the CPU is asked once per op and pattern,
// and again only to raise its refusal. A call not replayed (beyond the
// replay bound) leaves the question open for the next.
void check_full_alias(const OpInfo& info, const c10::OperatorHandle& op,
                      c10::ArrayRef<c10::IValue> args, const std::string& pattern) {
  static std::mutex mutex;
  // op and pattern -> whether the CPU refused it (absent: not asked yet)
  static auto* refused = new std::unordered_map<std::string, bool>();
  const std::string key = info.name + " " + pattern;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = refused->find(key);
    if (found != refused->end() && !found->second) {
      return;
    }
  }
  bool asked = false;
  try {
    asked = raise_cpu_overlap_error(info, op, args);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex);
    (*refused)[key] = true;
    throw;
  }
  if (asked) {
    std::lock_guard<std::mutex> lock(mutex);
    (*refused)[key] = false;
  }
}

}  // namespace

void check_write_overlap(const OpInfo& info, const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> args) {
  const WriteOverlap overlap = writes_overlap(info, args);
  if (overlap.partial) {
    raise_cpu_overlap_error(info, op, args);
  } else if (!overlap.full_alias.empty()) {
    check_full_alias(info, op, args, overlap.full_alias);
  }
}

}  // namespace torchtpu
