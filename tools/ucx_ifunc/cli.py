"""Command line and build driver of ucx-ifunc-cc.

    ucx-ifunc-cc [cc options] -o DIR/NAME.so SRC.c [SRC2.c ...] [-lLIB ...]

builds NAME.so twice over from the same sources: once as an ordinary shared
library (the payload functions run from it on the source), and once as a
shippable code image (asm_rewrite -> assembler -> image_link -> verify) that
is embedded in NAME.so as __ucp_ifunc_image_NAME. docs/toolchain.md is the
manual.
"""

import dataclasses
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

from . import conventions
from . import image_format as fmt
from . import isa as isas
from .errors import Location, Refusal, ToolchainBug, UserError
from . import signing
# The image's modules and capstone (verify) are imported where they are
# used: the compilers start first and run meanwhile. pyelftools is imported
# only for DWARF (error messages) and --dump.

PROG = "ucx-ifunc-cc"
C_SUFFIXES = (".c",)
CXX_SUFFIXES = (".cc", ".cpp", ".cxx")
NAME_MAX = 63

USAGE = """\
usage: ucx-ifunc-cc [options] -o DIR/NAME.so SRC.c [SRC2.c ...] [-lLIB ...]
       ucx-ifunc-cc --dump LIB.so

Builds the ifunc library NAME.so from C (or C++) sources that define
NAME_payload_get_max_size (the paper's convention) or NAME_payload_bound (the
workshop slides'), NAME_payload_init and NAME_main, and embeds in it the
shippable code image of NAME_main (symbol __ucp_ifunc_image_NAME).

Compiler options (separate or joined forms):
  -I DIR  -D MACRO[=VAL]  -U MACRO  -include FILE  -isystem DIR
  -O*  -f*  -m*  -g*  -std=*  -W* (not -Wl,)  -pthread
  any other option goes to every compile as given (give values joined);
  -shared and -fPIC are implied; -c, -S and -E are refused
Link options (for NAME.so, in the order given):
  -l LIB  -L DIR  -Wl,OPTS
Tool options:
  -o FILE          output library; NAME is its basename without .so
  --name NAME      ifunc name, if it differs from the output's basename
  --cc=CC          C compiler (default: $CC, else cc)
  --cxx=CXX        C++ compiler for .cc/.cpp/.cxx sources (default: $CXX,
                   else c++)
  --target T1[,T2...]
                   ISAs (x86_64-linux-gnu, aarch64-linux-gnu,
                   powerpc64le-linux-gnu): NAME.so is built for T1, and
                   holds an image for every Ti (symbols
                   __ucp_ifunc_image_NAME.em<ELF machine>); Ti's compiler
                   is CC/CXX if it targets Ti, else Ti-gcc/Ti-g++. Default:
                   the compiler's own ISA, which must be x86-64.
                   powerpc64le-linux-gnu gets no native image, only
                   bitcode: it needs --bitcode
  --sandbox        build NAME_main's image for the sandbox (x86-64 only):
                   code that targets run confined under UCX_IFUNC_TRUST
                   =...,sandboxed (docs/toolchain.md, docs/security.md)
  --bitcode[=T1,T2...]
                   also embed an LLVM bitcode image of NAME_main per
                   target triple (symbols __ucp_ifunc_bitcode_NAME.em<ELF
                   machine>), which the target compiles for its CPU.
                   Default: the native images' triples, x86_64-linux-gnu,
                   aarch64-linux-gnu and powerpc64le-linux-gnu; also known:
                   riscv64-linux-gnu. Needs clang-14 and llvm-14
  --bitcode-only[=T1,T2...]
                   the same, without native images (NAME.so is still the
                   ordinary library of the payload functions)
  --sign KEY       sign the image with the secret key file KEY (from
                   ucx-ifunc-keygen), so that targets that list its public
                   key in UCX_IFUNC_TRUSTED_KEYS run it without NAME.so
  -v, --verbose    print the commands run and a summary of the image
  --keep-temps DIR keep the intermediate files in DIR
  --dump LIB.so    describe the image embedded in LIB.so and exit
  -h, --help       print this help and exit
  --version        print the version and exit
"""

# Options that take a value, either joined (-Idir) or separate (-I dir).
COMPILE_VALUE_OPTIONS = ("-include", "-isystem", "-I", "-D", "-U")
LINK_VALUE_OPTIONS = ("-l", "-L")
# Options of the tool itself that take a value (--opt=V or --opt V).
TOOL_VALUE_OPTIONS = ("--name", "--cc", "--cxx", "--keep-temps", "--dump",
                      "--sign", "--target")
NON_X86_64_FLAGS = ("-m32", "-mx32", "-m16")
# Options that would make the compiler stop before the tool's own steps.
MODE_OPTIONS = ("-c", "-S", "-E")
# What the tool does anyway: accepted and dropped.
IMPLIED_OPTIONS = ("-shared", "-fPIC", "-fpic")

# The one compile of each source per ISA: after the user's flags, so that
# they win; then the ISA's own (isa.Isa.image_flags). Its assembly is both
# assembled as it is into NAME.so's ordinary object and rewritten for the
# image, so nothing here may change what the ordinary library means (no
# -fvisibility=hidden: the rewriter turns GOT references to what the sources
# define into direct ones anyway).
IMAGE_FLAGS = ["-S", "-fPIC", "-fno-plt", "-fno-common",
               "-ffunction-sections", "-fdata-sections", "-fno-lto"]
