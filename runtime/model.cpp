#include "runtime/model.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "core/load_error.hpp"
#include "core/mapped_file.hpp"
#include "core/thread_pool.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "formats/gguf_quant_recipe.hpp"
#include "kernels/cpu/convert.hpp"
#include "runtime/gguf_names.hpp"

namespace orzo {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A layer's matrices with the first `experts` of its experts (Layer: LayerWeights, const or not).
template <class Layer, class View>
void add_matrices(Layer& l, size_t experts, std::vector<View*>& out) {
  for (View* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
    if (t->data) out.push_back(t);
  if (!l.experts.router.data) return;
  out.push_back(&l.experts.router);
  for (size_t x = 0; x < std::min(experts, l.experts.gate.size()); ++x)
    for (auto* proj : {&l.experts.gate, &l.experts.up, &l.experts.down}) out.push_back(&(*proj)[x]);
}

}  // namespace

class Model::Builder {
 public:
  explicit Builder(Model& m) : m_(m) {}

  void add(const TensorView& t, const std::string& canonical_name) {
    TensorView v = t;
    v.name = canonical_name;
    if (!tensors_.emplace(canonical_name, v).second)
      throw LoadError(t.file + ": tensor " + canonical_name + " appears twice");
  }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  const TensorView& need(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw LoadError(m_.source_ + ": missing tensor " + name);
    const TensorView& t = it->second;
    if (t.shape != shape)
      throw LoadError(t.file + ": tensor " + name + " has shape " + shape_string(t.shape) + ", expected " +
                      shape_string(shape));
    return t;
  }

  // Norm weights and biases are tiny and read on every row: keep them as f32, `offset` added.
  const float* need_f32(const std::string& name, int64_t n, float offset = 0.0f) {
    const TensorView& t = need(name, {n});
    auto& dst = m_.small_tensors_.emplace_back(static_cast<size_t>(n));
    cpu::dequantize_row(t.dtype, t.data, n, dst.data());
    for (float& v : dst) {
      v += offset;
      if (!std::isfinite(v)) throw LoadError(t.file + ": tensor " + name + " holds a non-finite value");
    }
    return dst.data();
  }

  const float* need_norm(const std::string& name, int64_t n) {
    return need_f32(name, n, static_cast<float>(m_.config_.norm_weight_offset));
  }

  void need_ffn(LayerWeights& w, const std::string& p, int64_t inter) {
    const int64_t d = m_.config_.hidden_size;
    w.w_gate = need(p + "gate_proj.weight", {inter, d});
    w.w_up = need(p + "up_proj.weight", {inter, d});
    w.w_down = need(p + "down_proj.weight", {d, inter});
  }

  // The experts' matrices stacked in one tensor per projection (GGUF), or one tensor per
  // expert (HF); a stacked one is sliced into views of its experts, which are whole rows.
  ExpertWeights need_experts(const std::string& p) {
    const ModelConfig& c = m_.config_;
    const int64_t d = c.hidden_size, inter = c.expert_intermediate_size, n = c.num_experts;
    ExpertWeights e;
    e.router = need(p + "gate.weight", {n, d});
    for (auto [proj, out, rows, cols] : {std::tuple{"gate_proj", &e.gate, inter, d}, std::tuple{"up_proj", &e.up, inter, d},
                                         std::tuple{"down_proj", &e.down, d, inter}}) {
      const std::string stacked = p + "experts." + proj + ".weight";
      const TensorView* all = has(stacked) ? &need(stacked, {n, rows, cols}) : nullptr;
      for (int64_t x = 0; x < n; ++x) {
        TensorView v = all ? all->row_range(x * rows, rows)
                           : need(p + "experts." + std::to_string(x) + "." + proj + ".weight", {rows, cols});
        v.name = stacked;  // orzo quantize's recipes go by it, as llama.cpp's do
        out->push_back(v);
      }
    }
    return e;
  }

  // A [1, n] tensor (an HF Linear to one output) read as the vector it is.
  const std::string& flat(const std::string& name) {
    auto it = tensors_.find(name);
    if (it != tensors_.end() && it->second.shape.size() == 2 && it->second.shape[0] == 1)
      it->second.shape = {it->second.shape[1]};
    return name;
  }

