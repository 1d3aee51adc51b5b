#include "server/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace orzo {

namespace {

// vLLM's bucket bounds for the same series, so its dashboards' quantile queries carry over.
const std::vector<double>& ttft_bounds() {
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25,  0.5,   0.75,
                                        1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  return b;
}

const std::vector<double>& inter_token_bounds() {
  static const std::vector<double> b = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                        0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
  return b;
}

// Whole-request latencies (end to end, time in the queue).
const std::vector<double>& request_bounds() {
  static const std::vector<double> b = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                        30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  return b;
}

const char* const kFinishReasons[] = {"stop", "length", "abort", "error"};

// A float as the Python client writes one (which vLLM's /metrics shows): the shortest text
// that reads back to the same double, whole numbers with ".0", infinities as "+Inf"/"-Inf".
std::string format_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  static_cast<void>(ec);  // 32 bytes hold any double's shortest form
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// The format reserves \ and newline in HELP text and label values, and " in label values too.
std::string escape(const std::string& text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '"' && quotes) out += "\\\"";
    else out += c;
  }
  return out;
}

void append_header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + escape(help, false) + "\n";
  out += "# TYPE " + name + " " + type + "\n";
}

void append_sample(std::string& out, const std::string& name, const std::string& labels, const std::string& value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + value + "\n";
}

void append_gauge(std::string& out, const std::string& name, const std::string& help, const std::string& labels,
                  const std::string& value) {
  append_header(out, name, help, "gauge");
  append_sample(out, name, labels, value);
}

void append_counter(std::string& out, const std::string& name, const std::string& help, const std::string& labels,
                    uint64_t value) {
  append_header(out, name, help, "counter");
  append_sample(out, name, labels, std::to_string(value));
}

}  // namespace

double kv_cache_usage(const BatcherStats& stats) {
  return stats.kv_blocks_total > 0
             ? static_cast<double>(stats.kv_blocks_used) / static_cast<double>(stats.kv_blocks_total)
             : 0.0;
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]))
      throw std::invalid_argument("Histogram: bucket bound " + std::to_string(i) + " is not finite");
    if (i > 0 && !(bounds_[i - 1] < bounds_[i]))
      throw std::invalid_argument("Histogram: bucket bounds are not strictly increasing at index " + std::to_string(i));
  }
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  if (std::isnan(value)) throw std::invalid_argument("Histogram::observe: the value is NaN");
  // A value equal to a bound belongs to that bound's bucket (le is "less than or equal").
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<size_t>(bucket)];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  append_header(out, name, help, "histogram");
  const std::string prefix = labels.empty() ? std::string() : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : HUGE_VAL;
    append_sample(out, name + "_bucket", prefix + "le=\"" + format_float(le) + "\"", std::to_string(cumulative));
  }
  append_sample(out, name + "_sum", labels, format_float(sum_));
  append_sample(out, name + "_count", labels, std::to_string(count_));
}

ServerMetrics::ServerMetrics(std::string model_name)
    : labels_("model_name=\"" + escape(model_name, true) + "\""),
      queue_time_(request_bounds()),
      ttft_(ttft_bounds()),
      itl_(inter_token_bounds()),
      e2e_(request_bounds()) {
  for (const char* reason : kFinishReasons) finished_.emplace_back(reason, 0);
}

void ServerMetrics::observe_queue_time(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_time_.observe(seconds);
}

void ServerMetrics::observe_time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(seconds);
}

void ServerMetrics::observe_inter_token_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  itl_.observe(seconds);
}

void ServerMetrics::observe_e2e_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  e2e_.observe(seconds);
}

void ServerMetrics::count_finished(const std::string& finish_reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [reason, count] : finished_)
    if (reason == finish_reason) {
      ++count;
      return;
    }
  throw std::invalid_argument("ServerMetrics::count_finished: unknown finish reason \"" + finish_reason +
                              "\" (expected stop, length, abort or error)");
}

void ServerMetrics::count_rejected(int http_status) {
  if (http_status < 400 || http_status > 599)
    throw std::invalid_argument("ServerMetrics::count_rejected: " + std::to_string(http_status) +
                                " is not an HTTP error status");
  std::lock_guard<std::mutex> lock(mutex_);
  // Kept sorted by status, so scrapes list the series in a stable order.
  auto it = std::lower_bound(rejected_.begin(), rejected_.end(), http_status,
                             [](const std::pair<int, uint64_t>& entry, int status) { return entry.first < status; });
  if (it == rejected_.end() || it->first != http_status) it = rejected_.emplace(it, http_status, 0);
  ++it->second;
}

