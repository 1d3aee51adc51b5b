#pragma once
// The actor-system settings orzo runs well with, for the CLI, the examples, the tests, and
// any application that embeds orzo: protocol types registered, the scheduler sized to the
// machine (CAF 0.17 defaults to at least 4 threads even on 2 cores), idle workers that
// wake at once instead of sleeping 50 µs between polls, and middleman heartbeats, without
// which CAF 0.17 never notices a peer that hangs (a request to it only times out).

#include <chrono>

namespace caf {
class actor_system_config;
}

namespace orzo {

// How the middleman tells a live peer from a dead or hung one: each node sends a heartbeat
// every heartbeat_interval, and drops a connection it has heard nothing on for
// connection_timeout; every actor on the far side then goes down (remote_link_unreachable)
// for whoever monitors it. Both ends need heartbeats for either to notice the other.
struct Liveness {
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds connection_timeout{5000};
};

// threads: scheduler threads for event-based actors (sessions, the batcher); 0 means one per
// hardware thread. Workers run detached, on threads of their own. Throws
// std::invalid_argument unless 0 < heartbeat_interval < connection_timeout.
void configure_actor_system(caf::actor_system_config& cfg, int threads = 0, const Liveness& liveness = {});

}  // namespace orzo
