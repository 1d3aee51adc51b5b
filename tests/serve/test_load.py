"""Many clients at once against a real `orzo serve` on stories260K: concurrent streams
agree with the same requests sent alone, and through preemption with async scheduling on and
off; clients that vanish free their KV blocks at once, a full queue answers 429 without
touching admitted requests, and SIGTERM drains."""
import signal
import threading
import time
import unittest

from harness import Server, open_stream, stream_events, wait_for

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben", "One day, a", "The sun was", "Tom had a big",
           "There was a cat", "Mom said"]


def stream_text(port, prompt, max_tokens, **extra):
    body = {"model": "stories", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True, **extra}
    s, status, f = open_stream(port, "/v1/completions", body)
    assert status == 200, status
    text, finish = "", None
    for ev in stream_events(f):
        text += ev["choices"][0]["text"]
        finish = ev["choices"][0]["finish_reason"] or finish
    f.close()
    s.close()
    return text, finish


def drop_mid_stream(test, server, n, max_tokens):
    """Opens n streams, reads each one's first tokens, then closes them all; returns when."""
    socks = []
    for i in range(n):
        body = {"model": "stories", "prompt": PROMPTS[i % 8], "max_tokens": max_tokens, "ignore_eos": True,
                "stream": True}
        socks.append(open_stream(server.port, "/v1/completions", body))
    for s, status, f in socks:  # every one is mid-stream: it has had its first tokens
        test.assertEqual(status, 200)
        events = stream_events(f)
        next(events), next(events)
    test.assertGreater(server.metric("orzo:num_requests_running"), 0)
    for s, _, f in socks:
        f.close()  # the file holds the descriptor open too
        s.close()
    return time.time()


def run_threads(n, target):
    results = [None] * n
    errors = []

    def run(i):
        try:
            results[i] = target(i)
        except Exception as e:  # reported below, with the index
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results, errors


class Concurrency(unittest.TestCase):
    def test_64_streams_each_equal_to_the_request_alone(self):
        with Server("--served-model-name", "stories", "--max-num-seqs", "64") as server:
            together, errors = run_threads(64, lambda i: stream_text(server.port, PROMPTS[i % 8], 40 + i % 5))
            self.assertEqual(errors, [])
            for i in range(64):
                alone = stream_text(server.port, PROMPTS[i % 8], 40 + i % 5)
                self.assertEqual(together[i], alone, f"client {i}")
                self.assertGreater(len(alone[0]), 20)
            self.assertEqual(server.stop(), 0)


class AsyncScheduling(unittest.TestCase):
    def test_64_streams_through_preemption_equal_with_it_off_and_vanishing_clients_free_their_blocks(self):
        def request(port, i):
            return stream_text(port, PROMPTS[i % 8], 40 + i % 5, **({"stop": [". "]} if i % 3 == 0 else {}))

        outputs, preempted = [], []
        for flags in (["--no-async-scheduling"], []):
            # 40 blocks of KV for 64 streams: requests are preempted and resumed all along.
            with Server("--served-model-name", "stories", "--max-num-seqs", "64", "--kv-blocks", "40", *flags) as server:
                together, errors = run_threads(64, lambda i: request(server.port, i))
                self.assertEqual(errors, [])
                outputs.append(together)
                preempted.append(server.metric("orzo:num_preemptions_total"))
                if not flags:
                    idle = server.metric("orzo:kv_cache_usage_perc")
                    drop_mid_stream(self, server, 16, 300)
                    self.assertTrue(wait_for(lambda: server.metric("orzo:num_requests_running") == 0 and
                                             server.metric("orzo:kv_cache_usage_perc") == idle, timeout=5.0),
                                    server.metrics())
                self.assertEqual(server.stop(), 0)
        self.assertEqual(outputs[0], outputs[1])
        self.assertTrue(all(p > 0 for p in preempted), preempted)
        self.assertTrue(any(finish == "stop" for _, finish in outputs[1]))


class Disconnect(unittest.TestCase):
    def test_32_clients_dropping_mid_stream_free_their_blocks(self):
        with Server("--served-model-name", "stories", "--max-num-seqs", "64") as server:
            idle = server.metric("orzo:kv_cache_usage_perc")
            aborted = server.metric("orzo:request_success_total", finished_reason="abort")
            dropped = drop_mid_stream(self, server, 32, 480)
            self.assertTrue(wait_for(lambda: server.metric("orzo:num_requests_running") == 0 and
                                     server.metric("orzo:kv_cache_usage_perc") == idle, timeout=1.0),
                            server.metrics())
            self.assertLess(time.time() - dropped, 1.0)
            self.assertEqual(server.metric("orzo:request_success_total", finished_reason="abort"), aborted + 32)
            self.assertEqual(server.stop(), 0)


class Overload(unittest.TestCase):
    def test_429_only_beyond_the_queue_and_admitted_requests_complete(self):
        with Server("--served-model-name", "stories", "--max-num-seqs", "2", "--max-queue", "2") as server:
            go = threading.Barrier(12)

            def one(i):
                go.wait()
                return server.post("/v1/completions", {"model": "stories", "prompt": PROMPTS[i % 8],
                                                       "max_tokens": 400, "ignore_eos": True})

            results, errors = run_threads(12, one)
            self.assertEqual(errors, [])
            ok = [r for r in results if r[0] == 200]
            refused = [r for r in results if r[0] == 429]
            self.assertEqual(len(ok) + len(refused), 12, [r[0] for r in results])
            self.assertGreaterEqual(len(ok), 4)  # 2 running + 2 waiting fit
            self.assertGreater(len(refused), 0)
            for status, headers, body in refused:
                self.assertEqual(headers.get("retry-after"), "1")
                self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
                self.assertEqual(body["error"]["code"], "rate_limit_exceeded")
            for status, headers, body in ok:
                self.assertEqual(body["usage"]["completion_tokens"], 400)
                self.assertEqual(body["choices"][0]["finish_reason"], "length")
            self.assertEqual(server.metric("orzo:request_rejected_total", status="429"), len(refused))
            self.assertEqual(server.stop(), 0)


class Shutdown(unittest.TestCase):
    def test_sigterm_lets_streams_finish_then_exits_0(self):
        with Server("--served-model-name", "stories", "--shutdown-grace", "20") as server:
            body = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 300, "ignore_eos": True,
                    "stream": True}
            s, status, f = open_stream(server.port, "/v1/completions", body)
            events = stream_events(f)
            first = next(events)
            server.proc.send_signal(signal.SIGTERM)
            rest = list(events)
            chunks = [first] + rest
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
            self.assertEqual(server.proc.wait(20), 0)
            f.close()
            s.close()

    def test_past_the_grace_period_requests_are_cancelled(self):
        with Server("--served-model-name", "stories", "--shutdown-grace", "0.2", "--max-model-len", "20100",
                    "--kv-blocks", "1300") as server:
            body = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 20000, "ignore_eos": True,
                    "stream": True}
            s, status, f = open_stream(server.port, "/v1/completions", body)
            events = stream_events(f)
            next(events)
            server.proc.send_signal(signal.SIGINT)
            chunks = list(events)
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "abort")
            self.assertEqual(server.proc.wait(20), 0)
            f.close()
            s.close()


if __name__ == "__main__":
    unittest.main()
