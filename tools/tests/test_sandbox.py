"""ucx-ifunc-cc --sandbox: the rewrite of each construct (assembly in,
assembly out, assembled with as and checked against the rules), whole
libraries (test/ifuncs, csmith programs) whose images must keep rules
S1-S7 of docs/security.md, and the refusals.

The rules are checked by tests/sandbox_rules.py, a capstone check of the
tests' own; the target's verifier (src/ucp/ifunc/sandbox/sandbox_verify.cc) is the
one that counts."""

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import unittest

from tests import helpers
from tests import sandbox_rules
from ucx_ifunc import asm_rewrite, elf_read
from ucx_ifunc import image_format as fmt
from ucx_ifunc import sandbox

SRC_DIR = os.path.normpath(os.path.join(helpers.TOOLS_DIR, os.pardir))
IFUNCS = os.path.join(SRC_DIR, "test", "ifuncs")
CSMITH_DIR = os.path.join(SRC_DIR, "test", "csmith")
WORKERS = 2  # the tests share the machine
# The csmith test's driver (test/csmith/run_ifunc.cc), which runs images
# through the target's real runtime; make check names it. Without it the
# csmith programs are only built and checked against the rules.
CSMITH_DRIVER = os.environ.get("IFUNC_TEST_CSMITH_DRIVER")


def rewrite_function(body, name="f", extra=""):
    """The sandbox rewrite of one function whose body is @body (one
    instruction a line); returns the asm_rewrite.Unit."""
    text = ("\t.text\n\t.globl\t%s\n\t.type\t%s, @function\n%s:\n" %
            (name, name, name) +
            "".join("\t%s\n" % line for line in body) +
            "\t.size\t%s, .-%s\n" % (name, name) + extra)
    result = asm_rewrite.rewrite([("f.c", text)],
                                 sandbox.SandboxFileRewriter)
    return result.units[0]


def instructions(unit):
    """The rewritten text's statements, whitespace normalised."""
    out = []
    for line in unit.text.splitlines():
        line = re.sub(r"\s+", " ", line.split("#")[0]).strip()
        if line:
            out.append(line.replace(", ", ","))
    return out


def assembled_text(unit):
    """The .text bytes of the unit's assembly, assembled with as."""
    work = helpers.scratch_dir("sbx-as")
    source = os.path.join(work, "f.s")
    obj = os.path.join(work, "f.o")
    with open(source, "w") as stream:
        stream.write(unit.text)
    subprocess.run(["as", source, "-o", obj], check=True)
    with open(obj, "rb") as stream:
        elf = elf_read.ElfFile(stream.read())
    return b"".join(s.data() for s in elf.sections if s.name == ".text")


