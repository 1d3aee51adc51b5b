#include "runtime/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/gated_row.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_rows.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/tanh.hpp"
#include "runtime/batch_check.hpp"
#include "runtime/packed_weights.hpp"

namespace orzo {

namespace {

void grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<const Model> model, Options o)
    : model_(std::move(model)),
      cfg_(model_->config()),
      range_(resolve_range(o.range, cfg_.num_layers)),
      long_rope_(cfg_.long_rope(o.max_model_len > 0 ? o.max_model_len : cfg_.max_position)),
      kv_layout_(o.kv_layout.groups() > 0 ? std::move(o.kv_layout) : KvLayout::flat(cfg_.num_layers)),
      kv_planes_(kv_layout_.planes_in(range_.begin, range_.end)),
      kv_(kv_layout_.planes_for(range_.begin, range_.end), o.kv_blocks, o.block_size, cfg_.kv_dim(), o.kv_dtype),
      pool_(o.threads),
      options_matmul_(o.matmul),
      matmul_(o.matmul) {
  if (kv_layout_.group_of.size() != static_cast<size_t>(cfg_.num_layers))
    throw std::invalid_argument("CpuBackend: the KV layout covers " + std::to_string(kv_layout_.group_of.size()) +
                                " layers, the model has " + std::to_string(cfg_.num_layers));
  const int64_t rows = o.max_rows;
  grow(xn_, rows * cfg_.hidden_size);
  grow(q_, rows * cfg_.q_dim());
  grow(k_, rows * cfg_.kv_dim());
  grow(v_, rows * cfg_.kv_dim());
  grow(attn_, rows * cfg_.q_dim());
  grow(proj_, rows * cfg_.hidden_size);
  grow(gate_, rows * ffn_width());
  grow(up_, rows * ffn_width());
  grow(cos_sin_, rows * cfg_.rope_dim());
  if (cfg_.num_experts > 0)
    for (int t = 0; t < pool_.size(); ++t) serial_pools_.emplace_back(1);
  for (int64_t l = range_.begin; l < range_.end; ++l) layers_.push_back(model_->layer(l));
  lm_head_ = model_->lm_head();
  // Where the level reads a type's rows packed, every product of it reads them under every
  // option: the gemvs, and the strips of both digit counts, which unpack a tile more cheaply
  // than they transpose 16 stored rows (the one-digit path's decode of one sequence: see
  // BENCHMARKS.md).
  const auto pack = [&](TensorView& w) {
    if (!cpu::reads_packed_rows(w, options_matmul_)) return;
    if (PackedMatrix p = use_packed_rows(w, pool_)) packed_.push_back(std::move(p));
  };
  for (LayerWeights& w : layers_) {
    for (TensorView* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) pack(*m);
    for (auto* experts : {&w.experts.gate, &w.experts.up, &w.experts.down})
      for (TensorView& m : *experts) pack(m);
  }
  // A tied embedding gathers its rows from the output's tiles (embed), so no product or
  // gather here reads the stored rows; a backend of another stage that reads them pages
  // back in the rows it gathers.
  if (produces_logits()) pack(lm_head_);
}

// The widest FFN a layer runs: the dense one, an expert or the shared expert.
int64_t CpuBackend::ffn_width() const {
  return std::max({cfg_.intermediate_size, cfg_.expert_intermediate_size, cfg_.shared_expert_intermediate_size});
}

void CpuBackend::forward(const ForwardBatch& b, std::vector<float>& hidden, std::vector<float>& logits) {
  check_batch(b, BatchBounds{embeds(), cfg_.vocab_size, static_cast<int64_t>(hidden.size()), cfg_.hidden_size,
                             kv_.num_blocks(), kv_.block_size(), &kv_layout_});
  const int64_t rows = b.rows();
  hidden.resize(static_cast<size_t>(rows * cfg_.hidden_size));
  // xn_ also holds the normalized logit rows, which a plan may list more than once.
  grow(xn_, std::max<int64_t>(rows, static_cast<int64_t>(b.logit_rows.size())) * cfg_.hidden_size);
  grow(proj_, rows * cfg_.hidden_size);
  for (auto* buf : {&q_, &attn_}) grow(*buf, rows * cfg_.q_dim());
  for (auto* buf : {&k_, &v_}) grow(*buf, rows * cfg_.kv_dim());
  for (auto* buf : {&gate_, &up_}) grow(*buf, rows * ffn_width());
  if (cfg_.num_experts > 0) {
    grow(router_logits_, rows * cfg_.num_experts);
    grow(expert_in_, rows * cfg_.hidden_size);
    grow(expert_out_, rows * cfg_.experts_per_token * cfg_.hidden_size);
  }

  // RoPE angles depend only on position: once per step, shared by every layer (of a kind).
  const int64_t rd = cfg_.rope_dim();
  bool wanted[2] = {false, false};  // by local_rope
  for (int64_t l = range_.begin; l < range_.end; ++l) wanted[cfg_.local_rope(l)] = true;
  for (const bool local : {false, true}) {
    if (!wanted[local]) continue;
    std::vector<float>& table = local ? local_cos_sin_ : cos_sin_;
    const std::vector<float>& inv_freq = model_->rope_inv_freq(local, long_rope_);
    const auto scale = static_cast<float>(local ? 1.0 : cfg_.rope_scaling.attention_factor);
    grow(table, rows * rd);
    for (int64_t r = 0; r < rows; ++r)
      cpu::rope_angles(inv_freq.data(), rd / 2, b.positions[static_cast<size_t>(r)], table.data() + r * rd, scale);
  }

  // A step that scores a prompt (more logit rows than sequences: a chunk wants the rows
  // before its last) keeps two int8 digits, so that prompt log-probabilities (`orzo
  // perplexity`, `echo` with logprobs) are the model's: one digit moved SmolLM2's perplexity
  // by 0.34 % and its top-1 agreement with transformers to 97.7 %.
  // So does a step of a short prompt (some sequence brings several rows, fewer than
  // kPromptOneDigitRows in all): the level's one_digit_from_rows (8) is set for decode
  // steps, whose products bind them from 8 sequences; on one digit, SmolLM2's 25-token chat
  // prompt at the AVX2 level answered "What is the capital of France?" in French.
  matmul_ = options_matmul_;
  if (static_cast<int64_t>(b.logit_rows.size()) > b.sequences() ||
      (rows > b.sequences() && rows < kPromptOneDigitRows))
    matmul_.int8_batches = false;

  float* x = hidden.data();
  if (embeds()) embed(b, x);
  for (int64_t l = range_.begin; l < range_.end; ++l) {
    attention_block(l, b, x);
    cfg_.has_experts(l) ? expert_block(l, rows, x) : ffn_block(l, rows, x);
  }
  if (produces_logits()) lm_head(b, x, logits);
}

void CpuBackend::embed(const ForwardBatch& b, float* x) {
  const TensorView& e = model_->embedding();
  const int64_t d = cfg_.hidden_size;
  const bool tied_packed = lm_head_.packed != nullptr && lm_head_.data == e.data;
  thread_local std::vector<uint8_t> row;  // grown, never shrunk
  if (tied_packed) row.resize(std::max(row.size(), dtype_row_bytes(e.dtype, d)));
  for (int64_t r = 0; r < b.rows(); ++r) {
    const int32_t token = b.tokens[static_cast<size_t>(r)];
    if (tied_packed) cpu::unpack_row(e.dtype, lm_head_.packed, d, token, row.data());
    cpu::dequantize_row(e.dtype, tied_packed ? row.data() : e.row(token), d, x + r * d);
  }
  if (cfg_.embed_scale != 1.0) {
    const auto scale = static_cast<float>(cfg_.embed_scale);
    for (int64_t i = 0; i < b.rows() * d; ++i) x[i] *= scale;
  }
}

void CpuBackend::norm_rows(const float* x, const float* weight, int64_t rows, float* out) {
  const int64_t d = cfg_.hidden_size;
  pool_.parallel_for(
      rows,
      [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) cpu::rmsnorm(x + r * d, weight, d, cfg_.rms_norm_eps, out + r * d);
      },
      16);
}

