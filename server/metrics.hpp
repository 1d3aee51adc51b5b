#pragma once
// What GET /metrics shows, in the Prometheus text format (version 0.0.4): the server's own
// latency histograms and finish counters, observed per request by the HTTP side, next to
// the batcher's gauges and counters (running, waiting, KV usage, prefix cache, tokens,
// preemptions), read fresh from the batcher for each scrape. Names follow vLLM's with an
// "orzo:" prefix, so dashboards carry over; every series has a model_name label.

#include "protocol/status.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace orzo {

// The fraction of KV cache blocks in use (0 to 1; 0 while the batcher reports no blocks).
double kv_cache_usage(const BatcherStats& stats);

// A cumulative histogram over fixed upper bounds (seconds), plus +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // strictly increasing, finite
  void observe(double value);
  // Appends "# HELP", "# TYPE name histogram", name_bucket{...,le="..."} lines, _sum, _count.
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels) const;

  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Safe to call from any thread.
class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  void observe_queue_time(double seconds);          // admission to first scheduled step
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  void count_finished(const std::string& finish_reason);  // "stop", "length", "abort", "error"
  void count_rejected(int http_status);              // refused before a session started (4xx/5xx)

  std::string render(const BatcherStats& batcher) const;

 private:
  void render_replicas(std::string& out, const std::vector<ReplicaStats>& replicas) const;

  std::string labels_;  // model_name="..."
  mutable std::mutex mutex_;
  Histogram queue_time_, ttft_, itl_, e2e_;
  std::vector<std::pair<std::string, uint64_t>> finished_;
  std::vector<std::pair<int, uint64_t>> rejected_;
};

}  // namespace orzo
