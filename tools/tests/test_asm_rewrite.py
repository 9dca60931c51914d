"""The assembly rewriter, on hand-written gcc-style snippets."""

import textwrap
import unittest

from ucx_ifunc.asm_rewrite import rewrite
from ucx_ifunc.errors import UserError

HEADER = """\
\t.file\t"a.c"
\t.text
\t.file 1 "a.c"
"""

HELPER_FILE = ("b.c", """\
\t.section\t.text.helper,"ax",@progbits
\t.globl\thelper
\t.type\thelper, @function
helper:
\tret
\t.section\t.text.private,"ax",@progbits
\t.type\tprivate, @function
private:
\tret
""")


def function(name, body, section=None, line=10):
    """A function named name in its own section, with body's instructions."""
    return textwrap.dedent("""\
        \t.section\t{section},"ax",@progbits
        \t.globl\t{name}
        \t.type\t{name}, @function
        {name}:
        \t.loc 1 {line} 1
        """).format(name=name, section=section or ".text." + name, line=line) + \
        "".join("\t%s\n" % insn for insn in body)


def rewrite_a(text, others=()):
    result = rewrite([("a.c", HEADER + text)] + list(others))
    return result, result.units[0]


def instructions(unit):
    return [line.strip() for line in unit.text.splitlines()
            if line.startswith("\t") and not line.strip().startswith(".")]


class GotFormsTest(unittest.TestCase):
    def test_call_and_tail_call_to_import(self):
        _, unit = rewrite_a(function("f", ["call\t*printf@GOTPCREL(%rip)",
                                           "jmp\t*exit@GOTPCREL(%rip)"]))
        self.assertEqual(instructions(unit), [
            "movq\t__ucp_ifunc_got_ptr(%rip), %r11",
            "call\t*__ucp_ifunc_import.printf(%r11)",
            "movq\t__ucp_ifunc_got_ptr(%rip), %r11",
            "jmp\t*__ucp_ifunc_import.exit(%r11)"])
        self.assertEqual(unit.problems, {})

    def test_calls_to_definitions_become_direct(self):
        _, unit = rewrite_a(function("f", [
            "call\t*helper@GOTPCREL(%rip)", "call\thelper@PLT",
            "jmp\t*helper@GOTPCREL(%rip)", "call\t*f@GOTPCREL(%rip)"]),
            [HELPER_FILE])
        self.assertEqual(instructions(unit), ["call\thelper", "call\thelper",
                                              "jmp\thelper", "call\tf"])

    def test_static_of_another_file_is_not_a_definition(self):
        _, unit = rewrite_a(function("f", ["call\t*private@GOTPCREL(%rip)"]),
                            [HELPER_FILE])
        self.assertIn("call\t*__ucp_ifunc_import.private(%r11)",
                      instructions(unit))

    def test_plain_call_to_undefined_symbol_is_imported(self):
        _, unit = rewrite_a(function("f", ["call\tabort", "call\thelper",
                                           "jmp\t.L3", "call\t*%rax"]),
                            [HELPER_FILE])
        self.assertEqual(instructions(unit), [
            "movq\t__ucp_ifunc_got_ptr(%rip), %r11",
            "call\t*__ucp_ifunc_import.abort(%r11)",
            "call\thelper", "jmp\t.L3", "call\t*%rax"])

    def test_address_loads(self):
        _, unit = rewrite_a(function("f", [
            "movq\tstdout@GOTPCREL(%rip), %rax",
            "movq\thelper@GOTPCREL(%rip), %r9"]), [HELPER_FILE])
        self.assertEqual(instructions(unit), [
            "movq\t__ucp_ifunc_got_ptr(%rip), %rax",
            "movq\t__ucp_ifunc_import.stdout(%rax), %rax",
            "leaq\thelper(%rip), %r9"])

    def test_weak_symbol_compare_reads_a_relro_cell(self):
        _, unit = rewrite_a(function("f", [
            "cmpq\t$0, hook@GOTPCREL(%rip)", "je\t.L2",
            "call\t*hook@GOTPCREL(%rip)"]) + "\t.weak\thook\n")
        self.assertEqual(instructions(unit)[0],
                         "cmpq\t$0, .Lucp_ifunc_addr.hook(%rip)")
        tail = unit.text[unit.text.index(".weak\t__ucp_ifunc_import.hook"):]
        self.assertIn('.section\t.data.rel.ro.ucp_ifunc_addr.hook,"aw"', tail)
        self.assertIn(".Lucp_ifunc_addr.hook:\n\t.quad\thook", tail)

    def test_strong_import_is_not_marked_weak(self):
        _, unit = rewrite_a(function("f", ["call\t*printf@GOTPCREL(%rip)"]))
        self.assertNotIn(".weak", unit.text)

    def test_stack_protector_and_plain_code_untouched(self):
        body = ["movq\t%fs:40, %rax", "subq\t%fs:40, %rax",
                "leaq\t.LC0(%rip), %rdi", "movl\tcounter(%rip), %eax"]
        source = function("f", body)
        _, unit = rewrite_a(source)
        self.assertEqual(unit.text, HEADER + source + "\n")
        self.assertEqual(unit.problems, {})