// x += Wo · attention(rope(Wq·norm(x)), rope(Wk·norm(x)), Wv·norm(x)), through a norm of its
// own first where the model has one (Gemma)
void CpuBackend::attention_block(int64_t l, const ForwardBatch& b, float* x) {
  const LayerWeights& w = layer(l);
  const int64_t rows = b.rows(), hd = cfg_.head_dim;
  norm_rows(x, w.attn_norm, rows, xn_.data());
  cpu::matmuls(xn_.data(), rows, {{w.wq, q_.data(), w.bq}, {w.wk, k_.data(), w.bk}, {w.wv, v_.data(), w.bv}}, pool_,
               matmul_);

  const cpu::KvPlace place{kv_planes_[static_cast<size_t>(l - range_.begin)], kv_layout_.group_of[static_cast<size_t>(l)]};
  const std::vector<float>& angles = cfg_.local_rope(l) ? local_cos_sin_ : cos_sin_;
  pool_.parallel_for(
      rows,
      [&](int64_t begin, int64_t end, int) {
        thread_local std::vector<float> head_scratch;
        head_scratch.resize(static_cast<size_t>(hd));
        for (int64_t r = begin; r < end; ++r) {
          float* q = q_.data() + r * cfg_.q_dim();
          float* k = k_.data() + r * cfg_.kv_dim();
          const auto i = static_cast<size_t>(r);
          const float* cs = angles.data() + r * cfg_.rope_dim();
          if (cfg_.rope_style == RopeStyle::Interleaved) {
            cpu::deinterleave_heads(q, cfg_.num_heads, hd, head_scratch.data());
            cpu::deinterleave_heads(k, cfg_.num_kv_heads, hd, head_scratch.data());
          }
          if (w.q_norm) {  // Qwen3 and Gemma 3 normalize each head before rotating it
            for (int64_t h = 0; h < cfg_.num_heads; ++h) cpu::rmsnorm(q + h * hd, w.q_norm, hd, cfg_.rms_norm_eps, q + h * hd);
            for (int64_t h = 0; h < cfg_.num_kv_heads; ++h) cpu::rmsnorm(k + h * hd, w.k_norm, hd, cfg_.rms_norm_eps, k + h * hd);
          }
          if (cfg_.rotates(l)) {
            cpu::apply_rope(q, cfg_.num_heads, hd, cs, cfg_.rope_dim());
            cpu::apply_rope(k, cfg_.num_kv_heads, hd, cs, cfg_.rope_dim());
          }
          // Every row's K/V is in the cache before any row attends: rows of one sequence see each other.
          const auto& table = b.table(place.group, b.seq_index[i]);
          const int32_t pos = b.positions[i], block = table[static_cast<size_t>(pos / kv_.block_size())];
          cpu::store_kv(kv_, place.plane, block, pos % kv_.block_size(), k, v_.data() + r * cfg_.kv_dim());
        }
      },
      8);

  const cpu::AttentionShape shape{cfg_.num_heads, cfg_.num_kv_heads, hd, cfg_.window_of(l), cfg_.attention_scale(),
                                  cfg_.attn_softcap.value_or(0.0)};
  cpu::paged_attention(q_.data(), b, kv_, place, shape, attn_.data(), pool_, !matmul_.batch_invariant);
  cpu::matmul(attn_.data(), rows, w.wo, proj_.data(), pool_, w.bo, matmul_);
  add_residual(x, rows, w.post_attn_norm);
}

