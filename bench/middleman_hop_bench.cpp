// What one pipeline hop costs when the next stage is in another process: a StepRequest with
// `rows` decode rows and their hidden states (rows x hidden floats) goes to a stage that
// answers at once with an empty StepResult, either in this actor system (`local`) or in a
// second one reached through the CAF middleman on loopback (`remote`: serialization, TCP,
// deserialization, both ways). The difference between the two is the middleman's share of
// a step; `bytes` is the serialized request. Both systems live in this process, on the
// same cores, as two processes on one machine would be.

#include "actors/remote.hpp"
#include "actors/system_config.hpp"
#include "protocol/interfaces.hpp"

#include <benchmark/benchmark.h>
#include <caf/all.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace orzo;

// Answers every step at once: no compute, only the hop.
using echo_stage = caf::typed_actor<caf::replies_to<StepRequest>::with<StepResult>>;

echo_stage::behavior_type echo(echo_stage::pointer) {
  return {[](StepRequest& req) { return StepResult{req.step, {}}; }};
}

// `rows` sequences decoding one token each at position 200 (13 blocks of 16), with hidden states.
StepRequest decode_step(int64_t rows, int64_t hidden) {
  StepRequest req;
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t token = 7;
    req.batch.block_tables.push_back(std::vector<int32_t>(13, r));
    req.batch.add_chunk(r, &token, 1, 200, true);
    req.seq_ids.push_back(static_cast<uint64_t>(r));
  }
  req.hidden.assign(static_cast<size_t>(rows * hidden), 0.5f);
  return req;
}

struct Node {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  Node() {
    configure_actor_system(cfg, ProcessThreads{2});
    load_middleman(cfg, {});
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

void BM_StepHop(benchmark::State& state, bool remote) {
  const int64_t rows = state.range(0), hidden = state.range(1);
  Node here, there;
  auto stage = there.sys->spawn(echo);
  echo_stage target = stage;
  if (remote) {
    auto port = there.sys->middleman().publish(stage, 0, "127.0.0.1", true);
    if (!port) throw std::runtime_error(there.sys->render(port.error()));
    auto proxy = here.sys->middleman().remote_actor<echo_stage>("127.0.0.1", *port);
    if (!proxy) throw std::runtime_error(here.sys->render(proxy.error()));
    target = *proxy;
  }
  const StepRequest req = decode_step(rows, hidden);
  std::vector<char> bytes;
  caf::binary_serializer sink{*here.sys, bytes};
  StepRequest copy = req;
  if (sink(copy)) throw std::runtime_error("cannot serialize");
  caf::scoped_actor self{remote ? *here.sys : *there.sys};
  for (auto _ : state) {
    bool ok = false;
    self->request(target, std::chrono::seconds(10), req).receive([&](StepResult&) { ok = true; }, [&](caf::error&) {});
    if (!ok) state.SkipWithError("no reply");
  }
  state.counters["bytes"] = static_cast<double>(bytes.size());
  caf::anon_send_exit(stage, caf::exit_reason::user_shutdown);
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t hidden : {64, 1024, 4096})
    for (int64_t rows : {1, 64}) b->Args({rows, hidden});
  b->ArgNames({"rows", "hidden"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_StepHop, local, false)->Apply(args);
BENCHMARK_CAPTURE(BM_StepHop, remote, true)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
