#pragma once
// Decode steps as CUDA graphs: one launch replays every kernel and GEMM of the step, instead of
// some ten launches per layer from the host. A graph is captured per (batch size bucket,
// block table stride) on the first step of that shape, right after that step has run eagerly,
// and replayed from then on; a step is padded up to its bucket (padding rows read and write
// nothing that matters). Everything the graph reads lives at fixed device addresses.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace orzo::cuda {

// Batch sizes that get a graph, up to max_rows: 1, 2, 4, 8, then every multiple of 8.
std::vector<int32_t> graph_batch_sizes(int32_t max_rows);
// The smallest of them holding `rows`; 0 when none does.
int32_t graph_batch_size(int32_t rows, int32_t max_rows);
// Block tables are padded to a power of two of at least 8 entries, so that graphs stay few
// while contexts grow.
int32_t graph_table_stride(int32_t longest_table);

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Replays the graph of (rows, stride) on `stream`; without one, runs `record` (which
  // enqueues the step on `stream`) and captures what it enqueues for next time. A shape whose
  // capture fails runs eagerly from then on; failure() says why.
  void run(cudaStream_t stream, int32_t rows, int32_t stride, const std::function<void()>& record);

  size_t size() const { return graphs_.size(); }
  const std::string& failure() const { return failure_; }

 private:
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> graphs_;  // null: capture failed, run eagerly
  std::string failure_;
};

}  // namespace orzo::cuda
