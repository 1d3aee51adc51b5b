"""`orzo serve --publish` with a placement whose last stage is served by `orzo worker` in another
process: /health says what is missing and which workers stand by, greedy completions equal a
single-process server's; the streams a killed or frozen (SIGSTOP) worker held pause and go on
unchanged on a standby or on a worker that joins within --recovery-timeout, and past it end
with a worker_lost error."""
import json
import signal
import time
import unittest

from harness import ORZO, STORIES, LoggedProcess, PrintsLogsOnFailure, Server, concurrent_streams, wait_for

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben", "One day, a"]
LIVENESS = ["--heartbeat-ms", "200", "--connection-timeout-ms", "1000"]


def worker_process(publish, layers):
    """An `orzo worker` for `layers` of stories260K, joining the batcher published on `publish`."""
    return LoggedProcess([ORZO, "worker", "--connect", f"127.0.0.1:{publish}", "--layers", layers, "-m", STORIES,
                          "-t", 1, *LIVENESS])


def complete_all(server):
    texts = []
    for p in PROMPTS:
        status, _, body = server.post("/v1/completions", {"model": "stories", "prompt": p, "max_tokens": 32,
                                                          "temperature": 0})
        assert status == 200, body
        texts.append(body["choices"][0]["text"])
    return texts


LONG = 160  # tokens of each long stream


def long_body(i, stream, tokens=LONG):
    return {"model": "stories", "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": tokens, "temperature": 0,
            "ignore_eos": True, "stream": stream}


def long_references(server, tokens=LONG):
    """What an undisturbed server answers to long_body(i, ...) for each prompt."""
    texts = []
    for i in range(len(PROMPTS)):
        status, _, body = server.post("/v1/completions", long_body(i, False, tokens))
        assert status == 200, body
        texts.append(body["choices"][0]["text"])
    return texts


class RemoteWorker(PrintsLogsOnFailure):
    @classmethod
    def setUpClass(cls):
        with Server("--served-model-name", "stories") as single:
            cls.reference = complete_all(single)
            cls.long_reference = long_references(single)
            single.stop()

    def setUp(self):
        self.server = None
        self.workers = []

    def serve(self, recovery_timeout=30):
        self.server = Server("--served-model-name", "stories", "--placement", "cpu:0-2,remote:2-5", "--publish", 0,
                             "--recovery-timeout", recovery_timeout, *LIVENESS)
        self.publish = self.server.published_port

    def tearDown(self):
        for w in self.workers:
            if w.poll() is None:
                w.kill()
                w.send_signal(signal.SIGCONT)
                w.wait()
        if self.server:
            self.server.stop()
            self.server.__exit__()

    def start_worker(self, standby=False):
        w = worker_process(self.publish, "2-5")
        self.workers.append(w)
        if standby:
            self.assertTrue(wait_for(lambda: len(self.health()[1]["standby"]) == 1, 30), self.health())
        else:
            self.assertTrue(wait_for(lambda: self.health()[0] == 200, 30), self.health())
        return w

    def health(self):
        status, _, body = self.server.request("GET", "/health")
        return status, json.loads(body)

    def long_streams(self, n):
        """n long streams; returns (threads, results) once each has some text."""
        return concurrent_streams(self.server.port, "/v1/completions", [long_body(i, True) for i in range(n)])

    def assert_unchanged(self, threads, results):
        """Every stream ended without an error, with the text of an undisturbed run."""
        for t in threads:
            t.join(60)
            self.assertFalse(t.is_alive(), "a stream hung")
        for i, (status, events) in enumerate(results):
            self.assertEqual(status, 200)
            self.assertEqual([ev for ev in events if "error" in ev], [])
            text = "".join(ev["choices"][0]["text"] for ev in events if "choices" in ev)
            self.assertEqual(text, self.long_reference[i % len(PROMPTS)], i)
            self.assertEqual([ev["choices"][0]["finish_reason"] for ev in events if ev.get("choices")][-1], "length")
        self.assertEqual(self.health()[0], 200)
        self.assertGreaterEqual(self.server.metric("orzo:recoveries_total"), 1)

    def assert_lost(self, threads, results):
        for t in threads:
            t.join(10)
            self.assertFalse(t.is_alive(), "a stream hung")
        for status, events in results:
            self.assertEqual(status, 200)
            text = "".join(ev["choices"][0]["text"] for ev in events if "choices" in ev)
            errors = [ev["error"] for ev in events if "error" in ev]
            self.assertEqual(len(errors), 1, events[-3:])
            self.assertEqual(errors[0]["code"], "worker_lost", errors[0])
            self.assertLess(len(text), len(self.long_reference[0]) * 2)
        status, body = self.health()
        self.assertEqual(status, 503)
        self.assertIn("the worker for layers 2-5 was lost", body["detail"])

    def test_waits_for_its_worker_then_serves_like_one_process(self):
        self.serve()
        status, body = self.health()
        self.assertEqual((status, body["status"]), (503, "unhealthy"))
        self.assertIn("waiting for a worker for layers 2-5", body["detail"])
        status, _, _ = self.server.post("/v1/completions", {"model": "stories", "prompt": "x", "max_tokens": 4})
        self.assertEqual(status, 503)
        self.start_worker()
        self.assertEqual(complete_all(self.server), self.reference)
        self.assertEqual([w["layers"] for w in self.health()[1]["workers"]], ["0-2", "2-5"])

    def test_a_killed_worker_with_a_standby_loses_no_stream(self):
        self.serve()
        worker = self.start_worker()
        self.start_worker(standby=True)
        threads, results = self.long_streams(4)
        worker.kill()
        self.assert_unchanged(threads, results)
        self.assertEqual(self.health()[1]["standby"], [])

    def test_a_killed_worker_replaced_within_the_timeout_loses_no_stream(self):
        self.serve()
        worker = self.start_worker()
        threads, results = self.long_streams(4)
        worker.kill()
        self.assertTrue(wait_for(lambda: self.health()[0] == 503, 5))
        self.start_worker()
        self.assert_unchanged(threads, results)

    def test_a_killed_worker_not_replaced_within_the_timeout_fails_its_streams(self):
        self.serve(recovery_timeout=1)
        worker = self.start_worker()
        threads, results = self.long_streams(4)
        worker.kill()
        self.assert_lost(threads, results)
        self.start_worker()
        self.assertEqual(complete_all(self.server), self.reference)

    def test_a_frozen_worker_is_lost_within_the_connection_timeout_and_replaced(self):
        self.serve()
        worker = self.start_worker()
        threads, results = self.long_streams(2)
        worker.send_signal(signal.SIGSTOP)
        stopped = time.time()
        self.assertTrue(wait_for(lambda: self.health()[0] == 503, 5))
        detected = time.time() - stopped
        self.assertLess(detected, 1.0 + 0.2 + 1.0)  # the timeout, a heartbeat, slack for a loaded machine
        worker.kill()
        self.start_worker()
        self.assert_unchanged(threads, results)

if __name__ == "__main__":
    unittest.main()
