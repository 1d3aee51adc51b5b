#include "runtime/cuda/cuda_backend.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "kernels/cuda/bias.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/expert_routing.hpp"
#include "kernels/cuda/expert_rows.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope_cache.hpp"
#include "kernels/cuda/softcap.hpp"
#include "kernels/cuda/swiglu.hpp"
#include "runtime/batch_check.hpp"

namespace orzo::cuda {

namespace {

// Memory the CUDA context, cuBLAS and the graphs take beyond what the arenas count.
constexpr size_t kReserveBytes = size_t{512} << 20;

int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

void select(int device) { check(cudaSetDevice(device), ("cuda:" + std::to_string(device)).c_str()); }

[[noreturn]] void too_big(const std::string& what, int64_t got, int64_t most) {
  throw std::invalid_argument("forward batch: " + std::to_string(got) + " " + what + ", this GPU stage holds at most " +
                              std::to_string(most));
}

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<const Model> model, Options o)
    : model_(std::move(model)),
      cfg_(model_->config()),
      o_(o),
      range_(resolve_range(o.range, cfg_.num_layers)),
      name_("cuda:" + std::to_string(o.device)),
      scratch_(DeviceArena::measuring()),
      kv_(DeviceArena::measuring()) {
  std::string why;
  if (!gpu_available(&why)) throw CudaError(name_ + ": no GPU (" + why + ")");
  const DeviceProperties props = device_properties(o.device);  // throws for a missing index
  sm_count_ = props.sm_count;
  if (o.max_rows <= 0 || o.max_seqs <= 0 || o.max_model_len <= 0 || o.block_size <= 0)
    throw std::invalid_argument(name_ + ": rows, sequences, model length and block size must be positive");
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
    throw std::invalid_argument("gpu_memory_utilization must be in (0, 1]");
  max_table_ = ceil_div(o.max_model_len, o.block_size);
  kv_layout_ = o.kv_layout.groups() > 0 ? o.kv_layout : KvLayout::flat(cfg_.num_layers);
  if (kv_layout_.group_of.size() != static_cast<size_t>(cfg_.num_layers))
    throw std::invalid_argument(name_ + ": the KV layout covers " + std::to_string(kv_layout_.group_of.size()) +
                                " layers, the model has " + std::to_string(cfg_.num_layers));
  kv_planes_ = kv_layout_.planes_in(range_.begin, range_.end);
  for (int64_t l = range_.begin; l < range_.end; ++l) has_experts_ = has_experts_ || cfg_.has_experts(l);
  select(o.device);
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), name_.c_str());

  weights_ = std::make_unique<DeviceWeights>(*model_, range_, embeds(), produces_logits(), o.device);
  layout_scratch(scratch_);
  scratch_ = DeviceArena(o.device, scratch_.used(), "the step scratch for " + std::to_string(o.max_rows) + " rows");
  layout_scratch(scratch_);
  // Padding rows of a replayed graph read whatever their rows hold: zeros, never garbage.
  check(cudaMemset(scratch_.base(), 0, scratch_.used()), name_.c_str());
  gemm_ = std::make_unique<Gemm>(stream_, gemm_ws_, Gemm::kWorkspaceBytes);

  // Inputs: three int arrays per row and a cache slot per row and group, the logit rows, a
  // block table per sequence and group (a decode graph's padded rows each have one) and the
  // attention tiles, each array rounded up to the staging's alignment.
  const auto groups = static_cast<size_t>(kv_layout_.groups());
  const size_t ints = (3 + groups) * static_cast<size_t>(o.max_rows) + static_cast<size_t>(o.max_seqs) +
                      groups * static_cast<size_t>(o.max_seqs) * static_cast<size_t>(max_table_);
  inputs_ = std::make_unique<StagedUpload>(
      ints * sizeof(int32_t) + static_cast<size_t>(o.max_rows) * sizeof(AttentionTile) + 7 * 16, name_ + " step inputs");
  // Sampling inputs: a draw per row, with room for 64-token penalty windows and 16 biases
  // each; a step that needs more grows them (sampling is never part of a graph).
  const auto rows = static_cast<size_t>(o.max_seqs);
  draws_in_ = std::make_unique<StagedUpload>(rows * (sizeof(DeviceDraw) + 64 * sizeof(int32_t) + 16 * 8) + 64,
                                             name_ + " sampling inputs");
  check(cudaMallocHost(reinterpret_cast<void**>(&host_samples_), rows * sizeof(DeviceSample)), name_.c_str());
  if (has_experts_)
    check(cudaMallocHost(reinterpret_cast<void**>(&host_begin_), static_cast<size_t>(cfg_.num_experts + 1) * sizeof(int32_t)),
          name_.c_str());
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(o_.device);
  if (stream_) cudaStreamSynchronize(stream_);
  gemm_.reset();
  if (host_samples_) cudaFreeHost(host_samples_);
  if (host_begin_) cudaFreeHost(host_begin_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::layout_scratch(DeviceArena& a) {
  const auto rows = static_cast<size_t>(o_.max_rows);
  // A step samples each sequence at most once, and a decode graph pads to at most max_seqs rows.
  const auto logit_rows = static_cast<size_t>(o_.max_seqs);
  const auto hidden = static_cast<size_t>(cfg_.hidden_size), qd = static_cast<size_t>(cfg_.q_dim()),
             kvd = static_cast<size_t>(cfg_.kv_dim());
  const size_t half = elem_bytes(storage());
  // MoE layers route each row to top_k experts: up to rows x top_k choices in a step.
  const size_t experts = has_experts_ ? static_cast<size_t>(cfg_.num_experts) : 0,
               top_k = has_experts_ ? static_cast<size_t>(cfg_.experts_per_token) : 0, choices = rows * top_k;
  // The widest FFN activation of a step: a dense layer's or the shared expert's over every row,
  // or the experts' over every choice.
  const size_t ffn = std::max({rows * static_cast<size_t>(cfg_.intermediate_size),
                               rows * static_cast<size_t>(cfg_.shared_expert_intermediate_size),
                               choices * static_cast<size_t>(cfg_.expert_intermediate_size)});
  x_ = a.take<float>(rows * hidden);
  xn_ = a.take_bytes(std::max(rows, logit_rows) * hidden * half);
  qkv_ = a.take<float>(rows * (qd + 2 * kvd));
  q_ = a.take<float>(rows * qd);
  attn_ = a.take_bytes(rows * qd * half);
  gate_up_ = a.take<float>(2 * ffn);
  act_ = a.take_bytes(ffn * half);
  if (cfg_.sandwich_norms) proj_ = a.take<float>(rows * hidden);
  if (has_experts_) {
    router_logits_ = a.take<float>(rows * (experts + 1));
    choice_ = a.take<int32_t>(choices);
    choice_weight_ = a.take<float>(choices);
    expert_begin_ = a.take<int32_t>(experts + 1);
    grouped_row_ = a.take<int32_t>(choices);
    row_slot_ = a.take<int32_t>(choices);
    row_weight_ = a.take<float>(choices);
    expert_in_ = a.take_bytes(choices * hidden * half);
    expert_out_ = a.take<float>(choices * hidden);
    if (cfg_.shared_expert_intermediate_size > 0) shared_out_ = a.take<float>(rows * hidden);
  }
  if (produces_logits()) {
    logits_ = a.take<float>(logit_rows * static_cast<size_t>(cfg_.vocab_size));
    sampling_ws_ = a.take_bytes(sampling_workspace_bytes(o_.max_seqs, static_cast<int32_t>(cfg_.vocab_size)));
    samples_ = a.take<DeviceSample>(logit_rows);
  }
  gemm_ws_ = a.take_bytes(Gemm::kWorkspaceBytes);
  attention_ws_ = a.take_bytes(decode_workspace_bytes(o_.max_seqs, static_cast<int32_t>(cfg_.num_heads),
                                                      static_cast<int32_t>(cfg_.head_dim), kMaxDecodeSplits));
}

size_t CudaBackend::kv_bytes_per_block() const {
  return 2 * static_cast<size_t>(kv_layout_.planes_for(range_.begin, range_.end)) * static_cast<size_t>(o_.block_size) *
         static_cast<size_t>(cfg_.kv_dim()) * elem_bytes(storage());
}

int32_t CudaBackend::affordable_kv_blocks(const std::vector<CudaBackend*>& stages) {
  std::map<int, std::pair<double, size_t>> devices;  // device -> (utilization, KV bytes per block of its stages)
  for (const auto* stage : stages) {
    auto& [utilization, per_block] = devices[stage->o_.device];
    utilization = stage->o_.gpu_memory_utilization;
    per_block += stage->kv_bytes_per_block();
  }
  double blocks = 2.0e9;
  for (const auto& [device, share] : devices) {
    select(device);
    size_t free_bytes = 0, total = 0;
    check(cudaMemGetInfo(&free_bytes, &total), ("cuda:" + std::to_string(device)).c_str());
    const double budget = share.first * static_cast<double>(total) - static_cast<double>(total - free_bytes) -
                          static_cast<double>(kReserveBytes);
    blocks = std::min(blocks, std::max(0.0, budget) / static_cast<double>(share.second));
  }
  return static_cast<int32_t>(blocks);
}

void CudaBackend::allocate_kv(int32_t blocks) {
  if (kv_blocks_ > 0) throw std::logic_error(name_ + ": the KV pool is allocated once");
  if (blocks <= 0) throw std::invalid_argument(name_ + ": the KV pool needs at least one block");
  select(o_.device);
  const size_t per_pool = static_cast<size_t>(blocks) * kv_bytes_per_block() / 2;
  kv_ = DeviceArena(o_.device, 2 * per_pool + 2 * DeviceArena::kAlignment,
                    "a KV pool of " + std::to_string(blocks) + " blocks");
  k_cache_ = kv_.take_bytes(per_pool);
  v_cache_ = kv_.take_bytes(per_pool);
  kv_blocks_ = blocks;
}

void CudaBackend::receive_from(CudaBackend& previous) {
  if (previous.range_.end != range_.begin)
    throw std::invalid_argument(name_ + ": layers " + std::to_string(range_.begin) + "- do not follow " +
                                previous.name_ + "'s, which end at " + std::to_string(previous.range_.end));
  if (previous.o_.device != o_.device) {
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, o_.device, previous.o_.device), name_.c_str());
    if (can) {
      select(o_.device);
      const cudaError_t e = cudaDeviceEnablePeerAccess(previous.o_.device, 0);
      if (e != cudaErrorPeerAccessAlreadyEnabled) check(e, "cudaDeviceEnablePeerAccess");
      cudaGetLastError();
    }
  }
  previous_ = &previous;
  previous.next_on_device_ = true;
}

