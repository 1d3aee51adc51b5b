// serve_bench: a load generator for an OpenAI-compatible server, reporting what
// `vllm bench serve` reports (request and token throughput; mean, median, p90 and p99 of
// TTFT, TPOT, ITL and end-to-end latency), so the two can be read side by side.
//
// It is C++ rather than Python because on a small machine the client would otherwise
// compete with the server for the CPU and measure itself: one io thread drives every
// connection (HTTP/1.1 keep-alive, one request in flight per connection), and parsing a
// streamed chunk costs a few microseconds. Every request streams (stream=true with
// stream_options.include_usage), so token counts come from the server's own usage, and
// times are taken when a read completes.

#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/percentile.hpp"

namespace {

using orzo::bench::percentile;

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "completions";
  std::string model;  // empty: the first of GET /v1/models
  int num_prompts = 100;
  int concurrency = 0;  // 0: no limit
  double request_rate = std::numeric_limits<double>::infinity();
  std::string prompt = "Once upon a time";
  std::string prompt_file;
  int random_input_len = 0;  // > 0: prompts of this many random token ids instead of text
  int random_vocab = 0;      // ids are drawn from [0, random_vocab)
  int max_tokens = 128;
  bool ignore_eos = false;
  double temperature = 0.0;
  uint32_t seed = 0;
  double timeout = 600;  // seconds without progress before a request fails
  std::string json_out;
};

// What one request saw, from the moment its bytes started out (connection included when
// it needed one) to the end of its stream.
struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft = 0;
  double e2e = 0;
  std::vector<double> itl;  // gaps between chunks that carry text
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool usage_missing = false;
};

// Reads one server-sent-event stream of OpenAI chunks as its bytes arrive.
class StreamReader {
 public:
  StreamReader(bool chat, Clock::time_point sent) : chat_(chat), sent_(sent) {}

  void feed(const char* data, size_t n, Clock::time_point now) {
    pending_.append(data, n);
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      const std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      on_event(event, now);
    }
  }

  // The result once the HTTP message has ended.
  RequestResult finish(Clock::time_point now) {
    r_.e2e = seconds(now - sent_);
    if (r_.error.empty() && !done_) r_.error = "the stream ended without data: [DONE]";
    r_.ok = r_.error.empty();
    if (!saw_token_) r_.ttft = r_.e2e;
    if (!saw_usage_) {
      r_.usage_missing = true;
      r_.output_tokens = chunks_;
    }
    return std::move(r_);
  }

 private:
  void on_event(const std::string& event, Clock::time_point now) {
    size_t start = 0;
    while (start <= event.size()) {
      size_t stop = event.find('\n', start);
      if (stop == std::string::npos) stop = event.size();
      std::string_view line(event.data() + start, stop - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(line.size() > 5 && line[5] == ' ' ? 6 : 5);
        on_data(line, now);
      }
      start = stop + 1;
    }
  }

  void on_data(std::string_view data, Clock::time_point now) {
    if (data == "[DONE]") {
      done_ = true;
      return;
    }
    try {
      on_chunk(json::parse(data), now);
    } catch (const json::exception& e) {
      fail("a stream chunk is not an OpenAI chunk (" + std::string(e.what()) + "): " + std::string(data.substr(0, 200)));
    }
  }

  void on_chunk(const json& chunk, Clock::time_point now) {
    if (chunk.contains("error")) return fail("error in the stream: " + chunk["error"].dump());
    const auto usage = chunk.find("usage");
    if (usage != chunk.end() && usage->is_object()) {
      saw_usage_ = true;
      r_.prompt_tokens = usage->value("prompt_tokens", int64_t{0});
      r_.output_tokens = usage->value("completion_tokens", int64_t{0});
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;
    const json& choice = (*choices)[0];
    const json* text = nullptr;
    if (chat_) {
      const auto delta = choice.find("delta");
      if (delta != choice.end() && delta->contains("content")) text = &delta->at("content");
    } else if (choice.contains("text")) {
      text = &choice.at("text");
    }
    if (text == nullptr || !text->is_string() || text->get_ref<const std::string&>().empty()) return;
    ++chunks_;
    if (!saw_token_) {
      saw_token_ = true;
      r_.ttft = seconds(now - sent_);
    } else {
      r_.itl.push_back(seconds(now - last_token_));
    }
    last_token_ = now;
  }

  void fail(std::string why) {
    if (r_.error.empty()) r_.error = std::move(why);
  }

  bool chat_;
  Clock::time_point sent_;
  Clock::time_point last_token_{};
  std::string pending_;
  RequestResult r_;
  bool done_ = false, saw_token_ = false, saw_usage_ = false;
  int64_t chunks_ = 0;
};

