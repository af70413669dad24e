// The training corpus: discovery and its filters on a temporary tree, the content-only split,
// the manifest and every way reproduction can fail, token streams against libsentencepiece's
// Python binding and the unigram baseline against a numpy oracle.
#include "train/corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/sentencepiece_model.h"
#include "lib/sha256.h"
#include "support/test_support.h"
#include "train/corpus_manifest.h"
#include "train/corpus_tokens.h"
#include "train/training_data.h"

namespace cact::train {
namespace {

using ::cact::testing::Python;
using ::cact::testing::TempDir;
namespace fs = std::filesystem;

void Put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}
std::string Get(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
std::string Sha(const std::string& s) {
  return Sha256Hex({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}
std::vector<std::string> Paths(const std::vector<Document>& docs) {
  std::vector<std::string> out;
  for (const Document& d : docs) out.push_back(d.path);
  return out;
}

Tokenizer SmallTokenizer() {
  auto blob =
      ReadSentencePieceModel(std::string(CACT_SOURCE_DIR) + "/quant/data/small_tokenizer.model");
  EXPECT_TRUE(blob.ok()) << blob.status();
  auto tok = Tokenizer::FromBlob(std::move(*blob));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(*tok);
}

// A tree with one file for every rule of discovery.
struct Tree {
  TempDir dir;
  std::string root = dir / "root";
  CorpusFilter filter;
  Tree() {
    Put(root + "/pkg-b/copyright", "Copyright 2020 B.\nLicensed under the MIT license.\n");
    Put(root + "/pkg-a/README.md", "# A\n\nReadme of a.\n");
    Put(root + "/pkg-a/copyright", "Copyright 2019 A.\n");
    Put(root + "/pkg-c/copyright", "Copyright 2019 A.\n");  // duplicate of pkg-a's: dropped
    Put(root + "/pkg-a/notes.txt", std::string("text with a NUL \0 byte\n", 23));
    Put(root + "/pkg-a/latin1.txt", "caf\xe9\n");  // ISO-8859-1, not UTF-8
    Put(root + "/pkg-a/README.Debian.gz", "gzip is skipped by name\n");
    Put(root + "/pkg-a/blank.txt", "\n  \n\t\r\n");
    Put(root + "/pkg-a/big.txt", std::string(3000, 'x') + "\n");
    Put(root + "/pkg-a/main.c", "int main() {}\n");                 // no pattern matches
    Put(root + "/pkg-a/changelogs/CHANGELOG_V1.md", "## 1.0.0\n");  // excluded
    Put(root + "/pkg-a/NEWS", "Version 1.0: first release.\n");
    Put(root + "/licenses/GPL-x", "GNU GENERAL PUBLIC LICENSE X\n");  // whole directory
    Put(root + "/licenses/sub/GPL-y", "not directly in the whole directory\n");
    Put(dir / "outside/copyright", "Reached only through a symlink.\n");
    Put(dir / "outside/README", "Reached only through a file symlink.\n");
    fs::create_directory_symlink(dir / "outside", root + "/pkg-link");
    fs::create_symlink(dir / "outside/README", root + "/pkg-a/README");
    filter.whole_dirs = {root + "/licenses/"};
    filter.max_bytes = 2048;
  }
};

TEST(CorpusDiscovery, KeepsSortedTextAndDropsEveryRejectedKind) {
  Tree t;
  DiscoveryStats stats;
  auto docs = CollectDocuments({t.root}, t.filter, &stats);
  ASSERT_TRUE(docs.ok()) << docs.status();
  const std::vector<std::string> want = {t.root + "/licenses/GPL-x", t.root + "/pkg-a/NEWS",
                                         t.root + "/pkg-a/README.md", t.root + "/pkg-a/copyright",
                                         t.root + "/pkg-b/copyright"};
  EXPECT_EQ(Paths(*docs), want);
  EXPECT_EQ(stats.kept, 5u);
  EXPECT_EQ(stats.excluded, 1u);
  EXPECT_EQ(stats.duplicates, 1u);
  EXPECT_EQ(stats.binary, 1u);
  EXPECT_EQ(stats.not_utf8, 1u);
  EXPECT_EQ(stats.compressed, 1u);
  EXPECT_EQ(stats.empty, 1u);
  EXPECT_EQ(stats.too_large, 1u);
  EXPECT_EQ(stats.symlinks, 2u);
  EXPECT_EQ((*docs)[2].text, "# A\nReadme of a.\n");  // blank line dropped
  EXPECT_EQ((*docs)[3].sha256, Sha("Copyright 2019 A.\n"));
  EXPECT_EQ((*docs)[3].bytes, 18u);
}

TEST(CorpusDiscovery, OrderDoesNotDependOnTheRootsOrder) {
  Tree t;
  auto ab = CollectDocuments({t.root + "/pkg-a", t.root + "/pkg-b"}, t.filter);
  auto ba = CollectDocuments({t.root + "/pkg-b", t.root + "/pkg-a", t.root + "/pkg-a"}, t.filter);
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_EQ(Paths(*ab), Paths(*ba));
  EXPECT_EQ(ab->size(), 4u);
}

TEST(CorpusDiscovery, AFileGivenExplicitlyIsACandidateWhateverItsName) {
  Tree t;
  auto docs = CollectDocuments({t.root + "/pkg-a/main.c", t.root + "/pkg-a/notes.txt"}, t.filter);
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_EQ(Paths(*docs), std::vector<std::string>{t.root + "/pkg-a/main.c"});
  auto missing = CollectDocuments({t.root + "/nope"}, t.filter);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nope"), std::string::npos);
}

TEST(CorpusText, NormalisationDropsBlankLinesAndCarriageReturns) {
  // Kept lines stay verbatim (trailing space, a form feed before text).
  EXPECT_EQ(NormalizeText("a\r\n\n  \t\nb \n\f\v\n\fc"), "a\nb \n\fc\n");
  EXPECT_EQ(NormalizeText(" \n\r\n"), "");
  // Found by fuzz_corpus_manifest: one \r stripped of two left a line that changed again.
  EXPECT_EQ(NormalizeText("o\r\r\n"), "o\n");
  EXPECT_EQ(NormalizeText(""), "");
}

TEST(CorpusText, CollapsedSpacingDropsIndentationAndRuns) {
  const Spacing c = Spacing::kCollapse;
  // Leading, trailing and inner runs of spaces and tabs; a form feed is text, not spacing.
  EXPECT_EQ(NormalizeText("    Copyright:  2001\t\tJane  Doe \t\r\n", c), "Copyright: 2001 Jane Doe\n");
  EXPECT_EQ(NormalizeText("a\n \t \n\tb c\n", c), "a\nb c\n");
  EXPECT_EQ(NormalizeText("x \f  y\n", c), "x \f y\n");
  EXPECT_EQ(NormalizeText("  \n", c), "");
  // A carriage return before trailing spaces goes with them (else normalising again changes it).
  EXPECT_EQ(NormalizeText("a\r \n", c), "a\n");
  EXPECT_EQ(NormalizeText("", c), "");
  // The default keeps a line's spaces as they are.
  EXPECT_EQ(NormalizeText("  a  b\n"), "  a  b\n");
  const std::string once = NormalizeText(" p\t q  \r\r\n\n r", c);
  EXPECT_EQ(once, "p q\nr\n");
  EXPECT_EQ(NormalizeText(once, c), once);
}

TEST(CorpusText, StrictUtf8) {
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  for (const char* bad :
       {"\xe9", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x80", "\xff"})
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
}

TEST(CorpusSplit, KeyIsTheDigestsFirstEightBytesBigEndian) {
  // sha256("abc") = ba7816bf 8f01cfea ...
  EXPECT_EQ(ContentKey(Sha("abc")), 0xba7816bf8f01cfeaull);
  EXPECT_EQ(SplitOf(Sha("abc"), 0xba7816bf8f01cfeaull), Split::kHeldOut);
  EXPECT_EQ(SplitOf(Sha("abc"), 20),
            0xba7816bf8f01cfeaull % 20 == 0 ? Split::kHeldOut : Split::kTrain);
  EXPECT_EQ(SplitOf(Sha("abc"), 1), Split::kHeldOut);
  EXPECT_EQ(SplitOf(Sha("abc"), 0), Split::kTrain);
  int held = 0;
  for (int i = 0; i < 4000; ++i)
    held += SplitOf(Sha("document " + std::to_string(i)), 20) == Split::kHeldOut;
  EXPECT_GT(held, 140);  // 5 % of 4000 = 200
  EXPECT_LT(held, 260);
}

TEST(CorpusSplit, DependsOnlyOnContent) {
  // Contents that land on both sides, each stored under unrelated paths in two trees.
  std::vector<std::string> contents;
  for (int i = 0; contents.size() < 6; ++i) {
    const std::string c = "document number " + std::to_string(i) + "\n";
    const bool held = SplitOf(Sha(c), 20) == Split::kHeldOut;
    const size_t n_held =
        size_t(std::count_if(contents.begin(), contents.end(), [](const std::string& x) {
          return SplitOf(Sha(x), 20) == Split::kHeldOut;
        }));
    if (held ? n_held < 3 : contents.size() - n_held < 3) contents.push_back(c);
  }
  TempDir one, two;
  for (size_t i = 0; i < contents.size(); ++i) {
    // absl::StrCat: GCC 12's -Wrestrict misfires on "literal" + std::string.
    Put(one / absl::StrCat("p", i, "/copyright"), contents[i]);
    Put(two / absl::StrCat("zz/", 9 - i, "/notes-", i, ".txt"), contents[i]);
  }
  auto a = CollectDocuments({one.path()}, {});
  auto b = CollectDocuments({two.path()}, {});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 6u);
  ASSERT_EQ(b->size(), 6u);
  int held = 0;
  for (const Document& da : *a)
    for (const Document& db : *b)
      if (da.sha256 == db.sha256) {
        EXPECT_EQ(da.split, db.split) << da.path << " vs " << db.path;
        held += da.split == Split::kHeldOut;
      }
  EXPECT_EQ(held, 3);
}

TEST(CorpusText, HeldOutTextFileIsTheHeldOutDocumentsInOrder) {
  std::vector<Document> docs = {{"a", 1, "", Split::kHeldOut, "one\n"},
                                {"b", 1, "", Split::kTrain, "two\n"},
                                {"c", 1, "", Split::kHeldOut, "three\n"}};
  TempDir d;
  ASSERT_TRUE(WriteTextFile(d / "heldout.txt", docs, Split::kHeldOut).ok());
  EXPECT_EQ(Get(d / "heldout.txt"), "one\nthree\n");
  EXPECT_EQ(SplitText(docs, Split::kTrain), "two\n");
}

// ---- manifest ----

struct ManifestFixture : ::testing::Test {
  Tree t;
  std::string manifest = t.dir / "corpus.tsv";
  std::vector<Document> docs;
  void SetUp() override {
    t.filter.heldout_modulus = 2;  // both splits in four documents (checked below)
    auto d = CollectDocuments({t.root}, t.filter);
    ASSERT_TRUE(d.ok()) << d.status();
    docs = std::move(*d);
    ASSERT_TRUE(WriteManifest(manifest, ManifestOf(docs)).ok());
  }
  std::string LoadError() {
    auto loaded = LoadCorpusFromManifest(manifest);
    return loaded.ok() ? "loaded" : std::string(loaded.status().message());
  }
};

TEST_F(ManifestFixture, RoundTrip) {
  EXPECT_EQ(Get(manifest).substr(0, 26), "# cact corpus manifest v1\n");
  auto entries = ReadManifest(manifest);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(*entries, ManifestOf(docs));
  auto loaded = LoadCorpusFromManifest(manifest);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), docs.size());
  std::set<Split> splits;
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ((*loaded)[i].path, docs[i].path);
    EXPECT_EQ((*loaded)[i].text, docs[i].text);
    EXPECT_EQ((*loaded)[i].split, docs[i].split);
    splits.insert(docs[i].split);
  }
  EXPECT_EQ(splits.size(), 2u) << "the fixture should hold both splits";
  auto text = FormatManifest(ManifestOf(docs));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, Get(manifest));
}

TEST_F(ManifestFixture, CollapsedSpacingFromDiscoveryAndManifestAlike) {
  Put(t.root + "/pkg-d/copyright", "Files:   *\n  Copyright:\t2021  D.\n");
  t.filter.spacing = Spacing::kCollapse;
  auto found = CollectDocuments({t.root}, t.filter);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(WriteManifest(manifest, ManifestOf(*found)).ok());
  auto loaded = LoadCorpusFromManifest(manifest, Spacing::kCollapse);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), found->size());
  bool seen = false;
  for (size_t i = 0; i < found->size(); ++i) {
    EXPECT_EQ((*loaded)[i].text, (*found)[i].text);
    EXPECT_EQ((*loaded)[i].split, (*found)[i].split);
    if ((*found)[i].path.ends_with("pkg-d/copyright")) {
      EXPECT_EQ((*found)[i].text, "Files: *\nCopyright: 2021 D.\n");
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
  // The manifest pins the files, not the normalisation: the default keeps the spaces.
  auto kept = LoadCorpusFromManifest(manifest);
  ASSERT_TRUE(kept.ok()) << kept.status();
  for (const Document& d : *kept) {
    if (d.path.ends_with("pkg-d/copyright")) {
      EXPECT_EQ(d.text, "Files:   *\n  Copyright:\t2021  D.\n");
    }
  }
}

TEST_F(ManifestFixture, MissingFile) {
  fs::remove(docs[2].path);
  const std::string e = LoadError();
  EXPECT_NE(e.find(manifest + ":4: " + docs[2].path + ": cannot read"), std::string::npos) << e;
}

TEST_F(ManifestFixture, ChangedByte) {
  std::string s = Get(docs[1].path);
  s[0] ^= 1;
  Put(docs[1].path, s);
  const std::string e = LoadError();
  EXPECT_NE(e.find(manifest + ":3: " + docs[1].path + ": sha256 " + Sha(s) +
                   ", the manifest says " + docs[1].sha256),
            std::string::npos)
      << e;
}

TEST_F(ManifestFixture, WrongSize) {
  Put(docs[3].path, Get(docs[3].path) + "more\n");
  std::string e = LoadError();
  EXPECT_NE(
      e.find(manifest + ":5: " + docs[3].path + ": size " + std::to_string(docs[3].bytes + 5) +
             " bytes, the manifest says " + std::to_string(docs[3].bytes)),
      std::string::npos)
      << e;
  Put(docs[3].path, "x");
  e = LoadError();
  EXPECT_NE(e.find(": size 1 bytes"), std::string::npos) << e;
}

TEST(CorpusManifest, MalformedLinesNameTheLineAndField) {
  const std::string h = "# cact corpus manifest v1\n";
  const std::string sha(64, 'a'), good = "train\t5\t" + sha + "\t/x\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "m:1: header"},
      {"# cact corpus manifest v2\n", "m:1: header"},
      {h + "train\t5\t" + sha + "\n", "m:2: line: expected 4 tab-separated fields"},
      {h + good + "\n", "m:3: line"},
      {h + good + "train\t5\t" + sha + "\t/y\textra\n", "m:3: line"},
      {h + "Train\t5\t" + sha + "\t/x\n", "m:2: split"},
      {h + "heldout\t-5\t" + sha + "\t/x\n", "m:2: bytes"},
      {h + "heldout\t05\t" + sha + "\t/x\n", "m:2: bytes"},
      {h + "heldout\t18446744073709551616\t" + sha + "\t/x\n", "m:2: bytes"},
      {h + "heldout\t\t" + sha + "\t/x\n", "m:2: bytes"},
      {h + "train\t5\t" + std::string(64, 'A') + "\t/x\n", "m:2: sha256"},
      {h + "train\t5\t" + sha + "0\t/x\n", "m:2: sha256"},
      {h + "train\t5\t" + sha + "\t\n", "m:2: path"},
      {h + "train\t5\t" + sha + "\t/x\r\n", "m:2: path"},
      {h + good + "heldout\t6\t" + sha + "\t/y\n", "m:3: sha256: same content as line 2"},
      {h + good + "train\t5\t" + std::string(64, 'b') + "\t/x\n", "m:3: path: same path as line 2"},
  };
  for (const auto& [text, want] : cases) {
    auto r = ParseManifest(text, "m");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status() << " for " << text;
  }
  auto ok = ParseManifest(
      h + good + "heldout\t18446744073709551615\t" + std::string(64, 'b') + "\t/y", "m");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].bytes, UINT64_MAX);
  EXPECT_EQ((*ok)[1].split, Split::kHeldOut);
  const std::vector<ManifestEntry> tab = {{Split::kTrain, 1, sha, "/a\tb"}};
  EXPECT_FALSE(FormatManifest(tab).ok());
  auto missing = ReadManifest("/nonexistent/corpus.tsv");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/corpus.tsv"), std::string::npos);
}

