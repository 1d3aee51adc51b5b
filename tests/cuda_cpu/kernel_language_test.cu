// The CUDA emulator's kernel language (kernels/cuda_cpu/include/cuda_runtime.h) against the
// CUDA Programming Guide's definitions: barriers, warp collectives, atomics, shared memory and
// launch checks, and the faults it reports for kernels CUDA leaves undefined. Written in CUDA
// and translated like the kernels, so the front end (translate.py) is tested with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tests/support/cuda_harness.hpp"

namespace orzo {
namespace {

using test::DeviceBuffer;

// Waits for the device; empty, or the fault the emulator reported, with its detail.
std::string fault_of_launch() {
  const cudaError_t e = cudaDeviceSynchronize();
  cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

constexpr int kPoisonInt = -1;  // shared and device memory start as 0xff bytes

// ---- barriers -------------------------------------------------------------------------------

__global__ void rotate_through_shared(int* out, int with_barrier) {
  __shared__ int slots[64];
  const int t = static_cast<int>(threadIdx.x);
  slots[t] = 10 * t;
  if (with_barrier) __syncthreads();
  out[t] = slots[(t + 1) % static_cast<int>(blockDim.x)];
}

TEST(CudaCpuBarrier, OrdersSharedMemoryBetweenPhases) {
  DeviceBuffer<int> out(64);
  rotate_through_shared<<<1, 64>>>(out.get(), 1);
  const auto got = out.download();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[static_cast<size_t>(t)], 10 * ((t + 1) % 64)) << t;
}

TEST(CudaCpuBarrier, AMissingBarrierReadsUnwrittenSharedMemory) {
  // Without the barrier each thread runs to its end before the next starts, so the first to
  // run reads its neighbour's slot before it is written: poison, whatever the order.
  DeviceBuffer<int> out(64);
  rotate_through_shared<<<1, 64>>>(out.get(), 0);
  const auto got = out.download();
  EXPECT_GT(std::count(got.begin(), got.end(), kPoisonInt), 0);
}

__global__ void tree_sum(const float* x, float* out) {
  __shared__ float partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

TEST(CudaCpuBarrier, ATreeReductionAcrossWarpsIsExactInEveryBlock) {
  std::vector<float> x(4 * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97);
  DeviceBuffer<float> in(x), out(4);
  tree_sum<<<4, 256>>>(in.get(), out.get());
  const auto got = out.download();
  for (size_t b = 0; b < 4; ++b)
    EXPECT_EQ(got[b], std::accumulate(x.begin() + static_cast<long>(b * 256), x.begin() + static_cast<long>(b * 256 + 256), 0.0f));
}

__global__ void split_barrier(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

TEST(CudaCpuBarrier, ThreadsAtDifferentBarriersAreAFault) {
  DeviceBuffer<int> out(64);
  split_barrier<<<1, 64>>>(out.get());
  const std::string fault = fault_of_launch();
  EXPECT_NE(fault.find("threads meet at different __syncthreads"), std::string::npos) << fault;
  EXPECT_NE(fault.find("kernel_language_test.cu"), std::string::npos) << "the fault names the source: " << fault;
}

__global__ void shared_before_write(int* out) {
  __shared__ int fresh;
  if (threadIdx.x == 0) out[blockIdx.x] = fresh;
  __syncthreads();
  if (threadIdx.x == 0) fresh = static_cast<int>(blockIdx.x);
}

TEST(CudaCpuSharedMemory, EveryBlockStartsWithPoisonedSharedMemory) {
  DeviceBuffer<int> out(3);
  shared_before_write<<<3, 32>>>(out.get());
  for (int v : out.download()) EXPECT_EQ(v, kPoisonInt) << "a block sees no earlier block's shared memory";
}

// ---- warp collectives -----------------------------------------------------------------------

enum Probe { kBroadcast, kBroadcast8, kUp1, kUp2Width8, kDown1, kDown2Width16, kXorSum, kXorSumWidth8, kProbes };

__device__ int lane_value(int lane) { return lane * lane + 1; }

__global__ void shuffles(int* out) {
  const int lane = static_cast<int>(threadIdx.x), v = lane_value(lane);
  int* mine = out + lane * kProbes;
  mine[kBroadcast] = __shfl_sync(0xffffffffu, v, 3);
  mine[kBroadcast8] = __shfl_sync(0xffffffffu, v, 3, 8);
  mine[kUp1] = __shfl_up_sync(0xffffffffu, v, 1);
  mine[kUp2Width8] = __shfl_up_sync(0xffffffffu, v, 2, 8);
  mine[kDown1] = __shfl_down_sync(0xffffffffu, v, 1);
  mine[kDown2Width16] = __shfl_down_sync(0xffffffffu, v, 2, 16);
  int sum = v;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  mine[kXorSum] = sum;
  int group = v;
  for (int offset = 4; offset > 0; offset /= 2) group += __shfl_xor_sync(0xffffffffu, group, offset, 8);
  mine[kXorSumWidth8] = group;
}

TEST(CudaCpuWarp, ShufflesFollowTheirDefinitionsWithWidth) {
  DeviceBuffer<int> out(32 * kProbes);
  shuffles<<<1, 32>>>(out.get());
  const auto got = out.download();
  int all = 0;
  for (int l = 0; l < 32; ++l) all += lane_value(l);
  for (int l = 0; l < 32; ++l) {
    const int* mine = got.data() + l * kProbes;
    int group = 0;
    for (int g = l / 8 * 8; g < l / 8 * 8 + 8; ++g) group += lane_value(g);
    EXPECT_EQ(mine[kBroadcast], lane_value(3)) << l;
    EXPECT_EQ(mine[kBroadcast8], lane_value(l / 8 * 8 + 3)) << l;
    EXPECT_EQ(mine[kUp1], lane_value(l >= 1 ? l - 1 : l)) << l;
    EXPECT_EQ(mine[kUp2Width8], lane_value(l % 8 >= 2 ? l - 2 : l)) << l;
    EXPECT_EQ(mine[kDown1], lane_value(l <= 30 ? l + 1 : l)) << l;
    EXPECT_EQ(mine[kDown2Width16], lane_value(l % 16 + 2 < 16 ? l + 2 : l)) << l;
    EXPECT_EQ(mine[kXorSum], all) << l;
    EXPECT_EQ(mine[kXorSumWidth8], group) << l;
  }
}

enum Vote { kBallot, kAny, kAll, kAllTrue, kMatch, kActive, kVotes };

__global__ void votes(unsigned* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  unsigned* mine = out + threadIdx.x * kVotes;
  mine[kBallot] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  mine[kAny] = static_cast<unsigned>(__any_sync(0xffffffffu, lane == 17));
  mine[kAll] = static_cast<unsigned>(__all_sync(0xffffffffu, lane < 31));
  mine[kAllTrue] = static_cast<unsigned>(__all_sync(0xffffffffu, 1));
  mine[kMatch] = __match_any_sync(0xffffffffu, lane % 4);
  mine[kActive] = __activemask();
}

__global__ void votes_of_a_partial_warp(unsigned* out) {
  if (threadIdx.x < 32) return;
  const unsigned mask = __activemask();
  out[threadIdx.x - 32] = __ballot_sync(mask, 1);
}

TEST(CudaCpuWarp, VotesAndMatchFollowTheirDefinitions) {
  DeviceBuffer<unsigned> out(32 * kVotes);
  votes<<<1, 32>>>(out.get());
  const auto got = out.download();
  unsigned every_third = 0;
  for (int l = 0; l < 32; l += 3) every_third |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    const unsigned* mine = got.data() + l * kVotes;
    EXPECT_EQ(mine[kBallot], every_third) << l;
    EXPECT_EQ(mine[kAny], 1u) << l;
    EXPECT_EQ(mine[kAll], 0u) << l;
    EXPECT_EQ(mine[kAllTrue], 1u) << l;
    EXPECT_EQ(mine[kMatch], 0x11111111u << (l % 4)) << l;
    EXPECT_EQ(mine[kActive], 0xffffffffu) << l;
  }
}

TEST(CudaCpuWarp, APartialWarpVotesWithTheLanesItHas) {
  // 40 threads: the second warp has 8 lanes, which __activemask and the ballot see.
  DeviceBuffer<unsigned> out(8);
  votes_of_a_partial_warp<<<1, 40>>>(out.get());
  for (unsigned v : out.download()) EXPECT_EQ(v, 0xffu);
}

__global__ void shuffle_with_an_exited_lane(int* out) {
  if (threadIdx.x == 31) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

__global__ void mask_without_the_caller(int* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 0);
}

__global__ void read_outside_the_mask(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 20);
}

__global__ void collectives_at_two_sites(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x % 2) {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  }
  out[threadIdx.x] = v;
}

__global__ void shuffle_width_of_six(int* out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1, 6);
}

