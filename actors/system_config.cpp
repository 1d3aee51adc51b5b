#include "actors/system_config.hpp"

#include "protocol/register_types.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

namespace orzo {

void configure_actor_system(caf::actor_system_config& cfg, int threads) {
  register_types(cfg);
  const auto hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads > 0 ? threads : hw));
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(0)});
}

}  // namespace orzo
