// OpInfo (op_info.h) from an op's schema, the lowering table and the hooks.
#include "aten/op_info.h"

#include "aten/meta_shapes.h"
#include "aten/ops.h"
#include "runtime/runtime.h"

#include <ATen/core/enum_tag.h>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace torchtpu {

namespace {

std::string table_name(const c10::OperatorName& name) {
  std::string base = name.name;
  const size_t colons = base.find("::");
  if (colons != std::string::npos) {
    base = base.substr(colons + 2);
  }
  if (!name.overload_name.empty()) {
    base += "." + name.overload_name;
  }
  return base;
}

c10::TypePtr unwrap_optional(const c10::TypePtr& type) {
  if (auto optional = type->cast<c10::OptionalType>()) {
    return optional->getElementType();
  }
  return type;
}

bool is_tensor_like(const c10::TypePtr& type) {
  const c10::TypePtr element = unwrap_optional(type);
  if (element->kind() == c10::TypeKind::TensorType) {
    return true;
  }
  if (auto list = element->cast<c10::ListType>()) {
    return unwrap_optional(list->getElementType())->kind() ==
           c10::TypeKind::TensorType;
  }
  return false;
}

// The functional overload of an out= overload with several outs, found
// by ATen's naming, whose arguments are the out= overload's inputs and
// which returns one result per out.
void find_functional_of_outs(const c10::OperatorHandle& op, OpInfo* info) {
  const c10::FunctionSchema& schema = op.schema();
  std::vector<size_t> outs;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].is_out()) {
      outs.push_back(i);
    }
  }
  if (outs.size() < 2) {
    return;
  }
  // Candidates: the out= forms' naming rule, then "values_<ov>" -> "<ov>"
  // (sort.values_stable), then the default overload (linalg_eigh.eigvals).
  const std::string& ov = schema.overload_name();
  std::vector<std::string> candidates;
  if (std::string by_name = overload_of_functional(ov); by_name != "-") {
    candidates.push_back(std::move(by_name));
  }
  if (ov.rfind("values_", 0) == 0) {
    candidates.push_back(ov.substr(7));
  }
  candidates.emplace_back("");
  for (const std::string& name : candidates) {
    auto functional = c10::Dispatcher::singleton().findOp({schema.operator_name().name, name});
    if (!functional || !functional->hasSchema()) {
      continue;
    }
    const c10::FunctionSchema& f = functional->schema();
    bool lines_up = f.arguments().size() + outs.size() == schema.arguments().size() &&
                    f.returns().size() == outs.size();
    for (size_t i = 0; lines_up && i < f.arguments().size(); ++i) {
      lines_up = f.arguments()[i].name() == schema.arguments()[i].name() &&
                 !schema.arguments()[i].is_out();
    }
    if (lines_up) {
      info->functional_of_outs = functional;
      info->out_positions = std::move(outs);
      return;
    }
  }
}

