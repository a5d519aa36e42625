#!/usr/bin/env python3
"""Checks the include direction of core/ (the layers of BITLENS_CORE_LAYERS, core/CMakeLists.txt).

A file under core/F/ may include "G/..." only when G is F itself or a folder listed before F:
the list runs from the lowest layer to the highest. Fails, naming file:line and the edge, on
  - an include of a folder at or above the file's own (a back edge, or a cycle in the making),
  - a folder of core/ that the list does not place (a new folder must be given a layer),
  - an include of widgets/ or app/, or of a Qt header, from core/ (core sits below both and
    has no Qt).
A listed folder that does not exist (yet) is fine. Standard library only; no build needed.

Usage: check_layers.py --root CHECKOUT --layers jobs kernels ir ...
Exit 0 when the direction holds, 1 on any violation, 2 on bad usage."""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")
QUOTED = re.compile(r'^\s*#\s*include\s*"([A-Za-z0-9_.+-]+)/')
QT = re.compile(r'^\s*#\s*include\s*<(Q[A-Za-z]+|Qt[A-Za-z]*/[^>]*)>')
ABOVE_CORE = ("widgets", "app")


def core_folders(core):
    return sorted(d for d in os.listdir(core)
                  if os.path.isdir(os.path.join(core, d)) and not d.startswith((".", "__")))


def check(root, layers):
    core = os.path.join(root, "core")
    rank = {name: i for i, name in enumerate(layers)}
    problems = []
    if len(rank) != len(layers):
        dup = sorted({n for n in layers if layers.count(n) > 1})
        problems.append(f"BITLENS_CORE_LAYERS lists {', '.join(dup)} more than once")
    folders = core_folders(core)
    for folder in folders:
        if folder not in rank:
            problems.append(f"core/{folder}/: not placed in BITLENS_CORE_LAYERS "
                            f"(core/CMakeLists.txt); give the new folder a layer")
    files = includes = 0
    for folder in folders:
        for base, dirs, names in os.walk(os.path.join(core, folder)):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root)
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        if QT.match(line):
                            problems.append(f"{rel}:{lineno}: core includes Qt "
                                            f"({line.strip()}); core has no Qt")
                            continue
                        m = QUOTED.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        includes += 1
                        if target == folder:
                            continue
                        if target in ABOVE_CORE:
                            problems.append(f"{rel}:{lineno}: {folder} -> {target}: core sits "
                                            f"below {target}/ and may not include it")
                        elif target in rank and folder in rank and rank[target] > rank[folder]:
                            problems.append(f"{rel}:{lineno}: {folder} -> {target}: {target} is "
                                            f"above {folder} in BITLENS_CORE_LAYERS (a back edge)")
                        elif target not in rank and os.path.isdir(os.path.join(core, target)):
                            pass  # reported once above as an unplaced folder
    return problems, files, includes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the checkout (holds core/)")
    parser.add_argument("--layers", nargs="+", required=True, help="core folders, lowest first")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.root, "core")):
        print(f"check_layers: no core/ under {args.root}", file=sys.stderr)
        return 2
    problems, files, includes = check(args.root, args.layers)
    for p in problems:
        print(p)
    order = " < ".join(args.layers)
    if problems:
        print(f"layering: {len(problems)} violation(s) of {order}")
        return 1
    print(f"layering: {files} files, {includes} folder includes, all downward: {order}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
