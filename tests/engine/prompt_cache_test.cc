// The prompt cache file: a prefix state written by one PrefixReuse and read by another (as
// by two processes) continues bit-identically; a file made for anything else (model, path,
// window and sink, hidden states, build, state version) or damaged in any byte is rebuilt,
// never used; a file that is not a prompt cache is refused and left as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/forward_paths.h"
#include "engine/generate/prefix_reuse.h"
#include "engine/generate/prompt_cache.h"
#include "engine/text/tokenizer.h"
#include "engine/toolcall/tool_call_runner.h"
#include "engine/toolcall/tool_retrieval.h"
#include "engine_test_util.h"
#include "lib/byte_io.h"
#include "lib/sha256.h"

namespace cact::testing {
namespace {

using Entries = std::list<PromptCache::Entry>;

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with any header text and entry bytes, its checksum right.
std::string FileWith(const std::string& header, const std::string& entries) {
  ByteWriter body;
  body.Put(uint32_t(header.size()));
  body.PutBytes(header);
  body.PutBytes(entries);
  const auto sum = Sha256Digest(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(body.bytes().data()), body.size()));
  ByteWriter file;
  file.PutBytes(PromptCache::kMagic);
  file.Put(PromptCache::kFormatVersion);
  file.PutArray(std::span<const uint8_t>(sum));
  file.PutBytes(body.bytes());
  return file.bytes();
}

const PromptCacheKey kKey{.model_sha256 = std::string(64, 'a'),
                          .path = "fast",
                          .window = 0,
                          .sink = 4,
                          .keep_hidden = false};

TEST(PromptCache, StatesCarryOverBetweenProcessesBitIdentically) {
  TempDir tmp;
  const std::string file = tmp / "tools.prompt-cache";
  for (const char* path : {"fast", "ref"}) {
    std::filesystem::remove(file);
    const Model& model = FixtureModel("tiny");
    const std::vector<int32_t> all = FixtureTokens("tiny", "s2");
    const size_t p = all.size() / 2;
    const std::span<const int32_t> prefix(all.data(), p), rest(all.data() + p, all.size() - p);
    ForwardOptions opt;
    opt.attn = {0, uint32_t(p)};
    opt.threads = 2;
    opt.keep_hidden = true;

    // Without reuse.
    absl::StatusOr<std::unique_ptr<Forward>> plain = MakeForwardPath(model, path, opt);
    ASSERT_TRUE(plain.ok());
    std::vector<float> want, got;
    ASSERT_TRUE((*plain)->Feed(all, nullptr, false).ok());
    (*plain)->Reset();
    ASSERT_TRUE((*plain)->Feed(prefix, nullptr, false).ok());
    ASSERT_TRUE((*plain)->Feed(rest, &want, true).ok());

    // Process 1 feeds the prefix, writes the file and keeps the state in memory; process 2
    // reads it from the file each time (the file's bytes are its copy).
    const PrefixReuse::Source expected[2][2] = {
        {PrefixReuse::Source::kFed, PrefixReuse::Source::kMemory},
        {PrefixReuse::Source::kFile, PrefixReuse::Source::kFile}};
    for (int process = 0; process < 2; ++process) {
      PromptCache cache(file, "test build");
      PrefixReuse reuse;
      reuse.UseFile(&cache);
      for (int run = 0; run < 2; ++run) {
        absl::StatusOr<Forward*> f = reuse.ForwardFor(model, path, opt);
        ASSERT_TRUE(f.ok());
        absl::StatusOr<PrefixReuse::Source> source = reuse.Start(prefix);
        ASSERT_TRUE(source.ok()) << source.status();
        EXPECT_EQ(*source, expected[process][run]) << path << " process " << process;
        ASSERT_TRUE((*f)->Feed(rest, &got, true).ok());
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * got.size()), 0)
            << path << " process " << process << " run " << run;
      }
      EXPECT_EQ(cache.rebuild_reason(), "");
    }

