#pragma once
// Chat templates: the Jinja program a model ships (tokenizer_config.json "chat_template", GGUF
// tokenizer.chat_template) that turns a conversation into prompt text. Rendering must match
// HF transformers byte for byte, since the model was trained on exactly that text; so the
// template runs in an interpreter of jinja2's semantics under HF's environment, and
// apply_chat_template() prepares the context the way transformers' apply_chat_template does.
//
// Contexts are nlohmann::ordered_json: a dict's key order is visible to templates (tojson,
// items()), and Python keeps insertion order, so sorting keys would change the output.
// A plain nlohmann::json converts implicitly, with its keys sorted.

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template_error.hpp"
#include "chat_template/jinja_ast.hpp"
#include "chat_template/jinja_budget.hpp"

namespace orzo {

class ChatTemplate {
 public:
  // Parses once; throws ChatTemplateError ("line:col: what") on a syntax error or a construct the
  // interpreter does not implement.
  explicit ChatTemplate(std::string source, jinja::RenderLimits limits = {});

  // context: a JSON object whose keys become the template's variables. Throws ChatTemplateError
  // on any runtime error; ChatTemplateRaised when the template calls raise_exception(msg).
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Body> body_;
  jinja::RenderLimits limits_;
};

// HF apply_chat_template(..., tokenize=False): message keys whose value is null are dropped, a
// message's reasoning given as reasoning_content, thinking or reasoning is offered under
// "reasoning_content" and "thinking", `tools` and `documents` default to None, and `extra`
// (tools, enable_thinking, ...) overrides everything else.
std::string apply_chat_template(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

}  // namespace orzo
