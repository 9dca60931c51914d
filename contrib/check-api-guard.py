#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Checks that no C++ exception can cross the C API: every function that
# libucp_ifunc exports (the global names of src/ucp/ifunc/libucp_ifunc.map)
# is defined in src/ucp/ifunc/*/*.cc with a body that is one call of a guard
# of api_guard.h,
#
#     return api_call*(__func__, [&]() { ... });
#
# or is defined noexcept with a comment just above it that says why it
# cannot throw (the comment must use the word "throw"). Prints each
# violation as FILE:LINE and exits 1. Run by "make check"; usage:
# check-api-guard.py [SRC_DIR].

import os
import re
import sys

# Exported names that are not functions of the API, and why they need no
# guard.
EXEMPT = {
    "__jit_debug_descriptor":
        "a variable (GDB's JIT descriptor, gdb_jit.cc) that GDB reads: no "
        "code runs through it",
}

# Comments, string and character literals: blanked before anything is
# parsed, so that a name or a brace inside them counts for nothing.
HIDDEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"'
                    r"|'(?:\\.|[^'\\\n])*'", re.S)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
GUARD_CALL = re.compile(r"\s*(?:return\s+)?(?:ucx_ifunc\s*::\s*)?"
                        r"(api_call\w*)\s*\(\s*__func__\s*,")
# What may stand between a definition's parameter list and its body.
SPECIFIERS = re.compile(r"\s*(?:noexcept\b(?!\s*\()|"
                        r"__attribute__\s*\(\(.*?\)\)|const\b)", re.S)


def blank(match):
    """The matched text with everything but line breaks made spaces."""
    return re.sub(r"[^\n]", " ", match.group(0))


def exported_names(map_path):
    """(name, line) of each name the version script makes global."""
    with open(map_path, encoding="utf-8") as f:
        text = HIDDEN.sub(blank, f.read())
    names, is_global = [], False
    for number, line in enumerate(text.splitlines(), 1):
        for token in re.findall(r"\w+:|[\w*]+\s*;|[{}]", line):
            if token.endswith(":"):
                is_global = token == "global:"
            elif token == "}":
                is_global = False
            elif is_global and token != "{":
                names.append((token.rstrip("; \t"), number))
    return names


def closing(code, start, open_char, close_char):
    """Index of the bracket that closes the one at code[start]."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == open_char:
            depth += 1
        elif code[i] == close_char:
            depth -= 1
            if depth == 0:
                return i
    return -1


class Definition:
    def __init__(self, path, text, code, name_at, body_at, body_end,
                 specifiers):
        self.path = path
        self.line = text.count("\n", 0, name_at) + 1
        self.text = text
        self.code = code
        self.name_at = name_at
        self.body = code[body_at + 1:body_end]
        self.specifiers = specifiers

    def guarded(self):
        """Whether the whole body is one call of an api_call* guard."""
        call = GUARD_CALL.match(self.body)
        if not call:
            return False
        end = closing(self.body, self.body.index("(", call.start(1)), "(",
                      ")")
        return end >= 0 and re.fullmatch(r"\s*;\s*", self.body[end + 1:])

    def noexcept_with_reason(self):
        """Whether it is noexcept and a comment above it says why."""
        if not re.search(r"\bnoexcept\b", self.specifiers):
            return False
        # The comments between the previous declaration and this one.
        start = max(self.code.rfind(c, 0, self.name_at) for c in ";{}") + 1
        above = COMMENT.findall(self.text[start:self.name_at])
        return any(re.search(r"\bthrow", c) for c in above)


def definitions(path, names):
    """The definitions of @a names in the file at @a path, by name."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    code = HIDDEN.sub(blank, text)
    found = {}
    for name in names:
        pattern = r"(?<![\w.>:])" + re.escape(name) + r"\s*\("
        for match in re.finditer(pattern, code):
            params_end = closing(code, match.end() - 1, "(", ")")
            if params_end < 0:
                continue
            at = params_end + 1
            while True:
                spec = SPECIFIERS.match(code, at)
                if not spec:
                    break
                at = spec.end()
            body_at = at + len(code[at:]) - len(code[at:].lstrip())
            if body_at >= len(code) or code[body_at] != "{":
                continue  # a declaration or a call
            body_end = closing(code, body_at, "{", "}")
            found.setdefault(name, []).append(
                Definition(path, text, code, match.start(), body_at, body_end,
                           code[params_end + 1:body_at]))
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "src", "ucp", "ifunc")
    map_path = os.path.join(src_dir, "libucp_ifunc.map")
    exported = exported_names(map_path)
    names = [name for name, _ in exported if name not in EXEMPT]

    found = {}
    for folder, _, entries in sorted(os.walk(src_dir)):
        for entry in sorted(entries):
            if entry.endswith(".cc"):
                path = os.path.relpath(os.path.join(folder, entry))
                for name, defs in definitions(path, names).items():
                    found.setdefault(name, []).extend(defs)

    problems = []
    for name, map_line in exported:
        if name in EXEMPT:
            print(f"check-api-guard: {name}: exempt: {EXEMPT[name]}")
            continue
        if name not in found:
            problems.append(f"{os.path.relpath(map_path)}:{map_line}: {name}: "
                            f"exported, but defined in no {src_dir}/*.cc")
            continue
        for d in found[name]:
            if not (d.guarded() or d.noexcept_with_reason()):
                problems.append(
                    f"{d.path}:{d.line}: {name}: not guarded (the whole "
                    "body one 'return api_call*(__func__, [&]() {...});'), "
                    "nor noexcept with a comment saying why it cannot throw")

    for problem in problems:
        print(problem)
    if problems:
        print(f"check-api-guard: FAILED, {len(problems)} exported function(s) "
              "may let a C++ exception cross the C API")
        return 1
    print(f"check-api-guard: {len(names)} exported functions, each guarded "
          "or noexcept with a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
