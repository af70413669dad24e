#include "libtorch/bridge.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "formats/cact/writer.h"
#include "formats/safetensors.h"
#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "lib/sha256.h"
#include "lib/status.h"
#include "libtorch/origin.h"
#include "libtorch/torch_module.h"
#include "nlohmann/json.hpp"
#include "quant/tensor_values.h"

namespace cact::torchscript {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<ReturnResult> PlanAndWrite(const CactFile& source, const Safetensors& values,
                                          const ImportRequest& req) {
  // Two inputs with one name would make "which edit wins" ambiguous.
  std::map<std::string, const FloatTensor*> by_name;
  for (const FloatTensor& t : values.tensors) {
    if (!by_name.emplace(t.name, &t).second) {
      return FileError(req.input, "tensor '" + t.name + "' appears twice");
    }
  }
  CACT_ASSIGN_OR_RETURN(ReturnResult result, PlanReturn(source, by_name, req.options, req.input));
  CACT_RETURN_IF_ERROR(WriteCact(req.output, result.contents));
  return result;
}

absl::StatusOr<ReturnResult> ImportTorchScriptFile(const ImportRequest& req) {
  if (req.base) {
    return FileError(
        req.input,
        "a base .cact is for safetensors input only; a cact-torch module carries its source");
  }
  CACT_ASSIGN_OR_RETURN(ExportedModule m, ReadExportedModule(req.input));
  CACT_ASSIGN_OR_RETURN(CactFile source,
                        CactFile::FromBytes(FileBytes::FromBuffer(
                            req.input + " (carried source " + m.origin.source_path + ")",
                            std::move(m.source_bytes))));
  return PlanAndWrite(source, m.values, req);
}

absl::StatusOr<ReturnResult> ImportSafetensorsFile(const ImportRequest& req) {
  if (!req.base) {
    return FileError(req.input,
                     "safetensors input needs its base .cact (the file it was exported from)");
  }
  std::string path = fs::is_directory(req.input)
                         ? (fs::path(req.input) / "model.safetensors").string()
                         : req.input;
  CACT_ASSIGN_OR_RETURN(Safetensors values, ReadSafetensors(path));
  CACT_ASSIGN_OR_RETURN(CactFile base, CactFile::Open(*req.base));
  std::vector<std::string> warnings;
  auto meta = values.metadata.find(kJsonAttribute);
  if (meta != values.metadata.end()) {
    auto origin = OriginFromJson(meta->second, path);
    std::string base_sha = Sha256Hex(base.bytes().span());
    if (origin.ok() && origin->source_sha256 != base_sha) {
      warnings.push_back("the weights were exported from a file with SHA-256 " +
                         origin->source_sha256 + ", the base has " + base_sha +
                         ": unedited tensors will not be recognised");
    }
  }
  CACT_ASSIGN_OR_RETURN(ReturnResult result, PlanAndWrite(base, values, req));
  result.warnings.insert(result.warnings.begin(), warnings.begin(), warnings.end());
  return result;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExportSafetensors(const CactFile& file,
                                                           const std::string& out) {
  fs::path weights_path, config_path;
  if (absl::EndsWith(out, ".safetensors")) {
    weights_path = out;
    config_path = fs::path(out).parent_path() / "config.json";
  } else {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) return FileError(out, "cannot create the output directory: " + ec.message());
    weights_path = fs::path(out) / "model.safetensors";
    config_path = fs::path(out) / "config.json";
  }
  Origin origin = OriginOf(file);
  const std::string json = OriginToJson(origin);
  Safetensors s;
  for (const TensorEntry& t : file.tensors()) {
    if (t.kind == TensorKind::kTokenizer) continue;
    CACT_ASSIGN_OR_RETURN(std::vector<float> values, TensorValues(file, t));
    s.tensors.push_back({t.name, t.shape(), std::move(values), "F32"});
  }
  s.metadata[kJsonAttribute] = json;
  s.metadata["bits_map"] = origin.scheme;
  s.metadata["group"] = std::to_string(origin.codebook_group);
  s.metadata["source_sha256"] = origin.source_sha256;
  CACT_RETURN_IF_ERROR(WriteSafetensors(weights_path.string(), s, "F32"));
  std::vector<uint8_t> config(json.begin(), json.end());
  config.push_back('\n');
  CACT_RETURN_IF_ERROR(WriteFileAtomic(config_path.string(), config));
  return std::vector<std::string>{weights_path.string(), config_path.string()};
}

ImportFormat DetectImportFormat(const std::string& input) {
  if (fs::is_directory(input)) return ImportFormat::kSafetensors;
  std::ifstream f(input, std::ios::binary);
  char magic[4] = {0, 0, 0, 0};
  f.read(magic, 4);
  if (magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4)
    return ImportFormat::kTorchScript;
  return ImportFormat::kSafetensors;
}

absl::StatusOr<ReturnResult> ImportToCact(const ImportRequest& request) {
  if (!fs::exists(request.input)) return FileError(request.input, "no such file");
  return DetectImportFormat(request.input) == ImportFormat::kTorchScript
             ? ImportTorchScriptFile(request)
             : ImportSafetensorsFile(request);
}

}  // namespace cact::torchscript
