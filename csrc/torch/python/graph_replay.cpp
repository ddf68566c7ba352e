// Graph replay for torch.compile (torchtpu/dynamo.py): a compiled graph
// that ran as one program runs again from new inputs without going through
// the dispatcher op by op.
//
// At capture, every storage the engine's program needs is matched to one
// of the graph's inputs or to the storage of one of its outputs, and each
// output is described (the input it is, a view of an input, or a view of a
// new storage). A replay checks that the new inputs look exactly like the
// captured ones (dtype, sizes, strides, offset, storage size, which inputs
// share a storage; non-tensor inputs equal), allocates the new output
// storages, runs the program on them and builds the outputs. Anything the
// capture cannot account for (a CPU tensor, a storage created outside the
// inputs and outputs, a non-tensor output) makes the graph unreplayable:
// it is then recorded every call, as before.
#include "runtime/allocator.h"
#include "runtime/runtime.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <vector>

namespace py = pybind11;

namespace torchtpu {

namespace {

struct Meta {
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  static Meta of(const at::Tensor& t) {
    return Meta{t.scalar_type(), t.sizes().vec(), t.strides().vec(),
                t.storage_offset()};
  }
  bool same(const at::Tensor& t) const {
    return t.scalar_type() == dtype && t.sizes().equals(sizes) &&
           t.strides().equals(strides) && t.storage_offset() == offset;
  }
};

enum class In { None, Tensor, Value };

struct Input {
  In kind = In::None;
  Meta meta;
  c10::DeviceIndex device = 0;
  size_t nbytes = 0;
  int leader = -1;   // first input with the same storage
  py::object value;  // In::Value: a Python bool/int/float the graph took
};

enum class Out { None, Input, InputView, New };

struct Output {
  Out kind = Out::None;
  int index = -1;  // the input (Input, InputView) or new storage (New)
  Meta meta;
  int first = -1;  // New: an earlier output on the same storage, or -1
};

// Where a program storage comes from at a replay.
struct Source {
  bool is_new = false;
  int index = -1;  // input index or new storage index
};

struct NewStorage {
  size_t nbytes = 0;
  c10::DeviceIndex device = 0;
};

bool tpu_tensor(const py::handle& obj, at::Tensor* out) {
  if (!THPVariable_Check(obj.ptr())) {
    return false;
  }
  *out = THPVariable_Unpack(obj.ptr());
  return out->defined() && out->device().type() == c10::DeviceType::PrivateUse1;
}

bool plain_value(const py::handle& obj) {
  return py::isinstance<py::bool_>(obj) || py::isinstance<py::int_>(obj) ||
         py::isinstance<py::float_>(obj);
}

size_t storage_nbytes(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->unsafe_storage().nbytes();
}

class GraphReplay {
 public:
  GraphReplay(ttpu_graph_replay* handle) : handle_(handle) {}
  ~GraphReplay() {
    if (ttpu_runtime* rt = runtime_if_created()) {
      ttpu_graph_replay_free(rt, handle_);
    }
  }
  GraphReplay(const GraphReplay&) = delete;
  GraphReplay& operator=(const GraphReplay&) = delete;

