// Kernels that are plumbing, not math: allocation, views, resizing,
// storage rebinding and host <-> device transfers. Math (including the
// on-device half of every copy) goes through the engine.
#include "runtime/allocator.h"
#include "aten/ops.h"
#include "runtime/runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/record_function.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <set>

namespace torchtpu {

namespace {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

c10::DispatchKeySet tpu_keys() {
  return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

c10::DeviceIndex index_of(const std::optional<c10::Device>& device) {
  if (device && device->has_index()) {
    TORCH_CHECK(device->type() == kTpu, "expected a tpu device, got ", *device);
    return device->index();
  }
  return current_device();
}

// Makes `device` the current one while allocating (the allocator follows
// the current device, as CUDA's does).
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(c10::DeviceIndex device)
      : previous_(current_device()) {
    if (device != previous_) {
      set_current_device(device);
    }
  }
  ~CurrentDeviceScope() {
    if (current_device() != previous_) {
      try {
        set_current_device(previous_);
      } catch (const std::exception&) {
        // previous_ was valid when saved; never throw from a destructor.
      }
    }
  }
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// A uint8 tensor over the first `nbytes` of `storage`.
at::Tensor byte_view(const c10::Storage& storage, int64_t nbytes) {
  at::Tensor bytes = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), tpu_keys(), caffe2::TypeMeta::Make<uint8_t>());
  bytes.unsafeGetTensorImpl()->set_sizes_contiguous({nbytes});
  return bytes;
}

// Replaces all of dst's storage (dst covers it contiguously) with `host`,
// a contiguous CPU tensor of dst's dtype and sizes.
void upload_whole(const at::Tensor& dst, const at::Tensor& host) {
  const size_t nbytes = static_cast<size_t>(host.numel()) * host.element_size();
  if (nbytes == 0) {
    return;
  }
  // Its own range in a profile (input: the bytes moved).
  const c10::IValue bytes(static_cast<int64_t>(nbytes));
  RECORD_FUNCTION("tpu::to_device", c10::ArrayRef<const c10::IValue>(&bytes, 1));
  ttpu_dtype dtype = to_ttpu_dtype(dst.scalar_type());
  std::vector<int64_t> dims(dst.sizes().begin(), dst.sizes().end());
  if (dtype == TTPU_DTYPE_NONE || dims.size() > TTPU_MAX_DIMS) {
    // Bytes are bytes: a dtype the engine cannot compute with can still be
    // stored (and saved/loaded) as raw data.
    dtype = dtype == TTPU_DTYPE_NONE ? TTPU_U8 : dtype;
    dims = {static_cast<int64_t>(nbytes / ttpu_dtype_size(dtype))};
  }
  check(ttpu_buffer_upload(writable_buffer_of(dst), host.const_data_ptr(), dtype,
                           dims.data(), static_cast<int>(dims.size())),
        "copying to tpu");
}

void download_whole(const at::Tensor& src, void* host, size_t nbytes) {
  if (nbytes == 0) {
    return;
  }
  const c10::IValue bytes(static_cast<int64_t>(nbytes));
  RECORD_FUNCTION("tpu::to_host", c10::ArrayRef<const c10::IValue>(&bytes, 1));
  check(ttpu_buffer_download(buffer_of(src), host, nbytes), "copying from tpu");
}

// A fresh contiguous tpu tensor on `device` holding src (tpu, same device)
// converted to `dtype` and broadcast to `sizes`.
at::Tensor contiguous_on_device(const at::Tensor& src, c10::IntArrayRef sizes,
                                c10::ScalarType dtype) {
  at::Tensor fresh =
      empty_contiguous_tpu(sizes, dtype, src.device().index());
  engine_copy(fresh, src);
  return fresh;
}

void copy_host_to_tpu(const at::Tensor& dst, const at::Tensor& src) {
  const at::Tensor host =
      src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  if (covers_whole_storage(dst)) {
    upload_whole(dst, host);
    return;
  }
  at::Tensor staging = empty_contiguous_tpu(dst.sizes(), dst.scalar_type(),
                                            dst.device().index());
  upload_whole(staging, host);
  engine_copy(dst, staging);
}

// dst = src's view of storage bytes at `bytes` (host memory, storage order),
// by the CPU's copy_ (the strided read and any conversion).
void copy_view_from_bytes(const at::Tensor& dst, const at::Tensor& src, void* bytes) {
  char* first = static_cast<char*>(bytes) +
                static_cast<size_t>(src.storage_offset()) * src.element_size();
  dst.copy_(at::from_blob(first, src.sizes(), src.strides(),
                          at::TensorOptions().dtype(src.scalar_type())));
}

// Whether src's elements can be read from its storage's bytes on the host:
// not a lazily conjugated or negated view, not empty, a dtype the engine
// stores as itself.
bool host_readable_view(const at::Tensor& src) {
  return !src.is_conj() && !src.is_neg() && src.numel() > 0 &&
         to_ttpu_dtype(src.scalar_type()) != TTPU_DTYPE_NONE;
}

// A view's elements (or a dtype change) read where the storage's bytes lie,
// when the plugin's memory is the host's (a zero-copy host access): no
// program, so reading element after element of a view (`item()` in a loop,
// iterating a tensor) compiles nothing and moves no more than it reads.
// False where the plugin (or the version's layout) does not allow it: the
// caller copies.
bool copy_view_through_host_access(const at::Tensor& dst, const at::Tensor& src) {
  if (!host_readable_view(src)) {
    return false;
  }
  void* data = nullptr;
  ttpu_host_access* access = nullptr;
  ttpu_status* s = ttpu_buffer_host_begin(buffer_of(src), 0, &data, &access);
  if (s != nullptr && ttpu_status_code(s) == TTPU_UNIMPLEMENTED) {
    ttpu_status_free(s);
    return false;
  }
  check(s, "copying from tpu");
  try {
    copy_view_from_bytes(dst, src, data);
  } catch (...) {
    ttpu_buffer_host_end(access);
    throw;
  }
  ttpu_buffer_host_end(access);
  return true;
}

// A view of a storage of at most this many bytes is read by copying the
// whole storage to the host and reading the view there: a program that
// gathers the view would be compiled for each offset and shape read.
constexpr size_t kWholeStorageReadBytes = size_t{16} << 20;

bool copy_view_through_whole_storage(const at::Tensor& dst, const at::Tensor& src) {
  const size_t nbytes = src.unsafeGetTensorImpl()->unsafe_storage().nbytes();
  if (!host_readable_view(src) || nbytes > kWholeStorageReadBytes) {
    return false;
  }
  at::Tensor bytes = at::empty({static_cast<int64_t>(nbytes)},
                               at::TensorOptions().dtype(at::kByte));
  download_whole(src, bytes.mutable_data_ptr(), nbytes);
  copy_view_from_bytes(dst, src, bytes.mutable_data_ptr());
  return true;
}

void copy_tpu_to_host(const at::Tensor& dst, const at::Tensor& src) {
  const bool whole = covers_whole_storage(src);
  if (!whole && (copy_view_through_host_access(dst, src) ||
                 copy_view_through_whole_storage(dst, src))) {
    return;
  }
  at::Tensor device_src = src;
  if (src.scalar_type() != dst.scalar_type() || !whole) {
    device_src = contiguous_on_device(src, src.sizes(), dst.scalar_type());
  }
  const size_t nbytes =
      static_cast<size_t>(device_src.numel()) * device_src.element_size();
  if (dst.is_contiguous() && dst.sizes() == device_src.sizes()) {
    download_whole(device_src, dst.mutable_data_ptr(), nbytes);
    return;
  }
  at::Tensor host = at::empty(device_src.sizes(),
                              at::TensorOptions().dtype(dst.scalar_type()));
  download_whole(device_src, host.mutable_data_ptr(), nbytes);
  dst.copy_(host);
}

void copy_tpu_to_tpu_across_devices(const at::Tensor& dst,
                                    const at::Tensor& src) {
  const at::Tensor packed =
      contiguous_on_device(src, dst.sizes(), dst.scalar_type());
  if (covers_whole_storage(dst)) {
    check(ttpu_buffer_copy(writable_buffer_of(dst), buffer_of(packed)),
          "copying between tpu devices");
    return;
  }
  at::Tensor staging = empty_contiguous_tpu(dst.sizes(), dst.scalar_type(),
                                            dst.device().index());
  check(ttpu_buffer_copy(buffer_of(staging), buffer_of(packed)),
        "copying between tpu devices");
  engine_copy(dst, staging);
}

// ------------------------------------------------------------ kernels

// torch.use_deterministic_algorithms(True) with
// torch.utils.deterministic.fill_uninitialized_memory (its default): new
// memory holds NaN (floating, complex) or the largest value (integers), as
// on the CPU, instead of the engine's zeros.
bool deterministic_fill() {
  return at::globalContext().deterministicAlgorithms() &&
         at::globalContext().deterministicFillUninitializedMemory();
}

void fill_if_deterministic(at::Tensor& t) {
  if (deterministic_fill() && t.numel() > 0) {
    at::native::fill_empty_deterministic_(t);
  }
}

at::Tensor empty_memory_format(c10::IntArrayRef size,
                               std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> /*pin_memory*/,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided,
              "tpu tensors are strided; got layout ", *layout);
  CurrentDeviceScope scope(index_of(device));
  at::Tensor out = at::detail::empty_generic(size, tpu_allocator(), tpu_keys(),
                                             c10::dtype_or_default(dtype), memory_format);
  fill_if_deterministic(out);
  return out;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device,
                         std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided,
              "tpu tensors are strided; got layout ", *layout);
  CurrentDeviceScope scope(index_of(device));
  at::Tensor out = at::detail::empty_strided_generic(size, stride, tpu_allocator(), tpu_keys(),
                                                     c10::dtype_or_default(dtype));
  fill_if_deterministic(out);
  return out;
}

