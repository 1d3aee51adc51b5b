#!/usr/bin/env python3
"""Holds a binary to the rule of kernels/cpu/isa/target.hpp: only the CPU kernels compiled for
an ISA level may use instructions beyond the architecture's baseline, so a build made
anywhere runs on every x86-64 CPU. Disassembles the binary and lists each function that uses
a VEX or EVEX encoded instruction (AVX and later: their mnemonics start with `v`) outside the
namespaces of the levels (orzo::cpu::isa_avx2, orzo::cpu::isa_avx512). Exit 0 when there is
none, 1 with one line per function otherwise.

  scripts/check-baseline-isa.py BINARY
  scripts/check-baseline-isa.py --self-test   compile a planted violation and see it caught
"""
import os
import re
import subprocess
import sys
import tempfile

FUNCTION = re.compile(r'^[0-9a-f]+ <(.*)>:$')
VECTOR = re.compile(r'^\s*[0-9a-f]+:\s+v[a-z0-9]+\s')
ALLOWED = re.compile(r'::isa_avx(2|512)::')


def violations(binary):
    listing = subprocess.run(['objdump', '-d', '-C', '--no-show-raw-insn', binary], check=True,
                             capture_output=True, text=True).stdout
    found, name = [], None
    for line in listing.splitlines():
        m = FUNCTION.match(line)
        if m:
            name = m.group(1)
            continue
        if name and VECTOR.match(line) and not ALLOWED.search(name):
            found.append(name)
            name = None  # once per function
    return found


def self_test():
    source = '''
namespace orzo::cpu::isa_avx2 { __attribute__((target("avx2"))) float allowed(const float* x) {
  float s = 0; for (int i = 0; i < 64; ++i) s += x[i] * x[i]; return s; } }
__attribute__((target("avx2"))) float planted(const float* x) {
  float s = 0; for (int i = 0; i < 64; ++i) s += x[i] * x[i]; return s; }
float baseline(const float* x) { float s = 0; for (int i = 0; i < 64; ++i) s += x[i]; return s; }
'''
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = os.path.join(tmp, 'planted.cpp'), os.path.join(tmp, 'planted.o')
        with open(src, 'w') as f:
            f.write(source)
        subprocess.run(['c++', '-O3', '-ffast-math', '-c', src, '-o', obj], check=True)
        found = violations(obj)
    if not any(name.startswith('planted') for name in found) or any('allowed' in n or 'baseline' in n for n in found):
        print('self-test failed: found', found)
        return 1
    print('self-test: the planted AVX2 function was caught, the allowed and baseline ones were not')
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) != 2:
        print(__doc__.strip())
        return 2
    found = violations(argv[1])
    for name in found:
        print(f'{argv[1]}: {name} uses AVX instructions outside kernels/cpu/isa/')
    if not found:
        print(f'{argv[1]}: AVX instructions only in the per-ISA kernels')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
