#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Keeps the manual pages (man/) in step with what they describe. Run by
# "make check" (alone: make -C build check TESTS=contrib/check-man.py),
# which sets IFUNC_MAN_PROGRAMS (the programs "make install" installs, as
# paths in the build) and IFUNC_MAN_PAGES (the pages it installs), and
# IFUNC_TEST_SRCDIR. It fails when
#
#   - an installed program has no page, or its page is not installed;
#   - a program's --help lists an option that the OPTIONS section of its
#     page does not, or the other way round. An option of the page is one
#     named by the tag of a .TP paragraph in OPTIONS (the line after .TP),
#     in bold or roman; italic words there are placeholders (-I dir,
#     -Olevel). An option of --help is one named on a line of the help that
#     starts with '-', after blanks. --help must exit with 0;
#   - a page draws warnings from man (as lintian would report them), or
#     lacks .TH with its own name and section, or a NAME section;
#   - ucx-ifunc(7)'s ENVIRONMENT differs from the variables, or their
#     defaults, of src/ucp/ifunc/base/config.cc.
#
# A page whose program this build does not make (ucx_ifunc_chase without
# MPI, a program not merged yet) is not compared with any --help: the check
# says so, and passes.
import os
import re
import shutil
import subprocess
import sys

OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_+-]*)")
failures = []


def fail(message):
    failures.append(message)
    print("check-man: FAIL: %s" % message)


def note(message):
    print("check-man: %s" % message)


# --- roff --------------------------------------------------------------------

def roff_args(text):
    """The arguments of a macro line, with roff's quoting."""
    args, current, quoted, i = [], "", False, 0
    while i < len(text):
        c = text[i]
        if quoted and c == '"':
            if text[i + 1:i + 2] == '"':
                current += '"'
                i += 1
            else:
                quoted = False
        elif c == '"' and not current:
            quoted = True
        elif c in " \t" and not quoted:
            if current:
                args.append(current)
            current = ""
        else:
            current += c
        i += 1
    if current:
        args.append(current)
    return args


def roff_text(text, font="R", keep_italic=True):
    """Plain text of roff text that starts in font; italic text dropped
    unless keep_italic (placeholders in option tags)."""
    out, previous, i = [], font, 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            if keep_italic or font != "I":
                out.append(c)
            i += 1
            continue
        nxt = text[i + 1:i + 2]
        if nxt == "f":
            name = text[i + 2:i + 3]
            width = 1
            if name == "(":
                name, width = text[i + 3:i + 5], 3
            elif name == "[":
                end = text.index("]", i + 3)
                name, width = text[i + 3:end], end - i - 1
            name = {"P": previous, "": "R"}.get(name, name)
            previous, font = font, ("I" if name in ("I", "BI") else
                                    "B" if name == "B" else "R")
            i += 2 + width
            continue
        if nxt == "(":
            glyph = text[i + 2:i + 4]
            out.append({"dq": '"', "em": "--", "en": "-", "ha": "^",
                        "ti": "~", "~n": "n"}.get(glyph, "?"))
            i += 4
            continue
        if nxt in ("-", "e", "\\"):
            if keep_italic or font != "I":
                out.append({"-": "-", "e": "\\", "\\": "\\"}[nxt])
            i += 2
            continue
        if nxt in ("&", "/", ",", ":", "%", "c"):
            i += 2
            continue
        if nxt == " ":
            out.append(" ")
            i += 2
            continue
        out.append(nxt)
        i += 2
    return "".join(out)


def macro_text(line, keep_italic=True):
    """Plain text of one roff line: a font macro or text."""
    if not line.startswith((".", "'")):
        return roff_text(line, "R", keep_italic)
    parts = line[1:].split(None, 1)
    if not parts:
        return ""
    macro, rest = parts[0], parts[1] if len(parts) > 1 else ""
    fonts = {"B": "B", "I": "I", "BI": "BI", "IB": "IB", "BR": "BR",
             "RB": "RB", "IR": "IR", "RI": "RI", "SM": "R", "SB": "B"}
    if macro not in fonts:
        return ""
    args = roff_args(rest)
    pattern = fonts[macro]
    if len(pattern) == 1:
        return roff_text(" ".join(args), pattern, keep_italic)
    return "".join(roff_text(arg, pattern[i % 2], keep_italic)
                   for i, arg in enumerate(args))


