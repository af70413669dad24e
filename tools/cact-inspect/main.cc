// cact-inspect: look inside a .cact file. Printing only; the facts come from formats/ and
// quant/ (validation, naming, accounting, scheme inference, dequantization, diff).
//
//   cact-inspect [--json|--markdown] [--tensors] FILE  summary, accounting, tensor table
//   cact-inspect [--json] CKPT.pkl                 an official checkpoint or LoRA adapter
//   cact-inspect verify FILE [--sha256 HEX] [--tensors]  validation, finiteness, checksums
//   cact-inspect diff A B [--json]                 what a rebuild touched
//   cact-inspect dump FILE --tensor NAME -o X.npy  dequantized tensor as .npy
//   cact-inspect tokens FILE [--json]              tokenizer pieces
//   cact-inspect --version
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "tools/cact-inspect/commands.h"
#include "tools/common/cli.h"

namespace {

// --sha256: exactly 64 hex digits (a prefix or a typo would never match, and say so late).
CLI::Validator Sha256Hex() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.size() != 64 || s.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          return "must be 64 hexadecimal digits, got '" + s + "'";
        return {};
      },
      "64 hex digits");
}

}  // namespace

int main(int argc, char** argv) {
  // `cact-inspect FILE` is the summary command: make it explicit for CLI11.
  static const std::set<std::string> kCommands = {"info", "verify", "diff", "dump", "tokens"};
  std::vector<std::string> args(argv + 1, argv + argc);
  bool wants_help =
      !args.empty() && (args[0] == "-h" || args[0] == "--help" || args[0] == "--version");
  if (!args.empty() && !kCommands.count(args[0]) && !wants_help) args.insert(args.begin(), "info");

  CLI::App app{
      "cact-inspect: what is inside a .cact file (header, codebooks, tensors, "
      "bits-per-weight accounting, checksums, validation, diffs)"};
  cact::tools::SetUpTool(app, "cact-inspect");
  app.require_subcommand(1);
  cact::inspect::Options o;

  auto* info = app.add_subcommand(
      "info", "summary and accounting, the tensor table with --tensors (default command)");
  info->add_option("file", o.file, ".cact / .cact.zst, or an official checkpoint / adapter .pkl")
      ->required();
  info->add_flag("--json", o.json,
                 "machine-readable JSON (keys documented in docs/cact-inspect.md)");
  info->add_flag("--markdown", o.markdown, "the same report as Markdown");
  info->add_flag("--tensors", o.tensors,
                 "also the codebook values and the table of every tensor (JSON has them)");
  info->add_flag("--no-tensors", o.no_tensors, "JSON: omit the tensor list");
  info->footer("Examples:\n  cact-inspect model.cact\n  cact-inspect model.cact --tensors\n"
               "  cact-inspect needle2.pkl");

  auto* verify = app.add_subcommand(
      "verify", "full validation, every value finite, the file's SHA-256; exit 1 on a failure");
  verify->add_option("file", o.file, ".cact / .cact.zst")->required();
  verify->add_option("--sha256", o.sha256, "expected SHA-256 of the file (64 hex digits)")
      ->check(Sha256Hex());
  verify->add_flag("--tensors", o.tensors, "also print one SHA-256 per tensor (JSON has them)");
  verify->add_flag("--json", o.json, "JSON report");
  verify->footer("Example:\n  cact-inspect verify needle2.cact --sha256 SHA256_FROM_THE_RELEASE");

  auto* diff = app.add_subcommand("diff", "header and per-tensor differences between two files");
  diff->add_option("a", o.file)->required();
  diff->add_option("b", o.file_b)->required();
  diff->add_flag("--json", o.json, "JSON report");
  diff->add_flag("--all", o.all, "list identical tensors too");
  diff->footer("Example:\n  cact-inspect diff model.cact model-cq4.cact");

  auto* dump = app.add_subcommand("dump", "write one tensor's dequantized values as .npy");
  dump->add_option("file", o.file)->required();
  dump->add_option("--tensor", o.tensor, "canonical tensor name (see the tensor table)")
      ->required();
  dump->add_option("-o,--output", o.output, "output .npy path ('-': standard output)")
      ->required();
  dump->footer("Example:\n  cact-inspect dump model.cact --tensor layer00.q_proj -o q.npy");

  auto* tokens = app.add_subcommand("tokens", "list the tokenizer pieces");
  tokens->add_option("file", o.file)->required();
  tokens->add_flag("--json", o.json, "JSON array");
  tokens->footer("Example:\n  cact-inspect tokens model.cact --json");

  app.footer("Examples:\n  cact-inspect model.cact\n  cact-inspect verify model.cact\n"
             "Every subcommand has its own --help; docs/cact-inspect.md has the details.");

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  if (auto code = cact::tools::ParseCommandLine(app, reversed)) return *code;
  if (*info) return cact::inspect::RunInfo(o);
  if (*verify) return cact::inspect::RunVerify(o);
  if (*diff) return cact::inspect::RunDiff(o);
  if (*dump) return cact::inspect::RunDump(o);
  if (*tokens) return cact::inspect::RunTokens(o);
  return 2;
}
