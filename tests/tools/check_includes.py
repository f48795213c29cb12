#!/usr/bin/env python3
"""check_includes.py ROOT: checks that the #include "..." graph of the source
tree keeps the architecture of docs/ARCHITECTURE.md (the CLI test
tests/cli/includes.bats runs it).

It reads every .c, .h and .cu file under ROOT's core/, cmd/, layers/, data/
and strategies/ and reports:

  - a circle among core's modules: a module is NAME.c (or NAME.cu) and NAME.h
    of one folder, named by its path without the extension (core/fit/train);
    module A depends on module B when a file of A includes B's header. Each
    circle prints as "a -> b -> a", then the include behind each arrow;
  - a file under core/ that includes a header of cmd/, layers/, data/ or
    strategies/;
  - a file under layers/, data/ or strategies/ that includes a header of
    another of these three folders or of cmd/.

An include is looked up as the compiler does: first beside the including
file, then from ROOT (the build's -I.). Includes of files that exist in
neither place (system headers written with quotes) are not followed.

Exit status: 0 when the tree is clean, 1 when it reports a problem, 2 on a
usage error.
"""

import os
import re
import sys
from collections import deque

FOLDERS = ["core", "cmd", "layers", "data", "strategies"]
EXTENSIONS = (".c", ".h", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

# For each folder, the folders it must not include a header from.
FORBIDDEN = {
    "core": ["cmd", "layers", "data", "strategies"],
    "layers": ["cmd", "data", "strategies"],
    "data": ["cmd", "layers", "strategies"],
    "strategies": ["cmd", "layers", "data"],
    "cmd": [],
}


def source_files(root):
    """The source files under the checked folders, as sorted paths relative to root."""
    files = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                if name.endswith(EXTENSIONS):
                    path = os.path.join(dirpath, name)
                    files.append(os.path.relpath(path, root))
    return sorted(files)


def includes_of(root, path):
    """The (line number, included file) pairs of path; included files relative to root."""
    found = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            beside = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
            from_root = os.path.normpath(m.group(1))
            for candidate in (beside, from_root):
                if os.path.isfile(os.path.join(root, candidate)):
                    found.append((number, candidate))
                    break
    return found


def top_folder(path):
    return path.split(os.sep)[0]


def module_of(path):
    """core/fit/train.c, core/fit/train.h -> core/fit/train."""
    return os.path.splitext(path)[0]


def layer_problems(edges):
    """One message per include that points the wrong way between folders."""
    problems = []
    for path, number, header in edges:
        src, dst = top_folder(path), top_folder(header)
        if src != dst and dst in FORBIDDEN.get(src, []):
            problems.append("%s:%d: includes '%s': %s/ includes no header from %s/"
                    % (path, number, header, src, "/, ".join(FORBIDDEN[src])))
    return problems


def shortest_path(graph, start, goal):
    """The shortest list of modules from start to goal along graph's arrows, or None."""
    before = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            while node is not None:
                path.append(node)
                node = before[node]
            return path[::-1]
        for succ in sorted(graph.get(node, {})):
            if succ not in before:
                before[succ] = node
                queue.append(succ)
    return None


def module_circles(edges):
    """One message per circle among core's modules.

    For every arrow a -> b whose b leads back to a, the circle is that arrow
    plus the shortest way back; the same circle found from another of its
    arrows is printed once."""
    graph = {}  # module -> {module it depends on: (file, line, header) of the first include}
    for path, number, header in edges:
        if top_folder(path) != "core" or top_folder(header) != "core":
            continue
        a, b = module_of(path), module_of(header)
        if a != b:
            graph.setdefault(a, {}).setdefault(b, (path, number, header))

    problems, seen = [], set()
    for a in sorted(graph):
        for b in sorted(graph[a]):
            back = shortest_path(graph, b, a)
            if back is None:
                continue
            circle = [a] + back  # a, b, ..., a
            first = circle.index(min(circle[:-1]))
            key = tuple(circle[first:-1] + circle[:first])
            if key in seen:
                continue
            seen.add(key)
            lines = ["circle: " + " -> ".join(list(key) + [key[0]])]
            for i in range(len(key)):
                path, number, header = graph[key[i]][key[(i + 1) % len(key)]]
                lines.append("\t%s:%d includes '%s'" % (path, number, header))
            problems.append("\n".join(lines))
    return problems


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        sys.stderr.write("usage: check_includes.py ROOT (the source tree's top directory)\n")
        return 2
    root = argv[1]
    files = source_files(root)
    edges = [(path, number, header)
        for path in files for number, header in includes_of(root, path)]

    problems = layer_problems(edges) + module_circles(edges)
    for problem in problems:
        print(problem)
    if problems:
        print("check_includes: %d problem%s in %d files"
            % (len(problems), "" if len(problems) == 1 else "s", len(files)))
        return 1
    print("check_includes: %d files, %d includes: no circle among core's modules, "
        "every include points one way" % (len(files), len(edges)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