class Page:
    def __init__(self, path):
        self.path = path
        self.file = os.path.basename(path)
        self.name, _, self.section = self.file.rpartition(".")
        with open(path, encoding="utf-8") as stream:
            self.lines = stream.read().splitlines()
        self.th = None
        self.sections = {}  # SH name -> its lines
        current = None
        for line in self.lines:
            if line.startswith('.\\"') or line.startswith("'\\\""):
                continue
            if line.startswith(".TH "):
                self.th = roff_args(line[4:])
            elif line.startswith(".SH"):
                current = roff_text(" ".join(roff_args(line[3:]))).strip()
                self.sections[current] = []
            elif current is not None:
                self.sections[current].append(line)

    def paragraphs(self, section):
        """(tag line, body lines) of each .TP paragraph of a section."""
        lines = self.sections.get(section, [])
        result, i = [], 0
        while i < len(lines):
            if lines[i].startswith(".TP") and i + 1 < len(lines):
                body, j = [], i + 2
                while j < len(lines) and not lines[j].startswith(
                        (".TP", ".SS", ".PP", ".SH", ".P ", ".LP")):
                    body.append(lines[j])
                    j += 1
                result.append((lines[i + 1], body))
                i = j
            else:
                i += 1
        return result

    def options(self):
        """The options named by the OPTIONS section's tags."""
        found = set()
        for tag, _ in self.paragraphs("OPTIONS"):
            found.update(OPTION.findall(macro_text(tag, keep_italic=False)))
        return found


# --- the checks ----------------------------------------------------------------

def check_format(page):
    title = page.name.upper()
    if not page.th or len(page.th) < 2:
        fail("%s: no .TH line" % page.file)
    elif roff_text(page.th[0]) != title or page.th[1] != page.section:
        fail("%s: .TH says %s(%s), not %s(%s)" % (
            page.file, roff_text(page.th[0]), page.th[1], title, page.section))
    if "NAME" not in page.sections:
        fail("%s: no NAME section" % page.file)
    if page.section == "1":
        for section in ("SYNOPSIS", "DESCRIPTION", "OPTIONS"):
            if section not in page.sections:
                fail("%s: no %s section" % (page.file, section))
    man = shutil.which("man")
    if man is None:
        return
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80", MANROFFSEQ="")
    proc = subprocess.run([man, "--warnings", "-E", "UTF-8", "-l", "-Tutf8",
                           "-Z", page.path], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          universal_newlines=True)
    warnings = proc.stderr.strip()
    if proc.returncode != 0 or warnings:
        fail("%s: man --warnings:\n    %s" % (
            page.file, warnings.replace("\n", "\n    ") or
            "exit status %d" % proc.returncode))


