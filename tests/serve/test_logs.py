"""The stats line and the access log of a real `orzo serve` on stderr: stats lines while
busy, with the generation rate the load produced, none once idle; exactly one access line
per request sent, with its status (a 400 for bad JSON and a 404 included) and its tokens;
and with --log-format json every such line one JSON object."""
import json
import re
import threading
import time
import unittest
from collections import Counter

from harness import Server, open_stream, stream_events

BODY = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}
ACCESS = re.compile(r"access: (\S+) (\S+) (\d{3})(?: prompt_tokens=(\d+) completion_tokens=(\d+)(?: ttft=([\d.]+)ms)?)?"
                    r" duration=([\d.]+)ms\n$")
STATS = re.compile(r"stats: prompt ([\d.]+) tokens/s, generation ([\d.]+) tokens/s, running (\d+), waiting (\d+), "
                   r"KV cache ([\d.]+)%, prefix cache hit rate ([\d.]+%|-)\n$")


class Load:
    """Requests sent from a few threads, each remembered as (method, path, status), with the
    completion tokens their usage reported."""

    def __init__(self, server):
        self.server = server
        self.sent = Counter()
        self.completion_tokens = 0
        self.lock = threading.Lock()

    def note(self, method, path, status, tokens=0):
        with self.lock:
            self.sent[(method, path, status)] += 1
            self.completion_tokens += tokens

    def plain(self):
        status, _, body = self.server.post("/v1/completions", BODY)
        self.note("POST", "/v1/completions", status, body["usage"]["completion_tokens"] if status == 200 else 0)

    def streamed(self):
        body = dict(BODY, stream=True, stream_options={"include_usage": True})
        s, status, f = open_stream(self.server.port, "/v1/completions", body)
        tokens = 0
        for ev in stream_events(f):
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
        f.close()
        s.close()
        self.note("POST", "/v1/completions", status, tokens)

    def bad_json(self):
        status, _, _ = self.server.request("POST", "/v1/completions", b'{"model": "stories", "prompt": ')
        self.note("POST", "/v1/completions", status)

    def not_found(self):
        status, _, _ = self.server.request("GET", "/no/such/route")
        self.note("GET", "/no/such/route", status)

    def run_for(self, seconds, threads=4):
        until = time.time() + seconds

        def loop(i):
            n = 0
            while time.time() < until:
                self.streamed() if (i + n) % 2 else self.plain()
                n += 1

        workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)


def after_ready(server):
    """(time, line) of each stderr line after the server said it was ready."""
    at = next(i for i, line in enumerate(server.log) if "ready, serving" in line)
    return list(zip(server.log_times[at + 1:], server.log[at + 1:]))


class TextLogs(unittest.TestCase):
    def test_stats_while_busy_then_none_and_one_access_line_per_request(self):
        with Server("--served-model-name", "stories", "--stats-interval", "1") as server:
            load = Load(server)
            load.bad_json()
            load.not_found()
            load.run_for(2.5)
            ended = time.time()
            load.bad_json()  # refused before any session: no work, so no stats line either
            time.sleep(4.5)
            self.assertEqual(server.stop(), 0)
        log = "".join(server.log)
        lines = after_ready(server)
        self.assertEqual(load.sent[("POST", "/v1/completions", 400)], 2)
        self.assertEqual(load.sent[("GET", "/no/such/route", 404)], 1)
        self.assertGreater(load.sent[("POST", "/v1/completions", 200)], 4)

        stats = [(t, STATS.match(line)) for t, line in lines if line.startswith("stats:")]
        for _, m in stats:
            self.assertIsNotNone(m, log)
        busy = [m for t, m in stats if t <= ended + 1.5]
        self.assertGreaterEqual(len(busy), 1, log)
        self.assertTrue(any(float(m.group(2)) > 0 for m in busy), log)
        late = [t - ended for t, _ in stats if t > ended + 1.5]
        self.assertEqual(late, [], "stats lines kept coming after the load ended:\n" + log)

        access = [ACCESS.match(line) for _, line in lines if line.startswith("access:")]
        for m in access:
            self.assertIsNotNone(m, log)
        self.assertEqual(Counter((m.group(1), m.group(2), int(m.group(3))) for m in access), load.sent, log)
        generated = [m for m in access if int(m.group(3)) == 200]
        for m in generated:
            self.assertIsNotNone(m.group(6), "a generation request without TTFT: " + m.group(0))
            self.assertLessEqual(float(m.group(6)), float(m.group(7)))
        self.assertEqual(sum(int(m.group(5)) for m in generated), load.completion_tokens)
        for m in access:
            if int(m.group(3)) != 200:
                self.assertIsNone(m.group(4), "tokens on a request that never tokenized: " + m.group(0))


class JsonLogs(unittest.TestCase):
    def test_every_access_and_stats_line_is_a_json_object(self):
        with Server("--served-model-name", "stories", "--stats-interval", "1", "--log-format", "json") as server:
            load = Load(server)
            load.bad_json()
            load.not_found()
            load.run_for(1.5, threads=2)
            time.sleep(1.2)
            self.assertEqual(server.stop(), 0)
        log = "".join(server.log)
        records = []
        for _, line in after_ready(server):
            if line.startswith("orzo serve:"):  # the server's own lines (shutting down)
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                self.fail("not JSON: " + line)
        access = [r for r in records if r["log"] == "access"]
        stats = [r for r in records if r["log"] == "stats"]
        self.assertEqual(len(access) + len(stats), len(records), log)
        fields = {"log", "method", "path", "status", "prompt_tokens", "completion_tokens", "ttft_ms", "duration_ms"}
        for r in access:
            self.assertEqual(set(r), fields)
        self.assertEqual(Counter((r["method"], r["path"], r["status"]) for r in access), load.sent)
        for r in access:
            if r["status"] == 200:
                self.assertIsInstance(r["completion_tokens"], int, r)
                self.assertIsNotNone(r["ttft_ms"], r)
        self.assertEqual(sum(r["completion_tokens"] for r in access if r["status"] == 200), load.completion_tokens)
        self.assertTrue(stats, log)
        self.assertTrue(any(r["generation_tokens_per_s"] > 0 for r in stats), log)


if __name__ == "__main__":
    unittest.main()
