#include "cli/info_command.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/model_info.hpp"

namespace orzo::cli {
namespace {

using nlohmann::ordered_json;

constexpr size_t kTemplateLines = 20;  // what --template shows; the help says so

struct InfoFlags {
  std::string model;
  bool json = false;
  bool template_lines = false;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// v in the largest of `units` (each `step` times the one before) that keeps it at least 1.
template <size_t N>
std::string scaled_text(double v, double step, const char* const (&units)[N], const char* space) {
  size_t u = 0;
  while (v >= step && u + 1 < N) v /= step, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s%s" : "%.1f%s%s", v, space, units[u]);
  return buf;
}

std::string bytes_text(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  return scaled_text(static_cast<double>(bytes), 1024, units, " ");
}

// 134515008 -> 134.5M, as model cards write it.
std::string count_text(int64_t n) {
  static const char* const units[] = {"", "K", "M", "B", "T"};
  return scaled_text(static_cast<double>(n), 1000, units, "");
}

// A RoPE base of 1000000 reads as such, not as 1e+06; an epsilon stays short.
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::floor(v) && std::fabs(v) < 1e15 ? "%.0f" : "%g", v);
  return buf;
}

// Token texts may hold any bytes; quoted and escaped they stay on one line.
std::string quoted(const std::string& s) {
  return ordered_json(s).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

template <typename T>
std::string or_unknown(const std::optional<T>& v) {
  if (!v) return "?";
  if constexpr (std::is_floating_point_v<T>) return number_text(*v);
  else return std::to_string(*v);
}

std::string rope_text(const ModelInfo& m) {
  std::string s = "theta " + or_unknown(m.rope_theta);
  if (m.rope_scaling == "none") {
    s += ", no scaling";
  } else {
    s += ", " + m.rope_scaling + " scaling";
    if (m.rope_scaling_factor) s += " x" + number_text(*m.rope_scaling_factor);
    if (m.rope_original_context) s += " from " + std::to_string(*m.rope_original_context);
  }
  if (m.rotary_dim) s += ", on " + std::to_string(*m.rotary_dim) + " of " + or_unknown(m.head_dim) + " dims";
  return s;
}

void print_text(const ModelInfo& m, bool template_lines) {
  auto row = [](const char* label, const std::string& value) { std::printf("%-17s%s\n", label, value.c_str()); };
  const std::string format = m.format == "gguf" ? "GGUF v" + std::to_string(m.gguf_version) : "HF directory";
  row("model:", m.path + " (" + format + ", " + bytes_text(m.file_bytes) + ")");
  if (!m.name.empty()) row("name:", m.name);
  row("architecture:", (m.architecture.empty() ? "?" : m.architecture) +
                           (m.model_type.empty() ? "" : " (model_type " + m.model_type + ")"));
  if (!m.not_runnable.empty()) row("", "not supported for running: " + m.not_runnable);
  row("parameters:", count_text(m.parameters) + " (" + std::to_string(m.parameters) + ")");
  row("layers:", or_unknown(m.layers));
  row("hidden size:", or_unknown(m.hidden_size));
  row("FFN size:", or_unknown(m.ffn_size));
  row("heads:", or_unknown(m.heads) + " (KV heads " + or_unknown(m.kv_heads) + ")");
  row("head dim:", or_unknown(m.head_dim));
  row("vocabulary:", or_unknown(m.vocab_size));
  row("context length:", or_unknown(m.context_length));
  row("RoPE:", rope_text(m));
  if (m.sliding_window)
    row("attention:", "sliding window " + std::to_string(*m.sliding_window) + " on " +
                          (m.sliding_layers == m.layers ? "every layer" : std::to_string(m.sliding_layers) + " of " +
                                                                               or_unknown(m.layers) + " layers") +
                          (m.local_rope_theta ? ", which rotate with theta " + number_text(*m.local_rope_theta) : ""));
  if (m.experts > 0)
    row("experts:", std::to_string(m.experts) + ", " + std::to_string(m.experts_per_token) + " per token, FFN size " +
                        std::to_string(m.expert_ffn_size) +
                        (m.shared_expert_ffn_size ? ", a shared one of " + std::to_string(m.shared_expert_ffn_size) : "") +
                        (m.expert_layers == m.layers ? ", every layer"
                                                     : ", on " + std::to_string(m.expert_layers) + " of " +
                                                           or_unknown(m.layers) + " layers"));
  row("norm epsilon:", or_unknown(m.norm_eps));
  row("tied embeddings:", m.tied_embeddings ? (*m.tied_embeddings ? "yes" : "no") : "?");
  row("tensors:", std::to_string(m.tensors));
  for (const auto& t : m.tensor_types)
    std::printf("  %s: %lld tensor%s, %s\n", t.type.c_str(), static_cast<long long>(t.count), t.count == 1 ? "" : "s",
                bytes_text(t.bytes).c_str());
  if (!m.tokenizer) {
    row("tokenizer:", "none");
    return;
  }
  const TokenizerInfo& tok = *m.tokenizer;
  row("tokenizer:", tok.kind + (tok.pre.empty() ? "" : " (pre " + tok.pre + ")") + ", " + or_unknown(tok.vocab_size) +
                        " tokens");
  if (!tok.unreadable.empty()) row("", "orzo cannot load it: " + tok.unreadable);
  const std::pair<const char*, const std::optional<SpecialToken>*> specials[] = {
      {"  bos:", &tok.bos}, {"  eos:", &tok.eos}, {"  pad:", &tok.pad}, {"  unk:", &tok.unk}};
  for (const auto& [label, token] : specials)
    row(label, *token ? std::to_string((*token)->id) + " " + quoted((*token)->text) : "none");
  const auto lines = lines_of(tok.chat_template);
  if (lines.empty()) {
    row("chat template:", "none");
    return;
  }
  const std::string hint = " (--template shows the first " + std::to_string(kTemplateLines) + ")";
  row("chat template:", "yes, " + std::to_string(lines.size()) + " lines" + (template_lines ? "" : hint));
  if (!template_lines) return;
  for (size_t i = 0; i < lines.size() && i < kTemplateLines; ++i) std::printf("%s\n", lines[i].c_str());
  if (lines.size() > kTemplateLines) std::printf("... (%zu more lines)\n", lines.size() - kTemplateLines);
}

template <typename T>
ordered_json or_null(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json special_json(const std::optional<SpecialToken>& t) {
  if (!t) return nullptr;
  return {{"id", t->id}, {"text", t->text}};
}

ordered_json to_json(const ModelInfo& m, bool template_lines) {
  ordered_json j = {{"path", m.path}, {"format", m.format}};
  if (m.format == "gguf") j["gguf_version"] = m.gguf_version;
  if (!m.name.empty()) j["name"] = m.name;
  j["architecture"] = m.architecture;
  if (m.format == "hf") j["model_type"] = m.model_type;
  j["runnable"] = m.not_runnable.empty();
  if (!m.not_runnable.empty()) j["not_runnable_reason"] = m.not_runnable;
  j["parameters"] = m.parameters;
  j["layers"] = or_null(m.layers);
  j["hidden_size"] = or_null(m.hidden_size);
  j["ffn_size"] = or_null(m.ffn_size);
  j["heads"] = or_null(m.heads);
  j["kv_heads"] = or_null(m.kv_heads);
  j["head_dim"] = or_null(m.head_dim);
  j["vocab_size"] = or_null(m.vocab_size);
  j["context_length"] = or_null(m.context_length);
  j["rope"] = {
      {"theta", or_null(m.rope_theta)}, {"scaling", m.rope_scaling}, {"factor", or_null(m.rope_scaling_factor)},
      {"original_context", or_null(m.rope_original_context)}, {"rotary_dim", or_null(m.rotary_dim.has_value() ? m.rotary_dim : m.head_dim)}};
  if (m.sliding_window)
    j["sliding_window"] = {{"size", *m.sliding_window}, {"layers", m.sliding_layers}, {"local_rope_theta", or_null(m.local_rope_theta)}};
  else
    j["sliding_window"] = nullptr;
  if (m.experts > 0)
    j["experts"] = {{"count", m.experts},
                    {"per_token", m.experts_per_token},
                    {"ffn_size", m.expert_ffn_size},
                    {"shared_ffn_size", m.shared_expert_ffn_size},
                    {"layers", m.expert_layers}};
  else
    j["experts"] = nullptr;
  j["norm_eps"] = or_null(m.norm_eps);
  j["tied_embeddings"] = or_null(m.tied_embeddings);
  j["tensors"] = m.tensors;
  ordered_json types = ordered_json::object();
  for (const auto& t : m.tensor_types) types[t.type] = {{"count", t.count}, {"bytes", t.bytes}};
  j["tensor_types"] = std::move(types);
  j["file_bytes"] = m.file_bytes;
  if (!m.tokenizer) {
    j["tokenizer"] = nullptr;
    return j;
  }
  const TokenizerInfo& tok = *m.tokenizer;
  ordered_json t = {{"kind", tok.kind}};
  if (!tok.pre.empty()) t["pre"] = tok.pre;
  t["vocab_size"] = or_null(tok.vocab_size);
  if (!tok.unreadable.empty()) t["unreadable"] = tok.unreadable;
  t["bos"] = special_json(tok.bos);
  t["eos"] = special_json(tok.eos);
  t["pad"] = special_json(tok.pad);
  t["unk"] = special_json(tok.unk);
  t["chat_template"] = !tok.chat_template.empty();
  if (template_lines) {
    auto lines = lines_of(tok.chat_template);
    if (lines.size() > kTemplateLines) lines.resize(kTemplateLines);
    t["chat_template_lines"] = lines;
  }
  j["tokenizer"] = std::move(t);
  return j;
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto flags = std::make_shared<InfoFlags>();
  auto* cmd = app.add_subcommand("info", "Describe a GGUF file or HF directory: shape, tensor types, tokenizer");
  cmd->add_option("model", flags->model, "HF model directory or .gguf file")->required();
  cmd->add_flag("--json", flags->json, "Print one JSON object");
  cmd->add_flag("--template", flags->template_lines,
                "Also print the chat template's first " + std::to_string(kTemplateLines) + " lines");
  cmd->callback([flags] {
    const ModelInfo info = describe_model(flags->model);
    if (!flags->json) return print_text(info, flags->template_lines);
    const ordered_json j = to_json(info, flags->template_lines);
    std::printf("%s\n", j.dump(2, ' ', false, ordered_json::error_handler_t::replace).c_str());
  });
}

}  // namespace orzo::cli
