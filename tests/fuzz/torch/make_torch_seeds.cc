// Seed corpus for fuzz_torch_import: the tiny and odd fixtures and four micro models
// (tests/reliability/micro_model.h: with and without probe heads) exported with
// ExportTorchScript (what `cact-torch export` calls), plus damaged copies of a micro export:
// truncated, a flipped pickle byte, a flipped carried byte (SHA mismatch), an edited weight,
// a wiped zip directory, and the same archive rewritten by the fuzzer's zip writer.
//   make_torch_seeds FIXTURES_DIR OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "libtorch/torch_module.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/writer.h"
#include "lib/file_bytes.h"
#include "reliability/micro_model.h"
#include "zip_members.h"

namespace {

using namespace cact;

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

bool WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return bool(f);
}

bool Report(const absl::Status& s) {
  if (!s.ok()) std::fprintf(stderr, "make_torch_seeds: %s\n", std::string(s.message()).c_str());
  return s.ok();
}

bool Export(const absl::StatusOr<CactFile>& file, const std::string& out) {
  if (!file.ok()) return Report(file.status());
  return Report(torchscript::ExportTorchScript(*file, out));
}

// Damaged copies of `pt` (member edits keep the CRC-32s right, as a tool would).
int WriteDamaged(const std::string& dir, const std::string& stem, const std::vector<uint8_t>& pt) {
  int written = 0;
  auto put = [&](const std::string& what, const std::vector<uint8_t>& bytes) {
    written += WriteFile(dir + "/" + stem + "_" + what + ".pt", bytes);
  };
  put("truncated_half", {pt.begin(), pt.begin() + pt.size() / 2});
  put("truncated_eocd", {pt.begin(), pt.end() - 22});
  std::vector<uint8_t> wiped = pt;
  std::fill(wiped.end() - 22, wiped.end(), 0);
  put("eocd_zeroed", wiped);
  auto members = fuzz::ReadZip(pt.data(), pt.size());
  if (!members) return written;
  put("rewritten", fuzz::WriteZip(*members));
  auto edit = [&](const std::string& what, auto&& pick, auto&& change) {
    std::vector<fuzz::ZipMember> copy = *members;
    for (fuzz::ZipMember& m : copy) {
      if (pick(m) && !m.data.empty()) {
        change(m.data);
        put(what, fuzz::WriteZip(copy));
        return;
      }
    }
  };
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  edit(
      "pickle_flip", [&](auto& m) { return ends_with(m.name, "data.pkl"); },
      [](auto& d) { d[d.size() / 2] ^= 0x20; });
  edit(
      "code_flip", [&](auto& m) { return ends_with(m.name, ".py"); },
      [](auto& d) { d[d.size() / 3] ^= 0x01; });
  edit(
      "weight_edit", [&](auto& m) { return ends_with(m.name, "data/0"); },
      [](auto& d) { d[d.size() / 2] ^= 0x40; });
  // The last data record of an export is the carried tokenizer (or another carried buffer).
  std::string last;
  for (const auto& m : *members)
    if (m.name.find("/data/") != std::string::npos) last = m.name;
  edit(
      "carried_flip", [&](auto& m) { return m.name == last; },
      [](auto& d) { d[d.size() / 2] ^= 0x01; });
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_torch_seeds FIXTURES_DIR OUT_DIR\n");
    return 2;
  }
  const std::string fixtures = argv[1], dir = argv[2];
  std::filesystem::create_directories(dir);
  int failures = 0;
  for (const char* name : {"tiny", "odd"}) {
    failures +=
        !Export(CactFile::Open(fixtures + "/" + name + "/model.cact"), dir + "/" + name + ".pt");
  }
  const std::vector<ProbeHeadSpec> both = {{ProbeHead::kContrastive, 4, 4},
                                           {ProbeHead::kConfidence, 8, 1}};
  const std::vector<ProbeHeadSpec> one = {{ProbeHead::kConfidence, 2, 1}};
  for (uint32_t seed = 0; seed < 4; ++seed) {
    reliability::MicroOptions o;
    o.seed = seed;
    o.heads = seed == 0 ? std::vector<ProbeHeadSpec>{} : seed == 1 ? one : both;
    auto bytes = SerializeCact(reliability::MicroContents(reliability::MicroGeometry(), o));
    if (!bytes.ok()) {
      failures += !Report(bytes.status());
      continue;
    }
    const std::string name = "micro_" + std::to_string(seed);
    failures +=
        !Export(CactFile::FromBytes(FileBytes::FromBuffer(name + ".cact", std::move(*bytes))),
                dir + "/" + name + ".pt");
  }
  const std::vector<uint8_t> micro = ReadFile(dir + "/micro_2.pt");
  if (micro.empty() || WriteDamaged(dir, "micro_2", micro) < 8) ++failures;
  std::printf("seeds in %s\n", dir.c_str());
  return failures ? 1 : 0;
}
