"""What a Python ifunc may not do, found at build time, with its line.

A target runs a Python ifunc's code without the Python interpreter and
without Numba's runtime, linked only with the C library (libc, libm): the
JIT resolves nothing else (src/ucp/ifunc/load/jit_llvm.cc, resolve.cc).
So the final module of each triple (lowering.TripleModule) may declare
only functions the C library exports, and must hold no address of this
process. What it needs instead names the construct:

- Numba's runtime (NRT_*): memory allocation (np.empty, np.zeros, an
  array expression that makes a new array, lists, dicts, strings);
- the interpreter (Py*, numba_*): an exception raised (raise, assert, an
  operation that raises) or a Python object;
- an address baked in at compile time (inttoptr of a constant): a ctypes
  or cffi function, a global pointer of this process;
- any other declared function: a function the target cannot resolve.

Numba's own refusals (a Python object in nopython mode, an untyped name)
come as its exception: they are said in one line too, with the line Numba
gives. The line of the other constructs comes from a second compile with
debug information (only when something is refused: the shipped code is
compiled without it): the !dbg location of the offending instruction,
followed through inlining to the user's function.
"""

import ctypes
import os
import re
from dataclasses import dataclass
from typing import Optional

ALLOCATION = ("memory allocation (np.empty, np.zeros, an array expression "
              "that makes a new array, a list, dict or string): it needs "
              "Numba's runtime, which a target does not have; write into "
              "the payload or target_args instead")
RAISE = ("an exception (raise, assert, or an operation that raises): "
         "raising needs the Python interpreter, which a target does not "
         "have; return a status through target_args instead")
OBJECT = ("a Python object (print, str, a Python call) or a Numba helper "
          "('%s'): it needs the Python interpreter, which a target does not "
          "have")
ADDRESS = ("a call or pointer through an address of this process (a "
           "ctypes or cffi function, a pointer baked in at compile time): "
           "the address means nothing on the target")
FOREIGN = ("a call to '%s', which is not a C library function: a target "
           "resolves only libc and libm functions for a Python ifunc")

_PYTHON_PREFIXES = ("Py", "_Py", "numba_", "NRT_")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_DBG_RE = re.compile(r"!dbg !(\d+)")
_META_RE = re.compile(r"^!(\d+) = (?:distinct )?(.*)$", re.M)


@dataclass
class Refusal:
    construct: str  # the message, without its place
    filename: Optional[str] = None
    line: int = 0
    function: Optional[str] = None

    def message(self):
        where = self.filename or "<unknown>"
        if self.line:
            where += ":%d" % self.line
        if self.function:
            where += ": in '%s'" % self.function
        return "%s: %s" % (where, self.construct)


class BuildError(Exception):
    """A Python ifunc that cannot be built: the one message says what
    (the construct) and where (file:line: in 'function')."""

    def __init__(self, refusal):
        super().__init__(refusal.message())
        self.refusal = refusal
        self.construct = refusal.construct
        self.filename = refusal.filename
        self.line = refusal.line


# --- what the final module may import -------------------------------------

_C_LIBRARIES = None


def _c_libraries():
    global _C_LIBRARIES
    if _C_LIBRARIES is None:
        _C_LIBRARIES = [ctypes.CDLL("libc.so.6"), ctypes.CDLL("libm.so.6")]
    return _C_LIBRARIES


def is_c_library_function(name):
    """Whether the C library (libc, libm) exports name."""
    if name.startswith(_PYTHON_PREFIXES) or name.startswith("llvm."):
        return False
    for library in _c_libraries():
        try:
            getattr(library, name)
            return True
        except AttributeError:
            pass
    return False


@dataclass
class Problem:
    """One thing the module must not have: its kind and what to look for
    in the debug build's IR to find its line."""
    construct: str
    pattern: re.Pattern


