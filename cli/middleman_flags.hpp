#pragma once
// The flags of the subcommands that talk through the CAF middleman (`serve --publish`,
// `worker`): mutual TLS and how fast a dead or hung peer is noticed.

#include "actors/remote.hpp"
#include "actors/system_config.hpp"

namespace CLI {
class App;
}

namespace orzo::cli {

struct MiddlemanFlags {
  TlsFiles tls;
  int heartbeat_ms = 1000;
  int connection_timeout_ms = 5000;

  void add_to(CLI::App& cmd);
  Liveness liveness() const;
};

}  // namespace orzo::cli
