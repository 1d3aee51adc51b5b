// The OpenAI request parsers: a table of bad bodies, each of which must be refused with a
// 400 naming the field at fault (in `param` and in the message), and good bodies whose
// every field must land in the right place with the right value, defaults included.
#include "server/openai_request.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

enum class Endpoint { kCompletion, kChat, kTokenize, kDetokenize };

void parse(Endpoint e, const std::string& body) {
  switch (e) {
    case Endpoint::kCompletion: parse_completion_request(body); break;
    case Endpoint::kChat: parse_chat_request(body); break;
    case Endpoint::kTokenize: parse_tokenize_request(body); break;
    case Endpoint::kDetokenize: parse_detokenize_request(body); break;
  }
}

struct BadCase {
  Endpoint endpoint;
  std::string body;
  std::string param;  // expected ApiError::param; "" for a body that is not a JSON object
};

// Bodies built from a valid base plus the fields under test, so each case breaks one thing.
std::string completion(const std::string& fields) {
  return R"({"model":"m","prompt":"hi")" + (fields.empty() ? "" : "," + fields) + "}";
}
std::string chat(const std::string& fields) {
  return R"({"model":"m","messages":[{"role":"user","content":"hi"}])" + (fields.empty() ? "" : "," + fields) + "}";
}
std::string chat_messages(const std::string& messages) {
  return R"({"model":"m","messages":)" + messages + "}";
}

std::string nested(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }

std::string seventeen_stops() {
  std::string stops = "[";
  for (int i = 0; i < 17; ++i) stops += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return stops + "]";
}