// ---- tokens ----

// Documents from the repository's own docs (English text with Unicode), every third held
// out whatever the hashes say, so both streams are never empty.
std::vector<Document> RepoDocs() {
  auto docs = CollectDocuments({std::string(CACT_SOURCE_DIR) + "/docs"}, {});
  EXPECT_TRUE(docs.ok()) << docs.status();
  EXPECT_GE(docs->size(), 6u);
  for (size_t i = 0; i < docs->size(); ++i)
    (*docs)[i].split = i % 3 == 1 ? Split::kHeldOut : Split::kTrain;
  return *docs;
}

void WriteInts(const std::string& path, const std::vector<int32_t>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(int32_t)));
}

TEST(CorpusTokens, StreamsMatchSentencePiecePython) {
  const Tokenizer tok = SmallTokenizer();
  const std::vector<Document> docs = RepoDocs();
  const TokenStreams s = TokenizeDocuments(tok, docs, 2);
  EXPECT_EQ(s.train_docs + s.heldout_docs, docs.size());
  ASSERT_GT(s.heldout_docs, 0u);
  ASSERT_GT(s.train_docs, 0u);
  EXPECT_EQ(TokenizeDocuments(tok, docs, 1).train, s.train);
  TempDir d;
  std::ofstream list(d / "list.txt");
  for (size_t i = 0; i < docs.size(); ++i) {
    Put(d / ("doc" + std::to_string(i)), docs[i].text);
    list << (docs[i].split == Split::kHeldOut ? "heldout " : "train ")
         << d / ("doc" + std::to_string(i)) << "\n";
  }
  list.close();
  Put(d / "heldout.txt", SplitText(docs, Split::kHeldOut));
  WriteInts(d / "train.i32", s.train);
  WriteInts(d / "heldout.i32", s.heldout);
  WriteInts(d / "scored.i32", tok.Encode(SplitText(docs, Split::kHeldOut)));
  const std::string script = R"(
import sys, numpy as np, sentencepiece as spm
d, model = sys.argv[1], sys.argv[2]
sp = spm.SentencePieceProcessor(model_file=model)
streams = {'train': [], 'heldout': []}
for line in open(d + '/list.txt'):
    split, path = line.split()
    streams[split] += sp.encode(open(path, 'rb').read().decode('utf-8')) + [sp.eos_id()]
for split, ids in streams.items():
    got = np.fromfile(d + '/' + split + '.i32', dtype='<i4').tolist()
    assert got == ids, (split, len(got), len(ids))
scored = sp.encode(open(d + '/heldout.txt', 'rb').read().decode('utf-8'))
assert np.fromfile(d + '/scored.i32', dtype='<i4').tolist() == scored, 'scored'
print('same', len(streams['train']), len(streams['heldout']))
)";
  Put(d / "check.py", script);
  const auto r = ::cact::testing::Run(Python() + " " + d / "check.py" + " " + d.path() + " " +
                                      CACT_SOURCE_DIR + "/quant/data/small_tokenizer.model");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "same " + std::to_string(s.train.size()) + " " +
                          std::to_string(s.heldout.size()) + "\n");
}