void CudaBackend::synchronize() const { check(cudaStreamSynchronize(stream_), (name_ + ": step").c_str()); }

// A decode step: every row is the only row of its sequence, in sequence order, and is sampled
// in row order. The batcher builds decode steps this way; any other step runs eagerly.
bool CudaBackend::decodes_only(const ForwardBatch& b) const {
  const auto rows = b.rows();
  if (rows == 0 || rows > o_.max_seqs || b.sequences() != rows) return false;
  if (produces_logits() && static_cast<int64_t>(b.logit_rows.size()) != rows) return false;
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<size_t>(r);
    if (b.seq_index[i] != r) return false;
    if (produces_logits() && b.logit_rows[i] != r) return false;
  }
  return true;
}

CudaBackend::Step CudaBackend::stage_inputs(const ForwardBatch& b, int32_t padded_rows, bool decode, bool graph) {
  const auto rows = static_cast<int32_t>(b.rows());
  const int32_t bs = o_.block_size;
  int32_t longest = 1;
  for (const auto& table : b.block_tables) longest = std::max(longest, static_cast<int32_t>(table.size()));

  Step s;
  s.rows = padded_rows;
  s.logit_rows = produces_logits() ? (decode ? padded_rows : static_cast<int32_t>(b.logit_rows.size())) : 0;
  s.table_stride = graph ? std::min(graph_table_stride(longest), max_table_) : longest;
  // A decode step's padded rows (at most max_seqs) each have a table, so that group g's tables
  // start at the same place in every step of a graph's shape.
  s.group_tables = decode ? s.rows : b.sequences();
  const int32_t groups = kv_layout_.groups();
  inputs_->reset();
  // Padding rows: no token, no position (attention writes zeros), no cache slot.
  int32_t* tokens = inputs_->add(static_cast<size_t>(s.rows), s.tokens);
  int32_t* positions = inputs_->add(static_cast<size_t>(s.rows), s.positions);
  int32_t* seq_of_row = inputs_->add(static_cast<size_t>(s.rows), s.seq_of_row);
  int32_t* slots = inputs_->add(static_cast<size_t>(groups) * static_cast<size_t>(s.rows), s.slots);
  for (int32_t r = 0; r < s.rows; ++r) {
    const auto i = static_cast<size_t>(r);
    if (r >= rows) {
      tokens[i] = -1;
      positions[i] = -1;
      seq_of_row[i] = 0;
      for (int32_t g = 0; g < groups; ++g) slots[static_cast<size_t>(g) * static_cast<size_t>(s.rows) + i] = -1;
      continue;
    }
    const int32_t pos = b.positions[i], seq = b.seq_index[i];
    tokens[i] = embeds() ? b.tokens[i] : -1;
    positions[i] = pos;
    seq_of_row[i] = seq;
    for (int32_t g = 0; g < groups; ++g)
      slots[static_cast<size_t>(g) * static_cast<size_t>(s.rows) + i] =
          b.table(g, seq)[static_cast<size_t>(pos / bs)] * bs + pos % bs;
  }
  int32_t* logit_index = inputs_->add(static_cast<size_t>(s.logit_rows), s.logit_index);
  for (int32_t i = 0; i < s.logit_rows; ++i)
    logit_index[i] = decode ? i : b.logit_rows[static_cast<size_t>(i)];
  // Block tables last. A block a sliding group gave back lies before every window the step's
  // rows read; block 0 stands in for it, never read.
  const auto stride = static_cast<size_t>(s.table_stride);
  int32_t* tables = inputs_->add(static_cast<size_t>(groups) * static_cast<size_t>(s.group_tables) * stride, s.tables);
  std::fill(tables, tables + static_cast<size_t>(groups) * static_cast<size_t>(s.group_tables) * stride, 0);
  for (int32_t g = 0; g < groups; ++g)
    for (int32_t q = 0; q < b.sequences(); ++q) {
      const auto& table = b.table(g, q);
      int32_t* out = tables + (static_cast<size_t>(g) * static_cast<size_t>(s.group_tables) + static_cast<size_t>(q)) * stride;
      std::transform(table.begin(), table.end(), out, [](int32_t id) { return id == kNoBlock ? 0 : id; });
    }
  if (decode) {
    s.splits = decode_splits(s.rows, static_cast<int32_t>(cfg_.num_kv_heads), sm_count_, s.table_stride * bs);
  } else {
    const auto tiles = plan_prefill_tiles(b);
    s.tiles = static_cast<int32_t>(tiles.size());
    s.tile_list = inputs_->add_copy(tiles.data(), tiles.size());
  }
  inputs_->flush(stream_);
  return s;
}