// Autograd's "known zero" (e.g. the gradient of sgn): a tensor with no
// storage, as on CPU. PyTorch's ZeroTensor kernels, which run before ours,
// handle it and materialize it with at::zeros where an op needs its value.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size,
                                 std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> /*layout*/,
                                 std::optional<c10::Device> device,
                                 std::optional<bool> /*pin_memory*/) {
  at::native::ZeroTensorAllocator allocator(c10::Device(kTpu, index_of(device)));
  return at::detail::empty_generic(
      size, &allocator, tpu_keys() | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor),
      c10::dtype_or_default(dtype), std::nullopt);
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset) {
    offset = storage_offset->guard_int(__FILE__, __LINE__);
  }
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride),
                                           offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  const c10::IntArrayRef sizes = C10_AS_INTARRAYREF_SLOW(size);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != sizes || memory_format) {
    impl->set_sizes_contiguous(sizes);
    if (memory_format) {
      TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                  "Unsupported memory format ", *memory_format);
      impl->empty_tensor_restride(*memory_format);
    }
  }
  const size_t needed = at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.element_size(),
      static_cast<size_t>(self.storage_offset()));
  const size_t old_nbytes = impl->unsafe_storage().nbytes();
  if (needed > old_nbytes) {
    resize_storage_bytes(impl->unsafe_storage(), needed);
    if (deterministic_fill()) {
      at::native::fill_resize_deterministic_(self, static_cast<int64_t>(old_nbytes));
    }
  }
  return self;
}