class RewriteTest(unittest.TestCase):
    """Each rewrite on a snippet: its shape, then, assembled, the rules
    (bundles, calls ending bundles, S3-S7)."""

    def rewritten(self, body, expected=(), absent=(), n_imports=0, extra=""):
        unit = rewrite_function(body, extra=extra)
        self.assertEqual(unit.problems, {})
        lines = instructions(unit)
        joined = "\n".join(lines)
        for needle in expected:
            self.assertIn(needle, lines, joined)
        for needle in absent:
            self.assertNotIn(needle, lines, joined)
        text = assembled_text(unit)
        # whole bundles, as the image linker pads them
        text += sandbox.text_fill(len(text), -len(text) % 32)
        self.assertEqual(sandbox_rules.check(text, 1 << 20, n_imports), [],
                         joined)
        return lines

    def test_bundle_mode_and_function_alignment(self):
        lines = self.rewritten(["movq %rdi, %rax", "ret"])
        self.assertEqual(lines[0], ".bundle_align_mode 5")
        self.assertEqual(lines[lines.index("f:") - 1], ".p2align 5")

    def test_memory_operands(self):
        self.rewritten(
            ["movq 8(%rax,%rbx,4), %rcx", "movq (%rsp,%rax,8), %rdx",
             "movl %eax, -4(%rbp)", "addq $1, (%rdi)",
             "movq 8(%rsp), %rax", "movq -32768(%rsp), %rax",
             "movq 32768(%rsp), %rax", "movq foo(%rip), %rax",
             "leaq 8(%rax,%rbx,4), %rcx", "nopw 0(%rax,%rax,1)",
             "prefetcht0 (%rax)", "movsd (%rax), %xmm0", "pushq 8(%rax)",
             "ret"],
            expected=["movq %gs:8(%eax,%ebx,4),%rcx",
                      "movq %gs:(%esp,%eax,8),%rdx",
                      "movl %eax,%gs:-4(%ebp)", "addq $1,%gs:(%edi)",
                      "movq 8(%rsp),%rax", "movq -32768(%rsp),%rax",
                      "movq %gs:32768(%esp),%rax", "movq foo(%rip),%rax",
                      "leaq 8(%rax,%rbx,4),%rcx", "nopw 0(%rax,%rax,1)",
                      "prefetcht0 (%rax)", "movsd %gs:(%eax),%xmm0",
                      "pushq %gs:8(%eax)"])

    def test_single_string_operations_become_moves(self):
        # what gcc -Os writes after the loops of -mstringop-strategy=loop
        self.rewritten(["stosl", "stosb", "lodsq", "movsw", "ret"],
                       expected=["movl %eax,%gs:(%edi)", "leaq 4(%rdi),%rdi",
                                 "movb %al,%gs:(%edi)", "leaq 1(%rdi),%rdi",
                                 "movq %gs:(%esi),%rax", "leaq 8(%rsi),%rsi",
                                 "movw %gs:(%esi),%r11w",
                                 "movw %r11w,%gs:(%edi)", "leaq 2(%rsi),%rsi",
                                 "leaq 2(%rdi),%rdi"],
                       absent=["stosl", "stosb", "lodsq", "movsw"])

    def test_ret(self):
        lines = self.rewritten(["xorl %eax, %eax", "ret"], absent=["ret"])
        start = lines.index("popq %r11")
        self.assertEqual(lines[start - 1:start + 5],
                         [".bundle_lock", "popq %r11",
                          "andl $0xffffffe0,%r11d", "addq %r14,%r11",
                          "jmpq *%r11", ".bundle_unlock"])

    def test_indirect_calls_and_jumps(self):
        lines = self.rewritten(["call *%rax", "call *8(%rbx)",
                                "jmp *(%rax,%rcx,8)"])
        self.assertIn("movq %rax,%r11", lines)
        self.assertIn("movq %gs:8(%ebx),%r11", lines)
        self.assertIn("movq %gs:(%eax,%ecx,8),%r11", lines)
        self.assertEqual(lines.count("call *%r11"), 2)
        self.assertEqual(lines.count("jmp *%r11"), 1)
        self.assertEqual(lines.count("andl $0xffffffe0,%r11d"), 3)

    def test_direct_calls_end_bundles(self):
        # sandbox_rules checks that every call ends a bundle
        self.rewritten(["movq %rdi, %rax", "call g", "addl $1, %eax",
                        "call g", "call g", "ret"],
                       extra="\t.type\tg, @function\ng:\n\tret\n")

    def test_stack_pointer_writes(self):
        lines = self.rewritten(
            ["pushq %rbp", "movq %rsp, %rbp", "subq $48, %rsp",
             "andq $-32, %rsp", "subq %rax, %rsp", "addq $16, %rsp",
             "leaq -8(%rbp), %rsp", "movq %rbp, %rsp", "leave", "ret"],
            absent=["subq $48,%rsp", "andq $-32,%rsp", "leave"])
        self.assertIn("leaq -48(%rsp),%r11", lines)
        self.assertIn("andq $-32,%r11", lines)
        self.assertIn("subq %rax,%r11", lines)
        self.assertIn("leaq 16(%rsp),%r11", lines)
        self.assertIn("leaq -8(%rbp),%r11", lines)
        self.assertIn("movq %rbp,%r11", lines)
        self.assertEqual(lines.count("leaq 0x40000000(%r14,%r11),%rsp"), 7)
        # leave: %rsp from %rbp, then the pop
        last_set = len(lines) - 1 - lines[::-1].index(
            "leaq 0x40000000(%r14,%r11),%rsp")
        self.assertEqual(lines[last_set + 2], "popq %rbp")

    def test_imports_are_called_through_the_gate(self):
        unit = rewrite_function(["call *puts@GOTPCREL(%rip)",
                                 "call strlen@PLT",
                                 "movq memcmp@GOTPCREL(%rip), %rsi",
                                 "jmp *free@GOTPCREL(%rip)"])
        lines = instructions(unit)
        self.assertIn("call __ucp_ifunc_gate.puts", lines)
        self.assertIn("call __ucp_ifunc_gate.strlen", lines)
        self.assertIn("leaq __ucp_ifunc_gate.memcmp(%rip),%rsi", lines)
        # a tail call to an import is a call and a return: S6 lets only
        # calls reach the gate page
        self.assertIn("call __ucp_ifunc_gate.free", lines)
        self.assertNotIn("jmp __ucp_ifunc_gate.free", lines)
        self.assertFalse([l for l in lines if "got_ptr" in l], lines)
        self.assertEqual(unit.imports_called, {"puts", "strlen", "free"})
        self.assertEqual(set(unit.imports_addressed), {"memcmp"})

    def refused(self, body, *needles, extra=""):
        unit = rewrite_function(body, extra=extra)
        messages = [m for ms in unit.problems.values() for m in ms]
        self.assertTrue(messages, unit.text)
        for needle in needles:
            self.assertTrue(any(needle in m for m in messages), messages)
        return messages

    def test_refusals(self):
        self.refused(["syscall"], "instruction 'syscall'", "S2")
        self.refused(["rep movsb"], "string instruction", "S2")
        self.refused(["rep stosq"], "string instruction")
        self.refused(["scasb"], "string instruction")
        self.refused(["cpuid"], "'cpuid'")
        self.refused(["int3"], "'int3'")
        self.refused(["vaddps %ymm0, %ymm1, %ymm2"], "AVX")
        self.refused(["movq %fs:40, %rax"], "%fs segment")
        self.refused(["movq %rax, %r14"], "%r14")
        self.refused(["popq %rsp"], "%rsp")
        self.refused(["movl %eax, %esp"], "part of %rsp")
        self.refused(["xchgq %rax, %rsp"], "writes %rsp")
        self.refused(["movw %ax, %ds"], "segment register")
        self.refused(["ret $8"], "plain ret")
        self.refused(["leaq .L2(%rip), %rax", "jmp *%rax", ".L2:", "ret"],
                     "code label .L2", "computed goto")

    def test_inline_asm_is_named(self):
        unit = rewrite_function(["#APP", "rdtsc", "#NO_APP", "ret"])
        messages = [m for ms in unit.problems.values() for m in ms]
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("inline asm: instruction 'rdtsc'", messages[0])


