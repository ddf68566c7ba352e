// CPU replays (cpu_replay.h), and what they may cost.
//
// The memory rule: a replay's host memory is bounded, whatever the size of
// the tpu storages it stands in for.
//  - A stand-in keeps the real geometry (sizes, strides, storage offset,
//    storage size) and, for an alias check, the real sharing of storages,
//    so the CPU kernel sees what the real call has. Its storage is reserved
//    address space (an anonymous mapping), zero until written: reading it
//    costs nothing, and only the pages the CPU kernel writes become memory.
//    A kernel refuses a call before it writes, so a replay that raises
//    costs no memory.
//  - A replay runs only when what the CPU kernel could write is at most
//    kCpuReplayElements elements, the most it may cost where the CPU
//    accepts the call and computes: for an error-text replay, the
//    stand-ins' storages together; for an alias check, the range of each
//    storage that the call's views reach.
//  - An alias check beyond that runs on shrunk stand-ins: sizes, strides
//    and offsets mapped to small ones of the same order and layout (see
//    Shrink), used only when ATen's own overlap predicates (each tensor's
//    internal overlap, density and contiguity, the overlap status of every
//    pair sharing a storage) answer for them what they answer for the real
//    tensors. Overlap errors carry no sizes, so the CPU's words are the
//    ones the real call would get.
//  - Otherwise the call is not replayed (counted as skipped): the meta
//    kernel's error stands, and an alias check's write runs on the engine.
#include "aten/cpu_replay.h"

#include "aten/call_args.h"
#include "aten/ops.h"
#include "aten/write_overlap.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace torchtpu {

namespace {

constexpr int64_t kCpuReplayElements = int64_t{1} << 24;

std::atomic<int64_t> error_text_replays{0};
std::atomic<int64_t> alias_checks{0};
std::atomic<int64_t> shrunk_alias_checks{0};
std::atomic<int64_t> skipped_replays{0};

// ------------------------------------------------------------ stand-ins

struct Reservation {
  void* data;
  size_t nbytes;
};

void release_reservation(void* context) {
  auto* reservation = static_cast<Reservation*>(context);
  munmap(reservation->data, reservation->nbytes);
  delete reservation;
}

// A CPU storage of nbytes zero bytes that takes memory only where written,
// or an undefined one when the address space is not to be had. Resizable
// like a CPU tensor's own: a kernel that grows an out moves it into the
// CPU allocator's memory.
c10::Storage zero_storage(size_t nbytes) {
  c10::Allocator* cpu = c10::GetCPUAllocator();
  if (nbytes == 0) {
    return c10::Storage(c10::Storage::use_byte_size_t(), 0, cpu, /*resizable=*/true);
  }
  void* data = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) {
    return c10::Storage();
  }
  auto* reservation = new Reservation{data, nbytes};
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                      c10::DataPtr(data, reservation, &release_reservation,
                                   c10::Device(c10::kCPU)),
                      cpu, /*resizable=*/true);
}

// A CPU tensor of t's dtype over all of `storage`, viewed with the given
// geometry.
at::Tensor on_storage(const c10::Storage& storage, const at::Tensor& t,
                      c10::IntArrayRef sizes, c10::IntArrayRef strides,
                      int64_t offset) {
  const int64_t n = static_cast<int64_t>(storage.nbytes()) /
                    static_cast<int64_t>(t.element_size());
  return at::empty({0}, t.options().device(at::kCPU))
      .set_(storage, 0, {n}, {1})
      .as_strided(sizes, strides, offset);
}

// The call's tpu tensors, in the order the replay's stack takes them.
std::vector<at::Tensor> tpu_tensors_of(c10::ArrayRef<c10::IValue> args) {
  std::vector<at::Tensor> tensors;
  auto see = [&](const at::Tensor& t) {
    if (t.defined() && !t.is_cpu()) {
      tensors.push_back(t);
    }
  };
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      see(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) see(t);
    } else if (is_optional_tensor_list(value)) {
      for (const c10::IValue& e : value.toListRef()) {
        if (e.isTensor()) see(e.toTensor());
      }
    }
  }
  return tensors;
}