// Each replica's series, labelled replica="r", under names of their own: summed with the
// model's they would count twice.
void ServerMetrics::render_replicas(std::string& out, const std::vector<ReplicaStats>& replicas) const {
  const auto each = [&](const std::string& name, const std::string& help, const char* type, auto value) {
    append_header(out, name, help, type);
    for (size_t r = 0; r < replicas.size(); ++r)
      append_sample(out, name, (labels_.empty() ? "" : labels_ + ",") + "replica=\"" + std::to_string(r) + "\"",
                    value(replicas[r]));
  };
  each("orzo:replica_healthy", "1 while every stage of the replica has a worker.", "gauge",
       [](const ReplicaStats& r) { return std::string(r.healthy ? "1" : "0"); });
  each("orzo:replica_num_requests_running", "Requests in the replica's running batch.", "gauge",
       [](const ReplicaStats& r) { return std::to_string(r.running); });
  each("orzo:replica_num_requests_waiting", "Requests waiting in the replica's queue.", "gauge",
       [](const ReplicaStats& r) { return std::to_string(r.waiting); });
  each("orzo:replica_kv_cache_usage_perc", "Fraction of the replica's KV cache blocks in use (0 to 1).", "gauge",
       [](const ReplicaStats& r) {
         return format_float(r.kv_blocks_total > 0 ? static_cast<double>(r.kv_blocks_used) / r.kv_blocks_total : 0.0);
       });
  each("orzo:replica_requests_routed_total", "Requests admitted to the replica or moved to it.", "counter",
       [](const ReplicaStats& r) { return std::to_string(r.routed); });
  each("orzo:replica_engine_steps_total", "Forward steps the replica has run.", "counter",
       [](const ReplicaStats& r) { return std::to_string(r.steps); });
  each("orzo:replica_recoveries_total", "Losses of the replica's workers that its requests came through.", "counter",
       [](const ReplicaStats& r) { return std::to_string(r.recoveries); });
}

std::string ServerMetrics::render(const BatcherStats& batcher) const {
  std::string out;
  append_gauge(out, "orzo:num_requests_running", "Number of requests in the running batch.", labels_,
               std::to_string(batcher.running));
  append_gauge(out, "orzo:num_requests_waiting", "Number of requests waiting to be scheduled.", labels_,
               std::to_string(batcher.waiting));
  append_gauge(out, "orzo:num_requests_paused", "Requests out of the batch until their streams' readers catch up.",
               labels_, std::to_string(batcher.paused));
  append_gauge(out, "orzo:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1).", labels_,
               format_float(kv_cache_usage(batcher)));
  append_counter(out, "orzo:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", labels_,
                 batcher.prefix_query_tokens);
  append_counter(out, "orzo:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", labels_,
                 batcher.prefix_hit_tokens);
  append_counter(out, "orzo:prompt_tokens_total", "Prompt tokens admitted.", labels_, batcher.prompt_tokens);
  append_counter(out, "orzo:generation_tokens_total", "Tokens generated.", labels_, batcher.generated_tokens);
  append_counter(out, "orzo:num_preemptions_total", "Requests preempted to free KV cache blocks.", labels_,
                 batcher.preemptions);
  append_counter(out, "orzo:engine_steps_total", "Forward steps the batcher has run.", labels_, batcher.steps);
  append_counter(out, "orzo:recoveries_total", "Lost workers whose requests went on once their layers were served again.",
                 labels_, batcher.recoveries);
  append_header(out, "orzo:recovery_pause_seconds_total", "Time from each such loss to serving again, summed.", "counter");
  append_sample(out, "orzo:recovery_pause_seconds_total", labels_,
                format_float(static_cast<double>(batcher.recovery_pause_ns) / 1e9));
  append_counter(out, "orzo:requests_moved_total", "Requests that went on in another replica after theirs lost a worker.",
                 labels_, batcher.moved);
  render_replicas(out, batcher.replicas);

  std::lock_guard<std::mutex> lock(mutex_);
  append_header(out, "orzo:request_success_total", "Requests finished, by finish reason.", "counter");
  for (const auto& [reason, count] : finished_)
    append_sample(out, "orzo:request_success_total", labels_ + ",finished_reason=\"" + reason + "\"",
                  std::to_string(count));
  append_header(out, "orzo:request_rejected_total", "Requests refused before a session started, by HTTP status.",
                "counter");
  for (const auto& [status, count] : rejected_)
    append_sample(out, "orzo:request_rejected_total", labels_ + ",status=\"" + std::to_string(status) + "\"",
                  std::to_string(count));
  ttft_.render(out, "orzo:time_to_first_token_seconds", "Time to first token in seconds.", labels_);
  itl_.render(out, "orzo:inter_token_latency_seconds", "Time between successive output tokens in seconds.", labels_);
  e2e_.render(out, "orzo:e2e_request_latency_seconds", "End-to-end request latency in seconds.", labels_);
  queue_time_.render(out, "orzo:request_queue_time_seconds",
                     "Time from admission to the first scheduled step in seconds.", labels_);
  return out;
}

}  // namespace orzo
