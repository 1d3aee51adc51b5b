#include "server/openai_api.hpp"

#include "actors/engine.hpp"
#include "chat_template/chat_template.hpp"
#include "core/layer_range.hpp"
#include "grammar/constraint.hpp"
#include "server/api_error.hpp"
#include "server/chat_page.hpp"
#include "server/completion_job.hpp"
#include "server/json_text.hpp"
#include "server/openai_request.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

namespace orzo {
namespace {

using nlohmann::ordered_json;

struct Route {
  std::string_view path;
  std::string_view method;
  bool needs_key;  // model routes; /health and /metrics stay open for probes and scrapers
};

constexpr Route kRoutes[] = {
    {"/v1/completions", "POST", true}, {"/v1/chat/completions", "POST", true}, {"/v1/models", "GET", true},
    {"/tokenize", "POST", true},       {"/detokenize", "POST", true},          {"/tokenizer_info", "GET", true},
    {"/health", "GET", false},
    {"/metrics", "GET", false},        {"/", "GET", false},  // the chat page asks for the key itself
};

// Same time whatever the key's content: a wrong key does not leak how much of it matched
// (its length may show).
bool same_key(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Asks the batcher from outside any actor: a short-lived actor makes the request, so the
// I/O thread never blocks on it.
template <class Reply, class Atom>
void ask_batcher(caf::actor_system& sys, const batcher_actor& batcher, std::function<void(Reply*, std::string)> done) {
  sys.spawn(
      [](caf::event_based_actor* self, batcher_actor target, std::function<void(Reply*, std::string)> reply) {
        self->request(target, std::chrono::seconds(5), Atom::value)
            .then([reply](Reply& r) { reply(&r, {}); },
                  [reply, self](caf::error& e) { reply(nullptr, self->system().render(e)); });
      },
      batcher, std::move(done));
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Ids /detokenize can turn into text: the tokenizer's, not the model's (whose vocabulary may
// be padded past it).
const std::vector<int32_t>& decodable(const std::vector<int32_t>& ids, const Tokenizer& tokenizer) {
  for (auto id : ids)
    if (id < 0 || id >= tokenizer.vocab_size())
      throw ApiError(400, "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                              std::to_string(tokenizer.vocab_size()) + ")",
                     "invalid_request_error", "tokens");
  return ids;
}

}  // namespace

OpenAIApi::OpenAIApi(caf::actor_system& sys, ApiOptions options)
    : sys_(sys), options_(std::move(options)), metrics_(std::make_shared<ServerMetrics>(options_.served_model_name)),
      created_(unix_seconds()) {
  char prefix[20];
  std::snprintf(prefix, sizeof prefix, "%08x", static_cast<unsigned>(std::random_device{}()));
  id_prefix_ = prefix;
}

OpenAIApi::~OpenAIApi() = default;

void OpenAIApi::serve(Engine& engine) {
  const std::string& source =
      options_.chat_template.empty() && engine.tokenizer() ? engine.tokenizer()->chat_template() : options_.chat_template;
  if (!source.empty()) chat_template_ = std::make_unique<ChatTemplate>(source);
  tool_format_ = grammar::tool_call_format_of_template(source);
  if (!options_.tool_call_parser.empty()) {
    const auto chosen = grammar::parse_tool_call_format(options_.tool_call_parser);
    if (!chosen) throw std::invalid_argument("unknown tool call parser '" + options_.tool_call_parser + "'");
    tool_format_ = *chosen;
  }
  engine_ = &engine;
}

Engine& OpenAIApi::engine() const {
  Engine* e = engine_.load();
  if (!e) throw ApiError(503, "the model is still loading", "server_error", {}, "unavailable");
  return *e;
}

void OpenAIApi::handle(HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  const std::string_view method(request.method_string().data(), request.method_string().size());
  const Route* route = nullptr;
  for (const auto& r : kRoutes)
    if (r.path == path && (path != "/" || options_.webui)) route = &r;
  if (!route) throw ApiError(404, "no route " + std::string(path), "invalid_request_error", {}, "not_found");
  if (method != route->method) {
    exchange->respond(405,
                      error_body(ApiError(405, std::string(method) + " is not allowed on " + std::string(path),
                                          "invalid_request_error", {}, "method_not_allowed")),
                      {{"Allow", std::string(route->method)}});
    return;
  }
  if (route->needs_key && !options_.api_key.empty()) {
    const auto auth = request[boost::beast::http::field::authorization];
    const std::string_view given(auth.data(), auth.size());
    constexpr std::string_view bearer = "Bearer ";
    if (given.empty())
      throw ApiError(401, "no API key given: send it as 'Authorization: Bearer KEY'", "invalid_request_error", {},
                     "invalid_api_key");
    if (given.substr(0, bearer.size()) != bearer || !same_key(given.substr(bearer.size()), options_.api_key))
      throw ApiError(401, "incorrect API key", "invalid_request_error", {}, "invalid_api_key");
  }
  if (path == "/") return chat_page(*exchange);
  if (path == "/health") return health(std::move(exchange));
  if (path == "/metrics") return metrics(std::move(exchange));
  if (path == "/v1/models") return models(*exchange);
  if (path == "/tokenize") return tokenize(request, *exchange);
  if (path == "/detokenize") return detokenize(request, *exchange);
  if (path == "/tokenizer_info") return tokenizer_info(*exchange);
  completions(request, std::move(exchange), path == "/v1/chat/completions");
}

void OpenAIApi::check_model(const std::string& model) const {
  if (!model.empty() && model != options_.served_model_name)
    throw ApiError(404, "the model '" + model + "' does not exist; this server serves '" + options_.served_model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
}

namespace {

// The conversation as the chat template renders it, ready to tokenize.
std::string render_chat(const ChatTemplate* tmpl, const Tokenizer& tokenizer, const ordered_json& messages,
                        bool add_generation_prompt, bool continue_final_message, const ordered_json& kwargs) {
  if (!tmpl)
    throw ApiError(400, "this model has no chat template: use /v1/completions, or start the server with --chat-template",
                   "invalid_request_error", "messages");
  try {
    std::string text = apply_chat_template(*tmpl, messages, add_generation_prompt && !continue_final_message,
                                           tokenizer.bos_token(), tokenizer.eos_token(), kwargs);
    if (continue_final_message) {
      // As transformers does: the text ends where the last message's content ends, so the
      // model continues that message instead of closing it.
      const auto& last = messages.back();
      if (last.value("role", "") != "assistant" || !last.contains("content") || !last["content"].is_string())
        throw ApiError(400, "continue_final_message needs a final assistant message with text content",
                       "invalid_request_error", "continue_final_message");
      const auto content = last["content"].get<std::string>();
      const auto at = text.rfind(content);
      if (content.empty() || at == std::string::npos)
        throw ApiError(400, "the chat template does not reproduce the final message's content",
                       "invalid_request_error", "continue_final_message");
      text.resize(at + content.size());
    }
    return text;
  } catch (const ChatTemplateRaised& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "messages");
  } catch (const ChatTemplateError& e) {
    throw ApiError(400, std::string("the chat template failed on these messages: ") + e.what(),
                   "invalid_request_error", "messages");
  }
}

// A request's prompts as the front end tokenizes them, with its parameters, before any rule
// that needs the model's limits.
struct TokenizedRequest {
  GenerateParams params;
  std::optional<grammar::ToolCallFormat> tool_format;  // chat with tools it may call: outputs are parsed for calls
  bool echo_logprobs = false;     // completions: the prompt's tokens lead the logprobs
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> echo;  // per prompt: the text each of its choices starts with
};

// `required` and a named function are enforced: the output must be calls in the template's
// format to the functions allowed, their arguments fitting the parameters' schemas.
OutputConstraint tool_call_constraint(const ChatRequest& req, grammar::ToolCallFormat format) {
  nlohmann::ordered_json functions = nlohmann::ordered_json::array();
  for (const auto& tool : req.tools) {
    const auto& f = tool["function"];
    if (req.tool_choice.mode == ToolChoice::Mode::named && f["name"] != req.tool_choice.name) continue;
    nlohmann::ordered_json spec = {{"name", f["name"]}};
    if (f.contains("parameters")) spec["parameters"] = f["parameters"];
    functions.push_back(std::move(spec));
  }
  const bool parallel = req.parallel_tool_calls && req.tool_choice.mode == ToolChoice::Mode::required;
  const nlohmann::ordered_json spec = {
      {"format", grammar::tool_call_format_name(format)}, {"parallel", parallel}, {"functions", std::move(functions)}};
  return OutputConstraint{OutputConstraint::Kind::tool_calls, spec.dump(), false};
}

TokenizedRequest tokenize_chat(std::string_view body, const ChatTemplate* tmpl, const Tokenizer& tokenizer,
                               grammar::ToolCallFormat tool_format) {
  ChatRequest req = parse_chat_request(body);
  TokenizedRequest out;
  if (!req.tools.empty()) req.template_kwargs["tools"] = req.tools;
  const std::string text = render_chat(tmpl, tokenizer, req.messages, req.add_generation_prompt,
                                       req.continue_final_message, req.template_kwargs);
  if (req.tool_choice.mode == ToolChoice::Mode::required || req.tool_choice.mode == ToolChoice::Mode::named) {
    if (req.params.sampling.constraint.kind != OutputConstraint::Kind::none)
      throw ApiError(400, "tool_choice requires a call, and " + req.params.constraint_param + " constrains the output too: give one of them",
                     "invalid_request_error", "tool_choice");
    req.params.sampling.constraint = tool_call_constraint(req, tool_format);
    req.params.constraint_param = "tools";
  }
  if (req.tool_choice.mode != ToolChoice::Mode::none) out.tool_format = tool_format;
  out.params = std::move(req.params);
  out.prompts.push_back(tokenizer.encode(text, req.add_special_tokens));
  out.echo.emplace_back();
  return out;
}

TokenizedRequest tokenize_completion(std::string_view body, const Tokenizer& tokenizer) {
  CompletionRequest req = parse_completion_request(body);
  TokenizedRequest out;
  out.params = std::move(req.params);
  // Echo with logprobs lists the prompt's tokens first, as OpenAI's legacy API did; with
  // max_tokens 0 the prompt is all there is.
  out.echo_logprobs = req.echo && out.params.sampling.logprobs;
  const bool add_special = req.add_special_tokens.value_or(true);
  for (auto& p : req.prompts) {
    out.echo.push_back(!req.echo ? std::string() : p.is_ids ? tokenizer.decode(p.ids, false) : p.text);
    out.prompts.push_back(p.is_ids ? std::move(p.ids) : tokenizer.encode(p.text, add_special));
  }
  return out;
}

// How many alternatives the engine scores each prompt token with: as many as either listing
// shows (echo's logprobs, vLLM's prompt_logprobs); none (-1) when neither is asked, except
// that a request generating nothing (max_tokens 0) still scores, which is what it is for.
int32_t engine_prompt_logprobs(const GenerateParams& params, bool echo_logprobs) {
  int32_t k = params.prompt_logprobs.value_or(-1);
  if (echo_logprobs) k = std::max(k, params.sampling.top_logprobs);
  if (params.max_tokens == 0) k = std::max(k, 0);
  return k;
}

// One GenerationRequest per prompt, each held to check_request; the first rule broken is the
// client's 400, before any session starts.
std::vector<GenerationRequest> checked_requests(std::vector<std::vector<int32_t>> prompts, const GenerateParams& params,
                                                bool echo_logprobs, const RequestBounds& bounds, bool chat) {
  // The constraint's 400 names the field it came from (check_request would say "constraint").
  if (auto why = grammar::constraint_problem(params.sampling.constraint))
    throw ApiError(400, std::move(*why), "invalid_request_error", params.constraint_param);
  std::vector<GenerationRequest> out;
  for (auto& prompt : prompts) {
    GenerationRequest g;
    g.prompt = std::move(prompt);
    g.sampling = params.sampling;
    g.sampling.prompt_logprobs = engine_prompt_logprobs(params, echo_logprobs);
    // OpenAI's defaults: a chat may fill the context, a completion keeps GenerationLimits' 16.
    if (params.max_tokens)
      g.limits.max_tokens = *params.max_tokens;
    else if (chat)
      g.limits.max_tokens = bounds.max_model_len - static_cast<int32_t>(g.prompt.size());
    g.limits.min_tokens = params.min_tokens;
    g.limits.stop_token_ids = params.stop_token_ids;
    g.limits.ignore_eos = params.ignore_eos;
    if (auto problem = check_request(g, bounds, chat ? "messages" : "prompt"))
      throw ApiError(400, std::move(problem->message), "invalid_request_error", std::move(problem->param),
                     std::move(problem->code));
    out.push_back(std::move(g));
  }
  return out;
}

// n sessions per request, prompt by prompt, as CompletionJob numbers its choices.
std::vector<SessionRequest> sessions_for(const std::vector<GenerationRequest>& requests, const GenerateParams& params,
                                         const std::string& id) {
  std::vector<SessionRequest> sessions;
  for (const auto& g : requests) {
    for (int32_t j = 0; j < params.n; ++j) {
      SessionRequest s;
      s.id = id + "-" + std::to_string(sessions.size());
      s.prompt_ids = g.prompt;
      s.sampling = g.sampling;
      // n choices from one seed must still differ, and each stays reproducible.
      if (s.sampling.seed) s.sampling.seed = *s.sampling.seed + static_cast<uint64_t>(j);
      s.limits = g.limits;
      s.stop = params.stop;
      s.include_stop = params.include_stop;
      s.skip_special_tokens = params.skip_special_tokens;
      sessions.push_back(std::move(s));
    }
  }
  return sessions;
}

// What the job answers with: the response's shape, and each prompt's length and echo.
JobSetup job_setup(ResponseHeader header, bool chat, const GenerateParams& params, bool echo_logprobs,
                   const std::vector<GenerationRequest>& requests, std::vector<std::string> echo) {
  JobSetup setup;
  setup.chat = chat;
  setup.header = std::move(header);
  setup.stream = params.stream;
  setup.include_usage = params.include_usage;
  setup.logprobs = params.sampling.logprobs;
  setup.top_logprobs = params.sampling.top_logprobs;
  setup.echo_logprobs = echo_logprobs;
  setup.prompt_logprobs = params.prompt_logprobs;
  setup.n = params.n;
  for (const auto& g : requests) setup.prompts.push_back(g.prompt);
  setup.echo = std::move(echo);
  return setup;
}

}  // namespace

// The front end tokenizes (the sessions only detokenize): the prompt's length decides chat's
// default max_tokens and the context_length_exceeded 400, before anything starts.
void OpenAIApi::completions(HttpRequest& request, std::shared_ptr<HttpExchange> exchange, bool chat) {
  if (draining_) throw ApiError(503, "the server is shutting down", "server_error", {}, "unavailable");
  Engine& eng = engine();
  const auto tokenizer = eng.tokenizer();
  if (!tokenizer) throw ApiError(500, "this server has no tokenizer", "server_error");

  TokenizedRequest req = chat ? tokenize_chat(request.body(), chat_template_.get(), *tokenizer, tool_format_)
                              : tokenize_completion(request.body(), *tokenizer);
  check_model(req.params.model);
  const auto requests = checked_requests(std::move(req.prompts), req.params, req.echo_logprobs, eng.bounds(), chat);

  const std::string id = id_prefix_ + std::to_string(next_id_++);
  auto sessions = sessions_for(requests, req.params, id);
  ResponseHeader header{(chat ? "chatcmpl-" : "cmpl-") + id, unix_seconds(), options_.served_model_name};
  JobSetup setup = job_setup(std::move(header), chat, req.params, req.echo_logprobs, requests, std::move(req.echo));
  setup.tool_format = req.tool_format;
  start_job(std::move(setup), std::move(exchange), eng, std::move(sessions));
}

void OpenAIApi::start_job(JobSetup setup, std::shared_ptr<HttpExchange> exchange, Engine& engine,
                          std::vector<SessionRequest> sessions) {
  auto job = std::make_shared<CompletionJob>(std::move(setup), std::move(exchange), metrics_, engine.tokenizer(),
                                             [jobs = jobs_](CompletionJob* j) {
                                               std::lock_guard lock(jobs->mutex);
                                               jobs->live.erase(j);
                                             });
  {
    std::lock_guard lock(jobs_->mutex);
    jobs_->live.emplace(job.get(), job);
  }
  job->start(engine, std::move(sessions));
}

void OpenAIApi::tokenize(const HttpRequest& request, HttpExchange& exchange) {
  Engine& eng = engine();
  const TokenizeRequest req = parse_tokenize_request(request.body());
  check_model(req.model);
  const auto tokenizer = eng.tokenizer();
  std::vector<int32_t> ids;
  if (req.prompt)
    ids = tokenizer->encode(*req.prompt, req.add_special_tokens);
  else
    ids = tokenizer->encode(
        render_chat(chat_template_.get(), *tokenizer, req.messages, req.add_generation_prompt, false,
                    req.tools.empty() ? ordered_json::object() : ordered_json{{"tools", req.tools}}),
        false);
  ordered_json body = {{"count", ids.size()}, {"max_model_len", eng.bounds().max_model_len}, {"tokens", ids}};
  exchange.respond(200, json_text(body));
}

void OpenAIApi::detokenize(const HttpRequest& request, HttpExchange& exchange) {
  Engine& eng = engine();
  const DetokenizeRequest req = parse_detokenize_request(request.body());
  check_model(req.model);
  const auto& tokenizer = *eng.tokenizer();
  exchange.respond(200, json_text({{"prompt", tokenizer.decode(decodable(req.tokens, tokenizer), false)}}));
}

// vLLM's /tokenizer_info: what a client tokenizing on the server needs besides /tokenize and
// /detokenize (lm-evaluation-harness's remote tokenizer reads the special tokens and template).
void OpenAIApi::tokenizer_info(HttpExchange& exchange) const {
  Engine& eng = engine();
  const auto& tokenizer = *eng.tokenizer();
  const auto or_null = [](const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); };
  exchange.respond(200, json_text({{"tokenizer_class", "orzo"},
                                   {"bos_token", or_null(tokenizer.bos_token())},
                                   {"eos_token", or_null(tokenizer.eos_token())},
                                   {"pad_token", nullptr},
                                   {"chat_template", chat_template_ ? ordered_json(chat_template_->source()) : nullptr},
                                   {"model_max_length", eng.bounds().max_model_len},
                                   {"vocab_size", tokenizer.vocab_size()}}));
}

void OpenAIApi::models(HttpExchange& exchange) const {
  Engine& eng = engine();
  const ordered_json model = {{"id", options_.served_model_name}, {"object", "model"},
                              {"created", created_},                {"owned_by", "orzo"},
                              {"root", options_.model_path},        {"max_model_len", eng.bounds().max_model_len}};
  exchange.respond(200, json_text({{"object", "list"}, {"data", ordered_json::array({model})}}));
}

void OpenAIApi::health(std::shared_ptr<HttpExchange> exchange) {
  Engine* eng = engine_.load();
  if (!eng) return exchange->respond(503, json_text({{"status", "loading"}}));
  ask_batcher<ModelHealth, health_atom>(sys_, eng->batcher(), [exchange](ModelHealth* h, std::string error) {
    if (!h) return exchange->respond(503, json_text({{"status", "unhealthy"}, {"detail", error}}));
    // Workers and standbys of every replica in one list each, as with one replica; each names
    // its replica when there are more.
    const bool many = h->replicas.size() > 1;
    ordered_json body = {{"status", h->healthy ? "ok" : "unhealthy"}};
    if (!h->healthy) body["detail"] = h->detail;
    body["workers"] = ordered_json::array();
    body["standby"] = ordered_json::array();
    for (size_t r = 0; r < h->replicas.size(); ++r) {
      const auto& rep = h->replicas[r];
      for (const auto* list : {&rep.workers, &rep.standby})
        for (const auto& w : *list) {
          ordered_json entry = {{"device", w.device}, {"layers", layers_text(LayerRange{w.first_layer, w.end_layer})}};
          if (many) entry["replica"] = r;
          body[list == &rep.workers ? "workers" : "standby"].push_back(std::move(entry));
        }
    }
    if (many) {
      body["replicas"] = ordered_json::array();
      for (size_t r = 0; r < h->replicas.size(); ++r) {
        ordered_json entry = {{"replica", r}, {"status", h->replicas[r].healthy ? "ok" : "unhealthy"}};
        if (!h->replicas[r].healthy) entry["detail"] = h->replicas[r].detail;
        body["replicas"].push_back(std::move(entry));
      }
    }
    exchange->respond(h->healthy ? 200 : 503, json_text(body));
  });
}

void OpenAIApi::metrics(std::shared_ptr<HttpExchange> exchange) {
  constexpr const char* type = "text/plain; version=0.0.4; charset=utf-8";
  Engine* eng = engine_.load();
  if (!eng) return exchange->respond(200, metrics_->render(BatcherStats{}), {}, type);
  ask_batcher<BatcherStats, stats_atom>(sys_, eng->batcher(), [metrics = metrics_, exchange](BatcherStats* s,
                                                                                          std::string error) {
    if (!s)
      return exchange->respond(503, error_body(ApiError(503, "the batcher did not answer: " + error, "server_error")));
    exchange->respond(200, metrics->render(*s), {}, type);
  });
}

void OpenAIApi::chat_page(HttpExchange& exchange) const {
  // The page may talk to this server only, and run no script but its own.
  exchange.respond(200, std::string(chat_page_html()),
                   {{"Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                     "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
                    {"X-Content-Type-Options", "nosniff"},
                    {"Cache-Control", "no-cache"}},
                   "text/html; charset=utf-8");
}

void OpenAIApi::drain() { draining_ = true; }

void OpenAIApi::cancel_all() {
  std::lock_guard lock(jobs_->mutex);
  for (auto& [ptr, weak] : jobs_->live)
    if (auto job = weak.lock()) job->cancel();
}

size_t OpenAIApi::in_flight() const {
  std::lock_guard lock(jobs_->mutex);
  return jobs_->live.size();
}

}  // namespace orzo
