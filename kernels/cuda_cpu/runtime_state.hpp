#pragma once
// What the emulated runtime's parts share (devices.cpp, memory.cpp, streams.cpp, cublas.cpp):
// the devices, where a pointer lives, the error of the calling thread, and the stream queues.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

namespace orzo::cuda_cpu {

// Two devices, so that pipelines over GPUs run; each the size of an H200.
inline constexpr int kDevices = 2;
inline constexpr size_t kDeviceBytes = size_t{141} << 30;

int current_device();
// Records e as the calling thread's last error (cudaGetLastError) and returns it.
cudaError_t fail(cudaError_t e);
// A kernel's fault, found while a queue ran: printed, kept for cudaGetErrorString, and
// returned as cudaErrorLaunchFailure by the call that waited for it.
cudaError_t report_fault(const std::string& detail);

enum class Memory { device, pinned, pageable };
// Where [p, p + bytes) lives; device and pinned ranges must lie inside one allocation, else
// `inside` is false. `device` gets the owning device of device memory.
Memory memory_at(const void* p, size_t bytes, bool* inside = nullptr, int* device = nullptr);
size_t device_bytes_in_use(int device);

// Work a stream runs when the host waits for it: empty, or the fault it hit.
using Op = std::function<std::string()>;
// Queues op on the stream (the legacy stream for null), or records it when the stream is
// being captured.
cudaError_t enqueue(cudaStream_t stream, Op op);
// Runs what is queued on the stream, or on every stream of the device.
cudaError_t drain(cudaStream_t stream);
cudaError_t drain_device(int device);
// For the calls a stream capture forbids (they would wait for or allocate on the device):
// invalidates the captures they would break and says so.
cudaError_t forbidden_in_capture();
// The dynamic shared memory a kernel was allowed with cudaFuncSetAttribute (0: the default 48 KiB).
int dynamic_shared_allowed(const void* kernel);

}  // namespace orzo::cuda_cpu
