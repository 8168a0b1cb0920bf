#!/usr/bin/env python3
"""house-stats.py — the house's figures for C files (issue 29, docs/hacking.md): per
function its length (signature line to closing brace), its asserts, and its asserts
that join conditions with && (split them: when one fires, say which).

  tools/house-stats.py [-v] [--check] FILE...     e.g. $(git ls-files 'src/*.c')

A function over 70 lines must say why in a comment that starts with "Long:" in the
20 lines above its signature (or it is split); over 100 lines it is always reported.
--check exits 1 when a function is over 100 lines, over 70 without a "Long:" reason,
or an assert joins conditions with &&. -v prints every function: lines asserts
conjunctions file:line name. The parse is line based: a function is a line that
starts with a name and "(" and whose body closes with "}" alone at column 0."""
import re, sys
verbose = '-v' in sys.argv
check = '--check' in sys.argv
files = [f for f in sys.argv[1:] if f not in ('-v', '--check')]
unexplained = []
sig = re.compile(r'^[A-Za-z_][\w \*]*\b(\w+)\s*\(')
tot_f = tot_a = tot_conj = 0; over70 = []; over100 = []; zero = 0
for fn in files:
    lines = open(fn).read().split('\n')
    i = 0
    while i < len(lines):
        m = sig.match(lines[i])
        if m and not lines[i].rstrip().endswith(';') and not lines[i].startswith(('typedef', 'struct', 'enum', '#')):
            # find opening brace: the signature may span lines
            j = i
            while j < len(lines) and '{' not in lines[j] and not lines[j].rstrip().endswith(';'):
                j += 1
            if j < len(lines) and '{' in lines[j] and '=' not in lines[i].split('(')[0]:
                if lines[j].rstrip().endswith('}') and j == i:  # one-liner
                    k = j
                else:
                    k = j + 1
                    while k < len(lines) and lines[k] != '}':
                        k += 1
                body = '\n'.join(lines[i:k+1])
                n = k - i + 1
                na = len(re.findall(r'(?<![_\w])assert\s*\(', body))
                conj = 0
                for am in re.finditer(r'(?<![_\w])assert\s*\(', body):
                    # take the balanced parenthesis content
                    s = am.end(); d = 1; p = s
                    while p < len(body) and d:
                        d += {'(':1, ')':-1}.get(body[p], 0); p += 1
                    if '&&' in body[s:p-1]: conj += 1
                tot_f += 1; tot_a += na; tot_conj += conj
                if na == 0: zero += 1
                name = f'{fn}:{i+1} {m.group(1)}'
                if n > 100: over100.append((n, name))
                elif n > 70:
                    over70.append((n, name))
                    if not any('Long:' in l for l in lines[max(0, i-20):i]):
                        unexplained.append((n, name))
                if verbose: print(n, na, conj, name)
                i = k + 1
                continue
        i += 1
print(f'functions {tot_f}, asserts {tot_a} ({tot_a/max(tot_f,1):.2f}/function), functions without assert {zero}, conjunction asserts {tot_conj}')
print(f'over 100: {len(over100)}, 71-100: {len(over70)}')
for n, name in sorted(over100 + over70, reverse=True):
    print(f'  {n:4d} {name}')
print(f'over 70 without a "Long:" reason: {len(unexplained)}')
if check and (over100 or unexplained or tot_conj):
    sys.exit(1)