// One step on the stream: each layer is
//   x += Wo · attention(rope(q), rope(k) -> cache, v -> cache),  q|k|v = Wqkv · norm(x)
//   x += Wdown · (act(Wgate · norm(x)) * Wup · norm(x)),          act = silu or gelu_tanh
//        or, in a MoE layer, the same FFN of each expert the row is routed to, weighted
// then the final norm and the LM head (and its soft cap) on the logit rows only.
void CudaBackend::enqueue_forward(const Step& s) {
  const Elem e = storage();
  const auto hidden = static_cast<int32_t>(cfg_.hidden_size), qd = static_cast<int32_t>(cfg_.q_dim()),
             kvd = static_cast<int32_t>(cfg_.kv_dim()), vocab = static_cast<int32_t>(cfg_.vocab_size);
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  if (embeds())
    embed_rows(e, weights_->embedding(), s.tokens, s.rows, hidden, static_cast<float>(cfg_.embed_scale), x_, stream_);
  for (int64_t l = 0; l < range_.end - range_.begin; ++l) {
    const DeviceLayer& w = weights_->layer(l);
    rmsnorm_rows(e, x_, w.attn_norm, nullptr, s.rows, hidden, eps, xn_, stream_);
    gemm_->linear(e, xn_, s.rows, w.qkv, qd + 2 * kvd, hidden, qkv_, false);
    attend(l, s);
    add_projection(attn_, qd, w.o, w.o_bias, w.post_attn_norm, s.rows);

    rmsnorm_rows(e, x_, w.ffn_norm, nullptr, s.rows, hidden, eps, xn_, stream_);
    if (cfg_.has_experts(range_.begin + l))
      expert_ffn(w, s.rows);
    else
      dense_ffn(w, s.rows);
  }
  if (s.logit_rows > 0) {
    rmsnorm_rows(e, x_, weights_->final_norm(), s.logit_index, s.logit_rows, hidden, eps, xn_, stream_);
    gemm_->linear(e, xn_, s.logit_rows, weights_->lm_head(), vocab, hidden, logits_, false);
    if (cfg_.final_softcap) softcap_rows(logits_, s.logit_rows, vocab, static_cast<float>(*cfg_.final_softcap), stream_);
  }
}

