#!/usr/bin/env python3
"""orzo beside llama.cpp on the same GGUF files, every figure beside its ceiling, in one run.

    python3 bench/side_by_side.py --orzo BUILD [--peer LLAMA_BIN] [--pairs 3] --models A.gguf [B.gguf ...]
        [--out bench/results/side-by-side.json] [--threads N] [--orzo-flags "--cpu-isa avx2"] [--only TEXT]

BUILD is an orzo build folder (BUILD/cli/orzo, BUILD/bench/ceilings_bench); LLAMA_BIN holds
llama-bench and llama-batched-bench (bench/peer/build_llamacpp.sh prints it). Without --peer,
orzo's figures alone. For each file, three workloads, the two programs alternating for PAIRS
pairs, so that this VM's drift falls on both; each side's median and the ratio orzo / llama.cpp:

- prefill 512: one sequence, a 512-token prompt in one batch. orzo `bench --batch 1 --prompt
  512 --gen 0` (prefill_tps); `llama-bench -p 512 -n 0` (pp512).
- decode, 1 sequence: 64 tokens after a 128-token prompt. orzo `--batch 1 --prompt 128 --gen 64`
  (decode_tps); `llama-bench -p 0 -n 64 -d 128` (tg64 at depth 128).
- decode, 32 sequences: 32 tokens each after 32 separate 128-token prompts, tokens/s of all
  sequences together. orzo `--batch 32 --prompt 128 --gen 32` (decode_tps);
  `llama-batched-bench -npp 128 -ntg 32 -npl 32 -c 5120` (S_TG, its speed_tg in JSONL).

Both get the same threads (--threads, default one per core) and one timed run per call after a
warm-up (llama-bench -r 1, as orzo bench times one run); llama.cpp keeps its own defaults
otherwise (F16 KV cache, flash attention "auto", its repacking of weights), which the record
states. The ceilings are measured right before each workload's pairs by BUILD/bench/
ceilings_bench (best of --ceiling-reps) and converted as run_cpu.py does: 1-sequence decode
against the read bandwidth / the bytes a token reads; prefill and batched decode against the
sgemm rate / 2 x the parameters a token multiplies. Bytes and parameters are orzo's count for
the model, so the same ceiling stands over both programs. Decode also gets the roofline at the
read rate of the model's own mapped pages (orzo bench measures it; llama.cpp reads the same
pages where it maps the file rather than repacking the weights), which on this VM can differ
from a fresh buffer's.

A quiet-CPU gate before each pair and each ceiling: the share of all CPUs busy over one second
(/proc/stat), while this script sleeps, must be at most --quiet-busy, waiting up to --quiet-wait
seconds. Not the 1-minute load average: after each run of this harness it stays above 0.5 for a
minute. A gate only sees the start, so each run is also watched: the CPU time others used while
it ran (all CPUs' busy time less this script's and its children's) over the time all CPUs had.
A pair or ceiling during which others took more than --quiet-busy is done again, up to
--retries times, and marked * in the table if it never ran alone. Every wait and share is in the
record. --quiet-wait 0: no gate and no retries.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_models import ROOT
from machine import cpu_record, describe
from run_cpu import ceilings, decode_bytes_per_token, flops_per_token

def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"side_by_side.py: `{' '.join(cmd)}` exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p.stdout


def cpu_busy(seconds=1.0):
    """The share of all CPUs' time not idle (nor waiting for I/O) over `seconds`."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
        return sum(v), v[3] + v[4]
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def wait_quiet(busy_max, wait_max):
    if wait_max <= 0:
        return None
    start = time.monotonic()
    while True:
        busy = cpu_busy()
        waited = time.monotonic() - start
        if busy <= busy_max or waited >= wait_max:
            with open("/proc/loadavg") as f:
                load = float(f.read().split()[0])
            return {"waited_s": round(waited, 1), "busy": round(busy, 3), "quiet": busy <= busy_max,
                    "loadavg_1min": load}


