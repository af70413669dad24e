#include "spm_oracle.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>

namespace cact::fuzz {

SpmOracle::SpmOracle(const std::string& model_path) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  if (!sp->Load(model_path).ok()) {
    std::fprintf(stderr, "cannot load %s\n", model_path.c_str());
    std::abort();
  }
  processor_ = sp;
}

SpmOracle::~SpmOracle() { delete static_cast<sentencepiece::SentencePieceProcessor*>(processor_); }

std::vector<int> SpmOracle::Encode(const std::string& text) const {
  std::vector<int> ids;
  static_cast<sentencepiece::SentencePieceProcessor*>(processor_)->Encode(text, &ids).IgnoreError();
  return ids;
}

std::string SpmOracle::Decode(const std::vector<int>& ids) const {
  std::string text;
  static_cast<sentencepiece::SentencePieceProcessor*>(processor_)->Decode(ids, &text).IgnoreError();
  return text;
}

}  // namespace cact::fuzz