std::vector<BadCase> bad_cases() {
  const Endpoint C = Endpoint::kCompletion, H = Endpoint::kChat, T = Endpoint::kTokenize, D = Endpoint::kDetokenize;
  return {
      // the body itself
      {C, "", ""},
      {C, "not json", ""},
      {C, R"({"model":"m",)", ""},
      {C, "[1]", ""},
      {C, "\"text\"", ""},
      {C, R"({"model":"m","prompt":NaN})", ""},
      {C, R"({"model":"m","prompt":"hi","temperature":1e999})", ""},
      {C, "{\"model\":\"m\",\"prompt\":\"\xff\"}", ""},
      {C, completion(R"("user":)" + nested(100)), ""},
      {H, chat(R"("chat_template_kwargs":{"a":)" + nested(100) + "}"), ""},
      // required fields
      {C, R"({"model":"m"})", "prompt"},
      {C, R"({"model":"m","prompt":null})", "prompt"},
      {C, R"({"model":5,"prompt":"hi"})", "model"},
      {C, R"({"model":5,"prompt":"hi"})", "model"},
      // prompt shapes
      {C, R"({"model":"m","prompt":""})", "prompt"},
      {C, R"({"model":"m","prompt":[]})", "prompt"},
      {C, R"({"model":"m","prompt":[""]})", "prompt"},
      {C, R"({"model":"m","prompt":["a",""]})", "prompt"},
      {C, R"({"model":"m","prompt":["a",1]})", "prompt"},
      {C, R"({"model":"m","prompt":[1,"a"]})", "prompt"},
      {C, R"({"model":"m","prompt":[[1],"a"]})", "prompt"},
      {C, R"({"model":"m","prompt":[[]]})", "prompt"},
      {C, R"({"model":"m","prompt":[[1],[]]})", "prompt"},
      {C, R"({"model":"m","prompt":[-1]})", "prompt"},
      {C, R"({"model":"m","prompt":[1.5]})", "prompt"},
      {C, R"({"model":"m","prompt":[2147483648]})", "prompt"},
      {C, R"({"model":"m","prompt":[true]})", "prompt"},
      {C, R"({"model":"m","prompt":[null]})", "prompt"},
      {C, R"({"model":"m","prompt":[{}]})", "prompt"},
      {C, R"({"model":"m","prompt":{}})", "prompt"},
      {C, R"({"model":"m","prompt":5})", "prompt"},
      // sampling numbers: range, type, bools and strings are not numbers
      {C, completion(R"("max_tokens":0)"), "max_tokens"},
      {C, completion(R"("max_tokens":0,"echo":false)"), "max_tokens"},
      {C, completion(R"("max_tokens":-1,"echo":true)"), "max_tokens"},
      {C, completion(R"("prompt_logprobs":21)"), "prompt_logprobs"},
      {C, completion(R"("prompt_logprobs":-1)"), "prompt_logprobs"},
      {C, completion(R"("prompt_logprobs":true)"), "prompt_logprobs"},
      {C, completion(R"("prompt_logprobs":1,"stream":true)"), "prompt_logprobs"},
      {C, completion(R"("max_tokens":-1)"), "max_tokens"},
      {C, completion(R"("max_tokens":1.5)"), "max_tokens"},
      {C, completion(R"("max_tokens":"5")"), "max_tokens"},
      {C, completion(R"("max_tokens":true)"), "max_tokens"},
      {C, completion(R"("max_tokens":2147483648)"), "max_tokens"},
      {C, completion(R"("temperature":-0.1)"), "temperature"},
      {C, completion(R"("temperature":2.01)"), "temperature"},
      {C, completion(R"("temperature":"1")"), "temperature"},
      {C, completion(R"("temperature":true)"), "temperature"},
      {C, completion(R"("temperature":[1])"), "temperature"},
      {C, completion(R"("top_p":0)"), "top_p"},
      {C, completion(R"("top_p":1.01)"), "top_p"},
      {C, completion(R"("top_p":1e-50)"), "top_p"},  // above 0, but 0 as a float
      {C, completion(R"("temperature":1e300)"), "temperature"},
      {C, completion(R"("top_k":-2)"), "top_k"},
      {C, completion(R"("top_k":1.5)"), "top_k"},
      {C, completion(R"("top_k":false)"), "top_k"},
      {C, completion(R"("min_p":-0.1)"), "min_p"},
      {C, completion(R"("min_p":1.1)"), "min_p"},
      {C, completion(R"("frequency_penalty":2.1)"), "frequency_penalty"},
      {C, completion(R"("frequency_penalty":-2.1)"), "frequency_penalty"},
      {C, completion(R"("presence_penalty":-2.5)"), "presence_penalty"},
      {C, completion(R"("presence_penalty":"0")"), "presence_penalty"},
      {C, completion(R"("repetition_penalty":0)"), "repetition_penalty"},
      {C, completion(R"("repetition_penalty":-1)"), "repetition_penalty"},
      {C, completion(R"("repetition_penalty":10.5)"), "repetition_penalty"},
      {C, completion(R"("repetition_penalty":1e-300)"), "repetition_penalty"},
      {C, completion(R"("seed":-1)"), "seed"},
      {C, completion(R"("seed":1.5)"), "seed"},
      {C, completion(R"("seed":"1")"), "seed"},
      {C, completion(R"("seed":18446744073709551616)"), "seed"},
      // stops
      {C, completion(R"("stop":"")"), "stop"},
      {C, completion(R"("stop":["a",""])"), "stop"},
      {C, completion(R"("stop":[1])"), "stop"},
      {C, completion(R"("stop":5)"), "stop"},
      {C, completion(R"("stop":)" + seventeen_stops()), "stop"},
      {C, completion(R"("stop_token_ids":[-1])"), "stop_token_ids"},
      {C, completion(R"("stop_token_ids":[1.5])"), "stop_token_ids"},
      {C, completion(R"("stop_token_ids":1)"), "stop_token_ids"},
      {C, completion(R"("stop_token_ids":["1"])"), "stop_token_ids"},
      // logit_bias
      {C, completion(R"("logit_bias":[])"), "logit_bias"},
      {C, completion(R"("logit_bias":{"a":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"-1":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"+1":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"05":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{" 5":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"2147483648":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"99999999999":1})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"1":100.5})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"1":-101})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"1":"5"})"), "logit_bias"},
      {C, completion(R"("logit_bias":{"1":null})"), "logit_bias"},
      // completions logprobs, n, best_of, streaming
      {C, completion(R"("logprobs":21)"), "logprobs"},
      {C, completion(R"("logprobs":-1)"), "logprobs"},
      {C, completion(R"("logprobs":true)"), "logprobs"},
      {C, completion(R"("n":0)"), "n"},
      {C, completion(R"("n":129)"), "n"},
      {C, completion(R"("n":"2")"), "n"},
      {C, completion(R"("best_of":2)"), "best_of"},
      {C, completion(R"("n":2,"best_of":3)"), "best_of"},
      {C, completion(R"("best_of":0)"), "best_of"},
      {C, completion(R"("stream":"true")"), "stream"},
      {C, completion(R"("stream":1)"), "stream"},
      {C, completion(R"("stream_options":{"include_usage":true})"), "stream_options"},
      {C, completion(R"("stream":false,"stream_options":{})"), "stream_options"},
      {C, completion(R"("stream":true,"stream_options":[])"), "stream_options"},
      {C, completion(R"("stream":true,"stream_options":{"include_usage":1})"), "stream_options.include_usage"},
      {C, completion(R"("stream":true,"stream_options":{"continuous_usage_stats":true})"),
       "stream_options.continuous_usage_stats"},
      {C, R"({"model":"m","prompt":["a","b","c"],"n":86})", "prompt"},  // 258 sequences
      // booleans and the rest
      {C, completion(R"("echo":1)"), "echo"},
      {C, completion(R"("ignore_eos":"no")"), "ignore_eos"},
      {C, completion(R"("include_stop_str_in_output":0)"), "include_stop_str_in_output"},
      {C, completion(R"("skip_special_tokens":"x")"), "skip_special_tokens"},
      {C, completion(R"("add_special_tokens":1)"), "add_special_tokens"},
      {C, completion(R"("min_tokens":-1)"), "min_tokens"},
      {C, completion(R"("suffix":"x")"), "suffix"},
      {C, completion(R"("suffix":"")"), "suffix"},
      {C, completion(R"("user":5)"), "user"},
      // unknown and other endpoints' fields
      {C, completion(R"("foo":1)"), "foo"},
      {C, completion(R"("foo":null)"), "foo"},
      {C, completion(R"("messages":[])"), "messages"},
      {C, completion(R"("max_completion_tokens":5)"), "max_completion_tokens"},
      {C, completion(R"("top_logprobs":2)"), "top_logprobs"},
      {C, completion(R"("tools":[])"), "tools"},
      // chat: messages
      {H, R"({"model":"m"})", "messages"},
      {H, chat(R"("max_tokens":0)"), "max_tokens"},
      {H, chat(R"("tools":[{"type":"function","function":{"description":"x"}}])"), "tools"},
      {H, chat(R"("tools":[{"type":"function","function":{"name":"bad name"}}])"), "tools"},
      {H, chat(R"("tools":[{"type":"retrieval"}])"), "tools"},
      {H, chat(R"("tools":[{"type":"function","function":{"name":"f","parameters":3}}])"), "tools"},
      {H, chat(R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])"), "tools"},
      {H, chat(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})"), "tool_choice"},
      {H, chat(R"("tool_choice":"required")"), "tool_choice"},
      {H, chat(R"("tool_choice":"sometimes")"), "tool_choice"},
      {H, chat(R"("functions":[{"name":"f"}])"), "functions"},
      {H, chat(R"("prompt_logprobs":1,"stream":true)"), "prompt_logprobs"},
      {H, chat_messages("[]"), "messages"},
      {H, chat_messages("\"hi\""), "messages"},
      {H, chat_messages("{}"), "messages"},
      {H, chat_messages("[1]"), "messages[0]"},
      {H, chat_messages(R"([{"content":"x"}])"), "messages[0].role"},
      {H, chat_messages(R"([{"role":null,"content":"x"}])"), "messages[0].role"},
      {H, chat_messages(R"([{"role":"bot","content":"x"}])"), "messages[0].role"},
      {H, chat_messages(R"([{"role":1,"content":"x"}])"), "messages[0].role"},
      {H, chat_messages(R"([{"role":"user"}])"), "messages[0].content"},
      {H, chat_messages(R"([{"role":"user","content":null}])"), "messages[0].content"},
      {H, chat_messages(R"([{"role":"system","content":5}])"), "messages[0].content"},
      {H, chat_messages(R"([{"role":"user","content":{"type":"text"}}])"), "messages[0].content"},
      {H, chat_messages(R"([{"role":"user","content":["x"]}])"), "messages[0].content[0]"},
      {H, chat_messages(R"([{"role":"user","content":[{"text":"x"}]}])"), "messages[0].content[0].type"},
      {H, chat_messages(R"([{"role":"user","content":[{"type":1,"text":"x"}]}])"), "messages[0].content[0].type"},
      {H, chat_messages(R"([{"role":"user","content":[{"type":"text"}]}])"), "messages[0].content[0].text"},
      {H, chat_messages(R"([{"role":"user","content":[{"type":"text","text":5}]}])"), "messages[0].content[0].text"},
      {H, chat_messages(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}])"),
       "messages[0].content[1].type"},
      {H, chat_messages(R"([{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}])"),
       "messages[0].content[0].type"},
      {H, chat_messages(R"([{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}])"),
       "messages[0].content[0].cache_control"},
      {H, chat_messages(R"([{"role":"user","content":"x","foo":1}])"), "messages[0].foo"},
      {H, chat_messages(R"([{"role":"user","content":"x","name":5}])"), "messages[0].name"},
      {H, chat_messages(R"([{"role":"tool","content":"x","tool_call_id":5}])"), "messages[0].tool_call_id"},
      {H, chat_messages(R"([{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]}])"), "messages[0].tool_calls[0]"},
      {H, chat_messages(R"([{"role":"user","content":"x","tool_calls":[{"id":"c"}]}])"), "messages[0].tool_calls"},
      {H, chat_messages(R"([{"role":"assistant","content":"x","function_call":{"name":"f"}}])"), "messages[0].function_call"},
      {H, chat_messages(R"([{"role":"assistant","content":"x","refusal":"no"}])"), "messages[0].refusal"},
      {H, chat_messages(R"([{"role":"user","content":"x"},{"role":"robot","content":"y"}])"), "messages[1].role"},
      // chat: token limits, logprobs, template switches
      {H, chat(R"("max_tokens":5,"max_completion_tokens":6)"), "max_completion_tokens"},
      {H, chat(R"("max_completion_tokens":0)"), "max_completion_tokens"},
      {H, chat(R"("max_completion_tokens":"5")"), "max_completion_tokens"},
      {H, chat(R"("logprobs":1)"), "logprobs"},
      {H, chat(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs"},
      {H, chat(R"("logprobs":true,"top_logprobs":-1)"), "top_logprobs"},
      {H, chat(R"("top_logprobs":2)"), "top_logprobs"},
      {H, chat(R"("logprobs":false,"top_logprobs":2)"), "top_logprobs"},
      {H, chat(R"("add_generation_prompt":"yes")"), "add_generation_prompt"},
      {H, chat(R"("continue_final_message":true)"), "continue_final_message"},
      {H, chat(R"("continue_final_message":1,"add_generation_prompt":false)"), "continue_final_message"},
      {H, chat(R"("chat_template_kwargs":[])"), "chat_template_kwargs"},
      {H, chat(R"("add_special_tokens":"x")"), "add_special_tokens"},
      // chat: what orzo does not implement
      {H, chat(R"("tools":{})"), "tools"},
      {H, chat(R"("tool_choice":"auto")"), "tool_choice"},
      {H, chat(R"("tool_choice":{"type":"function"})"), "tool_choice"},
      {H, chat(R"("functions":[{"name":"f"}])"), "functions"},
      {H, chat(R"("function_call":"auto")"), "function_call"},
      {H, chat(R"("response_format":{"type":"xml"})"), "response_format"},
      {H, chat(R"("response_format":{})"), "response_format"},
      {H, chat(R"("response_format":{"type":"json_schema"})"), "response_format"},
      {H, chat(R"("response_format":{"type":"json_schema","json_schema":{"schema":{}}})"), "response_format"},
      {H, chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":3}})"), "response_format"},
      {H, chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"n","strict":"yes"}})"), "response_format"},
      {H, chat(R"("response_format":{"type":"json_object"},"guided_regex":"a")"), "guided_regex"},
      {C, completion(R"("structured_outputs":{"regex":"a","choice":["b"]})"), "structured_outputs"},
      {C, completion(R"("structured_outputs":{"yaml":"a"})"), "structured_outputs"},
      {C, completion(R"("guided_choice":[])"), "guided_choice"},
      {C, completion(R"("guided_choice":["a",1])"), "guided_choice"},
      {C, completion(R"("guided_regex":5)"), "guided_regex"},
      {C, completion(R"("grammar":"root ::= \"a\"","json_schema":{})"), "json_schema"},
      {C, completion(R"("guided_whitespace_pattern":" ")"), "guided_whitespace_pattern"},
      {H, chat(R"("response_format":{"type":"text","extra":1})"), "response_format"},
      {H, chat(R"("response_format":"text")"), "response_format"},
      {H, chat(R"("reasoning_effort":"low")"), "reasoning_effort"},
      {H, chat(R"("metadata":1)"), "metadata"},
      {H, chat(R"("store":"x")"), "store"},
      {H, chat(R"("service_tier":1)"), "service_tier"},
      {H, chat(R"("parallel_tool_calls":1)"), "parallel_tool_calls"},
      // chat: completions-only fields are unknown here; shared fields are checked alike
      {H, chat(R"("echo":true)"), "echo"},
      {H, chat(R"("suffix":null)"), "suffix"},
      {H, chat(R"("prompt":"x")"), "prompt"},
      {H, chat(R"("temperature":3)"), "temperature"},
      {H, chat(R"("n":129)"), "n"},
      {H, chat(R"("seed":-5)"), "seed"},
      {H, chat(R"("stop":[""])"), "stop"},
      {H, chat(R"("logit_bias":{"x":1})"), "logit_bias"},
      {H, chat(R"("stream_options":{"include_usage":true})"), "stream_options"},
      {H, chat(R"("best_of":2)"), "best_of"},
      {H, chat(R"("top_k":-3)"), "top_k"},
      {H, chat(R"("ignore_eos":null,"skip_special_tokens":1)"), "skip_special_tokens"},
      // tokenize
      {T, "[]", ""},
      {T, "{}", "prompt"},
      {T, R"({"prompt":"a","messages":[{"role":"user","content":"x"}]})", "prompt"},
      {T, R"({"prompt":1})", "prompt"},
      {T, R"({"prompt":["a"]})", "prompt"},
      {T, R"({"messages":[]})", "messages"},
      {T, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content[0].type"},
      {T, R"({"prompt":"a","model":1})", "model"},
      {T, R"({"prompt":"a","add_special_tokens":"x"})", "add_special_tokens"},
      {T, R"({"prompt":"a","add_generation_prompt":1})", "add_generation_prompt"},
      {T, R"({"prompt":"a","max_tokens":5})", "max_tokens"},
      // detokenize
      {D, "5", ""},
      {D, "{}", "tokens"},
      {D, R"({"tokens":null})", "tokens"},
      {D, R"({"tokens":"1 2"})", "tokens"},
      {D, R"({"tokens":[-1]})", "tokens"},
      {D, R"({"tokens":[1.5]})", "tokens"},
      {D, R"({"tokens":[[1]]})", "tokens"},
      {D, R"({"tokens":[1],"model":[]})", "model"},
      {D, R"({"tokens":[1],"foo":1})", "foo"},
  };
}

