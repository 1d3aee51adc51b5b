// Emulated streams, captures, graphs and kernel launches. Work waits in its stream's queue
// until the host waits for it (a synchronize, a blocking copy, cudaFree): the latest schedule
// CUDA allows, so host code that reads results or reuses pinned inputs before it waits sees
// the stale bytes it would see on a GPU under load. The legacy stream and the blocking streams
// of a device share one queue (CUDA orders them with each other); each non-blocking stream has
// its own. A captured stream records its work into a graph instead, which a launch replays
// with the arguments of the capture.
#include <cuda_runtime.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda_cpu/block.hpp"
#include "kernels/cuda_cpu/runtime_state.hpp"

struct CUgraph_st {
  std::vector<orzo::cuda_cpu::Op> ops;
};
struct CUgraphExec_st {
  std::vector<orzo::cuda_cpu::Op> ops;
};

namespace orzo::cuda_cpu {
namespace {

struct Queue {
  std::mutex ops_mutex;  // guards ops
  std::deque<Op> ops;
  std::mutex run_mutex;  // one host thread runs a queue at a time, in order
};

}  // namespace
}  // namespace orzo::cuda_cpu

struct CUstream_st {
  int device = 0;
  orzo::cuda_cpu::Queue* queue = nullptr;
  std::shared_ptr<orzo::cuda_cpu::Queue> own;  // a non-blocking stream's; shared with a drain_device running it
  // While capturing: the graph being recorded, how, and by which thread.
  std::unique_ptr<CUgraph_st> capture;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id owner;
  bool invalidated = false;
};

namespace orzo::cuda_cpu {
namespace {

struct DeviceQueues {
  Queue legacy_queue;
  CUstream_st legacy;
  std::vector<CUstream_st*> streams;  // every stream made on the device
  DeviceQueues() { legacy.queue = &legacy_queue; }
};

std::mutex streams_mutex;  // guards the stream lists and every stream's capture state
DeviceQueues devices[kDevices];

CUstream_st* resolve(cudaStream_t s) {
  if (s) return s;
  static const bool numbered = [] {
    for (int d = 0; d < kDevices; ++d) devices[d].legacy.device = d;
    return true;
  }();
  (void)numbered;
  return &devices[current_device()].legacy;
}

std::string run_queue(Queue& q) {
  std::lock_guard<std::mutex> running(q.run_mutex);
  std::string first_fault;
  for (;;) {
    Op op;
    {
      std::lock_guard<std::mutex> lock(q.ops_mutex);
      if (q.ops.empty()) break;
      op = std::move(q.ops.front());
      q.ops.pop_front();
    }
    std::string fault = op();
    if (first_fault.empty()) first_fault = std::move(fault);
  }
  return first_fault;
}

bool capturing(const CUstream_st* s) { return s->capture != nullptr; }

}  // namespace

cudaError_t enqueue(cudaStream_t stream, Op op) {
  CUstream_st* s = resolve(stream);
  {
    std::lock_guard<std::mutex> lock(streams_mutex);
    if (capturing(s)) {
      s->capture->ops.push_back(std::move(op));
      return cudaSuccess;
    }
  }
  std::lock_guard<std::mutex> lock(s->queue->ops_mutex);
  s->queue->ops.push_back(std::move(op));
  return cudaSuccess;
}

cudaError_t drain(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  {
    std::lock_guard<std::mutex> lock(streams_mutex);
    if (capturing(s)) {
      s->invalidated = true;
      return fail(cudaErrorStreamCaptureUnsupported);
    }
  }
  const std::string fault = run_queue(*s->queue);
  return fault.empty() ? cudaSuccess : report_fault(fault);
}

cudaError_t drain_device(int device) {
  // Another thread may destroy its stream meanwhile: the queue lives on until it has run.
  std::vector<std::shared_ptr<Queue>> queues;
  {
    std::lock_guard<std::mutex> lock(streams_mutex);
    for (auto* s : devices[device].streams)
      if (s->own) queues.push_back(s->own);
  }
  std::string first_fault = run_queue(devices[device].legacy_queue);
  for (const auto& q : queues) {
    std::string fault = run_queue(*q);
    if (first_fault.empty()) first_fault = std::move(fault);
  }
  return first_fault.empty() ? cudaSuccess : report_fault(first_fault);
}

cudaError_t forbidden_in_capture() {
  std::lock_guard<std::mutex> lock(streams_mutex);
  bool broke = false;
  for (auto& d : devices)
    for (auto* s : d.streams) {
      if (!capturing(s)) continue;
      const bool applies = s->mode == cudaStreamCaptureModeGlobal ||
                           (s->mode == cudaStreamCaptureModeThreadLocal && s->owner == std::this_thread::get_id());
      if (applies) {
        s->invalidated = true;
        broke = true;
      }
    }
  return broke ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

void enqueue_grid(const void* kernel, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                  std::function<void()> body, const char* file, int line) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  // More than the default 48 KiB of dynamic shared memory needs the kernel's opt-in.
  if (shared > kMaxSharedBytes ||
      (shared > kStaticSharedBytes && shared > static_cast<size_t>(dynamic_shared_allowed(kernel)))) {
    fail(cudaErrorInvalidValue);
    return;
  }
  auto g = std::make_shared<Grid>(Grid{grid, block, shared, std::move(body), file, line});
  enqueue(stream, [g] { return run_grid(*g); });
}

}  // namespace orzo::cuda_cpu

using namespace orzo::cuda_cpu;

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  auto* s = new CUstream_st;
  s->device = current_device();
  if (flags & cudaStreamNonBlocking) {
    s->own = std::make_shared<Queue>();
    s->queue = s->own.get();
  } else {
    s->queue = &devices[s->device].legacy_queue;
  }
  std::lock_guard<std::mutex> lock(streams_mutex);
  devices[s->device].streams.push_back(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  run_queue(*stream->queue);  // its work still completes
  std::lock_guard<std::mutex> lock(streams_mutex);
  auto& list = devices[stream->device].streams;
  for (auto it = list.begin(); it != list.end(); ++it)
    if (*it == stream) {
      list.erase(it);
      delete stream;
      return cudaSuccess;
    }
  return fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return drain(stream); }

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
  std::lock_guard<std::mutex> lock(streams_mutex);
  if (capturing(stream)) return fail(cudaErrorIllegalState);
  stream->capture = std::make_unique<CUgraph_st>();
  stream->mode = mode;
  stream->owner = std::this_thread::get_id();
  stream->invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  *graph = nullptr;
  if (!stream) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(streams_mutex);
  if (!capturing(stream)) return fail(cudaErrorIllegalState);
  if (stream->mode == cudaStreamCaptureModeThreadLocal && stream->owner != std::this_thread::get_id())
    return fail(cudaErrorStreamCaptureWrongThread);
  std::unique_ptr<CUgraph_st> recorded = std::move(stream->capture);
  if (stream->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = recorded.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  CUstream_st* s = resolve(stream);
  std::lock_guard<std::mutex> lock(streams_mutex);
  *status = !capturing(s) ? cudaStreamCaptureStatusNone
            : s->invalidated ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail(cudaErrorInvalidValue);
  for (const Op& op : exec->ops)
    if (const cudaError_t e = enqueue(stream, op)) return e;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
