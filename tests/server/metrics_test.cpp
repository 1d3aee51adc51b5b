// GET /metrics output: histogram bucketing, the Prometheus text format line by line,
// label escaping, and counting from many threads at once.

#include "server/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace orzo {
namespace {

// One exposition, read back: each sample by "name{labels}" (as written), each family's type.
struct Exposition {
  std::map<std::string, std::string> samples;
  std::map<std::string, std::string> types;
};

// Fails the test on any line that is neither a HELP/TYPE comment nor `name{labels} value`,
// on a sample that comes before its family's TYPE line, and on a family typed twice.
Exposition parse(const std::string& text) {
  static const std::regex comment(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\[\\"n])*")"
      R"((?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\[\\"n])*")*\})? ([-+]?(?:[0-9.eE+-]+|Inf)|NaN))");
  Exposition e;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::istringstream in(text);
  std::string line, family;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, comment)) {
      if (m[1] == "TYPE") {
        EXPECT_TRUE(e.types.emplace(m[2], m[3]).second) << "typed twice: " << line;
        family = m[2];
      }
      continue;
    }
    if (!std::regex_match(line, m, sample)) {
      ADD_FAILURE() << "not a comment nor a sample: [" << line << "]";
      continue;
    }
    const std::string name = m[1];
    const auto type = e.types.find(family);
    const bool in_family = name == family || (type != e.types.end() && type->second == "histogram" &&
                                              (name == family + "_bucket" || name == family + "_sum" ||
                                               name == family + "_count"));
    EXPECT_TRUE(in_family) << "sample outside its family's block: " << line;
    EXPECT_TRUE(e.samples.emplace(name + m[2].str(), m[3]).second) << "sample repeated: " << line;
  }
  return e;
}

std::string render(const Histogram& h, const std::string& labels = {}) {
  std::string out;
  h.render(out, "h", "A test histogram.", labels);
  return out;
}

TEST(Metrics, ValueOnABoundCountsInThatBucket) {
  Histogram h({0.1, 0.5, 1.0});
  for (double v : {-3.0, 0.1, std::nextafter(0.1, 1.0), 0.5, 1.0, std::nextafter(1.0, 2.0), 1e9}) h.observe(v);
  const auto e = parse(render(h));
  EXPECT_EQ(e.samples.at("h_bucket{le=\"0.1\"}"), "2");   // -3 and 0.1
  EXPECT_EQ(e.samples.at("h_bucket{le=\"0.5\"}"), "4");   // + just above 0.1, and 0.5
  EXPECT_EQ(e.samples.at("h_bucket{le=\"1.0\"}"), "5");   // + 1.0
  EXPECT_EQ(e.samples.at("h_bucket{le=\"+Inf\"}"), "7");  // + just above 1.0, and 1e9
  EXPECT_EQ(e.samples.at("h_count"), "7");
  EXPECT_EQ(h.count(), 7u);
  EXPECT_DOUBLE_EQ(h.sum(), -3.0 + 0.1 + std::nextafter(0.1, 1.0) + 0.5 + 1.0 + std::nextafter(1.0, 2.0) + 1e9);
}

TEST(Metrics, HistogramRendersCumulativeBucketsInOrder) {
  Histogram h({0.005, 0.25, 2.0, 2560.0});
  h.observe(0.00390625);  // sums exactly in binary, so the _sum line is known to the digit
  h.observe(1.5);
  h.observe(1.5);
  h.observe(3000);
  EXPECT_EQ(render(h, "model_name=\"m\""),
            "# HELP h A test histogram.\n"
            "# TYPE h histogram\n"
            "h_bucket{model_name=\"m\",le=\"0.005\"} 1\n"
            "h_bucket{model_name=\"m\",le=\"0.25\"} 1\n"
            "h_bucket{model_name=\"m\",le=\"2.0\"} 3\n"
            "h_bucket{model_name=\"m\",le=\"2560.0\"} 3\n"
            "h_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
            "h_sum{model_name=\"m\"} 3003.00390625\n"
            "h_count{model_name=\"m\"} 4\n");
}

