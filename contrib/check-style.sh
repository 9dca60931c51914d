#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# CI style check: every C/C++ file of the project (*.c, *.cc, *.h) must be
# formatted as .clang-format says, so that reviews are about content, never
# layout. Checks only, changes nothing; prints the files to fix and the
# command that fixes them. Needs clang-format (Debian 12: clang-format, 14).
#
#     contrib/check-style.sh            (CLANG_FORMAT=... picks another binary)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cf=${CLANG_FORMAT:-clang-format}

if ! command -v "$cf" >/dev/null; then
    echo "check-style: $cf not found; install it: apt-get install clang-format" >&2
    exit 2
fi
version=$("$cf" --version | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p')
# A broken .clang-format would make every file look unformatted; say so once.
if ! err=$("$cf" --style=file --dump-config </dev/null 2>&1 >/dev/null); then
    echo "check-style: $cf cannot use .clang-format:" >&2
    echo "$err" >&2
    exit 2
fi

# The files: those git knows (tracked, and new ones not ignored), else a
# search of the source folders when this is not a git checkout (a tarball).
files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    while IFS= read -r -d '' f; do
        [ -f "$f" ] && files+=("$f")    # tracked but deleted: skip
    done < <(git ls-files -z --cached --others --exclude-standard \
                 -- '*.c' '*.cc' '*.h' | sort -zu)
    source_of_list="git ls-files"
else
    while IFS= read -r -d '' f; do
        files+=("$f")
    done < <(find src tools test examples -type f \
                 \( -name '*.c' -o -name '*.cc' -o -name '*.h' \) -print0 \
                 2>/dev/null | sort -z)
    source_of_list="find src tools test examples"
fi
if [ ${#files[@]} -eq 0 ]; then
    echo "check-style: no C/C++ files found (from $source_of_list)" >&2
    exit 2
fi

# clang-format in batches, one at a time (parallel runs would interleave
# their lines); a file that needs formatting gets
# "FILE:LINE:COL: error: code should be clang-formatted" lines.
set +e
out=$(printf '%s\0' "${files[@]}" | xargs -0 -n 32 "$cf" --dry-run -Werror 2>&1)
rc=$?
set -e
tag=':[0-9]+:[0-9]+: (error|warning): code should be clang-formatted'
bad=$(grep -E "^[^ ]+$tag" <<<"$out" | sed -E "s/$tag.*//" | sort -u || true)
nbad=$(grep -c . <<<"$bad" || true)
errors=
if [ "$rc" -ne 0 ] && [ "$nbad" -eq 0 ]; then
    errors=$(head -n 20 <<<"$out")   # failed, yet no file named: say why
    [ -n "$errors" ] || errors="clang-format (through xargs) exited with $rc"
fi
nerr=$(grep -c . <<<"$errors" || true)

if [ "$nbad" -eq 0 ] && [ "$nerr" -eq 0 ]; then
    echo "check-style: OK, ${#files[@]} files formatted (clang-format $version)"
    exit 0
fi
echo "check-style: FAILED, $nbad of ${#files[@]} files not formatted" \
     "(clang-format $version)"
if [ "$nerr" -gt 0 ]; then
    echo "clang-format failed:"
    sed 's/^/    /' <<<"$errors"
fi
if [ "$nbad" -gt 0 ]; then
    echo "Not formatted as .clang-format says:"
    sed 's/^/    /' <<<"$bad"
    echo "See the changes:  $cf --dry-run FILE   (or: $cf FILE | diff FILE -)"
    echo "Fix them (run in $top):"
    echo "    $cf -i $(tr '\n' ' ' <<<"$bad" | sed 's/ $//')"
    echo "(CI uses Debian 12's clang-format 14; other versions may format" \
         "some constructs differently.)"
fi
exit 1