// The elements the tensors reach, storage by storage: from the first byte
// any of them reaches in it to the last.
int64_t reached_elements(const std::vector<at::Tensor>& tensors) {
  struct Reach {
    int64_t lo, hi, item;
  };
  std::unordered_map<const c10::StorageImpl*, Reach> reach;
  for (const at::Tensor& t : tensors) {
    int64_t lo = 0, hi = 0;
    if (!byte_span(t, &lo, &hi)) {
      continue;
    }
    const int64_t item = static_cast<int64_t>(t.element_size());
    auto [it, fresh] = reach.try_emplace(t.storage().unsafeGetStorageImpl(), Reach{lo, hi, item});
    if (!fresh) {
      it->second = {std::min(it->second.lo, lo), std::max(it->second.hi, hi),
                    std::min(it->second.item, item)};
    }
  }
  int64_t total = 0;
  for (const auto& entry : reach) {
    total += (entry.second.hi - entry.second.lo) / entry.second.item;
  }
  return total;
}

// Stand-ins with the real geometry, one zero storage per real storage.
std::optional<std::vector<at::Tensor>> exact_stand_ins(const std::vector<at::Tensor>& real) {
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages;
  std::vector<at::Tensor> stand_ins;
  for (const at::Tensor& t : real) {
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto found = storages.find(impl);
    if (found == storages.end()) {
      c10::Storage zeros = zero_storage(t.storage().nbytes());
      if (!zeros) {
        return std::nullopt;
      }
      found = storages.emplace(impl, std::move(zeros)).first;
    }
    stand_ins.push_back(on_storage(found->second, t, t.sizes(), t.strides(), t.storage_offset()));
  }
  return stand_ins;
}

// ------------------------------------------------------------ shrinking

// A map of the call's large values (sizes, offset digits, row lengths) to
// small ones in the same order: values up to kExactValue stay, and a gap
// between two larger ones shrinks to at most kKeptGap, so near relations
// survive (x[1:] against x[:-1] keeps its one-element shift, a row of
// C - 1 elements stays one short of its row of C).
class Shrink {
 public:
  static constexpr int64_t kExactValue = 8;
  static constexpr int64_t kKeptGap = 4;

  void see(int64_t value) {
    if (value > kExactValue) {
      values_.push_back(value);
    }
  }

  void build() {
    std::sort(values_.begin(), values_.end());
    values_.erase(std::unique(values_.begin(), values_.end()), values_.end());
    int64_t last = kExactValue;
    int64_t mapped = kExactValue;
    for (int64_t value : values_) {
      mapped += std::min(value - last, kKeptGap);
      mapped_.push_back(mapped);
      last = value;
    }
  }

  int64_t operator()(int64_t value) const {
    if (value <= kExactValue) {
      return value;
    }
    const auto at = std::lower_bound(values_.begin(), values_.end(), value);
    return mapped_[static_cast<size_t>(at - values_.begin())];
  }

 private:
  std::vector<int64_t> values_;
  std::vector<int64_t> mapped_;
};

// A storage's layout as its tensors use it: the distinct strides of their
// dims of more than one element, with 1, ascending, each dividing the next
// (rows within planes within ...). An offset is a digit per level.
struct Layout {
  std::vector<int64_t> levels;
  std::vector<int64_t> shrunk_levels;
  std::vector<size_t> members;  // indices into the call's tensors
  int64_t item = 0;

  std::vector<int64_t> digits(int64_t offset) const {
    std::vector<int64_t> digits(levels.size());
    for (size_t k = levels.size(); k-- > 0;) {
      digits[k] = offset / levels[k];
      offset -= digits[k] * levels[k];
    }
    return digits;
  }

  int64_t shrunk_stride(int64_t stride) const {
    const auto at = std::find(levels.begin(), levels.end(), stride);
    // Not a level: the stride of a dim of one element, which reaches no
    // other element.
    return at == levels.end() ? stride : shrunk_levels[static_cast<size_t>(at - levels.begin())];
  }
};

// What ATen's overlap checks read of one tensor.
bool same_overlap_traits(const at::Tensor& a, const at::Tensor& b) {
  if (at::has_internal_overlap(a) != at::has_internal_overlap(b) ||
      a.is_non_overlapping_and_dense() != b.is_non_overlapping_and_dense() ||
      a.is_contiguous() != b.is_contiguous()) {
    return false;
  }
  if (a.dim() == 4 && a.is_contiguous(c10::MemoryFormat::ChannelsLast) !=
                          b.is_contiguous(c10::MemoryFormat::ChannelsLast)) {
    return false;
  }
  return a.dim() != 5 || a.is_contiguous(c10::MemoryFormat::ChannelsLast3d) ==
                             b.is_contiguous(c10::MemoryFormat::ChannelsLast3d);
}

