// Files the validator accepts must not crash the engine: micro models stretched to edge
// values that header validation allows (mHC lanes up to 64, head_dim up to 4096, CQ groups up
// to 65536, engram taps/orders up to 64, kv_window 0 with a long max_seq_len) run through
// `cact-run` on both forward paths. Each must exit 0, or 2 with one clear line; never a
// signal (under tests/sanitize.sh, never an ASan report).
//
// REGRESSION cases (bugs found by this test, engine files; they fail until fixed):
//  - RegressionFastPathMhcLanes17 / RegressionFastPathMhcLanes9: engine/fast_forward.cc sizes
//    per-token mHC scratch as `float hp[16]`, `float hpost[16], P[64]` and `double p[64]`
//    while the header allows mhc_lanes up to 64. 17 lanes smash the stack (SIGSEGV in
//    FastForward::PostMix); 9 lanes write 81 floats into P[64] silently (ASan reports it).
//  - RegressionKvCacheHeadDim1024: engine/kv_cache.cc KvCache::Store quantizes a key into
//    `int8_t kq[512]` while head_dim may be up to 4096: SIGSEGV for head_dim 1024.
//  - RegressionKvCacheWindow0MaxSeqLen16M: with kv_window 0 the fast path sizes the KV cache
//    by max_seq_len (up to 2^24): std::bad_alloc escapes and aborts (exit 134).
//  - RegressionFastPathDecodeDModel3 / ...DModel1: d_model 3 (hada_n 4) or 1: the fast path's
//    prefill works but its first decode step corrupts the heap (glibc "double free or
//    corruption" / SIGSEGV in ~FastForward); see docs/reliability.md for the ASan report.
// Fixed: the fast path sizes its mHC scratch, key buffer and FWHT for any lanes, head_dim
// and d_model (heap scratch past the common sizes, scalar FWHT below 16 points), and
// engine/fast_path_limits.h refuses a KV cache over 1 GiB with one clear line and exit 2;
// the reference path runs every case.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "formats/cact/cact_file.h"
#include "formats/cact/writer.h"
#include "reliability/micro_model.h"
#include "support/test_support.h"

namespace cact {
namespace {

using reliability::MicroContents;
using reliability::MicroGeometry;
using reliability::MicroOptions;
using testing::TempDir;
using testing::Tool;

struct EdgeCase {
  std::string name;
  std::function<void(Geometry*, MicroOptions*)> stretch;
};

void PrintTo(const EdgeCase& c, std::ostream* os) { *os << c.name; }

class EngineEdgeGeometry : public ::testing::TestWithParam<EdgeCase> {};

TEST_P(EngineEdgeGeometry, CactRunExitsCleanly) {
  ASSERT_TOOL_BUILT("cact-run");
  Geometry g = MicroGeometry();
  MicroOptions o;
  GetParam().stretch(&g, &o);
  TempDir dir;
  const std::string path = dir / "edge.cact";
  absl::Status written = WriteCact(path, MicroContents(g, o), 0);
  ASSERT_TRUE(written.ok()) << "the validator must accept the edge model: " << written;
  for (const std::string path_opt : {"fast", "ref"}) {
    SCOPED_TRACE("--path " + path_opt);
    auto r = testing::Run(Tool("cact-run") + " " + path + " --path " + path_opt +
                          " --tokens 2,17,30,4,9 -n 8 --temperature 0 -t 1");
    EXPECT_EQ(r.signal, 0);
    // Every case must really run on both paths (not just fail cleanly), except the fast
    // path's 270 GB KV cache, which it must refuse.
    if (GetParam().name != "RegressionKvCacheWindow0MaxSeqLen16M" || path_opt == "ref") {
      EXPECT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);
    } else {
      EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 2000);
    }
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2)
        << "exit " << r.exit_code
        << " (134 = abort, 139 = SIGSEGV through sh): " << r.output.substr(0, 2000);
    if (r.exit_code == 2) {
      std::string out = r.output;
      while (!out.empty() && out.back() == '\n') out.pop_back();
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 0) << out;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Micro, EngineEdgeGeometry,
    ::testing::Values(
        EdgeCase{"Baseline", [](Geometry*, MicroOptions*) {}},
        EdgeCase{"RegressionFastPathMhcLanes9",
                 [](Geometry* g, MicroOptions*) { g->mhc_lanes = 9; }},
        EdgeCase{"RegressionFastPathMhcLanes17",
                 [](Geometry* g, MicroOptions*) { g->mhc_lanes = 17; }},
        EdgeCase{"RegressionKvCacheHeadDim1024",
                 [](Geometry* g, MicroOptions*) {
                   g->head_dim = 1024;
                   g->num_heads = 2;
                   g->num_kv_heads = 1;
                 }},
        EdgeCase{"Group1024", [](Geometry*, MicroOptions* o) { o->groups = {1024}; }},
        EdgeCase{"Group8", [](Geometry*, MicroOptions* o) { o->groups = {8}; }},
        EdgeCase{"OneLane", [](Geometry* g, MicroOptions*) { g->mhc_lanes = 1; }},
        EdgeCase{"RegressionFastPathDecodeDModel3",
                 [](Geometry* g, MicroOptions*) { reliability::ShrinkDModel(g, 3, 4); }},
        EdgeCase{"RegressionFastPathDecodeDModel1",
                 [](Geometry* g, MicroOptions*) { reliability::ShrinkDModel(g, 1, 1); }},
        EdgeCase{"HeadDim2With64Heads",
                 [](Geometry* g, MicroOptions*) {
                   g->head_dim = 2;
                   g->num_heads = 64;
                   g->num_kv_heads = 1;
                 }},
        EdgeCase{"WindowOneKvBits2",
                 [](Geometry* g, MicroOptions*) {
                   g->kv_window = 1;
                   g->kv_bits = 2;
                 }},
        EdgeCase{"SixtyFourTapsOrder64",
                 [](Geometry* g, MicroOptions*) {
                   g->engram_conv_taps = 64;
                   g->engram_orders = {2, 64, 0, 0};
                   g->engram_conv_dilation = 64;
                 }},
        EdgeCase{"FourEngramSitesOneTable",
                 [](Geometry* g, MicroOptions*) {
                   g->num_layers = 4;
                   g->num_engram_sites = 4;
                   g->engram_sites = {0, 1, 2, 3};
                   g->num_engram_orders = 1;
                   g->engram_orders = {1, 0, 0, 0};
                   g->engram_conv_dilation = 1;
                   g->num_engram_tables = 1;
                   g->engram_sub_dim = 16;
                 }},
        EdgeCase{"NoEngramSites",
                 [](Geometry* g, MicroOptions*) {
                   g->num_engram_sites = 0;
                   g->engram_sites = {0, 0, 0, 0};
                 }},
        // kv_window 0 ("size it from the KV budget") with the longest max_seq_len the
        // header allows and wide KV heads: a cache sized by max_seq_len would be ~270 GB.
        EdgeCase{"RegressionKvCacheWindow0MaxSeqLen16M",
                 [](Geometry* g, MicroOptions*) {
                   g->kv_window = 0;
                   g->max_seq_len = 1u << 24;
                   g->num_heads = 8;
                   g->num_kv_heads = 8;
                   g->head_dim = 512;
                 }}),
    [](const ::testing::TestParamInfo<EdgeCase>& i) { return i.param.name; });

}  // namespace
}  // namespace cact