class DeferredProblemsTest(unittest.TestCase):
    def test_tls_use_is_recorded_for_its_section_only(self):
        _, unit = rewrite_a(
            function("uses_tls", ["data16\tleaq\ttv@tlsgd(%rip), %rdi",
                                  "call\t*__tls_get_addr@GOTPCREL(%rip)"],
                     line=7) + function("clean", ["ret"]))
        self.assertEqual(list(unit.problems), [".text.uses_tls"])
        [message] = unit.problems[".text.uses_tls"]
        self.assertTrue(message.startswith("a.c:7: in 'uses_tls': 'tv' is a "
                                           "thread-local variable"), message)

    def test_unsupported_got_form(self):
        _, unit = rewrite_a(function("f", [
            "addq\tfoo@GOTPCREL(%rip), %rax", "leaq\tbar@PLT, %rax",
            "movl\tbaz@GOTOFF(%rip), %eax"], line=12))
        messages = unit.problems[".text.f"]
        self.assertEqual(len(messages), 3)
        self.assertIn("a.c:12: in 'f': unsupported use of 'foo@GOTPCREL' in "
                      "'addq\tfoo@GOTPCREL(%rip), %rax'", messages[0])
        self.assertIn("'bar@PLT'", messages[1])
        self.assertIn("'baz@GOTOFF'", messages[2])

    def test_exceptions(self):
        _, unit = rewrite_a(function("f", [".cfi_startproc",
                                           ".cfi_personality 0x9b,DW.ref.x",
                                           ".cfi_lsda 0x1b,.LLSDA1",
                                           "call\t*__cxa_throw@GOTPCREL(%rip)"]))
        messages = unit.problems[".text.f"]
        self.assertEqual(len(messages), 2)  # one for the tables, one for throw
        self.assertIn("C++ exception handling (.cfi_personality)", messages[0])
        self.assertIn("C++ throw", messages[1])

    def test_section_stack_is_followed(self):
        text = function("f", [
            ".pushsection\t.text.other,\"ax\",@progbits",
            "addq\tx@GOTPCREL(%rip), %rax",
            ".popsection",
            "addq\ty@GOTPCREL(%rip), %rax",
            ".section\t.text.third,\"ax\",@progbits",
            ".previous",
            "addq\tz@GOTPCREL(%rip), %rax"])
        _, unit = rewrite_a(text)
        self.assertEqual(sorted(unit.problems), [".text.f", ".text.other"])
        self.assertIn("'x@GOTPCREL'", unit.problems[".text.other"][0])
        self.assertEqual(len(unit.problems[".text.f"]), 2)

    def test_gnu_indirect_function_recorded_at_resolver(self):
        text = function("resolver", ["ret"]) + textwrap.dedent("""\
            \t.globl\tpicked
            \t.type\tpicked, @gnu_indirect_function
            \t.set\tpicked,resolver
            """)
        _, unit = rewrite_a(text)
        [message] = unit.problems[".text.resolver"]
        self.assertIn("'picked' is a GNU indirect function", message)


class RefusedEverywhereTest(unittest.TestCase):
    def test_constructor(self):
        text = function("setup", ["ret"], line=3) + textwrap.dedent("""\
            \t.section\t.init_array,"aw"
            \t.align 8
            \t.quad\tsetup
            """)
        with self.assertRaises(UserError) as ctx:
            rewrite_a(text)
        [line] = ctx.exception.lines
        self.assertTrue(line.startswith("a.c:3: 'setup' is a constructor or "
                                        "destructor (.init_array)"), line)

    def test_thread_local_definition(self):
        text = textwrap.dedent("""\
            \t.section\t.tbss.counter,"awT",@nobits
            \t.type\tcounter, @object
            counter:
            \t.zero\t4
            """)
        with self.assertRaises(UserError) as ctx:
            rewrite_a(text)
        self.assertIn("'counter' is a thread-local variable", ctx.exception.lines[0])


class ParsingTest(unittest.TestCase):
    def test_labels_statements_and_comments(self):
        text = function("f", [
            'lbl: call *printf@GOTPCREL(%rip) # call *puts@GOTPCREL(%rip)',
            "nop; call\t*exit@GOTPCREL(%rip)"]) + \
            '\t.string\t"x; call *abort@GOTPCREL(%rip) # y"\n'
        _, unit = rewrite_a(text)
        self.assertIn("lbl:\n\tmovq\t__ucp_ifunc_got_ptr(%rip), %r11\n"
                      "\tcall\t*__ucp_ifunc_import.printf(%r11)\n", unit.text)
        self.assertIn("\tnop\n\tmovq\t__ucp_ifunc_got_ptr(%rip), %r11\n"
                      "\tcall\t*__ucp_ifunc_import.exit(%r11)\n", unit.text)
        self.assertIn('\t.string\t"x; call *abort@GOTPCREL(%rip) # y"\n',
                      unit.text)
        self.assertNotIn("puts", unit.text.replace("# call *puts", ""))

    def test_result_lists_global_functions(self):
        result, _ = rewrite_a(function("f", ["ret"]), [HELPER_FILE])
        self.assertEqual(result.global_defs, {"f", "helper"})
        self.assertEqual(result.functions, {"f", "helper", "private"})


if __name__ == "__main__":
    unittest.main()
