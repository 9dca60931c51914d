"""Command line and build driver of ucx-ifunc-cc.

    ucx-ifunc-cc [cc options] -o DIR/NAME.so SRC.c [SRC2.c ...] [-lLIB ...]

builds NAME.so twice over from the same sources: once as an ordinary shared
library (the payload functions run from it on the source), and once as a
shippable code image (asm_rewrite -> assembler -> image_link -> verify) that
is embedded in NAME.so as __ucp_ifunc_image_NAME. docs/toolchain.md is the
manual.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

from . import __version__
from . import image_format as fmt
from . import isa as isas
from .asm_aarch64 import Aarch64FileRewriter
from .asm_rewrite import rewrite
from .elf_query import dump, exported_symbols, needed_libraries
from .errors import ToolchainBug, UserError
from . import signing
from .image_link import link_image
from .verify import verify

PROG = "ucx-ifunc-cc"
C_SUFFIXES = (".c",)
CXX_SUFFIXES = (".cc", ".cpp", ".cxx")
NAME_MAX = 63

USAGE = """\
usage: ucx-ifunc-cc [options] -o DIR/NAME.so SRC.c [SRC2.c ...] [-lLIB ...]
       ucx-ifunc-cc --dump LIB.so

Builds the ifunc library NAME.so from C (or C++) sources that define
NAME_payload_bound, NAME_payload_init and NAME_main, and embeds in it the
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
                   ISAs (x86_64-linux-gnu, aarch64-linux-gnu): NAME.so is
                   built for T1, and holds an image for every Ti (symbols
                   __ucp_ifunc_image_NAME.em<ELF machine>); Ti's compiler
                   is CC/CXX if it targets Ti, else Ti-gcc/Ti-g++. Default:
                   the compiler's own ISA, which must be x86-64
  --sign KEY       sign the image with the secret key file KEY (from
                   ucx-ifunc-keygen), so that targets that list its public
                   key in UCX_IFUNC_TRUSTED_KEYS run it without NAME.so
  -v, --verbose    print the commands run and a summary of the image
  --keep-temps DIR keep the intermediate files in DIR
  --dump LIB.so    describe the image embedded in LIB.so and exit
  --help           print this help and exit
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

# After the user's flags, so that they win; then the ISA's own
# (isa.Isa.image_flags), then -w: warnings were shown by the ordinary compile
# already.
IMAGE_FLAGS = ["-S", "-fPIC", "-fno-plt", "-fvisibility=hidden", "-fno-common",
               "-ffunction-sections", "-fdata-sections", "-fno-lto"]
# The assembly pass of each ISA.
REWRITERS = {isas.X86_64: None, isas.AARCH64: Aarch64FileRewriter}


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
        elif arg.startswith("-o"):
            opts.output = _take_value("-o", args, arg[2:])
        elif arg.startswith("-Wl,"):
            opts.link_args.append(arg)
        elif arg in NON_X86_64_FLAGS:
            raise UserError("%s: only x86-64 (and, with --target, aarch64) "
                            "code is supported: images hold 64-bit code"
                            % arg)
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
    out_dir = os.path.dirname(opts.output) or "."
    if not os.path.isdir(out_dir):
        raise UserError("%s: the output directory does not exist" % out_dir)


def _compiler(explicit, env_var, default):
    return shlex.split(explicit or os.environ.get(env_var) or default)


