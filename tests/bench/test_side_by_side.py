"""bench/side_by_side.py, so that the harness cannot rot between the runs that use it.

One pair on stories260K without a peer: every workload comes back with a positive figure and
a positive ceiling measured in the same run (one repetition each, to stay fast). And one pair
with stand-ins for llama-bench and llama-batched-bench that print what those print (llama-
bench's JSON array, llama-batched-bench's JSONL lines), so the reading of the peer's output,
the ratios and the table are checked too, without building llama.cpp.

Needs stories260K in ../shared; exits 77, which ctest reports as a skip, without it.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "side_by_side.py")
BUILD = os.environ["ORZO_BUILD"]
STORIES = os.path.join(os.environ["ORZO_SHARED"], "models", "stories260K", "stories260K.gguf")
WORKLOADS = {"prefill 512", "decode, 1 sequence (prompt 128)", "decode, 32 sequences (prompt 128)"}

if not os.path.exists(STORIES):
    print(f"skipped: {STORIES} is absent")
    sys.exit(77)

# The stand-ins print fixed figures and note their arguments, which the test reads back.
LLAMA_BENCH = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
case " $* " in
  *" -p 512 "*) ts=111.5 ;;
  *) ts=22.25 ;;
esac
echo "llama-bench's own messages go to stderr" >&2
cat <<EOF
[
  {"build_commit": "abc1234", "build_number": 42, "cpu_info": "stand-in", "backends": "CPU",
   "model_type": "llama ?B F32", "n_threads": 2, "type_k": "f16", "type_v": "f16", "flash_attn": -1,
   "n_prompt": 0, "n_gen": 0, "n_depth": 0, "avg_ts": $ts, "stddev_ts": 0.0, "samples_ts": [$ts]}
]
EOF
"""
LLAMA_BATCHED_BENCH = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
echo "main: a log line on stdout"
echo '{"n_kv_max": 5120, "pp": 128, "tg": 32, "pl": 16, "speed_pp": 1.0, "speed_tg": 1.0}'
echo '{"n_kv_max": 5120, "pp": 128, "tg": 32, "pl": 32, "speed_pp": 900.0, "speed_tg": 333.0}'
"""


class SideBySide(unittest.TestCase):
    def harness(self, folder, *extra):
        out = os.path.join(folder, "record.json")
        p = subprocess.run([sys.executable, SCRIPT, "--orzo", BUILD, "--models", STORIES, "--pairs", "1",
                            "--quiet-wait", "0", "--out", out, *extra], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            return json.load(f), p.stdout

    def test_orzo_alone_every_workload_and_its_ceiling(self):
        with tempfile.TemporaryDirectory() as tmp:
            record, table = self.harness(tmp, "--ceiling-reps", "1")
        self.assertEqual({r["workload"] for r in record["rows"]}, WORKLOADS)
        for r in record["rows"]:
            self.assertEqual(len(r["orzo"]), 1, r["workload"])
            self.assertGreater(r["orzo_median"], 0, r["workload"])
            self.assertGreater(r["ceiling"]["tokens_per_s"], 0, r["workload"])
            self.assertEqual(r["peer"], [])
            self.assertIn(r["workload"], table)
        self.assertEqual({r["ceiling"]["kind"] for r in record["rows"]}, {"sgemm", "read bandwidth"})
        self.assertIsNone(record["peer"])
        self.assertTrue(record["orzo"]["cpu_isa"])
        self.assertTrue(record["cpu"]["model"])
        with open("/proc/cpuinfo") as f:
            x86 = "cpu family" in f.read()
        if x86:  # the name alone cannot tell a Zen 4 from a Zen 5
            self.assertIsInstance(record["cpu"]["family"], int)
            self.assertIn(f"(family {record['cpu']['family']} model {record['cpu']['model_number']})", table)
        self.assertNotIn("llama.cpp", table.split("\n\n")[1].splitlines()[0])

    def test_a_peer_is_read_and_compared(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in (("llama-bench", LLAMA_BENCH), ("llama-batched-bench", LLAMA_BATCHED_BENCH)):
                path = os.path.join(tmp, name)
                with open(path, "w") as f:
                    f.write(text)
                os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
            record, table = self.harness(tmp, "--peer", tmp, "--ceiling-reps", "0")
            with open(os.path.join(tmp, "calls")) as f:
                calls = f.read().splitlines()
        rows = {r["workload"]: r for r in record["rows"]}
        self.assertEqual(set(rows), WORKLOADS)
        self.assertEqual(rows["prefill 512"]["peer"], [111.5])
        self.assertEqual(rows["decode, 1 sequence (prompt 128)"]["peer"], [22.25])
        self.assertEqual(rows["decode, 32 sequences (prompt 128)"]["peer"], [333.0])
        for r in rows.values():
            self.assertAlmostEqual(r["ratio"], r["orzo_median"] / r["peer_median"])
            self.assertNotIn("ceiling", r)
        self.assertEqual(record["peer"]["build"], "b42-abc1234")
        # --help (is there a -d?), then one call per workload; the stand-in has no -d in its help.
        self.assertEqual(calls[0], "--help")
        self.assertEqual(len(calls), 4)
        self.assertIn("-npl 32", calls[3])
        self.assertIn("has no -d", rows["decode, 1 sequence (prompt 128)"]["peer_note"])
        self.assertIn("| orzo / llama.cpp |", table)


if __name__ == "__main__":
    unittest.main()