TEST(OpenAIRequest, BadBodiesAreRefusedNamingTheField) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.body);
    try {
      parse(c.endpoint, c.body);
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.type, "invalid_request_error");
      EXPECT_EQ(e.param, c.param) << e.what();
      EXPECT_TRUE(e.code.empty());
      if (c.param.empty()) {
        EXPECT_NE(std::string(e.what()).find("JSON"), std::string::npos) << e.what();
      } else {
        EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
      }
    }
  }
}

TEST(OpenAIRequest, UnknownFieldUsesOpenAIsWording) {
  try {
    parse_completion_request(completion(R"("temprature":0.5)"));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_STREQ(e.what(), "Unrecognized request argument supplied: temprature");
    EXPECT_EQ(e.param, "temprature");
  }
}

TEST(OpenAIRequest, MinimalCompletionKeepsTheDefaults) {
  const CompletionRequest r = parse_completion_request(R"({"model":"tiny","prompt":"Once upon"})");
  const SamplingParams defaults;
  EXPECT_EQ(r.params.model, "tiny");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Once upon");
  EXPECT_FALSE(r.prompts[0].is_ids);
  EXPECT_TRUE(r.prompts[0].ids.empty());
  EXPECT_EQ(r.params.n, 1);
  EXPECT_FALSE(r.params.stream);
  EXPECT_FALSE(r.params.include_usage);
  EXPECT_FALSE(r.params.max_tokens.has_value());
  EXPECT_EQ(r.params.min_tokens, 0);
  EXPECT_TRUE(r.params.stop.empty());
  EXPECT_TRUE(r.params.stop_token_ids.empty());
  EXPECT_FALSE(r.params.include_stop);
  EXPECT_FALSE(r.params.ignore_eos);
  EXPECT_TRUE(r.params.skip_special_tokens);
  EXPECT_FALSE(r.echo);
  EXPECT_FALSE(r.add_special_tokens.has_value());
  const SamplingParams& s = r.params.sampling;
  EXPECT_EQ(s.temperature, defaults.temperature);
  EXPECT_EQ(s.top_p, defaults.top_p);
  EXPECT_EQ(s.top_k, defaults.top_k);
  EXPECT_EQ(s.min_p, defaults.min_p);
  EXPECT_EQ(s.repetition_penalty, defaults.repetition_penalty);
  EXPECT_EQ(s.frequency_penalty, defaults.frequency_penalty);
  EXPECT_EQ(s.presence_penalty, defaults.presence_penalty);
  EXPECT_TRUE(s.logit_bias.empty());
  EXPECT_FALSE(s.seed.has_value());
  EXPECT_FALSE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 0);
  EXPECT_FALSE(r.params.prompt_logprobs.has_value());
}

