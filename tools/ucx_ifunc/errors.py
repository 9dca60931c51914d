"""Exceptions that end a ucx-ifunc-cc run with a message instead of a traceback."""


class UserError(Exception):
    """A problem in the user's sources or command line.

    Each entry of ``lines`` is printed as ``ucx-ifunc-cc: error: <line>``; a
    line starts with where the problem is (file:line or symbol).
    """

    def __init__(self, *lines):
        super().__init__("\n".join(lines))
        self.lines = list(lines)


class ToolchainBug(Exception):
    """An internal check failed: the output would be wrong, and it is not the
    user's fault."""
