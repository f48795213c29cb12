#!/usr/bin/env python3
"""Fails on a C function longer than a limit (docs/ARCHITECTURE.md: cmd/ reads as wiring).

usage: check_lengths.py MAX FILE...

A function is counted from the first line of its definition (the line at
column 0 that names it) to its closing brace at column 0, both included, as
the project's style writes them. Prints FILE:LINE: NAME is N lines (over MAX)
for each, and exits 1 when there is one, 0 otherwise, 2 on a usage error.
"""
import re
import sys


def functions(path):
    """(name, first line, line count) of each function defined in path."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    for i, line in enumerate(lines):
        if line != "{":
            continue
        start = i - 1
        while start > 0 and not re.match(r"^[A-Za-z_].*\(", lines[start]):
            start -= 1
        end = i + 1
        while end < len(lines) and lines[end] != "}":
            end += 1
        name = re.search(r"(\w+)\s*\(", lines[start])
        yield (name.group(1) if name else "?"), start + 1, end - start + 1


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit():
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    limit, long_ones, count = int(argv[1]), 0, 0
    for path in argv[2:]:
        for name, line, n in functions(path):
            count += 1
            if n > limit:
                print(f"{path}:{line}: {name} is {n} lines (over {limit})")
                long_ones += 1
    print(f"check_lengths: {count} functions, {long_ones} over {limit} lines")
    return 1 if long_ones else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
