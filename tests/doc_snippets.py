#!/usr/bin/env python3
"""Checks that the code blocks the docs copy from the tree still match it.

A fenced code block in README.md or docs/*.md whose previous line is
`<!-- snippet: PATH -->` must appear verbatim (whitespace included) in PATH, relative to
the repository root. Exit 0 when every such block matches, 1 naming each one that does not.

  tests/doc_snippets.py [--root DIR]
"""
import argparse
import glob
import os
import re
import sys

SNIPPET = re.compile(r"^<!-- snippet: (\S+) -->\n```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    root = os.path.abspath(parser.parse_args().root)
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    problems, checked = [], 0
    for page in pages:
        text = open(page, encoding="utf-8").read()
        for match in SNIPPET.finditer(text):
            source, block = match.group(1), match.group(2)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{os.path.relpath(page, root)}:{line}"
            path = os.path.join(root, source)
            if not os.path.isfile(path):
                problems.append(f"{where}: snippet of {source}, which does not exist")
            elif block not in open(path, encoding="utf-8").read():
                problems.append(f"{where}: snippet no longer matches {source}")
            checked += 1
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"doc_snippets: {checked} snippets match their files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