TEST(Metrics, EmptyHistogramStillListsEveryBucket) {
  const auto e = parse(render(Histogram({1.0, 2.0})));
  EXPECT_EQ(e.samples.size(), 5u);
  EXPECT_EQ(e.samples.at("h_bucket{le=\"+Inf\"}"), "0");
  EXPECT_EQ(e.samples.at("h_sum"), "0.0");
}

TEST(Metrics, RefusesBadBoundsAndNaN) {
  EXPECT_THROW(Histogram({1.0, 1.0}), std::invalid_argument);
  EXPECT_THROW(Histogram({2.0, 1.0}), std::invalid_argument);
  EXPECT_THROW(Histogram({1.0, std::numeric_limits<double>::infinity()}), std::invalid_argument);
  EXPECT_THROW(Histogram({std::nan("")}), std::invalid_argument);
  Histogram h({1.0});
  EXPECT_THROW(h.observe(std::nan("")), std::invalid_argument);
  EXPECT_EQ(h.count(), 0u);
}

BatcherStats some_stats() {
  BatcherStats s;
  s.running = 3;
  s.waiting = 7;
  s.kv_blocks_total = 400;
  s.kv_blocks_used = 100;
  s.steps = 12345;
  s.prompt_tokens = 640;
  s.generated_tokens = 2048;
  s.prefix_query_tokens = 600;
  s.prefix_hit_tokens = 256;
  s.preemptions = 2;
  s.recoveries = 3;
  s.recovery_pause_ns = 4'500'000'000;
  s.moved = 5;
  s.replicas = {ReplicaStats{true, 2, 3, 200, 50, 10000, 40, 0}, ReplicaStats{false, 1, 4, 200, 50, 2345, 9, 3}};
  return s;
}