  // Phi-3 stores q|k|v, and gate|up, as one matrix each. Its parts are row ranges of it, kept
  // under the separate matrices' names so the forward pass reads them as any other; each part
  // keeps the fused matrix's own name, by which quantization recipes choose its type.
  void split_fused(const std::string& fused, int64_t cols, const std::vector<std::pair<std::string, int64_t>>& parts) {
    if (!has(fused)) return;
    int64_t rows = 0;
    for (const auto& part : parts) rows += part.second;
    const TensorView& t = need(fused, {rows, cols});
    int64_t first = 0;
    for (const auto& [name, count] : parts) {
      if (!tensors_.emplace(name, t.row_range(first, count)).second)
        throw LoadError(t.file + ": tensor " + name + " appears beside " + fused);
      first += count;
    }
  }

  void build() {
    const ModelConfig& c = m_.config_;
    const int64_t d = c.hidden_size;
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      split_fused(p + "self_attn.qkv_proj.weight", d,
                  {{p + "self_attn.q_proj.weight", c.q_dim()}, {p + "self_attn.k_proj.weight", c.kv_dim()},
                   {p + "self_attn.v_proj.weight", c.kv_dim()}});
      split_fused(p + "mlp.gate_up_proj.weight", d,
                  {{p + "mlp.gate_proj.weight", c.intermediate_size}, {p + "mlp.up_proj.weight", c.intermediate_size}});
    }
    m_.embedding_ = need("model.embed_tokens.weight", {c.vocab_size, d});
    if (has("lm_head.weight") && !c.tie_word_embeddings) {
      m_.lm_head_ = need("lm_head.weight", {c.vocab_size, d});
    } else if (c.tie_word_embeddings) {
      m_.lm_head_ = m_.embedding_;
    } else {
      throw LoadError(m_.source_ + ": missing tensor lm_head.weight (tie_word_embeddings is false)");
    }
    m_.final_norm_ = need_norm("model.norm.weight", d);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      LayerWeights w;
      w.attn_norm = need_norm(p + "input_layernorm.weight", d);
      w.wq = need(p + "self_attn.q_proj.weight", {c.q_dim(), d});
      w.wk = need(p + "self_attn.k_proj.weight", {c.kv_dim(), d});
      w.wv = need(p + "self_attn.v_proj.weight", {c.kv_dim(), d});
      w.wo = need(p + "self_attn.o_proj.weight", {d, c.q_dim()});
      if (c.qkv_bias) {
        w.bq = need_f32(p + "self_attn.q_proj.bias", c.q_dim());
        w.bk = need_f32(p + "self_attn.k_proj.bias", c.kv_dim());
        w.bv = need_f32(p + "self_attn.v_proj.bias", c.kv_dim());
      }
      if (c.o_bias) w.bo = need_f32(p + "self_attn.o_proj.bias", d);
      if (c.qk_norm) {
        w.q_norm = need_norm(p + "self_attn.q_norm.weight", c.head_dim);
        w.k_norm = need_norm(p + "self_attn.k_norm.weight", c.head_dim);
      }
      if (c.sandwich_norms) {
        w.post_attn_norm = need_norm(p + "post_attention_layernorm.weight", d);
        w.ffn_norm = need_norm(p + "pre_feedforward_layernorm.weight", d);
        w.post_ffn_norm = need_norm(p + "post_feedforward_layernorm.weight", d);
      } else {
        w.ffn_norm = need_norm(p + "post_attention_layernorm.weight", d);
      }
      if (!c.has_experts(i)) {
        need_ffn(w, p + "mlp.", c.intermediate_size);
      } else {
        w.experts = need_experts(p + "mlp.");
        if (const int64_t shared = c.shared_expert_intermediate_size; shared > 0) {
          need_ffn(w, p + "mlp.shared_expert.", shared);
          w.shared_expert_gate = need_f32(flat(p + "mlp.shared_expert_gate.weight"), d);
        }
      }
      m_.layers_.push_back(w);
    }
    m_.rope_inv_freq_ = orzo::rope_inv_freq(c);
    if (c.rope_local_theta > 0) m_.local_rope_inv_freq_ = orzo::rope_inv_freq(c, true);
    if (c.rope_scaling.type == RopeScaling::Type::LongRope) m_.long_rope_inv_freq_ = orzo::rope_inv_freq(c, false, true);
    // llama.cpp stores Llama 3 RoPE scaling as per-frequency divisors instead of keys.
    if (has("rope_freqs.weight")) {
      const float* factors = need_f32("rope_freqs.weight", c.head_dim / 2);
      for (size_t i = 0; i < m_.rope_inv_freq_.size(); ++i) {
        if (!(factors[i] > 0)) throw LoadError(m_.source_ + ": tensor rope_freqs.weight holds a non-positive factor");
        m_.rope_inv_freq_[i] /= factors[i];
      }
    }
  }

 private:
  Model& m_;
  std::map<std::string, TensorView> tensors_;
};

