"""A real `orzo serve` process on 127.0.0.1 for the end-to-end tests, and small HTTP helpers.

The server is started with --port 0; its stderr says which port it got. Tests find the
binary and ../shared through the environment (ORZO, ORZO_SHARED) that ctest sets."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ORZO = os.environ.get("ORZO", "orzo")
SHARED = os.environ.get("ORZO_SHARED", os.path.join(os.path.dirname(__file__), "../../../shared"))
STORIES = os.path.join(SHARED, "models/stories260K/stories260K.gguf")
CHAT_TEMPLATE = os.path.join(os.path.dirname(__file__), "stories_chat.jinja")


class Server:
    def __init__(self, *args, model=STORIES, ready_timeout=60):
        cmd = [ORZO, "serve", "-m", model, "--port", "0", "-t", "1", *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.log = []
        self.log_times = []  # when each line of the log was read (time.time())
        self.port = None
        self.published_port = None  # with --publish 0: where the batcher is published
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        deadline = time.time() + ready_timeout
        while not self._ready.is_set():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("orzo serve did not get ready:\n" + "".join(self.log))
            self._ready.wait(0.05)
        self.base = f"http://127.0.0.1:{self.port}"

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode(errors="replace")
            self.log_times.append(time.time())
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            m = re.search(r"batcher published for actor clients on \S+:(\d+)", line)
            if m:
                self.published_port = int(m.group(1))
            if "ready, serving" in line:
                self._ready.set()

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request on a fresh connection: (status, headers dict, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else (body if isinstance(body, str) else json.dumps(body)).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        conn.close()
        return out

    def post(self, path, body, **kw):
        status, headers, data = self.request("POST", path, body, **kw)
        return status, headers, json.loads(data) if data else None

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200, data
        values = {}
        for line in data.decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
        return values

    def metric(self, name, **labels):
        """The value of one series, matched by name and the labels given."""
        for series, value in self.metrics().items():
            base = series.split("{", 1)[0]
            if base == name and all(f'{k}="{v}"' in series for k, v in labels.items()):
                return value
        raise KeyError(name)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        self._close_pipes()
        return rc

    def _close_pipes(self):
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe and not self._reader.is_alive():
                pipe.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            self._reader.join(5)
        self._close_pipes()


class LoggedProcess(subprocess.Popen):
    """A process (an `orzo worker`, say) whose output goes to a temporary file, so that a
    failing test can print it."""

    def __init__(self, cmd):
        self.log_file = tempfile.TemporaryFile()
        super().__init__(list(map(str, cmd)), stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT)

    def log(self):
        self.log_file.seek(0)
        return self.log_file.read().decode(errors="replace")


class PrintsLogsOnFailure(unittest.TestCase):
    """A test case that, when a test fails, prints the log of its `self.server` and of each
    of its `self.workers` (LoggedProcess): ctest shows a failing test's output, and no
    other record of those processes outlives the run."""

    def run(self, result=None):
        result = result or self.defaultTestResult()
        failed = len(result.failures) + len(result.errors)
        super().run(result)
        shown = len(result.failures) + len(result.errors) > failed
        server = getattr(self, "server", None)
        if shown and server:
            sys.stderr.write(f"--- {self.id()}: orzo serve's log\n" + "".join(server.log))
        for i, w in enumerate(getattr(self, "workers", [])):
            if shown:
                sys.stderr.write(f"--- {self.id()}: worker {i} (exit {w.poll()})\n" + w.log())
            w.log_file.close()
        return result


def stream_events(sock_file):
    """Yields the parsed JSON of each SSE data line of a chunked response body read from a
    raw socket file; stops after [DONE]."""
    while True:
        size_line = sock_file.readline()
        if not size_line:
            return
        size = int(size_line.strip(), 16)
        if size == 0:
            return
        chunk = sock_file.read(size)
        sock_file.read(2)
        for line in chunk.decode().split("\n"):
            if line.startswith("data: "):
                payload = line[6:]
                if payload == "[DONE]":
                    return
                yield json.loads(payload)


def open_stream(port, path, body, headers=None):
    """Sends a streaming request on a raw socket and reads past the response headers.
    Returns (socket, status, file for the body)."""
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    f = s.makefile("rb")
    status = int(f.readline().split()[1])
    while f.readline() not in (b"\r\n", b""):
        pass
    return s, status, f


def concurrent_streams(port, path, bodies, timeout=30):
    """Opens one stream per body, each read to its end on a thread of its own; returns once
    each has an event (asserting so within `timeout` s) with (threads, results), results[i]
    becoming (status, events) when stream i ends."""
    results = [None] * len(bodies)
    started = [threading.Event() for _ in bodies]

    def run(i):
        s, status, f = open_stream(port, path, bodies[i])
        events = []
        for ev in stream_events(f):
            events.append(ev)
            started[i].set()
        results[i] = (status, events)
        started[i].set()
        s.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for e in started:
        assert e.wait(timeout), "a stream sent nothing"
    return threads, results


def wait_for(predicate, timeout, interval=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