    // Another build's file is rebuilt, with the reason, and then serves that build.
    PromptCache other(file, "another build");
    PrefixReuse reuse;
    reuse.UseFile(&other);
    ASSERT_TRUE(reuse.ForwardFor(model, path, opt).ok());
    EXPECT_EQ(reuse.Start(prefix).value_or(PrefixReuse::Source::kMemory),
              PrefixReuse::Source::kFed);
    EXPECT_NE(other.rebuild_reason().find("made by another build of cact (test build; this "
                                          "is another build)"),
              std::string::npos)
        << other.rebuild_reason();
    absl::StatusOr<PromptCache::Parsed> parsed = PromptCache::Parse(ReadText(file), file);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->build, "another build");
    EXPECT_EQ(parsed->key.path, (*plain)->name());
    EXPECT_EQ(parsed->key.model_sha256, Sha256Hex(model.file().bytes().span()));
    EXPECT_EQ(parsed->key.sink, 0u);  // the sink is the prefix itself (keyed as 0)
  }
}

TEST(PromptCache, WhatAFileWasMadeForMustMatch) {
  TempDir tmp;
  const std::string file = tmp / "c";
  const Entries entries = {{{1, 2, 3}, "state"}};
  struct Case {
    PromptCacheKey key;
    std::string build, reason;
  };
  PromptCacheKey model = kKey, path = kKey, window = kKey, hidden = kKey;
  model.model_sha256 = std::string(64, 'b');
  path.path = "reference";
  window.window = 16;
  hidden.keep_hidden = true;
  const std::vector<Case> cases = {
      {model, "b", "made for another model (sha256 bbbbbbbbbbbb..., this one aaaaaaaaaaaa...)"},
      {path, "b", "made by the reference path, this run uses fast"},
      {window, "b", "made with window 16 and sink 4, this run uses 0 and sink 4"},
      {hidden, "b", "made with the hidden states this run needs"},
      {kKey, "a", "made by another build of cact (a; this is b)"},
  };
  for (const Case& c : cases) {
    WriteAll(file, PromptCache::Serialize(c.key, c.build, entries));
    PromptCache cache(file, "b");
    ASSERT_TRUE(cache.Load(kKey).ok());
    EXPECT_EQ(cache.rebuild_reason(), c.reason);
    const std::vector<int32_t> ids = {1, 2, 3};
    EXPECT_EQ(cache.Find(ids), nullptr) << c.reason;
  }
  WriteAll(file, PromptCache::Serialize(kKey, "b", entries));
  PromptCache same(file, "b");
  ASSERT_TRUE(same.Load(kKey).ok());
  const std::vector<int32_t> ids = {1, 2, 3}, shorter = {1, 2};
  ASSERT_NE(same.Find(ids), nullptr);
  EXPECT_EQ(*same.Find(ids), "state");
  EXPECT_EQ(same.Find(shorter), nullptr);
}

