#pragma once
// `orzo bench --actors` / `--backend null`: the same workload as the bare forward-pass bench,
// sent as concurrent sessions through the batcher and its workers, so the two can be read
// side by side; with the null backend, what the runtime alone costs per step and per token.

#include "cli/bench_options.hpp"

namespace orzo::cli {

void run_actor_bench(const BenchOptions& o);

}  // namespace orzo::cli
