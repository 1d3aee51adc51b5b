"""Scoring prompts through a real `orzo serve` on stories260K: completions' echo with logprobs
(max_tokens 0 scores the prompt alone) and vLLM's prompt_logprobs on both endpoints equal the
bare forward pass (tests/support/score_tokens) over an English text, batched with requests that
generate; /tokenizer_info; and requests that leave out `model`."""
import json
import os
import subprocess
import threading
import unittest

import openai

from harness import CHAT_TEMPLATE, STORIES, Server

TEXT = os.path.join(os.path.dirname(__file__), "../fixtures/text/english.txt")
WINDOW = 1000  # tokens of the text scored per request (stories260K's context is 2048)


def bare_forward_pass():
    """score_tokens' ids and logprobs (position 1 onwards) over the text."""
    out = json.loads(subprocess.run([os.environ["SCORE_TOKENS"], STORIES, TEXT], check=True, capture_output=True,
                                    text=True).stdout)
    return out["ids"], out["logprobs"], out["top1"]


class Scoring(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ids, cls.logprobs, cls.top1 = bare_forward_pass()
        cls.server = Server("--chat-template", CHAT_TEMPLATE, "--served-model-name", "stories")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "".join(cls.server.log)

    def score(self, ids, **extra):
        body = {"model": "stories", "prompt": ids, "echo": True, "logprobs": 1, "max_tokens": 0, **extra}
        status, _, out = self.server.post("/v1/completions", body)
        self.assertEqual(status, 200, out)
        return out

    def assert_window(self, first, out):
        """The response scores ids[first:first + WINDOW] as the bare forward pass does: the
        first token of a request is unscored (null); the rest condition on the window only,
        so they equal the bare pass exactly where the window starts at the text's start."""
        lp = out["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), WINDOW)
        self.assertIsNone(lp["token_logprobs"][0])
        self.assertIsNone(lp["top_logprobs"][0])
        if first == 0:
            worst = max(abs(a - b) for a, b in zip(lp["token_logprobs"][1:], self.logprobs[:WINDOW - 1]))
            self.assertLess(worst, 1e-4)
        for got, top in zip(lp["token_logprobs"][1:], lp["top_logprobs"][1:]):
            self.assertEqual(len(top), 1)
            self.assertGreaterEqual(max(top.values()), got - 1e-6)

    def test_echo_with_max_tokens_0_scores_the_prompt_alone(self):
        out = self.score(self.ids[:WINDOW])
        self.assert_window(0, out)
        choice = out["choices"][0]
        self.assertEqual(choice["finish_reason"], "length")
        self.assertEqual(out["usage"]["completion_tokens"], 0)
        self.assertEqual(out["usage"]["prompt_tokens"], WINDOW)
        # Where the model's own top-1 is the text's token, the listed alternative is that token.
        lp = choice["logprobs"]
        for i in range(1, 200):
            if self.top1[i - 1] == self.ids[i]:
                self.assertEqual(list(lp["top_logprobs"][i]), [lp["tokens"][i]])

    def test_scoring_batched_with_generation_scores_the_same(self):
        alone = self.score(self.ids[:WINDOW])["choices"][0]["logprobs"]["token_logprobs"]
        results, errors = {}, []

        def run(name, body):
            try:
                status, _, out = self.server.post("/v1/completions", body)
                self.assertEqual(status, 200, out)
                results[name] = out
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(f"score{i}", {
            "prompt": self.ids[:WINDOW], "echo": True, "logprobs": 1, "max_tokens": 0})) for i in range(3)]
        threads += [threading.Thread(target=run, args=(f"gen{i}", {
            "prompt": "Once upon a time", "max_tokens": 40, "temperature": 1, "seed": i})) for i in range(5)]
        threads += [threading.Thread(target=run, args=("tail", {
            "prompt": self.ids[WINDOW:2 * WINDOW], "echo": True, "logprobs": 1, "max_tokens": 3}))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertFalse(errors)
        for i in range(3):
            got = results[f"score{i}"]["choices"][0]["logprobs"]["token_logprobs"]
            self.assertLess(max(abs(a - b) for a, b in zip(got[1:], alone[1:])), 1e-4)
        tail = results["tail"]["choices"][0]
        self.assertEqual(len(tail["logprobs"]["tokens"]), WINDOW + 3)  # the prompt's, then 3 generated
        self.assertEqual(results["tail"]["usage"]["completion_tokens"], 3)
        # Offsets: the prompt's tokens end where the echo ends and the generated ones begin.
        self.assertEqual(tail["logprobs"]["text_offset"][WINDOW], len(tail["text"]) -
                         len("".join(tail["logprobs"]["tokens"][WINDOW:])))

    def test_prompt_logprobs_on_completions_and_chat(self):
        ids = self.ids[:60]
        out = self.score(ids, prompt_logprobs=3, max_tokens=2, echo=False, logprobs=None)
        choice = out["choices"][0]
        pl = choice["prompt_logprobs"]
        self.assertEqual(len(pl), len(ids))
        self.assertIsNone(pl[0])
        for i in range(1, len(ids)):
            entry = pl[i]
            token = entry[str(ids[i])]
            self.assertLess(abs(token["logprob"] - self.logprobs[i - 1]), 1e-4)
            self.assertGreaterEqual(token["rank"], 1)
            self.assertIn(len(entry), (3, 4))  # the three likeliest, and the token when it is not among them
            by_rank = sorted(entry.values(), key=lambda e: e["rank"])
            self.assertEqual(by_rank[0]["rank"], 1)
            self.assertEqual(max(e["logprob"] for e in entry.values()), by_rank[0]["logprob"])
            self.assertEqual(token["rank"] == 1, self.top1[i - 1] == ids[i])
            self.assertIsInstance(token["decoded_token"], str)
        self.assertEqual(len(choice["text"]) > 0, True)

        status, _, chat = self.server.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 3, "prompt_logprobs": 0})
        self.assertEqual(status, 200, chat)
        self.assertEqual(len(chat["prompt_logprobs"]), chat["usage"]["prompt_tokens"])
        self.assertIsNone(chat["prompt_logprobs"][0])
        self.assertTrue(all(len(e) == 1 for e in chat["prompt_logprobs"][1:]))

    def test_the_openai_client_reads_echoed_logprobs(self):
        client = openai.OpenAI(base_url=self.server.base + "/v1", api_key="none", max_retries=0)
        out = client.completions.create(model="stories", prompt="Once upon a time there was", echo=True, logprobs=2,
                                        max_tokens=0)
        lp = out.choices[0].logprobs
        self.assertEqual(out.choices[0].text, "Once upon a time there was")
        self.assertIsNone(lp.token_logprobs[0])
        self.assertTrue(all(x < 0 for x in lp.token_logprobs[1:]))
        self.assertEqual(lp.text_offset[-1], len("Once upon a time there"))
        streamed = list(client.completions.create(model="stories", prompt="Once upon a time", echo=True, logprobs=1,
                                                  max_tokens=2, temperature=0, stream=True))
        first = streamed[0].choices[0]
        self.assertTrue(first.text.startswith("Once upon a time"))
        self.assertIsNone(first.logprobs.token_logprobs[0])

    def test_a_request_without_model_is_served_by_the_served_model(self):
        status, _, out = self.server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 2})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["model"], "stories")
        status, _, out = self.server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                                   "max_tokens": 2})
        self.assertEqual(status, 200, out)
        status, _, out = self.server.post("/v1/completions", {"model": "gpt-9", "prompt": "x", "max_tokens": 2})
        self.assertEqual(status, 404, out)

    def test_tokenizer_info(self):
        status, _, info = self.server.request("GET", "/tokenizer_info")
        self.assertEqual(status, 200)
        info = json.loads(info)
        self.assertEqual(info["bos_token"], "<s>")
        self.assertEqual(info["eos_token"], "</s>")
        self.assertIn("chat_template", info)
        self.assertEqual(info["model_max_length"], 2048)


if __name__ == "__main__":
    unittest.main()
