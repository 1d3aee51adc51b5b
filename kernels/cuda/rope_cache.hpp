#pragma once
// The step from the fused q/k/v projection to attention, in one kernel: bias, Qwen3's per-head
// q/k RMSNorm, llama.cpp's interleaved pairs reordered to HF's half split, RoPE at each row's
// position, then K and V written into the paged cache. Twin: the same sequence on the CPU in
// CpuBackend::attention_block (cpu::deinterleave_heads, cpu::rmsnorm, cpu::rope_angles,
// cpu::apply_rope), K/V rounded to `elem`.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem.hpp"

namespace orzo::cuda {

struct QkvRopeArgs {
  Elem elem = Elem::bf16;
  const float* qkv = nullptr;       // [rows, (num_heads + 2 * num_kv_heads) * head_dim] f32: q, then k, then v
  const float* bias = nullptr;      // [(num_heads + 2 * num_kv_heads) * head_dim] or null (Qwen2)
  const float* q_norm = nullptr;    // [head_dim] or null (Qwen3: RMSNorm of each q head)
  const float* k_norm = nullptr;    // [head_dim] or null (Qwen3: RMSNorm of each k head)
  float eps = 1e-6f;                // of q_norm / k_norm
  bool interleaved = false;         // q/k rows in llama.cpp's (2i, 2i+1) pairs: reorder before norm and RoPE
  const float* inv_freq = nullptr;  // [rotary_dim / 2], scaling (llama3, linear, LongRope's factors) already
                                    // applied; null: q and k are not rotated (SmolLM3's layers without RoPE)
  int32_t rotary_dim = 0;           // RoPE turns the first rotary_dim dims of each head, the rest pass
                                    // (Phi-4-mini); 0: all of head_dim
  float rope_scale = 1.0f;          // cos and sin are multiplied by it (LongRope's attention factor)
  const int32_t* positions = nullptr;     // [rows]
  const int32_t* slot_mapping = nullptr;  // [rows]: block * block_size + slot; negative: write nothing
  int32_t rows = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  float* q_out = nullptr;           // [rows, num_heads * head_dim] f32, rotated
  void* k_cache = nullptr;          // this layer's pools, [num_blocks * block_size, num_kv_heads * head_dim] of elem
  void* v_cache = nullptr;
};

// The angle of pair i at position p is f32(p * inv_freq[i]), as transformers rounds it; pair i
// is (i, i + rotary_dim/2).
void qkv_rope_to_cache(const QkvRopeArgs& args, cudaStream_t stream);

}  // namespace orzo::cuda
