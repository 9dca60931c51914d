"""LLVM bitcode images (ucx-ifunc-cc --bitcode, --bitcode-only).

For each target triple, every source is compiled to an LLVM module with
clang (-target TRIPLE -emit-llvm -O2 -fPIC -fno-common, no -march: the
target compiles it for its own CPU), the modules are linked (llvm-link),
everything but NAME_main is internalized and what it does not reach is
dropped (opt: internalize, globaldce). The result is checked against the
rules native images follow (docs/toolchain.md), with the same messages, and
wrapped in an image of version 4 (image_format.py, docs/design.md).

The modules are read as text (llvm-dis): the few facts the checks need
(what each global is, whether it is defined, thread-local, weak, hidden,
and what each definition refers to) are on the lines that declare them.
"""

import os
import platform
import re
import shutil
from dataclasses import dataclass, field
from typing import Dict, Set

from . import image_format as fmt
from .errors import UserError

CLANG = "clang-14"
LLVM_LINK = "llvm-link-14"
OPT = "opt-14"
LLVM_DIS = "llvm-dis-14"
LLVM_PACKAGES = "clang-14 llvm-14"

# After the user's flags, so that they win. UCX_IFUNC_BITCODE tells a
# source that it is being built as bitcode (a test picks its image by it).
# Vectorising is left to the target: done here it would keep the baseline
# ISA's width, which the target's -O2 for its own CPU does not widen
# again. So is partial and runtime unrolling, which leaves a loop the
# target's vectoriser handles worse (a key scan ran 1.25x slower). Loops
# of a known count are still unrolled whole here, and no loop is marked
# "do not unroll" (-fno-unroll-loops would: the target could not unroll
# either, and csmith's programs ran 1.4x slower than the native image).
COMPILE_FLAGS = ["-emit-llvm", "-c", "-O2", "-fno-vectorize",
                 "-fno-slp-vectorize", "-mllvm", "-unroll-runtime=false",
                 "-mllvm", "-unroll-allow-partial=false", "-fPIC",
                 "-fno-common", "-w", "-DUCX_IFUNC_BITCODE=1"]
# The user's flags that say nothing of what the code means, or that name
# one ISA: the target chooses its CPU and optimises at -O2 itself.
DROPPED_FLAG_PREFIXES = ("-O", "-g", "-m", "-Wa,", "-Xassembler")

# Names the image linker gives meanings (asm_rewrite.GOT_PTR, ...).
RESERVED = ("__ucp_ifunc_got_ptr",)
RESERVED_PREFIX = "__ucp_ifunc_import."
THROW_SYMBOLS = ("__cxa_throw", "__cxa_rethrow")
CXX_STATIC_INIT_PREFIX = "_GLOBAL__sub_I_"


@dataclass(frozen=True)
class Triple:
    name: str           # as given to --bitcode and clang's -target
    arch: str           # first field, as uname -m says it
    e_machine: int      # ELF machine of the ISA
    display: str
    headers_package: str  # Debian's cross package of its C library headers


TRIPLES = (
    Triple("x86_64-linux-gnu", "x86_64", fmt.EM_X86_64, "x86-64",
           "libc6-dev-amd64-cross"),
    Triple("aarch64-linux-gnu", "aarch64", fmt.EM_AARCH64, "aarch64",
           "libc6-dev-arm64-cross"),
    Triple("powerpc64le-linux-gnu", "ppc64le", fmt.EM_PPC64, "ppc64le",
           "libc6-dev-ppc64el-cross"),
    Triple("riscv64-linux-gnu", "riscv64", fmt.EM_RISCV, "riscv64",
           "libc6-dev-riscv64-cross"),
)
BY_NAME = {t.name: t for t in TRIPLES}
# The default set besides the native images' triples (docs/toolchain.md).
DEFAULT = ("x86_64-linux-gnu", "aarch64-linux-gnu", "powerpc64le-linux-gnu")


