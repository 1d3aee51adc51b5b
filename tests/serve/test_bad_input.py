"""Bad input against a real `orzo serve`: every case gets its status and an OpenAI-style
error body, and a fuzz run of random bytes and mutated requests leaves the server healthy."""
import json
import random
import socket
import time
import unittest

from harness import CHAT_TEMPLATE, Server

KEY = "k3y"
AUTH = {"Authorization": "Bearer " + KEY}
GOOD = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 4}
CHAT = {"model": "stories", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def with_(base, **kw):
    out = dict(base)
    for k, v in kw.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


# (name, method, path, body, headers, status, param, code)
CASES = [
    ("malformed JSON", "POST", "/v1/completions", b'{"model": "stories", "prompt": ', AUTH, 400, None, None),
    ("body is an array", "POST", "/v1/completions", b"[1, 2]", AUTH, 400, None, None),
    ("empty body", "POST", "/v1/completions", b"", AUTH, 400, None, None),
    ("max_tokens of the wrong type", "POST", "/v1/completions", with_(GOOD, max_tokens="ten"), AUTH, 400, "max_tokens", None),
    ("temperature out of range", "POST", "/v1/completions", with_(GOOD, temperature=-1), AUTH, 400, "temperature", None),
    ("top_p out of range", "POST", "/v1/completions", with_(GOOD, top_p=1.5), AUTH, 400, "top_p", None),
    ("too many sequences", "POST", "/v1/completions", with_(GOOD, prompt=["a"] * 20, n=20), AUTH, 400, "prompt", None),
    ("n of zero", "POST", "/v1/completions", with_(GOOD, n=0), AUTH, 400, "n", None),
    ("logprobs too many", "POST", "/v1/completions", with_(GOOD, logprobs=50), AUTH, 400, "logprobs", None),
    ("stop of the wrong type", "POST", "/v1/completions", with_(GOOD, stop=5), AUTH, 400, "stop", None),
    ("logit_bias with a bad key", "POST", "/v1/completions", with_(GOOD, logit_bias={"x": 1}), AUTH, 400, "logit_bias", None),
    ("unknown field", "POST", "/v1/completions", with_(GOOD, frobnicate=True), AUTH, 400, "frobnicate", None),
    ("missing prompt", "POST", "/v1/completions", with_(GOOD, prompt=None), AUTH, 400, "prompt", None),
    ("empty prompt", "POST", "/v1/completions", with_(GOOD, prompt=""), AUTH, 400, "prompt", None),
    ("token id outside the vocabulary", "POST", "/v1/completions", with_(GOOD, prompt=[1, 99999]), AUTH, 400, "prompt", None),
    ("max_tokens beyond the context", "POST", "/v1/completions", with_(GOOD, max_tokens=100000), AUTH, 400, "max_tokens",
     "context_length_exceeded"),
    ("prompt filling the context", "POST", "/v1/completions", with_(GOOD, prompt=[1] * 3000), AUTH, 400, "prompt",
     "context_length_exceeded"),
    ("min_tokens above max_tokens", "POST", "/v1/completions", with_(GOOD, min_tokens=5), AUTH, 400, "min_tokens",
     None),
    ("min_tokens above max_completion_tokens", "POST", "/v1/chat/completions",
     with_(CHAT, max_tokens=None, max_completion_tokens=4, min_tokens=5), AUTH, 400, "min_tokens", None),
    ("min_tokens above what the messages leave of the context", "POST", "/v1/chat/completions",
     with_(CHAT, max_tokens=None, min_tokens=100000), AUTH, 400, "min_tokens", None),
    ("logit_bias for a token outside the vocabulary", "POST", "/v1/completions", with_(GOOD, logit_bias={"99999": 1}),
     AUTH, 400, "logit_bias", None),
    ("max_tokens 0 without echo", "POST", "/v1/completions", with_(GOOD, max_tokens=0), AUTH, 400, "max_tokens", None),
    ("max_tokens 0 in a chat", "POST", "/v1/chat/completions", with_(CHAT, max_tokens=0), AUTH, 400, "max_tokens", None),
    ("prompt_logprobs past 20", "POST", "/v1/completions", with_(GOOD, prompt_logprobs=21), AUTH, 400,
     "prompt_logprobs", None),
    ("prompt_logprobs in a stream", "POST", "/v1/completions", with_(GOOD, prompt_logprobs=1, stream=True), AUTH, 400,
     "prompt_logprobs", None),
    ("model of the wrong type", "POST", "/v1/completions", with_(GOOD, model=7), AUTH, 400, "model", None),
    ("unknown model", "POST", "/v1/completions", with_(GOOD, model="gpt-9"), AUTH, 404, "model", "model_not_found"),
    ("chat without messages", "POST", "/v1/chat/completions", with_(CHAT, messages=[]), AUTH, 400, "messages", None),
    ("chat with a bad role", "POST", "/v1/chat/completions",
     with_(CHAT, messages=[{"role": "robot", "content": "x"}]), AUTH, 400, "messages[0].role", None),
    ("chat with an image", "POST", "/v1/chat/completions",
     with_(CHAT, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]), AUTH,
     400, "messages[0].content[0].type", None),
    ("chat with a nameless tool", "POST", "/v1/chat/completions",
     with_(CHAT, tools=[{"type": "function", "function": {"description": "f"}}]), AUTH, 400, "tools", None),
    ("tool_choice naming no tool", "POST", "/v1/chat/completions",
     with_(CHAT, tools=[{"type": "function", "function": {"name": "f"}}],
           tool_choice={"type": "function", "function": {"name": "g"}}), AUTH, 400, "tool_choice", None),
    ("top_logprobs without logprobs", "POST", "/v1/chat/completions", with_(CHAT, top_logprobs=2), AUTH, 400,
     "top_logprobs", None),
    ("no API key", "POST", "/v1/completions", GOOD, {}, 401, None, "invalid_api_key"),
    ("wrong API key", "POST", "/v1/completions", GOOD, {"Authorization": "Bearer nope"}, 401, None, "invalid_api_key"),
    ("GET on a POST route", "GET", "/v1/completions", None, AUTH, 405, None, None),
    ("DELETE on a GET route", "DELETE", "/v1/models", None, AUTH, 405, None, None),
    ("unknown path", "POST", "/v2/completions", GOOD, AUTH, 404, None, None),
    ("oversized body", "POST", "/v1/completions", with_(GOOD, prompt="a" * 70000), AUTH, 413, None, None),
    ("detokenize a bad id", "POST", "/detokenize", {"tokens": [-1]}, AUTH, 400, "tokens", None),
    ("tokenize without a prompt", "POST", "/tokenize", {}, AUTH, 400, None, None),
]


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--served-model-name", "stories", "--api-key", KEY, "--max-body-bytes", "65536",
                            "--http-timeout", "0.5", "--chat-template", CHAT_TEMPLATE)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, "".join(cls.server.log)

    def check_error(self, name, status, headers, body, want_status, param, code):
        self.assertEqual(status, want_status, f"{name}: {body[:300]!r}")
        self.assertTrue(headers.get("content-type", "").startswith("application/json"), name)
        err = json.loads(body)["error"]
        self.assertEqual(set(err), {"message", "type", "param", "code"}, name)
        self.assertTrue(err["message"], name)
        if param is not None:
            self.assertEqual(err["param"], param, f"{name}: {err}")
        if code is not None:
            self.assertEqual(err["code"], code, f"{name}: {err}")

    def test_table(self):
        for name, method, path, body, headers, status, param, code in CASES:
            with self.subTest(name):
                got = self.server.request(method, path, body, headers=headers)
                self.check_error(name, got[0], got[1], got[2], status, param, code)
                if status == 405:
                    self.assertIn("allow", got[1])
        self.assertEqual(self.server.request("GET", "/health")[0], 200)

    def test_slow_and_half_open_connections_time_out(self):
        slow = socket.create_connection(("127.0.0.1", self.server.port))
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo")
        slow.settimeout(5)
        started = time.time()
        answer = slow.recv(4096).decode()
        self.assertIn("HTTP/1.1 408", answer)
        self.assertLess(time.time() - started, 3)
        half_open = socket.create_connection(("127.0.0.1", self.server.port))
        half_open.settimeout(5)
        self.assertEqual(half_open.recv(10), b"")  # closed by the server after the timeout
        slow.close()
        half_open.close()

    def test_fuzz_leaves_the_server_healthy(self):
        rng = random.Random(1234)
        valid = [json.dumps(GOOD).encode(), json.dumps(CHAT).encode(),
                 json.dumps(with_(GOOD, stream=True, n=2, logprobs=2, stop=["a"])).encode()]
        paths = ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]
        statuses = {}
        deadline = time.time() + 15
        n = 0
        while time.time() < deadline:
            n += 1
            kind = rng.random()
            if kind < 0.2:  # raw bytes on the socket, HTTP or not
                s = socket.create_connection(("127.0.0.1", self.server.port))
                s.settimeout(2)
                junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
                if rng.random() < 0.5:
                    junk = b"POST /v1/completions HTTP/1.1\r\n" + junk
                try:
                    s.sendall(junk)
                    s.shutdown(socket.SHUT_WR)
                    s.recv(4096)
                except OSError:
                    pass
                s.close()
                continue
            body = bytearray(rng.choice(valid))
            for _ in range(rng.randrange(1, 6)):
                op = rng.random()
                at = rng.randrange(len(body))
                if op < 0.4:
                    body[at] = rng.randrange(32, 127)
                elif op < 0.7:
                    del body[at:at + rng.randrange(1, 8)]
                else:
                    body[at:at] = rng.choice([b"null", b"-1", b"1e309", b'"x"', b"[]", b"{}", b"\xff\xfe", b"99999999999"])
                if not body:
                    break
            try:
                status = self.server.request("POST", rng.choice(paths), bytes(body), headers=AUTH, timeout=30)[0]
            except Exception as e:  # a dropped connection is a finding
                self.fail(f"request {n} failed: {e!r}: {bytes(body)[:200]!r}")
            self.assertLess(status, 500, bytes(body)[:300])
            statuses[status] = statuses.get(status, 0) + 1
        self.assertGreater(n, 200)
        print(f"fuzz: {n} inputs, statuses {statuses}")
        self.assertEqual(self.server.proc.poll(), None)
        self.assertEqual(self.server.request("GET", "/health")[0], 200)
        ok = self.server.post("/v1/completions", with_(GOOD, temperature=0), headers=AUTH)
        self.assertEqual(ok[0], 200)


if __name__ == "__main__":
    unittest.main()
