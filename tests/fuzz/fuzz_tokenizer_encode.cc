// The engine's tokenizer on arbitrary bytes, differentially against libsentencepiece 0.1.97
// with the same fixture model (tokenizer.model of the tiny and odd fixtures): the ids must be
// identical for every input, and decoding them must give the same text as sentencepiece's
// DecodeIds. The first input byte picks the fixture.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "engine/text/tokenizer.h"
#include "formats/cact/cact_file.h"
#include "fuzz_common.h"
#include "spm_oracle.h"

using namespace cact;

namespace {

struct Pair {
  std::unique_ptr<Tokenizer> ours;
  std::unique_ptr<fuzz::SpmOracle> sp;
};
Pair g_models[2];

void Load(Pair* p, const std::string& kase) {
  const std::string dir = std::string(CACT_FIXTURES_DIR) + "/" + kase;
  auto f = CactFile::Open(dir + "/model.cact");
  if (!f.ok()) {
    std::fprintf(stderr, "%s\n", std::string(f.status().message()).c_str());
    std::abort();
  }
  auto t = Tokenizer::FromBytes(f->tokenizer_blob(), f->path());
  if (!t.ok()) std::abort();
  p->ours = std::make_unique<Tokenizer>(std::move(*t));
  p->sp = std::make_unique<fuzz::SpmOracle>(dir + "/tokenizer.model");
}

std::string Show(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += std::to_string(id) + " ";
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Load(&g_models[0], "tiny");
  Load(&g_models[1], "odd");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Pair& m = g_models[data[0] & 1];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<int32_t> ours = m.ours->Encode(text);
  const std::vector<int> theirs = m.sp->Encode(text);
  const std::vector<int> ours_int(ours.begin(), ours.end());
  if (ours_int != theirs) {
    std::fprintf(stderr, "ours:  %s\nspm:   %s\n", Show(ours_int).c_str(), Show(theirs).c_str());
    CACT_FUZZ_CHECK(false, "Encode ids equal libsentencepiece's");
  }
  const std::string their_text = m.sp->Decode(theirs);
  const std::string our_text = m.ours->Decode(ours);
  if (our_text != their_text) {
    std::fprintf(stderr, "ours: [%s]\nspm:  [%s]\n", our_text.c_str(), their_text.c_str());
    CACT_FUZZ_CHECK(false, "Decode text equals libsentencepiece's");
  }
  return 0;
}
