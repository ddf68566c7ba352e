// The helpers of backend_base.h.
#include "distributed/backend_base.h"

namespace torchtpu {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::broadcast: return "broadcast";
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce: return "reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::all_gather_into_tensor: return "all_gather_into_tensor";
    case Collective::gather: return "gather";
    case Collective::scatter: return "scatter";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::reduce_scatter_tensor: return "reduce_scatter_tensor";
    case Collective::all_to_all_single: return "all_to_all_single";
    case Collective::all_to_all: return "all_to_all";
    case Collective::barrier: return "barrier";
    case Collective::send_recv: return "send/recv";
  }
  return "collective";
}

std::chrono::milliseconds timeout_from_seconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int64_t bytes_of(const at::Tensor& t) {
  return static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

c10::intrusive_ptr<c10::ivalue::Future> new_tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()));
}

const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, op,
              ": the tpu backend takes one tensor per rank, got ", tensors.size());
  return tensors[0];
}

}  // namespace torchtpu
