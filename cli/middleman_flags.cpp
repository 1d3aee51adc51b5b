#include "cli/middleman_flags.hpp"

#include <CLI/CLI.hpp>

namespace orzo::cli {

void MiddlemanFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--tls-cert", tls.certificate, "Middleman over mutual TLS: this node's PEM certificate (with --tls-key, --tls-ca)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--tls-key", tls.key, "The certificate's PEM private key")->check(CLI::ExistingFile);
  cmd.add_option("--tls-ca", tls.ca_file, "PEM CA that signed the peers' certificates")->check(CLI::ExistingFile);
  cmd.add_option("--heartbeat-ms", heartbeat_ms, "Middleman heartbeat interval")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  cmd.add_option("--connection-timeout-ms", connection_timeout_ms,
                 "Drop a middleman connection silent this long (a dead or hung peer)")
      ->check(CLI::Range(2, 3600000))
      ->capture_default_str();
}

Liveness MiddlemanFlags::liveness() const {
  return Liveness{std::chrono::milliseconds(heartbeat_ms), std::chrono::milliseconds(connection_timeout_ms)};
}

}  // namespace orzo::cli