TEST(CudaCpuWarp, UndefinedCollectivesAreFaults) {
  struct Case {
    void (*kernel)(int*);
    const char* fault;
  };
  const Case cases[] = {
      {shuffle_with_an_exited_lane, "that never come: 31 (exited)"},
      {mask_without_the_caller, "the mask leaves out the calling lane"},
      {read_outside_the_mask, "reads lane 20, which is not in the mask"},
      {collectives_at_two_sites, "meet at different collectives"},
      {shuffle_width_of_six, "width 6 is not a power of two"},
  };
  DeviceBuffer<int> out(32);
  for (const Case& c : cases) {
    auto* const kernel = c.kernel;
    kernel<<<1, 32>>>(out.get());
    const std::string fault = fault_of_launch();
    EXPECT_NE(fault.find(c.fault), std::string::npos) << "expected '" << c.fault << "', got: " << fault;
  }
}

// ---- atomics --------------------------------------------------------------------------------

struct Counters {
  int count, max, min, owner, wins;
  unsigned bits;
  float half_sum;
};

__global__ void atomics(Counters* c, int* old_counts) {
  const int id = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  old_counts[id] = atomicAdd(&c->count, 1);
  atomicMax(&c->max, id);
  atomicMin(&c->min, id);
  if (atomicCAS(&c->owner, -1, id) == -1) atomicAdd(&c->wins, 1);
  atomicOr(&c->bits, 1u << (id % 32));
  atomicAdd(&c->half_sum, 0.5f);
}