// One keep-alive HTTP/1.1 connection carrying one request at a time.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Done = std::function<void(RequestResult, std::shared_ptr<Connection>)>;

  Connection(asio::io_context& io, tcp::endpoint endpoint, std::string host, double timeout)
      : stream_(io), endpoint_(endpoint), host_(std::move(host)),
        timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout))) {}

  bool reusable() const { return open_; }

  void start(const std::string& target, std::string body, bool chat, Done done) {
    done_ = std::move(done);
    const auto sent = Clock::now();
    reader_.emplace(chat, sent);
    request_ = {http::verb::post, target, 11};
    request_.set(http::field::host, host_);
    request_.set(http::field::content_type, "application/json");
    request_.set(http::field::accept, "text/event-stream");
    request_.keep_alive(true);
    request_.body() = std::move(body);
    request_.prepare_payload();
    if (open_) return write();
    stream_.expires_after(timeout_);
    stream_.async_connect(endpoint_, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail("connect: " + ec.message());
      self->open_ = true;
      self->stream_.socket().set_option(tcp::no_delay(true));
      self->write();
    });
  }

 private:
  void write() {
    stream_.expires_after(timeout_);
    http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail("write: " + ec.message());
      self->parser_.emplace();
      self->parser_->body_limit(std::numeric_limits<uint64_t>::max());
      self->error_body_.clear();
      self->read();
    });
  }

  void read() {
    parser_->get().body().data = chunk_;
    parser_->get().body().size = sizeof(chunk_);
    stream_.expires_after(timeout_);
    http::async_read_some(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return fail("read: " + ec.message());
    const auto now = Clock::now();
    const size_t n = sizeof(chunk_) - parser_->get().body().size;
    if (parser_->is_header_done() && parser_->get().result() != http::status::ok)
      error_body_.append(chunk_, n);
    else
      reader_->feed(chunk_, n, now);
    if (!parser_->is_done()) return read();
    open_ = parser_->get().keep_alive();
    if (!open_) close();
    RequestResult r = reader_->finish(now);
    if (parser_->get().result() != http::status::ok) {
      r.ok = false;
      r.error = "HTTP " + std::to_string(parser_->get().result_int()) + ": " + error_body_.substr(0, 300);
    }
    complete(std::move(r));
  }

  void fail(std::string why) {
    close();
    RequestResult r = reader_->finish(Clock::now());
    r.ok = false;
    r.error = std::move(why);
    complete(std::move(r));
  }

  void close() {
    open_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  void complete(RequestResult r) {
    auto done = std::move(done_);
    done(std::move(r), shared_from_this());
  }

  beast::tcp_stream stream_;
  tcp::endpoint endpoint_;
  std::string host_;
  Clock::duration timeout_;
  bool open_ = false;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  char chunk_[16384];
  std::string error_body_;
  std::optional<StreamReader> reader_;
  Done done_;
};

// Sends the requests as they arrive (all at once, or Poisson at --request-rate), at most
// --concurrency in flight, reusing idle connections; runs until every request has ended.
class LoadGenerator {
 public:
  LoadGenerator(asio::io_context& io, tcp::endpoint endpoint, const Options& o, std::vector<std::string> bodies)
      : io_(io), endpoint_(endpoint), o_(o), bodies_(std::move(bodies)), results_(bodies_.size()), timer_(io),
        rng_(o.seed) {}

  // Returns each request's result, in request order, and the wall time of the whole run.
  std::pair<std::vector<RequestResult>, double> run() {
    start_ = Clock::now();
    next_arrival_ = start_;
    arrive();
    io_.run();
    io_.restart();
    return {std::move(results_), seconds(last_end_ - start_)};
  }

 private:
  void arrive() {
    if (std::isinf(o_.request_rate)) {
      for (size_t i = 0; i < bodies_.size(); ++i) ready_.push_back(i);
      arrived_ = bodies_.size();
      return dispatch();
    }
    ready_.push_back(arrived_++);
    dispatch();
    if (arrived_ == bodies_.size()) return;
    std::exponential_distribution<double> gap(o_.request_rate);
    next_arrival_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng_)));
    timer_.expires_at(next_arrival_);
    timer_.async_wait([this](beast::error_code ec) {
      if (!ec) arrive();
    });
  }

  void dispatch() {
    while (!ready_.empty() && (o_.concurrency <= 0 || in_flight_ < o_.concurrency)) {
      const size_t i = ready_.front();
      ready_.pop_front();
      std::shared_ptr<Connection> c;
      if (!idle_.empty()) {
        c = std::move(idle_.back());
        idle_.pop_back();
      } else {
        c = std::make_shared<Connection>(io_, endpoint_, o_.host, o_.timeout);
      }
      ++in_flight_;
      c->start(target(), std::move(bodies_[i]), o_.endpoint == "chat",
               [this, i](RequestResult r, std::shared_ptr<Connection> conn) {
                 last_end_ = Clock::now();
                 results_[i] = std::move(r);
                 --in_flight_;
                 if (conn->reusable()) idle_.push_back(std::move(conn));
                 dispatch();
               });
    }
  }

  std::string target() const { return o_.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions"; }

  asio::io_context& io_;
  tcp::endpoint endpoint_;
  const Options& o_;
  std::vector<std::string> bodies_;
  std::vector<RequestResult> results_;
  asio::steady_timer timer_;
  std::mt19937_64 rng_;
  std::deque<size_t> ready_;
  std::vector<std::shared_ptr<Connection>> idle_;
  size_t arrived_ = 0;
  int in_flight_ = 0;
  Clock::time_point start_{}, next_arrival_{}, last_end_{};
};

