#!/usr/bin/env python3
"""The CPU emulator's front end: a .cu or .cuh file as C++ for the host compiler.

nvcc extends C++ in two ways no header can stand in for, and this rewrites exactly those,
keeping every line where it was (a #line names the original file, so messages point at it):

  kernel<<<grid, block[, shared[, stream]]>>>(args)   ->  ::orzo::cuda_cpu::launcher(kernel, grid, block...)(args)
  __shared__ T name[N]...;                            ->  auto& name = ::orzo::cuda_cpu::block_shared<T[N]...>("file:line:name");
  extern __shared__ T name[];                         ->  T* const name = ::orzo::cuda_cpu::dynamic_shared<T>();

and, like nvcc, puts cuda_runtime.h (the kernel language, kernels/cuda_cpu/include/) first.
Anything else the kernels use is an ordinary declaration in that header.

  translate.py IN OUT
"""
import re
import sys

LAUNCH = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(')
DYNAMIC = re.compile(r'\bextern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*\[\s*\]\s*;')
STATIC = re.compile(r'\b__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\]]*\]\s*)*);')


def translate(text, name):
    out = ['#include <cuda_runtime.h>', '#line 1 "%s"' % name]
    for number, line in enumerate(text.split('\n'), 1):
        line = LAUNCH.sub(lambda m: '::orzo::cuda_cpu::launcher(%s, %s)(' % (m.group(1), m.group(2)), line)
        line = DYNAMIC.sub(lambda m: '%s* const %s = ::orzo::cuda_cpu::dynamic_shared<%s>();'
                           % (m.group(1), m.group(2), m.group(1)), line)
        line = STATIC.sub(lambda m: 'auto& %s = ::orzo::cuda_cpu::block_shared<%s%s>("%s:%d:%s");'
                          % (m.group(2), m.group(1), m.group(3).replace(' ', ''), name, number, m.group(2)), line)
        if '<<<' in line or '__shared__' in line.split('//')[0]:
            sys.exit('%s:%d: a launch or __shared__ declaration translate.py cannot read: %s' % (name, number, line.strip()))
        out.append(line)
    return '\n'.join(out)


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as f:
        text = f.read()
    with open(target, 'w') as f:
        f.write(translate(text, source))


if __name__ == '__main__':
    main()