// x += W_down · (act(W_gate·norm(x)) * W_up·norm(x)), and the sum through a norm of its own
// first where the model has one (Gemma)
void CpuBackend::ffn_block(int64_t l, int64_t rows, float* x) {
  const LayerWeights& w = layer(l);
  norm_rows(x, w.ffn_norm, rows, xn_.data());
  gated_ffn(xn_.data(), rows, w.w_gate, w.w_up, w.w_down, proj_.data(), gate_.data(), up_.data(), pool_);
  add_residual(x, rows, w.post_ffn_norm);
}

// out = W_down · (act(W_gate·in) * W_up·in), act = SiLU or GELU (Gemma); `gate` and `up` hold
// rows × the FFN's width.
void CpuBackend::gated_ffn(const float* in, int64_t rows, const TensorView& w_gate, const TensorView& w_up,
                           const TensorView& w_down, float* out, float* gate, float* up, ThreadPool& pool) {
  const int64_t inter = w_gate.rows();
  cpu::matmuls(in, rows, {{w_gate, gate}, {w_up, up}}, pool, matmul_);
  pool.parallel_for(
      rows,
      [&](int64_t begin, int64_t end, int) {
        thread_local std::vector<float> scratch;
        scratch.resize(static_cast<size_t>(inter));
        for (int64_t r = begin; r < end; ++r)
          cpu::gated_row(cfg_.activation, gate + r * inter, up + r * inter, inter, scratch.data());
      },
      4);
  cpu::matmul(gate, rows, w_down, out, pool, nullptr, matmul_);
}