TEST(PromptCache, DamagedFilesAreRebuiltNeverUsed) {
  TempDir tmp;
  const std::string file = tmp / "c";
  const std::string good =
      PromptCache::Serialize(kKey, "b", {{{7, 8}, "xy"}, {{1, 2, 3}, "state"}});
  const std::vector<int32_t> ids = {1, 2, 3};
  auto outcome = [&](const std::string& bytes) {
    WriteAll(file, bytes);
    PromptCache cache(file, "b");
    const absl::Status st = cache.Load(kKey);
    if (!st.ok()) return std::string("refused: ") + std::string(st.message());
    if (cache.Find(ids)) return std::string("used");
    return "rebuilt: " + cache.rebuild_reason();
  };
  ASSERT_EQ(outcome(good), "used");
  // Every truncation, and every byte changed.
  for (size_t cut = 1; cut < good.size(); ++cut) {
    const std::string o = outcome(good.substr(0, cut));
    EXPECT_TRUE(o.starts_with(cut < 8 ? "refused" : "rebuilt")) << cut << ": " << o;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x20);
    const std::string o = outcome(bad);
    EXPECT_TRUE(o.starts_with(i < 8 ? "refused" : "rebuilt")) << i << ": " << o;
  }
  EXPECT_EQ(outcome(good + "z"), "rebuilt: " + file +
                                     ": checksum at offset 12: the SHA-256 of the bytes after it "
                                     "does not match (damaged or truncated)");
  std::string version = good;
  version[8] = 2;
  EXPECT_EQ(outcome(version),
            "rebuilt: " + file + ": format version at offset 8: 2, this build reads 1");

  // Structure behind a right checksum.
  ByteWriter one;
  one.Put(uint32_t(1));
  one.Put(uint32_t(3));
  one.PutArray(std::span<const int32_t>(ids));
  one.Put(uint64_t(5));
  one.PutBytes("state");
  const std::string header = R"({"model_sha256":")" + std::string(64, 'a') +
                             R"(","path":"fast","window":0,"sink":4,"keep_hidden":false,)"
                             R"("state_version":)" +
                             std::to_string(kForwardStateVersion) + R"(,"build":"b"})";
  ASSERT_EQ(outcome(FileWith(header, one.bytes())), "used");
  EXPECT_EQ(outcome(FileWith(header, one.bytes() + "!")),
            "rebuilt: " + file + ": end at offset " +
                std::to_string(44 + 4 + header.size() + one.size()) +
                ": 1 bytes after the last entry");
  EXPECT_EQ(outcome(FileWith("[1, 2]", one.bytes())),
            "rebuilt: " + file +
                ": header at offset 48: not a JSON object with model_sha256, path, window, "
                "sink, keep_hidden, state_version and build");
  std::string v2 = header;
  const std::string current = "\"state_version\":" + std::to_string(kForwardStateVersion);
  v2.replace(v2.find(current), current.size(), "\"state_version\":0");
  EXPECT_EQ(outcome(FileWith(v2, one.bytes())),
            "rebuilt: state version 0, this build writes " + std::to_string(kForwardStateVersion));
  ByteWriter nine;
  nine.Put(uint32_t(9));
  EXPECT_EQ(outcome(FileWith(header, nine.bytes())),
            "rebuilt: " + file + ": entry count at offset " + std::to_string(48 + header.size()) +
                ": 9, at most 8");
  ByteWriter huge;
  huge.Put(uint32_t(1));
  huge.Put(uint32_t(0xFFFFFFFF));
  EXPECT_TRUE(outcome(FileWith(header, huge.bytes())).find("prefix ids") != std::string::npos);
  ByteWriter long_state;
  long_state.Put(uint32_t(1));
  long_state.Put(uint32_t(0));
  long_state.Put(uint64_t(1) << 62);
  EXPECT_TRUE(outcome(FileWith(header, long_state.bytes())).find("state at offset") !=
              std::string::npos);
}

TEST(PromptCache, WhatIsNotAPromptCacheIsRefusedAndKept) {
  TempDir tmp;
  const std::string model = std::string(CACT_FIXTURES_DIR) + "/tiny/model.cact";
  const std::string copy = tmp / "model.cact";
  std::filesystem::copy_file(model, copy);
  const std::string before = ReadText(copy);
  PromptCache cache(copy, "b");
  const absl::Status st = cache.Load(kKey);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), copy +
                              ": not a cact prompt cache (it does not start with "
                              "\"CACTPCF\\n\"); give --prompt-cache a new file name");
  EXPECT_TRUE(ReadText(copy) == before);
  EXPECT_FALSE(cache.Store(std::vector<int32_t>{1}, "s").ok());  // not read: never written
  EXPECT_TRUE(ReadText(copy) == before);

  PromptCache dir(tmp.path(), "b");
  EXPECT_EQ(dir.Load(kKey).message(), tmp.path() + ": --prompt-cache is not a regular file");

  // An empty file (mktemp) is an empty cache.
  const std::string empty = tmp / "empty";
  WriteAll(empty, "");
  PromptCache e(empty, "b");
  ASSERT_TRUE(e.Load(kKey).ok());
  EXPECT_EQ(e.rebuild_reason(), "");
  ASSERT_TRUE(e.Store(std::vector<int32_t>{1}, "s").ok());
  EXPECT_TRUE(PromptCache::Parse(ReadText(empty), empty).ok());
}

