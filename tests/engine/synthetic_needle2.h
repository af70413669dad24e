// The synthetic needle2 model (released geometry, random weights, seed 1) written to a
// file, for the engine tests that need the full-size model.
#pragma once
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "quant/build.h"
#include "quant/synthetic.h"

namespace cact::testing {

inline std::unique_ptr<Model> SyntheticNeedle2(const std::string& path) {
  auto preset = FindSyntheticPreset("needle2");
  EXPECT_TRUE(preset.ok()) << preset.status();
  auto tokenizer = SyntheticTokenizer(*preset);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Safetensors weights = GenerateSyntheticWeights(*preset, 1);
  BuildRequest req;
  req.weights = &weights;
  req.tokenizer = std::move(*tokenizer);
  RebuildReport report;
  auto contents = BuildCact(req, &report);
  EXPECT_TRUE(contents.ok()) << contents.status();
  EXPECT_TRUE(FinishRebuild(*contents, path, 0, &report).ok());
  auto model = Model::Open(path);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(model).value() : nullptr;
}

}  // namespace cact::testing
