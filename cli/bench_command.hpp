#pragma once
// `orzo bench`: offline throughput in the manner of llama.cpp's batched-bench.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_bench_command(CLI::App& app);

}  // namespace orzo::cli
