// The emulated devices and the runtime's errors: device selection and properties, peer
// access, kernel attributes, and each host thread's last error.
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda_cpu/block.hpp"
#include "kernels/cuda_cpu/runtime_state.hpp"

namespace orzo::cuda_cpu {

namespace {

thread_local int device_of_thread = 0;
thread_local cudaError_t last_error = cudaSuccess;
thread_local std::string last_fault;

std::mutex state_mutex;
bool peer_enabled[kDevices][kDevices] = {};
std::map<const void*, int> shared_allowed;

bool valid_device(int d) { return d >= 0 && d < kDevices; }

}  // namespace

int current_device() { return device_of_thread; }

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

cudaError_t report_fault(const std::string& detail) {
  last_fault = detail;
  std::fprintf(stderr, "CUDA emulator: %s\n", detail.c_str());
  return fail(cudaErrorLaunchFailure);
}

int dynamic_shared_allowed(const void* kernel) {
  std::lock_guard<std::mutex> lock(state_mutex);
  const auto it = shared_allowed.find(kernel);
  return it == shared_allowed.end() ? 0 : it->second;
}

}  // namespace orzo::cuda_cpu

using namespace orzo::cuda_cpu;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = kDevices;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  device_of_thread = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "CUDA emulated on the CPU (sm_90)");
  p->totalGlobalMem = kDeviceBytes;
  p->sharedMemPerBlock = kStaticSharedBytes;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(kStaticSharedBytes); break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMemoryClockRate: *value = 2619000; break;  // kHz, an H200's HBM3e
    case cudaDevAttrGlobalMemoryBusWidth: *value = 6144; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(kMaxSharedBytes); break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t e = forbidden_in_capture()) return e;
  return drain_device(current_device());
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!valid_device(device) || !valid_device(peer)) return fail(cudaErrorInvalidDevice);
  *can = device != peer;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  if (!valid_device(peer) || peer == current_device()) return fail(cudaErrorInvalidDevice);
  if (flags != 0) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(state_mutex);
  bool& enabled = peer_enabled[current_device()][peer];
  if (enabled) return fail(cudaErrorPeerAccessAlreadyEnabled);
  enabled = true;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *total_bytes = kDeviceBytes;
  *free_bytes = kDeviceBytes - device_bytes_in_use(current_device());
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define ORZO_NAME(x) \
  case x: return #x;
    ORZO_NAME(cudaSuccess)
    ORZO_NAME(cudaErrorInvalidValue)
    ORZO_NAME(cudaErrorMemoryAllocation)
    ORZO_NAME(cudaErrorInvalidConfiguration)
    ORZO_NAME(cudaErrorInvalidDevicePointer)
    ORZO_NAME(cudaErrorInvalidMemcpyDirection)
    ORZO_NAME(cudaErrorInsufficientDriver)
    ORZO_NAME(cudaErrorNoDevice)
    ORZO_NAME(cudaErrorInvalidDevice)
    ORZO_NAME(cudaErrorInvalidResourceHandle)
    ORZO_NAME(cudaErrorIllegalState)
    ORZO_NAME(cudaErrorNotReady)
    ORZO_NAME(cudaErrorPeerAccessAlreadyEnabled)
    ORZO_NAME(cudaErrorPeerAccessNotEnabled)
    ORZO_NAME(cudaErrorLaunchFailure)
    ORZO_NAME(cudaErrorStreamCaptureUnsupported)
    ORZO_NAME(cudaErrorStreamCaptureInvalidated)
    ORZO_NAME(cudaErrorStreamCaptureWrongThread)
#undef ORZO_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorLaunchFailure: {
      thread_local std::string message;
      message = "unspecified launch failure (emulated: " + last_fault + ")";
      return message.c_str();
    }
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
  }
  return "unknown error";
}

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > kMaxSharedBytes)
    return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(state_mutex);
  shared_allowed[kernel] = value;
  return cudaSuccess;
}
