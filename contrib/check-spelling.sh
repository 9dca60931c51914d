#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# CI spelling check: codespell over the code and the documentation (the
# files git knows, less measured data, images and generated files), so typos
# in comments, messages and docs are caught before review. Words that are
# right here but flagged go in contrib/codespell-ignore.txt. Needs codespell.
#
#     contrib/check-spelling.sh          (CODESPELL=... picks another binary)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
codespell=${CODESPELL:-codespell}
ignore=contrib/codespell-ignore.txt

if ! command -v "$codespell" >/dev/null; then
    echo "check-spelling: $codespell not found; install it: apt-get install codespell" >&2
    exit 2
fi
version=$("$codespell" --version)

# Not checked: measured data, images, what autotools or a build makes, and
# the ABI reference (abidw output, contrib/check-abi.sh).
skip='^(docs/data/|docs/img/|build/|autom4te\.cache/|config/aux/|config/m4/)'
skip+='|(^|/)(Makefile\.in|configure|aclocal\.m4|config\.status|libtool)$'
skip+='|\.(png|jpg|svg|pdf|csv|abi|o|lo|la|so|a|pyc|tar\.gz)$|~$'

# The files: those git knows (tracked, and new ones not ignored), else a
# search of the tree when this is not a git checkout (a tarball).
files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    while IFS= read -r -d '' f; do
        [ -f "$f" ] && files+=("$f")    # tracked but deleted: skip
    done < <(git ls-files -z --cached --others --exclude-standard |
             sort -zu | grep -zEv "$skip")
else
    while IFS= read -r -d '' f; do
        files+=("$f")
    done < <(find . -type f -not -path './.git/*' -not -path '*/.deps/*' \
                 -not -path '*/.libs/*' -not -path '*/__pycache__/*' \
                 -printf '%P\0' | sort -z | grep -zEv "$skip")
fi
if [ ${#files[@]} -eq 0 ]; then
    echo "check-spelling: no files found" >&2
    exit 2
fi

# -H: check hidden files too (.ci/run, .gitignore). Binary files are
# skipped by codespell itself.
set +e
out=$("$codespell" -H --ignore-words="$ignore" -- "${files[@]}" 2>&1)
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
    echo "check-spelling: OK, ${#files[@]} files (codespell $version)"
    exit 0
fi
findings=$(grep -E '^[^ ]+:[0-9]+: .* ==> ' <<<"$out" || true)
n=$(grep -c . <<<"$findings" || true)
if [ "$n" -eq 0 ]; then    # failed without a finding: say why
    echo "check-spelling: FAILED, codespell exited with $rc (codespell $version):"
    sed 's/^/    /' <<<"$out"
    exit 2
fi
echo "check-spelling: FAILED, $n misspellings in" \
     "$(cut -d: -f1 <<<"$findings" | sort -u | wc -l) files (codespell $version)"
sed 's/^/    /' <<<"$findings"
echo "Fix each word in its file, or let codespell fix them, asking each time:"
echo "    codespell -i 3 -w -I $ignore FILE..."
echo "A word that is right here (a name, an identifier): add it, in lower case,"
echo "to $ignore."
exit 1
