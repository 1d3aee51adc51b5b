#pragma once
// The actor-system settings orzo runs well with, for the CLI, the examples, the tests, and
// any application that embeds orzo: protocol types registered, the scheduler sized to the
// machine (CAF 0.17 defaults to at least 4 threads even on 2 cores), and idle workers that
// wake at once instead of sleeping 50 µs between polls.

namespace caf {
class actor_system_config;
}

namespace orzo {

// threads: scheduler threads for event-based actors (sessions, the batcher); 0 means one per
// hardware thread. Workers run detached, on threads of their own.
void configure_actor_system(caf::actor_system_config& cfg, int threads = 0);

}  // namespace orzo
