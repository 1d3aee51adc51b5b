// The periodic stats line: rates from the counters' deltas over the interval (never their
// totals), the gauges as they are now, text and JSON, and no line for an idle interval.

#include "server/stats_log.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

namespace orzo {
namespace {

BatcherStats before() {
  BatcherStats s;
  s.kv_blocks_total = 64;
  s.steps = 1000;
  s.prompt_tokens = 5000;
  s.generated_tokens = 20000;
  s.prefix_query_tokens = 4000;
  s.prefix_hit_tokens = 1000;
  return s;
}

BatcherStats busy() {
  BatcherStats s = before();
  s.running = 3;
  s.waiting = 2;
  s.kv_blocks_used = 8;
  s.steps += 50;
  s.prompt_tokens += 120;
  s.generated_tokens += 805;
  s.prefix_query_tokens += 100;
  s.prefix_hit_tokens += 25;
  return s;
}

TEST(StatsLog, TextRatesAreDeltasOverTheInterval) {
  EXPECT_EQ(stats_line(before(), busy(), 10.0, LogFormat::text),
            "stats: prompt 12.0 tokens/s, generation 80.5 tokens/s, running 3, waiting 2, KV cache 12.5%, "
            "prefix cache hit rate 25.0%");
}

TEST(StatsLog, JsonHasTheSameNumbers) {
  const auto line = stats_line(before(), busy(), 10.0, LogFormat::json);
  ASSERT_TRUE(line);
  const auto j = nlohmann::json::parse(*line);
  EXPECT_EQ(j["log"], "stats");
  EXPECT_DOUBLE_EQ(j["interval_s"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["prompt_tokens_per_s"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(j["generation_tokens_per_s"].get<double>(), 80.5);
  EXPECT_EQ(j["running"], 3);
  EXPECT_EQ(j["waiting"], 2);
  EXPECT_DOUBLE_EQ(j["kv_cache_usage_perc"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["prefix_cache_hit_rate_perc"].get<double>(), 25.0);
}

TEST(StatsLog, AnIdleIntervalHasNoLine) {
  EXPECT_FALSE(stats_line(before(), before(), 10.0, LogFormat::text));
  EXPECT_FALSE(stats_line(before(), before(), 10.0, LogFormat::json));
  EXPECT_FALSE(stats_line(BatcherStats{}, BatcherStats{}, 1.0, LogFormat::text));
}

TEST(StatsLog, WorkThatEndedInTheIntervalOrWaitingWorkIsNotIdle) {
  BatcherStats ended = busy();
  ended.running = ended.waiting = 0;
  ended.kv_blocks_used = 0;
  EXPECT_EQ(stats_line(before(), ended, 10.0, LogFormat::text),
            "stats: prompt 12.0 tokens/s, generation 80.5 tokens/s, running 0, waiting 0, KV cache 0.0%, "
            "prefix cache hit rate 25.0%");
  BatcherStats queued = before();
  queued.waiting = 1;
  EXPECT_EQ(stats_line(before(), queued, 2.0, LogFormat::text),
            "stats: prompt 0.0 tokens/s, generation 0.0 tokens/s, running 0, waiting 1, KV cache 0.0%, "
            "prefix cache hit rate -");
  const auto j = nlohmann::json::parse(*stats_line(before(), queued, 2.0, LogFormat::json));
  EXPECT_TRUE(j["prefix_cache_hit_rate_perc"].is_null());
}

TEST(StatsLog, ARestartedBatcherCountsFromZero) {
  BatcherStats fresh;
  fresh.running = 1;
  fresh.generated_tokens = 30;
  const auto j = nlohmann::json::parse(*stats_line(busy(), fresh, 3.0, LogFormat::json));
  EXPECT_DOUBLE_EQ(j["generation_tokens_per_s"].get<double>(), 10.0);
}

TEST(StatsLog, AnIntervalMustBePositive) {
  EXPECT_THROW(stats_line(before(), busy(), 0.0, LogFormat::text), std::invalid_argument);
  EXPECT_THROW(stats_line(before(), busy(), -1.0, LogFormat::text), std::invalid_argument);
}

}  // namespace
}  // namespace orzo
