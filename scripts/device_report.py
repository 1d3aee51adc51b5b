#!/usr/bin/env python3
"""Gathers what scripts/device-check.sh's stages wrote (WORK) into report.md and report.json
(OUTDIR), with the logs worth reading beside them: the GPU tests, compute-sanitizer's summary,
the GPU bench set against its roofline, and PyTorch on the same weights."""
import json
import pathlib
import shutil
import sys


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def tail(path, lines=40):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def gtest_summary(report):
    if not report:
        return None
    failed = [f"{s['name']}.{t['name']}" for s in report["testsuites"] for t in s["testsuite"] if t.get("failures")]
    skipped = [f"{s['name']}.{t['name']}" for s in report["testsuites"] for t in s["testsuite"]
               if t.get("result") == "SKIPPED"]
    return {"tests": report["tests"], "failed": failed, "skipped": skipped}


def main():
    work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    stages = [json.loads(l) for l in (work / "stages.jsonl").read_text().splitlines() if l.strip()]
    report = {
        "stages": stages,
        "gpu": tail(work / "nvidia-smi.log", 12),
        "tests": gtest_summary(load(work / "gpu-tests.json")),
        "sanitizer": [l for l in tail(work / "sanitizer.log", 400).splitlines() if "ERROR SUMMARY" in l or "=========" in l][-20:],
        "bench": load(work / "gpu-bench.json"),
        "torch": load(work / "torch.json"),
        "actors": load(work / "actors.json"),
        "make_model": tail(work / "make-model.log", 5),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    for name in ("gpu-tests.log", "sanitizer.log", "gpu-bench.log", "torch.log"):
        if (work / name).exists():
            shutil.copy(work / name, out / name)

    md = ["## GPU device check", ""]
    md.append("| stage | exit | seconds (limit) |")
    md.append("|---|---|---|")
    md += [f"| {s['stage']} | {s['rc']} | {s['seconds']} ({s['limit']}) |" for s in stages]
    t = report["tests"]
    if t:
        md += ["", f"GPU tests: {t['tests']} run, {len(t['failed'])} failed, {len(t['skipped'])} skipped."]
        md += [f"- failed: `{name}`" for name in t["failed"]]
    md += ["", "compute-sanitizer: " + ("; ".join(l for l in report["sanitizer"] if "ERROR SUMMARY" in l) or "no summary")]
    b = report["bench"]
    if b:
        md += ["", f"gpu_bench on {b['device']}, {b['model']} ({b['storage']}, {b['weight_bytes'] / 1e9:.2f} GB of weights), "
               f"copy bandwidth {b['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s, prompt {b['prompt']}, output {b['gen']}:", ""]
        md.append("| sequences | decode tok/s | per sequence | step ms | roofline ms | of roofline | TTFT p50/p99 ms | ITL p50/p99 ms |")
        md.append("|---|---|---|---|---|---|---|---|")
        for r in b["runs"]:
            md.append(f"| {r['batch']} | {r['decode_tps']:.0f} | {r['decode_tps_per_seq']:.0f} | {r['step_ms']:.3f} | "
                      f"{r['roofline_step_ms']:.3f} | {100 * r['of_roofline']:.0f}% | {r['ttft_p50_ms']:.1f} / {r['ttft_p99_ms']:.1f} | "
                      f"{r['itl_p50_ms']:.2f} / {r['itl_p99_ms']:.2f} |")
    tr = report["torch"]
    if tr:
        l = tr.get("logits", {})
        md += ["", f"PyTorch {tr['torch']} (transformers generate, bf16, eager) on the same weights: logits of ids 1..32 "
               f"max |diff| {l.get('max_abs_diff', float('nan')):.4f} at max |logit| {l.get('max_abs_logit', float('nan')):.2f}, "
               f"argmax equal: {l.get('argmax_equal')}, top-10 overlap {l.get('top10_overlap')}/10."]
        for r in tr.get("runs", []):
            md.append(f"- {r['batch']} sequences: {r['decode_tps']:.0f} tok/s decode, first token {r['ttft_ms']:.1f} ms")
    a = report["actors"]
    if a:
        md += ["", f"Through the actors (`orzo bench --actors --placement cuda:0`, {a['batch']} sequences): "
               f"{a['decode_tps']:.0f} tok/s decode, {a['us_per_step']:.0f} us per step, "
               f"TTFT p50 {a['batch_ttft_p50_ms']:.1f} / p99 {a['batch_ttft_p99_ms']:.1f} ms, "
               f"ITL p50 {a['itl_p50_ms']:.2f} / p99 {a['itl_p99_ms']:.2f} ms"
               + (f"; TTFT of a request arriving mid-batch p50 {a['ttft_p50_ms']:.1f} ms, p99 {a['ttft_p99_ms']:.1f} ms"
                  if "ttft_p50_ms" in a else "") + "."]
    (out / "report.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
