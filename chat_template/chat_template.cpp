#include "chat_template/chat_template.hpp"

#include <utility>
#include <vector>

#include "chat_template/jinja_parser.hpp"
#include "chat_template/jinja_render.hpp"

namespace orzo {

ChatTemplate::ChatTemplate(std::string source, jinja::RenderLimits limits)
    : source_(std::move(source)), body_(std::make_shared<const jinja::Body>(jinja::parse_template(source_))), limits_(limits) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw ChatTemplateError("chat template context must be a JSON object, got " + std::string(context.type_name()));
  std::vector<std::pair<std::string, jinja::Value>> variables;
  for (const auto& [name, value] : context.items()) variables.emplace_back(name, jinja::from_json(value));
  return jinja::render(*body_, variables, limits_);
}

namespace {

// transformers' _REASONING_FIELDS, in its order of preference.
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

nlohmann::ordered_json prepare_message(const nlohmann::ordered_json& message) {
  if (!message.is_object()) throw ChatTemplateError("chat messages must be JSON objects, got " + std::string(message.type_name()));
  nlohmann::ordered_json kept = nlohmann::ordered_json::object();
  for (const auto& [key, value] : message.items()) {
    if (!value.is_null()) kept[key] = value;
  }
  const nlohmann::ordered_json* reasoning = nullptr;
  for (const char* field : kReasoningFields) {
    if (kept.contains(field)) {
      reasoning = &kept[field];
      break;
    }
  }
  if (reasoning == nullptr) return kept;
  // Python's {"thinking": r, **message, "reasoning_content": r}: "thinking" keeps the first slot.
  nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
  aliased["thinking"] = *reasoning;
  for (const auto& [key, value] : kept.items()) aliased[key] = value;
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

}  // namespace

std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const std::string& bos_token, const std::string& eos_token, const nlohmann::ordered_json& extra) {
  if (!messages.is_array()) throw ChatTemplateError("messages must be a JSON array");
  if (messages.empty()) throw ChatTemplateError("cannot apply a chat template to an empty conversation");
  if (!extra.is_object()) throw ChatTemplateError("extra template variables must be a JSON object");
  nlohmann::ordered_json prepared = nlohmann::ordered_json::array();
  for (const auto& message : messages) prepared.push_back(prepare_message(message));
  nlohmann::ordered_json context = {
      {"bos_token", bos_token}, {"eos_token", eos_token}, {"messages", std::move(prepared)},
      {"tools", nullptr},       {"documents", nullptr},   {"add_generation_prompt", add_generation_prompt},
  };
  for (const auto& [key, value] : extra.items()) context[key] = value;
  return tmpl.render(context);
}

}  // namespace orzo
