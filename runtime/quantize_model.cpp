#include "runtime/quantize_model.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/load_error.hpp"
#include "core/thread_pool.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_writer.hpp"
#include "formats/safetensors.hpp"
#include "kernels/cpu/convert.hpp"
#include "runtime/gguf_names.hpp"
#include "runtime/model_config.hpp"

namespace orzo {
namespace {

constexpr size_t kChunkBytes = 16u << 20;  // input rows decoded and re-encoded at a time

// One tensor of the output and where its rows come from.
struct Source {
  std::string name;  // GGUF name
  // The input's bytes (names and shapes as the input stores them): one tensor, or one per
  // expert, whose rows follow each other in the output's [experts, rows, cols].
  std::vector<TensorView> parts;
  std::vector<float> values;  // instead of parts: a tensor computed here (rope_freqs)
  std::vector<int64_t> shape;
  int64_t rope_heads = 0;     // > 0: rows are permuted from HF order into llama.cpp's
  float offset = 0.0f;        // added to every value: Gemma's norms are stored as 1 + w

  size_t input_bytes() const {
    size_t n = 0;
    for (const auto& p : parts) n += p.nbytes;
    return n;
  }
  // Output row r as the input stores it.
  const uint8_t* row(int64_t r) const {
    const int64_t per_part = parts.front().rows();
    return parts[static_cast<size_t>(r / per_part)].row(r % per_part);
  }
};

struct Input {
  std::vector<std::shared_ptr<const MappedFile>> files;  // keep the views' bytes mapped
  std::vector<Source> tensors;
  std::function<void(GgufWriter&)> write_metadata;
  int64_t layers = 0;
};

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Keys the output states afresh.
const std::set<std::string> kRewrittenKeys = {"general.file_type", "general.quantization_version", "general.alignment"};

Input read_gguf_input(const std::string& path) {
  Input in;
  auto f = std::make_shared<GgufFile>(read_gguf(path));
  const ModelConfig config = read_gguf_config(*f);  // refuses what orzo cannot run
  in.layers = config.num_layers;
  in.files.push_back(f->file);
  for (const auto& t : f->tensors) in.tensors.push_back({t.name, {t}, {}, t.shape, 0});
  in.write_metadata = [f](GgufWriter& out) {
    for (const auto& key : f->metadata.keys())
      if (!kRewrittenKeys.count(key)) out.add_raw(key, f->metadata.raw(key));
  };
  return in;
}

std::string gguf_architecture(const ModelConfig& c, const std::string& source) {
  if (c.architecture == "qwen2" || c.architecture == "qwen3" || c.architecture == "gemma2" || c.architecture == "gemma3" ||
      c.architecture == "smollm3" || c.architecture == "qwen2moe" || c.architecture == "qwen3moe")
    return c.architecture;
  if (c.architecture == "phi3") return "phi3";  // q|k|v and gate|up stay fused, as its converter keeps them
  // llama.cpp converts Mistral as llama (its sliding window is a key of its own), and
  // Mixtral as llama with experts.
  if (c.architecture == "llama" || c.architecture == "mistral" || c.architecture == "mixtral") return "llama";
  throw LoadError(source + ": no GGUF layout for architecture " + c.architecture);
}

// Llama 3 scaling as llama.cpp stores it: per-frequency divisors of the unscaled inverse
// frequencies, which orzo's GGUF loader (and llama.cpp) divide by.
std::vector<float> rope_divisors(const ModelConfig& c) {
  ModelConfig unscaled = c;
  unscaled.rope_scaling = {};
  const auto base = rope_inv_freq(unscaled), scaled = rope_inv_freq(c);
  std::vector<float> d(base.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = base[i] / scaled[i];
  return d;
}

Input read_hf_input(const std::string& dir, const QuantizeOptions& options) {
  Input in;
  const ModelConfig c = read_hf_config(dir);
  const std::string arch = gguf_architecture(c, dir);
  // orzo's GGUF reader (as llama.cpp) knows biases only as Qwen2's q/k/v ones.
  if (c.o_bias || (c.qkv_bias && arch != "qwen2" && arch != "qwen2moe"))
    throw LoadError(dir + "/config.json: attention biases of " + c.architecture + " have no GGUF layout here");
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  if (gemma) {
    // llama.cpp reads no key for these: a model off its fixed rules would load as another.
    ModelConfig as_read = c;
    apply_gguf_gemma_rules(as_read);
    if (as_read.sliding_layers != c.sliding_layers || as_read.rope_local_theta != c.rope_local_theta ||
        std::abs(as_read.attention_scale() / c.attention_scale() - 1) > 1e-12)
      throw LoadError(dir + "/config.json: its sliding layers, local RoPE base or query_pre_attn_scalar differ from "
                      "what llama.cpp assumes of " + arch + " GGUFs, which have no keys for them");
  }
  if (arch == "smollm3")
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (!c.rotates(l) != ((l + 1) % 4 == 0))
        throw LoadError(dir + "/config.json: its layers without RoPE are not every fourth, which llama.cpp assumes of "
                              "smollm3 GGUFs (they have no key for it)");
  in.layers = c.num_layers;
  const bool permute = arch == "llama" || arch == "smollm3";
  // The experts' matrices (model.layers.N.mlp.experts.E.proj.weight, as the Hub's files
  // hold them), by their stacked name (without E) and then expert.
  std::map<std::string, std::map<int64_t, TensorView>> experts;
  for (auto& f : read_safetensors_dir(dir)) {
    in.files.push_back(f.file);
    for (const auto& t : f.tensors) {
      if (ends_with(t.name, "rotary_emb.inv_freq")) continue;
      if (t.name == "lm_head.weight" && c.tie_word_embeddings) continue;
      const std::string hf = canonical_hf_name(t.name);
      if (const auto at = hf.find(".mlp.experts."); at != std::string::npos && t.shape.size() == 2) {
        const size_t first = at + 13, dot = hf.find('.', first);
        const std::string digits = hf.substr(first, dot == std::string::npos ? std::string::npos : dot - first);
        if (dot != std::string::npos && !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos) {
          const int64_t e = digits.size() <= 9 ? std::stoll(digits) : c.num_experts;
          if (e >= c.num_experts) throw LoadError(t.file + ": tensor " + t.name + " is past the config's " +
                                                  std::to_string(c.num_experts) + " experts");
          experts[hf.substr(0, first) + hf.substr(dot + 1)][e] = t;
          continue;
        }
      }
      if (ends_with(hf, ".mlp.shared_expert_gate.weight") && t.shape.size() == 2) {
        // One row in HF, a vector in GGUF (llama.cpp's converter squeezes it).
        in.tensors.push_back({*gguf_name_of_hf(hf, c.architecture), {t}, {}, {t.shape.back()}, 0});
        continue;
      }
      const auto name = gguf_name_of_hf(hf, c.architecture);
      if (!name) throw LoadError(t.file + ": tensor " + t.name + " has no place in the GGUF layout");
      int64_t heads = 0;
      if (permute && t.shape.size() == 2) {
        if (t.name.find("self_attn.q_proj.weight") != std::string::npos) heads = c.num_heads;
        if (t.name.find("self_attn.k_proj.weight") != std::string::npos) heads = c.num_kv_heads;
      }
      const bool norm = t.shape.size() == 1 && ends_with(t.name, "norm.weight");
      in.tensors.push_back({*name, {t}, {}, t.shape, heads, norm ? static_cast<float>(c.norm_weight_offset) : 0.0f});
    }
  }
  for (auto& [stacked, by_expert] : experts) {
    const auto name = gguf_name_of_hf(stacked, c.architecture);
    if (!name) throw LoadError(dir + ": tensor " + stacked + " (per expert) has no place in the GGUF layout");
    Source s{*name, {}, {}, {}, 0};
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const auto it = by_expert.find(e);
      if (it == by_expert.end())
        throw LoadError(dir + ": expert " + std::to_string(e) + " of " + stacked + " is missing (the config has " +
                        std::to_string(c.num_experts) + ")");
      if (it->second.shape != by_expert.begin()->second.shape || it->second.dtype != by_expert.begin()->second.dtype)
        throw LoadError(it->second.name + ": its shape or dtype differs from expert 0's");
      s.parts.push_back(it->second);
    }
    s.shape = {c.num_experts, s.parts[0].shape[0], s.parts[0].shape[1]};
    in.tensors.push_back(std::move(s));
  }
  if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
    auto d = rope_divisors(c);
    const auto n = static_cast<int64_t>(d.size());
    in.tensors.push_back({"rope_freqs.weight", {}, std::move(d), {n}, 0});
  }
  if (c.rope_scaling.type == RopeScaling::Type::LongRope) {  // llama.cpp divides by these, as transformers does
    for (const auto& [name, factors] : {std::pair{"rope_factors_long.weight", &c.rope_scaling.long_factor},
                                        std::pair{"rope_factors_short.weight", &c.rope_scaling.short_factor}}) {
      std::vector<float> values(factors->begin(), factors->end());
      const auto n = static_cast<int64_t>(values.size());
      in.tensors.push_back({name, {}, std::move(values), {n}, 0});
    }
  }
  in.write_metadata = [c, arch, dir, tokenizer = options.hf_tokenizer](GgufWriter& out) {
    const std::string p = arch + ".";
    const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
    out.add_string("general.architecture", arch);
    out.add_string("general.name", std::filesystem::path(dir).filename().string());
    out.add_u32(p + "context_length", u32(c.max_position));
    out.add_u32(p + "embedding_length", u32(c.hidden_size));
    out.add_u32(p + "feed_forward_length", u32(c.intermediate_size));
    out.add_u32(p + "block_count", u32(c.num_layers));
    out.add_u32(p + "attention.head_count", u32(c.num_heads));
    out.add_u32(p + "attention.head_count_kv", u32(c.num_kv_heads));
    out.add_u32(p + "attention.key_length", u32(c.head_dim));
    out.add_u32(p + "attention.value_length", u32(c.head_dim));
    out.add_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
    out.add_f32(p + "rope.freq_base", static_cast<float>(c.rope_theta));
    out.add_u32(p + "rope.dimension_count", u32(c.rope_dim()));
    out.add_u32(p + "vocab_size", u32(c.vocab_size));
    if (c.rope_scaling.type == RopeScaling::Type::Linear) {
      out.add_string(p + "rope.scaling.type", "linear");
      out.add_f32(p + "rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
    }
    if (c.rope_scaling.type == RopeScaling::Type::LongRope) {
      out.add_f32(p + "rope.scaling.attn_factor", static_cast<float>(c.rope_scaling.attention_factor));
      out.add_u32(p + "rope.scaling.original_context_length", u32(c.rope_scaling.original_max_position));
    }
    if (c.sliding_window) out.add_u32(p + "attention.sliding_window", u32(*c.sliding_window));
    if (c.attn_softcap) out.add_f32(p + "attn_logit_softcapping", static_cast<float>(*c.attn_softcap));
    if (c.final_softcap) out.add_f32(p + "final_logit_softcapping", static_cast<float>(*c.final_softcap));
    if (c.num_experts > 0) {  // the keys read_gguf_experts reads
      out.add_u32(p + "expert_count", u32(c.num_experts));
      out.add_u32(p + "expert_used_count", u32(c.experts_per_token));
      // A Mixtral's experts are feed_forward_length wide, and its converter says no more.
      if (arch != "llama") out.add_u32(p + "expert_feed_forward_length", u32(c.expert_intermediate_size));
      if (c.shared_expert_intermediate_size > 0)
        out.add_u32(p + "expert_shared_feed_forward_length", u32(c.shared_expert_intermediate_size));
      out.add_bool(p + "expert_weights_norm", c.norm_topk_prob);
    }
    if (c.bos_token_id) out.add_u32("tokenizer.ggml.bos_token_id", u32(*c.bos_token_id));
    if (!c.eos_token_ids.empty()) out.add_u32("tokenizer.ggml.eos_token_id", u32(c.eos_token_ids[0]));
    if (tokenizer) tokenizer(out, dir);
  };
  return in;
}

void write_rows(GgufWriter& out, ThreadPool& pool, const Source& s, DType type, size_t& bytes_done) {
  const int64_t cols = s.shape.empty() ? 1 : s.shape.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.shape.size(); ++i) rows *= s.shape[i];
  const size_t out_row = dtype_row_bytes(type, cols);
  const int64_t per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / (static_cast<size_t>(cols) * 4)));
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min(rows, per_chunk)) * out_row);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()), std::vector<float>(static_cast<size_t>(cols)));
  for (int64_t first = 0; first < rows; first += per_chunk) {
    const int64_t n = std::min(per_chunk, rows - first);
    pool.parallel_for(n, [&](int64_t begin, int64_t end, int thread) {
      float* row = scratch[static_cast<size_t>(thread)].data();
      for (int64_t r = begin; r < end; ++r) {
        const int64_t at = s.rope_heads > 0 ? hf_row_of_interleaved(first + r, rows, s.rope_heads) : first + r;
        if (!s.parts.empty())
          cpu::dequantize_row(s.parts.front().dtype, s.row(at), cols, row);
        else
          std::copy_n(s.values.data() + at * cols, cols, row);
        if (s.offset != 0.0f)
          for (int64_t i = 0; i < cols; ++i) row[i] += s.offset;
        cpu::quantize_row(type, row, cols, chunk.data() + static_cast<size_t>(r) * out_row);
      }
    });
    out.write_tensor_data(chunk.data(), static_cast<size_t>(n) * out_row);
    if (!s.parts.empty()) bytes_done += static_cast<size_t>(n) * dtype_row_bytes(s.parts.front().dtype, cols);
  }
}

}  // namespace