std::shared_ptr<const Model> Model::load(const std::string& path) { return load(path, ""); }

std::shared_ptr<const Model> Model::load(const std::string& path, const std::string& quantize) {
  std::optional<QuantTarget> target;
  if (!quantize.empty() && !(target = parse_quant_target(quantize)))
    throw std::invalid_argument("--quantize: unknown type '" + quantize + "'");
  std::shared_ptr<Model> m(new Model());
  m->source_ = path;
  Builder b(*m);
  if (is_directory(path)) {
    m->config_ = read_hf_config(path);
    for (auto& f : read_safetensors_dir(path)) {
      for (const auto& t : f.tensors) b.add(t, canonical_hf_name(t.name));
      m->files_.push_back(f.file);
    }
  } else {
    GgufFile f = read_gguf(path);
    m->config_ = read_gguf_config(f);
    for (const auto& t : f.tensors) b.add(t, hf_name_of_gguf(t.name, m->config_.architecture));
    m->files_.push_back(f.file);
    m->config_.tie_word_embeddings = !b.has("lm_head.weight");
  }
  b.build();
  if (target) m->requantize(*target);
  return m;
}

void Model::requantize(const QuantTarget& target) {
  const bool tied = lm_head_.data == embedding_.data;
  std::vector<TensorView*> matrices = {&embedding_};
  if (!tied) matrices.push_back(&lm_head_);
  for (auto& l : layers_) add_matrices(l, l.experts.gate.size(), matrices);
  ThreadPool pool(0);
  for (TensorView* t : matrices) {
    const DType type =
        recipe_type(target, {gguf_name_of_hf(t->name, config_.architecture).value_or(t->name), t->shape}, config_.num_layers, !tied);
    const int64_t cols = t->cols();
    const size_t row_bytes = dtype_row_bytes(type, cols);
    auto& bytes = owned_matrices_.emplace_back(static_cast<size_t>(t->rows()) * row_bytes);
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()), std::vector<float>(static_cast<size_t>(cols)));
    pool.parallel_for(t->rows(), [&](int64_t begin, int64_t end, int thread) {
      float* row = scratch[static_cast<size_t>(thread)].data();
      for (int64_t r = begin; r < end; ++r) {
        cpu::dequantize_row(t->dtype, t->row(r), cols, row);
        cpu::quantize_row(type, row, cols, bytes.data() + static_cast<size_t>(r) * row_bytes);
      }
    });
    t->dtype = type;
    t->data = bytes.data();
    t->nbytes = bytes.size();
  }
  if (tied) lm_head_ = embedding_;
}

std::vector<const TensorView*> Model::layer_matrices() const {
  std::vector<const TensorView*> out;
  for (const auto& l : layers_) add_matrices(l, l.experts.gate.size(), out);
  return out;
}

std::vector<const TensorView*> Model::layer_matrices(int64_t layer) const {
  std::vector<const TensorView*> out;
  const LayerWeights& l = layers_[static_cast<size_t>(layer)];
  add_matrices(l, l.experts.gate.size(), out);
  return out;
}

std::vector<const TensorView*> Model::token_matrices() const {
  std::vector<const TensorView*> out;
  for (const auto& l : layers_) add_matrices(l, static_cast<size_t>(config_.experts_per_token), out);
  return out;
}

size_t Model::weight_bytes_per_token() const {
  size_t bytes = dtype_row_bytes(embedding_.dtype, embedding_.cols()) + lm_head_.nbytes;
  for (const auto* t : token_matrices()) bytes += t->nbytes;
  return bytes;
}

void Model::page_in(const std::function<void(size_t done, size_t total)>& progress) const {
  auto tensors = layer_matrices();
  tensors.push_back(&embedding_);
  if (lm_head_.data != embedding_.data) tensors.push_back(&lm_head_);
  size_t total = 0, done = 0;
  for (const auto* t : tensors) total += t->nbytes;
  constexpr size_t kPage = 4096;
  for (const auto* t : tensors) {
    const auto* bytes = static_cast<const volatile unsigned char*>(t->data);
    unsigned char sink = 0;
    for (size_t i = 0; i < t->nbytes; i += kPage) sink = static_cast<unsigned char>(sink ^ bytes[i]);
    (void)sink;
    done += t->nbytes;
    if (progress) progress(done, total);
  }
}

int64_t Model::layer_parameters() const {
  int64_t n = 0;
  for (const auto* t : token_matrices()) n += t->numel();
  return n;
}

}  // namespace orzo
