// Loading exported modules with torch::jit::load: reading back what an (edited) module
// holds for `cact-torch import`, and running one from C++.
#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "libtorch/archive_check.h"
#include "libtorch/blas_threads.h"
#include "libtorch/origin.h"
#include "libtorch/tensor_bounds.h"
#include "libtorch/torch_module.h"
#include "lib/file_bytes.h"
#include "lib/status.h"

namespace cact::torchscript {
namespace {

// torch error texts carry a C++ backtrace after the first line (some start with a newline).
std::string FirstLine(const std::string& s) {
  const size_t start = std::min(s.find_first_not_of("\n "), s.size());
  return s.substr(start, s.find('\n', start) - start);
}

// An archive check's error ("PATH: FIELD at offset N: WHAT") told as the load failure it
// prevents: "PATH: not a loadable TorchScript archive: FIELD at offset N: WHAT".
absl::Status NotLoadable(const absl::Status& s, const std::string& path) {
  if (s.ok()) return s;
  std::string what(s.message());
  if (what.rfind(path + ": ", 0) == 0) what = what.substr(path.size() + 2);
  return absl::Status(s.code(), path + ": not a loadable TorchScript archive: " + what);
}

absl::StatusOr<torch::jit::Module> LoadArchive(const std::string& path) {
  try {
    return torch::jit::load(path, at::Device(at::kCPU));
  } catch (const std::exception& e) {
    return FileError(path, "not a loadable TorchScript archive: " + FirstLine(e.what()));
  }
}

// The TorchScript source records (deflated, so read through torch's own zip reader), checked
// before torch::jit::load compiles them (archive_check.h says why).
absl::Status CheckArchiveCode(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string& name : reader.getAllRecords()) {
      if (name.find("code/") == std::string::npos || name.size() < 3 ||
          name.compare(name.size() - 3, 3, ".py") != 0) {
        continue;
      }
      auto [data, size] = reader.getRecord(name);
      CACT_RETURN_IF_ERROR(CheckTorchScriptSource(
          std::string_view(static_cast<const char*>(data.get()), size), path, name));
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return FileError(path, FirstLine(e.what()));
  }
}

absl::StatusOr<FloatTensor> ToFloatTensor(const std::string& name, const at::Tensor& value,
                                          const std::string& path) {
  CACT_RETURN_IF_ERROR(CheckTensorInRecord(value, name, path));
  at::Tensor t = value.detach().to(at::kCPU).to(at::kFloat).contiguous();
  FloatTensor f;
  f.name = name;
  for (int64_t s : t.sizes()) f.shape.push_back(uint32_t(s));
  f.data.resize(size_t(t.numel()));
  if (!f.data.empty())
    std::memcpy(f.data.data(), t.data_ptr<float>(), f.data.size() * sizeof(float));
  f.stored_dtype = std::string(c10::toString(value.scalar_type()));
  return f;
}

// The archive checks (archive_check.h) that keep damaged files away from libtorch's
// crashes; `cact-torch import` and `cact-torch run` both load through them.
absl::Status CheckBeforeLoad(const std::string& path) {
  {
    CACT_ASSIGN_OR_RETURN(FileBytes archive, FileBytes::Open(path));
    CACT_RETURN_IF_ERROR(NotLoadable(CheckTorchArchive(archive.span(), path), path));
  }
  return NotLoadable(CheckArchiveCode(path), path);
}

}  // namespace

absl::StatusOr<ExportedModule> ReadExportedModule(const std::string& path) {
  CurrentThreads();  // the pools' rule, before libtorch starts either
  CACT_RETURN_IF_ERROR(CheckBeforeLoad(path));
  RecordSizeScope record_sizes;  // open until every tensor has been checked and copied
  CACT_ASSIGN_OR_RETURN(torch::jit::Module m, LoadArchive(path));
  try {
    if (!m.hasattr(kJsonAttribute) || !m.attr(kJsonAttribute).isString()) {
      return FileError(path, "not made by cact-torch (no cact_json string attribute)");
    }
    ExportedModule out;
    CACT_ASSIGN_OR_RETURN(out.origin, OriginFromJson(m.attr(kJsonAttribute).toStringRef(), path));
    if (!m.hasattr(kSourceModule) || !m.attr(kSourceModule).isModule()) {
      return FileError(path,
                       "the module carries no original bytes (cact_source submodule missing)");
    }
    torch::jit::Module src = m.attr(kSourceModule).toModule();
    std::vector<at::Tensor> keep;  // owns the bytes the spans below point into
    auto bytes_of = [&](const std::string& name) -> absl::StatusOr<std::span<const uint8_t>> {
      if (!src.hasattr(name) || !src.attr(name).isTensor()) {
        return FileError(path, "carried buffer cact_source." + name + " is missing");
      }
      at::Tensor t = src.attr(name).toTensor();
      if (t.scalar_type() != at::kByte || t.dim() != 1) {
        return FileError(path, "carried buffer cact_source." + name + " is not a 1-D uint8 tensor");
      }
      CACT_RETURN_IF_ERROR(CheckTensorInRecord(t, "cact_source." + name, path));
      keep.push_back(t.to(at::kCPU).contiguous());
      return std::span<const uint8_t>(keep.back().data_ptr<uint8_t>(), size_t(keep.back().numel()));
    };
    CACT_ASSIGN_OR_RETURN(std::span<const uint8_t> prefix, bytes_of(kPrefixBuffer));
    std::vector<std::span<const uint8_t>> blobs;
    for (const OriginTensor& t : out.origin.tensors) {
      CACT_ASSIGN_OR_RETURN(std::span<const uint8_t> b, bytes_of(t.buffer));
      blobs.push_back(b);
    }
    CACT_ASSIGN_OR_RETURN(out.source_bytes, ReassembleSource(out.origin, prefix, blobs, path));

    // Every parameter (an added one is an error later: its edit could not be kept), and
    // the buffers that stand for source tensors (heads.manifest).
    std::set<std::string> names;
    for (const OriginTensor& t : out.origin.tensors) names.insert(t.name);
    for (const auto& p : m.named_parameters(/*recurse=*/true)) {
      CACT_ASSIGN_OR_RETURN(FloatTensor f, ToFloatTensor(p.name, p.value, path));
      out.values.tensors.push_back(std::move(f));
    }
    for (const auto& b : m.named_buffers(/*recurse=*/true)) {
      if (!names.count(b.name)) continue;
      CACT_ASSIGN_OR_RETURN(FloatTensor f, ToFloatTensor(b.name, b.value, path));
      out.values.tensors.push_back(std::move(f));
    }
    return out;
  } catch (const std::exception& e) {
    return FileError(path, "reading the module failed: " + FirstLine(e.what()));
  }
}

