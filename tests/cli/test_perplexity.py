"""`orzo perplexity` on stories260K over an English text: one window over the whole text equals
the bare forward pass (tests/support/score_tokens); sliding windows equal Hugging Face's
windowing loop written here in Python over the scores a real `orzo serve` gives for each
window; a progress bar on a terminal; bad input is one line and a non-zero exit."""
import json
import math
import os
import pty
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../serve"))
from harness import STORIES, Server  # noqa: E402
from hf_windows import hf_windowed_perplexity  # noqa: E402

ORZO = os.environ.get("ORZO", "orzo")
TEXT = os.path.join(HERE, "../fixtures/text/english.txt")
LONG = ["--max-model-len", "6000"]  # the text is ~5,200 tokens of stories260K's vocabulary


def orzo_perplexity(*args):
    run = subprocess.run([ORZO, "perplexity", "-m", STORIES, "-f", TEXT, "-t", "1", *args], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    m = re.match(r"perplexity ([0-9.]+) over (\d+) tokens \((\d+) windows", run.stdout)
    assert m, run.stdout
    return float(m.group(1)), int(m.group(2)), int(m.group(3))


class Perplexity(unittest.TestCase):
    def test_one_window_is_the_bare_forward_pass(self):
        bare = json.loads(subprocess.run([os.environ["SCORE_TOKENS"], STORIES, TEXT], check=True, capture_output=True,
                                         text=True).stdout)
        want = math.exp(-sum(bare["logprobs"]) / len(bare["logprobs"]))
        n = len(bare["ids"])
        ppl, scored, windows = orzo_perplexity(*LONG, "--ctx", str(n))
        self.assertEqual((scored, windows), (n - 1, 1))
        self.assertLess(abs(ppl / want - 1), 1e-5, (ppl, want))

    def test_sliding_windows_follow_hugging_faces_loop(self):
        server = Server("--max-model-len", "6000")
        try:
            with open(TEXT) as f:
                status, _, out = server.post("/tokenize", {"prompt": f.read()})
            self.assertEqual(status, 200)
            ids = out["tokens"]

            def score_window(window):
                status, _, out = server.post("/v1/completions", {"prompt": window, "echo": True, "logprobs": 0,
                                                                 "max_tokens": 0})
                self.assertEqual(status, 200, out)
                return out["choices"][0]["logprobs"]["token_logprobs"][1:]

            for ctx, stride in ((256, 256), (256, 64), (512, 200), (6000, 6000)):
                with self.subTest(ctx=ctx, stride=stride):
                    want, count = hf_windowed_perplexity(ids, ctx, stride, score_window)
                    ppl, scored, _ = orzo_perplexity(*LONG, "--ctx", str(ctx), "--stride", str(stride))
                    self.assertEqual(scored, count)
                    self.assertLess(abs(ppl / want - 1), 1e-5, (ppl, want))
        finally:
            self.assertEqual(server.stop(), 0)

    def test_a_terminal_gets_a_progress_bar(self):
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(ORZO, [ORZO, "perplexity", "-m", STORIES, "-f", TEXT, "-t", "1", "--ctx", "64"])
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, out)
        text = out.decode(errors="replace")
        self.assertRegex(text, r"\[#+\] \d+/\d+ tokens")
        self.assertIn("perplexity ", text)

    def test_bad_input_is_one_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as one_token:
            one_token.write("")
            one_token.flush()
            for args, says in [(["-f", "/nonexistent.txt"], "cannot open"),
                               (["-f", TEXT, "--ctx", "64", "--stride", "65"], "stride"),
                               (["-f", TEXT, "--ctx", "100000"], "context length"),
                               (["-f", TEXT, "--ctx", "1"], "ctx"),
                               (["-f", one_token.name, "--no-special"], "at least 2"),
                               ([], "--file")]:
                with self.subTest(args=args):
                    run = subprocess.run([ORZO, "perplexity", "-m", STORIES, *args], capture_output=True, text=True,
                                         timeout=60)
                    self.assertNotEqual(run.returncode, 0)
                    lines = [line for line in run.stderr.splitlines() if line.strip()]
                    self.assertEqual(len(lines), 1, run.stderr)
                    self.assertIn(says, lines[0])
                    self.assertEqual(run.stdout, "")


if __name__ == "__main__":
    unittest.main()
