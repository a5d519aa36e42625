#!/usr/bin/env python3
"""Shows that check_layers.py catches what it is for, so it cannot pass silently: on a copy of
core/ it must pass as the copy is, then fail, naming file:line and the edge, once a back edge
is added (the lowest existing layer including the highest, and the io -> exec edge that the
ggml / shape-inference moves removed), once an unplaced folder appears, and once core includes
widgets/. A listed folder that does not exist must not fail it.

Usage: test_check_layers.py --root CHECKOUT --layers jobs kernels ir ..."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")
failures = []


def run(root, layers):
    p = subprocess.run([sys.executable, CHECK, "--root", root, "--layers", *layers],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(name, root, layers, rc, *needles):
    got, out = run(root, layers)
    missing = [n for n in needles if n not in out]
    if got != rc or missing:
        failures.append(f"{name}: exit {got} (wanted {rc}), missing {missing}\n{out}")
    else:
        print(f"ok   {name}")


def first_source(folder):
    for base, dirs, names in os.walk(folder):
        dirs.sort()
        for n in sorted(names):
            if n.endswith((".h", ".cpp")):
                return os.path.join(base, n)
    raise SystemExit(f"no source file under {folder}")


def inject(path, line):
    """Puts `line` after the first line of `path`; returns the 1-based line number it got."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    lines.insert(1, line + "\n")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return 2


def fresh_copy(src, tmp, name):
    root = os.path.join(tmp, name)
    shutil.copytree(os.path.join(src, "core"), os.path.join(root, "core"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--layers", nargs="+", required=True)
    args = parser.parse_args()
    layers = args.layers
    existing = [l for l in layers if os.path.isdir(os.path.join(args.root, "core", l))]
    low, high = existing[0], existing[-1]
    with tempfile.TemporaryDirectory(prefix="bitlens-layering-") as tmp:
        root = fresh_copy(args.root, tmp, "clean")
        expect("the checkout as it is passes", root, layers, 0, "all downward")
        expect("a listed folder that does not exist is fine", root, layers + ["not_yet_made"], 0)

        root = fresh_copy(args.root, tmp, "low_includes_high")
        path = first_source(os.path.join(root, "core", low))
        line = inject(path, f'#include "{high}/injected_back_edge.h"')
        rel = os.path.relpath(path, root)
        expect(f"{low} including {high} fails", root, layers, 1,
               f"{rel}:{line}: {low} -> {high}", "back edge")

        if "io" in existing and "exec" in existing and layers.index("io") < layers.index("exec"):
            root = fresh_copy(args.root, tmp, "io_includes_exec")
            path = os.path.join(root, "core", "io", "onnx.cpp")
            line = inject(path, '#include "exec/executor.h"')
            expect("io/onnx.cpp including exec again fails", root, layers, 1,
                   f"core/io/onnx.cpp:{line}: io -> exec")

        root = fresh_copy(args.root, tmp, "unplaced_folder")
        os.makedirs(os.path.join(root, "core", "newstuff"))
        with open(os.path.join(root, "core", "newstuff", "thing.h"), "w") as f:
            f.write('#pragma once\n#include "jobs/result.h"\n')
        expect("a core folder the list does not place fails", root, layers, 1,
               "core/newstuff/: not placed in BITLENS_CORE_LAYERS")

        root = fresh_copy(args.root, tmp, "core_includes_widgets")
        path = first_source(os.path.join(root, "core", low))
        line = inject(path, '#include "widgets/main_window.h"')
        expect("core including widgets/ fails", root, layers, 1,
               f"{os.path.relpath(path, root)}:{line}: {low} -> widgets")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
