#pragma once
// The typed actor interfaces: who accepts which message. Every payload is serializable
// (protocol/*.hpp) and registered by register_types(), so any of these actors may live on
// another node behind the CAF middleman.

#include "protocol/atoms.hpp"
#include "protocol/client_events.hpp"
#include "protocol/finished_event.hpp"
#include "protocol/generation_request.hpp"
#include "protocol/membership.hpp"
#include "protocol/prompt_scores.hpp"
#include "protocol/status.hpp"
#include "protocol/step.hpp"
#include "protocol/token_event.hpp"

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>

namespace orzo {

// A request's own actor: receives its tokens and its end from the batcher, and a cancel
// from its client.
using session_actor = caf::typed_actor<
    caf::reacts_to<PromptScoresEvent>,  // batcher -> session: prompt tokens scored, before any TokenEvent
    caf::reacts_to<TokenEvent>,      // batcher -> session: the next generated token
    caf::reacts_to<FinishedEvent>,   // batcher -> session: the request ended (exactly once)
    caf::reacts_to<cancel_atom>,     // client -> session: stop generating
    // client -> session: the reader fell behind by its window; generate no further for now
    caf::reacts_to<pause_atom>,
    caf::reacts_to<resume_atom>>;    // client -> session: it caught up; go on

// One stage of the pipeline: a layer range on one device.
using worker_actor = caf::typed_actor<
    caf::replies_to<StepRequest>::with<StepResult>,      // batcher (or previous stage) -> worker
    caf::replies_to<describe_atom>::with<WorkerInfo>,    // batcher -> worker: what it serves
    // batcher -> worker, when the following stage (re)joins: delegate steps to it from now on.
    // The handle is untyped because an alias cannot name itself; it is always a worker_actor.
    caf::replies_to<chain_atom, caf::actor>::with<caf::ok_atom>>;

// The one batcher of a model (of all its replicas).
using batcher_actor = caf::typed_actor<
    caf::reacts_to<register_atom, GenerationRequest, session_actor>,  // session -> batcher: admit
    caf::reacts_to<stop_atom, std::string>,                            // session -> batcher: end it now
    // session -> batcher: take the request out of the batch (its KV may go) until resumed
    caf::reacts_to<pause_atom, std::string>,
    caf::reacts_to<resume_atom, std::string>,                          // session -> batcher: batch it again
    caf::reacts_to<step_atom, int32_t>,                                // batcher -> itself: a replica's next step
    // batcher -> itself, recovery_timeout after a replica lost a stage: fail what still waits
    // for it (the number names the recovery, so a later one's deadline is not mistaken for it)
    caf::reacts_to<recover_atom, int32_t, uint64_t>,
    // batcher -> itself, step_timeout after a replica's step began: still in flight, it failed
    caf::reacts_to<watch_atom, int32_t, uint64_t>,
    caf::replies_to<health_atom>::with<ModelHealth>,                   // anyone -> batcher
    caf::replies_to<stats_atom>::with<BatcherStats>,                   // anyone -> batcher
    // worker process -> batcher, before it builds its stage: the KV pool and step size to match
    caf::replies_to<terms_atom>::with<StageTerms>,
    // worker process -> batcher: serve the stage of info's layer range in the first replica that
    // lacks it, or stand by for it while other workers serve it (an orzo invalid_request error
    // when the pipeline has no stage of exactly that range, or the KV pool is short)
    caf::replies_to<join_atom, worker_actor, WorkerInfo>::with<caf::ok_atom>>;

// Where a session delivers text: an application's actor, here or on another node.
using client_actor = caf::typed_actor<
    caf::reacts_to<TextChunk>,       // session -> client: more text, in order
    caf::reacts_to<Completion>>;     // session -> client: the end (exactly once)

}  // namespace orzo
