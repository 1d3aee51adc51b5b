#include "server/stats_log.hpp"

#include "server/json_text.hpp"
#include "server/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace orzo {
namespace {

// A counter's growth over the interval. The batcher's counters only grow; a smaller value
// means a new batcher answered (counting from zero), so all of it is this interval's.
uint64_t delta(uint64_t before, uint64_t now) { return now >= before ? now - before : now; }

// One decimal: what the text shows, and what JSON carries.
double tenths(double v) { return std::round(v * 10) / 10; }

}  // namespace

std::optional<std::string> stats_line(const BatcherStats& before, const BatcherStats& now, double seconds,
                                      LogFormat format) {
  if (!(seconds > 0) || !std::isfinite(seconds))
    throw std::invalid_argument("stats_line: the interval must be a positive number of seconds, not " +
                                std::to_string(seconds));
  const uint64_t prompt = delta(before.prompt_tokens, now.prompt_tokens);
  const uint64_t generated = delta(before.generated_tokens, now.generated_tokens);
  const uint64_t steps = delta(before.steps, now.steps);
  if (now.running == 0 && now.waiting == 0 && steps == 0 && prompt == 0 && generated == 0) return std::nullopt;

  const double prompt_rate = tenths(static_cast<double>(prompt) / seconds);
  const double generation_rate = tenths(static_cast<double>(generated) / seconds);
  const double kv_perc = tenths(kv_cache_usage(now) * 100);
  const uint64_t queried = delta(before.prefix_query_tokens, now.prefix_query_tokens);
  std::optional<double> hit_perc;
  if (queried > 0)
    hit_perc = tenths(100.0 * static_cast<double>(delta(before.prefix_hit_tokens, now.prefix_hit_tokens)) /
                      static_cast<double>(queried));

  if (format == LogFormat::json) {
    nlohmann::ordered_json j = {{"log", "stats"},
                                {"interval_s", std::round(seconds * 1000) / 1000},
                                {"prompt_tokens_per_s", prompt_rate},
                                {"generation_tokens_per_s", generation_rate},
                                {"running", now.running},
                                {"waiting", now.waiting},
                                {"kv_cache_usage_perc", kv_perc}};
    j["prefix_cache_hit_rate_perc"] = hit_perc ? nlohmann::ordered_json(*hit_perc) : nullptr;
    return json_text(j);
  }
  char hit[16] = "-";
  if (hit_perc) std::snprintf(hit, sizeof hit, "%.1f%%", *hit_perc);
  char line[256];
  std::snprintf(line, sizeof line,
                "stats: prompt %.1f tokens/s, generation %.1f tokens/s, running %d, waiting %d, KV cache %.1f%%, "
                "prefix cache hit rate %s",
                prompt_rate, generation_rate, now.running, now.waiting, kv_perc, hit);
  return std::string(line);
}

}  // namespace orzo
