// The training subcommands of cact-torch, each a thin CLI over train/: flags bound to the
// library's option structs, printing, exit codes.
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "libtorch/finetune.h"
#include "libtorch/trainer.h"
#include "train/training_data.h"

namespace cact::torch_tool {

// One line on stderr ("cact-torch: ..."), exit code 2 (main.cc).
int Fail(const absl::Status& s);

// A subcommand: Add registers its flags on the app, Run executes it once parsed.
class Subcommand {
 public:
  bool chosen() const { return sub_ && sub_->parsed(); }

 protected:
  CLI::App* sub_ = nullptr;
};

class TrainCommand : public Subcommand {
 public:
  void Add(CLI::App& app);
  int Run();

 private:
  train::TrainingDataOptions data_;
  train::TrainOptions opt_;
  std::vector<std::string> previous_token_heads_, induction_heads_, copy_heads_;  // LAYER.HEAD
  std::string geometry_ = "reference", output_, scheme_ = "embedding=4,mhc=4,default=2";
  int threads_ = 0;
  bool quiet_ = false;
};

class FinetuneCommand : public Subcommand {
 public:
  void Add(CLI::App& app);
  int Run();

 private:
  train::FinetuneOptions opt_;
  std::string base_, data_, output_;
  size_t max_len_ = 1024;
  CLI::Option* max_len_opt_ = nullptr;
  int threads_ = 0;
  std::string qat_bits_ = "auto", format_ = "peft", template_;
  bool no_qat_ = false, quiet_ = false;
};

// FP32 (or fake-quantized) perplexity of float weights, on the tokens `cact-run perplexity`
// scores: the reference point of the quality tables.
class EvalCommand : public Subcommand {
 public:
  void Add(CLI::App& app);
  int Run();

 private:
  std::string weights_, text_, tokenizer_, fake_quant_;
  int64_t ctx_ = 0, chunks_ = 0;  // ctx 0: min(max_seq_len, 512)
  int threads_ = 0;
  bool json_ = false;
};

}  // namespace cact::torch_tool
