#!/usr/bin/env python3
"""Plants one bug at a time in the CUDA kernels and the backend, and checks that the emulated
GPU suite (orzo_emulated_gpu_tests, on kernels/cuda_cpu/) fails on each: the proof that the
emulator would catch such a bug the day it is written. Each mutation is an exact piece of
source and what it becomes; the source is restored after each one, also on failure or ^C.

  scripts/mutation-check.py [--build build] [--only NAME]

Needs a configured build with tests (cmake --preset ci). Exits non-zero when a mutation
survives (its tests still pass) or no longer applies (the source moved on: update it here).
"""
import argparse
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (name, family, file, original, mutated, gtest filter that must fail). A mutation must compile:
# one the compiler refuses proves nothing of the emulator.
MUTATIONS = [
    ('swiglu-off-by-one', 'elementwise', 'kernels/cuda/swiglu.cu',
     'i < total; i += stride) {', 'i < total - 1; i += stride) {',
     'CudaKernels.Swiglu*'),
    ('rope-missing-barrier', 'RoPE + cache write', 'kernels/cuda/rope_cache.cu',
     '    head[j] = src[from] + (bias ? bias[from] : 0.0f);\n  }\n  __syncthreads();\n',
     '    head[j] = src[from] + (bias ? bias[from] : 0.0f);\n  }\n',
     'CudaKernels.QkvRope*'),
    ('rope-interleaved-pairing', 'RoPE + cache write', 'kernels/cuda/rope_cache.cu',
     'j < half ? 2 * j : 2 * (j - half) + 1;', 'j < half ? 2 * j : 2 * (j - half);',
     'CudaKernels.QkvRope*'),
    ('rope-partial-passthrough', 'RoPE + cache write', 'kernels/cuda/rope_cache.cu',
     'for (int32_t j = rotary + threadIdx.x; j < hd;', 'for (int32_t j = rotary + threadIdx.x; j < hd - 1;',
     'CudaKernels.QkvRope*'),
    ('rope-attention-factor', 'RoPE + cache write', 'kernels/cuda/rope_cache.cu',
     '      s *= a.rope_scale;\n', '',
     'CudaKernels.QkvRope*'),
    ('longrope-short-table', 'RoPE tables', 'runtime/cuda/cuda_backend.cpp',
     'weights_->inv_freq(local, cfg_.long_rope(o_.max_model_len))', 'weights_->inv_freq(local, false)',
     'Models/CudaBackendTwin.*phi3*'),
    ('attention-chunk-barrier', 'attention decode and prefill', 'kernels/cuda/attention.cu',
     '      __syncthreads();  // before the next chunk overwrites K/V\n', '',
     'Elems/CudaAttention.PrefillMatchesCpu/*:Elems/CudaAttention.DecodeMatchesCpu/*'),
    ('attention-slot-barrier', 'attention decode and prefill', 'kernels/cuda/attention.cu',
     'p <= hi ? qs.table[p / a.block_size] * a.block_size + p % a.block_size : -1;\n  }\n  __syncthreads();\n',
     'p <= hi ? qs.table[p / a.block_size] * a.block_size + p % a.block_size : -1;\n  }\n',
     'Elems/CudaAttention.DecodeMatchesCpu/*'),
    ('attention-softcap', 'attention decode and prefill', 'kernels/cuda/attention.cu',
     '  if (score_cap > 0.0f) s = score_cap * tanhf(s);\n', '',
     'Elems/CudaAttention.DecodeMatchesCpu/*:Elems/CudaAttention.PrefillMatchesCpu/*'),
    ('sampling-shuffle-width', 'sampling', 'kernels/cuda/sampling.cu',
     'const float other = __shfl_xor_sync(kFullMask, m, offset);',
     'const float other = __shfl_xor_sync(kFullMask, m, offset, 16);',
     'CudaSampling.MatchesCpuSamplerOnTinyVocab:CudaSampling.DegenerateRowsMatchCpuSampler'),
    ('expert-routing-ties', 'expert routing', 'kernels/cuda/expert_routing.cu',
     'return pa > pb || (pa == pb && a < b);', 'return pa > pb || (pa == pb && a > b);',
     'CudaKernels.ExpertRouting*'),
    ('expert-renormalize', 'expert routing', 'kernels/cuda/expert_routing.cu',
     'row_weight[i] = row_weight[i] / kept;', 'row_weight[i] = row_weight[i];',
     'CudaKernels.ExpertRouting*'),
    ('expert-row-order', 'expert routing', 'kernels/cuda/expert_routing.cu',
     'rank += mine[j] < e;', 'rank += mine[j] > e;',
     'CudaKernels.ExpertRouting*'),
    ('expert-shared-gate-sign', 'expert rows', 'kernels/cuda/expert_rows.cu',
     '1.0f / (1.0f + expf(-a.shared_gate[', '1.0f / (1.0f + expf(a.shared_gate[',
     'CudaKernels.CombineExperts*:Models/CudaBackendTwin.*/qwen2moe'),
    ('expert-down-offset', 'MoE layer', 'runtime/cuda/cuda_backend.cpp',
     'hidden, inter, expert_out_ + static_cast<int64_t>(first) * hidden, false);',
     'hidden, inter, expert_out_ + static_cast<int64_t>(first / 2) * hidden, false);',
     'Models/CudaBackendTwin.*/qwen3moe:Models/CudaBackendTwin.*/mixtral'),
    ('graph-key-without-stride', 'graph replay', 'runtime/cuda/decode_graphs.cpp',
     'const auto key = std::make_pair(rows, stride);', 'const auto key = std::make_pair(rows, std::min(stride, 8));',
     'CudaBackend.DecodeGraphs*'),
    ('gemm-leading-dimension', 'GEMM arguments', 'kernels/cuda/gemm.cu',
     'w, t, in, x, t, in, &beta', 'w, t, in, x, t, out, &beta',
     'CudaKernels.Gemm*'),
]


