"""Exceptions that end a ucx-ifunc-cc run with a message instead of a traceback."""

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Location:
    """Where in the user's sources a statement comes from."""
    file: str
    line: int = 0
    function: Optional[str] = None  # the function or variable it is in
    # a function or variable whose definition's line stands in for an
    # unknown line (cli looks it up in debug information)
    symbol: Optional[str] = None

    def prefix(self):
        """'file:line: in 'f': ' (parts that are unknown are left out)."""
        where = "%s:%d" % (self.file, self.line) if self.line else self.file
        if self.function:
            return "%s: in '%s': " % (where, self.function)
        return where + ": "


class Refusal(str):
    """One error line about the user's code, 'where: what is wrong', that
    keeps its parts: cli adds a line to a location that has none."""

    def __new__(cls, location, message):
        line = super().__new__(cls, location.prefix() + message)
        line.location = location
        line.message = message
        return line


class UserError(Exception):
    """A problem in the user's sources or command line.

    Each entry of ``lines`` is printed as ``ucx-ifunc-cc: error: <line>``; a
    line starts with where the problem is (file:line or symbol).
    """

    def __init__(self, *lines):
        super().__init__("\n".join(lines))
        self.lines = list(lines)  # strings, some of them Refusals


class ToolchainBug(Exception):
    """An internal check failed: the output would be wrong, and it is not the
    user's fault."""
