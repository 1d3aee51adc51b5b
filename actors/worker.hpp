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

// Spawns a detached worker over `backend`. `next` is the following stage, or an invalid
// handle when this worker is the last and samples. The worker owns the backend.
worker_actor spawn_worker(caf::actor_system& sys, std::unique_ptr<LayerBackend> backend, std::string device,
                          worker_actor next);

}  // namespace orzo
