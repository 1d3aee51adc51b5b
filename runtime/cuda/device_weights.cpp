#include "runtime/cuda/device_weights.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.hpp"
#include "kernels/cuda/check.hpp"

namespace orzo::cuda {

namespace {

DType dtype_of(Elem e) { return e == Elem::bf16 ? DType::BF16 : DType::F16; }

// Places the rows of `parts` one after another as one [sum of rows, cols] matrix of `elem`.
// Rows are converted on the host, a row at a time, into `staging`.
const void* place_matrix(DeviceArena& arena, Elem elem, std::initializer_list<const TensorView*> parts,
                         std::vector<uint16_t>& staging, std::vector<float>& row) {
  int64_t rows = 0;
  const int64_t cols = (*parts.begin())->cols();
  for (const auto* t : parts) {
    // An absent view (a weight this layer does not have) must never be read as one.
    if (!t->data || t->shape.size() != 2 || t->cols() != cols)
      throw std::logic_error("weight upload: " + (t->name.empty() ? std::string("an absent matrix") : t->name) +
                             " is not a matrix of " + std::to_string(cols) + " columns");
    rows += t->rows();
  }
  auto* dst = arena.take<uint16_t>(static_cast<size_t>(rows * cols));
  if (!dst) return nullptr;
  staging.resize(static_cast<size_t>(rows * cols));
  row.resize(static_cast<size_t>(cols));
  uint16_t* out = staging.data();
  for (const auto* t : parts) {
    if (t->dtype == dtype_of(elem)) {
      std::memcpy(out, t->data, static_cast<size_t>(t->numel()) * sizeof(uint16_t));
      out += t->numel();
      continue;
    }
    for (int64_t r = 0; r < t->rows(); ++r, out += cols) {
      cpu::dequantize_row(t->dtype, t->row(r), cols, row.data());
      cpu::quantize_row(dtype_of(elem), row.data(), cols, out);
    }
  }
  check(cudaMemcpy(dst, staging.data(), staging.size() * sizeof(uint16_t), cudaMemcpyHostToDevice), "weight upload");
  return dst;
}

// f32 vectors (norms, biases), concatenated; null when the first part is absent.
const float* place_floats(DeviceArena& arena, std::initializer_list<std::pair<const float*, int64_t>> parts) {
  if (!parts.begin()->first) return nullptr;
  int64_t n = 0;
  for (const auto& [p, count] : parts) n += count;
  auto* dst = arena.take<float>(static_cast<size_t>(n));
  if (!dst) return nullptr;
  int64_t offset = 0;
  for (const auto& [p, count] : parts) {
    check(cudaMemcpy(dst + offset, p, static_cast<size_t>(count) * sizeof(float), cudaMemcpyHostToDevice),
          "weight upload");
    offset += count;
  }
  return dst;
}

// A MoE layer's router (with the shared-expert gate as its last row, where there is one)
// and each expert's gate|up and down.
void place_experts(DeviceArena& arena, Elem elem, const LayerWeights& w, const ModelConfig& c, DeviceLayer& d,
                   std::vector<uint16_t>& staging, std::vector<float>& row) {
  const ExpertWeights& experts = w.experts;
  const auto n = static_cast<size_t>(c.num_experts);
  if (experts.gate.size() != n || experts.up.size() != n || experts.down.size() != n)
    throw std::logic_error("weight upload: a MoE layer without its " + std::to_string(n) + " experts");
  if (w.shared_expert_gate) {
    TensorView gate;
    gate.name = "shared_expert_gate";
    gate.dtype = DType::F32;
    gate.shape = {1, c.hidden_size};
    gate.data = w.shared_expert_gate;
    gate.nbytes = static_cast<size_t>(c.hidden_size) * sizeof(float);
    d.router = place_matrix(arena, elem, {&experts.router, &gate}, staging, row);
  } else {
    d.router = place_matrix(arena, elem, {&experts.router}, staging, row);
  }
  d.expert_gate_up.clear();
  d.expert_down.clear();
  for (size_t e = 0; e < n; ++e) {
    d.expert_gate_up.push_back(place_matrix(arena, elem, {&experts.gate[e], &experts.up[e]}, staging, row));
    d.expert_down.push_back(place_matrix(arena, elem, {&experts.down[e]}, staging, row));
  }
}

}  // namespace

Elem DeviceWeights::storage_for(const Model& model, LayerRange range, bool embeds, bool lm_head) {
  bool all_f16 = true;
  // (Qwen2-MoE's shared-expert gate is an f32 vector, converted like the small vectors are.)
  for (int64_t l = range.begin; l < range.end; ++l)
    for (const TensorView* t : model.layer_matrices(l)) all_f16 = all_f16 && t->dtype == DType::F16;
  if (embeds) all_f16 = all_f16 && model.embedding().dtype == DType::F16;
  if (lm_head) all_f16 = all_f16 && model.lm_head().dtype == DType::F16;
  return all_f16 ? Elem::f16 : Elem::bf16;
}

DeviceWeights::DeviceWeights(const Model& model, LayerRange range, bool embeds, bool lm_head, int device)
    : elem_(storage_for(model, range, embeds, lm_head)), arena_(DeviceArena::measuring()) {
  place(arena_, model, range, embeds, lm_head);
  const std::string purpose = "the weights of layers " + std::to_string(range.begin) + "-" + std::to_string(range.end);
  arena_ = DeviceArena(device, arena_.used(), purpose);
  place(arena_, model, range, embeds, lm_head);
}

void DeviceWeights::place(DeviceArena& arena, const Model& model, LayerRange range, bool embeds, bool lm_head) {
  const auto& c = model.config();
  std::vector<uint16_t> staging;
  std::vector<float> row;
  layers_.clear();
  for (int64_t l = range.begin; l < range.end; ++l) {
    const auto& w = model.layer(l);
    DeviceLayer d;
    d.attn_norm = place_floats(arena, {{w.attn_norm, c.hidden_size}});
    d.qkv = place_matrix(arena, elem_, {&w.wq, &w.wk, &w.wv}, staging, row);
    d.qkv_bias = place_floats(arena, {{w.bq, c.q_dim()}, {w.bk, c.kv_dim()}, {w.bv, c.kv_dim()}});
    d.o = place_matrix(arena, elem_, {&w.wo}, staging, row);
    d.o_bias = place_floats(arena, {{w.bo, c.hidden_size}});
    d.q_norm = place_floats(arena, {{w.q_norm, c.head_dim}});
    d.k_norm = place_floats(arena, {{w.k_norm, c.head_dim}});
    d.ffn_norm = place_floats(arena, {{w.ffn_norm, c.hidden_size}});
    if (!c.has_experts(l) || w.shared_expert_gate) {
      d.gate_up = place_matrix(arena, elem_, {&w.w_gate, &w.w_up}, staging, row);
      d.down = place_matrix(arena, elem_, {&w.w_down}, staging, row);
    }
    if (c.has_experts(l)) place_experts(arena, elem_, w, c, d, staging, row);
    d.post_attn_norm = place_floats(arena, {{w.post_attn_norm, c.hidden_size}});
    d.post_ffn_norm = place_floats(arena, {{w.post_ffn_norm, c.hidden_size}});
    layers_.push_back(d);
  }
  const bool tied = model.lm_head().data == model.embedding().data;
  embedding_ = embeds ? place_matrix(arena, elem_, {&model.embedding()}, staging, row) : nullptr;
  if (lm_head) {
    final_norm_ = place_floats(arena, {{model.final_norm(), c.hidden_size}});
    lm_head_ = tied && embeds ? embedding_ : place_matrix(arena, elem_, {&model.lm_head()}, staging, row);
  }
  const auto place_freq = [&](bool local, bool long_factors) {
    const auto& freq = model.rope_inv_freq(local, long_factors);
    return place_floats(arena, {{freq.data(), static_cast<int64_t>(freq.size())}});
  };
  inv_freq_ = place_freq(false, false);
  local_inv_freq_ = c.rope_local_theta > 0 ? place_freq(true, false) : nullptr;
  long_inv_freq_ = c.rope_scaling.type == RopeScaling::Type::LongRope ? place_freq(false, true) : nullptr;
}

}  // namespace orzo::cuda