class LayoutConstantsTest(unittest.TestCase):
    """sandbox.py writes code for the constants of sandbox_layout.h."""

    def test_constants_are_the_layouts(self):
        path = os.path.join(SRC_DIR, "src", "ucp", "ifunc", "format",
                            "sandbox_layout.h")
        with open(path) as stream:
            header = stream.read()
        values = {name: int(value, 0) for name, value in re.findall(
            r"constexpr\s+\w+\s+(k\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)u?;",
            header)}
        self.assertEqual(values["kBundleSize"], sandbox.BUNDLE_SIZE)
        self.assertEqual(values["kBundleMask"], sandbox.BUNDLE_MASK)
        self.assertEqual(values["kGateOffset"] - values["kImageOffset"],
                         sandbox.GATE_FROM_IMAGE)
        self.assertEqual(values["kStackWindow"], sandbox.STACK_WINDOW)
        self.assertEqual(values["kStackMask"], sandbox.STACK_MASK)
        self.assertEqual(values["kRspDispMax"], sandbox.RSP_DISP_MAX)
        self.assertEqual(0x1000 // values["kBundleSize"] - 1,
                         sandbox.MAX_GATE_IMPORTS)
        self.assertEqual(sandbox.gate_vaddr(0), -0x1000 + 32)


def sandbox_build(output, sources, flags):
    return helpers.run_tool(["--sandbox"] + flags + ["-o", output] +
                            sources)


def rule_problems(test, library):
    """Asserts the library's image is a sandbox image; returns what
    sandbox_rules finds wrong with its code."""
    name, image = helpers.image_of(library)
    test.assertEqual(image.flags, fmt.FLAG_SANDBOX)
    test.assertEqual(image.got_ptr_vaddr, 0)
    text = image.segments[fmt.SEG_TEXT]
    test.assertEqual(text.mem_size % sandbox.BUNDLE_SIZE, 0)
    test.assertEqual(image.entry_vaddr % sandbox.BUNDLE_SIZE, 0)
    test.assertTrue(all(r.kind == fmt.RELOC_RELATIVE for r in image.relocs))
    return sandbox_rules.check_image(image) + target_verifier_problems(library)


# The target's own verifier (src/ucp/ifunc/sandbox/sandbox_verify.cc), which decides
# on a target, as ucx-ifunc-info runs it; make check names the tool. Without
# a build (the tests run alone) only sandbox_rules checks.
TARGET_INFO = os.environ.get("IFUNC_TEST_INFO")


def target_verifier_problems(library):
    """What the target's verifier says against the library's x86-64 code:
    nothing if it accepts it."""
    if not TARGET_INFO:
        return []
    out = subprocess.run([TARGET_INFO, library], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         check=False).stdout
    for line in out.splitlines():
        if line.startswith("#     sandbox:"):
            if "the verifier accepts it" in line:
                return []
            return ["target verifier: " + line.split(":", 1)[1].strip()]
    return ["ucx-ifunc-info printed no sandbox line:\n" + out]