std::string request_body(const Options& o, const std::string& model, const json& prompt, uint32_t seed) {
  json body = {{"model", model},
               {"max_tokens", o.max_tokens},
               {"temperature", o.temperature},
               {"seed", seed},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  if (o.endpoint == "chat")
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  else
    body["prompt"] = prompt;
  return body.dump();
}

// Text prompts (--prompt, --prompt-file), or with --random-input-len one prompt of random
// ids per request plus one for the test request, as vllm's random dataset does: distinct
// prompts, so a prefix cache finds nothing to reuse and every request does its whole prefill.
std::vector<json> load_prompts(const Options& o) {
  if (o.random_input_len > 0) {
    std::mt19937 rng(o.seed);
    std::uniform_int_distribution<int> any_token(0, o.random_vocab - 1);
    std::vector<json> prompts;
    for (int i = 0; i <= o.num_prompts; ++i) {
      json ids = json::array();
      for (int t = 0; t < o.random_input_len; ++t) ids.push_back(any_token(rng));
      prompts.push_back(std::move(ids));
    }
    return prompts;
  }
  if (o.prompt_file.empty()) return {o.prompt};
  std::ifstream in(o.prompt_file);
  if (!in) throw std::runtime_error("cannot open --prompt-file " + o.prompt_file);
  std::vector<json> prompts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) prompts.push_back(line);
  if (prompts.empty()) throw std::runtime_error("--prompt-file " + o.prompt_file + " holds no prompts");
  return prompts;
}

// The served model's name, from GET /v1/models, when --model is not given.
std::string first_model(asio::io_context& io, const tcp::endpoint& endpoint, const Options& o) {
  beast::tcp_stream stream(io);
  stream.connect(endpoint);
  http::request<http::empty_body> req{http::verb::get, "/v1/models", 11};
  req.set(http::field::host, o.host);
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  if (res.result() != http::status::ok)
    throw std::runtime_error("GET /v1/models answered " + std::to_string(res.result_int()) + ": " + res.body());
  const json models = json::parse(res.body());
  if (!models.contains("data") || models["data"].empty()) throw std::runtime_error("GET /v1/models lists no model");
  return models["data"][0].at("id").get<std::string>();
}