  // Describes the graph's inputs and outputs; false when some storage or
  // output cannot be accounted for.
  bool describe(const py::sequence& args, const py::sequence& outs) {
    std::vector<at::Tensor> in_t(args.size());
    for (size_t j = 0; j < args.size(); ++j) {
      Input in;
      py::handle a = args[j];
      if (a.is_none()) {
        in.kind = In::None;
      } else if (tpu_tensor(a, &in_t[j])) {
        in.kind = In::Tensor;
        in.meta = Meta::of(in_t[j]);
        in.device = in_t[j].device().index();
        in.nbytes = storage_nbytes(in_t[j]);
        in.leader = static_cast<int>(j);
        for (size_t i = 0; i < j; ++i) {
          if (inputs_[i].kind == In::Tensor && buffer_of(in_t[i]) == buffer_of(in_t[j])) {
            in.leader = inputs_[i].leader;
            break;
          }
        }
      } else if (plain_value(a)) {
        in.kind = In::Value;
        in.value = py::reinterpret_borrow<py::object>(a);
      } else {
        return false;  // a CPU tensor, a SymInt, ...
      }
      inputs_.push_back(std::move(in));
    }
    auto input_with = [&](const ttpu_buffer* b) {
      for (size_t j = 0; j < inputs_.size(); ++j) {
        if (inputs_[j].kind == In::Tensor && buffer_of(in_t[j]) == b) {
          return inputs_[j].leader;
        }
      }
      return -1;
    };
    std::vector<const ttpu_buffer*> new_bufs;
    auto new_with = [&](const ttpu_buffer* b) {
      for (size_t m = 0; m < new_bufs.size(); ++m) {
        if (new_bufs[m] == b) {
          return static_cast<int>(m);
        }
      }
      return -1;
    };
    for (size_t k = 0; k < outs.size(); ++k) {
      Output o;
      py::handle x = outs[k];
      at::Tensor t;
      if (x.is_none()) {
        outputs_.push_back(o);
        continue;
      }
      if (!tpu_tensor(x, &t)) {
        return false;
      }
      o.meta = Meta::of(t);
      for (size_t j = 0; j < inputs_.size() && o.kind == Out::None; ++j) {
        if (inputs_[j].kind == In::Tensor && in_t[j].is_same(t)) {
          o.kind = Out::Input;
          o.index = static_cast<int>(j);
        }
      }
      if (o.kind == Out::None) {
        const ttpu_buffer* b = buffer_of(t);
        const int j = input_with(b);
        if (j >= 0) {
          if (o.meta.dtype != inputs_[j].meta.dtype) {
            return false;  // a dtype view: not an as_strided of the input
          }
          o.kind = Out::InputView;
          o.index = j;
        } else {
          o.kind = Out::New;
          o.index = new_with(b);
          if (o.index < 0) {
            o.index = static_cast<int>(new_bufs.size());
            new_bufs.push_back(b);
            new_storages_.push_back({storage_nbytes(t), t.device().index()});
          } else {
            for (size_t e = 0; e < outputs_.size(); ++e) {
              if (outputs_[e].kind == Out::New && outputs_[e].index == o.index &&
                  outputs_[e].first < 0 && outputs_[e].meta.dtype == o.meta.dtype) {
                o.first = static_cast<int>(e);
                break;
              }
            }
          }
        }
      }
      outputs_.push_back(std::move(o));
    }
    // Every new output storage must be one the program writes: anything
    // else (a constant the graph returns) would come back as zeros.
    std::vector<bool> new_written(new_bufs.size(), false);
    const int n = ttpu_graph_replay_store_count(handle_);
    for (int k = 0; k < n; ++k) {
      int written = 0;
      const ttpu_buffer* b = ttpu_graph_replay_store(handle_, k, &written);
      Source src;
      src.index = input_with(b);
      if (src.index < 0) {
        src.is_new = true;
        src.index = new_with(b);
        if (src.index < 0) {
          return false;  // a storage the graph's caller does not hand in
        }
        new_written[src.index] = new_written[src.index] || written;
      }
      sources_.push_back(src);
    }
    for (bool w : new_written) {
      if (!w) {
        return false;
      }
    }
    return true;
  }

  // The outputs, or None when these inputs differ from the capture's.
  py::object run(const py::sequence& args) {
    if (args.size() != inputs_.size()) {
      return py::none();
    }
    std::vector<at::Tensor> in_t(args.size());
    for (size_t j = 0; j < args.size(); ++j) {
      const Input& in = inputs_[j];
      py::handle a = args[j];
      switch (in.kind) {
        case In::None:
          if (!a.is_none()) return py::none();
          break;
        case In::Value:
          if (!plain_value(a) || Py_TYPE(a.ptr()) != Py_TYPE(in.value.ptr()) ||
              !in.value.equal(a)) {
            return py::none();
          }
          break;
        case In::Tensor:
          // The program may write any input: a copy-on-write one gets its
          // own buffer before buffers are compared and bound.
          if (tpu_tensor(a, &in_t[j])) {
            materialize_if_cow(in_t[j]);
          }
          if (!tpu_tensor(a, &in_t[j]) || !in.meta.same(in_t[j]) ||
              in_t[j].device().index() != in.device ||
              storage_nbytes(in_t[j]) != in.nbytes ||
              (in.leader != static_cast<int>(j) &&
               buffer_of(in_t[j]) != buffer_of(in_t[in.leader]))) {
            return py::none();
          }
          break;
      }
    }
    std::vector<c10::Storage> fresh;
    fresh.reserve(new_storages_.size());
    for (const NewStorage& ns : new_storages_) {
      fresh.emplace_back(c10::Storage::use_byte_size_t(), ns.nbytes,
                         allocate_on(ns.device, ns.nbytes), tpu_allocator(),
                         /*resizable=*/true);
    }
    std::vector<ttpu_buffer*> bufs(sources_.size());
    for (size_t k = 0; k < sources_.size(); ++k) {
      const Source& src = sources_[k];
      bufs[k] = src.is_new
                    ? static_cast<ttpu_buffer*>(fresh[src.index].data_ptr().get())
                    : buffer_of(in_t[src.index]);
    }
    int ran = 0;
    {
      py::gil_scoped_release no_gil;
      check(ttpu_runtime_graph_replay(runtime(), handle_, bufs.data(), &ran),
            "compiled graph");
    }
    if (!ran) {
      return py::none();
    }
    py::list result;
    std::vector<at::Tensor> built(outputs_.size());
    for (size_t k = 0; k < outputs_.size(); ++k) {
      const Output& o = outputs_[k];
      switch (o.kind) {
        case Out::None:
          result.append(py::none());
          continue;
        case Out::Input:
          built[k] = in_t[o.index];
          break;
        case Out::InputView:
          built[k] = in_t[o.index].as_strided(o.meta.sizes, o.meta.strides, o.meta.offset);
          break;
        case Out::New:
          if (o.first >= 0) {
            built[k] = built[o.first].as_strided(o.meta.sizes, o.meta.strides, o.meta.offset);
          } else {
            built[k] = at::detail::make_tensor<c10::TensorImpl>(
                c10::Storage(fresh[o.index]),
                c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                caffe2::TypeMeta::fromScalarType(o.meta.dtype));
            built[k].unsafeGetTensorImpl()->set_sizes_and_strides(
                o.meta.sizes, o.meta.strides, o.meta.offset);
          }
          break;
      }
      result.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(built[k])));
    }
    return result;
  }