void quantize_model(const std::string& in_path, const std::string& out_path, const QuantTarget& target,
                    const QuantizeOptions& options) {
  const Input in = is_directory(in_path) ? read_hf_input(in_path, options) : read_gguf_input(in_path);
  bool has_output = false;
  size_t bytes_total = 0;
  for (const auto& s : in.tensors) {
    has_output = has_output || s.name == "output.weight";
    bytes_total += s.input_bytes();
  }
  // Every type is decided before anything is written, so a tensor the target cannot store
  // fails fast.
  std::vector<DType> types;
  for (const auto& s : in.tensors) types.push_back(recipe_type(target, {s.name, s.shape}, in.layers, has_output));

  GgufWriter out(out_path);
  in.write_metadata(out);
  out.add_u32("general.file_type", target.file_type);
  out.add_u32("general.quantization_version", 2);  // ggml's GGML_QNT_VERSION of these block layouts
  for (size_t i = 0; i < in.tensors.size(); ++i) out.add_tensor(in.tensors[i].name, types[i], in.tensors[i].shape);

  ThreadPool pool(options.threads);
  size_t bytes_done = 0;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    write_rows(out, pool, in.tensors[i], types[i], bytes_done);
    if (options.on_tensor) options.on_tensor({i + 1, in.tensors.size(), in.tensors[i].name, types[i], bytes_done, bytes_total});
  }
  out.finish();
}

}  // namespace orzo
