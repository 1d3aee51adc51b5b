#pragma once
// The actor-system settings orzo runs well with, for the CLI, the examples, the tests, and
// any application that embeds orzo: protocol types registered, the scheduler sized to the
// machine (CAF 0.17 defaults to at least 4 threads even on 2 cores), idle scheduler threads
// that poll instead of sleeping 50 µs between polls, and middleman heartbeats, without which
// CAF 0.17 never notices a peer that hangs (a request to it only times out).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

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

// The threads of a process that runs orzo's actors.
struct ProcessThreads {
  int scheduler = 0;  // for the event-based actors (sessions, the batcher); 0: see plan_scheduler
  int compute = 0;    // that the process's CPU workers compute on, all told; 0: one per core
  int io = 0;         // of the process's own that serve its clients (orzo serve's HTTP I/O threads)
};

// A process whose engine runs `placement` (stages/placement.hpp) in `replicas` copies, with
// `threads_per_stage` compute threads (0: one per core) on each of its CPU stages.
ProcessThreads engine_threads(const std::string& placement, int32_t replicas, int threads_per_stage);

// The actor scheduler for `threads` on a machine of `cores`. Where the compute and the I/O
// threads leave cores free, the scheduler takes them (unless told its number) and its idle
// threads keep polling for about a millisecond before they sleep, so that a worker's reply to
// a step finds the batcher's thread awake: waking a sleeping one cost the worker ~15 µs a step
// on a 2-core VM (a futex, and an interrupt to a halted core), a third of a small model's step
// (docs/BENCHMARKS.md, "The actor path with a core of its own"). Where they take every core, a
// polling thread would take time from them, so idle threads sleep after a few µs and the
// scheduler has a thread per core, as the actors' work comes between the steps. (A server's
// I/O threads count: on 2 cores with -t 1, one scheduler thread polling beside the HTTP
// thread cut `orzo serve`'s 64 streams from 44k to 31-36k tokens/s.)
struct SchedulerPlan {
  size_t threads = 1;
  size_t moderate_polls = 0;  // CAF's work-stealing.moderate-poll-attempts, ~5 ns each
};
SchedulerPlan plan_scheduler(const ProcessThreads& threads, int cores);

// Throws std::invalid_argument unless 0 < heartbeat_interval < connection_timeout.
void configure_actor_system(caf::actor_system_config& cfg, const ProcessThreads& threads = {},
                            const Liveness& liveness = {});

}  // namespace orzo
