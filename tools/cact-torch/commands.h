// The training subcommands of cact-torch, each a thin CLI over train/: flags bound to the
// library's option structs, printing, exit codes.
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "train/torch/trainer.h"
#include "train/training_data.h"

namespace cact::torch_tool {

// One line on stderr ("cact-torch: ..."), exit code 2 (main.cc).
int Fail(const absl::Status& s);

class TrainCommand {
 public:
  void Add(CLI::App& app);
  bool chosen() const { return sub_ && sub_->parsed(); }
  int Run();

 private:
  CLI::App* sub_ = nullptr;
  train::TrainingDataOptions data_;
  train::TrainOptions opt_;
  std::string geometry_ = "reference", output_, scheme_ = "embedding=4,mhc=4,default=2";
  int threads_ = 0;
  bool quiet_ = false;
};

}  // namespace cact::torch_tool
