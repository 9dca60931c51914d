#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Lists which files of the runtime (src/ucp/ifunc) include or call which, and
# fails if the dependencies form a circle or a step reaches one above it.
# A module is a file name without its extension (frame.h + frame.cc); it
# "calls" another when it uses a name that the other's header declares at
# namespace scope. Run by "make check"; usage: check-layering.py [SRC_DIR].

import os
import re
import sys

# The steps, lowest first (docs/design.md has the table). A module may use
# its own layer (without a circle) and the layers below it.
LAYERS = [
    ("base", ["api_guard", "arch", "tls", "isa", "config", "ucx_compat", "code_id", "image",
              "image_check", "sandbox_layout", "sandbox_verify", "peer_log", "frame", "gdb_jit", "counters"]),
    ("sandbox", ["sandbox"]),
    ("register", ["registry"]),
    ("isa frames", ["multi_isa"]),
    ("trust", ["trust", "resolve"]),
    ("link", ["link"]),
    ("state", ["context"]),
    ("run", ["run"]),
    ("api", ["msg", "send", "poll", "version", "code_once"]),
    ("paths", ["channel", "am"]),
    ("peers", ["peer_net", "peer_auth", "peer_wire", "peer"]),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
# Names a header introduces at namespace scope.
DECLARED = [
    re.compile(r"^\s*(?:class|struct|enum(?:\s+class)?)\s+(\w+)\s*[:{;]"),
    re.compile(r"^\s*using\s+(\w+)\s*="),
    re.compile(r"^\s*(?:static\s+)?constexpr\s+[\w:<>\s]+?\s(\w+)\s*[=({]"),
    re.compile(r"^\s*(?:template\s*<[^>]*>\s*)?(?:inline\s+)?"
               r"(?:const\s+)?[\w:<>*&\s]+?[\s*&](\w+)\s*\("),
]
IGNORED = {"if", "for", "while", "switch", "return", "sizeof", "namespace"}


def module_of(path):
    return os.path.splitext(os.path.basename(path))[0]


def code_of(path):
    """The code without comments, strings and include lines."""
    with open(path, encoding="utf-8") as f:
        code = STRING.sub('""', COMMENT.sub(" ", f.read()))
    return re.sub(r"^\s*#\s*include[^\n]*", "", code, flags=re.M)


def declared_names(header_code):
    """Names declared outside any braces but those of namespaces."""
    names, depth = set(), 0
    for line in header_code.splitlines():
        if depth == 0 and not line.startswith("#"):
            for pattern in DECLARED:
                match = pattern.match(line)
                if match and match.group(1) not in IGNORED:
                    names.add(match.group(1))
                    break
        if re.match(r"^\s*namespace\b", line):
            continue
        depth += line.count("{") - line.count("}")
        depth = max(depth, 0)
    return names


def dependencies(src_dir):
    files = sorted(f for f in os.listdir(src_dir)
                   if f.endswith((".h", ".cc")))
    code = {f: code_of(os.path.join(src_dir, f)) for f in files}
    raw = {}
    for f in files:
        with open(os.path.join(src_dir, f), encoding="utf-8") as text:
            raw[f] = text.read()
    exported = {}
    for f in files:
        if f.endswith(".h"):
            for name in declared_names(code[f]):
                exported.setdefault(name, module_of(f))

    includes, calls = {}, {}
    for f in files:
        mod = module_of(f)
        for inc in INCLUDE.findall(raw[f]):
            target = module_of(inc)
            if target != mod and (target + ".h") in files:
                includes.setdefault(mod, set()).add(target)
        used = set(re.findall(r"\b[A-Za-z_]\w*\b", code[f]))
        for name in used:
            target = exported.get(name)
            if target and target != mod:
                calls.setdefault(mod, set()).add(target)
    modules = sorted({module_of(f) for f in files})
    return modules, includes, calls


def find_circle(modules, edges):
    state, stack = {}, []

    def visit(mod):
        state[mod] = "open"
        stack.append(mod)
        for nxt in sorted(edges.get(mod, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                circle = visit(nxt)
                if circle:
                    return circle
        state[mod] = "done"
        stack.pop()
        return None

    for mod in modules:
        if mod not in state:
            circle = visit(mod)
            if circle:
                return circle
    return None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "src", "ucp", "ifunc")
    modules, includes, calls = dependencies(src_dir)
    layer_of = {m: i for i, (_, ms) in enumerate(LAYERS) for m in ms}

    problems = []
    for mod in modules:
        if mod not in layer_of:
            problems.append(f"{mod}: not placed in a layer; add it to LAYERS "
                            f"in {os.path.basename(__file__)} and to the "
                            "step table of docs/design.md")
    for mod in modules:
        inc, use = includes.get(mod, set()), calls.get(mod, set())
        print(f"{mod:12} [{LAYERS[layer_of[mod]][0] if mod in layer_of else '?'}]"
              f"  includes: {', '.join(sorted(inc)) or '-'}"
              f"  calls: {', '.join(sorted(use)) or '-'}")
        for target in sorted(inc | use):
            if (mod in layer_of and target in layer_of and
                    layer_of[target] > layer_of[mod]):
                problems.append(f"{mod} ({LAYERS[layer_of[mod]][0]}) uses "
                                f"{target} ({LAYERS[layer_of[target]][0]}), "
                                "a step above it")

    edges = {m: includes.get(m, set()) | calls.get(m, set()) for m in modules}
    circle = find_circle(modules, edges)
    if circle:
        problems.append("circle: " + " -> ".join(circle))

    for problem in problems:
        print("check-layering: " + problem)
    if problems:
        print(f"check-layering: FAILED, {len(problems)} problem(s)")
        return 1
    print(f"check-layering: {len(modules)} modules, no circle, every step "
          "uses only steps below it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
