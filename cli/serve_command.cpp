#include "cli/serve_command.hpp"

#include "actors/engine.hpp"
#include "actors/system_config.hpp"
#include "cli/engine_flags.hpp"
#include "cli/middleman_flags.hpp"
#include "core/read_file.hpp"
#include "server/access_log.hpp"
#include "server/http_server.hpp"
#include "server/openai_api.hpp"
#include "server/stats_reporter.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/signal_set.hpp>
#include <caf/all.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace orzo::cli {
namespace {

struct ServeFlags {
  EngineFlags engine;
  HttpServerOptions http;
  std::string api_key;
  std::string served_model_name;
  std::string chat_template;  // a file
  std::string tool_call_parser;
  int32_t max_queue = 1024;
  std::optional<int> publish;  // 0: a free port, printed
  std::string publish_host = "127.0.0.1";
  MiddlemanFlags middleman;
  double shutdown_grace = 30;
  double recovery_timeout = 30;
  double stalled_client_timeout = 60;
  double http_timeout = 30;
  double stats_interval = 10;  // seconds; 0: no stats lines
  std::string log_format = "text";
  bool no_webui = false;
};

// One log line, whole: a single write, so lines from the I/O and stats threads never interleave.
void write_log_line(const std::string& line) {
  const std::string out = line + "\n";
  std::fwrite(out.data(), 1, out.size(), stderr);
}

// Set by SIGINT/SIGTERM, waited on by the main thread.
class StopSignal {
 public:
  void raise() {
    std::lock_guard lock(mutex_);
    raised_ = true;
    cv_.notify_all();
  }
  bool raised() {
    std::lock_guard lock(mutex_);
    return raised_;
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return raised_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool raised_ = false;
};

struct Interrupted {};

// A progress bar on a terminal's stderr, redrawn when the percentage moves (elsewhere, as in
// a log file, one line at the end); interrupts a long load when the server is asked to stop.
std::function<void(size_t, size_t)> progress_bar(StopSignal& stop) {
  return [&stop, last = -1, tty = isatty(STDERR_FILENO) == 1](size_t done, size_t total) mutable {
    if (stop.raised()) throw Interrupted{};
    if (!tty) {
      if (done == total) std::fprintf(stderr, "loaded weights: %.1f MiB\n", static_cast<double>(total) / (1 << 20));
      return;
    }
    const int percent = total ? static_cast<int>(done * 100 / total) : 100;
    if (percent == last) return;
    last = percent;
    constexpr int width = 30;
    const int filled = percent * width / 100;
    std::fprintf(stderr, "\rloading weights [%s%s] %3d%% %.1f/%.1f MiB", std::string(filled, '#').c_str(),
                 std::string(width - filled, ' ').c_str(), percent, static_cast<double>(done) / (1 << 20),
                 static_cast<double>(total) / (1 << 20));
    if (done == total) std::fputc('\n', stderr);
  };
}

// Waits up to `limit` for the requests in flight (and those still being prepared) to end.
bool wait_idle(const OpenAIApi& api, const HttpServer& server, std::chrono::duration<double> limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (api.in_flight() > 0 || server.preparing() > 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int run_serve(ServeFlags& f) {
  EngineOptions options = f.engine.engine_options();
  options.scheduler.max_waiting = f.max_queue;
  options.recovery_timeout = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(f.recovery_timeout));
  ApiOptions api_options;
  api_options.served_model_name =
      !f.served_model_name.empty() ? f.served_model_name : f.engine.model.empty() ? "stories260K" : f.engine.model;
  api_options.model_path = options.model;
  api_options.api_key = f.api_key;
  if (api_options.api_key.empty())
    if (const char* key = std::getenv("ORZO_API_KEY")) api_options.api_key = key;
  if (!f.chat_template.empty()) api_options.chat_template = read_file(f.chat_template);
  api_options.webui = !f.no_webui;
  api_options.tool_call_parser = f.tool_call_parser;
  f.http.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.http_timeout * 1000));
  f.http.stalled_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.stalled_client_timeout * 1000));
  const LogFormat log_format = f.log_format == "json" ? LogFormat::json : LogFormat::text;
  f.http.access_log = [log_format](const AccessRecord& record) { write_log_line(access_line(record, log_format)); };

  caf::actor_system_config cfg;
  ProcessThreads threads = f.engine.process_threads();
  threads.io = f.http.threads;
  configure_actor_system(cfg, threads, f.middleman.liveness());
  if (f.publish) load_middleman(cfg, f.middleman.tls);
  caf::actor_system sys{cfg};
  OpenAIApi api(sys, api_options);
  HttpServer server(f.http, [&api](HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
    api.handle(request, std::move(exchange));
  });
  StopSignal stop;
  boost::asio::signal_set signals(server.context(), SIGINT, SIGTERM);
  signals.async_wait([&stop](const boost::system::error_code& ec, int) {
    if (!ec) stop.raise();
  });
  server.start();
  std::fprintf(stderr, "orzo serve: listening on http://%s:%u, loading %s\n", f.http.host.c_str(),
               static_cast<unsigned>(server.port()), options.model.c_str());
  std::fprintf(stderr, "orzo serve: %s\n", f.engine.cpu_kernels().c_str());

  std::unique_ptr<Engine> engine;
  options.on_load_progress = progress_bar(stop);
  try {
    engine = Engine::start(sys, options);
    api.serve(*engine);
  } catch (const Interrupted&) {
    std::fprintf(stderr, "\norzo serve: stopped while loading\n");
    server.stop();
    return 0;
  } catch (...) {
    server.stop();
    throw;
  }
  if (f.publish) {
    auto port = publish_batcher(sys, engine->batcher(), static_cast<uint16_t>(*f.publish), f.publish_host);
    if (!port) {
      server.stop();
      engine->shutdown();
      throw std::runtime_error("cannot publish the batcher on " + f.publish_host + ":" + std::to_string(*f.publish) +
                               ": " + sys.render(port.error()));
    }
    std::fprintf(stderr, "orzo serve: batcher published for actor clients on %s:%u\n", f.publish_host.c_str(),
                 static_cast<unsigned>(*port));
  }
  std::unique_ptr<StatsReporter> stats;
  if (f.stats_interval > 0)
    stats = std::make_unique<StatsReporter>(sys, engine->batcher(), std::chrono::duration<double>(f.stats_interval),
                                            log_format, write_log_line);
  std::fprintf(stderr, "orzo serve: %s\n", kv_pool_text(engine->kv_pool()).c_str());
  std::fprintf(stderr, "orzo serve: ready, serving '%s'\n", api_options.served_model_name.c_str());
  if (api_options.webui)
    std::fprintf(stderr, "orzo serve: chat in a browser at http://%s:%u/\n", f.http.host.c_str(),
                 static_cast<unsigned>(server.port()));

  stop.wait();
  std::fprintf(stderr, "orzo serve: shutting down; %zu requests in flight\n", api.in_flight());
  server.stop_accepting();
  api.drain();
  if (!wait_idle(api, server, std::chrono::duration<double>(f.shutdown_grace))) {
    std::fprintf(stderr, "orzo serve: grace period over, cancelling %zu requests\n", api.in_flight());
    api.cancel_all();
    wait_idle(api, server, std::chrono::seconds(5));
  }
  server.stop();
  stats.reset();
  engine->shutdown();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  f->engine.add_engine_to(*cmd);
  cmd->add_option("--host", f->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", f->http.port, "Port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", f->api_key, "Require 'Authorization: Bearer KEY' on model routes (or ORZO_API_KEY)");
  cmd->add_option("--served-model-name", f->served_model_name, "The model name requests use (default: -m as given)");
  cmd->add_option("--chat-template", f->chat_template, "A Jinja chat template file, instead of the model's");
  cmd->add_option("--tool-call-parser", f->tool_call_parser,
                  "How the model writes tool calls: hermes (<tool_call> JSON, Qwen), llama3_json or mistral "
                  "(default: what the chat template shows, else hermes)")
      ->check(CLI::IsMember({"hermes", "llama3_json", "mistral"}));
  cmd->add_flag("--no-webui", f->no_webui, "No chat page at / (it is one static page inside the binary)");
  cmd->add_option("--max-queue", f->max_queue, "Waiting requests at most; beyond, 429")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--publish", f->publish,
                  "Also publish the batcher on this port for CAF actor clients (0: a free port, printed)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--publish-host", f->publish_host, "Address the published batcher binds to")->capture_default_str();
  f->middleman.add_to(*cmd);
  cmd->add_option("--recovery-timeout", f->recovery_timeout,
                  "Seconds requests wait, paused, for a lost worker's layers to be served again (a standby or a new "
                  "worker) before they fail with worker_lost; 0: they fail at once")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--http-threads", f->http.threads, "I/O threads")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--max-body-bytes", f->http.max_body_bytes, "Larger request bodies get 413")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 32))
      ->capture_default_str();
  cmd->add_option("--http-timeout", f->http_timeout, "Seconds for a request to arrive, and for idle keep-alive")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--stream-buffer", f->http.stream_buffer_bytes,
                  "Bytes of a stream's output the server holds for a reader that falls behind; beyond, the request "
                  "pauses until the reader catches up")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--stalled-client-timeout", f->stalled_client_timeout,
                  "Seconds a stream's reader may stay --stream-buffer behind before its request is cancelled")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", f->shutdown_grace, "Seconds in-flight requests get to finish on SIGINT/SIGTERM")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--stats-interval", f->stats_interval,
                  "Seconds between stats lines on stderr (throughput, queue, KV cache) while busy; 0: none")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--log-format", f->log_format, "The access log's and stats lines' format: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([f] {
    if (const int rc = run_serve(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orzo::cli