TEST(Metrics, FullRenderIsWellFormedAndComplete) {
  ServerMetrics m("stories260K");
  m.observe_queue_time(0.002);
  m.observe_time_to_first_token(0.04);
  m.observe_inter_token_latency(0.01);
  m.observe_inter_token_latency(0.3);
  m.observe_e2e_latency(1.25);
  m.count_finished("stop");
  m.count_finished("length");
  m.count_finished("length");
  m.count_rejected(503);
  m.count_rejected(429);
  m.count_rejected(429);
  const auto e = parse(m.render(some_stats()));

  const std::map<std::string, std::string> types = {
      {"orzo:num_requests_running", "gauge"},
      {"orzo:num_requests_waiting", "gauge"},
      {"orzo:num_requests_paused", "gauge"},
      {"orzo:kv_cache_usage_perc", "gauge"},
      {"orzo:prefix_cache_queries_total", "counter"},
      {"orzo:prefix_cache_hits_total", "counter"},
      {"orzo:prompt_tokens_total", "counter"},
      {"orzo:generation_tokens_total", "counter"},
      {"orzo:num_preemptions_total", "counter"},
      {"orzo:engine_steps_total", "counter"},
      {"orzo:recoveries_total", "counter"},
      {"orzo:recovery_pause_seconds_total", "counter"},
      {"orzo:requests_moved_total", "counter"},
      {"orzo:replica_healthy", "gauge"},
      {"orzo:replica_num_requests_running", "gauge"},
      {"orzo:replica_num_requests_waiting", "gauge"},
      {"orzo:replica_kv_cache_usage_perc", "gauge"},
      {"orzo:replica_requests_routed_total", "counter"},
      {"orzo:replica_engine_steps_total", "counter"},
      {"orzo:replica_recoveries_total", "counter"},
      {"orzo:request_success_total", "counter"},
      {"orzo:request_rejected_total", "counter"},
      {"orzo:time_to_first_token_seconds", "histogram"},
      {"orzo:inter_token_latency_seconds", "histogram"},
      {"orzo:e2e_request_latency_seconds", "histogram"},
      {"orzo:request_queue_time_seconds", "histogram"},
  };
  EXPECT_EQ(e.types, types);

  const std::string l = "{model_name=\"stories260K\"}";
  EXPECT_EQ(e.samples.at("orzo:num_requests_running" + l), "3");
  EXPECT_EQ(e.samples.at("orzo:num_requests_waiting" + l), "7");
  EXPECT_EQ(e.samples.at("orzo:kv_cache_usage_perc" + l), "0.25");
  EXPECT_EQ(e.samples.at("orzo:prefix_cache_queries_total" + l), "600");
  EXPECT_EQ(e.samples.at("orzo:prefix_cache_hits_total" + l), "256");
  EXPECT_EQ(e.samples.at("orzo:prompt_tokens_total" + l), "640");
  EXPECT_EQ(e.samples.at("orzo:generation_tokens_total" + l), "2048");
  EXPECT_EQ(e.samples.at("orzo:num_preemptions_total" + l), "2");
  EXPECT_EQ(e.samples.at("orzo:recoveries_total" + l), "3");
  EXPECT_EQ(e.samples.at("orzo:recovery_pause_seconds_total" + l), "4.5");
  EXPECT_EQ(e.samples.at("orzo:engine_steps_total" + l), "12345");
  EXPECT_EQ(e.samples.at("orzo:requests_moved_total" + l), "5");

  const auto replica = [](int r) { return "{model_name=\"stories260K\",replica=\"" + std::to_string(r) + "\"}"; };
  EXPECT_EQ(e.samples.at("orzo:replica_healthy" + replica(0)), "1");
  EXPECT_EQ(e.samples.at("orzo:replica_healthy" + replica(1)), "0");
  EXPECT_EQ(e.samples.at("orzo:replica_num_requests_running" + replica(1)), "1");
  EXPECT_EQ(e.samples.at("orzo:replica_num_requests_waiting" + replica(1)), "4");
  EXPECT_EQ(e.samples.at("orzo:replica_kv_cache_usage_perc" + replica(0)), "0.25");
  EXPECT_EQ(e.samples.at("orzo:replica_requests_routed_total" + replica(0)), "40");
  EXPECT_EQ(e.samples.at("orzo:replica_engine_steps_total" + replica(1)), "2345");
  EXPECT_EQ(e.samples.at("orzo:replica_recoveries_total" + replica(1)), "3");

  const std::string r = "orzo:request_success_total{model_name=\"stories260K\",finished_reason=";
  EXPECT_EQ(e.samples.at(r + "\"stop\"}"), "1");
  EXPECT_EQ(e.samples.at(r + "\"length\"}"), "2");
  EXPECT_EQ(e.samples.at(r + "\"abort\"}"), "0");
  EXPECT_EQ(e.samples.at(r + "\"error\"}"), "0");
  const std::string j = "orzo:request_rejected_total{model_name=\"stories260K\",status=";
  EXPECT_EQ(e.samples.at(j + "\"429\"}"), "2");
  EXPECT_EQ(e.samples.at(j + "\"503\"}"), "1");

  // Each observation landed in its own histogram: vLLM's bounds, so 0.04 s is on TTFT's 0.04 bound.
  const std::string b = "_bucket{model_name=\"stories260K\",le=";
  EXPECT_EQ(e.samples.at("orzo:time_to_first_token_seconds" + b + "\"0.02\"}"), "0");
  EXPECT_EQ(e.samples.at("orzo:time_to_first_token_seconds" + b + "\"0.04\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:time_to_first_token_seconds" + b + "\"2560.0\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:inter_token_latency_seconds" + b + "\"0.01\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:inter_token_latency_seconds" + b + "\"0.3\"}"), "2");
  EXPECT_EQ(e.samples.at("orzo:inter_token_latency_seconds_count" + l), "2");
  EXPECT_EQ(e.samples.at("orzo:e2e_request_latency_seconds" + b + "\"1.0\"}"), "0");
  EXPECT_EQ(e.samples.at("orzo:e2e_request_latency_seconds" + b + "\"1.5\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:e2e_request_latency_seconds_sum" + l), "1.25");
  EXPECT_EQ(e.samples.at("orzo:request_queue_time_seconds" + b + "\"0.3\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:request_queue_time_seconds" + b + "\"7680.0\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:request_queue_time_seconds_count" + l), "1");
}

