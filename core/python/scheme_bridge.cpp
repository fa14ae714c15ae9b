#include "core/python/scheme_bridge.h"

#include <torch/extension.h>

#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "core/encodings/registry.h"

namespace py = pybind11;

#define PRAGMA_DEPRECATED_BEGIN_COMPAT _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define PRAGMA_DEPRECATED_END_COMPAT _Pragma("GCC diagnostic pop")

namespace pelab {
namespace {

bool embedded_host = false;

bool python_alive() { return Py_IsInitialized() && !_Py_IsFinalizing(); }

// Drops a reference from C++ code that may not hold the GIL (std::function copies, static
// destruction): the GIL is taken to drop it, and after Python has finalized the reference is
// leaked rather than touched.
void drop(py::object& object) {
  if (!python_alive()) {
    object.release();
    return;
  }
  py::gil_scoped_acquire gil;
  object = py::object();
}

class PyHandle {
 public:
  explicit PyHandle(py::object object) : object_(std::move(object)) {}
  ~PyHandle() { drop(object_); }
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;
  const py::object& get() const { return object_; }

 private:
  py::object object_;
};

// The interpreter: started here in the pelab command (the GIL then released, each call taking
// it), already running under import pelab. Imports torch (its tensors are the hooks') and
// pelab.scheme. Call with the GIL not held by this thread or held (both work).
void ensure_python() {
  static std::once_flag started;
  std::call_once(started, [] {
    if (!Py_IsInitialized()) {
      if (!embedded_host) throw std::runtime_error("Python is not running in this process");
      // The Python pelab was built against (a venv's python finds its site-packages from its own path)
      const char* python = std::getenv("PELAB_PYTHON");
      static std::wstring program;
      const std::string chosen = python && *python ? python : PELAB_PYTHON_EXECUTABLE;
      program.assign(chosen.begin(), chosen.end());
      PRAGMA_DEPRECATED_BEGIN_COMPAT
      Py_SetProgramName(program.c_str());
      PRAGMA_DEPRECATED_END_COMPAT
      py::initialize_interpreter(/*init_signal_handlers=*/false);
      {
        py::module_ sys = py::module_::import("sys");
        py::list path = sys.attr("path");
        // the repository's python/ (a build tree); an installed pelab is found on sys.path
        if (std::filesystem::is_directory(PELAB_PYTHON_PACKAGE_DIR)) path.insert(0, PELAB_PYTHON_PACKAGE_DIR);
        sys.attr("argv") = py::make_tuple("pelab");
      }
      PyEval_SaveThread();  // released for good: hooks may run on LibTorch's threads
    }
    py::gil_scoped_acquire gil;
    try {
      py::module_::import("torch");
    } catch (py::error_already_set& e) {
      throw std::runtime_error(std::string("Python schemes need Python's torch (") + e.what() +
                               "); on Debian: apt-get install python3-torch");
    }
    py::module_::import("pelab.scheme");
  });
}


std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << (sizes.size() == 1 ? ",)" : ")");
  return out.str();
}

// "ZeroDivisionError: division by zero at my/decay.py:17": the innermost frame in `file`
// (else the innermost), from a Python exception; call with the GIL.
std::string describe_exception(py::error_already_set& e, const std::string& file) {
  std::string innermost, in_file;
  try {
    py::list frames = py::module_::import("traceback").attr("extract_tb")(e.trace());
    for (const auto& frame : frames) {
      const std::string name = py::str(frame.attr("filename"));
      innermost = name + ":" + std::string(py::str(frame.attr("lineno")));
      if (name == file) in_file = innermost;
    }
  } catch (...) {
  }
  const std::string where = in_file.empty() ? innermost : in_file;
  std::string message = py::str(e.value());
  std::string type = py::str(e.type().attr("__name__"));
  // a SyntaxError's own line (the line is not in the traceback)
  if (py::isinstance(e.value(), py::module_::import("builtins").attr("SyntaxError"))) {
    py::object value = e.value();
    const std::string filename = py::str(value.attr("filename"));
    const std::string lineno = py::str(value.attr("lineno"));
    const std::string offset = py::str(value.attr("offset"));
    return filename + ":" + lineno + ":" + offset + ": " + type + ": " + std::string(py::str(value.attr("msg")));
  }
  return type + ": " + message + (where.empty() ? "" : " at " + where);
}

// One registered class: its handle, the file it came from, the hooks it overrides and where.
struct SchemeClass {
  std::shared_ptr<PyHandle> cls;
  std::string name, file;
  std::map<std::string, std::string> hooks;  // overridden hook -> "file:line"
  bool relative = false;
  bool causal_only = false;
  bool has_scale = false;
  double scale = 0.0;
  std::vector<PositionTable> tables;
};

py::object scheme_module() { return py::module_::import("pelab.scheme"); }

// A pelab scheme around an instance of a pelab.Scheme subclass.
class PythonSchemeImpl : public PositionEncodingImpl {
 public:
  PythonSchemeImpl(const EncodingContext& context, const OptionValues& options, std::shared_ptr<const SchemeClass> cls)
      : PositionEncodingImpl(context), class_(std::move(cls)) {
    py::gil_scoped_acquire gil;
    py::object module = scheme_module();
    positions_type_ = module.attr("Positions");
    attention_type_ = module.attr("Attention");
    py::dict values;
    for (const auto& [key, value] : options.all())
      values[py::str(key)] = std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
    py::object python_context = module.attr("Context")(context.d_model, context.num_heads, context.num_layers,
                                                       context.causal, context.scheme, context.served,
                                                       context.model_heads);
    try {
      instance_ = class_->cls->get()(python_context, values);
    } catch (py::error_already_set& e) {
      throw std::runtime_error("python scheme '" + class_->name + "': creating it raised " +
                               describe_exception(e, class_->file));
    }
    if (!py::hasattr(instance_, "_parameters"))
      throw std::runtime_error("python scheme '" + class_->name + "' (" + class_->file +
                               "): its __init__ must call super().__init__(context, options)");
    // Its parameters and persistent buffers: the same tensors, under the same names
    for (const auto& item : py::dict(instance_.attr("_named_tensors")())) {
      const std::string name = py::str(item.first);
      py::tuple kind_and_tensor = py::reinterpret_borrow<py::tuple>(item.second);
      const bool parameter = kind_and_tensor[0].cast<bool>();
      register_nested(name, kind_and_tensor[1].cast<torch::Tensor>(), parameter);
    }
  }