TEST(CorpusTokens, UnigramSmallCaseByHand) {
  // p(1) = (2 + 1) / (3 + 3), p(2) = (0 + 1) / 6: perplexity sqrt(2 * 6).
  auto p = UnigramPerplexity(std::vector<int32_t>{0, 1, 1}, std::vector<int32_t>{1, 2}, 3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(*p, std::sqrt(12.0), 1e-12);
  EXPECT_FALSE(UnigramPerplexity(std::vector<int32_t>{0}, std::vector<int32_t>{3}, 3).ok());
  EXPECT_FALSE(UnigramPerplexity(std::vector<int32_t>{-1}, std::vector<int32_t>{0}, 3).ok());
  EXPECT_FALSE(UnigramPerplexity(std::vector<int32_t>{0}, std::vector<int32_t>{}, 3).ok());
}

TEST(CorpusTokens, UnigramMatchesNumpyOracle) {
  const Tokenizer tok = SmallTokenizer();
  const std::vector<Document> docs = RepoDocs();
  const TokenStreams s = TokenizeDocuments(tok, docs);
  const std::vector<int32_t> scored = tok.Encode(SplitText(docs, Split::kHeldOut));
  auto ours = UnigramPerplexityOfText(tok, s.train, SplitText(docs, Split::kHeldOut));
  ASSERT_TRUE(ours.ok()) << ours.status();
  TempDir d;
  WriteInts(d / "train.i32", s.train);
  WriteInts(d / "scored.i32", scored);
  const std::string script = R"(
import sys, numpy as np
d, vocab = sys.argv[1], int(sys.argv[2])
train = np.fromfile(d + '/train.i32', dtype='<i4')
held = np.fromfile(d + '/scored.i32', dtype='<i4')
p = (np.bincount(train, minlength=vocab).astype(np.float64) + 1) / (len(train) + vocab)
print(repr(float(np.exp(np.mean(-np.log(p[held]))))))
)";
  Put(d / "oracle.py", script);
  const auto r = ::cact::testing::Run(Python() + " " + d / "oracle.py" + " " + d.path() + " " +
                                      std::to_string(tok.vocab_size()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double oracle = std::stod(r.output);
  EXPECT_NEAR(*ours / oracle, 1.0, 1e-12) << *ours << " vs " << oracle;
  EXPECT_GT(oracle, 20.0);  // a unigram over 512 pieces is far from certain
}

// A word-start piece maps to the piece of its text without the word start where the
// vocabulary has one; every other piece to itself.
TEST(WithoutWordStart, MapsWordStartPiecesToTheirBarePieces) {
  const Tokenizer tok = SmallTokenizer();
  const std::vector<int64_t> bare = WithoutWordStart(tok.blob());
  ASSERT_EQ(bare.size(), size_t(tok.vocab_size()));
  // "doxygen" in a sentence starts with "\u2581d", in a JSON string with "d"
  const std::vector<std::string> in_sentence = tok.EncodeAsPieces("find doxygen");
  const std::vector<std::string> in_json = tok.EncodeAsPieces("\"doxygen");
  ASSERT_EQ(in_sentence.size(), 9u);
  ASSERT_EQ(in_json.size(), 8u);
  ASSERT_EQ(in_sentence[3],
            "\xE2\x96\x81"
            "d");
  ASSERT_EQ(in_json[2], "d");
  const int32_t word_start_d = tok.PieceToId(in_sentence[3]);
  const int32_t bare_d = tok.PieceToId(in_json[2]);
  EXPECT_NE(word_start_d, bare_d);
  EXPECT_EQ(bare[size_t(word_start_d)], bare_d);
  EXPECT_EQ(bare[size_t(bare_d)], bare_d);
  size_t mapped = 0;
  for (size_t i = 0; i < bare.size(); ++i) {
    const std::string& piece = tok.IdToPiece(int32_t(i));
    if (bare[i] == int64_t(i)) continue;
    ++mapped;
    EXPECT_EQ("\xE2\x96\x81" + tok.IdToPiece(int32_t(bare[i])), piece) << i;
  }
  EXPECT_GT(mapped, 20u);  // most short word starts have a bare twin
  EXPECT_EQ(bare[size_t(tok.bos_id())], tok.bos_id());
}

}  // namespace
}  // namespace cact::train