// x += Wdown · act(Wgate|up · xn)
void CudaBackend::dense_ffn(const DeviceLayer& w, int32_t rows) {
  const auto hidden = static_cast<int32_t>(cfg_.hidden_size), inter = static_cast<int32_t>(cfg_.intermediate_size);
  gemm_->linear(storage(), xn_, rows, w.gate_up, 2 * inter, hidden, gate_up_, false);
  swiglu_rows(storage(), cfg_.activation, gate_up_, rows, inter, act_, stream_);
  add_projection(act_, inter, w.down, nullptr, w.post_ffn_norm, rows);
}

// x += sigmoid(g · xn) · FFN_shared(xn) + Σ p_e · FFN_e(xn) over each row's top-k experts e,
// as CpuBackend::expert_block: the router's softmax and top k, the choices grouped by expert,
// each expert's FFN as GEMMs over the rows that chose it (its weights read once), and each
// row's outputs added back in expert order. The host sizes those GEMMs from the counts, so it
// waits here for the routing: a MoE step is never captured into a graph (graphs_enabled).
void CudaBackend::expert_ffn(const DeviceLayer& w, int32_t rows) {
  const Elem e = storage();
  const GateActivation act = cfg_.activation;
  const auto hidden = static_cast<int32_t>(cfg_.hidden_size), experts = static_cast<int32_t>(cfg_.num_experts),
             top_k = static_cast<int32_t>(cfg_.experts_per_token),
             inter = static_cast<int32_t>(cfg_.expert_intermediate_size), choices = rows * top_k;
  const int32_t routes = experts + (w.gate_up ? 1 : 0);  // the experts' logits, then the shared gate's
  gemm_->linear(e, xn_, rows, w.router, routes, hidden, router_logits_, false);
  route_expert_rows(router_logits_, routes, rows, experts, top_k, cfg_.norm_topk_prob, choice_, choice_weight_, stream_);
  group_by_expert(choice_, choice_weight_, rows, top_k, experts, expert_begin_, grouped_row_, row_slot_, row_weight_,
                  stream_);
  check(cudaMemcpyAsync(host_begin_, expert_begin_, static_cast<size_t>(experts + 1) * sizeof(int32_t),
                        cudaMemcpyDeviceToHost, stream_),
        "expert counts download");
  gather_rows(e, xn_, grouped_row_, choices, hidden, expert_in_, stream_);

  ExpertCombineArgs sum;
  if (w.gate_up) {  // the shared expert needs no counts: queued before the wait, the GPU never idles
    const auto shared_inter = static_cast<int32_t>(cfg_.shared_expert_intermediate_size);
    gemm_->linear(e, xn_, rows, w.gate_up, 2 * shared_inter, hidden, gate_up_, false);
    swiglu_rows(e, act, gate_up_, rows, shared_inter, act_, stream_);
    gemm_->linear(e, act_, rows, w.down, hidden, shared_inter, shared_out_, false);
    sum.shared = shared_out_;
    sum.shared_gate = router_logits_ + experts;
    sum.gate_stride = routes;
  }
  synchronize();

  // Expert x's choices are rows [begin[x], begin[x + 1]) of every grouped buffer.
  const auto half = static_cast<int64_t>(elem_bytes(e));
  for (int32_t x = 0; x < experts; ++x) {
    const int32_t first = host_begin_[x], n = host_begin_[x + 1] - first;
    gemm_->linear(e, static_cast<const char*>(expert_in_) + first * hidden * half, n, w.expert_gate_up[static_cast<size_t>(x)],
                  2 * inter, hidden, gate_up_ + static_cast<int64_t>(first) * 2 * inter, false);
  }
  swiglu_rows(e, act, gate_up_, choices, inter, act_, stream_);
  for (int32_t x = 0; x < experts; ++x) {
    const int32_t first = host_begin_[x], n = host_begin_[x + 1] - first;
    gemm_->linear(e, static_cast<const char*>(act_) + first * inter * half, n, w.expert_down[static_cast<size_t>(x)],
                  hidden, inter, expert_out_ + static_cast<int64_t>(first) * hidden, false);
  }

  sum.expert_out = expert_out_;
  sum.row_slot = row_slot_;
  sum.row_weight = row_weight_;
  sum.rows = rows;
  sum.top_k = top_k;
  sum.hidden = hidden;
  sum.out = w.post_ffn_norm ? proj_ : x_;
  sum.accumulate = !w.post_ffn_norm;
  combine_experts(sum, stream_);
  if (w.post_ffn_norm) rmsnorm_add_rows(proj_, w.post_ffn_norm, rows, hidden, static_cast<float>(cfg_.rms_norm_eps), x_, stream_);
}

