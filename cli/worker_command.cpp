#include "cli/worker_command.hpp"

#include "actors/engine.hpp"
#include "actors/output_constraints.hpp"
#include "actors/worker.hpp"
#include "cli/cpu_kernels_flag.hpp"
#include "cli/middleman_flags.hpp"
#include "core/load_error.hpp"
#include "protocol/errors.hpp"
#include "runtime/model.hpp"
#include "stages/stage_factory.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace orzo::cli {
namespace {

struct WorkerFlags {
  std::string connect;
  std::string layers;
  std::string device = "cpu";
  std::string model;
  std::string quantize;
  StageOptions knobs;
  bool enforce_eager = false;
  std::string cpu_isa;
  double connect_wait_s = 30;
  MiddlemanFlags middleman;
};

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop = true; }

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

Endpoint parse_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  Endpoint e;
  int port = 0;
  if (colon != std::string::npos && colon > 0) {
    e.host = text.substr(0, colon);
    const std::string digits = text.substr(colon + 1);
    if (!digits.empty() && digits.size() <= 5 && digits.find_first_not_of("0123456789") == std::string::npos)
      port = std::stoi(digits);
  }
  if (port < 1 || port > 65535) throw std::invalid_argument("--connect '" + text + "': expected HOST:PORT");
  e.port = static_cast<uint16_t>(port);
  return e;
}