// Small stand-ins that overlap as the real tensors do (see the rule at the
// top), or nothing when the call's layout does not shrink so.
std::optional<std::vector<at::Tensor>> shrunk_stand_ins(const std::vector<at::Tensor>& real) {
  std::unordered_map<const c10::StorageImpl*, size_t> layout_of;
  std::vector<Layout> layouts;
  for (size_t i = 0; i < real.size(); ++i) {
    auto [it, fresh] = layout_of.try_emplace(real[i].storage().unsafeGetStorageImpl(), layouts.size());
    if (fresh) {
      layouts.emplace_back();
      layouts.back().item = static_cast<int64_t>(real[i].element_size());
    }
    Layout& layout = layouts[it->second];
    if (layout.item != static_cast<int64_t>(real[i].element_size())) {
      return std::nullopt;  // one storage viewed as two dtypes
    }
    layout.members.push_back(i);
  }
  Shrink shrink;
  for (Layout& layout : layouts) {
    layout.levels = {1};
    for (size_t i : layout.members) {
      for (int64_t d = 0; d < real[i].dim(); ++d) {
        if (real[i].size(d) > 1 && real[i].stride(d) > 0) {
          layout.levels.push_back(real[i].stride(d));
        }
      }
    }
    std::sort(layout.levels.begin(), layout.levels.end());
    layout.levels.erase(std::unique(layout.levels.begin(), layout.levels.end()),
                        layout.levels.end());
    for (size_t k = 1; k < layout.levels.size(); ++k) {
      if (layout.levels[k] % layout.levels[k - 1] != 0) {
        return std::nullopt;
      }
      shrink.see(layout.levels[k] / layout.levels[k - 1]);
    }
    for (size_t i : layout.members) {
      for (int64_t size : real[i].sizes()) {
        shrink.see(size);
      }
      for (int64_t digit : layout.digits(real[i].storage_offset())) {
        shrink.see(digit);
      }
    }
  }
  shrink.build();

  std::vector<at::Tensor> stand_ins(real.size());
  int64_t total = 0;
  for (Layout& layout : layouts) {
    layout.shrunk_levels = {1};
    for (size_t k = 1; k < layout.levels.size(); ++k) {
      layout.shrunk_levels.push_back(layout.shrunk_levels.back() *
                                     shrink(layout.levels[k] / layout.levels[k - 1]));
      if (layout.shrunk_levels.back() > kCpuReplayElements) {
        return std::nullopt;
      }
    }
    struct Geometry {
      std::vector<int64_t> sizes, strides;
      int64_t offset = 0;
    };
    std::vector<Geometry> geometries;
    int64_t elements = 1;
    for (size_t i : layout.members) {
      const at::Tensor& t = real[i];
      Geometry& g = geometries.emplace_back();
      const std::vector<int64_t> digits = layout.digits(t.storage_offset());
      for (size_t k = 0; k < digits.size(); ++k) {
        g.offset += shrink(digits[k]) * layout.shrunk_levels[k];
      }
      int64_t end = g.offset + 1;
      bool empty = false;
      for (int64_t d = 0; d < t.dim(); ++d) {
        g.sizes.push_back(shrink(t.size(d)));
        g.strides.push_back(t.stride(d) == 0 ? 0 : layout.shrunk_stride(t.stride(d)));
        empty = empty || g.sizes.back() == 0;
        end += g.sizes.back() > 0 ? (g.sizes.back() - 1) * g.strides.back() : 0;
      }
      elements = std::max(elements, empty ? g.offset : end);
    }
    total += elements;
    if (total > kCpuReplayElements) {
      return std::nullopt;
    }
    const c10::Storage zeros = zero_storage(static_cast<size_t>(elements * layout.item));
    if (!zeros) {
      return std::nullopt;
    }
    for (size_t m = 0; m < layout.members.size(); ++m) {
      const size_t i = layout.members[m];
      stand_ins[i] = on_storage(zeros, real[i], geometries[m].sizes, geometries[m].strides,
                                geometries[m].offset);
      if (!same_overlap_traits(real[i], stand_ins[i])) {
        return std::nullopt;
      }
    }
    for (size_t m = 0; m < layout.members.size(); ++m) {
      for (size_t n = m + 1; n < layout.members.size(); ++n) {
        const size_t i = layout.members[m], j = layout.members[n];
        // One tensor passed twice: its stand-ins are two views, as an
        // exact replay's are.
        if (!real[i].is_same(real[j]) &&
            at::get_overlap_status(real[i], real[j]) !=
                at::get_overlap_status(stand_ins[i], stand_ins[j])) {
          return std::nullopt;
        }
      }
    }
  }
  return stand_ins;
}

}  // namespace