// x += W · in (+ bias). The GEMM adds the residual itself (accumulate), unless the model
// normalizes the block's output first (post_norm, Gemma): then it writes proj_, and the norm
// adds that to x.
void CudaBackend::add_projection(const void* in, int32_t in_dim, const void* w, const float* bias,
                                 const float* post_norm, int32_t rows) {
  const auto hidden = static_cast<int32_t>(cfg_.hidden_size);
  float* y = post_norm ? proj_ : x_;
  gemm_->linear(storage(), in, rows, w, hidden, in_dim, y, !post_norm);
  if (bias) add_bias_rows(y, bias, rows, hidden, stream_);
  if (post_norm) rmsnorm_add_rows(proj_, post_norm, rows, hidden, static_cast<float>(cfg_.rms_norm_eps), x_, stream_);
}

// RoPE and the cache write, then attention over the cache, for layer l of the range.
void CudaBackend::attend(int64_t l, const Step& s) {
  const Elem e = storage();
  const int64_t layer = range_.begin + l;  // the model's index, by which the config sets windows and RoPE
  const DeviceLayer& w = weights_->layer(l);
  const size_t plane_bytes = static_cast<size_t>(kv_blocks_) * static_cast<size_t>(o_.block_size) *
                             static_cast<size_t>(cfg_.kv_dim()) * elem_bytes(e);
  const auto plane = static_cast<size_t>(kv_planes_[static_cast<size_t>(l)]);
  const auto group = static_cast<size_t>(kv_layout_.group_of[static_cast<size_t>(layer)]);
  void* k_layer = static_cast<char*>(k_cache_) + plane * plane_bytes;
  void* v_layer = static_cast<char*>(v_cache_) + plane * plane_bytes;

  QkvRopeArgs r;
  r.elem = e;
  r.qkv = qkv_;
  r.bias = w.qkv_bias;
  r.q_norm = w.q_norm;
  r.k_norm = w.k_norm;
  r.eps = static_cast<float>(cfg_.rms_norm_eps);
  r.interleaved = cfg_.rope_style == RopeStyle::Interleaved;
  const bool local = cfg_.local_rope(layer);
  r.inv_freq = cfg_.rotates(layer) ? weights_->inv_freq(local, cfg_.long_rope(o_.max_model_len)) : nullptr;
  r.rotary_dim = static_cast<int32_t>(cfg_.rope_dim());
  r.rope_scale = static_cast<float>(local ? 1.0 : cfg_.rope_scaling.attention_factor);
  r.positions = s.positions;
  r.slot_mapping = s.slots + group * static_cast<size_t>(s.rows);
  r.rows = s.rows;
  r.num_heads = static_cast<int32_t>(cfg_.num_heads);
  r.num_kv_heads = static_cast<int32_t>(cfg_.num_kv_heads);
  r.head_dim = static_cast<int32_t>(cfg_.head_dim);
  r.q_out = q_;
  r.k_cache = k_layer;
  r.v_cache = v_layer;
  qkv_rope_to_cache(r, stream_);

  PagedAttentionArgs a;
  a.elem = e;
  a.q = q_;
  a.k_cache = k_layer;
  a.v_cache = v_layer;
  a.block_tables = s.tables + group * static_cast<size_t>(s.group_tables) * static_cast<size_t>(s.table_stride);
  a.table_stride = s.table_stride;
  a.block_size = o_.block_size;
  a.seq_of_row = s.seq_of_row;
  a.positions = s.positions;
  a.rows = s.rows;
  a.num_heads = r.num_heads;
  a.num_kv_heads = r.num_kv_heads;
  a.head_dim = r.head_dim;
  a.sliding_window = static_cast<int32_t>(cfg_.window_of(layer).value_or(0));
  a.scale = static_cast<float>(cfg_.attention_scale());
  a.softcap = static_cast<float>(cfg_.attn_softcap.value_or(0.0));
  a.out = attn_;
  if (s.splits > 0)
    paged_attention_decode(a, s.splits, attention_ws_, stream_);
  else
    paged_attention_prefill(a, s.tile_list, s.tiles, stream_);
}