def cpu_seconds():
    """All CPUs' time so far and the busy part of it, and this process's and its children's."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    hz = os.sysconf("SC_CLK_TCK")
    t = os.times()
    return sum(v) / hz, (sum(v) - v[3] - v[4]) / hz, t.user + t.system + t.children_user + t.children_system


def watched(fn):
    """fn()'s result and the share of all CPUs that other processes used while it ran."""
    total0, busy0, ours0 = cpu_seconds()
    result = fn()
    total1, busy1, ours1 = cpu_seconds()
    return result, max(0.0, (busy1 - busy0) - (ours1 - ours0)) / max(1e-9, total1 - total0)


def quietly(a, fn):
    """fn() after the quiet gate; again, up to --retries times, while others used more than
    --quiet-busy of the CPU during it. Returns its last result and every try's gate and share."""
    tries = []
    for _ in range(1 + (a.retries if a.quiet_wait > 0 else 0)):
        gate = wait_quiet(a.quiet_busy, a.quiet_wait)
        result, others = watched(fn)
        tries.append({"gate": gate, "others_share": round(others, 3)})
        if a.quiet_wait <= 0 or others <= a.quiet_busy:
            break
    return result, {"tries": tries, "alone": a.quiet_wait > 0 and tries[-1]["others_share"] <= a.quiet_busy}