// Without `model` a request asks for the served model (vLLM, llama.cpp's server, TGI); the
// handler then checks nothing. Scoring: echo with max_tokens 0, and vLLM's prompt_logprobs.
TEST(OpenAIRequest, ModelMayBeLeftOutAndPromptsScored) {
  EXPECT_EQ(parse_completion_request(R"({"prompt":"hi"})").params.model, "");
  EXPECT_EQ(parse_completion_request(R"({"model":null,"prompt":"hi"})").params.model, "");
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})").params.model, "");
  const auto r = parse_completion_request(R"({"prompt":"hi","echo":true,"max_tokens":0,"logprobs":2,"prompt_logprobs":20})");
  EXPECT_EQ(r.params.max_tokens, 0);
  EXPECT_EQ(r.params.prompt_logprobs, 20);
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"prompt_logprobs":0})").params.prompt_logprobs, 0);
}

// Tools keep their shape for the template; tool_choice defaults to auto with tools; an
// assistant's earlier calls get their arguments as objects, as templates expect.
TEST(OpenAIRequest, ToolsAndToolCallsInMessages) {
  const auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"2"}],
      "tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]})");
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::automatic);
  EXPECT_TRUE(r.parallel_tool_calls);
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0]["function"]["name"], "f");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["a"], 1);
  EXPECT_EQ(r.messages[2]["tool_call_id"], "c1");
  const auto none = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(none.tool_choice.mode, ToolChoice::Mode::none);
  const auto named = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":false,
      "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}})");
  EXPECT_EQ(named.tool_choice.mode, ToolChoice::Mode::named);
  EXPECT_EQ(named.tool_choice.name, "f");
  EXPECT_FALSE(named.parallel_tool_calls);
}

