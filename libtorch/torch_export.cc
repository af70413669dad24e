// Builds the TorchScript module from a .cact file (the only place that creates one).
#include <torch/script.h>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "libtorch/blas_threads.h"
#include "libtorch/needle_script.h"
#include "libtorch/origin.h"
#include "libtorch/torch_module.h"
#include "lib/atomic_file.h"
#include "lib/status.h"
#include "quant/tensor_values.h"

namespace cact::torchscript {
namespace {

using torch::jit::Module;

at::Tensor FloatTensorOf(const std::vector<float>& v, const std::vector<uint32_t>& shape) {
  std::vector<int64_t> sizes(shape.begin(), shape.end());
  at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(at::kFloat));
  std::memcpy(t.data_ptr<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

at::Tensor ByteTensorOf(std::span<const uint8_t> b) {
  at::Tensor t = at::empty({int64_t(b.size())}, at::TensorOptions().dtype(at::kByte));
  if (!b.empty()) std::memcpy(t.data_ptr<uint8_t>(), b.data(), b.size());
  return t;
}

// Submodule class per role: every layer shares one class (and its compiled methods), so do
// the engram sites and the probe heads.
std::string ClassFor(const std::string& submodule) {
  if (submodule.rfind("layer", 0) == 0) return "Layer";
  if (submodule.rfind("engram", 0) == 0) return "Engram";
  if (submodule == "heads") return "Heads";
  return "ProbeHead";
}

class ModuleBuilder {
 public:
  explicit ModuleBuilder(const ScriptConfig& config)
      : config_(config),
        cu_(std::make_shared<torch::jit::CompilationUnit>()),
        top_(c10::QualifiedName("__torch__.cact.Needle"), cu_) {}

  // Adds one tensor; "a.b" goes to submodule "a" (created on first use, in file order).
  void Add(const std::string& name, at::Tensor value, bool is_buffer) {
    if (!is_buffer) value.set_requires_grad(true);
    size_t dot = name.find('.');
    if (dot == std::string::npos) {
      top_.register_parameter(name, value, is_buffer);
      return;
    }
    Sub(name.substr(0, dot)).register_parameter(name.substr(dot + 1), value, is_buffer);
  }

  void AddBytes(const std::string& buffer, std::span<const uint8_t> bytes) {
    if (!source_) {
      source_ = Module(c10::QualifiedName("__torch__.cact.Source"), cu_);
    }
    source_->register_buffer(buffer, ByteTensorOf(bytes));
  }

  // Compiles the methods (submodule classes once each, then the top level) and attaches
  // the carried bytes and JSON last so parameters come first in every listing.
  Module Finish(const std::string& json) {
    if (defined_.insert("Layer").second) Define("Layer", LayerSource(config_));
    if (config_.geometry.num_engram_sites && defined_.insert("Engram").second) {
      Define("Engram", EngramSource(config_));
    }
    if (source_) top_.register_module(kSourceModule, *source_);
    top_.register_attribute(kJsonAttribute, c10::StringType::get(), json);
    top_.define(TopSource(config_));
    return top_;
  }

 private:
  Module& Sub(const std::string& name) {
    auto it = subs_.find(name);
    if (it != subs_.end()) return it->second;
    std::string cls = ClassFor(name);
    auto& type = classes_[cls];
    Module m = type ? Module(cu_, type) : Module(c10::QualifiedName("__torch__.cact." + cls), cu_);
    if (!type) type = m.type();
    top_.register_module(name, m);  // the object is shared: later parameters show up in top_
    return subs_.emplace(name, m).first->second;
  }

  void Define(const std::string& cls, const std::string& src) {
    for (auto& [name, m] : subs_) {
      if (ClassFor(name) == cls) {
        m.define(src);  // defines the methods on the shared class
        return;
      }
    }
  }

  ScriptConfig config_;
  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  Module top_;
  std::map<std::string, Module> subs_;
  std::map<std::string, c10::ClassTypePtr> classes_;
  std::set<std::string> defined_;
  std::optional<Module> source_;
};

}  // namespace

absl::Status ExportTorchScript(const CactFile& file, const std::string& out_path) {
  return ExportTorchScript(file, out_path, file.geometry().block());
}

absl::Status ExportTorchScript(const CactFile& file, const std::string& out_path,
                               const BlockSpec& block) {
  if (absl::Status s = CheckScriptableBlock(block); !s.ok()) {
    return FileError(file.path(), std::string(s.message()));
  }
  CurrentThreads();  // the pools' rule, before libtorch starts either
  Origin origin = OriginOf(file);
  ScriptConfig config{file.geometry(), file.probe_heads(), origin.pad_id};
  config.geometry.block_spec = &block;
  std::string bytes;
  try {
    torch::NoGradGuard no_grad;
    ModuleBuilder builder(config);
    for (const TensorEntry& t : file.tensors()) {
      if (t.kind == TensorKind::kTokenizer) continue;
      CACT_ASSIGN_OR_RETURN(std::vector<float> values, TensorValues(file, t));
      builder.Add(t.name, FloatTensorOf(values, t.shape()),
                  /*is_buffer=*/t.name == "heads.manifest");
    }
    std::span<const uint8_t> all = file.bytes().span();
    builder.AddBytes(kPrefixBuffer, all.subspan(0, origin.prefix_bytes));
    for (const TensorEntry& t : file.tensors()) builder.AddBytes(BufferNameFor(t), file.blob(t));
    Module module = builder.Finish(OriginToJson(origin));
    std::ostringstream os;
    module.save(os);
    bytes = std::move(os).str();
  } catch (const std::exception& e) {
    return FileError(file.path(),
                     std::string("building the TorchScript module failed: ") + e.what());
  }
  return WriteFileAtomic(out_path, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
}

}  // namespace cact::torchscript