  int op_count() const { return ttpu_graph_replay_op_count(handle_); }

 private:
  ttpu_graph_replay* handle_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  std::vector<Source> sources_;
  std::vector<NewStorage> new_storages_;
};

// Ends the graph (like _end_graph); returns its replay or None.
py::object end_graph_capture(const py::sequence& args, const py::sequence& outs) {
  ttpu_graph_replay* handle = nullptr;
  {
    py::gil_scoped_release no_gil;
    check(ttpu_runtime_end_graph_capture(runtime(), &handle), "compiled graph");
  }
  if (handle == nullptr) {
    return py::none();
  }
  auto replay = std::make_unique<GraphReplay>(handle);
  if (!replay->describe(args, outs)) {
    return py::none();
  }
  return py::cast(std::move(replay));
}

// Stores t's storage padded to its bucket in `dim` (a compiled graph's
// input whose size there is symbolic): whether it is padded there now.
// Only a contiguous tensor that covers its storage from offset 0 can be.
bool pad_graph_input(const at::Tensor& t, int64_t dim) {
  TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1,
              "_pad_graph_input: expected a tpu tensor");
  TORCH_CHECK_INDEX(dim >= 0 && dim < t.dim(), "_pad_graph_input: dim ", dim,
                    " out of range for a tensor of ", t.dim(), " dims");
  if (t.dim() > TTPU_MAX_DIMS ||
      t.storage_offset() != 0 || !t.is_contiguous() ||
      storage_nbytes(t) != static_cast<size_t>(t.numel()) * t.element_size()) {
    return false;
  }
  const ttpu_dtype dtype = to_ttpu_dtype(t.scalar_type());
  if (dtype == TTPU_DTYPE_NONE) {
    return false;
  }
  std::vector<int64_t> dims(t.sizes().begin(), t.sizes().end());
  int padded = 0;
  {
    py::gil_scoped_release no_gil;
    check(ttpu_buffer_pad_dim(writable_buffer_of(t), dtype, dims.data(),
                              static_cast<int>(dims.size()), static_cast<int>(dim),
                              &padded),
          "padding a compiled graph's input");
  }
  return padded != 0;
}

}  // namespace

void init_graph_replay(py::module_& m) {
  m.def("_pad_graph_input", &pad_graph_input, py::arg("tensor"), py::arg("dim"),
        "Stores a tpu tensor's storage padded to its size bucket in dim (its "
        "values unchanged), so that compiled graphs over it compile one "
        "program per bucket; whether it is padded there.");
  py::class_<GraphReplay>(m, "_GraphReplay")
      .def("run", &GraphReplay::run,
           "Runs the graph's program on these inputs: its outputs, or None "
           "when the inputs differ from the captured ones.")
      .def_property_readonly("ops", &GraphReplay::op_count);
  m.def("_end_graph_capture", &end_graph_capture, py::arg("args"),
        py::arg("outputs"),
        "Ends a compiled graph; its replay when it ran as one program and "
        "every storage it uses is an input's or an output's, else None.");
}

}  // namespace torchtpu