void CudaBackend::run(const ForwardBatch& b, std::vector<float>& hidden) {
  if (kv_blocks_ == 0) throw std::logic_error(name_ + ": allocate_kv before the first step");
  const bool from_previous = !embeds() && hidden.empty() && previous_;
  check_batch(b, BatchBounds{embeds(), cfg_.vocab_size, from_previous ? -1 : static_cast<int64_t>(hidden.size()),
                             cfg_.hidden_size, kv_blocks_, o_.block_size, &kv_layout_});
  const auto rows = static_cast<int32_t>(b.rows());
  if (rows > o_.max_rows) too_big("rows", rows, o_.max_rows);
  if (b.sequences() > o_.max_seqs) too_big("sequences", b.sequences(), o_.max_seqs);
  if (static_cast<int32_t>(b.logit_rows.size()) > o_.max_seqs) too_big("logit rows", static_cast<int64_t>(b.logit_rows.size()), o_.max_seqs);
  for (const auto& table : b.block_tables)
    if (static_cast<int32_t>(table.size()) > max_table_) too_big("blocks in a table", static_cast<int64_t>(table.size()), max_table_);
  if (rows == 0) return;

  select(o_.device);
  const size_t hidden_bytes = static_cast<size_t>(rows) * static_cast<size_t>(cfg_.hidden_size) * sizeof(float);
  if (from_previous) {
    check(cudaMemcpyPeerAsync(x_, o_.device, previous_->x_, previous_->o_.device, hidden_bytes, stream_),
          "hidden state from the previous stage");
  } else if (!embeds()) {
    check(cudaMemcpyAsync(x_, hidden.data(), hidden_bytes, cudaMemcpyHostToDevice, stream_), "hidden state upload");
  }

  const bool decode = decodes_only(b);
  // A graph's padded batch must fit both the step's rows and its logit rows.
  const int32_t graph_rows =
      decode && graphs_enabled() ? graph_batch_size(rows, std::min(o_.max_seqs, o_.max_rows)) : 0;
  const Step s = stage_inputs(b, graph_rows > 0 ? graph_rows : rows, decode, graph_rows > 0);
  if (graph_rows > 0)
    graphs_.run(stream_, s.rows, s.table_stride, [&] { enqueue_forward(s); });
  else
    enqueue_forward(s);

  if (!produces_logits()) {
    if (next_on_device_) {
      hidden.clear();
    } else {
      hidden.resize(static_cast<size_t>(rows) * static_cast<size_t>(cfg_.hidden_size));
      check(cudaMemcpyAsync(hidden.data(), x_, hidden_bytes, cudaMemcpyDeviceToHost, stream_), "hidden state download");
    }
  }
}

