#pragma once
// How `orzo serve` writes its per-request and periodic log lines (--log-format): text for a
// person reading stderr, or one JSON object per line for a log collector.

namespace orzo {

enum class LogFormat { text, json };

}  // namespace orzo
