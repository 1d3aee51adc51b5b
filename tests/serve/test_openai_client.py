"""The official openai client and curl against a real `orzo serve` on stories260K:
completions and chat, streamed and not, plus the parameters and endpoints around them."""
import json
import subprocess
import unittest

import openai

from harness import CHAT_TEMPLATE, Server

KEY = "test-key"
# transformers' greedy continuation of "Once upon a time" on stories260K.
GREEDY = ", there was a little girl named Lily. She loved to play outside"
PROMPT_IDS = [1, 403, 407, 261, 378]  # <s> Once upon a time


class OpenAIClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--chat-template", CHAT_TEMPLATE, "--api-key", KEY, "--served-model-name", "stories")
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key=KEY, max_retries=0)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "".join(cls.server.log)

    def complete(self, **kw):
        args = dict(model="stories", prompt="Once upon a time", max_tokens=24, temperature=0)
        args.update(kw)
        return self.client.completions.create(**args)

    def test_completion(self):
        r = self.complete(max_tokens=24)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.model, "stories")
        self.assertTrue(r.id.startswith("cmpl-"))
        self.assertEqual(len(r.choices), 1)
        self.assertTrue(r.choices[0].text.startswith(GREEDY), r.choices[0].text)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual((r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens), (5, 24, 29))

    def test_completion_stream_equals_whole(self):
        whole = self.complete().choices[0].text
        chunks = list(self.complete(stream=True, stream_options={"include_usage": True}))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        self.assertEqual(text, whole)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertEqual(finishes[-1], "length")
        self.assertTrue(all(f is None for f in finishes[:-1]))
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 24)
        self.assertEqual(chunks[-1].usage.prompt_tokens, 5)

    def test_chat_through_the_template(self):
        # The template renders "<s>" + the user's text: the same prompt as the completion.
        whole = self.complete().choices[0].text
        msgs = [{"role": "user", "content": "Once upon a time"}]
        r = self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=24, temperature=0)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertEqual(r.choices[0].message.content, whole)
        self.assertEqual(r.usage.prompt_tokens, 5)
        chunks = list(self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=24,
                                                          temperature=0, stream=True,
                                                          stream_options={"include_usage": True}))
        self.assertEqual(chunks[0].object, "chat.completion.chunk")
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks if c.choices), whole)
        self.assertEqual([c for c in chunks if c.choices][-1].choices[0].finish_reason, "length")
        self.assertEqual(chunks[-1].usage.total_tokens, 29)

    def test_max_completion_tokens_and_default_length(self):
        msgs = [{"role": "user", "content": "Once upon a time"}]
        r = self.client.chat.completions.create(model="stories", messages=msgs, max_completion_tokens=7, temperature=0)
        self.assertEqual(r.usage.completion_tokens, 7)
        self.assertEqual(self.complete(max_tokens=None).usage.completion_tokens, 16)  # OpenAI's default

    def test_logprobs(self):
        r = self.complete(max_tokens=8, logprobs=3)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 8)
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        self.assertEqual(lp.text_offset[0], 0)
        for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(logprob, 0.0)
            self.assertEqual(len(top), 3)
            self.assertEqual(max(top, key=top.get), token)  # greedy takes the most likely
        msgs = [{"role": "user", "content": "Once upon a time"}]
        c = self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=5, temperature=0,
                                                logprobs=True, top_logprobs=2)
        content = c.choices[0].logprobs.content
        self.assertEqual(len(content), 5)
        self.assertEqual(len(content[0].top_logprobs), 2)
        self.assertEqual(content[0].top_logprobs[0].token, content[0].token)
        self.assertEqual(bytes(content[0].bytes).decode(), content[0].token)

    def test_n_choices_with_a_seed_are_reproducible(self):
        a = self.complete(n=3, temperature=1.0, seed=7, max_tokens=12)
        b = self.complete(n=3, temperature=1.0, seed=7, max_tokens=12)
        self.assertEqual(sorted(c.index for c in a.choices), [0, 1, 2])
        self.assertEqual([c.text for c in a.choices], [c.text for c in b.choices])
        self.assertGreater(len({c.text for c in a.choices}), 1)
        self.assertEqual(a.usage.completion_tokens, 36)
        self.assertEqual(a.usage.prompt_tokens, 5)  # the prompt counts once

    def test_stop_string_and_echo(self):
        r = self.complete(stop=["Lily"], max_tokens=40)
        self.assertEqual(r.choices[0].text, ", there was a little girl named ")
        self.assertEqual(r.choices[0].finish_reason, "stop")
        e = self.complete(echo=True, max_tokens=4)
        self.assertTrue(e.choices[0].text.startswith("Once upon a time, there"), e.choices[0].text)

    def test_a_continuation_keeps_its_leading_space(self):
        # "The little dog" + " was ...": decoded after its prompt, the first word keeps the
        # space that SentencePiece would strip at the start of a text; streamed, whole or
        # echoed, the client appends the same text to its prompt.
        spaced = 0
        for prompt in ["The little dog", "Lily and Tom", "The sun was", "She looked at the", "Ben liked",
                       "The old man", "Anna found a", "The tree", "Mom said", "In the garden"]:
            whole = self.complete(prompt=prompt, max_tokens=8).choices[0].text
            spaced += whole.startswith(" ")
            chunks = list(self.complete(prompt=prompt, max_tokens=8, stream=True))
            self.assertEqual("".join(c.choices[0].text for c in chunks if c.choices), whole, prompt)
            echoed = self.complete(prompt=prompt, max_tokens=8, echo=True).choices[0].text
            self.assertEqual(echoed, prompt + whole)
        self.assertGreater(spaced, 5, "most continuations of these prompts begin with a word")

    def test_prompt_as_token_ids_and_batches(self):
        r = self.complete(prompt=PROMPT_IDS, max_tokens=6)
        self.assertTrue(r.choices[0].text.startswith(", there was"))
        b = self.complete(prompt=["Once upon a time", "The cat"], max_tokens=6)
        self.assertEqual(len(b.choices), 2)
        self.assertEqual(b.choices[0].text, r.choices[0].text)

    def test_prefix_cache_shows_in_usage(self):
        prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
        self.complete(prompt=prompt, max_tokens=2)
        r = self.client.completions.with_raw_response.create(model="stories", prompt=prompt, max_tokens=2, temperature=0)
        usage = json.loads(r.text)["usage"]
        self.assertGreaterEqual(usage["prompt_tokens_details"]["cached_tokens"], 16)

    def test_models_and_auth(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], ["stories"])
        bad = openai.OpenAI(base_url=self.server.base + "/v1", api_key="wrong", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.completions.create(model="stories", prompt="x", max_tokens=1)
        with self.assertRaises(openai.NotFoundError) as err:
            self.complete(model="gpt-4")
        self.assertEqual(err.exception.body["code"], "model_not_found")

    def test_tokenize_detokenize_health(self):
        auth = {"Authorization": "Bearer " + KEY}
        status, _, body = self.server.post("/tokenize", {"prompt": "Once upon a time"}, headers=auth)
        self.assertEqual((status, body["tokens"], body["count"]), (200, PROMPT_IDS, 5))
        status, _, body = self.server.post("/detokenize", {"tokens": PROMPT_IDS[1:]}, headers=auth)
        self.assertEqual((status, body["prompt"]), (200, "Once upon a time"))
        status, _, body = self.server.request("GET", "/health")
        health = json.loads(body)
        self.assertEqual((status, health["status"]), (200, "ok"))
        self.assertEqual([w["layers"] for w in health["workers"]], ["0-5"])  # one local stage, no standby
        self.assertEqual(health["standby"], [])

    def test_curl(self):
        body = json.dumps({"model": "stories", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})
        base = ["curl", "-sS", "--fail-with-body", "-H", "Authorization: Bearer " + KEY,
                "-H", "Content-Type: application/json"]
        out = subprocess.run(base + ["-d", body, self.server.base + "/v1/completions"], capture_output=True, check=True)
        whole = json.loads(out.stdout)["choices"][0]["text"]
        self.assertTrue(whole.startswith(", there was a little girl named Lily"))
        streamed = json.loads(body)
        streamed["stream"] = True
        out = subprocess.run(base + ["-N", "-d", json.dumps(streamed), self.server.base + "/v1/completions"],
                             capture_output=True, check=True)
        lines = [l[6:] for l in out.stdout.decode().split("\n") if l.startswith("data: ")]
        self.assertEqual(lines[-1], "[DONE]")
        self.assertEqual("".join(json.loads(l)["choices"][0]["text"] for l in lines[:-1]), whole)
        chat = json.dumps({"model": "stories", "messages": [{"role": "user", "content": "Once upon a time"}],
                           "max_tokens": 24, "temperature": 0})
        out = subprocess.run(base + ["-d", chat, self.server.base + "/v1/chat/completions"], capture_output=True,
                             check=True)
        self.assertEqual(json.loads(out.stdout)["choices"][0]["message"]["content"], whole)

    def test_metrics_count_what_was_served(self):
        before = self.server.metric("orzo:request_success_total", finished_reason="length")
        self.complete(max_tokens=3)
        m = self.server.metrics()
        self.assertEqual(self.server.metric("orzo:request_success_total", finished_reason="length"), before + 1)
        for h in ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                  "request_queue_time_seconds"):
            count = [v for k, v in m.items() if k.startswith(f"orzo:{h}_count")]
            self.assertTrue(count and count[0] > 0, h)
        self.assertGreater(self.server.metric("orzo:generation_tokens_total"), 0)
        self.assertGreater(self.server.metric("orzo:prompt_tokens_total"), 0)
        self.assertEqual(self.server.metric("orzo:num_requests_running"), 0)


if __name__ == "__main__":
    unittest.main()