def parse_triples(text, option="--bitcode"):
    """The Triple list of 'T1[,T2...]', in order."""
    found = []
    for name in text.split(","):
        name = name.strip()
        triple = BY_NAME.get(name)
        if triple is None:
            raise UserError("%s: unknown target triple '%s'; known: %s"
                            % (option, name, ", ".join(BY_NAME)))
        if triple in found:
            raise UserError("%s: '%s' is given twice" % (option, name))
        found.append(triple)
    return found


def default_triples(native_triplets):
    """The native images' triples, then the documented ones."""
    names = [n for n in native_triplets if n in BY_NAME]
    return [BY_NAME[n] for n in names + [d for d in DEFAULT if d not in names]]


def host_arch():
    return platform.machine()


def check_tools():
    for program in (CLANG, LLVM_LINK, OPT, LLVM_DIS):
        if shutil.which(program) is None:
            raise UserError("--bitcode: %s is not installed (Debian: apt "
                            "install %s)" % (program, LLVM_PACKAGES))


# --- reading a module's text -------------------------------------------

_NAME = r'@("(?:[^"\\]|\\.)*"|[-a-zA-Z$._0-9]+)'
_NAME_RE = re.compile(_NAME)
_GLOBAL_RE = re.compile(r"^%s = (.*)$" % _NAME)
_FUNCTION_RE = re.compile(r"^(define|declare) (.*?)%s\(" % _NAME)
_TRIPLE_RE = re.compile(r'^target triple = "([^"]*)"', re.M)
LINKAGES = {"private", "internal", "available_externally", "linkonce",
            "weak", "common", "appending", "extern_weak", "linkonce_odr",
            "weak_odr", "external"}
_KINDS = {"global": "variable", "constant": "variable", "alias": "alias",
          "ifunc": "ifunc"}


def _unquote(name):
    if name.startswith('"'):
        return re.sub(r"\\([0-9A-Fa-f]{2})",
                      lambda m: chr(int(m.group(1), 16)), name[1:-1])
    return name


@dataclass
class Global:
    name: str
    kind: str  # function, variable, alias, ifunc
    defined: bool
    linkage: str  # "" for external definitions
    thread_local: bool = False
    visibility: str = "default"
    personality: bool = False  # a function with C++ exception handling
    refs: Set[str] = field(default_factory=set)  # globals it refers to

    @property
    def weak_import(self):
        return self.linkage == "extern_weak"

    @property
    def exported(self):
        return self.defined and self.linkage in ("", "weak", "weak_odr",
                                                 "linkonce", "linkonce_odr")


@dataclass
class Module:
    triple: str
    globals: Dict[str, Global]

    def reachable(self, roots):
        """Names of the globals that roots refer to, transitively."""
        seen, todo = set(), [r for r in roots if r in self.globals]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += [r for r in self.globals[name].refs
                     if r in self.globals and r not in seen]
        return seen

    def imports(self):
        """The globals declared, not defined (LLVM's intrinsics aside)."""
        return sorted((g for g in self.globals.values()
                       if not g.defined and not g.name.startswith("llvm.")),
                      key=lambda g: g.name)


def _attributes(words):
    linkage, visibility, tls = "", "default", False
    for word in words:
        if word in LINKAGES:
            linkage = word
        elif word in ("hidden", "protected"):
            visibility = word
        elif word.startswith("thread_local"):
            tls = True
    return linkage, visibility, tls


def parse_module(text):
    """The Module that llvm-dis wrote as text."""
    found = _TRIPLE_RE.search(text)
    module = Module(found.group(1) if found else "", {})
    current = None  # the function whose body is being read
    for line in text.splitlines():
        if current is not None:
            if line == "}":
                current = None
            else:
                current.refs.update(_unquote(n)
                                    for n in _NAME_RE.findall(line))
            continue
        function = _FUNCTION_RE.match(line)
        if function:
            linkage, visibility, _ = _attributes(function.group(2).split())
            defined = function.group(1) == "define"
            if not defined and linkage == "":
                linkage = "external"
            g = Global(_unquote(function.group(3)), "function", defined,
                       linkage, visibility=visibility,
                       personality=" personality " in line)
            module.globals[g.name] = g
            if defined and line.rstrip().endswith("{"):
                current = g
            continue
        var = _GLOBAL_RE.match(line)
        if var:
            words = var.group(2).split()
            kind_at = next((i for i, w in enumerate(words) if w in _KINDS),
                           len(words))
            linkage, visibility, tls = _attributes(words[:kind_at])
            kind = _KINDS.get(words[kind_at] if kind_at < len(words)
                              else "", "variable")
            defined = linkage not in ("external", "extern_weak")
            g = Global(_unquote(var.group(1)), kind, defined, linkage, tls,
                       visibility)
            rest = " ".join(words[kind_at + 1:])
            g.refs = {_unquote(n) for n in _NAME_RE.findall(rest)}
            module.globals[g.name] = g
    return module