LIBGCC_S = "libgcc_s.so.1"
# Where NAME.so holds the images (embed)
IMAGE_SECTION = ".rodata.ucp_ifunc_image"
IMAGE_ALIGN = 64
# The assembly pass of each ISA: (module, class), None for asm_rewrite's.
REWRITERS = {isas.X86_64: None,
             isas.AARCH64: ("asm_aarch64", "Aarch64FileRewriter"),
             isas.PPC64LE: ("asm_ppc64", "Ppc64FileRewriter")}


@dataclass
class Options:
    output: Optional[str] = None
    name: Optional[str] = None
    sources: List[str] = field(default_factory=list)
    compile_flags: List[str] = field(default_factory=list)
    codegen_flags: List[str] = field(default_factory=list)  # also for the link
    link_args: List[str] = field(default_factory=list)
    cc: Optional[str] = None
    cxx: Optional[str] = None
    verbose: bool = False
    keep_temps: Optional[str] = None
    dump: Optional[str] = None
    sign: Optional[str] = None  # secret key file
    target: Optional[str] = None  # --target T1[,T2...]
    sandbox: bool = False  # --sandbox
    # --bitcode[=...] / --bitcode-only[=...]: None, or the triples ("" for
    # the default set)
    bitcode: Optional[str] = None
    bitcode_only: bool = False
    help: bool = False
    version: bool = False


def _take_value(option, args, joined):
    """The value of an option given as '-Xvalue' (joined) or '-X value'."""
    if joined:
        return joined
    if not args:
        raise UserError("%s: missing argument" % option)
    return args.pop(0)


def parse_args(argv):
    opts = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        long_name, eq, long_value = arg.partition("=")
        if long_name in TOOL_VALUE_OPTIONS:
            value = long_value if eq else _take_value(arg, args, "")
            setattr(opts, long_name[2:].replace("-", "_"), value)
        elif arg in ("-h", "--help"):
            opts.help = True
        elif arg == "--version":
            opts.version = True
        elif arg in ("-v", "--verbose"):
            opts.verbose = True
        elif arg == "--sandbox":
            opts.sandbox = True
        elif long_name in ("--bitcode", "--bitcode-only"):
            if eq and not long_value:
                raise UserError("%s: empty list of target triples" % arg)
            opts.bitcode = long_value
            opts.bitcode_only = long_name == "--bitcode-only"
        elif arg.startswith("-o"):
            opts.output = _take_value("-o", args, arg[2:])
        elif arg.startswith("-Wl,"):
            opts.link_args.append(arg)
        elif arg in NON_X86_64_FLAGS:
            raise UserError("%s: only x86-64 (and, with --target, aarch64 "
                            "and ppc64el) code is supported: images hold "
                            "64-bit code" % arg)
        elif arg in MODE_OPTIONS:
            raise UserError("%s: ucx-ifunc-cc compiles and links NAME.so "
                            "itself; leave %s out" % (arg, arg))
        elif arg in IMPLIED_OPTIONS:
            continue
        elif arg.startswith(("-O", "-f", "-m", "-g")) or arg == "-pthread":
            opts.compile_flags.append(arg)
            opts.codegen_flags.append(arg)
        elif arg.startswith(("-std=", "-W")):
            opts.compile_flags.append(arg)
        elif arg.startswith(COMPILE_VALUE_OPTIONS):
            option = next(o for o in COMPILE_VALUE_OPTIONS if arg.startswith(o))
            opts.compile_flags += [option, _take_value(option, args,
                                                       arg[len(option):])]
        elif arg.startswith(LINK_VALUE_OPTIONS):
            option = arg[:2]
            opts.link_args.append(option + _take_value(option, args, arg[2:]))
        elif arg.startswith("-"):
            # Not ours to interpret (-w, -pedantic, --param=...): every
            # compile gets it as it is.
            opts.compile_flags.append(arg)
        elif arg.endswith(C_SUFFIXES + CXX_SUFFIXES):
            opts.sources.append(arg)
        else:
            raise UserError("%s: not a C or C++ source (.c, .cc, .cpp, .cxx)"
                            % arg)
    return opts


def ifunc_name(opts):
    """The ifunc name: --name, else the output's basename without .so."""
    name = opts.name
    if name is None:
        base = os.path.basename(opts.output)
        if not base.endswith(".so"):
            raise UserError("%s: the output must be named NAME.so (or give "
                            "--name NAME)" % opts.output)
        name = base[:-3]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or len(name) > NAME_MAX:
        raise UserError("%s: not a valid ifunc name: it must be a C identifier "
                        "of 1 to %d characters" % (name or "''", NAME_MAX))
    return name


def _check_build_options(opts):
    if opts.output is None:
        raise UserError("-o: no output file given (usage: %s -o DIR/NAME.so "
                        "SRC.c ...)" % PROG)
    if not opts.sources:
        raise UserError("%s: no source files given" % opts.output)
    for source in opts.sources:
        if not os.path.isfile(source):
            raise UserError("%s: no such file" % source)
    if opts.sign:
        signing.load_secret_key(opts.sign)  # a bad key fails before the build
    if opts.sandbox and opts.target is not None and \
            opts.target.split(",") != [isas.X86_64.triplet]:
        raise UserError("--sandbox: only x86-64 code can be built for the "
                        "sandbox so far; leave other ISAs out of --target")
    _check_bitcode_only_targets(opts)
    if opts.bitcode is not None:
        from . import bitcode
        if opts.sandbox:
            raise UserError("--sandbox: bitcode cannot be built for the "
                            "sandbox (its verifier checks machine code); "
                            "leave --bitcode out")
        if opts.bitcode:
            bitcode.parse_triples(opts.bitcode)
        bitcode.check_tools()
    out_dir = os.path.dirname(opts.output) or "."
    if not os.path.isdir(out_dir):
        raise UserError("%s: the output directory does not exist" % out_dir)


