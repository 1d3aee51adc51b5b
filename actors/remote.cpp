#include "actors/remote.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <fstream>
#include <stdexcept>

namespace orzo {
namespace {

bool uses_tls(caf::actor_system& sys) { return sys.has_openssl_manager(); }

void check_readable(const std::string& what, const std::string& path) {
  if (path.empty()) throw std::invalid_argument("TLS needs a certificate, its key and a CA file; the " + what + " is missing");
  if (!std::ifstream(path)) throw std::invalid_argument("TLS " + what + " '" + path + "' cannot be read");
}

}  // namespace

void load_middleman(caf::actor_system_config& cfg, const TlsFiles& tls) {
  cfg.load<caf::io::middleman>();
  if (!tls.enabled() && tls.key.empty() && tls.ca_file.empty()) return;
  check_readable("certificate", tls.certificate);
  check_readable("key", tls.key);
  check_readable("CA file", tls.ca_file);
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = tls.certificate;
  cfg.openssl_key = tls.key;
  cfg.openssl_cafile = tls.ca_file;
}

caf::expected<uint16_t> publish_batcher(caf::actor_system& sys, const batcher_actor& batcher, uint16_t port,
                                        const std::string& host) {
  if (uses_tls(sys)) return caf::openssl::publish(batcher, port, host.c_str(), true);
  return sys.middleman().publish(batcher, port, host.c_str(), true);
}

caf::expected<batcher_actor> connect_to_batcher(caf::actor_system& sys, const std::string& host, uint16_t port) {
  if (uses_tls(sys)) return caf::openssl::remote_actor<batcher_actor>(sys, host, port);
  return sys.middleman().remote_actor<batcher_actor>(host, port);
}

}  // namespace orzo