  ~PythonSchemeImpl() override {
    for (py::object* object : {&instance_, &positions_type_, &attention_type_}) drop(*object);
  }

  void check_positions(const Positions& positions) const override {
    if (!overrides("check_positions")) return;
    call("check_positions", [&] { instance_.attr("check_positions")(python_positions(positions)); return 0; });
  }

  torch::Tensor embed(torch::Tensor x, const Positions& positions, int64_t layer) override {
    // x: (B, T, D) -> (B, T, D)
    if (!overrides("embed")) return x;
    return call("embed", [&] {
      torch::Tensor out = tensor_result("embed", instance_.attr("embed")(x, python_positions(positions), layer));
      require(out.sizes() == x.sizes() && out.scalar_type() == x.scalar_type(), "embed",
              "returned " + describe(out) + ", expected " + describe(x) + " (B, T, D), as x");
      return out;
    });
  }

  std::pair<torch::Tensor, torch::Tensor> rotate(torch::Tensor q, torch::Tensor k,
                                                 const AttentionContext& attention) override {
    // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> the same
    if (!overrides("rotate")) return {std::move(q), std::move(k)};
    return call("rotate", [&] {
      py::object result = instance_.attr("rotate")(q, k, python_attention(attention));
      require(py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result), "rotate",
              "returned " + std::string(py::str(result.get_type().attr("__name__"))) + ", expected a pair (q, k)");
      py::sequence pair = result;
      require(pair.size() == 2, "rotate", "returned " + std::to_string(pair.size()) + " values, expected (q, k)");
      torch::Tensor q_out = tensor_result("rotate", pair[0]), k_out = tensor_result("rotate", pair[1]);
      require(q_out.sizes() == q.sizes() && q_out.scalar_type() == q.scalar_type(), "rotate",
              "returned q " + describe(q_out) + ", expected " + describe(q) + " (B, H, Tq, Dh)");
      require(k_out.sizes() == k.sizes() && k_out.scalar_type() == k.scalar_type(), "rotate",
              "returned k " + describe(k_out) + ", expected " + describe(k) + " (B, H, Tk, Dh)");
      return std::make_pair(q_out, k_out);
    });
  }

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const AttentionContext& attention) override {
    // q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B|1, H|1, Tq, Tk) or undefined
    if (!overrides("score_bias")) return {};
    return call("score_bias", [&] {
      py::object result = instance_.attr("score_bias")(q, k, python_attention(attention));
      if (result.is_none()) return torch::Tensor();
      return checked_scores("score_bias", tensor_result("score_bias", result), q, k);
    });
  }

  std::vector<ScoreTerm> score_terms(const torch::Tensor& q, const torch::Tensor& k,
                                     const AttentionContext& attention) override {
    if (!overrides("score_terms")) return PositionEncodingImpl::score_terms(q, k, attention);
    return call("score_terms", [&] {
      py::object result = instance_.attr("score_terms")(q, k, python_attention(attention));
      require(py::isinstance<py::dict>(result), "score_terms",
              "returned " + std::string(py::str(result.get_type().attr("__name__"))) + ", expected {name: tensor}");
      std::vector<ScoreTerm> terms;
      for (const auto& item : py::dict(result))
        terms.push_back({py::str(item.first), checked_scores("score_terms", tensor_result("score_terms", item.second), q, k)});
      return terms;
    });
  }

  torch::Tensor value_term(const torch::Tensor& probs, const AttentionContext& attention) override {
    // probs: (B, H, Tq, Tk) -> (B, H, Tq, Dh) or undefined
    if (!overrides("value_term")) return {};
    return call("value_term", [&] {
      py::object result = instance_.attr("value_term")(probs, python_attention(attention));
      if (result.is_none()) return torch::Tensor();
      torch::Tensor out = tensor_result("value_term", result);
      const std::vector<int64_t> expected = {probs.size(0), probs.size(1), probs.size(2), context_.head_dim()};
      require(out.sizes() == at::IntArrayRef(expected) && out.is_floating_point(), "value_term",
              "returned " + describe(out) + ", expected shape " + shape_text(expected) + " (B, H, Tq, Dh)");
      return out;
    });
  }

  bool has_value_term() const override { return overrides("value_term"); }
  bool replaces_softmax() const override { return overrides("attention_weights"); }

  torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& masked,
                                  const AttentionContext& attention) override {
    // scores: (B, H, Tq, Tk); masked: (B|1, 1, Tq|1, Tk) bool or undefined -> (B, H, Tq, Tk)
    return call("attention_weights", [&] {
      py::object mask = masked.defined() ? py::cast(masked) : py::none();
      torch::Tensor out =
          tensor_result("attention_weights", instance_.attr("attention_weights")(scores, mask, python_attention(attention)));
      require(out.sizes() == scores.sizes() && out.is_floating_point(), "attention_weights",
              "returned " + describe(out) + ", expected " + describe(scores) + " (B, H, Tq, Tk), as scores");
      return out;
    });
  }

  double attention_scale() const override {
    return class_->has_scale ? class_->scale : PositionEncodingImpl::attention_scale();
  }
  bool adds_to_residual() const override { return overrides("embed"); }
  bool shift_invariant() const override { return class_->relative; }
  std::vector<PositionTable> position_tables() const override { return class_->tables; }

  void train(bool on) override {
    torch::nn::Module::train(on);
    py::gil_scoped_acquire gil;
    instance_.attr("train")(on);
  }
  // Parameters and persistent buffers are the C++ module's (moved in place); the Python module
  // then moves what only it holds (non-persistent buffers).
  using torch::nn::Module::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking) override {
    torch::nn::Module::to(device, dtype, non_blocking);
    python_to(device);
  }
  void to(torch::Device device, bool non_blocking) override {
    torch::nn::Module::to(device, non_blocking);
    python_to(device);
  }

 private:
  bool overrides(const std::string& hook) const { return class_->hooks.count(hook) > 0; }

  void python_to(torch::Device device) {
    py::gil_scoped_acquire gil;
    instance_.attr("to")(device.str());
  }

  // Calls a hook under the GIL; a Python exception or a wrong result becomes one line naming
  // the scheme, the hook and where it is defined.
  template <typename Work>
  auto call(const std::string& hook, Work work) const -> decltype(work()) {
    std::string error;
    {
      py::gil_scoped_acquire gil;
      try {
        return work();
      } catch (py::error_already_set& e) {
        error = hook_name(hook) + " raised " + describe_exception(e, class_->file);
      } catch (const HookError& e) {
        error = e.what();
      } catch (const py::cast_error& e) {
        error = hook_name(hook) + ": " + e.what();
      }
    }
    TORCH_CHECK(false, error);  // c10::Error, as LibTorch's and the built-in schemes' checks
  }

  struct HookError : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  std::string hook_name(const std::string& hook) const {
    auto it = class_->hooks.find(hook);
    return "python scheme '" + class_->name + "': " + hook + " (" + (it == class_->hooks.end() ? class_->file : it->second) + ")";
  }
  void require(bool ok, const std::string& hook, const std::string& message) const {
    if (!ok) throw HookError(hook_name(hook) + " " + message);
  }
  static std::string describe(const torch::Tensor& t) { return "shape " + shape_text(t.sizes()) + " " + dtype_name(t); }
  // torch's Python name of a dtype: float32, bfloat16, int64
  static std::string dtype_name(const torch::Tensor& t) {
    switch (t.scalar_type()) {
      case torch::kFloat: return "float32";
      case torch::kDouble: return "float64";
      case torch::kHalf: return "float16";
      case torch::kBFloat16: return "bfloat16";
      case torch::kLong: return "int64";
      case torch::kInt: return "int32";
      case torch::kBool: return "bool";
      default: return c10::toString(t.scalar_type());
    }
  }
  torch::Tensor tensor_result(const std::string& hook, const py::handle& value) const {
    if (!THPVariable_Check(value.ptr()))
      throw HookError(hook_name(hook) + " returned " + std::string(py::str(value.get_type().attr("__name__"))) +
                      ", expected a torch.Tensor");
    return value.cast<torch::Tensor>();
  }
  torch::Tensor checked_scores(const std::string& hook, torch::Tensor out, const torch::Tensor& q,
                               const torch::Tensor& k) const {
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2);
    const bool ok = out.dim() == 4 && (out.size(0) == 1 || out.size(0) == B) && (out.size(1) == 1 || out.size(1) == H) &&
                    out.size(2) == Tq && out.size(3) == Tk && out.is_floating_point() && out.device() == q.device();
    require(ok, hook,
            "returned " + describe(out) + " on " + out.device().str() + ", expected (B|1, H|1, Tq, Tk) = (" +
                std::to_string(B) + "|1, " + std::to_string(H) + "|1, " + std::to_string(Tq) + ", " +
                std::to_string(Tk) + ") floating point on " + q.device().str());
    return out;
  }

  py::object python_positions(const Positions& positions) const {
    return positions_type_(positions.query, positions.key);
  }
  py::object python_attention(const AttentionContext& attention) const {
    py::object input = attention.input && attention.input->defined() ? py::cast(*attention.input) : py::none();
    return attention_type_(python_positions(attention.positions), attention.layer, context_.causal, input,
                           attention.qkv_weight, attention.qkv_bias);
  }

  // "a.b.c": parameter (or buffer) c of placeholder submodule b of a (C++ names have no dots)
  void register_nested(const std::string& name, torch::Tensor tensor, bool parameter) {
    torch::nn::Module* owner = this;
    std::string rest = name;
    for (auto dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
      const std::string part = rest.substr(0, dot);
      rest = rest.substr(dot + 1);
      std::shared_ptr<torch::nn::Module> child;
      for (const auto& c : owner->named_children())
        if (c.key() == part) child = c.value();
      if (!child) child = owner->register_module(part, std::make_shared<torch::nn::Module>(part));
      owner = child.get();
    }
    if (parameter) owner->register_parameter(rest, tensor, tensor.requires_grad());
    else owner->register_buffer(rest, tensor);
  }

  std::shared_ptr<const SchemeClass> class_;
  py::object instance_, positions_type_, attention_type_;
};

