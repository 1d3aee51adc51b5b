#!/usr/bin/env python3
"""Holds every `#include "..."` in the source tree to the floors of docs/DESIGN.md.

Each part (a folder, or a folder inside one) may include itself and the parts listed for it
below, and whatever those may include in turn; nothing else. So no include runs from a lower
floor to a higher one, and no two parts include each other. A quoted include must name a
file of the tree. Exit 0 when every include keeps to this, 1 with one line per violation.

  scripts/check-layers.py [ROOT]      check the tree at ROOT (default: this checkout)
  scripts/check-layers.py --self-test plant violations in a scratch tree and see them caught
"""
import os
import re
import sys
import tempfile

# part -> the parts directly below it that it uses. The same graph as the CMake links.
PARTS = {
    'core': [],
    'kernels/cpu': ['core'],
    'kernels/cuda': ['core'],
    'formats': ['core'],
    'batching': ['core'],
    'chat_template': ['core'],
    'grammar': ['core'],
    'text': ['core', 'formats'],
    'runtime': ['core', 'kernels/cpu', 'formats', 'grammar'],
    'runtime/cuda': ['runtime', 'kernels/cuda'],
    # The CUDA emulator, test-only: it stands in for the toolkit and includes nothing of ours.
    'kernels/cuda_cpu': [],
    'stages': ['runtime', 'runtime/cuda'],
    'protocol': ['core', 'grammar'],
    'actors': ['protocol', 'stages', 'batching', 'text'],
    'server': ['actors', 'chat_template'],
    # The top floor: programs and tests, which nothing includes.
    'cli': ['server'],
    'tools': ['runtime', 'text'],
    'examples': ['actors'],
    'bench': ['server', 'runtime/cuda', 'kernels/cuda'],
    'tests': ['server', 'runtime/cuda', 'kernels/cuda', 'kernels/cuda_cpu', 'tools'],
}
SOURCE = re.compile(r'\.(c|cc|cpp|h|hpp|cu|cuh)$')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SKIP = ('build', '.git', '.device', 'models')


def closure(parts):
    """part -> every part it may include, itself included; raises on a cycle."""
    out = {}

    def visit(part, path):
        if part in path:
            raise ValueError('the floors have a cycle: ' + ' -> '.join(path + [part]))
        if part not in out:
            allowed = {part}
            for below in parts[part]:
                allowed |= visit(below, path + [part])
            out[part] = allowed
        return out[part]

    for part in parts:
        visit(part, [])
    return out


def part_of(path, parts):
    """The longest part that holds `path` (tests/text/x.cpp -> tests), or None."""
    best = None
    for part in parts:
        if (path + '/').startswith(part + '/') and (best is None or len(part) > len(best)):
            best = part
    return best


def sources(root):
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if not (rel == '.' and (d.startswith(SKIP) or d.startswith('.')))]
        for name in files:
            if SOURCE.search(name):
                yield os.path.normpath(os.path.join(rel, name))


def violations(root, parts=PARTS):
    allowed = closure(parts)
    found = []
    for path in sorted(sources(root)):
        part = part_of(path, parts)
        if part is None:
            continue
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                name = m.group(1)
                if os.path.isfile(os.path.join(root, name)):
                    target = os.path.normpath(name)
                elif os.path.isfile(os.path.join(root, os.path.dirname(path), name)):
                    target = os.path.normpath(os.path.join(os.path.dirname(path), name))
                else:
                    found.append(f'{path}:{number}: includes "{name}", which is no file of the tree')
                    continue
                below = part_of(target, parts)
                if below is not None and below not in allowed[part]:
                    found.append(f'{path}:{number}: {part}/ may not include {target} ({below}/ is not below it)')
    return found


def self_test():
    def tree(files):
        root = tempfile.mkdtemp(prefix='check-layers-')
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), 'w') as f:
                f.write(text)
        return root

    legal = tree({'core/a.hpp': '', 'runtime/b.hpp': '#include "core/a.hpp"\n',
                  'stages/c.cpp': '#include "core/a.hpp"\n#include "runtime/b.hpp"\n'})
    assert violations(legal) == [], violations(legal)
    upward = tree({'core/a.hpp': '#include "protocol/p.hpp"\n', 'protocol/p.hpp': '#include "core/a.hpp"\n'})
    assert [v.split(':')[0] for v in violations(upward)] == ['core/a.hpp'], violations(upward)
    sideways = tree({'text/t.hpp': '#include "chat_template/j.hpp"\n', 'chat_template/j.hpp': ''})
    assert len(violations(sideways)) == 1, violations(sideways)
    nested = tree({'runtime/r.hpp': '#include "runtime/cuda/c.hpp"\n', 'runtime/cuda/c.hpp': ''})
    assert len(violations(nested)) == 1, violations(nested)
    relative = tree({'core/a.hpp': '#include "../actors/x.hpp"\n', 'actors/x.hpp': ''})
    assert len(violations(relative)) == 1, violations(relative)
    missing = tree({'core/a.hpp': '#include "core/gone.hpp"\n'})
    assert len(violations(missing)) == 1, violations(missing)
    try:
        closure({'a': ['b'], 'b': ['a']})
        raise AssertionError('a cycle was not refused')
    except ValueError:
        pass
    print('check-layers self-test: 6 planted violations caught, 0 false alarms')


def main(argv):
    if argv[1:] == ['--self-test']:
        self_test()
        return 0
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    found = violations(root)
    for line in found:
        print(line)
    if found:
        print(f'check-layers: {len(found)} include(s) break the floors (docs/DESIGN.md, "The floors")')
        return 1
    print('check-layers: every include keeps to the floors')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