// The arithmetic an optimizer or a schedule runs with a new Scalar every
// step, whose meta kernels check no Scalar's value (see OpInfo): the
// foreach ops but pow, and the pointwise ones below.
bool meta_scalar_kinds_only(const std::string& name) {
  std::string base = name.substr(0, name.find('.'));
  if (base.rfind("_foreach_", 0) == 0) {
    return base.find("pow") == std::string::npos;
  }
  if (!base.empty() && base.back() == '_') {
    base.pop_back();
  }
  static const char* const kArithmetic[] = {"add", "sub", "mul", "div", "rsub",
                                            "addcmul", "addcdiv", "lerp",
                                            "true_divide", "multiply", "subtract"};
  for (const char* arithmetic : kArithmetic) {
    if (base == arithmetic) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<OpInfo> make_op_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  auto info = std::make_unique<OpInfo>();
  info->name = table_name(schema.operator_name());
  info->engine_id = ttpu_op_lookup(info->name.c_str());
  info->hooks = &op_hooks_for(info->name);
  info->meta_shape = find_meta_shape(info->name);
  info->complex_by_composite =
      info->name.rfind("_foreach_", 0) == 0 &&
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
  const auto& arguments = schema.arguments();
  info->num_args = arguments.size();
  const std::string& qualified = schema.operator_name().name;
  info->meta_scalar_kinds_only = meta_scalar_kinds_only(info->name);
  if (op.hasTag(at::Tag::pointwise) && !arguments.empty() && !arguments[0].is_out() &&
      arguments[0].alias_info() != nullptr && arguments[0].alias_info()->isWrite() &&
      qualified.size() > 1 && qualified.back() == '_' &&
      qualified.compare(qualified.size() - 2, 2, "__") != 0) {
    info->functional = c10::Dispatcher::singleton().findOp(
        {qualified.substr(0, qualified.size() - 1), schema.overload_name()});
  }
  find_functional_of_outs(op, info.get());
  for (const c10::Argument& argument : arguments) {
    const c10::TypePtr type = unwrap_optional(argument.real_type());
    ArgRole role = ArgRole::kValue;
    if (type->kind() == c10::TypeKind::NumberType) {
      role = ArgRole::kScalar;
    } else if (type->kind() == c10::TypeKind::ScalarTypeType) {
      role = ArgRole::kScalarType;
    } else if (auto list = type->cast<c10::ListType>()) {
      if (list->getElementType()->kind() == c10::TypeKind::NumberType) {
        role = ArgRole::kScalarList;
      }
    }
    info->roles.push_back(role);
    const c10::AliasInfo* alias = argument.alias_info();
    info->is_mutable.push_back(alias != nullptr && alias->isWrite());
    // result_type covers the operands; `out=` tensors only receive, and
    // `alpha` only scales an operand (ATen never wraps it into the
    // promotion), so neither takes part.
    info->promotes.push_back(
        !argument.is_out() && argument.name() != "alpha" &&
        (role == ArgRole::kScalar || is_tensor_like(argument.real_type())));
  }
  for (int index : info->hooks->runtime_float_args) {
    if (index >= 0 && static_cast<size_t>(index) < info->roles.size()) {
      info->roles[static_cast<size_t>(index)] = ArgRole::kScalar;
    }
  }
  for (const c10::Argument& ret : schema.returns()) {
    if (!is_tensor_like(ret.real_type())) {
      info->unsupported = "it returns a non-tensor value";
    }
    const c10::AliasInfo* alias = ret.alias_info();
    int aliased = -1;
    if (alias != nullptr) {
      if (!alias->isWrite()) {
        info->unsupported = "it returns a view of an input";
      }
      for (size_t i = 0; i < arguments.size(); ++i) {
        const c10::AliasInfo* arg_alias = arguments[i].alias_info();
        if (arg_alias != nullptr && arg_alias->isWrite() &&
            arg_alias->beforeSets() == alias->beforeSets()) {
          aliased = static_cast<int>(i);
          break;
        }
      }
      if (aliased < 0 && info->unsupported.empty()) {
        info->unsupported = "a return aliases no argument";
      }
    }
    info->return_alias.push_back(aliased);
  }
  for (int written : info->hooks->also_written) {
    if (written >= 0 && static_cast<size_t>(written) < arguments.size()) {
      info->is_mutable[static_cast<size_t>(written)] = true;
    }
  }
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (!info->is_mutable[i]) {
      continue;
    }
    bool returned = false;
    for (int aliased : info->return_alias) {
      returned = returned || aliased == static_cast<int>(i);
    }
    if (!returned) {
      info->extra_mutable.push_back(static_cast<int>(i));
    }
  }
  return info;
}

}  // namespace

const OpInfo& info_for(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static std::unordered_map<c10::OperatorHandle, std::unique_ptr<OpInfo>> infos;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = infos.find(op);
  if (found == infos.end()) {
    found = infos.emplace(op, make_op_info(op)).first;
  }
  return *found->second;
}

}  // namespace torchtpu
