#pragma once
// The periodic stats line of `orzo serve` (--stats-interval), as vLLM logs throughput: made
// from two of the batcher's stats replies, the same counters /metrics shows, so the line's
// rates are their deltas over the interval and can never disagree with a scrape.

#include "protocol/status.hpp"
#include "server/log_format.hpp"

#include <optional>
#include <string>

namespace orzo {

// The interval from `before` to `now`, `seconds` long (> 0), as one line without the newline,
// or none when the server was idle: nothing running or waiting, and no step or token since
// `before`. Text: "stats: prompt 12.0 tokens/s, generation 80.5 tokens/s, running 2, waiting 0,
// KV cache 3.1%, prefix cache hit rate 25.0%" ("-" when no prompt was looked up). JSON:
// {"log":"stats","interval_s",...}, the hit rate null when no prompt was looked up.
// Throws std::invalid_argument when `seconds` is not positive.
std::optional<std::string> stats_line(const BatcherStats& before, const BatcherStats& now, double seconds,
                                      LogFormat format);

}  // namespace orzo
