"""The two conventions of an ifunc library's payload functions, and the
check of their prototypes at compile time.

Both come from the ifunc authors. The paper (and its prototype) names the
bound function NAME_payload_get_max_size and calls
NAME_payload_init(payload, payload_size, source_args, source_args_size);
the workshop slides name it NAME_payload_bound and call
NAME_payload_init(source_args, source_args_size, payload, payload_size_p).
The runtime tells them apart by the bound function a library defines
(src/ucp/ifunc/load/registry.h), so a library that takes the wrong order still
builds and loads, and then writes its payload over the caller's arguments.

To catch that at build time without another compiler run, the tool looks
for the bound function's name in the sources' text before they compile
(detect), and gives every compile a header (-include) that declares the
three functions with that convention's prototypes (write_header): a
definition with other types is then the compiler's own "conflicting types"
error, to which explain() adds a line naming both conventions.
"""

import os
import re
from dataclasses import dataclass

BOUND_PARAMS = "void *source_args, size_t source_args_size"
MAIN_PARAMS = "void *payload, size_t payload_size, void *target_args"
HEADER_NAME = "prototypes.h"


@dataclass(frozen=True)
class Convention:
    title: str  # "the paper's", as in "the paper's convention"
    bound_suffix: str
    init_params: str

    def bound(self, name):
        return name + self.bound_suffix

    def prototypes(self, name):
        """The C prototypes of the payload functions of ifunc name."""
        return ["size_t %s(%s)" % (self.bound(name), BOUND_PARAMS),
                "int %s_payload_init(%s)" % (name, self.init_params)]


PAPER = Convention("the paper's", "_payload_get_max_size",
                   "void *payload, size_t payload_size, void *source_args, "
                   "size_t source_args_size")
SLIDES = Convention("the workshop slides'", "_payload_bound",
                    "void *source_args, size_t source_args_size, "
                    "void *payload, size_t *payload_size")
CONVENTIONS = (PAPER, SLIDES)

# Comments and string or character literals: a name in them defines nothing.
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'
                       r"'(?:\\.|[^'\\\n])*'", re.S)


def main_prototype(name):
    return "void %s_main(%s)" % (name, MAIN_PARAMS)


def detect(name, sources):
    """The Convention whose bound function the sources name, or None if
    they name neither or both (the tool then checks NAME_main only, and the
    definitions decide). A name made by a macro, as CAT(NAME,
    _payload_bound), counts by its suffix, when no source spells a full
    name."""
    code = []
    for source in sources:
        with open(source, errors="replace") as stream:
            code.append(_NOT_CODE.sub(" ", stream.read()))
    text = "\n".join(code)

    def named(identifiers):
        return [c for c, identifier in zip(CONVENTIONS, identifiers)
                if re.search(r"\b%s\b" % identifier, text)]

    found = named([c.bound(name) for c in CONVENTIONS]) or \
        named([c.bound_suffix for c in CONVENTIONS])
    return found[0] if len(found) == 1 else None


def _declarations(name, convention):
    """(function, prototype) of what the header declares."""
    declared = [(name + "_main", main_prototype(name))]
    if convention is not None:
        declared = list(zip([convention.bound(name), name + "_payload_init"],
                            convention.prototypes(name))) + declared
    return declared


_HEADER_START = ["#ifdef __cplusplus", 'extern "C" {', "#endif"]


def header_text(name, convention):
    """The declarations every compile of ifunc name starts with."""
    lines = ["/* ucx-ifunc-cc: the prototypes of ifunc %s%s; a definition "
             "that differs is an error. */" % (
                 name, " in %s convention" % convention.title
                 if convention else "")] + _HEADER_START
    # __SIZE_TYPE__ is size_t without a header that would define more
    lines += [prototype.replace("size_t", "__SIZE_TYPE__") + ";"
              for _, prototype in _declarations(name, convention)]
    lines += ["#ifdef __cplusplus", "}", "#endif", ""]
    return "\n".join(lines)


def _declaration_lines(name, convention):
    """{line number in the header: function declared there}."""
    first = 1 + len(_HEADER_START) + 1
    return {first + i: function for i, (function, _) in
            enumerate(_declarations(name, convention))}


def write_header(directory, name, convention):
    """Writes the header for -include; returns its absolute path."""
    path = os.path.abspath(os.path.join(directory, HEADER_NAME))
    with open(path, "w") as stream:
        stream.write(header_text(name, convention))
    return path


# A diagnostic's location, "file:line:col: " (gcc, clang), whatever the
# language of the rest.
_LOCATION = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):\d+: ")
_COLOUR = re.compile(r"\x1b\[[0-9;]*[mK]")


def explain(name, convention, header, diagnostics):
    """Lines that say, for every function of ifunc name whose definition
    conflicts with its declaration in header (the compiler's diagnostics,
    bytes, point at that declaration with a note after the error), which
    prototype it must have and why. Found by locations, not by the words
    of the messages, which the compiler may translate."""
    functions = _declaration_lines(name, convention)
    lines, seen, error_at = [], set(), None
    text = _COLOUR.sub("", diagnostics.decode("utf-8", "replace"))
    for diagnostic in text.splitlines():
        found = _LOCATION.match(diagnostic)
        if found is None:
            continue
        if found.group("file") != header:
            error_at = found
            continue
        function = functions.get(int(found.group("line")))
        if function is None or error_at is None or function in seen:
            continue
        seen.add(function)
        lines.append("%s:%s: %s" % (error_at.group("file"),
                                    error_at.group("line"),
                                    _explanation(name, convention, function)))
    return lines


def _explanation(name, convention, function):
    """One line about function, whose definition conflicts with the
    prototype of convention (the same in both for NAME_main)."""
    both = "; ".join("%s convention (%s): %s" % (
        c.title, c.bound(name), ", ".join(c.prototypes(name)))
        for c in CONVENTIONS)
    if function == name + "_main":
        return ("%s: its prototype must be %s, as in both conventions of "
                "ifunc libraries (%s)" % (
                    function, main_prototype(name),
                    ", and ".join("%s, with %s" % (c.title, c.bound(name))
                                 for c in CONVENTIONS)))
    return ("%s: its prototype is not the one of %s convention, which this "
            "library follows because it defines %s; %s; both: %s"
            % (function, convention.title, convention.bound(name), both,
               main_prototype(name)))
