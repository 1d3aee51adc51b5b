#pragma once
// Registers every protocol type with an actor system's config. Call it on the config of
// every process that talks to orzo actors, before constructing the actor_system: CAF 0.17
// silently sends empty messages for unregistered types across nodes.

namespace caf {
class actor_system_config;
}

namespace orzo {

void register_types(caf::actor_system_config& cfg);

}  // namespace orzo
