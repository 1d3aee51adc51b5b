#pragma once
// Publishing the batcher and reaching it from another process, over the CAF middleman in
// plain TCP or, with certificates, over CAF's OpenSSL module (mutual TLS: each side proves
// itself with a certificate signed by the CA file the other trusts). The middleman has no
// authentication of its own: whoever reaches a published port can send any message the
// batcher accepts, so plain publishing stays on loopback unless told otherwise.

#include "protocol/interfaces.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace orzo {

// PEM files for mutual TLS; all three or none.
struct TlsFiles {
  std::string certificate;  // this node's certificate
  std::string key;          // its private key
  std::string ca_file;      // the CA that signed the peers' certificates
  bool enabled() const { return !certificate.empty(); }
};

// Loads the middleman, and the OpenSSL module when `tls` is enabled, into cfg (before the
// actor_system is built). Throws std::invalid_argument when only some of the TLS files are
// given or one cannot be read.
void load_middleman(caf::actor_system_config& cfg, const TlsFiles& tls);

// Publishes `batcher` on host:port (port 0: any free one) and returns the port. TLS when the
// system was configured with it.
caf::expected<uint16_t> publish_batcher(caf::actor_system& sys, const batcher_actor& batcher, uint16_t port,
                                        const std::string& host = "127.0.0.1");

// The batcher published at host:port, through TLS when the system was configured with it.
caf::expected<batcher_actor> connect_to_batcher(caf::actor_system& sys, const std::string& host, uint16_t port);

}  // namespace orzo
