#!/usr/bin/env python3
"""cu2cpp.py: turn a .cu file of this project into C++ for the CPU emulator (emu.h).

Three rewrites, everything else is left to macros (see emu.h):
  kernel<<<grid, block[, smem[, stream]]>>>(args)  ->  emu_launch((const void *)(kernel), grid, block, smem, stream, "kernel",
                                                                  [&]() { kernel(args); })
  extern __shared__ [__align__(n)] T name[];       ->  T *name = (T *)emu_dyn_smem;
  __shared__ T a[..], b[..];                       ->  the same, then EMU_SHARED_POISON(a); EMU_SHARED_POISON(b);
                                                       (NaN at each block's start, as the dynamic buffer)
usage: cu2cpp.py IN.cu OUT.cpp
"""
import re
import sys


def split_top(s):
    parts, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def rewrite_launches(src):
    out, pos = [], 0
    while True:
        i = src.find('<<<', pos)
        if i < 0:
            out.append(src[pos:])
            return ''.join(out)
        # the callee: identifier, optionally followed by <template args>
        j = i
        while src[j - 1].isspace():
            j -= 1
        if src[j - 1] == '>':
            depth, k = 0, j - 1
            while True:
                if src[k] == '>':
                    depth += 1
                elif src[k] == '<':
                    depth -= 1
                    if depth == 0:
                        break
                k -= 1
            j = k
        k = j
        while k > 0 and (src[k - 1].isalnum() or src[k - 1] in '_:'):
            k -= 1
        callee = src[k:i].strip()
        e = src.index('>>>', i)
        cfg = split_top(src[i + 3:e])
        p = e + 3
        while src[p].isspace():
            p += 1
        assert src[p] == '(', 'launch without arguments near: ' + src[i - 40:i + 40]
        depth, q = 0, p
        while True:
            if src[q] == '(':
                depth += 1
            elif src[q] == ')':
                depth -= 1
                if depth == 0:
                    break
            q += 1
        args = src[p + 1:q]
        smem = cfg[2] if len(cfg) > 2 else '0'
        stream = cfg[3] if len(cfg) > 3 else '(cudaStream_t)0'
        out.append(src[pos:k])
        out.append('emu_launch((const void *)(%s), %s, %s, %s, %s, "%s", [&]() { %s(%s); })'
                   % (callee, cfg[0], cfg[1], smem, stream, callee.split('<')[0], callee, args))
        pos = q + 1


def poison_static_shared(src):
    """After each `__shared__` declaration (a line of its own), on the same line so that
    line numbers hold: fill each declared array with NaN once per block."""
    def rep(m):
        names = [re.match(r'\s*(\w+)', d).group(1) for d in split_top(m.group(2))]
        return m.group(0) + ''.join(' EMU_SHARED_POISON(%s);' % n for n in names)
    return re.sub(r'^[ \t]*__shared__\s+((?:const\s+)?\w+)\s+([^;]+);', rep, src, flags=re.M)


def main():
    src = open(sys.argv[1]).read()
    src = re.sub(r'extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w ]+?)\s+(\w+)\[\];',
                 r'\1 *\2 = (\1 *)emu_dyn_smem;', src)
    src = poison_static_shared(src)
    src = rewrite_launches(src)
    with open(sys.argv[2], 'w') as f:
        f.write('#include "emu.h"\n#line 1 "%s"\n' % sys.argv[1])
        f.write(src)


if __name__ == '__main__':
    main()