// x += Σ p_e · FFN_e(norm(x)) over the experts the router picks for each row, plus
// Qwen2-MoE's shared expert scaled by sigmoid(w · norm(x)). Each chosen expert runs once, over
// all the rows that chose it, so its weights are read once per step however many rows there
// are. With many experts to run (decode: 8 of 128 per row), each thread runs whole experts,
// one parallel region for all of them instead of four per expert; with few (Mixtral's
// prefill) each expert's products are split across the threads.
void CpuBackend::expert_block(int64_t l, int64_t rows, float* x) {
  const LayerWeights& w = layer(l);
  const ExpertWeights& experts = w.experts;
  const int64_t d = cfg_.hidden_size, k = cfg_.experts_per_token, inter = cfg_.expert_intermediate_size;
  norm_rows(x, w.ffn_norm, rows, xn_.data());
  cpu::matmul(xn_.data(), rows, experts.router, router_logits_.data(), pool_, nullptr, matmul_);
  cpu::route_experts(router_logits_.data(), rows, cfg_.num_experts, k, cfg_.norm_topk_prob, routing_);
  const int64_t active = routing_.active_experts();
  expert_use_.routings += 1;
  expert_use_.choices += rows * k;
  expert_use_.experts_run += active;

  // Expert e answers its rows into expert_out_ at its slots: [begin[e], begin[e+1]) x d.
  const auto run_expert = [&](int64_t e, ThreadPool& pool, float* in, float* gate, float* up) {
    const int64_t n = routing_.rows_of(e), first = routing_.begin[static_cast<size_t>(e)];
    const int32_t* chosen_by = routing_.rows.data() + first;
    for (int64_t i = 0; i < n; ++i) std::copy_n(xn_.data() + chosen_by[i] * d, d, in + i * d);
    const auto x_e = static_cast<size_t>(e);
    gated_ffn(in, n, experts.gate[x_e], experts.up[x_e], experts.down[x_e], expert_out_.data() + first * d, gate, up,
              pool);
  };
  if (active >= 2 * pool_.size()) {
    pool_.parallel_for_dynamic(cfg_.num_experts, [&](int64_t begin, int64_t end, int thread) {
      thread_local std::vector<float> in, gate, up;
      for (int64_t e = begin; e < end; ++e) {
        const int64_t n = routing_.rows_of(e);
        if (n == 0) continue;
        grow(in, n * d);
        grow(gate, n * inter);
        grow(up, n * inter);
        run_expert(e, serial_pools_[static_cast<size_t>(thread)], in.data(), gate.data(), up.data());
      }
    });
  } else {
    for (int64_t e = 0; e < cfg_.num_experts; ++e)
      if (routing_.rows_of(e) > 0) run_expert(e, pool_, expert_in_.data(), gate_.data(), up_.data());
  }

  float* sum = proj_.data();
  if (w.shared_expert_gate)
    gated_ffn(xn_.data(), rows, w.w_gate, w.w_up, w.w_down, sum, gate_.data(), up_.data(), pool_);
  pool_.parallel_for(
      rows,
      [&](int64_t begin, int64_t end, int) {
        thread_local std::vector<int64_t> by_expert;  // a row's choices in expert order, as the GPU sums them
        for (int64_t r = begin; r < end; ++r) {
          float* acc = sum + r * d;
          if (w.shared_expert_gate) {
            float z = 0;
            for (int64_t i = 0; i < d; ++i) z += xn_[static_cast<size_t>(r * d + i)] * w.shared_expert_gate[i];
            const float scale = 1.0f / (1.0f + std::exp(-z));
            for (int64_t i = 0; i < d; ++i) acc[i] *= scale;
          } else {
            std::fill(acc, acc + d, 0.0f);
          }
          by_expert.resize(static_cast<size_t>(k));
          std::iota(by_expert.begin(), by_expert.end(), r * k);
          std::sort(by_expert.begin(), by_expert.end(), [&](int64_t a, int64_t b) {
            return routing_.choice[static_cast<size_t>(a)] < routing_.choice[static_cast<size_t>(b)];
          });
          for (const int64_t j : by_expert) {
            const float p = routing_.weight[static_cast<size_t>(j)];
            const float* y = expert_out_.data() + static_cast<int64_t>(routing_.slot[static_cast<size_t>(j)]) * d;
            for (int64_t i = 0; i < d; ++i) acc[i] += p * y[i];
          }
        }
      },
      4);
  add_residual(x, rows, w.post_ffn_norm);
}

