#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Errors: UCX status codes and the exception that carries them.

A call that fails raises :class:`UcxIfuncError` with the UCX status (its
number and name) and the line the library logged about it, which says what
was wrong and what to do. The package reads those lines through a UCX log
handler; UCX still prints them as usual (UCX_LOG_LEVEL decides).
"""

import atexit
import threading

from ._ffi import ffi, lib, UCS_LOG_LEVEL_WARN

#: UCX status codes by name (ucs/type/status.h).
STATUS = {
    "UCS_OK": 0,
    "UCS_INPROGRESS": 1,
    "UCS_ERR_NO_MESSAGE": -1,
    "UCS_ERR_NO_RESOURCE": -2,
    "UCS_ERR_IO_ERROR": -3,
    "UCS_ERR_NO_MEMORY": -4,
    "UCS_ERR_INVALID_PARAM": -5,
    "UCS_ERR_UNREACHABLE": -6,
    "UCS_ERR_INVALID_ADDR": -7,
    "UCS_ERR_NOT_IMPLEMENTED": -8,
    "UCS_ERR_MESSAGE_TRUNCATED": -9,
    "UCS_ERR_NO_PROGRESS": -10,
    "UCS_ERR_BUFFER_TOO_SMALL": -11,
    "UCS_ERR_NO_ELEM": -12,
    "UCS_ERR_SOME_CONNECTS_FAILED": -13,
    "UCS_ERR_NO_DEVICE": -14,
    "UCS_ERR_BUSY": -15,
    "UCS_ERR_CANCELED": -16,
    "UCS_ERR_SHMEM_SEGMENT": -17,
    "UCS_ERR_ALREADY_EXISTS": -18,
    "UCS_ERR_OUT_OF_RANGE": -19,
    "UCS_ERR_TIMED_OUT": -20,
    "UCS_ERR_EXCEEDS_LIMIT": -21,
    "UCS_ERR_UNSUPPORTED": -22,
    "UCS_ERR_REJECTED": -23,
    "UCS_ERR_NOT_CONNECTED": -24,
    "UCS_ERR_CONNECTION_RESET": -25,
    "UCS_ERR_ENDPOINT_TIMEOUT": -80,
}
_NAMES = {number: name for name, number in STATUS.items()}

#: The status a peer closed by the other side reports (UCP_IFUNC_PEER_CLOSED).
PEER_CLOSED = STATUS["UCS_ERR_NOT_CONNECTED"]


def status_name(status):
    """The name of UCX status number ``status``, e.g. "UCS_ERR_REJECTED"."""
    name = _NAMES.get(status)
    if name is not None:
        return name
    if -59 <= status <= -40:
        return "UCS_ERR_LINK_FAILURE(%d)" % status
    if -89 <= status <= -60:
        return "UCS_ERR_ENDPOINT_FAILURE(%d)" % status
    return "UCS_STATUS(%d)" % status


class UcxIfuncError(Exception):
    """A call of the ifunc library failed.

    Attributes: ``status`` (the UCX status number, negative), ``name``
    (its name, e.g. "UCS_ERR_INVALID_PARAM"), ``message`` (the line the
    library logged about it, or UCX's text of the status when it logged
    none) and ``call`` (the C function that failed).
    """

    def __init__(self, status, call, message=None):
        self.status = status
        self.name = status_name(status)
        self.call = call
        self.message = message or ffi.string(
            lib.ucs_status_string(status)).decode(errors="replace")
        super().__init__("%s: %s (%d): %s" % (call, self.name, status,
                                              self.message))


# The lines UCX logged (warnings and errors) on each thread since the last
# call that cleared them: a failing call's exception carries the last.
_logged = threading.local()


@ffi.callback("ucs_log_func_t")
def _log_handler(file, line, function, level, comp_conf, message, ap):
    if level <= UCS_LOG_LEVEL_WARN:
        try:
            text = ffi.new("char[]", 1024)
            lib.vsnprintf(text, 1024, message, ap)
            _logged.line = ffi.string(text).decode(errors="replace")
        except Exception:  # never into UCX's stack
            pass
    return 1  # UCS_LOG_FUNC_RC_CONTINUE: UCX prints it too


lib.ucs_log_push_handler(_log_handler)


def _pop_log_handler():
    # Before the interpreter goes: UCX logs at process exit (its
    # destructors) must not call into a finalized interpreter. Registered
    # before the first weakref.finalize of the package, so it runs after
    # the finalizers that close what is left open (atexit runs in reverse).
    lib.ucs_log_pop_handler()


atexit.register(_pop_log_handler)


def clear_logged():
    """Forgets what was logged on this thread (before a call)."""
    _logged.line = None


def refuse_closed(call, what):
    """The error a closed object's method raises: UCS_ERR_INVALID_PARAM,
    without passing the freed handle to C function ``call``."""
    return UcxIfuncError(STATUS["UCS_ERR_INVALID_PARAM"], call,
                         "the %s is closed: make a new one" % what)


def check(status, call):
    """Raises UcxIfuncError for an error ``status`` of C function ``call``
    with the last line logged on this thread; returns ``status`` else."""
    if status < 0:
        line = getattr(_logged, "line", None)
        _logged.line = None
        raise UcxIfuncError(status, call, line)
    return status