# The programs of test/ifuncs, as test/Makefile.inc builds them, with
# IFUNC_SANDBOX (constructs.c leaves its data imports out under it).
def _ifunc_builds():
    builds = []
    for level in ("-O0", "-O2", "-O3", "-Os"):
        name = "constructs_sbx%s" % level[2:]
        builds.append((name, ["constructs.c", "constructs_helper.c"],
                       [level, "-DIFUNC_NAME=" + name, "-lz", "-lm"]))
    for program in ("counter", "echo", "faulty", "rebuilt", "reenter",
                    "stress", "tally", "paper", "partial_paper",
                    "partial_slides", "pattern", "loadcount"):
        builds.append((program, [program + ".c"], ["-O2"]))
    builds.append(("crash", ["crash.c"], ["-O0"]))
    builds.append(("relay", ["relay.c"],
                   ["-O2", "-I" + os.path.join(SRC_DIR, "src")]))
    builds.append(("imports_sbx", ["imports.c"],
                   ["-O2", "-DIFUNC_NAME=imports_sbx"]))
    return builds


class SandboxLibrariesTest(unittest.TestCase):
    """Whole libraries built with --sandbox keep the rules; csmith's
    programs, shipped to a target that runs them in its sandbox, compute
    what they compute natively."""

    def build_all(self, builds, directory):
        def one(build):
            name, sources, flags = build
            output = os.path.join(directory, name + ".so")
            proc = sandbox_build(output, sources, flags)
            return name, output, proc
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            return list(pool.map(one, builds))

    def test_test_ifuncs(self):
        work = helpers.scratch_dir("sbx-ifuncs")
        builds = []
        for name, sources, flags in _ifunc_builds():
            builds.append((name, [os.path.join(IFUNCS, s) for s in sources],
                           ["-Wall", "-Werror", "-I" + IFUNCS,
                            "-DIFUNC_SANDBOX"] + flags))
        built = 0
        for name, output, proc in self.build_all(builds, work):
            with self.subTest(name):
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(rule_problems(self, output), [])
                built += 1
        self.assertEqual(built, len(builds))

    @unittest.skipUnless(TARGET_INFO, "needs the build's ucx-ifunc-info "
                         "(make check sets IFUNC_TEST_INFO)")
    def test_the_target_verifier_refuses_native_code(self):
        """The target's verifier, which the checks above also ask, can say
        no: a library built without --sandbox is not sandbox code."""
        work = helpers.scratch_dir("sbx-native")
        output = os.path.join(work, "counter.so")
        proc = subprocess.run([helpers.LAUNCHER, "-O2", "-o", output,
                               os.path.join(IFUNCS, "counter.c")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotEqual(target_verifier_problems(output), [])

    @unittest.skipUnless(shutil.which("csmith") and
                         os.path.isfile("/usr/include/csmith/csmith.h"),
                         "needs csmith and libcsmith-dev")
    def test_csmith_programs(self):
        sys.path.insert(0, CSMITH_DIR)
        try:
            import csmith_diff
        finally:
            sys.path.remove(CSMITH_DIR)
        work = helpers.scratch_dir("sbx-csmith")
        seed0 = int(os.environ.get("IFUNC_TEST_SANDBOX_SEED", "7100"))
        builds = []
        for seed in range(seed0, seed0 + 4):
            program = os.path.join(work, "prog%d.c" % seed)
            csmith_diff.generate(seed, program)
            for level in ("-O0", "-O2", "-Os"):
                name = csmith_diff.ifunc_name(seed, level)
                builds.append((name, [os.path.join(CSMITH_DIR,
                                                   "csmith_ifunc.c")],
                               [level, "-w", "-I/usr/include/csmith",
                                "-I" + CSMITH_DIR] +
                               csmith_diff.wrapper_defines(name, program,
                                                           sandbox=True)))
        natives = {}
        for (name, output, proc), (_, _, flags) in zip(
                self.build_all(builds, work), builds):
            with self.subTest(name):
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(rule_problems(self, output), [])
                program = flags[-2].split("=", 1)[1].strip('"')
                native = native_checksum(program, flags[0], work)
                if native is not None:  # else undefined or too slow
                    natives[name] = native
        if not CSMITH_DRIVER:
            return  # run alone: no runtime to run them with
        sandboxed = sandboxed_checksums(natives, work)
        for name, native in natives.items():
            with self.subTest(name):
                self.assertEqual(sandboxed.get(name), native)
        compared = len(natives)
        # most csmith programs are defined: a run that compares none
        # checks nothing
        self.assertGreaterEqual(compared, len(builds) // 2)


def native_checksum(program, level, work):
    """The checksum csmith's program prints, compiled natively at level;
    None if it does not run to the end within 10 s."""
    exe = os.path.join(work, os.path.basename(program) + level + ".exe")
    subprocess.run(["cc", level, "-w", "-I/usr/include/csmith", program,
                    "-o", exe], check=True)
    try:
        proc = subprocess.run([exe], stdout=subprocess.PIPE, timeout=10,
                              universal_newlines=True)
    except subprocess.TimeoutExpired:
        return None
    found = re.search(r"^checksum = ([0-9A-F]+)$", proc.stdout, re.M)
    return int(found.group(1), 16) if proc.returncode == 0 and found else None


def sandboxed_checksums(names, work):
    """{name: checksum} of the libraries NAMES in WORK, each shipped by the
    csmith test's driver to a target that runs it under
    UCX_IFUNC_TRUST=sandboxed alone: the real runtime's verifier and slot,
    its result in memory granted to the ifunc."""
    empty = os.path.join(work, "no-lib")
    os.makedirs(empty, exist_ok=True)
    proc = subprocess.run([CSMITH_DRIVER, "--sandbox", "--timeout", "100",
                           "--target-lib-dir", empty] + list(names),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600,
                          env=dict(os.environ, UCX_IFUNC_LIB_DIR=work,
                                   UCX_TLS=os.environ.get("UCX_TLS", "sm")))
    sums = {}
    for line in proc.stdout.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] in names and words[1] == "ok":
            sums[words[0]] = int(words[2], 16)
    if len(sums) != len(names):
        raise AssertionError("csmith_ifunc_run --sandbox:\n" + proc.stdout)
    return sums


class SandboxRefusalTest(unittest.TestCase):
    """Refusals of whole builds name the construct and the line."""

    def refused(self, filename, body, *needles, flags=()):
        work = helpers.scratch_dir("sbx-refuse")
        source = helpers.write_source(work, filename, body)
        output = os.path.join(work, filename.split(".")[0] + ".so")
        proc = helpers.run_tool(["--sandbox"] + list(flags) +
                                ["-o", output, source], cwd=work)
        return helpers.assert_refused(self, output, proc, needles)

    def test_data_import(self):
        self.refused("data_import.c", """\
            #include <stdio.h>
            void data_import_main(void *p, size_t n, void *t)
            {
                *(FILE **)p = stdout;
            }
            """, "data_import.c:4:", "'stdout' is imported but never called")

    def test_inline_asm_syscall(self):
        self.refused("asm_syscall.c", """\
            #include <stddef.h>
            void asm_syscall_main(void *p, size_t n, void *t)
            {
                asm volatile("syscall" ::: "rax", "rcx", "memory");
            }
            """, "asm_syscall.c:4:", "inline asm: instruction 'syscall'")

    def test_thread_local_import(self):
        self.refused("tls_import.c", """\
            #include <stddef.h>
            extern __thread int shared_tls;
            void tls_import_main(void *p, size_t n, void *t)
            {
                *(int *)p = shared_tls;
            }
            """, "tls_import.c:5:", "'shared_tls' is a thread-local")

    def test_too_many_imports(self):
        names = ["ext_fn_%d" % i for i in range(130)]
        body = "#include <stddef.h>\n" + "".join("int %s(void);\n" % n for n in names) + \
            "void many_main(void *p, size_t n, void *t)\n{\n" + \
            "".join("    *(int *)p += %s();\n" % n for n in names) + "}\n"
        self.refused("many.c", body, "imports 130 functions",
                     "room for 127")

    def test_computed_goto(self):
        self.refused("goto.c", """\
            #include <stddef.h>
            void goto_main(void *p, size_t n, void *t)
            {
                static void *where[] = {&&one, &&two};
                goto *where[n & 1];
            one:
                *(int *)p = 1;
                return;
            two:
                *(int *)p = 2;
            }
            """, "goto.c:", "code label", flags=["-O2"])

    def test_other_isas(self):
        work = helpers.scratch_dir("sbx-isa")
        source = helpers.write_source(work, "isa.c", "void isa_main(void) {}")
        output = os.path.join(work, "isa.so")
        proc = helpers.run_tool(["--sandbox", "--target",
                                 "x86_64-linux-gnu,aarch64-linux-gnu", "-o",
                                 output, source])
        helpers.assert_refused(self, output, proc,
                               ["--sandbox: only x86-64"])


if __name__ == "__main__":
    unittest.main()