TEST(PromptCache, KeepsTheMostRecentEntries) {
  TempDir tmp;
  const std::string file = tmp / "c";
  {
    PromptCache cache(file, "b");
    ASSERT_TRUE(cache.Load(kKey).ok());
    for (int32_t i = 0; i < 10; ++i) {
      ASSERT_TRUE(cache.Store(std::vector<int32_t>{i}, "state " + std::to_string(i)).ok());
      ASSERT_TRUE(cache.Find(std::vector<int32_t>{0}));  // 0 stays the most recently used
    }
  }
  PromptCache cache(file, "b");
  ASSERT_TRUE(cache.Load(kKey).ok());
  EXPECT_NE(cache.Find(std::vector<int32_t>{0}), nullptr);
  EXPECT_EQ(cache.Find(std::vector<int32_t>{1}), nullptr);  // the least recently used
  EXPECT_EQ(cache.Find(std::vector<int32_t>{2}), nullptr);
  for (int32_t i = 3; i < 10; ++i) EXPECT_NE(cache.Find(std::vector<int32_t>{i}), nullptr) << i;
  // Storing a prefix again replaces it.
  ASSERT_TRUE(cache.Store(std::vector<int32_t>{5}, "new").ok());
  EXPECT_EQ(*cache.Find(std::vector<int32_t>{5}), "new");
  EXPECT_EQ(PromptCache::Parse(ReadText(file), file)->entries.size(), 8u);
}

// A model with probe heads (the odd fixture: contrastive and confidence): the file keeps the
// heads' pool of the prefix instead of its lane means, and the confidence of a call is the
// same bits whether the prefix was fed, restored in memory or loaded; it agrees with the
// one-pass head over the same tokens to float rounding (the blocks reorder the sums).
TEST(PromptCache, ProbeHeadsGiveTheSameBitsFromThePrefixPool) {
  TempDir tmp;
  const std::string file = tmp / "odd.pc";
  const Model& model = FixtureModel("odd");
  ASSERT_FALSE(model.probe_heads().empty());
  ToolCallRequest req;
  req.run.model = &model;
  absl::StatusOr<Tokenizer> tok = Tokenizer::FromBytes(model.file().tokenizer_blob(), "odd");
  ASSERT_TRUE(tok.ok());
  req.run.tokenizer = &*tok;
  req.run.path = "fast";
  req.run.threads = 2;
  req.run.max_new_tokens = 24;
  req.tools_file = "tools";
  req.tools_json =
      R"([{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}])";
  req.query = "What is the weather in Oslo?";
  absl::StatusOr<ToolCallResult> plain = RunToolCall(req);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(plain->confidence.has_value());
  ASSERT_TRUE(plain->run.probes.has_value());

  std::vector<int32_t> fed = plain->run.prompt_ids;
  fed.insert(fed.end(), plain->run.generated_ids.begin(),
             plain->run.generated_ids.begin() + plain->run.timings.decode_steps);
  absl::StatusOr<CallConfidence> one_pass = ScoreCallConfidence(model, "fast", fed);
  ASSERT_TRUE(one_pass.ok()) << one_pass.status();
  EXPECT_NEAR(*plain->confidence, one_pass->probability, 1e-5);

  uint64_t file_bytes = 0;
  for (int process = 0; process < 2; ++process) {
    PromptCache cache(file, "b");
    PrefixReuse reuse;
    reuse.UseFile(&cache);
    for (int run = 0; run < 2; ++run) {
      ToolCallRequest r = req;
      r.run.prefix_reuse = &reuse;
      absl::StatusOr<ToolCallResult> got = RunToolCall(r);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->run.prefix_from_file, process == 1) << process << " " << run;
      EXPECT_EQ(got->run.generated_ids, plain->run.generated_ids);
      const float want_c = plain->run.probes->confidence, got_c = got->run.probes->confidence;
      EXPECT_EQ(std::memcmp(&want_c, &got_c, 4), 0)
          << "process " << process << " run " << run << ": " << got_c << " vs " << want_c;
      EXPECT_EQ(got->run.probes->retrieval, plain->run.probes->retrieval);
    }
    file_bytes = cache.file_bytes();
  }
  // The lane means of the prefix are not in the file: it holds less than they would.
  const size_t prefix = plain->run.sink;
  EXPECT_LT(file_bytes, prefix * model.num_layers() * model.d_model() * 4);
}

}  // namespace
}  // namespace cact::testing
