#include "runtime/cuda/decode_graphs.hpp"

#include <exception>

#include "kernels/cuda/check.hpp"

namespace orzo::cuda {

std::vector<int32_t> graph_batch_sizes(int32_t max_rows) {
  std::vector<int32_t> sizes;
  for (int32_t s : {1, 2, 4})
    if (s < max_rows) sizes.push_back(s);
  for (int32_t s = 8; s < max_rows; s += 8) sizes.push_back(s);
  if (max_rows > 0) sizes.push_back(max_rows);
  return sizes;
}

int32_t graph_batch_size(int32_t rows, int32_t max_rows) {
  if (rows <= 0) return 0;
  for (int32_t size : graph_batch_sizes(max_rows))
    if (size >= rows) return size;
  return 0;
}

int32_t graph_table_stride(int32_t longest_table) {
  int32_t stride = 8;
  while (stride < longest_table) stride *= 2;
  return stride;
}

DecodeGraphs::~DecodeGraphs() {
  for (auto& [key, exec] : graphs_)
    if (exec) cudaGraphExecDestroy(exec);
}

void DecodeGraphs::run(cudaStream_t stream, int32_t rows, int32_t stride, const std::function<void()>& record) {
  const auto key = std::make_pair(rows, stride);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) {
    if (it->second) {
      check(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
    } else {
      record();
    }
    return;
  }
  record();
  // Capture only records: the step above did the work. Thread-local mode leaves other
  // threads' CUDA calls (other stages) alone.
  cudaGraphExec_t exec = nullptr;
  try {
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      record();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(made, "cudaGraphInstantiate");
  } catch (const std::exception& e) {
    cudaGetLastError();
    exec = nullptr;
    failure_ = "decode graph for " + std::to_string(rows) + " rows: " + e.what();
  }
  graphs_.emplace(key, exec);
}

}  // namespace orzo::cuda