// mean, median, p90 and p99 in milliseconds, under keys like vLLM's ("mean_ttft_ms").
void summarize(json& out, const std::string& name, const std::vector<double>& values_s) {
  const double mean =
      values_s.empty() ? 0 : std::accumulate(values_s.begin(), values_s.end(), 0.0) / static_cast<double>(values_s.size());
  out["mean_" + name + "_ms"] = mean * 1e3;
  out["median_" + name + "_ms"] = percentile(values_s, 50) * 1e3;
  out["p90_" + name + "_ms"] = percentile(values_s, 90) * 1e3;
  out["p99_" + name + "_ms"] = percentile(values_s, 99) * 1e3;
}

json report(const Options& o, const std::string& model, const std::vector<RequestResult>& results, double duration) {
  json out = {{"endpoint", o.endpoint},
              {"model", model},
              {"num_prompts", o.num_prompts},
              {"max_concurrency", o.concurrency > 0 ? json(o.concurrency) : json(nullptr)},
              {"request_rate", std::isinf(o.request_rate) ? json("inf") : json(o.request_rate)},
              {"max_tokens", o.max_tokens},
              {"ignore_eos", o.ignore_eos},
              {"temperature", o.temperature},
              {"duration", duration}};
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t completed = 0, input = 0, output = 0, usage_missing = 0;
  json errors = json::array();
  for (const auto& r : results) {
    if (!r.ok) {
      if (errors.size() < 5) errors.push_back(r.error);
      continue;
    }
    ++completed;
    input += r.prompt_tokens;
    output += r.output_tokens;
    usage_missing += r.usage_missing;
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / static_cast<double>(r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  out["completed"] = completed;
  out["failed"] = static_cast<int64_t>(results.size()) - completed;
  out["errors"] = errors;
  out["usage_missing"] = usage_missing;
  out["total_input_tokens"] = input;
  out["total_output_tokens"] = output;
  out["request_throughput"] = duration > 0 ? static_cast<double>(completed) / duration : 0.0;
  out["output_throughput"] = duration > 0 ? static_cast<double>(output) / duration : 0.0;
  out["total_token_throughput"] = duration > 0 ? static_cast<double>(input + output) / duration : 0.0;
  summarize(out, "ttft", ttft);
  summarize(out, "tpot", tpot);
  summarize(out, "itl", itl);
  summarize(out, "e2el", e2e);
  return out;
}

void print_report(const json& r) {
  const auto row = [](const char* label, const std::string& value) { std::printf("%-40s%s\n", label, value.c_str()); };
  const auto num = [](double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
    return std::string(buf);
  };
  std::printf("============ Serving Benchmark Result ============\n");
  row("Successful requests:", std::to_string(r["completed"].get<int64_t>()));
  row("Failed requests:", std::to_string(r["failed"].get<int64_t>()));
  row("Maximum request concurrency:", r["max_concurrency"].is_null() ? "unlimited" : r["max_concurrency"].dump());
  row("Benchmark duration (s):", num(r["duration"], 2));
  row("Total input tokens:", std::to_string(r["total_input_tokens"].get<int64_t>()));
  row("Total generated tokens:", std::to_string(r["total_output_tokens"].get<int64_t>()));
  row("Request throughput (req/s):", num(r["request_throughput"], 2));
  row("Output token throughput (tok/s):", num(r["output_throughput"], 2));
  row("Total token throughput (tok/s):", num(r["total_token_throughput"], 2));
  const auto section = [&](const char* title, const std::string& key, const std::string& label) {
    std::printf("%s\n", title);
    for (const auto& [stat, shown] : {std::pair{"mean", "Mean"}, {"median", "Median"}, {"p90", "P90"}, {"p99", "P99"}})
      row((std::string(shown) + " " + label + " (ms):").c_str(), num(r[std::string(stat) + "_" + key + "_ms"], 2));
  };
  section("---------------Time to First Token----------------", "ttft", "TTFT");
  section("-----Time per Output Token (excl. 1st token)------", "tpot", "TPOT");
  section("---------------Inter-token Latency----------------", "itl", "ITL");
  section("----------------End-to-end Latency----------------", "e2el", "E2EL");
  std::printf("==================================================\n");
  for (const auto& e : r["errors"]) std::printf("error: %s\n", e.get<std::string>().c_str());
  if (r["usage_missing"].get<int64_t>() > 0)
    std::printf("warning: %lld responses had no usage; their output tokens are counted as text chunks\n",
                static_cast<long long>(r["usage_missing"].get<int64_t>()));
}

int run(const Options& o) {
  asio::io_context io;
  tcp::resolver resolver(io);
  const tcp::endpoint endpoint = *resolver.resolve(o.host, std::to_string(o.port)).begin();
  const std::string model = o.model.empty() ? first_model(io, endpoint, o) : o.model;
  const auto prompts = load_prompts(o);

  // One request first, as vllm bench serve does: it checks the setup end to end and warms
  // the server up; its numbers are not part of the result.
  Options probe = o;
  probe.num_prompts = 1;
  const auto checked = LoadGenerator(io, endpoint, probe, {request_body(o, model, prompts.back(), o.seed)}).run().first;
  if (!checked[0].ok) throw std::runtime_error("the test request failed: " + checked[0].error);

  std::vector<std::string> bodies;
  for (int i = 0; i < o.num_prompts; ++i)
    bodies.push_back(request_body(o, model, prompts[static_cast<size_t>(i) % prompts.size()],
                                  o.seed + static_cast<uint32_t>(i)));
  auto [results, duration] = LoadGenerator(io, endpoint, o, std::move(bodies)).run();
  const json r = report(o, model, results, duration);
  print_report(r);
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    if (!out) throw std::runtime_error("cannot write --json " + o.json_out);
    out << r.dump(1) << "\n";
  }
  return r["failed"].get<int64_t>() > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Load an OpenAI-compatible server with streamed requests and report as vllm bench serve does"};
  app.add_option("--host", o.host)->capture_default_str();
  app.add_option("--port", o.port)->check(CLI::Range(1, 65535))->capture_default_str();
  app.add_option("--endpoint", o.endpoint, "completions or chat")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->capture_default_str();
  app.add_option("--model", o.model, "Model name to send (default: the first of GET /v1/models)");
  app.add_option("--num-prompts", o.num_prompts, "Requests to send")->check(CLI::Range(1, 10000000))->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "Most requests in flight at once (0: no limit)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--request-rate", o.request_rate, "Poisson arrivals per second (default inf: all at once)")
      ->check(CLI::PositiveNumber);
  auto* prompt = app.add_option("--prompt", o.prompt, "The prompt of every request")->capture_default_str();
  auto* file = app.add_option("--prompt-file", o.prompt_file, "Prompts, one a line, used in turn")->excludes(prompt);
  auto* random_len = app.add_option("--random-input-len", o.random_input_len,
                                    "Prompts of this many random token ids, a new one per request (completions only)")
                         ->check(CLI::Range(1, 1 << 20))
                         ->excludes(prompt)
                         ->excludes(file);
  app.add_option("--random-vocab", o.random_vocab, "With --random-input-len: ids are drawn from [0, this)")
      ->check(CLI::Range(1, 1 << 24))
      ->needs(random_len);
  app.add_option("--max-tokens", o.max_tokens, "max_tokens of each request")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_flag("--ignore-eos", o.ignore_eos, "Ask for max_tokens tokens whatever the model samples");
  app.add_option("--temperature", o.temperature)->check(CLI::Range(0.0, 2.0))->capture_default_str();
  app.add_option("--seed", o.seed, "Seeds the arrivals, and request i carries seed + i")->capture_default_str();
  app.add_option("--timeout", o.timeout, "Seconds a request may wait on one network operation")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", o.json_out, "Also write the result as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (o.random_input_len > 0 && (o.random_vocab == 0 || o.endpoint == "chat")) {
    std::fprintf(stderr, "serve_bench: --random-input-len needs --random-vocab and --endpoint completions\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve_bench: %s\n", e.what());
    return 2;
  }
}
