#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# CI documentation check: every relative link of the Markdown files (the
# files git knows) names a file or directory that exists, and a link to a
# heading (FILE.md#anchor, #anchor) names a heading that exists, as GitHub
# makes anchors; the programs the README shows in full are the files,
# byte for byte; the README stays at most README_MAX_LINES lines (its
# details live in docs/). Changes nothing.
#
#     contrib/check-docs.py [TOP]

import os
import re
import subprocess
import sys

# 200, and the Python section (issue 33) of at most 30
README_MAX_LINES = 230
# Programs the README includes verbatim, each as one fenced C block.
README_LISTINGS = ["examples/hello/hello_target.c",
                   "examples/hello/hello_source.c"]

LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files(top):
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others",
             "--exclude-standard", "--", "*.md"],
            cwd=top, check=True, capture_output=True).stdout
        files = sorted({f for f in out.decode().split("\0") if f})
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs
                       if not d.startswith(".") and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(root, n), top)
                      for n in names if n.endswith(".md")]
    return [f for f in files if os.path.isfile(os.path.join(top, f))]


def prose_lines(text):
    """(line number, line) of the text outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(text):
    """The anchors GitHub gives the headings of a Markdown text."""
    seen = {}
    result = set()
    for _, line in prose_lines(text):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = match.group(1).lower()
        slug = re.sub(r"[^\w\- ]", "", slug)
        slug = slug.replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else "%s-%d" % (slug, count))
    return result


def check_links(top, files):
    problems = []
    cache = {}

    def anchors_of(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = anchors(f.read())
        return cache[path]

    for name in files:
        path = os.path.join(top, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for number, line in prose_lines(text):
            line = re.sub(r"`[^`]*`", "", line)   # code spans are no links
            for match in LINK.finditer(line):
                target = match.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue                       # http:, mailto:, ...
                file_part, _, anchor = target.partition("#")
                dest = (os.path.normpath(os.path.join(os.path.dirname(path),
                                                      file_part))
                        if file_part else path)
                where = "%s:%d" % (name, number)
                if not os.path.exists(dest):
                    problems.append("%s: link to %s: no such file"
                                    % (where, target))
                elif anchor and dest.endswith(".md"):
                    if anchor not in anchors_of(dest):
                        problems.append("%s: link to %s: no such heading"
                                        % (where, target))
    return problems


def check_readme(top):
    problems = []
    path = os.path.join(top, "README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.count("\n")
    if lines > README_MAX_LINES:
        problems.append("README.md: %d lines, more than %d: move details "
                        "into docs/" % (lines, README_MAX_LINES))
    for listing in README_LISTINGS:
        with open(os.path.join(top, listing), encoding="utf-8") as f:
            code = f.read()
        if ("```c\n" + code + "```\n") not in text:
            problems.append("README.md: does not show %s as it is (one "
                            "```c block, byte for byte)" % listing)
    return problems, lines


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    top = os.path.abspath(top)
    files = markdown_files(top)
    problems = check_links(top, files)
    readme_problems, readme_lines = check_readme(top)
    problems += readme_problems
    if problems:
        print("check-docs: FAILED, %d problems" % len(problems))
        for problem in problems:
            print("    " + problem)
        return 1
    print("check-docs: OK, links of %d Markdown files resolve; README.md "
          "has %d lines and shows %d programs as they are"
          % (len(files), readme_lines, len(README_LISTINGS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
