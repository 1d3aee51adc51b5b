#!/usr/bin/env python3
"""Runs every code block of README.md as written, in order, from the source root (ctest
readme_test), so the README cannot rot.

  readme_test.py SOURCE_DIR BUILD_DIR     run the README's blocks against BUILD_DIR
  readme_test.py --self-test              check that the runner itself catches what it must

The README's commands name `build/cli/orzo`, so the blocks run only when BUILD_DIR is
SOURCE_DIR/build (what both set-up commands build); against any other build the test is
skipped (exit 77), saying so.

Every fenced block has a language. `sh` and `python` blocks run (bash -euo pipefail; python3),
each must exit 0. `cmake` and `cpp` blocks are excerpts of a file in the tree and must be
marked so; `text` blocks show output and do not run. An HTML comment on the lines right above
a block steers it:

  <!-- readme-test: server -->          the block starts a server that runs until stopped: it
                                        runs in the background until every port it names
                                        answers GET /health with 200, and is stopped at the
                                        next heading of its section's level or above
  <!-- readme-test: gpu -->             needs a GPU: skipped, saying so, where nvidia-smi
                                        lists none
  <!-- readme-test: ci -->              the command CI runs (.ci/run): checked to be what
                                        .ci/run runs and to parse, not run again from inside
                                        the suite it starts
  <!-- readme-test: expect TEXT -->     the block's standard output must contain TEXT
  <!-- readme-test: excerpt PATH -->    a cmake/cpp block: its code lines, comments aside,
                                        appear in PATH in the same order

Every `--preset NAME` the README names must be a preset of CMakePresets.json. The main job
fetches SmolLM2-135M-Instruct into models/ once; where models/ has no copy yet and the shared
test data ($ORZO_SHARED) has the same file, it is linked there first, so the suite does not
download 98 MB (fetch-smollm2.sh still checks its sha256).

The ports the README's blocks name (after --port, --publish, localhost:) are replaced by free
ones, the same everywhere, so the test never collides with a server already on them.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIPPED = 77
BLOCK_TIMEOUT = 600
SERVER_READY_TIMEOUT = 180

MARKER = re.compile(r"^<!--\s*readme-test:\s*(\w+)\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```(\S*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s")
PORT = re.compile(r"(?:--port|--publish)[ =](\d{2,5})\b|localhost:(\d{2,5})\b")
RUNS = {"sh": "sh", "bash": "sh", "python": "python"}
EXCERPTS = {"cmake": "#", "cpp": "//"}


class Failure(Exception):
    pass


class Block:
    def __init__(self, line, lang, text, markers, section_level):
        self.line, self.lang, self.text, self.markers = line, lang, text, markers
        self.section_level = section_level

    def marker(self, name):
        return [arg for kind, arg in self.markers if kind == name]


def parse(readme):
    """The README's blocks, and the headings between them as (line, level)."""
    blocks, headings = [], []
    lines = readme.splitlines()
    level, i = 0, 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            start = i + 1
            end = next((j for j in range(start, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                raise Failure(f"README.md:{i + 1}: a code block that never closes")
            markers, k = [], i - 1
            while k >= 0 and MARKER.match(lines[k].strip()):
                m = MARKER.match(lines[k].strip())
                markers.insert(0, (m.group(1), m.group(2)))
                k -= 1
            blocks.append(Block(i + 1, fence.group(1), "\n".join(lines[start:end]) + "\n", markers, level))
            i = end + 1
            continue
        heading = HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            headings.append((i + 1, level))
        i += 1
    return blocks, headings


def check_markers(block):
    known = {"server", "gpu", "ci", "expect", "excerpt"}
    for kind, _ in block.markers:
        if kind not in known:
            raise Failure(f"README.md:{block.line}: unknown marker 'readme-test: {kind}'")
    if not block.lang:
        raise Failure(f"README.md:{block.line}: a code block without a language (sh, python, cmake, cpp, text)")
    if block.lang in EXCERPTS and not block.marker("excerpt"):
        raise Failure(f"README.md:{block.line}: a {block.lang} block must say which file it quotes "
                      "(<!-- readme-test: excerpt PATH -->)")
    if block.lang not in RUNS and block.lang not in EXCERPTS and block.lang != "text":
        raise Failure(f"README.md:{block.line}: blocks in '{block.lang}' are neither run nor checked")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_map(blocks):
    ports = {}
    for b in blocks:
        if b.lang in RUNS:
            for m in PORT.finditer(b.text):
                ports.setdefault(m.group(1) or m.group(2), str(free_port()))
    return ports


def with_ports(text, ports):
    for old, new in ports.items():
        text = re.sub(rf"(?<![\d.]){old}(?!\d)", new, text)
    return text


def gpu_present():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


def command(block, text):
    if RUNS[block.lang] == "sh":
        return ["bash", "-euo", "pipefail", "-c", text]
    return [sys.executable, "-c", text]


def healthy(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Server:
    """A server block running in its own process group, with its output in a log."""

    def __init__(self, block, text, cwd, logdir):
        self.block = block
        self.log_path = os.path.join(logdir, f"server-{block.line}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(command(block, text), cwd=cwd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        ports = [m.group(1) for m in re.finditer(r"--port[ =](\d+)", text)]
        if not ports:
            self.stop()
            raise Failure(f"README.md:{block.line}: a server block names no --port to wait for")
        deadline = time.time() + SERVER_READY_TIMEOUT
        while not all(healthy(p) for p in ports):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise Failure(f"README.md:{block.line}: the server did not answer /health on port(s) "
                              f"{', '.join(ports)} (exit {self.proc.returncode}); its output:\n{self.output()}")
            time.sleep(0.2)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def check_ci_block(block, src):
    """The block holds the command .ci/run runs: CI runs it, so the suite only checks that."""
    ci = open(os.path.join(src, ".ci/run")).read()
    for cmd in (line.split("#")[0].strip() for line in block.text.splitlines()):
        if not cmd:
            continue
        if not re.search(rf"^(exec\s+)?{re.escape(cmd)}\s*$", ci, re.M):
            raise Failure(f"README.md:{block.line}: '{cmd}' is marked as what CI runs, but .ci/run does not run it")
        script = os.path.join(src, cmd.split()[0])
        r = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure(f"README.md:{block.line}: {cmd.split()[0]} does not parse: {r.stderr}")


def code_lines(text, comment):
    out = []
    for line in text.splitlines():
        code = line.split(comment)[0].strip() if comment == "#" else re.sub(r"\s*//.*$", "", line).strip()
        if code:
            out.append(re.sub(r"\s+", " ", code))
    return out


def check_excerpt(block, src):
    path = block.marker("excerpt")[0]
    full = os.path.join(src, path)
    if not os.path.isfile(full):
        raise Failure(f"README.md:{block.line}: quotes {path}, which does not exist")
    comment = EXCERPTS[block.lang]
    theirs = code_lines(open(full).read(), comment)
    at = 0
    for line in code_lines(block.text, comment):
        try:
            at = theirs.index(line, at) + 1
        except ValueError:
            raise Failure(f"README.md:{block.line}: '{line}' is not in {path} (or not in this order)") from None


def check_presets(readme, src):
    with open(os.path.join(src, "CMakePresets.json")) as f:
        presets = {p["name"] for p in json.load(f)["configurePresets"]}
    for name in sorted(set(re.findall(r"--preset[ =]([a-z][\w-]*)", readme))):
        if name not in presets:
            raise Failure(f"README.md names the preset '{name}', which CMakePresets.json does not have")


def seed_smollm2(src):
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    shared = os.environ.get("ORZO_SHARED")
    theirs = os.path.join(shared or "", "models/smollm2-135m-instruct", name)
    ours = os.path.join(src, "models", name)
    if shared and os.path.isfile(theirs) and not os.path.exists(ours):
        os.makedirs(os.path.dirname(ours), exist_ok=True)
        os.symlink(theirs, ours)
        print(f"models/{name}: linked to the shared copy {theirs}", flush=True)


def run(src, readme_path, logdir):
    readme = open(readme_path).read()
    blocks, headings = parse(readme)
    check_presets(readme, src)
    for b in blocks:
        check_markers(b)
    ports = port_map(blocks)
    if ports:
        print("ports: " + ", ".join(f"{a} -> {b}" for a, b in ports.items()), flush=True)
    has_gpu = gpu_present()
    servers = []  # (server, the line its section ends at)
    counts = {"ran": 0, "skipped": 0, "checked": 0}

    def stop_servers(before_line):
        for s, end in list(servers):
            if end is not None and end < before_line:
                s.stop()
                servers.remove((s, end))

    try:
        for b in blocks:
            stop_servers(b.line)
            where = f"README.md:{b.line}"
            if b.lang == "text":
                continue
            if b.lang in EXCERPTS:
                check_excerpt(b, src)
                print(f"{where}: {b.lang} excerpt of {b.marker('excerpt')[0]}: matches", flush=True)
                counts["checked"] += 1
                continue
            if b.marker("ci"):
                check_ci_block(b, src)
                print(f"{where}: run by CI itself (.ci/run), not again from inside the suite", flush=True)
                counts["checked"] += 1
                continue
            if b.marker("gpu") and not has_gpu:
                print(f"{where}: skipped: needs a GPU, and nvidia-smi lists none", flush=True)
                counts["skipped"] += 1
                continue
            text = with_ports(b.text, ports)
            started = time.time()
            if b.marker("server"):
                end = next((line for line, level in headings if line > b.line and level <= b.section_level), None)
                servers.append((Server(b, text, src, logdir), end))
                print(f"{where}: server up in {time.time() - started:.1f} s", flush=True)
                counts["ran"] += 1
                continue
            try:
                r = subprocess.run(command(b, text), cwd=src, stdin=subprocess.DEVNULL, capture_output=True,
                                   text=True, errors="replace", timeout=BLOCK_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise Failure(f"{where}: still running after {BLOCK_TIMEOUT} s") from None
            if r.returncode != 0:
                raise Failure(f"{where}: exit {r.returncode}\n--- the block:\n{text}--- stdout:\n{r.stdout[-4000:]}"
                              f"--- stderr:\n{r.stderr[-4000:]}")
            for want in b.marker("expect"):
                if want not in r.stdout:
                    raise Failure(f"{where}: its output does not contain '{want}':\n{r.stdout[-4000:]}")
            print(f"{where}: ran in {time.time() - started:.1f} s", flush=True)
            counts["ran"] += 1
    finally:
        for s, _ in servers:
            s.stop()
    return counts


SELF_TEST_CASES = {
    # name: (README text, whether the run must pass)
    "a block that passes": ("```sh\ntrue\n```\n", True),
    "a failing command": ("```sh\ntrue\nfalse\n```\n", False),
    "a failing python block": ("```python\nraise SystemExit(3)\n```\n", False),
    "a block without a language": ("```\ntrue\n```\n", False),
    "a language neither run nor checked": ("```ruby\nputs 1\n```\n", False),
    "output that is expected": ("<!-- readme-test: expect hello -->\n```sh\necho hello world\n```\n", True),
    "output that is missing": ("<!-- readme-test: expect goodbye -->\n```sh\necho hello\n```\n", False),
    "a GPU block without a GPU": ("<!-- readme-test: gpu -->\n```sh\nnvidia-smi -L\n```\n", True),
    "an unknown marker": ("<!-- readme-test: maybe -->\n```sh\ntrue\n```\n", False),
    "an excerpt that matches": ("<!-- readme-test: excerpt app.cpp -->\n```cpp\nint a = 1;  // one\nint b = 2;\n```\n",
                                True),
    "an excerpt out of order": ("<!-- readme-test: excerpt app.cpp -->\n```cpp\nint b = 2;\nint a = 1;\n```\n", False),
    "an excerpt without its file": ("```cpp\nint a = 1;\n```\n", False),
    "what CI runs": ("<!-- readme-test: ci -->\n```sh\nscripts/all.sh   # every test\n```\n", True),
    "a command CI does not run": ("<!-- readme-test: ci -->\n```sh\nscripts/other.sh\n```\n", False),
    # A server for its section: the next block reaches it on the README's port (replaced by a
    # free one), and after the section's end nothing answers there any more.
    "a server for its section": (
        "## Serving\n<!-- readme-test: server -->\n```sh\npython3 health.py --port 8080\n```\n"
        "### Asking\n```sh\ncurl -sf localhost:8080/health\n```\n"
        "## After\n```sh\n! curl -s localhost:8080/health\n```\n", True),
    "a preset that exists": ("```sh\necho cmake --preset ci\n```\n", True),
    "a preset that does not": ("Build with `cmake --preset fast`.\n", False),
    "a server that never gets healthy": ("<!-- readme-test: server -->\n```sh\nexit 0 --port 8080\n```\n", False),
}

HEALTH_SERVER = """import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
"""


def self_test():
    failed = []
    for name, (text, should_pass) in SELF_TEST_CASES.items():
        with tempfile.TemporaryDirectory() as src:
            os.makedirs(os.path.join(src, ".ci"))
            os.makedirs(os.path.join(src, "scripts"))
            with open(os.path.join(src, ".ci/run"), "w") as f:
                f.write("#!/usr/bin/env bash\nexec scripts/all.sh\n")
            with open(os.path.join(src, "scripts/all.sh"), "w") as f:
                f.write("#!/usr/bin/env bash\nexit 0\n")
            with open(os.path.join(src, "app.cpp"), "w") as f:
                f.write("// app\nint a = 1;\nint c = 3;\nint b = 2;  // two\n")
            with open(os.path.join(src, "CMakePresets.json"), "w") as f:
                json.dump({"configurePresets": [{"name": "ci"}]}, f)
            with open(os.path.join(src, "health.py"), "w") as f:
                f.write(HEALTH_SERVER)
            with open(os.path.join(src, "README.md"), "w") as f:
                f.write(text)
            try:
                run(src, os.path.join(src, "README.md"), src)
                passed = True
            except Failure as e:
                passed = False
                print(f"  ({name}: {str(e).splitlines()[0]})")
            if passed != should_pass:
                failed.append(name)
            print(f"{'ok' if passed == should_pass else 'WRONG'}: {name}: the run {'passed' if passed else 'failed'}",
                  flush=True)
    if failed:
        print(f"the runner got {len(failed)} case(s) wrong: {', '.join(failed)}")
        return 1
    print(f"{len(SELF_TEST_CASES)} passed, 0 failed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src, build = (os.path.realpath(p) for p in argv[1:])
    if build != os.path.join(src, "build"):
        print(f"skipped: the README's commands name build/, and this suite's build is {build}")
        return SKIPPED
    seed_smollm2(src)
    with tempfile.TemporaryDirectory(prefix="readme-test-") as logdir:
        try:
            counts = run(src, os.path.join(src, "README.md"), logdir)
        except Failure as e:
            print(f"FAILED: {e}")
            return 1
    print(f"README.md: {counts['ran']} blocks ran, {counts['checked']} checked, {counts['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