def _check_bitcode_only_targets(opts):
    """An ISA that gets no native image (ppc64el) needs its bitcode."""
    if opts.target is None:
        return
    for isa in isas.parse_targets(opts.target):
        if not isa.bitcode_only:
            continue
        if opts.bitcode is None:
            raise UserError("--target %s: targets run no %s machine code, "
                            "only LLVM bitcode, which they compile for "
                            "themselves; add --bitcode (or --bitcode-only)"
                            % (isa.triplet, isa.display))
        if opts.bitcode:
            from . import bitcode
            if isa.triplet not in [t.name for t in
                                   bitcode.parse_triples(opts.bitcode)]:
                option = "--bitcode-only" if opts.bitcode_only \
                    else "--bitcode"
                raise UserError("--target %s: targets run no %s machine "
                                "code, only LLVM bitcode; add %s to %s=%s"
                                % (isa.triplet, isa.display, isa.triplet,
                                   option, opts.bitcode))


def _compiler(explicit, env_var, default):
    return shlex.split(explicit or os.environ.get(env_var) or default)


@dataclass
class Toolchain:
    """The compilers and binutils that build for one ISA."""
    isa: isas.Isa
    cc: List[str]
    cxx: List[str]
    cross: bool  # TRIPLET-gcc, not the user's compiler


class Job:
    """A program started now and waited for later, so that several run at
    once and the Python work overlaps them. Its stderr goes to a file and is
    copied to ours when it is waited for: diagnostics of programs that ran
    at the same time never interleave, and come in a fixed order."""

    def __init__(self, builder, cmd, what, capture=False, quiet=False):
        self.cmd, self.what, self.quiet = cmd, what, quiet
        builder.log_command(cmd)
        self.errors = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE if capture else None,
                stderr=self.errors, universal_newlines=capture)
        except OSError as err:
            self.errors.close()
            raise UserError("%s: cannot run %s: %s (set --cc/--cxx or "
                            "$CC/$CXX)" % (what, cmd[0], err.strerror))
        builder.jobs.append(self)
        self.result = None
        self.diagnostics = b""  # what it wrote to stderr, once waited for

    def wait(self):
        """Waits; returns its stdout (if captured). Raises UserError if it
        failed, after copying its diagnostics to stderr (unless quiet)."""
        if self.result is None:
            out, _ = self.proc.communicate()
            self.errors.seek(0)
            diagnostics = self.errors.read()
            self.errors.close()
            self.result = (self.proc.returncode, out, diagnostics)
            self.diagnostics = diagnostics
        status, out, diagnostics = self.result
        if diagnostics and not (self.quiet and status):
            sys.stderr.flush()
            raw = getattr(sys.stderr, "buffer", None)  # None if replaced
            if raw is not None:
                raw.write(diagnostics)
            else:
                sys.stderr.write(diagnostics.decode("utf-8", "replace"))
            sys.stderr.flush()
            self.result = (status, out, b"")
        if status != 0:
            raise UserError("%s: %s failed with exit status %d"
                            % (self.what, os.path.basename(self.cmd[0]),
                               status))
        return out

    def succeeded(self):
        """Waits; whether it succeeded (its diagnostics dropped if not)."""
        try:
            self.wait()
            return True
        except UserError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.errors.closed:
            self.errors.close()


