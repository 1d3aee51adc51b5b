// The actor system's threads: the scheduler takes the cores the compute leaves, and polls
// on them; beside compute on every core it sleeps soon (actors/system_config.hpp).
#include "actors/system_config.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <thread>

namespace orzo {
namespace {

TEST(SystemConfig, TheSchedulerTakesTheCoresTheComputeLeavesAndPollsOnThem) {
  const SchedulerPlan left_one = plan_scheduler(ProcessThreads{0, 1}, 2);
  EXPECT_EQ(left_one.threads, 1u);
  const SchedulerPlan left_six = plan_scheduler(ProcessThreads{0, 10}, 16);
  EXPECT_EQ(left_six.threads, 6u);
  EXPECT_EQ(left_six.moderate_polls, left_one.moderate_polls);

  // Compute on every core (0 says so), or more threads than cores: a thread per core, each
  // sleeping after CAF's few µs of polling.
  for (const ProcessThreads every : {ProcessThreads{}, ProcessThreads{0, 2}, ProcessThreads{0, 3}}) {
    const SchedulerPlan plan = plan_scheduler(every, 2);
    EXPECT_EQ(plan.threads, 2u);
    EXPECT_EQ(plan.moderate_polls, 500u);
    EXPECT_GT(left_one.moderate_polls, 100 * plan.moderate_polls);
  }
  // Scheduler threads asked for: as many, polling only where the spare cores hold them all.
  EXPECT_EQ(plan_scheduler(ProcessThreads{2, 0}, 2).threads, 2u);
  EXPECT_EQ(plan_scheduler(ProcessThreads{2, 1}, 2).moderate_polls, 500u);
  EXPECT_EQ(plan_scheduler(ProcessThreads{2, 1}, 4).moderate_polls, left_one.moderate_polls);
  EXPECT_EQ(plan_scheduler(ProcessThreads{0, 1}, 0).threads, 1u);  // a machine that says no cores has one
  // A server's I/O threads take cores too.
  EXPECT_EQ(plan_scheduler(ProcessThreads{0, 1, 1}, 2).moderate_polls, 500u);
  EXPECT_EQ(plan_scheduler(ProcessThreads{0, 1, 1}, 2).threads, 2u);
  EXPECT_EQ(plan_scheduler(ProcessThreads{0, 4, 2}, 8).threads, 2u);
  EXPECT_EQ(plan_scheduler(ProcessThreads{0, 4, 2}, 8).moderate_polls, left_one.moderate_polls);
}

TEST(SystemConfig, AnEngineComputesOnEachOfItsCpuStages) {
  EXPECT_EQ(engine_threads("cpu", 1, 1).compute, 1);
  EXPECT_EQ(engine_threads("cpu*2", 1, 3).compute, 6);
  EXPECT_EQ(engine_threads("cpu", 2, 4).compute, 8);
  EXPECT_EQ(engine_threads("cpu:0-2,remote:2-4", 1, 2).compute, 2);
  EXPECT_EQ(engine_threads("cuda*2", 1, 2).compute, 0);
  EXPECT_EQ(engine_threads("cpu", 1, 0).compute, 0);  // one per core
  EXPECT_EQ(engine_threads("cpu", 1, 1).scheduler, 0);
}

TEST(SystemConfig, ConfiguresTheSchedulerAsPlanned) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const ProcessThreads threads{0, std::max(1, cores - 1)};
  const SchedulerPlan plan = plan_scheduler(threads, cores);
  caf::actor_system_config cfg;
  configure_actor_system(cfg, threads);
  EXPECT_EQ(caf::get_or(cfg, "scheduler.max-threads", size_t{0}), plan.threads);
  EXPECT_EQ(caf::get_or(cfg, "work-stealing.moderate-poll-attempts", size_t{0}), plan.moderate_polls);
  EXPECT_THROW(configure_actor_system(cfg, {}, Liveness{std::chrono::milliseconds(5), std::chrono::milliseconds(5)}),
               std::invalid_argument);
}

}  // namespace
}  // namespace orzo
