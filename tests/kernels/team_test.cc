// kernels::Team: every member runs each job once, barriers order the members' writes, and
// the oversubscription fallback (team.h) switches to the caller alone after kBusyRuns runs
// in which the caller mostly waited, for kSoloRuns runs, then retries and backs off. The
// "mostly waited" runs are made deterministic with a member that sleeps before the barrier
// (what a descheduled partner looks like to the caller).
#include "engine/kernels/team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace cact::kernels {
namespace {

// Jobs are written for any member count (the fallback may run them as fn(0, 1)): member
// `me` of `nt` handles items me, me + nt, ...
TEST(Team, EveryItemIsDoneOnceAndBarriersOrderWrites) {
  Team team(3);
  ASSERT_EQ(team.size(), 3u);
  std::vector<int> slot(3, 0), seen(3, 0);
  for (int run = 1; run <= 50; ++run) {
    std::atomic<int> members{0};
    uint32_t width = 0;
    team.Run([&](uint32_t me, uint32_t nt) {
      ASSERT_TRUE(nt == 3 || (nt == 1 && me == 0)) << me << " of " << nt;
      if (me == 0) width = nt;
      ++members;
      for (uint32_t k = me; k < 3; k += nt) slot[k] = run;  // phase 1: own slots
      team.Barrier();
      for (uint32_t k = me; k < 3; k += nt) {  // phase 2: read every slot
        int sum = 0;
        for (int v : slot) sum += v;
        seen[k] = sum;
      }
    });
    EXPECT_EQ(members.load(), int(width)) << "run " << run;
    for (int s : seen) EXPECT_EQ(s, 3 * run) << "run " << run;
  }
}

TEST(Team, OneThreadRunsTheCallerOnly) {
  Team team(1);
  int calls = 0;
  team.Run([&](uint32_t me, uint32_t nt) {
    EXPECT_EQ(me, 0u);
    EXPECT_EQ(nt, 1u);
    team.Barrier();  // a no-op
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(Team, OversubscribedRunsFallBackToTheCallerThenRetry) {
  Team team(2);
  std::atomic<int> parallel_runs{0}, solo_calls{0};
  // Member 1 "is descheduled" for 3 ms before the barrier; the caller waits for it.
  auto job = [&](uint32_t me, uint32_t nt) {
    if (nt == 1) {
      ++solo_calls;
      team.Barrier();  // must not block with one member
      return;
    }
    if (me == 0) ++parallel_runs;
    if (me == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    team.Barrier();
  };
  for (uint32_t i = 0; i < Team::kBusyRuns; ++i) team.Run(job);
  EXPECT_EQ(parallel_runs.load(), int(Team::kBusyRuns));
  EXPECT_EQ(solo_calls.load(), 0);
  // Now kSoloRuns runs on the caller alone.
  for (uint32_t i = 0; i < Team::kSoloRuns; ++i) team.Run(job);
  EXPECT_EQ(solo_calls.load(), int(Team::kSoloRuns));
  EXPECT_EQ(team.solo_runs(), Team::kSoloRuns);
  // Then parallel again; still busy, so after kBusyRuns the solo stretch is twice as long.
  for (uint32_t i = 0; i < Team::kBusyRuns; ++i) team.Run(job);
  EXPECT_EQ(parallel_runs.load(), int(2 * Team::kBusyRuns));
  for (uint32_t i = 0; i < 2 * Team::kSoloRuns; ++i) team.Run(job);
  EXPECT_EQ(solo_calls.load(), int(3 * Team::kSoloRuns));
  team.Run(job);
  EXPECT_EQ(parallel_runs.load(), int(2 * Team::kBusyRuns + 1));
}

}  // namespace
}  // namespace cact::kernels
