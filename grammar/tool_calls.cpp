#include "grammar/tool_calls.hpp"

#include "core/ordered_json.hpp"
#include "grammar/grammar_error.hpp"
#include "grammar/json_schema.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace orzo::grammar {

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes: return "hermes";
    case ToolCallFormat::llama3_json: return "llama3_json";
    case ToolCallFormat::mistral: return "mistral";
  }
  return "hermes";
}

std::optional<ToolCallFormat> parse_tool_call_format(const std::string& name) {
  for (auto f : {ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::mistral})
    if (name == tool_call_format_name(f)) return f;
  return std::nullopt;
}

ToolCallFormat tool_call_format_of_template(const std::string& source) {
  if (source.find("<tool_call>") != std::string::npos) return ToolCallFormat::hermes;
  if (source.find("[TOOL_CALLS]") != std::string::npos) return ToolCallFormat::mistral;
  if (source.find("<|python_tag|>") != std::string::npos || source.find("ipython") != std::string::npos)
    return ToolCallFormat::llama3_json;
  return ToolCallFormat::hermes;
}

namespace {

RegexPtr calls_of(const std::string& text, Grammar& grammar) {
  nlohmann::ordered_json spec;
  try {
    spec = parse_ordered_json(text);
  } catch (const JsonSyntaxError&) {
    throw GrammarError("tool calls: the spec is not JSON");
  }
  if (!spec.is_object()) throw GrammarError("tool calls: the spec is not a JSON object");
  if (spec.contains("format") && !spec["format"].is_string()) throw GrammarError("tool calls: the format is not a string");
  if (spec.contains("parallel") && !spec["parallel"].is_boolean()) throw GrammarError("tool calls: parallel is not true or false");
  const auto format = parse_tool_call_format(spec.value("format", std::string("hermes")));
  if (!format) throw GrammarError("tool calls: unknown format");
  if (!spec.contains("functions") || !spec["functions"].is_array() || spec["functions"].empty())
    throw GrammarError("tool calls: no function to call");
  const bool parallel = spec.value("parallel", true);
  const RegexPtr space = json_space();
  const char* args_key = *format == ToolCallFormat::llama3_json ? "parameters" : "arguments";
  std::vector<RegexPtr> calls;
  for (const auto& f : spec["functions"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) throw GrammarError("tool calls: a function without a name");
    const std::string name = f["name"].get<std::string>();
    RegexPtr args;
    try {
      args = f.contains("parameters") ? json_schema_value(f["parameters"].dump(), false, grammar) : json_object_value(grammar);
    } catch (const GrammarError& e) {
      throw GrammarError("tool calls: the parameters of '" + name + "': " + e.what());
    }
    calls.push_back(concat({literal("{\"name\":"), space, literal(nlohmann::json(name).dump()), literal(","), space,
                            literal(std::string("\"") + args_key + "\":"), space, args, space, literal("}")}));
  }
  const RegexPtr call = alt(std::move(calls));
  switch (*format) {
    case ToolCallFormat::hermes: {
      const RegexPtr tagged = concat({literal("<tool_call>\n"), call, literal("\n</tool_call>")});
      return parallel ? separated(tagged, literal("\n"), true) : tagged;
    }
    case ToolCallFormat::llama3_json: return parallel ? separated(call, literal("; "), true) : call;
    case ToolCallFormat::mistral: {
      const RegexPtr list = parallel ? separated(call, concat({literal(","), space}), true) : call;
      return concat({literal("[TOOL_CALLS]["), list, literal("]")});
    }
  }
  return call;
}

}  // namespace

Grammar tool_calls_grammar(const std::string& spec) {
  return rooted([&](Grammar& g) { return calls_of(spec, g); });
}

}  // namespace orzo::grammar