TEST(CudaCpuAtomics, EveryUpdateLandsOnceAndReturnsTheOldValue) {
  DeviceBuffer<Counters> counters(std::vector<Counters>{{0, -1, 1 << 30, -1, 0, 0u, 0.0f}});
  DeviceBuffer<int> old_counts(1024);
  atomics<<<8, 128>>>(counters.get(), old_counts.get());
  const Counters c = counters.download()[0];
  EXPECT_EQ(c.count, 1024);
  EXPECT_EQ(c.max, 1023);
  EXPECT_EQ(c.min, 0);
  EXPECT_EQ(c.wins, 1);
  EXPECT_GE(c.owner, 0);
  EXPECT_EQ(c.bits, 0xffffffffu);
  EXPECT_EQ(c.half_sum, 512.0f);
  auto old = old_counts.download();
  std::sort(old.begin(), old.end());
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(old[static_cast<size_t>(i)], i) << "each old value once";
}

// ---- launches and shared memory limits ------------------------------------------------------

__global__ void touch_dynamic_shared(int* out, int bytes) {
  extern __shared__ unsigned char scratch[];
  if (threadIdx.x == 0) {
    out[0] = scratch[bytes - 1];  // the poison, before anything writes it
    scratch[bytes - 1] = 7;
    out[1] = scratch[bytes - 1];
  }
}

__global__ void too_much_static_shared(int* out) {
  __shared__ unsigned char big[48 * 1024 + 1];
  big[threadIdx.x] = 1;
  out[threadIdx.x] = big[threadIdx.x];
}

TEST(CudaCpuLaunch, BadConfigurationsAreTheLaunchsError) {
  DeviceBuffer<int> out(2);
  rotate_through_shared<<<1, 1025>>>(out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  rotate_through_shared<<<dim3(0), 32>>>(out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  rotate_through_shared<<<dim3(1, 65536), 32>>>(out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "reading the error clears it";
}

TEST(CudaCpuLaunch, DynamicSharedMemoryPastTheDefaultNeedsTheOptIn) {
  constexpr int kBytes = 100 * 1024;
  DeviceBuffer<int> out(2);
  touch_dynamic_shared<<<1, 32, kBytes>>>(out.get(), kBytes);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(touch_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes), cudaSuccess);
  touch_dynamic_shared<<<1, 32, kBytes>>>(out.get(), kBytes);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download(), (std::vector<int>{0xff, 7}));
  touch_dynamic_shared<<<1, 32, 232448 + 1>>>(out.get(), 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "more than an H200's 227 KiB";
}

TEST(CudaCpuLaunch, StaticSharedMemoryPast48KiBIsAFault) {
  DeviceBuffer<int> out(32);
  too_much_static_shared<<<1, 32>>>(out.get());
  const std::string fault = fault_of_launch();
  EXPECT_NE(fault.find("more than a block has"), std::string::npos) << fault;
}

__global__ void write_one_past(float* x, int n) { x[n + static_cast<int>(threadIdx.x) * 1024] = 1.0f; }

TEST(CudaCpuMemoryDeathTest, AWriteOffTheEndOfAnAllocationHitsItsGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceBuffer<float> x(64);  // 256 bytes: the guard page follows at once
        write_one_past<<<1, 32>>>(x.get(), 64);
        cudaDeviceSynchronize();
      },
      "");
}