void check_storage_device(const at::Tensor& self, const c10::Storage& storage) {
  TORCH_CHECK(storage.device_type() == kTpu,
              "Attempted to set the storage of a tensor on device \"",
              self.device(), "\" to a storage on different device \"",
              storage.device(), "\".  This is no longer allowed; the devices "
              "must match.");
}

at::Tensor& set_geometry(at::Tensor& self, c10::Storage source, int64_t offset,
                         c10::IntArrayRef sizes, c10::IntArrayRef stride) {
  check_storage_device(self, source);
  TORCH_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  const c10::DimVector strides =
      stride.empty() ? c10::contiguous_strides(sizes)
                     : c10::DimVector(stride.begin(), stride.end());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (!impl->unsafe_storage().is_alias_of(source)) {
    impl->set_storage_keep_dtype(std::move(source));
  }
  restride_tpu(self, sizes, strides, offset);
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source,
                               c10::SymInt storage_offset,
                               c10::SymIntArrayRef size,
                               c10::SymIntArrayRef stride) {
  return set_geometry(self, std::move(source),
                      storage_offset.guard_int(__FILE__, __LINE__),
                      C10_AS_INTARRAYREF_SLOW(size),
                      C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel =
      static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_geometry(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (!self.is_same(source)) {
    TORCH_CHECK(self.dtype() == source.dtype(),
                "Could not set tensor of type ", self.dtype(),
                " to a tensor of type ", source.dtype());
    set_geometry(self, source.storage(), source.storage_offset(),
                 source.sizes(), source.strides());
  }
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0,
                     allocate_on(self.device().index(), 0), tpu_allocator(),
                     /*resizable=*/true);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(empty));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src,
                  bool /*non_blocking*/) {
  if (!self.is_same(src)) {
    copy_tensor(self, src);
  }
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool /*non_blocking*/) {
  copy_tensor(dst, self);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    dst.resize_(self.sizes());
  }
  copy_tensor(dst, self);
  return dst;
}

