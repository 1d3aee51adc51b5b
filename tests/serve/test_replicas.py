"""`orzo serve --placement remote --replicas 2` with each replica a whole model in an `orzo worker`
process of its own: /health and /metrics per replica, requests spread over both, and when one
worker is killed (kill -9) under 64 streams, its streams go on in the other replica, each ending
once, without an error, with the text of an undisturbed run."""
import json
import signal
import unittest

from harness import PrintsLogsOnFailure, Server, concurrent_streams, wait_for
from test_remote_worker import LIVENESS, PROMPTS, long_body, long_references, worker_process

STREAMS = 64
TOKENS = 400  # long enough that the kill lands mid-stream on a fast machine


class Replicas(PrintsLogsOnFailure):
    @classmethod
    def setUpClass(cls):
        with Server("--served-model-name", "stories") as single:
            cls.reference = long_references(single, TOKENS)
            single.stop()

    def setUp(self):
        self.server = Server("--served-model-name", "stories", "--placement", "remote", "--replicas", 2, "--publish", 0,
                             *LIVENESS)
        self.publish = self.server.published_port
        self.workers = []

    def tearDown(self):
        for w in self.workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        self.server.stop()
        self.server.__exit__()

    def health(self):
        status, _, body = self.server.request("GET", "/health")
        return status, json.loads(body)

    def start_worker(self, replica):
        """A whole-model worker; joins fill the replicas in turn, so this one serves `replica`."""
        w = worker_process(self.publish, "0-5")
        self.workers.append(w)
        self.assertTrue(wait_for(lambda: self.health()[1]["replicas"][replica]["status"] == "ok", 30), self.health())
        return w

    def test_health_and_metrics_name_each_replica(self):
        status, body = self.health()
        self.assertEqual(status, 503)
        self.assertEqual([r["status"] for r in body["replicas"]], ["unhealthy", "unhealthy"])
        self.assertIn("replica 1: waiting for a worker for layers 0-5", body["detail"])
        self.start_worker(0)
        status, body = self.health()
        self.assertEqual(status, 200)
        self.assertEqual([r["status"] for r in body["replicas"]], ["ok", "unhealthy"])
        self.assertEqual([(w["replica"], w["layers"]) for w in body["workers"]], [(0, "0-5")])
        self.start_worker(1)
        self.assertEqual([(w["replica"], w["layers"]) for w in self.health()[1]["workers"]], [(0, "0-5"), (1, "0-5")])
        self.assertEqual(self.server.metric("orzo:replica_healthy", replica=1), 1)

    def test_killing_a_replica_under_64_streams_loses_no_stream(self):
        first = self.start_worker(0)
        self.start_worker(1)
        threads, results = concurrent_streams(self.server.port, "/v1/completions",
                                              [long_body(i, True, TOKENS) for i in range(STREAMS)], timeout=60)
        routed = [self.server.metric("orzo:replica_requests_routed_total", replica=r) for r in (0, 1)]
        self.assertGreater(min(routed), STREAMS / 4, routed)  # both take a share
        first.send_signal(signal.SIGKILL)
        for t in threads:
            t.join(120)
            self.assertFalse(t.is_alive(), "a stream hung")
        for i, (status, events) in enumerate(results):
            self.assertEqual(status, 200)
            self.assertEqual([ev for ev in events if "error" in ev], [], i)
            text = "".join(ev["choices"][0]["text"] for ev in events if "choices" in ev)
            self.assertEqual(text, self.reference[i % len(PROMPTS)], i)
            finishes = [ev["choices"][0]["finish_reason"] for ev in events if ev.get("choices")]
            self.assertEqual([f for f in finishes if f], ["length"], i)
        moved = self.server.metric("orzo:requests_moved_total")
        self.assertGreater(moved, 0)
        self.assertEqual(self.server.metric("orzo:replica_healthy", replica=0), 0)
        self.assertEqual(self.server.metric("orzo:kv_cache_usage_perc"), 0)
        status, body = self.health()
        self.assertEqual(status, 200)  # replica 1 serves
        self.assertIn("the worker for layers 0-5 was lost", body["replicas"][0]["detail"])
        # A new worker serves replica 0 again.
        self.start_worker(0)
        print(f"\n  {int(moved)} of {STREAMS} streams moved to replica 1", end=" ")


if __name__ == "__main__":
    unittest.main()