class Builder:
    """Runs the steps of one build in a work directory."""

    def __init__(self, opts, name, workdir):
        self.opts = opts
        self.name = name
        self.workdir = workdir
        self.cc = _compiler(opts.cc, "CC", "cc")
        self.cxx = _compiler(opts.cxx, "CXX", "c++")
        # --target: NAME.so holds one image per ISA, under per-ISA symbols
        self.multi = opts.target is not None
        self.jobs = []  # every Job started, stopped at the end
        # NAME.so's own ISA -> [(object, Job)] of its ordinary objects
        self.ordinary = {}
        # The payload functions' convention (conventions.py): as the
        # sources' text names it until the definitions are known
        # (check_required); the one the header of every compile declares
        # (None: NAME_main only), and that header.
        self.convention = None
        self.declared = None
        self.prototypes = None

    def log(self, message):
        if self.opts.verbose:
            print("%s: %s" % (PROG, message), file=sys.stderr)

    def log_command(self, cmd):
        if self.opts.verbose:
            print(" ".join(shlex.quote(a) for a in cmd), file=sys.stderr)

    def run(self, cmd, what, capture=False):
        return Job(self, cmd, what, capture).wait()

    def any_cxx(self):
        return any(s.endswith(CXX_SUFFIXES) for s in self.opts.sources)

    def compiler_for(self, tc, source):
        return tc.cxx if source.endswith(CXX_SUFFIXES) else tc.cc

    def linker_for(self, tc):
        return tc.cxx if self.any_cxx() else tc.cc

    def temp(self, tc, index, source, suffix):
        stem = os.path.splitext(os.path.basename(source))[0]
        return os.path.join(self.isa_dir(tc), "%d-%s%s" % (index, stem, suffix))

    def isa_dir(self, tc):
        """Where the files of one ISA go: the work directory itself without
        --target, else a subdirectory named by the triplet."""
        if not self.multi:
            return self.workdir
        path = os.path.join(self.workdir, tc.isa.triplet)
        os.makedirs(path, exist_ok=True)
        return path

    def start_target_check(self):
        return Job(self, self.cc + ["-dumpmachine"], "target check",
                   capture=True)

    def toolchains(self, target_check):
        """One Toolchain per ISA to build for; the first builds NAME.so.
        Without --target, the compiler's ISA is checked later (check_isa),
        so that the compiles need not wait for it."""
        if not self.multi:
            return [Toolchain(isas.X86_64, self.cc, self.cxx, False)]
        machine = target_check.wait().strip()
        chains = []
        for isa in isas.parse_targets(self.opts.target):
            if isa.matches(machine):
                chains.append(Toolchain(isa, self.cc, self.cxx, False))
                continue
            needed = [isa.cross_compiler()]
            if self.any_cxx():
                needed.append(isa.cross_compiler(cxx=True))
            for program in needed:
                if shutil.which(program) is None:
                    raise UserError(
                        "--target %s: the cross compiler %s is not installed "
                        "(Debian: apt install %s%s)"
                        % (isa.triplet, program, isa.debian_package,
                           " " + isa.debian_package.replace("gcc-", "g++-", 1)
                           if self.any_cxx() else ""))
            chains.append(Toolchain(isa, [isa.cross_compiler()],
                                    [isa.cross_compiler(cxx=True)], True))
        return chains

    def check_isa(self, target_check):
        """Without --target the compiler must target x86-64."""
        machine = target_check.wait().strip()
        if not self.multi and not machine.startswith("x86_64-"):
            raise UserError("%s: the compiler targets %s; without "
                            "--target only x86-64 is supported (for "
                            "aarch64 give --target aarch64-linux-gnu)"
                            % (" ".join(self.cc), machine))

    def image_flags(self, tc):
        """The flags after the user's of the one compile per source and
        ISA. The same for an ISA whatever the --target order (so is its
        image), but for -w: only NAME.so's own ISA shows warnings."""
        flags = IMAGE_FLAGS + list(tc.isa.image_flags)
        if self.opts.sandbox:
            from .sandbox import COMPILE_FLAGS
            flags += COMPILE_FLAGS
        return flags

    def wants_debug_info(self):
        debug = [f for f in self.opts.compile_flags if f.startswith("-g")]
        return bool(debug) and debug[-1] != "-g0"

    def declare_prototypes(self):
        """Writes the header that declares the three functions in the
        convention the sources name, so that every compile checks them."""
        self.declared = conventions.detect(self.name, self.opts.sources)
        self.convention = self.declared
        self.prototypes = conventions.write_header(self.workdir, self.name,
                                                   self.declared)
        self.log("prototypes checked: %s" % (
            "%s convention" % self.declared.title if self.declared
            else "%s_main only (the sources name neither bound function, or "
            "both)" % self.name))

    def prototype_flags(self):
        return ["-include", self.prototypes] if self.prototypes else []

    def start_compiles(self, tc, primary, tag="", extra=()):
        """Starts the compile to assembly of every source for one ISA: the
        image's assembly, and for NAME.so's own ISA also the ordinary
        object's (assembled as it is). tag and extra: for a second compile,
        its file names and flags."""
        jobs = []
        for index, source in enumerate(self.opts.sources):
            asm = self.temp(tc, index, source, tag + ".s")
            cmd = (self.compiler_for(tc, source) + self.prototype_flags() +
                   self.opts.compile_flags +
                   self.image_flags(tc) + list(extra) +
                   ([] if tc is primary else ["-w"]) + [source, "-o", asm])
            jobs.append((asm, Job(self, cmd, source)))
        return jobs

    def assembler_flags(self):
        """The user's options for the assembler, for the ordinary objects."""
        return [f for f in self.opts.compile_flags
                if f.startswith(("-Wa,", "-Xassembler"))]

    def read_assembly(self, jobs):
        """Waits for the compiles (in source order); returns
        [(source, assembly text)]."""
        files = []
        for source, (asm, job) in zip(self.opts.sources, jobs):
            try:
                job.wait()
            except UserError as err:
                raise UserError(*(conventions.explain(
                    self.name, self.declared, self.prototypes,
                    job.diagnostics) + err.lines))
            with open(asm) as stream:
                files.append((source, stream.read()))
        return files

    def start_ordinary_objects(self, tc, jobs):
        """Starts assembling the compiled assembly, unchanged, into the
        ordinary objects of NAME.so. Returns [(object, Job)]."""
        started = []
        for index, (source, (asm, _)) in enumerate(zip(self.opts.sources,
                                                       jobs)):
            obj = self.temp(tc, index, source, ".o")
            started.append((obj, Job(self, tc.cc + self.assembler_flags() +
                                     ["-c", asm, "-o", obj], source)))
        return started

    @staticmethod
    def wait_for_objects(started):
        """[(object, Job)] -> [object], once every Job has succeeded."""
        for _, job in started:
            job.wait()
        return [obj for obj, _ in started]

    def rewriter_class(self, tc):
        if self.opts.sandbox:
            from .sandbox import SandboxFileRewriter
            return SandboxFileRewriter
        where = REWRITERS[tc.isa]
        if where is None:
            return None
        module = importlib.import_module("." + where[0], __package__)
        return getattr(module, where[1])

    def build_image(self, tc, files):
        """Rewrites, assembles, links and checks the image for one ISA;
        returns the image_link.LinkResult."""
        try:
            return self.rewrite_and_link(tc, files)
        except UserError as err:
            if self.wants_debug_info() or \
                    not any(isinstance(line, Refusal) for line in err.lines):
                raise self.with_definition_lines(tc, err)
            refused = err
        # The compile had no line tables (-g1 makes the assembly twice as
        # long, and the rewriter reads every line): only now, to say where
        # each refusal is, compile again with them (the code is the same)
        # and redo the image.
        self.log("compiling again with -g1 for the lines of the errors")
        located = self.read_assembly(self.start_compiles(
            tc, None, ".lines", ["-g1", "-w"]))
        try:
            self.rewrite_and_link(tc, located, ".lines")
        except UserError as err:
            refused = err
        raise self.with_definition_lines(tc, refused)

    def rewrite_and_link(self, tc, files, tag=""):
        """Rewrites and assembles the files, links the image and checks
        it. tag: for the file names of a second compile."""
        from .asm_rewrite import rewrite
        from .image_link import link_image
        from .verify import verify
        result = rewrite(files, self.rewriter_class(tc))
        self.check_required(result)
        objects, jobs = [], []
        ordinary = self.ordinary.get(tc.isa) if not tag else None
        for index, (source, unit) in enumerate(zip(self.opts.sources,
                                                   result.units)):
            if ordinary and unit.text.rstrip("\n") == \
                    files[index][1].rstrip("\n") and \
                    not self.assembler_flags():
                # nothing rewritten (aarch64; the rewriter may add a last
                # empty line): the ordinary object, which is being
                # assembled from the same text, is the image's
                obj, job = ordinary[index]
                jobs.append(job)
                objects.append((obj, unit))
                continue
            asm = self.temp(tc, index, source, tag + ".image.s")
            obj = self.temp(tc, index, source, tag + ".image.o")
            with open(asm, "w") as stream:
                stream.write(unit.text)
            jobs.append(Job(self, tc.cc + ["-c", asm, "-o", obj], source))
            objects.append((obj, unit))
        for job in jobs:
            job.wait()
        linked = link_image(self.name, objects, tc.isa,
                            self.required_functions()[:2], self.opts.sandbox)
        with open(os.path.join(self.isa_dir(tc), "image.map"), "w") as stream:
            stream.write(linked.link_map)
        image = linked.image
        if not verify(image):
            self.log("python3-capstone is not installed: disassembly check "
                     "skipped")
        self.log("image%s: %s; %d imports, %d relocations, map_size %#x" % (
            " (%s)" % tc.isa.display if self.multi else "",
            ", ".join("%s %#x" % (fmt.SEG_NAMES[i], s.mem_size)
                      for i, s in enumerate(image.segments)),
            len(image.imports), len(image.relocs), image.map_size))
        return linked

    def with_definition_lines(self, tc, err):
        """err with a line for every Refusal that has none but names a
        function or variable: the line of its definition. Line tables (-g1)
        say nothing of data, so the sources are compiled again with -g:
        only now, for the message."""
        found = {}  # source -> {symbol: (file, line)}
        lines = []
        for line in err.lines:
            loc = getattr(line, "location", None)
            if loc is not None and not loc.line and loc.symbol and \
                    loc.file in self.opts.sources:
                if loc.file not in found:
                    found[loc.file] = self.definition_lines(tc, loc.file)
                definitions = found[loc.file]
                where = definitions.get(loc.symbol) or \
                    definitions.get(loc.symbol.split(".")[0])  # static x.1
                if where is not None:
                    line = Refusal(dataclasses.replace(
                        loc, file=where[0], line=where[1]), line.message)
            lines.append(line)
        return UserError(*lines)

    def definition_lines(self, tc, source):
        """{symbol: (file, line)} of what source defines, from a compile
        with full debug information; {} if that fails."""
        from .elf_query import definition_lines
        index = self.opts.sources.index(source)
        # linked, so that no relocations are left in the debug information
        library = self.temp(tc, index, source, ".debug.so")
        job = Job(self, self.compiler_for(tc, source) +
                  self.prototype_flags() + self.opts.compile_flags +
                  ["-fPIC", "-fno-common", "-g", "-w", "-shared", "-nostdlib",
                   source, "-o", library], source, quiet=True)
        if not job.succeeded():
            return {}
        definitions = definition_lines(library)
        def spelled(path):
            """The user's spelling of the source itself."""
            try:
                return source if os.path.samefile(path, source) else path
            except OSError:
                return path
        return {name: (spelled(path), line)
                for name, (path, line) in definitions.items()}

    def check_required(self, result):
        """The three functions are defined, the bound function of one
        convention only, which is then the library's."""
        def defined(function):
            return function in result.global_defs and \
                function in result.functions
        paper, slides = (c.bound(self.name) for c in conventions.CONVENTIONS)
        bounds = [c for c in conventions.CONVENTIONS
                  if defined(c.bound(self.name))]
        if len(bounds) == 2:
            raise UserError(
                "%s, %s: both defined; they name the two conventions of "
                "ifunc libraries, which order the arguments of "
                "%s_payload_init differently, and the runtime refuses a "
                "library with both: keep the one whose order your "
                "%s_payload_init takes (%s)"
                % (paper, slides, self.name, self.name, "; ".join(
                    "%s convention: %s" % (c.title, c.prototypes(self.name)[1])
                    for c in conventions.CONVENTIONS)))
        if bounds:
            self.convention = bounds[0]
        missing = [] if bounds else ["%s or %s" % (paper, slides)]
        missing += [f for f in self.required_functions()[1:]
                    if not defined(f)]
        if missing:
            raise UserError("%s: not defined as a global function by the "
                            "sources; an ifunc library must define %s (the "
                            "paper's convention) or %s (the workshop "
                            "slides'), %s_payload_init and %s_main (extern "
                            "\"C\" in C++)"
                            % (", ".join(missing), paper, slides, self.name,
                               self.name))

    def required_functions(self):
        """The bound function of the library's convention (the slides'
        while it is not known), NAME_payload_init and NAME_main."""
        bound = (self.convention or conventions.SLIDES).bound(self.name)
        return [bound, self.name + "_payload_init", self.name + "_main"]

    def encode(self, image):
        """The image's bytes, signed if --sign was given."""
        if not self.opts.sign:
            return fmt.encode(image)
        key = signing.load_secret_key(self.opts.sign)
        self.log("signing the %s image with the key of %s"
                 % (image.triple or
                    fmt.MACHINE_NAMES.get(image.machine, image.machine),
                    self.opts.sign))
        return signing.sign(self.name, fmt.encode(image, signed=True), key)

    def image_symbols(self, tc_list, own_native=True):
        """The symbols NAME.so exports native images under: the plain one
        (the image of its own ISA, if it has one), then with --target one
        per ISA of tc_list."""
        if not tc_list:
            return []
        plain = [fmt.SYMBOL_PREFIX + self.name] if own_native else []
        if not self.multi:
            return plain
        return plain + [fmt.isa_symbol(self.name, tc.isa.e_machine)
                        for tc in tc_list]

    def embed(self, primary, blobs, bitcode=()):
        """Writes the object that holds the images as read-only symbols,
        for the final link: a small ELF relocatable written here
        (elf_write), not an .incbin file for the assembler. blobs:
        (Toolchain, bytes) per ISA, NAME.so's own first if it has one;
        bitcode: (symbol, bytes) per triple."""
        from .elf_write import data_object
        plain = fmt.SYMBOL_PREFIX + self.name
        data, symbols = b"", []
        for number, (tc, blob_bytes) in enumerate(blobs):
            blob = os.path.join(self.isa_dir(tc), "image.bin")
            with open(blob, "wb") as stream:  # for --keep-temps
                stream.write(blob_bytes)
            data += bytes(-len(data) % IMAGE_ALIGN)
            symbol = (fmt.isa_symbol(self.name, tc.isa.e_machine)
                      if self.multi else plain)
            symbols.append((symbol, len(data), len(blob_bytes)))
            if self.multi and number == 0 and tc is primary:
                # the first ISA's image is also NAME.so's plain symbol
                symbols.append((plain, len(data), len(blob_bytes)))
            data += blob_bytes
        for symbol, blob_bytes in bitcode:
            data += bytes(-len(data) % IMAGE_ALIGN)
            symbols.append((symbol, len(data), len(blob_bytes)))
            data += blob_bytes
        obj = os.path.join(self.workdir, "image.o")
        with open(obj, "wb") as stream:
            stream.write(data_object(primary.isa.e_machine, IMAGE_SECTION,
                                     IMAGE_ALIGN, data, symbols))
        return obj

    def libgcc_helpers(self, tc, image):
        """Imports that only libgcc_s exports (__divti3, __popcountdi2...):
        the ordinary link binds them statically and hidden, so NAME.so must
        depend on libgcc_s for the target to find them by name."""
        from .elf_query import exported_symbols
        # libgcc_s exports only names that start with '_' (and its version
        # nodes): without such an import there is nothing to look up
        if not any(imp.name.startswith("_") for imp in image.imports):
            return []
        path = self.run(tc.cc + ["-print-file-name=libgcc_s.so.1"],
                        "libgcc_s lookup", capture=True).strip()
        if not os.path.isabs(path):
            return []
        exported = exported_symbols(path)
        return [imp.name for imp in image.imports if imp.name in exported]

    def weaken(self, tc, objects, names):
        """Makes the ordinary objects refer to names weakly. Used for what
        only NAME_main uses (globals of the target program, say), so that the
        source, which never runs NAME_main from the library, can load it with
        RTLD_NOW without them. The symbol tables are patched in place, as
        objcopy --weaken-symbol would, without running it."""
        if not names:
            return
        from .elf_write import weaken_symbols
        self.log("weak references in the ordinary objects: %s"
                 % ", ".join(names))
        for obj in objects:
            weaken_symbols(obj, set(names))

    def link_command(self, tc, inputs, with_libgcc_s, output):
        return (self.linker_for(tc) + ["-shared"] + self.opts.codegen_flags +
                ["-o", output] + inputs + ["-Wl,--no-as-needed"] +
                self.opts.link_args + (["-lgcc_s"] if with_libgcc_s else []) +
                ["-Wl,-z,noexecstack"])

    def start_probe_link(self, tc):
        """Starts the link that tells which sonames NAME.so will need (its
        DT_NEEDED). With -Wl,--no-as-needed they come from the link options
        and the compiler driver's own libraries, not from the objects, so it
        runs without them, while the sources compile. libgcc_s, which the
        driver adds as needed, is the exception: see needed()."""
        probe = os.path.join(self.isa_dir(tc), "needed-probe.so")
        return probe, Job(self, self.link_command(tc, [], False, probe),
                          "link of %s" % self.opts.output, quiet=True)

    def needed(self, tc, probe, objects, helpers):
        """The sonames NAME.so will need: the image records them so that a
        target without NAME.so knows which libraries resolve the imports
        its own scope lacks. For another ISA than NAME.so's, the same link
        with that ISA's compiler. Returns (sonames, whether the link must
        add -lgcc_s)."""
        from .elf_query import needed_libraries
        path, job = probe
        if not job.succeeded():
            # some link option wants the objects (a version script, say):
            # probe as the final link does, with the objects
            self.run(self.link_command(tc, objects or [], bool(helpers), path),
                     "link of %s" % self.opts.output)
            add_libgcc_s = bool(helpers)
        elif helpers and LIBGCC_S not in needed_libraries(path):
            # the link adds -lgcc_s after the link options: probe again
            # with it, to have libgcc_s where NAME.so will have it
            self.run(self.link_command(tc, [], True, path),
                     "link of %s" % self.opts.output)
            add_libgcc_s = True
        else:
            add_libgcc_s = False  # not needed, or the driver adds it (C++)
        sonames = needed_libraries(path)
        self.log("libraries for %simports: %s" % (
            tc.isa.display + " " if self.multi else "",
            ", ".join(sonames) or "none"))
        return sonames, add_libgcc_s

    def where_defined(self, tc, symbol):
        """'file:line: ' of symbol's definition in the sources, else ''."""
        for source in self.opts.sources:
            found = self.definition_lines(tc, source).get(symbol)
            if found:
                return "%s:%d: " % found
        return ""

    def defined_at(self, symbol):
        """Location of symbol's definition in the sources (NAME.so's own
        ISA's compiler, -g), or None. For bitcode refusals."""
        if not hasattr(self, "_definitions"):
            self._definitions = {}
        for source in self.opts.sources:
            if source not in self._definitions:
                self._definitions[source] = self.definition_lines(
                    self.primary, source)
            found = self._definitions[source].get(symbol) or \
                self._definitions[source].get(symbol.split(".")[0])
            if found:
                return Location(found[0], found[1])
        return None

    def refusal_at_definition(self, symbol, message):
        where = self.defined_at(symbol)
        return Refusal(where, message) if where else message

    def refusal_in(self, function, message):
        where = self.defined_at(function) or \
            Location(self.source_naming(function))
        return Refusal(dataclasses.replace(where, function=function), message)

    def source_naming(self, symbol):
        """The first source whose text names symbol (where debug
        information does not say: a -g compile may not link)."""
        for source in self.opts.sources:
            with open(source, errors="replace") as stream:
                if re.search(r"\b%s\b" % re.escape(symbol), stream.read()):
                    return source
        return self.opts.sources[0]

    def check_library_assembly(self, tc, files):
        """--bitcode-only: the rules for everything in the library
        (constructors, thread-local definitions; asm_rewrite), checked on
        NAME.so's own assembly as a native image's build checks them, with
        the same messages. The bitcode alone could not tell: clang may
        evaluate a constructor at build time and drop it from the module,
        while NAME.so keeps it."""
        from .asm_rewrite import rewrite
        try:
            result = rewrite(files, self.rewriter_class(tc))
        except UserError as err:
            refused = err
            if not self.wants_debug_info() and \
                    any(isinstance(line, Refusal) for line in err.lines):
                # as build_image: the lines come from a compile with them
                located = self.read_assembly(self.start_compiles(
                    tc, None, ".lines", ["-g1", "-w"]))
                try:
                    rewrite(located, self.rewriter_class(tc))
                except UserError as again:
                    refused = again
            raise self.with_definition_lines(tc, refused)
        self.check_required(result)

    def start_bitcode(self, chains):
        """Starts the bitcode compiles of every triple (--bitcode): they
        run beside the native ones. Returns [bitcode.BitcodeBuild]."""
        if self.opts.bitcode is None:
            return []
        from . import bitcode
        triples = bitcode.parse_triples(self.opts.bitcode) \
            if self.opts.bitcode else \
            bitcode.default_triples([tc.isa.triplet for tc in chains])
        flags = bitcode.user_flags(self, self.opts.compile_flags)
        builds = [bitcode.BitcodeBuild(self, t, flags) for t in triples]
        for build in builds:
            build.start()
        return builds

    def bitcode_images(self, builds, needed):
        """(symbol, bytes) of each triple's bitcode image. needed: {ELF
        machine: sonames} of the native images (the libraries are named
        alike on every ISA: a triple without a native image gets NAME.so's
        own)."""
        blobs = []
        for build in builds:
            image = build.image(needed.get(build.triple.e_machine,
                                           needed[self.primary.isa.e_machine]))
            blobs.append((fmt.bitcode_symbol(self.name,
                                             build.triple.e_machine),
                          self.encode(image)))
        return blobs

    def check_exports(self, primary, library, symbols):
        from .elf_query import exported_symbols
        exported = exported_symbols(library)
        for symbol in self.required_functions() + symbols:
            if symbol not in exported:
                raise UserError("%s%s: not exported by %s (hidden "
                                "visibility?); give it __attribute__(("
                                "visibility(\"default\")))"
                                % (self.where_defined(primary, symbol),
                                   symbol, self.opts.output))

    def image_for(self, tc, compiles, probe, ordinary=None):
        """Builds, completes and encodes the image of one ISA. ordinary:
        for NAME.so's own ISA, [(object, Job)] of its ordinary objects,
        started once the assembly is there. Returns (the LinkResult,
        whether the link must add -lgcc_s, the encoded image)."""
        files = self.read_assembly(compiles)
        if ordinary is not None:
            ordinary += self.start_ordinary_objects(tc, compiles)
            self.ordinary[tc.isa] = ordinary
        linked = self.build_image(tc, files)
        image = linked.image
        helpers = self.libgcc_helpers(tc, image)
        if helpers:
            self.log("linking libgcc_s for %s" % ", ".join(helpers))
        objects = self.wait_for_objects(ordinary) if ordinary else None
        image.needed, add_libgcc_s = self.needed(tc, probe, objects, helpers)
        return linked, add_libgcc_s, self.encode(image)

    def build(self):
        try:
            self._build()
        finally:
            for job in self.jobs:
                job.stop()

    def _build(self):
        target_check = self.start_target_check()
        self.declare_prototypes()
        chains = self.toolchains(target_check)
        primary = chains[0]
        # Everything that needs only the command line starts now: the
        # compiles (the longest steps) run while Python imports the image
        # linker and capstone and while it works on another ISA's image.
        self.primary = primary
        # The ISAs with a native image; without one for NAME.so's own ISA
        # (--bitcode-only, ppc64el), its compiles are for its objects only.
        native = [] if self.opts.bitcode_only else \
            [tc for tc in chains if not tc.isa.bitcode_only]
        own_native = primary in native
        built = native if own_native else [primary] + native
        compiles = {tc.isa: self.start_compiles(tc, primary) for tc in built}
        probes = {tc.isa: self.start_probe_link(tc) for tc in built}
        bitcode_builds = self.start_bitcode(chains)
        self.check_isa(target_check)
        if native:
            from . import asm_rewrite, image_link, verify  # noqa: F401
            verify.preload()

        ordinary, blobs, needed = [], [], {}
        if own_native:
            linked, add_libgcc_s, blob = self.image_for(
                primary, compiles[primary.isa], probes[primary.isa],
                ordinary)
            blobs = [(primary, blob)]
            needed[primary.isa.e_machine] = linked.image.needed
            target_only = linked.target_only_imports
        else:
            files = self.read_assembly(compiles[primary.isa])
            ordinary = self.start_ordinary_objects(primary,
                                                   compiles[primary.isa])
            self.check_library_assembly(primary, files)
            needed[primary.isa.e_machine], add_libgcc_s = self.needed(
                primary, probes[primary.isa],
                self.wait_for_objects(ordinary), [])
        for tc in native[1:] if own_native else native:
            other = self.image_for(tc, compiles[tc.isa], probes[tc.isa])
            blobs.append((tc, other[2]))
            needed[tc.isa.e_machine] = other[0].image.needed
        bitcode = self.bitcode_images(bitcode_builds, needed)
        objects = self.wait_for_objects(ordinary)
        if not own_native:
            # as the native image would: what only NAME_main imports is
            # weak in the ordinary objects (the build of NAME.so's ISA, or
            # the first)
            own = next((b for b in bitcode_builds if b.triple.e_machine ==
                        primary.isa.e_machine), bitcode_builds[0])
            target_only = sorted({i.name for i in own.final.imports()} -
                                 own.payload_imports())
        self.weaken(primary, objects, target_only)
        image_obj = self.embed(primary, blobs, bitcode)
        out_dir = os.path.dirname(self.opts.output) or "."
        # Targets may dlopen libraries from out_dir while we build: write a
        # temporary file there and rename it over the output in one step.
        fd, partial = tempfile.mkstemp(dir=out_dir, prefix="." + self.name + ".",
                                       suffix=".so.tmp")
        os.close(fd)
        try:
            self.run(self.link_command(primary, objects + [image_obj],
                                       add_libgcc_s, partial),
                     "link of %s" % self.opts.output)
            self.check_exports(primary, partial,
                               self.image_symbols(native, own_native)
                               + [symbol for symbol, _ in bitcode])
            # mkstemp made the file 0600: give it the mode of a normal link
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(partial, 0o777 & ~umask)
            os.replace(partial, self.opts.output)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)