def git_state(source):
    """The commit of an orzo or llama.cpp source tree, '+dirty' when tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", source, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", source, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def cmake_cache(build):
    values = {}
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                if "=" in line and ":" in line.split("=", 1)[0] and not line.startswith(("#", "//")):
                    key, value = line.rstrip("\n").split("=", 1)
                    values[key.split(":", 1)[0]] = value
    except OSError:
        pass
    return values


def stamp(path):
    st = os.stat(path)
    return [st.st_size, st.st_mtime]


def orzo_record(build):
    source = cmake_cache(build).get("CMAKE_HOME_DIRECTORY", ROOT)
    return {"build": os.path.abspath(build), "binary": os.path.abspath(os.path.join(build, "cli", "orzo")),
            "source": source, "commit": git_state(source)}


def peer_record(bin_dir):
    """What llama.cpp this is: orzo-peer.json where build_llamacpp.sh built it, else its CMakeCache."""
    rec = {"bin": os.path.abspath(bin_dir)}
    info = os.path.join(bin_dir, "orzo-peer.json")
    if os.path.exists(info):
        with open(info) as f:
            rec.update(json.load(f))
        return rec
    cache = cmake_cache(os.path.dirname(os.path.abspath(bin_dir)))
    rec["cmake_cache"] = {k: v for k, v in cache.items()
                          if k.startswith(("GGML_NATIVE", "GGML_AVX", "GGML_FMA", "GGML_F16C", "GGML_BMI2", "GGML_AMX"))
                          or k in ("CMAKE_BUILD_TYPE", "BUILD_SHARED_LIBS", "GGML_BLAS", "GGML_OPENMP")}
    if cache.get("GGML_NATIVE") == "ON":
        rec["isa"] = "native"
    elif cache.get("GGML_AVX2") == "ON" and cache.get("GGML_AVX512") != "ON":
        rec["isa"] = "avx2"
    else:
        rec["isa"] = "unknown" if not cache else "custom"
    if cache.get("CMAKE_HOME_DIRECTORY"):
        rec["source"] = cache["CMAKE_HOME_DIRECTORY"]
        rec["llama_cpp_commit"] = git_state(cache["CMAKE_HOME_DIRECTORY"])
    return rec


# The settings llama-bench reports that decide what it ran, kept from its first row.
LLAMA_BENCH_KEPT = ("build_commit", "build_number", "cpu_info", "backends", "model_type", "model_size",
                    "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "flash_attn",
                    "repack", "load_mode", "n_prompt", "n_gen", "n_depth")


def read_llama_bench(out):
    rows = json.loads(out)
    if len(rows) != 1:
        sys.exit(f"side_by_side.py: llama-bench printed {len(rows)} rows, expected one")
    return rows[0]["avg_ts"], {k: rows[0].get(k) for k in LLAMA_BENCH_KEPT}


def read_batched_bench(out, pp, tg, pl):
    # JSONL: one object per (pp, tg, pl) it ran; a combination that does not fit in -c is
    # skipped without a word, so a missing row is an error here.
    for line in out.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if (row.get("pp"), row.get("tg"), row.get("pl")) == (pp, tg, pl):
                return row["speed_tg"], row
    sys.exit(f"side_by_side.py: llama-batched-bench printed no row for pp {pp}, tg {tg}, pl {pl}")


def workloads(threads, has_depth):
    t = str(threads)
    decode1_peer = ["-p", "0", "-n", "64"] + (["-d", "128"] if has_depth else [])
    return [
        {"name": "prefill 512", "figure": "prefill_tps", "ceiling": "sgemm", "lm_head_share": 1.0 / 512,
         "orzo": ["--batch", "1", "--prompt", "512", "--gen", "0"],
         "peer": ("llama-bench", ["-p", "512", "-n", "0", "-r", "1", "-t", t, "-o", "json"]),
         "read": read_llama_bench},
        {"name": "decode, 1 sequence (prompt 128)", "figure": "decode_tps", "ceiling": "bandwidth",
         "orzo": ["--batch", "1", "--prompt", "128", "--gen", "64"],
         "peer": ("llama-bench", decode1_peer + ["-r", "1", "-t", t, "-o", "json"]),
         "peer_note": None if has_depth else "this llama-bench has no -d: tg64 from an empty context",
         "read": read_llama_bench},
        {"name": "decode, 32 sequences (prompt 128)", "figure": "decode_tps", "ceiling": "sgemm", "lm_head_share": 1.0,
         "orzo": ["--batch", "32", "--prompt", "128", "--gen", "32"],
         # -c: 32 x (128 + 32) cells, what 32 separate prompts and their tokens need.
         "peer": ("llama-batched-bench", ["-c", str(32 * (128 + 32)), "-b", "2048", "-ub", "512", "-npp", "128",
                                          "-ntg", "32", "-npl", "32", "-t", t, "--output-format", "jsonl"]),
         "read": lambda out: read_batched_bench(out, 128, 32, 32)},
    ]


def ceiling_of(kind, rate, orzo_runs, lm_head_share=None):
    """A workload's ceiling in tokens/s, from the ceiling's rate and orzo's account of the model."""
    r = orzo_runs[0]
    if kind == "bandwidth":
        per_token = decode_bytes_per_token(r)
        mapped = statistics.median(x["weight_read_bytes_per_s"] for x in orzo_runs)
        return {"kind": "read bandwidth", "rate_bytes_per_s": rate, "bytes_per_token": per_token,
                "tokens_per_s": rate / per_token, "mapped_weights_bytes_per_s": mapped,
                "mapped_weights_tokens_per_s": mapped / per_token}
    per_token = flops_per_token(r, lm_head_share)
    return {"kind": "sgemm", "rate_flops": rate, "flops_per_token": per_token, "tokens_per_s": rate / per_token}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orzo", required=True, help="an orzo build folder (cli/orzo, bench/ceilings_bench)")
    ap.add_argument("--peer", help="the folder holding llama-bench and llama-batched-bench")
    ap.add_argument("--models", nargs="+", required=True, help="GGUF files, each run by both")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both (default: one per core)")
    ap.add_argument("--orzo-flags", default="", help="extra orzo bench flags (e.g. \"--cpu-isa avx2\")")
    ap.add_argument("--only", default="", help="run only the workloads whose name contains this")
    ap.add_argument("--ceiling-reps", type=int, default=5, help="repetitions of each ceiling (0: none)")
    ap.add_argument("--quiet-busy", type=float, default=0.10, help="the most CPU share others may use before a pair")
    ap.add_argument("--quiet-wait", type=float, default=120.0, help="the longest wait for it, s (0: no gate)")
    ap.add_argument("--retries", type=int, default=2, help="redos of a pair or ceiling others disturbed")
    ap.add_argument("--out", help="write the record as JSON here")
    a = ap.parse_args()
    if a.pairs < 1:
        ap.error("--pairs must be at least 1")

    orzo_bin = os.path.join(a.orzo, "cli", "orzo")
    watched = [orzo_bin]
    peer = None
    if a.peer:
        for b in ("llama-bench", "llama-batched-bench"):
            if not os.access(os.path.join(a.peer, b), os.X_OK):
                sys.exit(f"side_by_side.py: no {b} in {a.peer} (bench/peer/build_llamacpp.sh builds it)")
            watched.append(os.path.join(a.peer, b))
        peer = peer_record(a.peer)
    has_depth = not a.peer or "--n-depth" in run([os.path.join(a.peer, "llama-bench"), "--help"])
    stamps = {p: stamp(p) for p in watched}

    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_record(),
              "threads": a.threads, "pairs": a.pairs, "orzo": orzo_record(a.orzo), "peer": peer,
              "quiet_gate": {"busy_max": a.quiet_busy, "wait_max_s": a.quiet_wait, "retries": a.retries}
              if a.quiet_wait > 0 else None,
              "rows": []}
    for model in a.models:
        label = os.path.basename(model).removesuffix(".gguf")
        for w in workloads(a.threads, has_depth):
            if a.only not in w["name"]:
                continue
            rate = None
            if a.ceiling_reps > 0:
                which = "ReadBandwidth" if w["ceiling"] == "bandwidth" else "Sgemm"
                (bw, sgemm), ceiling_quiet = quietly(a, lambda: ceilings(a.orzo, which, a.ceiling_reps))
                rate = bw if w["ceiling"] == "bandwidth" else sgemm
            orzo_cmd = [orzo_bin, "bench", "-m", model, *w["orzo"], "--threads", str(a.threads), *a.orzo_flags.split(),
                        "--json"]
            peer_cmd = [os.path.join(a.peer, w["peer"][0]), "-m", model, *w["peer"][1]] if a.peer else None
            row = {"model": model, "label": label, "workload": w["name"], "figure": w["figure"],
                   "orzo_command": orzo_cmd, "peer_command": peer_cmd, "orzo": [], "peer": [], "quiet": [],
                   "orzo_runs": [], "peer_settings": None}
            if w.get("peer_note") and a.peer:
                row["peer_note"] = w["peer_note"]
            def pair():
                r = json.loads(run(orzo_cmd))
                return r, w["read"](run(peer_cmd)) if peer_cmd else None
            for _ in range(a.pairs):
                (r, peer_result), quiet = quietly(a, pair)
                row["quiet"].append(quiet)
                row["orzo_runs"].append(r)
                row["orzo"].append(r[w["figure"]])
                if peer_result:
                    figure, settings = peer_result
                    row["peer"].append(figure)
                    row["peer_settings"] = row["peer_settings"] or settings
            row["orzo_median"] = statistics.median(row["orzo"])
            if row["peer"]:
                row["peer_median"] = statistics.median(row["peer"])
                row["ratio"] = row["orzo_median"] / row["peer_median"]
            if rate is not None:
                row["ceiling"] = ceiling_of(w["ceiling"], rate, row["orzo_runs"], w.get("lm_head_share"))
                row["ceiling"]["quiet"] = ceiling_quiet
            record["rows"].append(row)

    rows = record["rows"]
    if not rows:
        sys.exit(f"side_by_side.py: no workload's name contains {a.only!r}")
    # One level, unless the binary changed during the run (then the warning below says so).
    record["orzo"]["cpu_isa"] = ", ".join(sorted({x["cpu_isa"] for r in rows for x in r["orzo_runs"]}))
    if peer:
        bench_rows = [r["peer_settings"] for r in rows if r["peer_settings"] and "build_commit" in r["peer_settings"]]
        settings = bench_rows[0] if bench_rows else None
        peer["build"] = f"b{settings['build_number']}-{settings['build_commit']}" if settings else "unknown"
    changed = [p for p in watched if stamp(p) != stamps[p]]
    record["binaries_changed_during_run"] = changed

    print_table(record, a)
    if changed:
        print(f"\nWARNING: changed while this ran, rerun: {', '.join(changed)}")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(record, f, indent=1)