// Each structured-output field lands as one constraint of its kind, its text the schema,
// pattern, list or grammar as given, and names itself for the handler's 400.
TEST(OpenAIRequest, StructuredOutputFieldsBecomeOneConstraint) {
  using K = OutputConstraint::Kind;
  const std::vector<std::tuple<std::string, K, std::string, bool, std::string>> cases = {
      {R"("response_format":{"type":"json_object"})", K::json_object, "", false, "response_format"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"integer"},"strict":true}})",
       K::json_schema, R"({"type":"integer"})", true, "response_format"},
      {R"("response_format":{"type":"text"})", K::none, "", false, ""},
      {R"("structured_outputs":{"json":{"type":"string"}})", K::json_schema, R"({"type":"string"})", false, "structured_outputs"},
      {R"("structured_outputs":{"regex":"a+","disable_fallback":true})", K::regex, "a+", false, "structured_outputs"},
      {R"("structured_outputs":{"choice":["x","y"]})", K::choice, R"(["x","y"])", false, "structured_outputs"},
      {R"("structured_outputs":{"grammar":"root ::= \"a\""})", K::grammar, "root ::= \"a\"", false, "structured_outputs"},
      {R"("guided_json":"{\"type\":\"null\"}")", K::json_schema, R"({"type":"null"})", false, "guided_json"},
      {R"("guided_regex":"[0-9]+","guided_decoding_backend":"xgrammar")", K::regex, "[0-9]+", false, "guided_regex"},
      {R"("guided_choice":["a"])", K::choice, R"(["a"])", false, "guided_choice"},
      {R"("guided_grammar":"root ::= \"b\"")", K::grammar, "root ::= \"b\"", false, "guided_grammar"},
      {R"("grammar":"root ::= \"c\"")", K::grammar, "root ::= \"c\"", false, "grammar"},
      {R"("json_schema":{"type":"boolean"})", K::json_schema, R"({"type":"boolean"})", false, "json_schema"},
  };
  for (const auto& [fields, kind, text, strict, param] : cases) {
    SCOPED_TRACE(fields);
    const auto r = parse_completion_request(R"({"prompt":"hi",)" + fields + "}");
    EXPECT_EQ(r.params.sampling.constraint.kind, kind);
    EXPECT_EQ(r.params.sampling.constraint.text, text);
    EXPECT_EQ(r.params.sampling.constraint.strict, strict);
    EXPECT_EQ(r.params.constraint_param, param);
    EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],)" + fields + "}").params.sampling.constraint.kind,
              kind);
  }
}