std::map<std::string, Catalog>& loaded_files() {  // file -> its schemes' entries
  static std::map<std::string, Catalog> files;
  return files;
}
std::map<std::string, std::string>& scheme_files() {  // name -> file
  static std::map<std::string, std::string> files;
  return files;
}

OptionSpec option_spec(const std::string& name, const py::handle& option) {
  py::object value = option.attr("default");
  const std::string help = py::str(option.attr("help"));
  auto bound = [&](const char* which) -> std::optional<double> {
    py::object v = option.attr(which);
    if (v.is_none()) return std::nullopt;
    return v.cast<double>();
  };
  if (py::isinstance<py::bool_>(value)) return OptionSpec::boolean(name, value.cast<bool>(), help);
  if (py::isinstance<py::int_>(value)) return OptionSpec::integer(name, value.cast<int64_t>(), help, bound("min"), bound("max"));
  if (py::isinstance<py::float_>(value)) return OptionSpec::real(name, value.cast<double>(), help, bound("min"), bound("max"));
  py::object choices = option.attr("choices");
  if (!choices.is_none()) return OptionSpec::choice(name, value.cast<std::string>(), choices.cast<std::vector<std::string>>(), help);
  return OptionSpec::text(name, value.cast<std::string>(), help);
}

}  // namespace

