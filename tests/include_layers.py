#!/usr/bin/env python3
"""Checks that no source file includes from a higher layer than its own.

The layer order is the ```layers block of docs/architecture.md: one folder per line, lowest
first. A file belongs to the layer of the nearest listed folder above it (data/tasks/ is in
data's layer) and may include files of its own layer or of any layer listed before it.
Includes that are not files of the tree (LibTorch, generated headers) are not checked;
tests/ may include anything.

  tests/include_layers.py [--root DIR] [--add-include FILE=HEADER ...]

--add-include pretends FILE also includes HEADER (the ctest that shows the check fails on an
upward include). Exit 0 when every include goes down or sideways, 1 naming each one that
goes up, 2 for a missing or malformed layer list.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
CHECKED_TOP_FOLDERS = ("core", "data", "experiments")


def read_layers(architecture_md):
    try:
        text = open(architecture_md, encoding="utf-8").read()
    except OSError as error:
        sys.exit(f"include_layers: cannot read {architecture_md}: {error.strerror}")
    block = re.search(r"^```layers\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    if not block:
        print(f"include_layers: {architecture_md} has no ```layers block", file=sys.stderr)
        sys.exit(2)
    layers = []
    for line in block.group(1).splitlines():
        folder = line.split("#", 1)[0].strip().rstrip("/")
        if folder:
            layers.append(folder)
    if len(set(layers)) != len(layers):
        print(f"include_layers: a folder is listed twice in {architecture_md}", file=sys.stderr)
        sys.exit(2)
    return layers


def layer_of(path, layers):
    """Index of the nearest listed folder above `path` (a path relative to the root), or None."""
    best = None
    for index, folder in enumerate(layers):
        if path.startswith(folder + "/") and (best is None or len(folder) > len(layers[best])):
            best = index
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--add-include", action="append", default=[], metavar="FILE=HEADER")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    layers = read_layers(os.path.join(root, "docs", "architecture.md"))

    includes = {}  # file -> [header], paths relative to the root
    for top in CHECKED_TOP_FOLDERS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith((".h", ".cpp")):
                    path = os.path.relpath(os.path.join(folder, name), root)
                    includes[path] = INCLUDE.findall(open(os.path.join(root, path), encoding="utf-8").read())
    for extra in args.add_include:
        source, _, header = extra.partition("=")
        includes.setdefault(source, []).append(header)

    problems = []
    for source in sorted(includes):
        own = layer_of(source, layers)
        if own is None:
            problems.append(f"{source}: in no layer of docs/architecture.md")
            continue
        for header in includes[source]:
            if not os.path.isfile(os.path.join(root, header)):
                continue  # not a file of the tree: LibTorch, a generated header
            theirs = layer_of(header, layers)
            if theirs is None:
                problems.append(f"{source}: includes {header}, which is in no layer of docs/architecture.md")
            elif theirs > own:
                problems.append(f"{source} (layer {layers[own]}) includes {header} from the higher layer {layers[theirs]}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"include_layers: {len(problems)} include(s) against the layer order of docs/architecture.md")
        return 1
    print(f"include_layers: {len(includes)} files, every include goes down or sideways ({' < '.join(layers)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
