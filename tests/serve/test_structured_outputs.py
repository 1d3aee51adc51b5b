"""Structured outputs against a real `orzo serve`, sampling at temperature 1: 300 random JSON
schemas (nested objects, arrays, enums, numbers with and without bounds, optional
properties, anyOf, $ref, formats) on SmolLM2-135M-Instruct and on stories260K: every output
parses and validates (Python's jsonschema). Random regular expressions (checked with
re.fullmatch), choices and GBNF grammars the same way, through every API field that asks
for them, with the official openai client too; and bad constraints are 400s naming their field.
Every generated schema and pattern bounds its output, so each output must end on its own
(finish_reason "stop"), never cut by max_tokens."""
import json
import os
import random
import re
import unittest
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai

from harness import SHARED, STORIES, Server

SMOLLM2 = os.path.join(SHARED, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
# Under the sanitizers (ORZO_SANITIZED) the kernels run many times slower: fewer schemas take
# the same paths.
SCHEMAS = 40 if os.environ.get("ORZO_SANITIZED") else 300
MAX_TOKENS = 1200


def random_schema(rng, depth=0, defs=None):
    """A schema whose documents are bounded in length."""
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "format"]
    if depth < 2:
        kinds += ["object", "object", "array", "anyOf"]
    if defs:
        kinds.append("ref")
    kind = rng.choice(kinds)
    if kind == "string":
        s = {"type": "string", "maxLength": rng.randint(0, 10)}
        if rng.random() < 0.3:
            s["minLength"] = rng.randint(0, s["maxLength"])
        if rng.random() < 0.2:
            s = {"type": "string", "pattern": rng.choice(["^[a-z]{1,6}$", "^[A-Z][a-z]{0,5}( [0-9]{2})?$", r"^\d{3}-\d{2}$"])}
        return s
    if kind == "integer":
        s = {"type": "integer"}
        if rng.random() < 0.6:
            lo = rng.randint(-1000, 1000)
            s["minimum"] = lo
            if rng.random() < 0.7:
                s["maximum"] = lo + rng.randint(0, 5000)
        if rng.random() < 0.2:
            s["exclusiveMaximum"] = s.get("minimum", 0) + rng.randint(2, 300)
        return s
    if kind == "number":
        s = {"type": "number"}
        if rng.random() < 0.5:
            lo = rng.uniform(-50, 50)
            s["minimum"] = round(lo, 2)
            s["maximum"] = round(lo + rng.uniform(1, 100), 2)
        return s
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "null":
        return {"type": "null"}
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", "blue", 1, 2.5, None, True, "multi word", "é"], rng.randint(1, 4))}
    if kind == "const":
        return {"const": rng.choice(["fixed", 42, False, None, [1, "a"]])}
    if kind == "format":
        return {"type": "string", "format": rng.choice(["date", "time", "date-time", "uuid", "email"])}
    if kind == "object":
        names = rng.sample(["name", "age", "city", "tags", "id", "score", "note", "kind", "x", "y"], rng.randint(1, 4))
        props = {n: random_schema(rng, depth + 1, defs) for n in names}
        s = {"type": "object", "properties": props, "required": [n for n in names if rng.random() < 0.6]}
        if rng.random() < 0.5:
            s["additionalProperties"] = False
        return s
    if kind == "array":
        lo = rng.randint(0, 2)
        return {"type": "array", "items": random_schema(rng, depth + 1, defs), "minItems": lo, "maxItems": lo + rng.randint(0, 2)}
    if kind == "anyOf":
        a, b = rng.sample(["string", "integer", "boolean", "null"], 2)
        branches = [{"type": t, **({"maxLength": 8} if t == "string" else {})} for t in (a, b)]
        return {"anyOf": branches}
    return {"$ref": "#/$defs/" + rng.choice(sorted(defs))}


def schema_case(seed):
    rng = random.Random(seed)
    defs = None
    if rng.random() < 0.25:
        defs = {"point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 99},
                                                            "y": {"type": "integer", "minimum": 0, "maximum": 99}},
                          "required": ["x", "y"], "additionalProperties": False}}
    schema = random_schema(rng, 0, defs)
    if rng.random() < 0.7 and schema.get("type") != "object":
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    if defs:
        schema["$defs"] = defs
    return schema


