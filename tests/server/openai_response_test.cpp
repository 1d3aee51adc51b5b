// The OpenAI response builders: every body is parsed back and checked field by field, key
// order included (clients and golden files compare text); token bytes that are not valid
// UTF-8 must be written, replaced, rather than throw; SSE framing is exact.
#include "server/openai_response.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

std::vector<std::string> keys(const Json& j) {
  std::vector<std::string> out;
  for (const auto& item : j.items()) out.push_back(item.key());
  return out;
}

using Keys = std::vector<std::string>;

// Ids: 0 "He", 1 "llo", 2 " wor", 3 "ld", 4 "é" (two bytes), 5 "\xE4\xBD" (half a CJK
// character), 6 "\xA0" (a lone continuation byte).
DecodeTable vocab() {
  DecodeTable t;
  t.bytes = {"He", "llo", " wor", "ld", "\xC3\xA9", "\xE4\xBD", "\xA0"};
  t.special.assign(t.bytes.size(), 0);
  return t;
}

const ResponseHeader kHeader{"cmpl-7", 1700000000, "tiny"};
const std::string kReplacement = "\xEF\xBF\xBD";

void expect_envelope(const Json& j, const char* object, const ResponseHeader& h = kHeader) {
  EXPECT_EQ(j.at("id"), h.id);
  EXPECT_EQ(j.at("object"), object);
  EXPECT_EQ(j.at("created"), h.created);
  EXPECT_EQ(j.at("model"), h.model);
}

void expect_usage(const Json& u, int32_t prompt, int32_t completion, int32_t cached) {
  EXPECT_EQ(keys(u), (Keys{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}));
  EXPECT_EQ(u.at("prompt_tokens"), prompt);
  EXPECT_EQ(u.at("completion_tokens"), completion);
  EXPECT_EQ(u.at("total_tokens"), prompt + completion);
  EXPECT_EQ(u.at("prompt_tokens_details"), Json({{"cached_tokens", cached}}));
}

TEST(OpenAIResponse, CompletionWithoutLogprobs) {
  ChoiceOutput a;
  a.index = 0;
  a.text = "Hello world";
  a.finish_reason = "length";
  ChoiceOutput b;
  b.index = 1;
  b.text = "";
  b.finish_reason = "stop";
  const Json j = Json::parse(completion_response(kHeader, {a, b}, {12, 5, 8}, nullptr));
  EXPECT_EQ(keys(j), (Keys{"id", "object", "created", "model", "choices", "usage"}));
  expect_envelope(j, "text_completion");
  ASSERT_EQ(j.at("choices").size(), 2u);
  const Json& c0 = j["choices"][0];
  EXPECT_EQ(keys(c0), (Keys{"index", "text", "logprobs", "finish_reason"}));
  EXPECT_EQ(c0.at("index"), 0);
  EXPECT_EQ(c0.at("text"), "Hello world");
  EXPECT_TRUE(c0.at("logprobs").is_null());
  EXPECT_EQ(c0.at("finish_reason"), "length");
  EXPECT_EQ(j["choices"][1].at("index"), 1);
  EXPECT_EQ(j["choices"][1].at("text"), "");
  EXPECT_EQ(j["choices"][1].at("finish_reason"), "stop");
  expect_usage(j.at("usage"), 12, 5, 8);
}

TEST(OpenAIResponse, CompletionLogprobsAreParallelArrays) {
  const DecodeTable v = vocab();
  ChoiceOutput c;
  c.text = "Hello world";  // the handler's text; the arrays come from the ids
  c.has_logprobs = true;
  c.text_offset = 3;
  c.logprobs = {{0, -0.5f, {{0, -0.5f}, {1, -1.25f}}},
                {4, -std::numeric_limits<float>::infinity(), {}},
                {1, -2.0f, {{1, -2.0f}}},
                {99, -3.0f, {{99, -3.0f}, {-1, -4.0f}}}};
  c.finish_reason = "stop";
  const Json j = Json::parse(completion_response(kHeader, {c}, {1, 4, 0}, &v));
  const Json& lp = j["choices"][0].at("logprobs");
  EXPECT_EQ(keys(lp), (Keys{"tokens", "token_logprobs", "top_logprobs", "text_offset"}));
  EXPECT_EQ(lp.at("tokens"), Json({"He", "\xC3\xA9", "llo", ""}));
  EXPECT_EQ(lp.at("token_logprobs"), Json({-0.5, -9999.0, -2.0, -3.0}));
  ASSERT_EQ(lp.at("top_logprobs").size(), 4u);
  EXPECT_EQ(lp["top_logprobs"][0], Json({{"He", -0.5}, {"llo", -1.25}}));
  EXPECT_EQ(keys(lp["top_logprobs"][0]), (Keys{"He", "llo"}));  // most likely first
  EXPECT_EQ(lp["top_logprobs"][1], Json::object());
  EXPECT_EQ(lp["top_logprobs"][2], Json({{"llo", -2.0}}));
  EXPECT_EQ(lp["top_logprobs"][3], Json({{"", -3.0}}));  // two unknown ids share "": the likelier stays
  // Offsets count characters: "é" is two bytes but one character.
  EXPECT_EQ(lp.at("text_offset"), Json({3, 5, 6, 9}));
}