TEST(OpenAIRequest, EveryCompletionFieldLandsInPlace) {
  const CompletionRequest r = parse_completion_request(R"({
    "model": "tiny", "prompt": ["a", "b c"], "max_tokens": 7, "min_tokens": 2, "n": 3, "best_of": 3,
    "stream": true, "stream_options": {"include_usage": true},
    "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "frequency_penalty": -1.5,
    "presence_penalty": 2, "repetition_penalty": 1.3, "seed": 1234,
    "logit_bias": {"17": -100, "3": 2.5, "0": 100}, "stop": ["\n\n", "END"], "stop_token_ids": [0, 2],
    "include_stop_str_in_output": true, "ignore_eos": true, "skip_special_tokens": false,
    "echo": true, "add_special_tokens": false, "logprobs": 5, "suffix": null, "user": "someone"})");
  EXPECT_EQ(r.params.model, "tiny");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].text, "a");
  EXPECT_EQ(r.prompts[1].text, "b c");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_EQ(r.params.n, 3);
  EXPECT_TRUE(r.params.stream);
  EXPECT_TRUE(r.params.include_usage);
  const SamplingParams& s = r.params.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -1.5f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 2.0f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.3f);
  EXPECT_EQ(s.seed, uint64_t{1234});
  const std::vector<std::pair<int32_t, float>> bias = {{17, -100.0f}, {3, 2.5f}, {0, 100.0f}};
  EXPECT_EQ(s.logit_bias, bias);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{0, 2}));
  EXPECT_TRUE(r.params.include_stop);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_FALSE(r.params.skip_special_tokens);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.add_special_tokens, false);
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 5);
}