def random_regex(rng, depth=0):
    parts = []
    for _ in range(rng.randint(1, 4)):
        atom = rng.choice(["a", "b", "x", "0", "7", " ", "-", r"\.", "[a-c]", "[0-9]", r"\d", r"\w", "[A-Z]", "é", "[xyz_]"])
        if depth < 2 and rng.random() < 0.25:
            atom = "(" + random_regex(rng, depth + 1) + "|" + random_regex(rng, depth + 1) + ")"
        parts.append(atom + rng.choice(["", "", "?", "{0,3}", "{1,2}", "{2}"]))
    return "".join(parts)


class StructuredOutputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.smollm2 = Server("--served-model-name", "smollm2", "--max-num-seqs", "32", model=SMOLLM2)
        cls.stories = Server("--served-model-name", "stories", "--max-num-seqs", "32")

    @classmethod
    def tearDownClass(cls):
        for s in (cls.smollm2, cls.stories):
            assert s.stop() == 0, "".join(s.log)

    def complete(self, server, body):
        status, _, out = server.post(body.pop("_path", "/v1/completions"), body, timeout=900)
        self.assertEqual(status, 200, out)
        choice = out["choices"][0]
        text = choice["message"]["content"] if "message" in choice else choice["text"]
        return text, choice["finish_reason"]

    def run_all(self, server, bodies):
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(lambda b: self.complete(server, dict(b)), bodies))

    def check_schemas(self, server, chat):
        schemas = [schema_case(seed) for seed in range(SCHEMAS)]
        bodies = []
        for i, schema in enumerate(schemas):
            fmt = {"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema}}
            if chat:
                bodies.append({"_path": "/v1/chat/completions", "messages": [{"role": "user", "content": "Answer in JSON."}],
                               "temperature": 1, "seed": i, "max_tokens": MAX_TOKENS, "response_format": fmt})
            else:
                bodies.append({"prompt": "Once upon a time", "temperature": 1, "seed": i, "max_tokens": MAX_TOKENS,
                               "response_format": fmt})
        for i, ((text, finish), schema) in enumerate(zip(self.run_all(server, bodies), schemas)):
            with self.subTest(schema=i):
                self.assertEqual(finish, "stop", f"{text!r} for {json.dumps(schema)}")
                jsonschema.Draft202012Validator(schema).validate(json.loads(text))

    def test_random_schemas_on_smollm2(self):
        self.check_schemas(self.smollm2, chat=True)

    def test_random_schemas_on_stories260k(self):
        self.check_schemas(self.stories, chat=False)

    def test_random_regexes_and_choices(self):
        rng = random.Random(5)
        patterns = [random_regex(rng) for _ in range(100)]
        choices = [rng.sample(["yes", "no", "maybe so", "Paris", "über", "42", "a b c"], rng.randint(1, 4)) for _ in range(40)]
        for server in (self.smollm2, self.stories):
            bodies = [{"prompt": "The answer is", "temperature": 1, "seed": i, "max_tokens": 200,
                       **({"guided_regex": p} if i % 2 == 0 else {"structured_outputs": {"regex": p}})}
                      for i, p in enumerate(patterns)]
            bodies += [{"prompt": "Pick one:", "temperature": 1, "seed": i, "max_tokens": 50,
                        **({"guided_choice": c} if i % 2 == 0 else {"structured_outputs": {"choice": c}})}
                       for i, c in enumerate(choices)]
            results = self.run_all(server, bodies)
            for (text, finish), p in zip(results[:len(patterns)], patterns):
                with self.subTest(pattern=p, server=server.port):
                    self.assertEqual(finish, "stop")
                    self.assertIsNotNone(re.fullmatch(p, text), f"{text!r} does not fully match {p!r}")
            for (text, finish), c in zip(results[len(patterns):], choices):
                with self.subTest(choice=c, server=server.port):
                    self.assertEqual(finish, "stop")
                    self.assertIn(text, c)

    def test_grammars_and_json_object(self):
        grammar = r'''
root ::= item ("," " "? item){0,3}
item ::= "(" number " " word ")"
number ::= [1-9] [0-9]{0,2}
word ::= [a-z]{1,6}
'''
        pattern = r"\([1-9][0-9]{0,2} [a-z]{1,6}\)(, ?\([1-9][0-9]{0,2} [a-z]{1,6}\)){0,3}"
        for field in ("grammar", "guided_grammar"):
            text, finish = self.complete(self.smollm2, {"prompt": "List:", "temperature": 1, "seed": 3, "max_tokens": 200,
                                                        field: grammar})
            self.assertEqual(finish, "stop")
            self.assertIsNotNone(re.fullmatch(pattern, text), text)
        for server in (self.smollm2, self.stories):
            text, finish = self.complete(server, {"_path": "/v1/chat/completions" if server is self.smollm2 else "/v1/completions",
                                                  **({"messages": [{"role": "user", "content": "A JSON object, please."}]}
                                                     if server is self.smollm2 else {"prompt": "Data:"}),
                                                  "temperature": 1, "seed": 1, "max_tokens": 600,
                                                  "response_format": {"type": "json_object"}})
            if finish == "stop":
                self.assertIsInstance(json.loads(text), dict)
            else:  # an open object may go on; what came must still be a JSON object's prefix
                self.assertTrue(text.lstrip().startswith("{"), text)

    def test_recursive_grammars_nest_past_any_unrolling(self):
        # "(" favoured by a logit bias: greedy output opens 40 brackets, every prefix still
        # closable; the same grammar unbiased ends balanced.
        grammar = 'root ::= "(" root ")" | "x"'
        status, _, out = self.stories.post("/tokenize", {"prompt": "(", "add_special_tokens": False})
        self.assertEqual(status, 200, out)
        open_id = out["tokens"][-1]
        text, finish = self.complete(self.stories, {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 40,
                                                    "grammar": grammar, "logit_bias": {str(open_id): 100}})
        self.assertEqual((text, finish), ("(" * 40, "length"))
        text, finish = self.complete(self.stories, {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 40,
                                                    "grammar": grammar})
        self.assertEqual(finish, "stop")
        depth = text.count("(")
        self.assertEqual(text, "(" * depth + "x" + ")" * depth)

    def test_the_openai_client_gets_schema_valid_json(self):
        client = openai.OpenAI(base_url=self.smollm2.base + "/v1", api_key="none", max_retries=0)
        schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                   "population": {"type": "integer", "minimum": 0}},
                  "required": ["city", "population"], "additionalProperties": False}
        out = client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "Name a city and its population."}], temperature=0,
            max_tokens=100, response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema,
                                                                                     "strict": True}})
        value = json.loads(out.choices[0].message.content)
        jsonschema.validate(value, schema)
        streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": "Name a city and its population."}], temperature=0,
            max_tokens=100, stream=True,
            response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}}) if c.choices)
        self.assertEqual(json.loads(streamed), value)

    def test_bad_constraints_are_400s_naming_their_field(self):
        base = {"prompt": "hi", "max_tokens": 4}
        cases = [
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}},
             "response_format", "strin"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"not": {}}}}},
             "response_format", "'not'"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": True,
                                                                         "schema": {"type": "object", "properties": {"a": {}}}}}},
             "response_format", "strict"),
            ({"response_format": {"type": "yaml"}}, "response_format", "yaml"),
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "response_format", "name"),
            ({"guided_regex": "(a"}, "guided_regex", "'('"),
            ({"guided_regex": "(a)\\1"}, "guided_regex", "backreference"),
            ({"structured_outputs": {"regex": "[^\\x00-\\U0010FFFF]"}}, "structured_outputs", "matches nothing"),
            ({"guided_grammar": "root ::= item"}, "guided_grammar", "'item'"),
            ({"grammar": "start ::= \"a\""}, "grammar", "root"),
            ({"grammar": "root ::= e\ne ::= e \"+\" \"1\" | \"1\""}, "grammar", "left-recursive"),
            ({"guided_choice": []}, "guided_choice", None),
            ({"guided_regex": "a", "response_format": {"type": "json_object"}}, None, "give one of them"),
        ]
        for extra, param, says in cases:
            with self.subTest(extra=extra):
                status, _, out = self.stories.post("/v1/completions", {**base, **extra})
                self.assertEqual(status, 400, out)
                err = out["error"]
                if param:
                    self.assertEqual(err["param"], param, err)
                if says:
                    self.assertIn(says, err["message"])
        self.assertEqual(self.stories.request("GET", "/health")[0], 200)


if __name__ == "__main__":
    unittest.main()