TEST(OpenAIResponse, LogprobsUseTheFloatsShortestDecimal) {
  const DecodeTable v = vocab();
  ChoiceOutput c;
  c.has_logprobs = true;
  c.logprobs = {{0, -0.6931472f, {}}};
  const std::string body = completion_chunk(kHeader, c, &v);
  EXPECT_NE(body.find("[-0.6931472]"), std::string::npos) << body;
  EXPECT_FLOAT_EQ(Json::parse(body)["choices"][0]["logprobs"]["token_logprobs"][0].get<float>(), -0.6931472f);
}

TEST(OpenAIResponse, CompletionChunk) {
  const DecodeTable v = vocab();
  ChoiceOutput c;
  c.index = 2;
  c.text = " wor";
  const Json open = Json::parse(completion_chunk(kHeader, c, &v));
  EXPECT_EQ(keys(open), (Keys{"id", "object", "created", "model", "choices"}));
  expect_envelope(open, "text_completion");
  ASSERT_EQ(open.at("choices").size(), 1u);
  EXPECT_EQ(open["choices"][0], Json::parse(R"({"index":2,"text":" wor","logprobs":null,"finish_reason":null})"));

  c.text = "";
  c.finish_reason = "length";
  c.has_logprobs = true;
  c.text_offset = 17;
  const Json last = Json::parse(completion_chunk(kHeader, c, &v));
  EXPECT_EQ(last["choices"][0].at("finish_reason"), "length");
  EXPECT_EQ(last["choices"][0].at("logprobs"),
            Json::parse(R"({"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]})"));
}

TEST(OpenAIResponse, ChatResponse) {
  const DecodeTable v = vocab();
  ChoiceOutput c;
  c.text = "Hello";
  c.finish_reason = "stop";
  c.has_logprobs = true;
  c.logprobs = {{0, -0.25f, {{0, -0.25f}, {2, -1.5f}}}, {1, -0.125f, {}}};
  ChoiceOutput plain;
  plain.index = 1;
  plain.text = "Hi";
  plain.finish_reason = "length";
  const ResponseHeader h{"chatcmpl-1", 42, "m"};
  const Json j = Json::parse(chat_response(h, {c, plain}, {3, 2, 0}, &v));
  EXPECT_EQ(keys(j), (Keys{"id", "object", "created", "model", "choices", "usage"}));
  expect_envelope(j, "chat.completion", h);
  const Json& c0 = j["choices"][0];
  EXPECT_EQ(keys(c0), (Keys{"index", "message", "logprobs", "finish_reason"}));
  EXPECT_EQ(c0.at("index"), 0);
  EXPECT_EQ(c0.at("message"), Json::parse(R"({"role":"assistant","content":"Hello"})"));
  EXPECT_EQ(keys(c0.at("message")), (Keys{"role", "content"}));
  EXPECT_EQ(c0.at("finish_reason"), "stop");
  const Json expected_logprobs = Json::parse(R"({"content":[
    {"token":"He","logprob":-0.25,"bytes":[72,101],"top_logprobs":[
      {"token":"He","logprob":-0.25,"bytes":[72,101]},
      {"token":" wor","logprob":-1.5,"bytes":[32,119,111,114]}]},
    {"token":"llo","logprob":-0.125,"bytes":[108,108,111],"top_logprobs":[]}]})");
  EXPECT_EQ(c0.at("logprobs"), expected_logprobs);
  EXPECT_EQ(keys(c0["logprobs"]["content"][0]), (Keys{"token", "logprob", "bytes", "top_logprobs"}));
  const Json& c1 = j["choices"][1];
  EXPECT_EQ(c1.at("index"), 1);
  EXPECT_EQ(c1["message"].at("content"), "Hi");
  EXPECT_TRUE(c1.at("logprobs").is_null());
  EXPECT_EQ(c1.at("finish_reason"), "length");
  expect_usage(j.at("usage"), 3, 2, 0);
}