Catalog load_python_scheme_file(const std::string& path) {
  ensure_python();
  py::gil_scoped_acquire gil;
  auto found = loaded_files().find(path);
  if (found != loaded_files().end()) return found->second;
  py::object scheme = scheme_module();
  py::module_ util = py::module_::import("importlib.util");
  const std::string module_name = "pelab_schemes_" + std::to_string(loaded_files().size());
  py::object module;
  try {
    py::object spec = util.attr("spec_from_file_location")(module_name, path);
    if (spec.is_none()) throw std::runtime_error(path + ": not a Python file");
    module = util.attr("module_from_spec")(spec);
    py::module_::import("sys").attr("modules")[py::str(module_name)] = module;
    spec.attr("loader").attr("exec_module")(module);
  } catch (py::error_already_set& e) {
    throw std::runtime_error(describe_exception(e, path));
  }
  py::list classes = scheme.attr("schemes_in")(module);
  if (classes.empty()) throw std::runtime_error(path + " defines no subclass of pelab.Scheme");
  Catalog entries;
  std::vector<SchemeEntry> to_register;
  for (const auto& cls : classes) {
    auto info = std::make_shared<SchemeClass>();
    info->cls = std::make_shared<PyHandle>(py::reinterpret_borrow<py::object>(cls));
    info->name = py::str(scheme.attr("registered_name")(cls));
    info->file = path;
    const std::string class_name = py::str(cls.attr("__name__"));
    if (is_built_in_scheme(info->name))
      throw std::runtime_error(path + ": class " + class_name + " is named '" + info->name +
                               "', a built-in scheme's; give it another name (name = \"...\")");
    auto other = scheme_files().find(info->name);
    if (other != scheme_files().end() && other->second != path)
      throw std::runtime_error(path + ": scheme '" + info->name + "' is defined in " + other->second + " too");
    for (const auto& hook : scheme.attr("HOOKS"))
      if (scheme.attr("overridden")(cls, hook).cast<bool>())
        info->hooks[py::str(hook)] = py::str(scheme.attr("where")(cls.attr(hook)));
    info->relative = cls.attr("relative").cast<bool>();
    info->causal_only = cls.attr("causal_only").cast<bool>();
    py::object scale = cls.attr("attention_scale");
    if (!scale.is_none()) {
      info->has_scale = true;
      info->scale = scale.cast<double>();
    }
    for (const auto& table : cls.attr("position_tables")) {
      py::tuple t = py::reinterpret_borrow<py::tuple>(table);
      info->tables.push_back({t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<int64_t>()});
    }
    CatalogEntry entry;
    entry.name = info->name;
    entry.description = std::string(py::str(cls.attr("description")));
    if (entry.description.empty()) entry.description = "a Python scheme (" + std::filesystem::path(path).filename().string() + ")";
    entry.causal_only = info->causal_only;
    try {
      for (const auto& item : py::dict(scheme.attr("declared_options")(cls)))
        entry.options.push_back(option_spec(py::str(item.first), item.second));
    } catch (py::error_already_set& e) {
      throw std::runtime_error(path + ": " + class_name + ".options: " + describe_exception(e, path));
    } catch (const py::cast_error& e) {
      throw std::runtime_error(path + ": " + class_name + ".options: " + e.what());
    }
    std::shared_ptr<const SchemeClass> shared = info;
    const std::string name = info->name;
    to_register.push_back({entry, [shared, name](EncodingContext context, const OptionValues& options) {
                             context.scheme = name;
                             std::shared_ptr<PositionEncodingImpl> impl =
                                 std::make_shared<PythonSchemeImpl>(context, options, shared);
                             return PositionEncoding(impl);
                           }});
    entries.push_back(entry);
  }
  for (auto& e : to_register) {
    scheme_files()[e.info.name] = path;
    add_scheme(std::move(e));
  }
  loaded_files()[path] = entries;
  return entries;
}

void install_python_scheme_loader(bool embedded) {
  embedded_host = embedded;
  set_scheme_file_loader([](const std::vector<std::string>& files) {
    Catalog all;
    for (const auto& file : files)
      for (auto& entry : load_python_scheme_file(file)) all.push_back(std::move(entry));
    return all;
  });
}

}  // namespace pelab
