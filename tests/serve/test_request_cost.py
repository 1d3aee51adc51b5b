"""The work a request brings is bounded by its size: the largest request of each kind a client
may send is answered within a stated time, and while one is being prepared, other clients are
answered at once.

The bounds are generous on purpose (a loaded 2-core CI machine, the sanitizers): what they
catch is cost that grows faster than the request — a 600,000-key object parsed in quadratic
time took minutes — not a few percent of speed. Measured on an idle 2-vCPU Xeon, each case
takes well under a tenth of its bound."""
import json
import os
import random
import threading
import time
import unittest

from harness import SHARED, Server

SMOLLM2 = os.path.join(SHARED, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
VOCAB = 49152
MAX_BODY = 8 << 20  # orzo serve's default --max-body-bytes
# The sanitizers slow every parse and kernel several times; TSan, which instruments every
# memory access (the stop matcher walks a table per byte), about 16 times: 16 KiB of stop
# strings over 64 tokens took 38 s under it with a build running alongside.
SLOW = {"": 1, "thread": 16}.get(os.environ.get("ORZO_SANITIZED", ""), 4)


def text(n, seed=1):
    r = random.Random(seed)
    return "".join(r.choice("abcdefghijklmnopqrstuvwxyz .,!?XYZ0123456789") for _ in range(n))


@unittest.skipUnless(os.path.exists(SMOLLM2), "needs ../shared's SmolLM2-135M-Instruct (a vocabulary of 49,152)")
class RequestCost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--served-model-name", "smol", "--max-num-seqs", "128", model=SMOLLM2)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def timed(self, path, body, bound):
        """POSTs body; asserts the answer came within bound seconds; returns (status, json)."""
        data = json.dumps(body).encode()
        self.assertLessEqual(len(data), MAX_BODY)
        start = time.monotonic()
        status, _, out = self.server.post(path, data, timeout=120)
        took = time.monotonic() - start
        self.assertLess(took, bound * SLOW, f"{path} with {len(data)} bytes took {took:.2f} s")
        return status, out

    def test_a_logit_bias_for_every_token(self):
        bias = {str(i): (i % 7) / 10 for i in range(VOCAB)}
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "Hello", "max_tokens": 8,
                                                    "logit_bias": bias}, 3)
        self.assertEqual(status, 200, out)

    def test_an_object_of_600000_keys(self):
        # Past the vocabulary, so refused, but only after the whole body was parsed.
        bias = {str(i): 1 for i in range(600_000)}
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "Hello", "logit_bias": bias}, 5)
        self.assertEqual(status, 400, out)
        self.assertEqual(out["error"]["param"], "logit_bias")

    def test_a_million_stop_token_ids(self):
        r = random.Random(2)
        ids = [r.randrange(VOCAB) for _ in range(1_000_000)]
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "Hello", "max_tokens": 32,
                                                    "ignore_eos": True, "stop_token_ids": ids}, 5)
        self.assertEqual(status, 200, out)

    def test_stop_strings_up_to_their_limit(self):
        stops = [text(1024, seed=i) for i in range(16)]
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "Hello", "max_tokens": 64,
                                                    "stop": stops}, 3)
        self.assertEqual(status, 200, out)
        stops[0] += "x"
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "Hello", "stop": stops}, 3)
        self.assertEqual(status, 400, out)
        self.assertEqual(out["error"]["param"], "stop")
        self.assertIn("16384 bytes in all", out["error"]["message"])

    def test_the_most_choices(self):
        # Two tokens each under the sanitizers, whose kernels run many times slower.
        tokens = 2 if SLOW > 1 else 16
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "Hello", "max_tokens": tokens, "n": 128,
                                                    "temperature": 1, "seed": 1}, 30)
        self.assertEqual(status, 200, out)
        self.assertEqual(len(out["choices"]), 128)

    def test_twenty_thousand_messages(self):
        messages = [{"role": "user", "content": "hi"}] * 20_000
        status, out = self.timed("/v1/chat/completions", {"model": "smol", "messages": messages, "max_tokens": 1}, 5)
        self.assertEqual(status, 400, out)
        self.assertEqual(out["error"]["code"], "context_length_exceeded")

    def test_a_schema_of_2000_properties(self):
        props = {f"p{i}": {"type": "string"} for i in range(2000)}
        schema = {"type": "object", "properties": props, "required": list(props)}
        status, out = self.timed("/v1/chat/completions", {
            "model": "smol", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}, 5)
        self.assertEqual(status, 400, out)  # past the automaton's state limit, said so
        self.assertIn("too complex", out["error"]["message"])

    def test_a_regex_whose_automaton_is_costly_to_build(self):
        # A few short characters, thousands of NFA states in every DFA state: 19 s to refuse
        # when only the automaton's states were bounded.
        status, out = self.timed("/v1/completions", {"model": "smol", "prompt": "hi", "max_tokens": 4,
                                                    "structured_outputs": {"regex": "(.?){1000}a{1000}"}}, 3)
        self.assertEqual(status, 400, out)
        self.assertIn("too complex", out["error"]["message"])

    def test_the_largest_prompt_holds_up_no_one(self):
        """An 8 MB prompt is tokenized off the I/O thread: meanwhile a health probe and a short
        completion are answered as fast as ever."""
        for path, body in (("/v1/completions", {"model": "smol", "prompt": text(MAX_BODY - 200), "max_tokens": 1}),
                           ("/tokenize", {"model": "smol", "prompt": text(MAX_BODY - 200)})):
            result = {}
            big = threading.Thread(target=lambda: result.update(answer=self.timed(path, body, 10)))
            big.start()
            time.sleep(0.2)  # the body is on its way or being tokenized
            waits = []
            while big.is_alive() and len(waits) < 10:
                start = time.monotonic()
                status, _, _ = self.server.request("GET", "/health")
                self.assertEqual(status, 200)
                status, _, out = self.server.post("/v1/completions", {"model": "smol", "prompt": "Hi", "max_tokens": 1})
                self.assertEqual(status, 200, out)
                waits.append(time.monotonic() - start)
            big.join()
            status, out = result["answer"]
            self.assertEqual(status, 400 if path == "/v1/completions" else 200, out)
            self.assertLess(max(waits, default=0), 1.0 * SLOW, f"{path}: other requests waited {waits}")


if __name__ == "__main__":
    unittest.main()