TEST(OpenAIResponse, ChatChunkDeltas) {
  const ResponseHeader h{"chatcmpl-2", 43, "m"};
  ChoiceOutput c;
  const Json first = Json::parse(chat_chunk(h, c, true, nullptr));
  EXPECT_EQ(keys(first), (Keys{"id", "object", "created", "model", "choices"}));
  expect_envelope(first, "chat.completion.chunk", h);
  ASSERT_EQ(first.at("choices").size(), 1u);
  EXPECT_EQ(keys(first["choices"][0]), (Keys{"index", "delta", "logprobs", "finish_reason"}));
  EXPECT_EQ(first["choices"][0].at("delta"), Json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_TRUE(first["choices"][0].at("finish_reason").is_null());
  EXPECT_TRUE(first["choices"][0].at("logprobs").is_null());

  c.text = "Hel";
  const Json first_with_text = Json::parse(chat_chunk(h, c, true, nullptr));
  EXPECT_EQ(first_with_text["choices"][0].at("delta"), Json::parse(R"({"role":"assistant","content":"Hel"})"));

  c.index = 3;
  c.text = "lo";
  const Json middle = Json::parse(chat_chunk(h, c, false, nullptr));
  EXPECT_EQ(middle["choices"][0].at("index"), 3);
  EXPECT_EQ(middle["choices"][0].at("delta"), Json::parse(R"({"content":"lo"})"));

  c.text = "";
  c.finish_reason = "stop";
  const Json last = Json::parse(chat_chunk(h, c, false, nullptr));
  EXPECT_EQ(last["choices"][0].at("delta"), Json::object());
  EXPECT_EQ(last["choices"][0].at("finish_reason"), "stop");

  const DecodeTable v = vocab();
  c.has_logprobs = true;
  c.logprobs = {{3, -1.0f, {}}};
  const Json with_logprobs = Json::parse(chat_chunk(h, c, false, &v));
  EXPECT_EQ(with_logprobs["choices"][0].at("logprobs"),
            Json::parse(R"({"content":[{"token":"ld","logprob":-1.0,"bytes":[108,100],"top_logprobs":[]}]})"));
}

TEST(OpenAIResponse, UsageChunk) {
  for (const bool chat : {false, true}) {
    const Json j = Json::parse(usage_chunk(kHeader, chat, {7, 9, 4}));
    EXPECT_EQ(keys(j), (Keys{"id", "object", "created", "model", "choices", "usage"}));
    expect_envelope(j, chat ? "chat.completion.chunk" : "text_completion");
    EXPECT_EQ(j.at("choices"), Json::array());
    expect_usage(j.at("usage"), 7, 9, 4);
  }
}

TEST(OpenAIResponse, InvalidUtf8IsReplacedNotThrown) {
  const DecodeTable v = vocab();
  ChoiceOutput c;
  c.text = "bad \xE4\xBD";
  c.has_logprobs = true;
  c.logprobs = {{5, -0.5f, {{5, -0.5f}, {6, -0.75f}}}};
  const ResponseHeader h{"x", 0, "model-\xFF"};
  std::string chat_body, completion_body;
  ASSERT_NO_THROW(chat_body = chat_response(h, {c}, {}, &v));
  ASSERT_NO_THROW(completion_body = completion_response(h, {c}, {}, &v));
  EXPECT_NO_THROW(chat_chunk(h, c, true, &v));
  EXPECT_NO_THROW(completion_chunk(h, c, &v));

  const Json chat = Json::parse(chat_body);  // parsing back proves the output is valid UTF-8
  EXPECT_EQ(chat.at("model"), "model-" + kReplacement);
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "bad " + kReplacement);
  const Json& token = chat["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(token.at("token"), kReplacement);
  EXPECT_EQ(token.at("bytes"), Json({0xE4, 0xBD}));  // the bytes stay exact
  EXPECT_EQ(token["top_logprobs"][1].at("bytes"), Json({0xA0}));

  const Json completion = Json::parse(completion_body);
  EXPECT_EQ(completion["choices"][0]["logprobs"]["tokens"], Json({kReplacement}));
  EXPECT_EQ(completion["choices"][0]["logprobs"]["top_logprobs"][0].size(), 1u);  // both replaced alike
}

TEST(OpenAIResponse, SseFraming) {
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(std::string(sse_done()), "data: [DONE]\n\n");
  const std::string event = sse_event(usage_chunk(kHeader, true, {}));
  EXPECT_EQ(event.rfind("data: {", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 3), "}\n\n");
  EXPECT_EQ(event.find('\n'), event.size() - 2);  // one line: the JSON holds no newline
}

}  // namespace
}  // namespace orzo
