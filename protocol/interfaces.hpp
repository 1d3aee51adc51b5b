#pragma once
// The typed actor interfaces: who accepts which message. Every payload is serializable
// (protocol/*.hpp) and registered by register_types(), so any of these actors may live on
// another node behind the CAF middleman.

#include "protocol/atoms.hpp"
#include "protocol/client_events.hpp"
#include "protocol/finished_event.hpp"
#include "protocol/generation_request.hpp"
#include "protocol/health.hpp"
#include "protocol/step.hpp"
#include "protocol/token_event.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>

namespace orzo {

// A request's own actor: receives its tokens and its end from the batcher, and a cancel
// from its client.
using session_actor = caf::typed_actor<
    caf::reacts_to<TokenEvent>,      // batcher -> session: the next generated token
    caf::reacts_to<FinishedEvent>,   // batcher -> session: the request ended (exactly once)
    caf::reacts_to<cancel_atom>>;    // client -> session: stop generating

// The one batcher of a model.
using batcher_actor = caf::typed_actor<
    caf::reacts_to<register_atom, GenerationRequest, session_actor>,  // session -> batcher: admit
    caf::reacts_to<stop_atom, std::string>,                            // session -> batcher: end it now
    caf::reacts_to<step_atom>,                                         // batcher -> itself: next step
    caf::replies_to<health_atom>::with<ModelHealth>,                   // anyone -> batcher
    caf::replies_to<stats_atom>::with<BatcherStats>>;                  // anyone -> batcher

// One stage of the pipeline: a layer range on one device.
using worker_actor = caf::typed_actor<
    caf::replies_to<StepRequest>::with<StepResult>,      // batcher (or previous stage) -> worker
    caf::replies_to<describe_atom>::with<WorkerInfo>>;   // batcher -> worker: what it serves

// Where a session delivers text: an application's actor, here or on another node.
using client_actor = caf::typed_actor<
    caf::reacts_to<TextChunk>,       // session -> client: more text, in order
    caf::reacts_to<Completion>>;     // session -> client: the end (exactly once)

}  // namespace orzo
