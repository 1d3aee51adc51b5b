#pragma once
// The endpoints of `orzo serve`: routing, authentication, and the work of each route —
// /v1/completions and /v1/chat/completions (prompts and chat templates tokenized here, each
// prompt held to check_request, then one session per choice: see CompletionJob),
// /v1/models, /tokenize, /detokenize, /tokenizer_info, /health, /metrics, and the chat page at /. The API is
// up before the model: until serve() hands it an engine, /health says 503 and model routes
// refuse.

#include "grammar/tool_calls.hpp"
#include "server/http_server.hpp"
#include "server/metrics.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace caf {
class actor_system;
}

namespace orzo {

class ChatTemplate;
class CompletionJob;
class Engine;
struct JobSetup;
struct SessionRequest;

struct ApiOptions {
  std::string served_model_name;  // what requests name in "model"
  std::string model_path;         // reported as the model's root
  std::string api_key;            // empty: no authentication
  std::string chat_template;      // overrides the model's; empty: the model's own
  bool webui = true;              // the chat page at /
  std::string tool_call_parser;   // hermes, llama3_json or mistral; empty: what the chat template teaches
};

class OpenAIApi {
 public:
  OpenAIApi(caf::actor_system& sys, ApiOptions options);
  ~OpenAIApi();

  // The model is loaded: requests go to `engine`, which must outlive every request.
  // Throws ChatTemplateError when the chat template does not parse.
  void serve(Engine& engine);
  // Every route answers here: on an I/O thread for requests without a body, on one of the
  // server's work threads for those with one (HttpServer), concurrently either way.
  void handle(HttpRequest& request, std::shared_ptr<HttpExchange> exchange);

  void drain();        // shutting down: new generation requests get 503
  void cancel_all();   // ends every request in flight now
  size_t in_flight() const;

 private:
  void completions(HttpRequest& request, std::shared_ptr<HttpExchange> exchange, bool chat);
  void start_job(JobSetup setup, std::shared_ptr<HttpExchange> exchange, Engine& engine,
                 std::vector<SessionRequest> sessions);
  void tokenize(const HttpRequest& request, HttpExchange& exchange);
  void detokenize(const HttpRequest& request, HttpExchange& exchange);
  void tokenizer_info(HttpExchange& exchange) const;
  void models(HttpExchange& exchange) const;
  void health(std::shared_ptr<HttpExchange> exchange);
  void metrics(std::shared_ptr<HttpExchange> exchange);
  void chat_page(HttpExchange& exchange) const;
  void check_model(const std::string& model) const;  // empty: the served model, as vLLM takes it
  Engine& engine() const;

  // Requests in flight, by job. Shared with the jobs, which may end after the API is gone.
  struct Jobs {
    std::mutex mutex;
    std::unordered_map<CompletionJob*, std::weak_ptr<CompletionJob>> live;
  };

  caf::actor_system& sys_;
  ApiOptions options_;
  std::shared_ptr<ServerMetrics> metrics_;
  std::atomic<Engine*> engine_{nullptr};
  std::unique_ptr<ChatTemplate> chat_template_;
  grammar::ToolCallFormat tool_format_ = grammar::ToolCallFormat::hermes;
  int64_t created_;
  std::string id_prefix_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> draining_{false};
  std::shared_ptr<Jobs> jobs_ = std::make_shared<Jobs>();
};

}  // namespace orzo