def run(cmd, timeout=None):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def build(build_dir):
    r = run(['cmake', '--build', build_dir, '--target', 'orzo_emulated_gpu_tests'])
    return r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--build', default='build')
    p.add_argument('--only')
    args = p.parse_args()
    tests = ROOT / args.build / 'tests' / 'orzo_emulated_gpu_tests'
    chosen = [m for m in MUTATIONS if not args.only or m[0] == args.only]
    if not chosen:
        sys.exit('mutation-check: no mutation named %s' % args.only)
    ok, log = build(args.build)
    if not ok:
        sys.exit('mutation-check: the unmutated build fails:\n' + log)
    survivors = []
    print('%-26s %-30s %-8s %s' % ('mutation', 'family', 'result', 'failing tests'))
    for name, family, path, original, mutated, test_filter in chosen:
        source = ROOT / path
        text = source.read_text()
        if text.count(original) != 1:
            survivors.append(name)
            print('%-26s %-30s %-8s %s' % (name, family, 'STALE', 'the original text is not in %s once' % path))
            continue
        started = time.time()
        try:
            source.write_text(text.replace(original, mutated))
            built, log = build(args.build)
            if not built:
                result, detail = 'BROKEN', 'the mutated source does not build: a mutation must compile'
            else:
                r = run([str(tests), '--gtest_filter=' + test_filter, '--gtest_brief=1'], timeout=1200)
                failed = sorted({line.split(']', 1)[1].split()[0].rstrip(',') for line in r.stdout.splitlines()
                                 if line.startswith('[  FAILED  ]') and 'listed below' not in line})
                if r.returncode == 0:
                    result, detail = 'SURVIVED', 'every test of %s passes' % test_filter
                else:
                    result = 'caught'
                    detail = ', '.join(failed) if failed else 'the test program died (rc %d)' % r.returncode
        finally:
            source.write_text(text)
        if result != 'caught':
            survivors.append(name)
        print('%-26s %-30s %-8s %s  (%.0f s)' % (name, family, result, detail, time.time() - started), flush=True)
    build(args.build)  # back to the unmutated program
    if survivors:
        sys.exit('mutation-check: not caught: ' + ', '.join(survivors))
    print('mutation-check: every planted bug was caught')


if __name__ == '__main__':
    main()