def print_table(record, a):
    print(f"CPU: {describe(record['cpu'])}; {record['date']}; {record['threads']} threads each; "
          f"{record['pairs']} pair(s)" + (", orzo and llama.cpp alternating" if record["peer"] else ""))
    o = record["orzo"]
    print(f"orzo: {o['binary']} ({o['commit'][:12]}{'+dirty' if o['commit'].endswith('+dirty') else ''}), "
          f"kernels {o['cpu_isa']}")
    p = record["peer"]
    if p:
        what = f"{p['package']}, " if p.get("package") else ""
        print(f"llama.cpp: {p['build']} ({what}commit {str(p.get('llama_cpp_commit', '?'))[:12]}), "
              f"{p['isa']} build, {p['bin']}")
    quiet = [q for r in record["rows"] for q in r["quiet"] + ([r["ceiling"]["quiet"]] if "ceiling" in r else [])]
    if record["quiet_gate"]:
        waits = [t["gate"]["waited_s"] for q in quiet for t in q["tries"]]
        redone = sum(len(q["tries"]) - 1 for q in quiet)
        print(f"quiet gate (others <= {100 * a.quiet_busy:.0f} % of the CPU, waiting up to {a.quiet_wait:.0f} s): "
              f"waited {min(waits):.0f}-{max(waits):.0f} s; {redone} pair(s) or ceiling(s) redone as others used the "
              f"CPU during them; {sum(1 for q in quiet if not q['alone'])} of {len(quiet)} never ran alone (marked *)")
    print()
    gated = bool(record["quiet_gate"])
    mark = lambda q: "*" if gated and not q["alone"] else ""
    fmt = lambda xs, qs: " ".join((f"{x:,.0f}" if x >= 100 else f"{x:,.1f}") + mark(q) for x, q in zip(xs, qs))
    peer = bool(record["peer"])
    head = "| model | workload | orzo tok/s |" + (" llama.cpp tok/s | orzo / llama.cpp |" if peer else "")
    head += " ceiling tok/s | orzo of ceiling |" + (" llama.cpp of ceiling |" if peer else "") + " orzo runs |"
    head += " llama.cpp runs |" if peer else ""
    print(head)
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(head.count("|") - 1)) + "|")
    for r in record["rows"]:
        c = r.get("ceiling")
        if c and c["kind"] == "sgemm":
            ceiling = f"{c['tokens_per_s']:,.1f} (sgemm {c['rate_flops'] / 1e9:.0f} GFLOP/s)"
        elif c:
            ceiling = (f"{c['tokens_per_s']:,.1f} (read {c['rate_bytes_per_s'] / 1e9:.1f} GB/s; the mapped weights' "
                       f"{c['mapped_weights_bytes_per_s'] / 1e9:.1f} GB/s: {c['mapped_weights_tokens_per_s']:,.1f})")
        else:
            ceiling = "—"
        if c:
            ceiling = mark(c["quiet"]) + ceiling
        of = lambda x: f"{100 * x / c['tokens_per_s']:.0f} %" if c else "—"
        cells = [r["label"], r["workload"], f"{r['orzo_median']:,.1f}"]
        if peer:
            cells += [f"{r['peer_median']:,.1f}", f"{r['ratio']:.3f}"]
        cells += [ceiling, of(r["orzo_median"])]
        if peer:
            cells += [of(r["peer_median"])]
        cells += [fmt(r["orzo"], r["quiet"])] + ([fmt(r["peer"], r["quiet"])] if peer else [])
        print("| " + " | ".join(cells) + " |")
    print("\nCommands (one orzo run, then one llama.cpp run, per pair):")
    for r in record["rows"]:
        print(f"- {r['label']}, {r['workload']}: `{' '.join(r['orzo_command'])}`")
        if r["peer_command"]:
            print(f"  `{' '.join(r['peer_command'])}`" + (f" ({r['peer_note']})" if r.get("peer_note") else ""))


if __name__ == "__main__":
    main()