at::Tensor to_copy(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                   std::optional<c10::Layout> layout,
                   std::optional<c10::Device> device,
                   std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<c10::MemoryFormat> memory_format) {
  static const bool engine_has_to_copy = ttpu_op_lookup("_to_copy") >= 0;
  const bool stays_on_device =
      self.device().type() == kTpu &&
      (!device || (device->type() == kTpu &&
                   (!device->has_index() ||
                    device->index() == self.device().index()))) &&
      layout.value_or(c10::kStrided) == c10::kStrided;
  if (stays_on_device && engine_has_to_copy && !self.is_conj() &&
      !self.is_neg()) {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::_to_copy", "");
    torch::jit::Stack stack{self, dtype, layout, device, pin_memory,
                            non_blocking, memory_format};
    run_engine_op(op, &stack);
    return stack.back().toTensor();
  }
  // Crossing devices: PyTorch's own _to_copy allocates the destination and
  // calls copy_, which lands in copy_tensor.
  return at::native::_to_copy(self, dtype, layout, device, pin_memory,
                              non_blocking, memory_format);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host =
      at::empty(self.sizes(), at::TensorOptions().dtype(self.scalar_type()));
  copy_tensor(host, self);
  return at::_local_scalar_dense(host);
}

const std::set<std::string>& direct_kernel_names() {
  static const std::set<std::string> names = {
      "empty.memory_format", "empty_strided", "as_strided", "view",
      "_reshape_alias", "resize_", "set_.source_Storage",
      "set_.source_Storage_storage_offset", "set_.source_Tensor", "set_",
      "copy_", "_copy_from", "_copy_from_and_resize", "_to_copy",
      "_local_scalar_dense",
      // index_kernels.cpp: boolean masks / missing sizes resolved first
      "index.Tensor", "_index_put_impl_", "repeat_interleave.Tensor",
      // composite_kernels.cpp: floating and complex operands only
      "isclose"};
  return names;
}

}  // namespace

bool has_direct_kernel(const std::string& op_name) {
  return direct_kernel_names().count(op_name) != 0;
}

at::Tensor empty_strided_tpu(c10::IntArrayRef sizes, c10::IntArrayRef strides,
                             c10::ScalarType dtype, c10::DeviceIndex device) {
  CurrentDeviceScope scope(device);
  return at::detail::empty_strided_generic(sizes, strides, tpu_allocator(),
                                           tpu_keys(), dtype);
}

