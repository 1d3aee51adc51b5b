#include "actors/system_config.hpp"

#include "protocol/register_types.hpp"
#include "stages/placement.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

namespace orzo {

namespace {
// CAF's default, a few µs of polling: what a thread that shares its core with compute may take.
constexpr size_t kSharedCorePolls = 500;
// About a millisecond: idle for longer than the steps of any model whose hand-off costs show.
constexpr size_t kOwnCorePolls = 200'000;
}  // namespace

ProcessThreads engine_threads(const std::string& placement, int32_t replicas, int threads_per_stage) {
  if (threads_per_stage <= 0) return {};
  const int64_t compute = int64_t{threads_per_stage} * count_stages(placement, replicas, "cpu");
  return {0, static_cast<int>(std::min<int64_t>(compute, INT32_MAX))};
}

SchedulerPlan plan_scheduler(const ProcessThreads& threads, int cores) {
  cores = std::max(1, cores);
  const int spare = threads.compute > 0 ? cores - threads.compute - threads.io : 0;
  SchedulerPlan plan;
  plan.threads = static_cast<size_t>(threads.scheduler > 0 ? threads.scheduler : spare > 0 ? spare : cores);
  plan.moderate_polls = spare > 0 && plan.threads <= static_cast<size_t>(spare) ? kOwnCorePolls : kSharedCorePolls;
  return plan;
}

void configure_actor_system(caf::actor_system_config& cfg, const ProcessThreads& threads, const Liveness& liveness) {
  if (liveness.heartbeat_interval.count() <= 0 || liveness.connection_timeout <= liveness.heartbeat_interval)
    throw std::invalid_argument("liveness: the heartbeat interval (" + std::to_string(liveness.heartbeat_interval.count()) +
                                " ms) must be positive and shorter than the connection timeout (" +
                                std::to_string(liveness.connection_timeout.count()) + " ms)");
  register_types(cfg);
  const SchedulerPlan plan = plan_scheduler(threads, static_cast<int>(std::thread::hardware_concurrency()));
  cfg.set("scheduler.max-threads", plan.threads);
  cfg.set("work-stealing.moderate-poll-attempts", plan.moderate_polls);
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(0)});
  cfg.set("middleman.heartbeat-interval", caf::timespan{liveness.heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{liveness.connection_timeout});
}

}  // namespace orzo