@dataclass
class Toolchain:
    """The compilers and binutils that build for one ISA."""
    isa: isas.Isa
    cc: List[str]
    cxx: List[str]
    cross: bool  # TRIPLET-gcc, not the user's compiler

    def objcopy(self):
        if self.cross:
            return [self.isa.triplet + "-objcopy"]
        return shlex.split(os.environ.get("OBJCOPY") or "objcopy")


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

    def log(self, message):
        if self.opts.verbose:
            print("%s: %s" % (PROG, message), file=sys.stderr)

    def run(self, cmd, what, capture=False):
        if self.opts.verbose:
            print(" ".join(shlex.quote(a) for a in cmd), file=sys.stderr)
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None,
                                  universal_newlines=True)
        except OSError as err:
            raise UserError("%s: cannot run %s: %s (set --cc/--cxx or $CC/$CXX)"
                            % (what, cmd[0], err.strerror))
        if proc.returncode != 0:
            raise UserError("%s: %s failed with exit status %d"
                            % (what, os.path.basename(cmd[0]), proc.returncode))
        return proc.stdout

    def any_cxx(self):
        return any(s.endswith(CXX_SUFFIXES) for s in self.opts.sources)

    def compiler_for(self, tc, source):
        return tc.cxx if source.endswith(CXX_SUFFIXES) else tc.cc

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

    def toolchains(self):
        """One Toolchain per ISA to build for; the first builds NAME.so."""
        machine = self.run(self.cc + ["-dumpmachine"], "target check",
                           capture=True).strip()
        if not self.multi:
            if not machine.startswith("x86_64-"):
                raise UserError("%s: the compiler targets %s; without "
                                "--target only x86-64 is supported (for "
                                "aarch64 give --target aarch64-linux-gnu)"
                                % (" ".join(self.cc), machine))
            return [Toolchain(isas.X86_64, self.cc, self.cxx, False)]
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

    def compile_normal(self, tc):
        objects = []
        for index, source in enumerate(self.opts.sources):
            obj = self.temp(tc, index, source, ".o")
            self.run(self.compiler_for(tc, source) + self.opts.compile_flags +
                     ["-fPIC", "-c", source, "-o", obj], source)
            objects.append(obj)
        return objects

    def image_flags(self, tc):
        flags = IMAGE_FLAGS + list(tc.isa.image_flags) + ["-w"]
        debug = [f for f in self.opts.compile_flags if f.startswith("-g")]
        if not debug or debug[-1] == "-g0":
            flags.append("-g1")  # .loc lines for error messages only
        return flags

    def build_image(self, tc):
        """Compiles to assembly, rewrites, assembles, links and checks the
        image for one ISA; returns the image_link.LinkResult."""
        files = []
        for index, source in enumerate(self.opts.sources):
            asm = self.temp(tc, index, source, ".s")
            self.run(self.compiler_for(tc, source) + self.opts.compile_flags +
                     self.image_flags(tc) + [source, "-o", asm], source)
            with open(asm) as stream:
                files.append((source, stream.read()))
        result = rewrite(files, REWRITERS[tc.isa])
        self.check_required(result)

        objects = []
        for index, (source, unit) in enumerate(zip(self.opts.sources,
                                                   result.units)):
            asm = self.temp(tc, index, source, ".image.s")
            obj = self.temp(tc, index, source, ".image.o")
            with open(asm, "w") as stream:
                stream.write(unit.text)
            self.run(tc.cc + ["-c", asm, "-o", obj], source)
            objects.append((obj, unit))
        linked = link_image(self.name, objects, tc.isa)
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

    def check_required(self, result):
        missing = [f for f in self.required_functions()
                   if f not in result.global_defs or f not in result.functions]
        if missing:
            raise UserError("%s: not defined as a global function by the "
                            "sources; an ifunc library must define %s, %s "
                            "and %s (extern \"C\" in C++)"
                            % ((", ".join(missing),)
                               + tuple(self.required_functions())))

    def required_functions(self):
        return [self.name + suffix for suffix in
                ("_payload_bound", "_payload_init", "_main")]

    def encode(self, image):
        """The image's bytes, signed if --sign was given."""
        if not self.opts.sign:
            return fmt.encode(image)
        key = signing.load_secret_key(self.opts.sign)
        self.log("signing the %s image with the key of %s"
                 % (fmt.MACHINE_NAMES.get(image.machine, image.machine),
                    self.opts.sign))
        return signing.sign(self.name, fmt.encode(image, signed=True), key)

    def image_symbols(self, tc_list):
        """The symbols NAME.so exports images under: the plain one (the
        first ISA's image), then with --target one per ISA."""
        plain = fmt.SYMBOL_PREFIX + self.name
        if not self.multi:
            return [plain]
        return [plain] + [fmt.isa_symbol(self.name, tc.isa.e_machine)
                          for tc in tc_list]

    def embed(self, primary, blobs):
        """Assembles the object that holds the images as read-only symbols.
        blobs: (Toolchain, bytes) per ISA, the first one NAME.so's own."""
        # x86-64 gas reads '@object', aarch64 gas prefers '%object'
        at = "@" if primary.isa is isas.X86_64 else "%"
        plain = fmt.SYMBOL_PREFIX + self.name
        text = '\t.section\t.rodata.ucp_ifunc_image,"a",%sprogbits\n' % at
        for number, (tc, blob_bytes) in enumerate(blobs):
            directory = self.isa_dir(tc)
            blob = os.path.join(directory, "image.bin")
            with open(blob, "wb") as stream:
                stream.write(blob_bytes)
            symbol = (fmt.isa_symbol(self.name, tc.isa.e_machine)
                      if self.multi else plain)
            text += ("\t.globl\t%(sym)s\n"
                     "\t.type\t%(sym)s, %(at)sobject\n"
                     "\t.p2align\t6\n"
                     "%(sym)s:\n"
                     '\t.incbin\t"%(blob)s"\n'
                     "\t.size\t%(sym)s, .-%(sym)s\n"
                     % {"sym": symbol, "at": at,
                        "blob": blob.replace("\\", "\\\\").replace('"', '\\"')})
            if self.multi and number == 0:
                # the first ISA's image is also NAME.so's plain symbol
                text += ("\t.globl\t%(plain)s\n"
                         "\t.type\t%(plain)s, %(at)sobject\n"
                         "\t.set\t%(plain)s, %(sym)s\n"
                         "\t.size\t%(plain)s, %(size)d\n"
                         % {"plain": plain, "sym": symbol, "at": at,
                            "size": len(blob_bytes)})
        text += '\t.section\t.note.GNU-stack,"",%sprogbits\n' % at
        asm = os.path.join(self.workdir, "image.s")
        with open(asm, "w") as stream:
            stream.write(text)
        obj = os.path.join(self.workdir, "image.o")
        self.run(primary.cc + ["-c", asm, "-o", obj], "image object")
        return obj

    def libgcc_helpers(self, tc, image):
        """Imports that only libgcc_s exports (__divti3, __popcountdi2...):
        the ordinary link binds them statically and hidden, so NAME.so must
        depend on libgcc_s for the target to find them by name."""
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
        RTLD_NOW without them."""
        if not names:
            return
        weaken = ["--weaken-symbol=" + name for name in names]
        for obj in objects:
            self.run(tc.objcopy() + weaken + [obj],
                     "weakening references in " + obj)

    def link(self, tc, objects, image_obj, helpers, output):
        self.run((tc.cxx if self.any_cxx() else tc.cc) + ["-shared"] +
                 self.opts.codegen_flags + ["-o", output] + objects +
                 ([image_obj] if image_obj else []) +
                 ["-Wl,--no-as-needed"] + self.opts.link_args +
                 (["-lgcc_s"] if helpers else []) + ["-Wl,-z,noexecstack"],
                 "link of %s" % self.opts.output)

    def needed(self, tc, objects, helpers):
        """The sonames NAME.so will need (its DT_NEEDED), from a link without
        the image: the image records them so that a target without NAME.so
        knows which libraries resolve the imports its own scope lacks. For
        another ISA than NAME.so's, the same link with that ISA's compiler."""
        probe = os.path.join(self.isa_dir(tc), "needed-probe.so")
        self.link(tc, objects, None, helpers, probe)
        sonames = needed_libraries(probe)
        self.log("libraries for %simports: %s" % (
            tc.isa.display + " " if self.multi else "",
            ", ".join(sonames) or "none"))
        return sonames

    def check_exports(self, library, symbols):
        exported = exported_symbols(library)
        for symbol in self.required_functions() + symbols:
            if symbol not in exported:
                raise UserError("%s: not exported by %s (hidden visibility?); "
                                "give it __attribute__((visibility(\"default\")))"
                                % (symbol, self.opts.output))

    def image_for(self, tc, objects=None):
        """Builds, completes and encodes the image of one ISA. objects: the
        ordinary objects for that ISA, if compiled already. Returns (the
        LinkResult, the libgcc helpers it needs, the encoded image)."""
        if objects is None:
            objects = self.compile_normal(tc)
        linked = self.build_image(tc)
        image = linked.image
        helpers = self.libgcc_helpers(tc, image)
        if helpers:
            self.log("linking libgcc_s for %s" % ", ".join(helpers))
        image.needed = self.needed(tc, objects, helpers)
        return linked, helpers, self.encode(image)

    def build(self):
        chains = self.toolchains()
        primary = chains[0]
        objects = self.compile_normal(primary)
        linked, helpers, blob = self.image_for(primary, objects)
        blobs = [(primary, blob)]
        for tc in chains[1:]:
            blobs.append((tc, self.image_for(tc)[2]))
        self.weaken(primary, objects, linked.target_only_imports)
        image_obj = self.embed(primary, blobs)
        out_dir = os.path.dirname(self.opts.output) or "."
        # Targets may dlopen libraries from out_dir while we build: write a
        # temporary file there and rename it over the output in one step.
        fd, partial = tempfile.mkstemp(dir=out_dir, prefix="." + self.name + ".",
                                       suffix=".so.tmp")
        os.close(fd)
        try:
            self.link(primary, objects, image_obj, helpers, partial)
            self.check_exports(partial, self.image_symbols(chains))
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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if os.path.basename(sys.argv[0]).startswith("ucx-ifunc-keygen"):
        return signing.keygen_main(argv)
    try:
        opts = parse_args(argv)
        if opts.help:
            print(USAGE, end="")
        elif opts.version:
            print("%s %s" % (PROG, __version__))
        elif opts.dump:
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
