#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Lists which files of the runtime (src/ucp/ifunc) include or call which, and
# fails if the dependencies form a circle or a layer reaches one above it.
# The layers are the folders of src/ucp/ifunc: a file's folder is its
# layer, and LAYERS below orders them (the one list of the layering;
# docs/design.md describes each folder). A module is a file name without
# its extension (frame.h + frame.cc); it "calls" another when it uses a name
# that the other's header declares at namespace scope. The exported C
# functions (libucp_ifunc.map) are shims in the folder "api", each named
# once, where it is defined: no shim calls another and nothing inside
# calls one. Run by "make check"; usage: check-layering.py [SRC_DIR].

import os
import re
import sys

# The folders of src/ucp/ifunc, lowest first. A module may use its own
# folder (without a circle) and the folders below it.
LAYERS = [
    "base",     # logging, config, CPU facts, counters: no message yet
    "format",   # what lies on the wire: frames, code images, code ids
    "sandbox",  # the verifier and runtime of sandboxed code
    "load",     # registry, trust, imports, linking, the per-context state
    "deliver",  # the core: build, choose the code, send, claim, run
    "paths",    # channels and active messages over the core
    "peer",     # the default path: peers, set-up, proofs
    "api",      # the exported C functions: shims over the layers
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


def source_files(src_dir):
    """(folder, file name) of each .h/.cc under src_dir, and problems."""
    found, problems = [], []
    for entry in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, entry)
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if name.endswith((".h", ".cc")):
                    found.append((entry, name))
        elif entry.endswith((".h", ".cc")):
            problems.append(f"{entry}: outside the layer folders; move it "
                            f"into one of {', '.join(LAYERS)}")
    return found, problems


def dependencies(src_dir, found):
    files = sorted(name for _, name in found)
    where = {name: os.path.join(src_dir, folder, name)
             for folder, name in found}
    code = {f: code_of(where[f]) for f in files}
    raw = {}
    for f in files:
        with open(where[f], encoding="utf-8") as text:
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


def exported_names(src_dir):
    """The C functions libucp_ifunc.map exports."""
    with open(os.path.join(src_dir, "libucp_ifunc.map"), encoding="utf-8") as f:
        return set(re.findall(r"^\s+(ucp_\w+);", f.read(), re.M))


def shim_problems(src_dir, found):
    """An exported function defined outside api/, or named a second time:
    a shim that calls another, or code inside that calls one."""
    problems, defined = [], {}
    names = exported_names(src_dir)
    for folder, name in found:
        code = code_of(os.path.join(src_dir, folder, name))
        for used in re.findall(r"\b(ucp_\w+)\s*\(", code):
            if used not in names:
                continue
            if folder != "api":
                problems.append(f"{folder}/{name} calls or defines the "
                                f"exported {used}: exported functions are "
                                "shims in api/; call what its shim calls")
            elif used in defined:
                problems.append(f"{folder}/{name} names the exported {used} "
                                f"again ({defined[used]} defines it): a shim "
                                "calls what another shim calls, not the "
                                "shim")
            else:
                defined[used] = f"{folder}/{name}"
    for missing in sorted(names - set(defined)):
        problems.append(f"{missing}: exported, but no shim in api/ "
                        "defines it")
    return problems


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
    found, problems = source_files(src_dir)
    seen = {}
    for folder, name in found:
        if name in seen and seen[name] != folder:
            problems.append(f"{name}: in both {seen[name]} and {folder}")
        seen[name] = folder
    modules, includes, calls = dependencies(src_dir, found)
    problems += shim_problems(src_dir, found)
    folder_of = {module_of(name): folder for folder, name in found}
    layer_of = {}
    for mod in modules:
        if folder_of[mod] in LAYERS:
            layer_of[mod] = LAYERS.index(folder_of[mod])
        else:
            problems.append(f"{mod}: folder {folder_of[mod]} is not a layer; "
                            f"add it to LAYERS in "
                            f"{os.path.basename(__file__)} and to "
                            "docs/design.md")
    for mod in modules:
        inc, use = includes.get(mod, set()), calls.get(mod, set())
        print(f"{mod:14} [{folder_of[mod]}]"
              f"  includes: {', '.join(sorted(inc)) or '-'}"
              f"  calls: {', '.join(sorted(use)) or '-'}")
        for target in sorted(inc | use):
            if (mod in layer_of and target in layer_of and
                    layer_of[target] > layer_of[mod]):
                problems.append(f"{mod} ({folder_of[mod]}) uses "
                                f"{target} ({folder_of[target]}), "
                                "a layer above it")

    edges = {m: includes.get(m, set()) | calls.get(m, set()) for m in modules}
    circle = find_circle(modules, edges)
    if circle:
        problems.append("circle: " + " -> ".join(circle))

    for problem in problems:
        print("check-layering: " + problem)
    if problems:
        print(f"check-layering: FAILED, {len(problems)} problem(s)")
        return 1
    print(f"check-layering: {len(modules)} modules in {len(LAYERS)} layers, "
          "no circle, every layer uses only layers below it, every exported "
          "function a shim in api/ that nothing calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
