// `cact-run perplexity` and `cact-run compare`: flags and printing over engine/eval/perplexity.h.
#pragma once

namespace cact {

// argv[0] is the subcommand's name.
int PerplexityMain(int argc, char** argv);
int CompareMain(int argc, char** argv);

}  // namespace cact
