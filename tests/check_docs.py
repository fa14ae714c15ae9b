#!/usr/bin/env python3
"""Checks that README.md and docs/*.md stay true to the tree.

- Every code block whose previous line is `<!-- snippet: PATH -->` appears verbatim
  (whitespace included) in PATH, relative to the repository root.
- Every relative link ([text](path) or [text](path#anchor)) names a file of the tree, and
  an anchor names a heading of that page (GitHub's slugs).
- Every page in docs/ is linked from README.md, and every page of docs/studies/ from
  docs/studies/README.md (their links are checked too).

Exit 0 when all hold, 1 naming each problem.

  tests/check_docs.py [--root DIR]
"""
import argparse
import glob
import os
import re
import sys

SNIPPET = re.compile(r"^<!-- snippet: (\S+) -->\n```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.MULTILINE)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    root = os.path.abspath(parser.parse_args().root)
    readme = os.path.join(root, "README.md")
    docs = sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    studies_index = os.path.join(root, "docs", "studies", "README.md")
    studies = sorted(set(glob.glob(os.path.join(root, "docs", "studies", "*.md"))) - {studies_index})
    problems, snippets, links = [], 0, 0
    linked_from_readme, linked_from_studies = set(), set()
    for page in [readme] + docs + [studies_index] + studies:
        text = open(page, encoding="utf-8").read()
        name = os.path.relpath(page, root)
        for match in SNIPPET.finditer(text):
            source, block = match.group(1), match.group(2)
            where = f"{name}:{text.count(chr(10), 0, match.start()) + 1}"
            path = os.path.join(root, source)
            if not os.path.isfile(path):
                problems.append(f"{where}: snippet of {source}, which does not exist")
            elif block not in open(path, encoding="utf-8").read():
                problems.append(f"{where}: snippet no longer matches {source}")
            snippets += 1
        prose = FENCE.sub("", text)
        for target in LINK.findall(prose):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path_part, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(page), path_part)) if path_part else page
            links += 1
            if not os.path.exists(path):
                problems.append(f"{name}: link to {target}, which does not exist")
                continue
            if page == readme:
                linked_from_readme.add(path)
            if page == studies_index:
                linked_from_studies.add(path)
            if anchor and path.endswith(".md") and anchor not in anchors(path):
                problems.append(f"{name}: link to {target}: no such heading in {os.path.relpath(path, root)}")
    for page in docs:
        if page not in linked_from_readme:
            problems.append(f"{os.path.relpath(page, root)}: not linked from README.md")
    for page in studies:
        if page not in linked_from_studies:
            problems.append(f"{os.path.relpath(page, root)}: not linked from docs/studies/README.md")
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"check_docs: {snippets} snippets and {links} links resolve; every docs/ page is linked from README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
