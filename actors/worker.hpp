#pragma once
// A worker: one stage of the pipeline, a layer range on one device, in its own thread.

#include "protocol/interfaces.hpp"

#include <memory>
#include <string>

namespace caf {
class actor_system;
}

namespace orzo {

class LayerBackend;
namespace grammar {
class ConstraintCache;
}

// Where a worker runs. A step blocks the thread that runs it, so a worker either gets a
// thread of its own (the choice for a worker that waits on a device) or shares the actor
// system's scheduler threads. Sharing saves the two thread wake-ups per step that a hand-off
// to a thread of its own costs, which counts when steps are short; but the step then holds a
// scheduler thread, and without one to spare the batcher and the sessions wait behind it, so
// requests arriving under load get their first token later. Steady latency comes first:
// `automatic` shares only when the scheduler has at least three threads. The measurements of
// both ways are in docs/BENCHMARKS.md ("The actor runtime").
enum class WorkerThread { automatic, own, scheduler };

// Spawns a worker over `backend`. `next` is the following stage, or an invalid handle when
// this worker is the last (its backend produces logits: it samples) or when the following
// stage is still to join (the batcher then sends `chain`). The worker owns the backend. `thread` is own or
// scheduler (automatic is the Engine's to resolve; here it means own). `constraints`: the
// last stage's means of holding outputs to their constraints (actors/output_constraints.hpp);
// without it a constrained request fails.
worker_actor spawn_worker(caf::actor_system& sys, std::unique_ptr<LayerBackend> backend, std::string device,
                          worker_actor next, WorkerThread thread,
                          std::shared_ptr<grammar::ConstraintCache> constraints = nullptr);

}  // namespace orzo
