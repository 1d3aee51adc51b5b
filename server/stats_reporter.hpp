#pragma once
// The clock behind the periodic stats line: a thread that asks the batcher for its stats
// every interval, as /metrics does on a scrape, and writes stats_line() of the last two
// replies. The stats are asked for, never counted here, so there is one count of each thing.

#include "protocol/interfaces.hpp"
#include "server/log_format.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace caf {
class actor_system;
}

namespace orzo {

class StatsReporter {
 public:
  // Starts at once; `write` gets each line (no newline), on the reporter's thread.
  // Throws std::invalid_argument when `interval` is not positive.
  StatsReporter(caf::actor_system& sys, batcher_actor batcher, std::chrono::duration<double> interval,
                LogFormat format, std::function<void(const std::string&)> write);
  ~StatsReporter();  // stops and joins; must run before the actor system goes
  StatsReporter(const StatsReporter&) = delete;
  StatsReporter& operator=(const StatsReporter&) = delete;

 private:
  void run();

  caf::actor_system& sys_;
  batcher_actor batcher_;
  std::chrono::steady_clock::duration interval_;
  LogFormat format_;
  std::function<void(const std::string&)> write_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace orzo
