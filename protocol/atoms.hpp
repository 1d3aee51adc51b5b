#pragma once
// Every atom orzo sends, in one place so that collisions are visible. CAF 0.17 atoms hold at
// most 10 characters from [0-9A-Za-z_]; anything else silently becomes a space.

#include <caf/atom.hpp>

namespace orzo {

using register_atom = caf::atom_constant<caf::atom("register")>;  // session -> batcher: admit a request
using stop_atom = caf::atom_constant<caf::atom("stop")>;          // session -> batcher: end a request now
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;      // client -> session: the client gave up
using pause_atom = caf::atom_constant<caf::atom("pause")>;        // client -> session -> batcher: the reader fell behind
using resume_atom = caf::atom_constant<caf::atom("resume")>;      // client -> session -> batcher: it reads again
using step_atom = caf::atom_constant<caf::atom("step")>;          // batcher -> itself: plan the next step
using health_atom = caf::atom_constant<caf::atom("health")>;      // anyone -> batcher: is the model serving?
using stats_atom = caf::atom_constant<caf::atom("stats")>;        // anyone -> batcher: counters for metrics
using describe_atom = caf::atom_constant<caf::atom("describe")>;  // batcher -> worker: range, device, KV
using terms_atom = caf::atom_constant<caf::atom("terms")>;        // worker process -> batcher: what must a stage hold?
using join_atom = caf::atom_constant<caf::atom("join")>;          // worker process -> batcher: serve a missing stage
using chain_atom = caf::atom_constant<caf::atom("chain")>;        // batcher -> worker: pass steps on to this stage
using recover_atom = caf::atom_constant<caf::atom("recover")>;    // batcher -> itself: a recovery's deadline
using watch_atom = caf::atom_constant<caf::atom("watch")>;        // batcher -> itself: is a step past step_timeout?

// The category of orzo's errors in caf::error values (worker replies, refused requests).
inline constexpr caf::atom_value orzo_error_category = caf::atom("orzo");

}  // namespace orzo