at::Tensor empty_contiguous_tpu(c10::IntArrayRef sizes, c10::ScalarType dtype,
                                c10::DeviceIndex device) {
  CurrentDeviceScope scope(device);
  return at::detail::empty_generic(sizes, tpu_allocator(), tpu_keys(), dtype,
                                   std::nullopt);
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(),
              "Trying to resize storage that is not resizable");
  const size_t old_nbytes = storage.nbytes();
  if (nbytes == old_nbytes) {
    return;
  }
  const c10::DeviceIndex device = storage.device().index();
  c10::Storage fresh(c10::Storage::use_byte_size_t(), nbytes,
                     allocate_on(device, nbytes), tpu_allocator(),
                     /*resizable=*/true);
  const size_t kept = std::min(old_nbytes, nbytes);
  if (kept > 0) {
    engine_copy(byte_view(fresh, static_cast<int64_t>(kept)),
                byte_view(storage, static_cast<int64_t>(kept)));
  }
  // Swap the new buffer into the existing StorageImpl so every tensor and
  // view sharing the storage sees the resized one.
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(fresh.unsafeGetStorageImpl()->set_data_ptr(
      allocate_on(device, 0)));
  impl->set_nbytes(nbytes);
}

void restride_tpu(const at::Tensor& tensor, c10::IntArrayRef sizes,
                  c10::IntArrayRef strides, int64_t offset) {
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  const size_t needed = at::detail::computeStorageNbytes(
      sizes, strides, tensor.element_size(), static_cast<size_t>(offset));
  if (needed > impl->unsafe_storage().nbytes()) {
    resize_storage_bytes(impl->unsafe_storage(), needed);
  }
  impl->set_sizes_and_strides(sizes, strides, offset);
}

void copy_tensor(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) {
    return;
  }
  // Lazy conjugate / negative views (conj(), the imag of a conj) hold
  // their values only logically: copy the values, as the CPU's copy_ does.
  if (src.is_conj() || src.is_neg() || dst.is_conj() || dst.is_neg()) {
    at::Tensor value = src;
    if (value.device().type() != kTpu && (dst.is_conj() || dst.is_neg())) {
      value = value.resolve_conj().resolve_neg();
    } else if (value.is_conj() || value.is_neg()) {
      const bool conj = value.is_conj(), neg = value.is_neg();
      at::Tensor physical = value;
      if (conj) physical = physical.conj();          // drops the bit
      if (neg) physical = physical._neg_view();      // drops the bit
      value = physical;
      if (conj) value = at::conj_physical(value);
      if (neg) value = at::neg(value);
    }
    if (dst.is_conj() || dst.is_neg()) {
      // dst's storage holds conj/neg of what it shows: store that of value
      at::Tensor target = dst;
      if (dst.is_conj()) {
        target = target.conj();
        value = at::conj_physical(value.to(target.device()));
      }
      if (dst.is_neg()) {
        target = target._neg_view();
        value = at::neg(value.to(target.device()));
      }
      copy_tensor(target, value);
      return;
    }
    copy_tensor(dst, value);
    return;
  }
  if (src.is_complex() && !dst.is_complex()) {
    TORCH_WARN_ONCE(
        "Casting complex values to real discards the imaginary part");
  }
  const bool dst_tpu = dst.device().type() == kTpu;
  const bool src_tpu = src.device().type() == kTpu;
  if (dst_tpu && src_tpu) {
    if (dst.device() == src.device()) {
      engine_copy(dst, src);
    } else {
      copy_tpu_to_tpu_across_devices(dst, src);
    }
  } else if (dst_tpu && src.is_cpu()) {
    copy_host_to_tpu(dst, src);
  } else if (src_tpu && dst.is_cpu()) {
    copy_tpu_to_host(dst, src);
  } else {
    TORCH_CHECK(false, "torchtpu cannot copy from ", src.device(), " to ",
                dst.device(), "; copy through the CPU");
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_efficientzerotensor", TORCH_FN(efficient_zero_tensor));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_to_copy", TORCH_FN(to_copy));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace torchtpu