# --- one triple's build --------------------------------------------------

def _headers_dir(triple):
    return "/usr/%s/include" % triple.name


def header_flags(triple, source):
    """For a C source and another ISA than this host's: where Debian's
    cross packages put that ISA's C library headers. clang finds them by
    itself only where the ISA's cross gcc is installed; with these flags
    the bitcode is the same whether it is or not (the order is gcc's: the
    compiler's own headers, the ISA's, then the shared /usr/include)."""
    if triple.arch == host_arch() or not source.endswith(".c") or \
            not os.path.isdir(_headers_dir(triple)):
        return []
    return ["-nostdlibinc", "-idirafter", _headers_dir(triple),
            "-idirafter", "/usr/include"]


class BitcodeBuild:
    """The bitcode image of one triple, built in the Builder's work
    directory (cli.Builder: its jobs, temp names, flags, checks)."""

    def __init__(self, builder, triple, user_flags):
        self.builder = builder
        self.triple = triple
        self.user_flags = user_flags
        self.dir = os.path.join(builder.workdir, "bitcode-" + triple.name)
        os.makedirs(self.dir, exist_ok=True)
        self.compiles = []
        self.module = None  # the linked module, before internalizing

    def path(self, index, source, suffix):
        stem = os.path.splitext(os.path.basename(source))[0]
        return os.path.join(self.dir, "%d-%s%s" % (index, stem, suffix))

    def start(self):
        from .cli import Job
        b = self.builder
        for index, source in enumerate(b.opts.sources):
            out = self.path(index, source, ".bc")
            cmd = ([CLANG, "-target", self.triple.name] +
                   b.prototype_flags() + self.user_flags + COMPILE_FLAGS +
                   header_flags(self.triple, source) + [source, "-o", out])
            self.compiles.append((out, Job(b, cmd, source, quiet=True)))

    def run(self, cmd, what):
        from .cli import Job
        return Job(self.builder, cmd, what, capture=True).wait()

    def wait_compiles(self):
        from . import conventions
        b = self.builder
        for source, (out, job) in zip(b.opts.sources, self.compiles):
            if job.succeeded():
                continue
            self.refuse_missing_headers(source, job.diagnostics)
            job.quiet = False
            job.result = (job.result[0], job.result[1], job.diagnostics)
            try:
                job.wait()
            except UserError as err:
                raise UserError(*(conventions.explain(
                    b.name, b.declared, b.prototypes, job.diagnostics) +
                    ["%s (bitcode for %s)" % (line, self.triple.name)
                     for line in err.lines]))
        return [out for out, _ in self.compiles]

    def refuse_missing_headers(self, source, diagnostics):
        """One line naming the Debian package, where a compile for another
        ISA failed for want of its system headers. (The user's own headers
        are missing for the native compile too, which fails first.)"""
        if self.triple.arch == host_arch():
            return
        # Else clang's own message names the file (a library's header not
        # installed for that ISA, say).
        gxx = self.triple.name + "-g++"
        if not source.endswith(".c") and b"file not found" in diagnostics \
                and shutil.which(gxx) is None:
            # clang finds a cross libstdc++ through the cross g++
            what, package = "C++ library headers", "g++-" + self.triple.name
        elif not os.path.isdir(_headers_dir(self.triple)):
            what, package = "C library headers", self.triple.headers_package
        else:
            return
        raise UserError("--bitcode %s: the %s for %s are not installed "
                        "(Debian: apt install %s)"
                        % (self.triple.name, what, self.triple.name, package))

    def link(self, modules):
        from .cli import Job
        linked = os.path.join(self.dir, "linked.ll")
        job = Job(self.builder, [LLVM_LINK, "-S"] + modules + ["-o", linked],
                  "link of the bitcode for %s" % self.triple.name, quiet=True)
        if not job.succeeded():
            twice = re.search(r"Linking globals named '([^']*)': symbol "
                              r"multiply defined",
                              job.diagnostics.decode("utf-8", "replace"))
            if twice:
                self.refuse_twice(modules, twice.group(1))
            job.quiet = False
            job.result = (job.result[0], job.result[1], job.diagnostics)
            job.wait()
        with open(linked) as stream:
            self.module = parse_module(stream.read())
        return linked

    def refuse_twice(self, modules, name):
        """'NAME is defined in both a.c and b.c', as for native images."""
        sources = []
        for source, module in zip(self.builder.opts.sources, modules):
            text = self.run([LLVM_DIS, module, "-o", "-"], source)
            g = parse_module(text).globals.get(name)
            if g is not None and g.defined and g.linkage == "":
                sources.append(source)
        if len(sources) >= 2:
            raise UserError(self.builder.refusal_at_definition(
                name, "'%s' is defined in both %s and %s"
                % (name, sources[0], sources[1])))

    def check_library(self):
        """The rules that hold for everything in the library (not only
        what NAME_main reaches), and the three functions."""
        b = self.builder
        refusals = []
        for g in self.module.globals.values():
            if g.name in RESERVED or g.name.startswith(RESERVED_PREFIX):
                if g.defined:
                    refusals.append(b.refusal_at_definition(
                        g.name, "'%s' is a name reserved for ucx-ifunc-cc"
                        % g.name))
            elif g.thread_local and g.defined:
                refusals.append(b.refusal_at_definition(
                    g.name, "'%s' is a thread-local variable (%s.%s): ifunc "
                    "libraries cannot define any, because shipped code has "
                    "no TLS block; use a static or global variable"
                    % (g.name, ".tdata" if g.refs else ".tbss", g.name)))
        for table in ("llvm.global_ctors", "llvm.global_dtors"):
            g = self.module.globals.get(table)
            for fn in sorted(g.refs) if g else ():
                what = "'%s' is a constructor or destructor" % fn
                if fn.startswith(CXX_STATIC_INIT_PREFIX):
                    what = ("C++ static objects with constructors or "
                            "destructors need '%s'" % fn)
                refusals.append(b.refusal_at_definition(
                    fn, "%s (%s): ifunc libraries cannot have any, because "
                    "shipped code cannot run them; initialise lazily instead"
                    % (what, ".init_array" if table.endswith("ctors")
                       else ".fini_array")))
        if refusals:
            raise UserError(*refusals)
        functions = {g.name for g in self.module.globals.values()
                     if g.kind == "function"}
        defined = {g.name for g in self.module.globals.values()
                   if g.exported}
        b.check_required(_Definitions(defined, functions))

    def internalize(self, linked):
        final = os.path.join(self.dir, "final.bc")
        self.run([OPT, "-passes=internalize,globaldce",
                  "-internalize-public-api-list=%s_main" % self.builder.name,
                  linked, "-o", final],
                 "bitcode for %s" % self.triple.name)
        text = self.run([LLVM_DIS, final, "-o", "-"],
                        "bitcode for %s" % self.triple.name)
        with open(final, "rb") as stream:
            return stream.read(), parse_module(text)

    def check_reached(self, final):
        """The rules for what NAME_main reaches: what is left."""
        b = self.builder
        main = b.name + "_main"
        refusals = []
        for g in sorted(final.globals.values(), key=lambda g: g.name):
            users = sorted(u.name for u in final.globals.values()
                           if g.name in u.refs and u.kind == "function")
            where = users[0] if users else main
            if g.defined and g.personality:
                refusals.append(b.refusal_in(
                    g.name, "C++ exception handling (a personality "
                    "function) is not supported in shipped code; compile "
                    "with -fno-exceptions or keep code with exceptions or "
                    "cleanups out of what the ifunc's main function "
                    "reaches"))
            if g.kind == "ifunc":
                refusals.append(b.refusal_at_definition(
                    g.name, "'%s' is a GNU indirect function (ifunc "
                    "resolver): not supported in shipped code" % g.name))
            if g.defined:
                continue
            if g.name in THROW_SYMBOLS:
                refusals.append(b.refusal_in(
                    where, "C++ throw ('%s') is not supported in shipped code "
                    "(the target cannot unwind it); keep exceptions out of "
                    "code reached from the ifunc's main function" % g.name))
            elif g.thread_local:
                refusals.append(b.refusal_in(
                    where, "'%s' is a thread-local variable: shipped code has "
                    "no TLS block on the target; use a static or global "
                    "variable" % g.name))
            elif g.visibility != "default":
                refusals.append(b.refusal_in(
                    where, "'%s' is not defined by the ifunc's sources and "
                    "cannot be imported (is it declared with %s "
                    "visibility?); only symbols the target exports can be "
                    "imported" % (g.name, g.visibility)))
        if refusals:
            raise UserError(*refusals)

    def image(self, needed):
        """Builds, checks and returns the fmt.Image of this triple."""
        modules = self.wait_compiles()
        linked = self.link(modules)
        self.check_library()
        code, final = self.internalize(linked)
        self.check_reached(final)
        if not code.startswith(fmt.BITCODE_MAGICS):
            from .errors import ToolchainBug
            raise ToolchainBug("%s wrote no LLVM bitcode for %s"
                               % (OPT, self.triple.name))
        text = fmt.Segment(0, len(code), code)
        image = fmt.Image(
            segments=[text, fmt.Segment(), fmt.Segment()], entry_vaddr=0,
            got_ptr_vaddr=0, map_size=0,
            imports=[fmt.Import(g.name, g.weak_import)
                     for g in final.imports()],
            needed=list(needed),
            symbols=[fmt.FunctionSymbol(self.builder.name + "_main", 0, 0)],
            machine=self.triple.e_machine, page_align=0,
            flags=fmt.FLAG_BITCODE, triple=final.triple)
        self.builder.log("bitcode (%s, %s): %d bytes, %d imports" % (
            self.triple.name, final.triple, len(code), len(image.imports)))
        with open(os.path.join(self.dir, "final.imports"), "w") as stream:
            stream.write("".join(i.name + "\n" for i in image.imports))
        self.final = final
        return image

    def payload_imports(self):
        """The imports the payload functions reach (from the linked
        module): those the ordinary library needs at load time."""
        b = self.builder
        reached = self.module.reachable(b.required_functions()[:2])
        return {n for n in reached if not self.module.globals[n].defined}


@dataclass
class _Definitions:
    """What Builder.check_required reads of a link result."""
    global_defs: Set[str]
    functions: Set[str]


def user_flags(builder, compile_flags):
    """The user's compile flags that make sense for clang on any triple:
    not the ones DROPPED_FLAG_PREFIXES names, nor (a gcc option clang
    does not know) what clang's driver calls unknown."""
    flags = [f for f in compile_flags
             if not f.startswith(DROPPED_FLAG_PREFIXES)]
    candidates = [f for f in flags if f.startswith("-f")]
    if not candidates:
        return flags
    import subprocess
    cmd = [CLANG, "-###", "-fsyntax-only", "-x", "c", os.devnull] + \
        candidates
    builder.log_command(cmd)
    # -### prints what it would run, and what it does not know, and runs
    # nothing
    said = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE).stderr
    unknown = set(re.findall(r"unknown argument: '([^']*)'",
                             said.decode("utf-8", "replace")))
    if unknown:
        builder.log("not for clang (bitcode): %s" % " ".join(sorted(unknown)))
    return [f for f in flags if f not in unknown]