void CpuBackend::add_residual(float* x, int64_t rows, const float* norm) {
  const int64_t d = cfg_.hidden_size;
  pool_.parallel_for(
      rows,
      [&](int64_t begin, int64_t end, int) {
        if (norm)
          for (int64_t r = begin; r < end; ++r)
            cpu::rmsnorm(proj_.data() + r * d, norm, d, cfg_.rms_norm_eps, proj_.data() + r * d);
        for (int64_t i = begin * d; i < end * d; ++i) x[i] += proj_[static_cast<size_t>(i)];
      },
      16);
}

// Only rows that will be sampled pay for the vocabulary-sized projection.
void CpuBackend::lm_head(const ForwardBatch& b, const float* x, std::vector<float>& logits) {
  const int64_t d = cfg_.hidden_size, n = static_cast<int64_t>(b.logit_rows.size());
  for (int64_t i = 0; i < n; ++i)
    cpu::rmsnorm(x + b.logit_rows[static_cast<size_t>(i)] * d, model_->final_norm(), d, cfg_.rms_norm_eps,
                 xn_.data() + i * d);
  logits.resize(static_cast<size_t>(n * cfg_.vocab_size));
  cpu::matmul(xn_.data(), n, lm_head_, logits.data(), pool_, nullptr, matmul_);
  if (cfg_.final_softcap) {  // Gemma 2: logits -> cap * tanh(logits / cap), as transformers divides
    const auto cap = static_cast<float>(*cfg_.final_softcap);
    for (float& v : logits) v /= cap;
    cpu::scaled_tanh_inplace(logits.data(), static_cast<int64_t>(logits.size()), cap);
  }
}

}  // namespace orzo