TEST(Metrics, IdleServerShowsZeroesAndEmptyKvCache) {
  const auto e = parse(ServerMetrics("m").render(BatcherStats{}));
  EXPECT_EQ(e.samples.at("orzo:kv_cache_usage_perc{model_name=\"m\"}"), "0.0");
  EXPECT_EQ(e.samples.at("orzo:request_success_total{model_name=\"m\",finished_reason=\"abort\"}"), "0");
  EXPECT_EQ(e.samples.at("orzo:time_to_first_token_seconds_count{model_name=\"m\"}"), "0");
  EXPECT_EQ(e.types.at("orzo:request_rejected_total"), "counter");
}

TEST(Metrics, ModelNameIsEscapedInEveryLabel) {
  ServerMetrics m("we\"ird\\name\nx");
  m.count_rejected(400);
  const std::string text = m.render(some_stats());
  const auto e = parse(text);
  const std::string escaped = "model_name=\"we\\\"ird\\\\name\\nx\"";
  EXPECT_EQ(e.samples.at("orzo:num_requests_running{" + escaped + "}"), "3");
  EXPECT_EQ(e.samples.at("orzo:request_rejected_total{" + escaped + ",status=\"400\"}"), "1");
  EXPECT_EQ(e.samples.at("orzo:e2e_request_latency_seconds_bucket{" + escaped + ",le=\"+Inf\"}"), "0");
  std::set<std::string> labelled;
  for (const auto& [series, value] : e.samples) labelled.insert(series.substr(series.find('{')));
  for (const auto& labels : labelled) EXPECT_EQ(labels.rfind("{" + escaped, 0), 0u) << labels;
}

TEST(Metrics, RefusesUnknownFinishReasonsAndNonErrorStatuses) {
  ServerMetrics m("m");
  EXPECT_THROW(m.count_finished("eos"), std::invalid_argument);
  EXPECT_THROW(m.count_rejected(200), std::invalid_argument);
  EXPECT_THROW(m.count_rejected(600), std::invalid_argument);
  const auto e = parse(m.render(BatcherStats{}));
  EXPECT_EQ(e.samples.count("orzo:request_success_total{model_name=\"m\",finished_reason=\"eos\"}"), 0u);
}

TEST(Metrics, CountsFromManyThreads) {
  ServerMetrics m("m");
  constexpr int kThreads = 8, kEach = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < kEach; ++i) {
        m.observe_time_to_first_token(0.001 * (i % 7));
        m.observe_inter_token_latency(0.01);
        m.count_finished(t % 2 ? "stop" : "length");
        if (i % 100 == 0) m.count_rejected(429);
        if (i % 1000 == 0) static_cast<void>(m.render(BatcherStats{}));
      }
    });
  for (auto& th : threads) th.join();
  const auto e = parse(m.render(BatcherStats{}));
  const auto total = std::to_string(kThreads * kEach);
  EXPECT_EQ(e.samples.at("orzo:time_to_first_token_seconds_count{model_name=\"m\"}"), total);
  EXPECT_EQ(e.samples.at("orzo:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"}"), total);
  EXPECT_EQ(e.samples.at("orzo:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"0.01\"}"), total);
  EXPECT_EQ(e.samples.at("orzo:request_success_total{model_name=\"m\",finished_reason=\"stop\"}"),
            std::to_string(kThreads / 2 * kEach));
  EXPECT_EQ(e.samples.at("orzo:request_success_total{model_name=\"m\",finished_reason=\"length\"}"),
            std::to_string(kThreads / 2 * kEach));
  EXPECT_EQ(e.samples.at("orzo:request_rejected_total{model_name=\"m\",status=\"429\"}"),
            std::to_string(kThreads * kEach / 100));
}

}  // namespace
}  // namespace orzo
