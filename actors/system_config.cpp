#include "actors/system_config.hpp"

#include "protocol/register_types.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace orzo {

void configure_actor_system(caf::actor_system_config& cfg, int threads, const Liveness& liveness) {
  if (liveness.heartbeat_interval.count() <= 0 || liveness.connection_timeout <= liveness.heartbeat_interval)
    throw std::invalid_argument("liveness: the heartbeat interval (" + std::to_string(liveness.heartbeat_interval.count()) +
                                " ms) must be positive and shorter than the connection timeout (" +
                                std::to_string(liveness.connection_timeout.count()) + " ms)");
  register_types(cfg);
  const auto hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads > 0 ? threads : hw));
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(0)});
  cfg.set("middleman.heartbeat-interval", caf::timespan{liveness.heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{liveness.connection_timeout});
}

}  // namespace orzo