struct TorchModel::Impl {
  torch::jit::Module module;
};

TorchModel::TorchModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchModel::~TorchModel() = default;

absl::StatusOr<std::unique_ptr<TorchModel>> TorchModel::Load(const std::string& path) {
  CurrentThreads();  // the pools' rule, before libtorch starts either
  CACT_RETURN_IF_ERROR(CheckBeforeLoad(path));
  CACT_ASSIGN_OR_RETURN(torch::jit::Module m, LoadArchive(path));
  auto impl = std::make_unique<Impl>();
  impl->module = std::move(m);
  impl->module.eval();
  return std::unique_ptr<TorchModel>(new TorchModel(std::move(impl)));
}

void TorchModel::SetThreads(int threads) { ConfigureThreads(threads); }

bool TorchModel::HasMethod(const std::string& name) const {
  return impl_->module.find_method(name).has_value();
}

std::string TorchModel::Json() const {
  if (!impl_->module.hasattr(kJsonAttribute)) return "";
  return impl_->module.attr(kJsonAttribute).toStringRef();
}

absl::StatusOr<std::vector<float>> TorchModel::Call(const std::string& method,
                                                    std::span<const int64_t> tokens, int64_t batch,
                                                    std::optional<int64_t> window, int64_t sink) {
  if (batch <= 0 || tokens.empty() || tokens.size() % size_t(batch) != 0) {
    return absl::InvalidArgumentError("tokens do not form a [batch, T] array");
  }
  if (!HasMethod(method)) return absl::NotFoundError("the module has no method " + method);
  try {
    c10::InferenceMode guard;
    at::Tensor tok =
        at::empty({batch, int64_t(tokens.size()) / batch}, at::TensorOptions().dtype(at::kLong));
    std::memcpy(tok.data_ptr<int64_t>(), tokens.data(), tokens.size() * sizeof(int64_t));
    std::vector<c10::IValue> args{tok, window ? c10::IValue(*window) : c10::IValue(),
                                  c10::IValue(sink)};
    at::Tensor out = impl_->module.get_method(method)(std::move(args)).toTensor();
    out = out.to(at::kFloat).contiguous();
    std::vector<float> v(size_t(out.numel()));
    if (!v.empty()) std::memcpy(v.data(), out.data_ptr<float>(), v.size() * sizeof(float));
    return v;
  } catch (const std::exception& e) {
    return absl::InternalError("TorchScript " + method + " failed: " + FirstLine(e.what()));
  }
}

absl::StatusOr<std::vector<float>> TorchModel::Logits(std::span<const int64_t> tokens,
                                                      int64_t batch, std::optional<int64_t> window,
                                                      int64_t sink) {
  return Call("forward", tokens, batch, window, sink);
}
absl::StatusOr<std::vector<float>> TorchModel::HiddenStates(std::span<const int64_t> tokens,
                                                            int64_t batch,
                                                            std::optional<int64_t> window,
                                                            int64_t sink) {
  return Call("hidden_states", tokens, batch, window, sink);
}
absl::StatusOr<std::vector<float>> TorchModel::Confidence(std::span<const int64_t> tokens,
                                                          int64_t batch) {
  return Call("confidence", tokens, batch, std::nullopt, 0);
}
absl::StatusOr<std::vector<float>> TorchModel::Retrieval(std::span<const int64_t> tokens,
                                                         int64_t batch) {
  return Call("retrieval", tokens, batch, std::nullopt, 0);
}

}  // namespace cact::torchscript