def build(opts):
    _check_build_options(opts)
    name = ifunc_name(opts)
    if opts.keep_temps:
        os.makedirs(opts.keep_temps, exist_ok=True)
        workdir = opts.keep_temps
    else:
        workdir = tempfile.mkdtemp(prefix="ucx-ifunc-cc.")
    try:
        Builder(opts, name, workdir).build()
    finally:
        if not opts.keep_temps:
            shutil.rmtree(workdir, ignore_errors=True)


def _demangle(lines):
    """Error lines with C++ symbol names demangled, if c++filt is there."""
    if not any("_Z" in line for line in lines):
        return lines
    try:
        proc = subprocess.run(["c++filt"], input="\n".join(lines),
                              stdout=subprocess.PIPE, universal_newlines=True)
    except OSError:
        return lines
    demangled = proc.stdout.splitlines()
    return demangled if len(demangled) == len(lines) else lines


def _package_version():
    """configure's version, which the launcher gave the package."""
    from . import __version__  # now: the launcher set it after the import
    return __version__


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if os.path.basename(sys.argv[0]).startswith("ucx-ifunc-keygen"):
        return signing.keygen_main(argv, _package_version())
    try:
        opts = parse_args(argv)
        if opts.help:
            print(USAGE, end="")
        elif opts.version:
            print("%s %s" % (PROG, _package_version()))
        elif opts.dump:
            from .elf_query import dump
            print(dump(opts.dump))
        else:
            build(opts)
        return 0
    except UserError as err:
        for line in _demangle(err.lines):
            print("%s: error: %s" % (PROG, line), file=sys.stderr)
        return 1
    except ToolchainBug as err:
        print("%s: error: internal: %s; this is a bug in ucx-ifunc-cc, not in "
              "your code: please report it with the files kept by "
              "--keep-temps" % (PROG, err), file=sys.stderr)
        return 1
    except OSError as err:  # e.g. the output directory is not writable
        print("%s: error: %s: %s" % (PROG, err.filename, err.strerror),
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