def help_options(program, path):
    """The options of the lines of PROGRAM --help that start with '-'."""
    try:
        proc = subprocess.run([path, "--help"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        fail("%s: %s --help did not run: %s" % (program, path, err))
        return None
    if proc.returncode != 0:
        fail("%s: --help exited with %d (it must print the usage to stdout "
             "and exit with 0):\n    %s" % (
                 program, proc.returncode,
                 (proc.stderr or proc.stdout).strip().replace("\n", "\n    ")))
        return None
    found = set()
    for line in proc.stdout.splitlines():
        if line.lstrip().startswith("-"):
            found.update(OPTION.findall(line))
    if not found:
        fail("%s: --help lists no option (no line starts with '-')" % program)
    return found


def runnable(path):
    """The build's programs as they run uninstalled: ucx-ifunc-cc and
    ucx-ifunc-keygen are launchers whose uninstalled twins find the Python
    package in the source tree."""
    if os.path.exists(path + "-uninstalled"):
        return path + "-uninstalled"
    return path


def check_options(page, path):
    listed = help_options(page.name, path)
    if listed is None:
        return
    documented = page.options()
    for option in sorted(listed - documented):
        fail("%s: --help lists %s, the OPTIONS of %s do not" % (
            page.name, option, page.file))
    for option in sorted(documented - listed):
        fail("%s: the OPTIONS of %s name %s, --help does not" % (
            page.name, page.file, option))
    if listed == documented:
        note("%s: %d options, the same in --help and %s" % (
            page.name, len(listed), page.file))


def config_variables(srcdir):
    """Name -> default of each UCX_IFUNC_ variable of config.cc's table."""
    path = os.path.join(srcdir, "src", "ucp", "ifunc", "base", "config.cc")
    with open(path, encoding="utf-8") as stream:
        text = stream.read()
    table = text[text.index("config_table[]"):]
    return {"UCX_IFUNC_" + name: default for name, default in
            re.findall(r'\{"([A-Z0-9_]+)",\s*"([^"]*)"', table)}


def check_variables(page, srcdir):
    variables = config_variables(srcdir)
    documented = {}
    for tag, body in page.paragraphs("ENVIRONMENT"):
        name = macro_text(tag).strip()
        if not name.startswith("UCX_IFUNC_"):
            continue
        text = " ".join(macro_text(line) for line in body)
        default = re.search(r"Default: (\S*?)\.?(?:\s|$)", text)
        documented[name] = default.group(1) if default else None
    for name in sorted(set(variables) - set(documented)):
        fail("%s: config.cc has %s, the ENVIRONMENT of %s does not" % (
            page.file, name, page.file))
    for name in sorted(set(documented) - set(variables)):
        fail("%s: ENVIRONMENT names %s, which config.cc does not have" % (
            page.file, name))
    for name in sorted(set(documented) & set(variables)):
        want = variables[name] or "unset"
        if documented[name] != want:
            fail("%s: %s: the page says 'Default: %s', config.cc '%s'" % (
                page.file, name, documented[name], want))
    if set(documented) == set(variables):
        note("%s: %d UCX_IFUNC_* variables, as in config.cc" % (
            page.file, len(variables)))


def main():
    srcdir = os.environ.get("IFUNC_TEST_SRCDIR")
    programs = os.environ.get("IFUNC_MAN_PROGRAMS")
    installed = os.environ.get("IFUNC_MAN_PAGES")
    if srcdir is None or programs is None or installed is None:
        print("check-man: run it through make: make -C BUILD check "
              "TESTS=contrib/check-man.py", file=sys.stderr)
        return 2
    programs = {os.path.basename(p): p for p in programs.split()}
    installed = {os.path.basename(p) for p in installed.split()}
    man_dir = os.path.join(srcdir, "man")
    pages = {}
    for name in sorted(os.listdir(man_dir)):
        if re.search(r"\.[1-9]$", name):
            pages[name] = Page(os.path.join(man_dir, name))

    for program in sorted(programs):
        page = program + ".1"
        if page not in pages:
            fail("%s is installed and has no manual page: write man/%s "
                 "(man/ucx-ifunc-cc.1 is an example)" % (program, page))
        elif page not in installed:
            fail("%s is installed and man/%s is not (man/Makefile.inc)" % (
                program, page))

    for name, page in pages.items():
        check_format(page)
        if page.section == "1":
            if page.name in programs:
                check_options(page, runnable(programs[page.name]))
            elif name in installed:
                fail("man/%s is installed, and this build makes no program "
                     "%s" % (name, page.name))
            else:
                note("%s: ABSENT: this build makes no such program (not in "
                     "bin_PROGRAMS or bin_SCRIPTS), so man/%s is neither "
                     "compared with its --help nor installed" % (
                         page.name, name))
        if name == "ucx-ifunc.7":
            check_variables(page, srcdir)

    if failures:
        print("check-man: FAILED, %d problems" % len(failures))
        return 1
    print("check-man: OK, %d pages" % len(pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