def problems(module):
    """The Problems of a lowering.TripleModule, most telling first."""
    found = []
    names = [g.name for g in module.parsed.imports()]
    # Numba's C callback (cfunc.*) reports an exception main raised with
    # the interpreter's help: what only it calls is a raise in main
    by_main = set()
    for g in module.parsed.globals.values():
        if g.kind == "function" and g.defined and \
                not g.name.startswith("cfunc."):
            by_main |= g.refs
    allocation = [n for n in names if n.startswith("NRT_")]
    python = [n for n in names if n.startswith(_PYTHON_PREFIXES) and
              not n.startswith("NRT_")]
    if allocation:
        found.append(Problem(ALLOCATION, re.compile(
            r"call [^\n]*@NRT_(?:Allocate|MemInfo_alloc|MemInfo_new|"
            r"MemInfo_varsize)\w*\(")))
    # the name that says most first: not error reporting or the GIL
    plumbing = ("PyErr_", "Py_DecRef", "Py_IncRef", "numba_gil_")
    for name in sorted(python, key=lambda n: n.startswith(plumbing)):
        if name in by_main:
            found.append(Problem(OBJECT % name, re.compile(
                r"call [^\n]*@%s\(" % re.escape(name))))
    if python:
        found.append(Problem(RAISE, re.compile(r"store [^\n]*%excinfo\b")))
    if "inttoptr (i64 " in module.text or re.search(
            r"inttoptr i64 -?\d+ to", module.text):
        found.append(Problem(ADDRESS, re.compile(
            r"(?:inttoptr \(i64 -?\d+ to|inttoptr i64 -?\d+ to|"
            r"@numba\.dynamic\.globals\.)")))
    for name in names:
        if name.startswith(_PYTHON_PREFIXES):
            continue
        if not is_c_library_function(name):
            found.append(Problem(FOREIGN % name, re.compile(
                r"call [^\n]*@\"?%s\"?\(" % re.escape(name))))
    for g in module.parsed.globals.values():
        if g.thread_local:
            found.append(Problem("a thread-local variable ('%s'): shipped "
                                 "code has no TLS block" % g.name,
                                 re.compile(re.escape(g.name))))
    return found


# --- where: the debug build's !dbg locations ------------------------------

def _fields(text):
    return dict(re.findall(r"(\w+): (\"(?:[^\"\\]|\\.)*\"|![0-9]+|[^,)]+)",
                           text))


class DebugInfo:
    """The numbered metadata of a module's text."""

    def __init__(self, text):
        self.nodes = {int(n): body for n, body in _META_RE.findall(text)}

    def _unquote(self, value):
        return value[1:-1] if value and value.startswith('"') else value

    def _node(self, ref):
        if ref and ref.startswith("!") and ref[1:].isdigit():
            return self.nodes.get(int(ref[1:]), "")
        return ""

    def _file_of(self, scope_ref):
        """(filename, function name) of a scope (subprogram or block)."""
        function = None
        for _ in range(64):
            node = self._node(scope_ref)
            fields = _fields(node)
            if node.startswith("!DISubprogram"):
                function = self._unquote(fields.get("name"))
            file_node = _fields(self._node(fields.get("file")))
            if node.startswith("!DISubprogram") and file_node:
                return os.path.join(
                    self._unquote(file_node.get("directory", '""')),
                    self._unquote(file_node.get("filename"))), function
            scope_ref = fields.get("scope")
            if scope_ref is None:
                break
        return None, function

    def location(self, ref):
        """(filename, line, function) of DILocation !ref, followed through
        inlining to the outermost function, the user's."""
        node = self._node("!%d" % ref)
        found = None
        for _ in range(64):
            if not node.startswith("!DILocation"):
                break
            fields = _fields(node)
            line = int(fields.get("line", "0"))
            filename, function = self._file_of(fields.get("scope"))
            if line:
                found = (filename, line, function)
            inlined = fields.get("inlinedAt")
            if inlined is None:
                break
            node = self._node(inlined)
        return found


def locate(problem, debug_ir, pyfunc):
    """The Refusal of problem, its place looked up in debug_ir (the IR of
    the debug build), falling back to the function's first line."""
    code = pyfunc.__code__
    info = DebugInfo(debug_ir)
    for line in debug_ir.splitlines():
        if problem.pattern.search(line):
            ref = _DBG_RE.search(line)
            where = info.location(int(ref.group(1))) if ref else None
            if where and where[1]:
                return Refusal(problem.construct, where[0] or
                               code.co_filename, where[1],
                               where[2] or pyfunc.__name__)
    return Refusal(problem.construct, code.co_filename,
                   code.co_firstlineno, pyfunc.__name__)


def from_numba_error(err, pyfunc):
    """The Refusal of an error Numba raised while compiling pyfunc: its
    first line, which names the construct, and the line Numba gives."""
    text = _ANSI_RE.sub("", str(err))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # Numba's first line names its pipeline step; the next says what
    what = next((line for line in lines
                 if not line.startswith("Failed in ") and
                 not line.startswith("During: ")), lines[0] if lines else
                type(err).__name__)
    loc = getattr(err, "loc", None)
    code = pyfunc.__code__
    filename = getattr(loc, "filename", None) or code.co_filename
    line = getattr(loc, "line", None) or code.co_firstlineno
    return Refusal("Numba cannot compile this to run without the Python "
                   "interpreter: %s" % what.rstrip("."), filename, line,
                   pyfunc.__name__)
