"""The ports a server started by a bench harness picked (`--port 0`, `--publish 0`), read from
the log file its stderr goes to."""
import os
import re
import time

LISTENING = r"listening on http://[^:]+:(\d+)"
PUBLISHED = r"batcher published for actor clients on \S+:(\d+)"


def head(log):
    """The start of the log, where the ports are printed."""
    # pread: seeking the log would move the server's own write offset (one open file).
    return os.pread(log.fileno(), 16384, 0).decode(errors="replace")


def printed_ports(proc, log, *patterns, timeout=120):
    """The port each pattern finds in the log, once every one has been printed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = [re.search(p, head(log)) for p in patterns]
        if all(found):
            return [int(m.group(1)) for m in found]
        time.sleep(0.1)
    raise RuntimeError("the server printed no port:\n" + head(log)[-2000:])