void throw_cpu_verdict(const c10::OperatorHandle& op,
                       c10::ArrayRef<c10::IValue> args) {
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
      !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) {
    return;
  }
  int64_t budget = kCpuReplayElements;
  bool fits = true;
  auto to_cpu_zeros = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) {
      return t;
    }
    const int64_t item = static_cast<int64_t>(t.dtype().itemsize());
    const int64_t count =
        item > 0 ? static_cast<int64_t>(t.unsafeGetTensorImpl()->unsafe_storage().nbytes()) / item : 0;
    budget -= count;
    if (budget < 0) {
      fits = false;
      return t;
    }
    const c10::Storage zeros = zero_storage(static_cast<size_t>(count * item));
    if (!zeros) {
      fits = false;
      return t;
    }
    return on_storage(zeros, t, t.sizes(), t.strides(), t.storage_offset());
  };
  torch::jit::Stack cpu_stack;
  cpu_stack.reserve(args.size());
  bool any_tensor = false;
  for (const c10::IValue& value : args) {
    any_tensor = any_tensor || value.isTensor() || value.isTensorList() || value.isList();
    cpu_stack.push_back(map_tensors(value, to_cpu_zeros, c10::Device(c10::kCPU)));
  }
  if (!fits) {
    ++skipped_replays;
  }
  if (!fits || !any_tensor) {
    return;
  }
  ++error_text_replays;
  op.callBoxed(&cpu_stack);  // throws the CPU's exception, if any
}

bool ask_cpu_about_aliasing(const c10::OperatorHandle& op,
                            c10::ArrayRef<c10::IValue> args) {
  const std::vector<at::Tensor> real = tpu_tensors_of(args);
  const bool shrunk = reached_elements(real) > kCpuReplayElements;
  const std::optional<std::vector<at::Tensor>> stand_ins =
      shrunk ? shrunk_stand_ins(real) : exact_stand_ins(real);
  if (!stand_ins) {
    ++skipped_replays;
    return false;
  }
  ++alias_checks;
  if (shrunk) {
    ++shrunk_alias_checks;
  }
  size_t next = 0;
  auto on_cpu = [&](const at::Tensor& t) -> at::Tensor {
    return !t.defined() || t.is_cpu() ? t : (*stand_ins)[next++];
  };
  torch::jit::Stack stack;
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      stack.emplace_back(on_cpu(value.toTensor()));
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) list.push_back(on_cpu(t));
      stack.emplace_back(std::move(list));
    } else if (is_optional_tensor_list(value)) {
      c10::List<std::optional<at::Tensor>> list;
      for (const c10::IValue& e : value.toListRef()) {
        list.push_back(e.isTensor() ? std::optional<at::Tensor>(on_cpu(e.toTensor()))
                                    : std::nullopt);
      }
      stack.emplace_back(std::move(list));
    } else if (value.isDevice() &&
               value.toDevice().type() == c10::DeviceType::PrivateUse1) {
      stack.emplace_back(c10::Device(c10::DeviceType::CPU));
    } else if (value.isGenerator()) {
      stack.emplace_back();  // the CPU's default generator
    } else {
      stack.push_back(value);
    }
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  } catch (const c10::Error& e) {
    if (std::string(e.what_without_backtrace()).find("unsupported operation:") !=
        std::string::npos) {
      throw;
    }
    // Shrunk stand-ins keep the overlaps, not every relation of sizes to
    // other arguments: another error there may be theirs, not the call's,
    // and says nothing of the overlaps.
    return !shrunk;
  }
  return true;
}

std::map<std::string, int64_t> cpu_replay_counts() {
  return {{"error_text", error_text_replays.load()},
          {"alias_checks", alias_checks.load()},
          {"alias_checks_shrunk", shrunk_alias_checks.load()},
          {"skipped", skipped_replays.load()}};
}

}  // namespace torchtpu