void CudaBackend::forward(const ForwardBatch& b, std::vector<float>& hidden, std::vector<float>& logits) {
  run(b, hidden);
  if (produces_logits()) {
    const size_t n = b.logit_rows.size() * static_cast<size_t>(cfg_.vocab_size);
    logits.resize(n);
    if (n) check(cudaMemcpyAsync(logits.data(), logits_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_), "logits download");
  }
  synchronize();
}

void CudaBackend::forward_and_sample(const ForwardBatch& b, std::vector<float>& hidden, const std::vector<DrawPlan>& plans,
                                     std::vector<SampleResult>& out) {
  if (!produces_logits()) throw std::logic_error(name_ + ": only the last stage samples");
  if (plans.size() != b.logit_rows.size())
    throw std::invalid_argument("forward batch: " + std::to_string(plans.size()) + " draws for " +
                                std::to_string(b.logit_rows.size()) + " logit rows");
  run(b, hidden);
  out.clear();
  const auto n = static_cast<int32_t>(plans.size());
  if (n > 0) {
    const auto vocab = static_cast<int32_t>(cfg_.vocab_size);
    packed_.pack(plans, vocab);
    const size_t needed = packed_.draws.size() * sizeof(DeviceDraw) + packed_.recent.size() * sizeof(int32_t) +
                          packed_.bias_tokens.size() * (sizeof(int32_t) + sizeof(float)) +
                          packed_.masks.size() * sizeof(uint64_t) + 5 * 16;
    if (needed > draws_in_->capacity())
      draws_in_ = std::make_unique<StagedUpload>(2 * needed, name_ + " sampling inputs");
    draws_in_->reset();
    const DeviceDraw* draws = draws_in_->add_copy(packed_.draws.data(), packed_.draws.size());
    const int32_t* recent = draws_in_->add_copy(packed_.recent.data(), packed_.recent.size());
    const int32_t* bias_tokens = draws_in_->add_copy(packed_.bias_tokens.data(), packed_.bias_tokens.size());
    const float* bias_values = draws_in_->add_copy(packed_.bias_values.data(), packed_.bias_values.size());
    const uint64_t* masks = draws_in_->add_copy(packed_.masks.data(), packed_.masks.size());
    draws_in_->flush(stream_);
    // Decode graphs leave each row's logits at its row, which is its logit row's index.
    sample_rows(logits_, n, vocab, draws, recent, bias_tokens, bias_values, masks, sampling_ws_, samples_, stream_);
    check(cudaMemcpyAsync(host_samples_, samples_, static_cast<size_t>(n) * sizeof(DeviceSample),
                          cudaMemcpyDeviceToHost, stream_),
          "samples download");
  }
  synchronize();
  for (int32_t i = 0; i < n; ++i)
    out.push_back(to_sample_result(host_samples_[i], plans[static_cast<size_t>(i)], static_cast<int32_t>(cfg_.vocab_size)));
}

}  // namespace orzo::cuda