// Whether something accepts TCP connections at the endpoint now.
bool listening(const Endpoint& where) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(where.host.c_str(), std::to_string(where.port).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (const addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    accepted = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return accepted;
}

// Workers and their batcher start in any order (two terminals, a cluster's units), so a port
// where nothing listens yet is waited for, up to --connect-wait. Once something listens, one
// attempt decides: a peer that is no batcher, or refuses our certificate, stays refused.
batcher_actor connect_when_listening(caf::actor_system& sys, const Endpoint& where, const std::string& at,
                                     double wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  if (!listening(where) && wait_s > 0) {
    std::fprintf(stderr, "orzo worker: waiting up to %gs for the batcher at %s\n", wait_s, at.c_str());
    while (!listening(where) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  auto remote = connect_to_batcher(sys, where.host, where.port);
  if (!remote) throw std::runtime_error("cannot reach the batcher at " + at + ": " + sys.render(remote.error()));
  return *remote;
}

// A synchronous request from this (non-actor) thread; throws with `what` and the error.
template <class Reply, class... Ts>
Reply ask(caf::scoped_actor& self, const batcher_actor& batcher, const std::string& what, Ts&&... xs) {
  Reply out{};
  caf::error failure;
  self->request(batcher, std::chrono::seconds(30), std::forward<Ts>(xs)...)
      .receive([&](Reply& r) { out = std::move(r); }, [&](caf::error& e) { failure = std::move(e); });
  if (failure) {
    const std::string message = error_message(failure);
    throw std::runtime_error(what + ": " + (message.empty() ? self->system().render(failure) : message));
  }
  return out;
}

int run_worker(const WorkerFlags& flags) {
  const Endpoint where = parse_endpoint(flags.connect);
  const std::string at = where.host + ":" + std::to_string(where.port);
  std::string cpu_kernels = select_cpu_kernels(flags.cpu_isa);  // first: it picks the level the next line describes
  cpu_kernels += "; " + quantized_arithmetic(flags.knobs.matmul);
  auto model = Model::load(flags.model, flags.quantize);
  const Stage stage = parse_worker_stage(flags.device, flags.layers, static_cast<int32_t>(model->config().num_layers));
  const LayerRange range = stage.layers;

  caf::actor_system_config cfg;
  configure_actor_system(cfg, engine_threads(stage.device, 1, flags.knobs.threads), flags.middleman.liveness());
  load_middleman(cfg, flags.middleman.tls);
  caf::actor_system sys{cfg};
  const batcher_actor batcher = connect_when_listening(sys, where, at, flags.connect_wait_s);
  caf::scoped_actor self{sys};
  self->monitor(batcher);

  const auto terms = ask<StageTerms>(self, batcher, "the batcher at " + at + " did not say what a stage needs", terms_atom::value);
  StageOptions knobs = flags.knobs;
  knobs.cuda_graphs = !flags.enforce_eager;
  auto backend = make_stage_backend(model, stage, terms, knobs);
  const std::string device = stage.device + ":" + std::to_string(stage.device_index) + " layers " + flags.layers +
                             " (pid " + std::to_string(::getpid()) + ")";
  const WorkerInfo info{device, static_cast<int32_t>(range.begin), static_cast<int32_t>(range.end), backend->kv_blocks()};
  // On the scheduler's threads, which this process has to itself: a detached actor's thread
  // waits for the actor to be destroyed, and once its handle has crossed to the batcher's
  // node, the middleman holds it until after that wait, so shutdown would hang.
  // The last stage samples, and so holds outputs to their constraints, with the model's tokenizer.
  std::shared_ptr<grammar::ConstraintCache> constraints;
  if (range.end == static_cast<int64_t>(model->config().num_layers)) {
    try {
      constraints = output_constraints(Tokenizer::for_model(flags.model), model->config());
    } catch (const LoadError&) {
      // No tokenizer: constrained requests fail, as the worker's log says.
      std::fprintf(stderr, "orzo worker: %s has no tokenizer: requests with an output constraint will fail\n",
                   flags.model.c_str());
    }
  }
  auto worker = spawn_worker(sys, std::move(backend), device, worker_actor{}, WorkerThread::scheduler, constraints);
  try {
    ask<caf::ok_atom>(self, batcher, "the batcher at " + at + " refused the worker", join_atom::value, worker, info);
  } catch (...) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    throw;
  }
  // A join for layers other workers serve is taken as a standby, which the batcher's health
  // lists by the description this worker gave, as it lists the replica a serving one joined.
  // Only for the log line: a batcher that does not answer soon (gone already, which the loop
  // below notices) leaves it "serving".
  std::string role = "serving";
  self->request(batcher, std::chrono::seconds(5), health_atom::value)
      .receive(
          [&](ModelHealth& health) {
            const auto named = [&](const std::vector<WorkerInfo>& workers) {
              return std::any_of(workers.begin(), workers.end(), [&](const WorkerInfo& w) { return w.device == info.device; });
            };
            for (size_t r = 0; r < health.replicas.size(); ++r) {
              if (named(health.replicas[r].standby)) role = "standing by (another worker serves them) for";
              else if (health.replicas.size() > 1 && named(health.replicas[r].workers))
                role = "serving (replica " + std::to_string(r) + ")";
            }
          },
          [](caf::error&) {});
  std::fprintf(stderr, "orzo worker: %s layers %s for the batcher at %s; %s\n", role.c_str(), flags.layers.c_str(),
               at.c_str(), cpu_kernels.c_str());

  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::string gone;
  while (!g_stop && gone.empty())
    self->receive([&](caf::down_msg& dm) { gone = sys.render(dm.reason); },
                  caf::after(std::chrono::milliseconds(100)) >> [] {});
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
  if (!gone.empty()) {
    std::fprintf(stderr, "orzo worker: the batcher at %s went away (%s)\n", at.c_str(), gone.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void add_worker_command(CLI::App& app) {
  auto flags = std::make_shared<WorkerFlags>();
  auto* cmd = app.add_subcommand("worker", "Serve one pipeline stage for a batcher in another process");
  cmd->add_option("--connect", flags->connect, "HOST:PORT where the batcher is published (orzo serve --publish)")->required();
  cmd->add_option("--connect-wait", flags->connect_wait_s,
                  "Seconds to keep trying while nothing listens at --connect (the batcher not started yet)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--layers", flags->layers, "The stage's layers, begin-end, as the batcher's placement names them")
      ->required();
  cmd->add_option("-m,--model", flags->model, "The batcher's model (HF directory or .gguf file)")->required();
  cmd->add_option("--quantize", flags->quantize, "The batcher's --quantize, if it has one");
  cmd->add_option("--device", flags->device, "Where the layers run: cpu, or cuda[:N] for GPU N")->capture_default_str();
  cmd->add_option("-t,--threads", flags->knobs.threads, "CPU threads (0: one per core)")->check(CLI::Range(0, 1024));
  add_matmul_flags(*cmd, flags->knobs.matmul);
  add_kv_cache_dtype_flag(*cmd, flags->knobs.kv_cache_dtype);
  add_cpu_isa_flag(*cmd, flags->cpu_isa);
  cmd->add_option("--gpu-memory-utilization", flags->knobs.gpu_memory_utilization,
                  "With --device cuda: the share of the GPU's memory the stage may fill")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  cmd->add_flag("--enforce-eager", flags->enforce_eager, "With --device cuda: no CUDA graphs");
  flags->middleman.add_to(*cmd);
  cmd->callback([flags] {
    if (const int rc = run_worker(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orzo::cli
