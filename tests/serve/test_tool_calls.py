"""Tool calls against a real `orzo serve` with the official openai client: a forced
(`required`) call and a named one on SmolLM2-135M-Instruct, streamed and not, whose arguments
validate against the function's schema; a call answered by a `tool` message and the
conversation going on; the Qwen 2.5 and Qwen 3 templates rendering a multi-turn tool
conversation sent in OpenAI's shape byte for byte as transformers' apply_chat_template does
(tests/fixtures/chat, tools/make_chat_fixtures.py); bad tools are 400s naming the field."""
import copy
import json
import os
import tempfile
import unittest

import jsonschema
import openai

from harness import SHARED, Server

SMOLLM2 = os.path.join(SHARED, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
FIXTURES = os.path.join(os.path.dirname(__file__), "../fixtures/chat")
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "description": "Add two numbers", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


class ToolCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--served-model-name", "smollm2", model=SMOLLM2)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "".join(cls.server.log)

    def check_calls(self, calls, names=None):
        self.assertTrue(calls)
        for call in calls:
            self.assertEqual(call.type, "function")
            self.assertTrue(call.id.startswith("call_"))
            self.assertIn(call.function.name, names or SCHEMAS)
            jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])

    def test_required_calls_validate_streamed_and_not(self):
        # One call each (parallel_tool_calls false), so every output ends with its call.
        for seed in range(4):
            out = self.client.chat.completions.create(model="smollm2", messages=QUESTION, tools=TOOLS, tool_choice="required",
                                                      parallel_tool_calls=False, temperature=1, seed=seed, max_tokens=300)
            choice = out.choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls")
            self.assertIsNone(choice.message.content)
            self.check_calls(choice.message.tool_calls)
        calls, finish = {}, None
        for chunk in self.client.chat.completions.create(model="smollm2", messages=QUESTION, tools=TOOLS,
                                                         tool_choice="required", parallel_tool_calls=False, temperature=0,
                                                         max_tokens=300, stream=True):
            if not chunk.choices:
                continue
            for d in chunk.choices[0].delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"id": d.id, "name": "", "arguments": ""})
                entry["name"] += d.function.name or ""
                entry["arguments"] += d.function.arguments or ""
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        whole = self.client.chat.completions.create(model="smollm2", messages=QUESTION, tools=TOOLS, tool_choice="required",
                                                    parallel_tool_calls=False, temperature=0,
                                                    max_tokens=300).choices[0].message.tool_calls
        self.assertEqual([(c["name"], json.loads(c["arguments"])) for c in calls.values()],
                         [(c.function.name, json.loads(c.function.arguments)) for c in whole])

    def test_a_named_function_is_the_one_called_once(self):
        out = self.client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "What is 2 plus 3?"}], tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "add"}}, temperature=1, seed=3, max_tokens=200)
        calls = out.choices[0].message.tool_calls
        self.assertEqual(len(calls), 1)
        self.check_calls(calls, {"add"})

    def test_a_tool_answer_goes_back_and_the_chat_goes_on(self):
        first = self.client.chat.completions.create(model="smollm2", messages=QUESTION, tools=TOOLS, tool_choice="required",
                                                    parallel_tool_calls=False, temperature=0,
                                                    max_tokens=300).choices[0].message
        # SmolLM2's template concatenates every message's content, so a call's message carries "".
        messages = QUESTION + [{**first.model_dump(exclude_none=True), "content": ""}]
        for call in first.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21})})
        out = self.client.chat.completions.create(model="smollm2", messages=messages, tools=TOOLS, tool_choice="none",
                                                  temperature=0, max_tokens=40)
        self.assertIn(out.choices[0].finish_reason, ("stop", "length"))
        self.assertIsNone(out.choices[0].message.tool_calls)
        self.assertTrue(out.choices[0].message.content)

    def test_bad_tools_are_400s_naming_the_field(self):
        cases = [
            ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
            ({"tools": [{"type": "code_interpreter"}]}, "tools"),
            ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "launch"}}}, "tool_choice"),
            ({"tool_choice": "required"}, "tool_choice"),
            ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
              "tool_choice": "required"}, "tools"),
        ]
        for extra, param in cases:
            with self.subTest(extra=extra):
                status, _, out = self.server.post("/v1/chat/completions", {"messages": QUESTION, "max_tokens": 5, **extra})
                self.assertEqual(status, 400, out)
                self.assertEqual(out["error"]["param"], param, out)


class TemplatesRenderToolTurnsAsTransformers(unittest.TestCase):
    """The fixture's conversations with arguments as objects (transformers' input) are sent in
    OpenAI's shape, arguments as JSON text; the server must render exactly what transformers did."""

    def test_qwen_templates(self):
        for name in ("qwen2.5", "qwen3"):
            with open(os.path.join(FIXTURES, name + ".json")) as f:
                fixture = json.load(f)
            source = fixture["template"]  # where the template lies under ../shared
            with open(os.path.join(SHARED, source["file"])) as f:
                template = json.load(f)[source["json_key"]]
            with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as t:
                t.write(template)
            server = Server("--chat-template", t.name, model=SMOLLM2)
            try:
                for case in fixture["cases"]:
                    if not case.get("tools") and not any("tool_calls" in m for m in case["messages"]):
                        continue
                    with self.subTest(template=name, case=case["name"]):
                        messages = copy.deepcopy(case["messages"])
                        for i, m in enumerate(messages):
                            for k, call in enumerate(m.get("tool_calls", [])):
                                call["id"] = f"call_{i}_{k}"
                                call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
                        body = {"messages": messages, "add_generation_prompt": case["add_generation_prompt"]}
                        if case.get("tools"):
                            body["tools"] = case["tools"]
                        status, _, ids = server.post("/tokenize", body)
                        self.assertEqual(status, 200, ids)
                        status, _, text = server.post("/detokenize", {"tokens": ids["tokens"]})
                        self.assertEqual(status, 200, text)
                        self.assertEqual(text["prompt"], case["expected"])
            finally:
                self.assertEqual(server.stop(), 0)
                os.unlink(t.name)


if __name__ == "__main__":
    unittest.main()
