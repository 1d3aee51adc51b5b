#include "server/stats_reporter.hpp"

#include "server/stats_log.hpp"

#include <caf/all.hpp>

#include <optional>
#include <stdexcept>
#include <utility>

namespace orzo {

StatsReporter::StatsReporter(caf::actor_system& sys, batcher_actor batcher, std::chrono::duration<double> interval,
                             LogFormat format, std::function<void(const std::string&)> write)
    : sys_(sys), batcher_(std::move(batcher)),
      interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval)), format_(format),
      write_(std::move(write)) {
  if (!(interval_.count() > 0))
    throw std::invalid_argument("StatsReporter: the interval must be positive, not " +
                                std::to_string(interval.count()) + " s");
  thread_ = std::thread([this] { run(); });
}

StatsReporter::~StatsReporter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StatsReporter::run() {
  caf::scoped_actor self{sys_};
  struct Sample {
    BatcherStats stats;
    std::chrono::steady_clock::time_point at;
  };
  std::optional<Sample> last;
  auto next = std::chrono::steady_clock::now();  // the first reply is the baseline
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    next += interval_;
    std::optional<BatcherStats> stats;
    // A batcher that does not answer costs this interval's line only (/health says why); the
    // next line then covers the longer interval since the last answer.
    self->request(batcher_, std::chrono::seconds(5), stats_atom::value)
        .receive([&](BatcherStats& s) { stats = std::move(s); }, [](caf::error&) {});
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + interval_;  // a slow answer: no burst of catch-up lines
    if (!stats) continue;
    if (last)
      if (auto line = stats_line(last->stats, *stats, std::chrono::duration<double>(now - last->at).count(), format_))
        write_(*line);
    last = Sample{std::move(*stats), now};
  }
}

}  // namespace orzo