TEST(OpenAIRequest, PromptShapes) {
  const CompletionRequest ids = parse_completion_request(R"({"model":"m","prompt":[1, 0, 2147483647]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_ids);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 0, 2147483647}));

  const CompletionRequest batch = parse_completion_request(R"({"model":"m","prompt":[[5, 6], [7]]})");
  ASSERT_EQ(batch.prompts.size(), 2u);
  EXPECT_TRUE(batch.prompts[0].is_ids && batch.prompts[1].is_ids);
  EXPECT_EQ(batch.prompts[0].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(batch.prompts[1].ids, (std::vector<int32_t>{7}));

  const CompletionRequest texts = parse_completion_request(R"({"model":"m","prompt":["x"]})");
  ASSERT_EQ(texts.prompts.size(), 1u);
  EXPECT_FALSE(texts.prompts[0].is_ids);
  EXPECT_EQ(texts.prompts[0].text, "x");
}

TEST(OpenAIRequest, NumbersAtTheirBoundsAndNullsAsDefaults) {
  const CompletionRequest lo = parse_completion_request(completion(
      R"("temperature":0,"top_p":1e-9,"top_k":-1,"min_p":0,"frequency_penalty":-2,"presence_penalty":-2,)"
      R"("repetition_penalty":10,"seed":0,"n":1,"logprobs":0,"max_tokens":1,"min_tokens":1)"));
  EXPECT_EQ(lo.params.sampling.temperature, 0.0f);
  EXPECT_GT(lo.params.sampling.top_p, 0.0f);
  EXPECT_EQ(lo.params.sampling.top_k, 0);  // -1 means off, as 0 does
  EXPECT_EQ(lo.params.sampling.repetition_penalty, 10.0f);
  EXPECT_EQ(lo.params.sampling.seed, uint64_t{0});
  EXPECT_TRUE(lo.params.sampling.logprobs);
  EXPECT_EQ(lo.params.sampling.top_logprobs, 0);
  EXPECT_EQ(lo.params.min_tokens, 1);

  const CompletionRequest hi = parse_completion_request(
      completion(R"("temperature":2,"top_p":1,"top_k":1,"min_p":1,"n":128,"logprobs":20,)"
                 R"("seed":18446744073709551615,"max_tokens":16.0,"logit_bias":{"2147483647":-100})"));
  EXPECT_EQ(hi.params.sampling.temperature, 2.0f);
  EXPECT_EQ(hi.params.sampling.top_k, 1);
  EXPECT_EQ(hi.params.n, 128);
  EXPECT_EQ(hi.params.sampling.top_logprobs, 20);
  EXPECT_EQ(hi.params.sampling.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(hi.params.max_tokens, 16);  // an integral float is that integer
  ASSERT_EQ(hi.params.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(hi.params.sampling.logit_bias[0].first, 2147483647);

  const CompletionRequest nulls = parse_completion_request(completion(
      R"("max_tokens":null,"temperature":null,"stop":null,"seed":null,"logprobs":null,"best_of":null,)"
      R"("suffix":null,"stream":null,"stream_options":null,"n":null,"user":null,"logit_bias":null)"));
  EXPECT_FALSE(nulls.params.max_tokens.has_value());
  EXPECT_EQ(nulls.params.sampling.temperature, SamplingParams{}.temperature);
  EXPECT_FALSE(nulls.params.sampling.seed.has_value());
  EXPECT_FALSE(nulls.params.sampling.logprobs);
  EXPECT_EQ(nulls.params.n, 1);

  const CompletionRequest one_stop = parse_completion_request(completion(R"("stop":"###","stop_token_ids":[])"));
  EXPECT_EQ(one_stop.params.stop, std::vector<std::string>{"###"});

  const CompletionRequest streamed = parse_completion_request(completion(R"("stream":true,"stream_options":{})"));
  EXPECT_TRUE(streamed.params.stream);
  EXPECT_FALSE(streamed.params.include_usage);
}

TEST(OpenAIRequest, ChatMessagesAreNormalised) {
  const ChatRequest r = parse_chat_request(R"({"model":"m","messages":[
    {"role":"system","content":"Be brief."},
    {"role":"developer","content":[]},
    {"role":"user","name":"ann","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
    {"role":"assistant","content":null,"tool_calls":[],"refusal":null,"reasoning_content":"hm"},
    {"role":"assistant","name":null},
    {"role":"tool","tool_call_id":"c1","content":"42"}]})");
  const Json expected = Json::parse(R"([
    {"role":"system","content":"Be brief."},
    {"role":"developer","content":""},
    {"role":"user","content":"one\ntwo","name":"ann"},
    {"role":"assistant","content":null,"reasoning_content":"hm"},
    {"role":"assistant","content":null},
    {"role":"tool","content":"42","tool_call_id":"c1"}])");
  EXPECT_EQ(r.messages, expected) << r.messages.dump();
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_EQ(r.template_kwargs, Json::object());
}

TEST(OpenAIRequest, EveryChatFieldLandsInPlace) {
  const ChatRequest r = parse_chat_request(chat(
      R"("max_completion_tokens":9,"max_tokens":9,"logprobs":true,"top_logprobs":3,"n":2,"stream":true,)"
      R"("stream_options":{"include_usage":false},"temperature":0,"top_k":5,"seed":7,"stop":"x",)"
      R"("stop_token_ids":[4],"logit_bias":{"9":1},"min_tokens":1,"ignore_eos":true,)"
      R"("include_stop_str_in_output":true,"skip_special_tokens":false,"best_of":2,)"
      R"("add_generation_prompt":false,"continue_final_message":true,)"
      R"("chat_template_kwargs":{"enable_thinking":false,"n":[1,2]},"add_special_tokens":true,)"
      R"("tools":[],"tool_choice":"none","functions":[],"function_call":"none",)"
      R"("response_format":{"type":"text"},"reasoning_effort":null,"user":"u","metadata":{"k":"v"},)"
      R"("store":false,"service_tier":"auto","parallel_tool_calls":true,"frequency_penalty":0.5)"));
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_TRUE(r.params.sampling.logprobs);
  EXPECT_EQ(r.params.sampling.top_logprobs, 3);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_TRUE(r.params.stream);
  EXPECT_FALSE(r.params.include_usage);
  EXPECT_EQ(r.params.sampling.temperature, 0.0f);
  EXPECT_EQ(r.params.sampling.top_k, 5);
  EXPECT_EQ(r.params.sampling.seed, uint64_t{7});
  EXPECT_FLOAT_EQ(r.params.sampling.frequency_penalty, 0.5f);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.stop_token_ids, std::vector<int32_t>{4});
  EXPECT_EQ(r.params.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.params.min_tokens, 1);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.params.include_stop);
  EXPECT_FALSE(r.params.skip_special_tokens);
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.continue_final_message);
  EXPECT_EQ(r.template_kwargs, Json::parse(R"({"enable_thinking":false,"n":[1,2]})"));
  EXPECT_EQ(r.template_kwargs.begin().key(), "enable_thinking");  // order kept for the template
  EXPECT_TRUE(r.add_special_tokens);
}

TEST(OpenAIRequest, ChatTokenLimitFromEitherName) {
  EXPECT_EQ(parse_chat_request(chat(R"("max_completion_tokens":12)")).params.max_tokens, 12);
  EXPECT_EQ(parse_chat_request(chat(R"("max_tokens":11)")).params.max_tokens, 11);
  EXPECT_EQ(parse_chat_request(chat(R"("max_tokens":null,"max_completion_tokens":3)")).params.max_tokens, 3);
  EXPECT_FALSE(parse_chat_request(chat("")).params.max_tokens.has_value());
  const ChatRequest no_top = parse_chat_request(chat(R"("logprobs":true)"));
  EXPECT_TRUE(no_top.params.sampling.logprobs);
  EXPECT_EQ(no_top.params.sampling.top_logprobs, 0);
  EXPECT_FALSE(parse_chat_request(chat(R"("logprobs":false,"top_logprobs":0)")).params.sampling.logprobs);
}

TEST(OpenAIRequest, Tokenize) {
  const TokenizeRequest text = parse_tokenize_request(R"({"model":"m","prompt":""})");
  EXPECT_EQ(text.model, "m");
  EXPECT_EQ(text.prompt, std::string());
  EXPECT_TRUE(text.messages.is_null());
  EXPECT_TRUE(text.add_special_tokens);
  EXPECT_TRUE(text.add_generation_prompt);

  const TokenizeRequest chat_form = parse_tokenize_request(
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"add_generation_prompt":false})");
  EXPECT_TRUE(chat_form.model.empty());
  EXPECT_FALSE(chat_form.prompt.has_value());
  EXPECT_EQ(chat_form.messages, Json::parse(R"([{"role":"user","content":"a"}])"));
  EXPECT_FALSE(chat_form.add_special_tokens);  // the template writes BOS
  EXPECT_FALSE(chat_form.add_generation_prompt);

  EXPECT_FALSE(parse_tokenize_request(R"({"prompt":"a","add_special_tokens":false})").add_special_tokens);
  EXPECT_TRUE(parse_tokenize_request(R"({"messages":[{"role":"user","content":"a"}],"add_special_tokens":true})")
                  .add_special_tokens);
  EXPECT_TRUE(parse_tokenize_request(R"({"prompt":"a","messages":null})").prompt.has_value());
}

TEST(OpenAIRequest, Detokenize) {
  const DetokenizeRequest r = parse_detokenize_request(R"({"model":"m","tokens":[1, 2, 0]})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_TRUE(parse_detokenize_request(R"({"tokens":[]})").tokens.empty());
}

}  // namespace
}  // namespace orzo
