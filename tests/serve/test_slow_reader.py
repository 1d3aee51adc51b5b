"""Flow control to slow readers: a stream whose client stops reading is paused once the
server holds --stream-buffer bytes of it (its request leaves the batch, its KV is freed), the
server's memory stays flat while it stalls, other streams go on, and it resumes unchanged when
the client reads again; a client that stays behind past --stalled-client-timeout has its
request cancelled."""
import json
import os
import socket
import threading
import time
import unittest

from harness import Server, stream_events, wait_for

BUFFER = 4096
STALLED_TIMEOUT = 4
BODY = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 400, "temperature": 0, "ignore_eos": True,
        "n": 4, "stream": True}


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def open_slow(port, body):
    """A streaming request on a socket whose receive buffer is as small as the kernel allows,
    so that a client that stops reading is soon felt by the server."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def read_stream(s):
    """The rest of a chunked SSE response: the text of each choice and their finish reasons."""
    f = s.makefile("rb")
    status = int(f.readline().split()[1])
    while f.readline() not in (b"\r\n", b""):
        pass
    texts, reasons = {}, {}
    for ev in stream_events(f):
        assert "error" not in ev, ev
        for c in ev.get("choices", []):
            texts[c["index"]] = texts.get(c["index"], "") + c["text"]
            if c["finish_reason"]:
                reasons[c["index"]] = c["finish_reason"]
    return status, texts, reasons


class SlowReader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--served-model-name", "stories", "--stream-buffer", BUFFER, "--stalled-client-timeout",
                            STALLED_TIMEOUT)
        status, _, out = cls.server.post("/v1/completions", dict(BODY, stream=False, n=1))
        assert status == 200, out
        cls.reference = out["choices"][0]["text"]

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def paused(self):
        return self.server.metric("orzo:num_requests_paused")

    def test_a_reader_that_stops_is_paused_then_resumes_unchanged(self):
        s = open_slow(self.server.port, BODY)
        self.assertTrue(wait_for(lambda: self.paused() == 4, 20), "the stalled stream's choices were not paused")
        self.assertEqual(self.server.metric("orzo:num_requests_running"), 0)
        # While it stalls: the server's memory stays flat, and another stream is served in full.
        before = rss_bytes(self.server.proc.pid)
        status, _, out = self.server.post("/v1/completions", dict(BODY, stream=False, n=1))
        self.assertEqual((status, out["choices"][0]["text"]), (200, self.reference))
        time.sleep(1)
        grown = rss_bytes(self.server.proc.pid) - before
        self.assertLess(grown, 4 << 20, f"RSS grew by {grown} bytes while a reader stalled")
        self.assertEqual(self.paused(), 4)
        # Reading again: the stream goes on where it stopped, every choice the undisturbed text.
        status, texts, reasons = read_stream(s)
        s.close()
        self.assertEqual(status, 200)
        self.assertEqual(texts, {i: self.reference for i in range(4)})
        self.assertEqual(reasons, {i: "length" for i in range(4)})
        self.assertTrue(wait_for(lambda: self.paused() == 0, 5))

    def test_a_reader_that_never_reads_again_is_cancelled(self):
        cancelled = self.server.metric("orzo:request_success_total", finished_reason="abort")
        s = open_slow(self.server.port, BODY)
        self.assertTrue(wait_for(lambda: self.paused() == 4, 20))
        stalled = time.time()
        self.assertTrue(wait_for(lambda: self.paused() == 0, STALLED_TIMEOUT + 5))
        self.assertGreaterEqual(time.time() - stalled, STALLED_TIMEOUT - 0.5)
        self.assertTrue(wait_for(lambda: self.server.metric("orzo:request_success_total", finished_reason="abort")
                                 >= cancelled + 4, 5))
        self.assertEqual(self.server.metric("orzo:kv_cache_usage_perc"), 0)
        s.close()


if __name__ == "__main__":
    unittest.main()