// ---- __half and __nv_bfloat16 ---------------------------------------------------------------

float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(CudaCpuHalf, RoundsAsTheCudaMathApiDefines) {
  const auto h = [](float f) { return __half_as_ushort(__float2half_rn(f)); };
  EXPECT_EQ(h(1.0f), 0x3c00);
  EXPECT_EQ(h(1.0f + std::ldexp(1.0f, -11)), 0x3c00) << "a tie goes to the even neighbour";
  EXPECT_EQ(h(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02) << "a tie goes to the even neighbour, up";
  EXPECT_EQ(h(65504.0f), 0x7bff);
  EXPECT_EQ(h(65519.0f), 0x7bff);
  EXPECT_EQ(h(65520.0f), 0x7c00) << "65520 rounds to infinity";
  EXPECT_EQ(h(-1e9f), 0xfc00);
  EXPECT_EQ(h(std::ldexp(1.0f, -24)), 0x0001) << "the smallest subnormal";
  EXPECT_EQ(h(std::ldexp(1.0f, -25)), 0x0000) << "half of it ties to zero";
  EXPECT_EQ(h(3 * std::ldexp(1.0f, -26)), 0x0001);
  EXPECT_EQ(h(std::ldexp(1023.0f, -24)), 0x03ff) << "the largest subnormal";
  EXPECT_EQ(h(-0.0f), 0x8000);
  EXPECT_EQ(h(NAN), 0x7fff) << "the canonical NaN";
  EXPECT_EQ(__half2float(__ushort_as_half(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(__half2float(__ushort_as_half(0x7c00))));
}

TEST(CudaCpuBfloat16, RoundsAsTheCudaMathApiDefines) {
  const auto b = [](float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); };
  EXPECT_EQ(b(1.0f), 0x3f80);
  EXPECT_EQ(b(1.0f + std::ldexp(1.0f, -8)), 0x3f80) << "a tie goes to the even neighbour";
  EXPECT_EQ(b(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(b(bits_float(0x7f7fffffu)), 0x7f80) << "the largest float rounds to infinity";
  EXPECT_EQ(b(bits_float(0x00000001u)), 0x0000) << "subnormals round like any value";
  EXPECT_EQ(b(bits_float(0x00018000u)), 0x0002);
  EXPECT_EQ(b(NAN), 0x7fff) << "the canonical NaN";
  EXPECT_EQ(__bfloat162float(__ushort_as_bfloat16(0xc0a0)), -5.0f);
}

TEST(CudaCpuHalf, AgreesWithTheHostConversionsBitForBit) {
  // core/dtype.hpp's conversions round the same way (to nearest even); they differ only in
  // which NaN they return.
  for (uint32_t i = 0; i < 0x10000u; ++i) {
    const auto x = static_cast<uint16_t>(i);
    const float device = __half2float(__ushort_as_half(x)), host = f16_to_f32(x);
    if (std::isnan(host)) {
      ASSERT_TRUE(std::isnan(device)) << i;
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &device, 4);
    std::memcpy(&b, &host, 4);
    ASSERT_EQ(a, b) << std::hex << i;
    ASSERT_EQ(bf16_to_f32(x), __bfloat162float(__ushort_as_bfloat16(x))) << i;
  }
  uint32_t state = 12345;
  for (int i = 0; i < 1 << 20; ++i) {
    state = state * 1664525u + 1013904223u;
    const float f = bits_float(state);
    if (std::isnan(f)) continue;
    ASSERT_EQ(__half_as_ushort(__float2half_rn(f)), f32_to_f16(f)) << std::hex << state;
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(f)), f32_to_bf16(f)) << std::hex << state;
  }
}

TEST(CudaCpuConversions, RoundToNearestEvenAndSaturate) {
  EXPECT_EQ(__float2int_rn(2.5f), 2);
  EXPECT_EQ(__float2int_rn(3.5f), 4);
  EXPECT_EQ(__float2int_rn(-2.5f), -2);
  EXPECT_EQ(__float2int_rn(1e10f), INT32_MAX);
  EXPECT_EQ(__float2int_rn(-1e10f), INT32_MIN);
  EXPECT_EQ(__float2int_rn(NAN), 0);
  EXPECT_EQ(__float2ull_rn(-1.0f), 0ull);
  EXPECT_EQ(__float2ull_rn(0.5f), 0ull);
  EXPECT_EQ(__float2ull_rn(1.5f), 2ull);
  EXPECT_EQ(__float2ull_rn(1e30f), ~0ull);
  EXPECT_EQ(__float2ull_rn(NAN), 1ull << 63);
}

}  // namespace
}  // namespace orzo
