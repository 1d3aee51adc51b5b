// libFuzzer entry point for the chat-template interpreter: any bytes are parsed as a template
// and rendered against a fixed conversation. Templates come from model files, so the only
// acceptable failure is ChatTemplateError; a crash, a hang, a sanitizer report or any other
// exception is a bug. The limits are tighter than the defaults only to keep executions fast.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat_template/chat_template.hpp"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Grüße {{ x }} <|im_end|>"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nok", "reasoning_content": "hm",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [1.5, null, true]}}}]},
      {"role": "tool", "content": "42"},
      {"role": "user", "content": [{"type": "text", "text": "chunk"}, {"type": "image"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
    "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>", "n": 3
  })");
  return c;
}

orzo::jinja::RenderLimits limits() {
  orzo::jinja::RenderLimits l;
  l.max_steps = 200'000;
  l.max_string_bytes = 1u << 20;
  l.max_list_items = 1u << 14;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    const orzo::ChatTemplate tmpl(source, limits());
    tmpl.render(context());
  } catch (const orzo::ChatTemplateError&) {
  }
  return 0;
}
