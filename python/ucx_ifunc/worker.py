#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""The default path: ifunc workers, listeners and peers."""

import collections
import itertools
import time
import weakref

from . import _ffi
from ._lifetime import Closable, Owned
from ._ffi import ffi, lib
from .context import Code, Context
from .errors import STATUS, UcxIfuncError, check, clear_logged, refuse_closed

#: Paths a peer's messages take (ucp_ifunc_path_t), by name.
PATHS = {"auto": 0, "channel": 1, "am": 2}
_PATH_NAMES = {number: name for name, number in PATHS.items()}

_NO_RESOURCE = STATUS["UCS_ERR_NO_RESOURCE"]
# Looked up once: a send's fast path calls them directly.
_send_nbx = lib.ucp_ifunc_peer_send_nbx
_send_array_nbx = lib.ucp_ifunc_peer_send_array_nbx
_from_buffer = ffi.from_buffer
_NULL = ffi.NULL

#: What :meth:`Peer.query` reports (ucp_ifunc_peer_attr_t): the path
#: ("auto" until set up, "channel" or "am"), the peer's ISA as an ELF
#: machine number, its status (0, or why it failed), the messages sent
#: with their code and by reference, the sends waiting for room, the bytes
#: held for it, and the Ed25519 key it proved at connect (None if none).
PeerInfo = collections.namedtuple("PeerInfo", [
    "path", "machine", "status", "sent_with_code", "sent_by_ref", "queued",
    "held_bytes", "key"])

# Sends with a Python callback, by the key passed as their user_data: the
# callbacks and the payload they keep alive, until the C side is done.
_pending = {}
_keys = itertools.count(1)
# Workers by the key passed as their peer_cb_arg.
_workers = weakref.WeakValueDictionary()


class _Pending:
    __slots__ = ("worker", "payload", "on_sent", "on_report", "waiting")

    def __init__(self, worker, payload, on_sent, on_report):
        self.worker = worker
        self.payload = payload
        self.on_sent = on_sent
        self.on_report = on_report
        self.waiting = (on_sent is not None) + (on_report is not None)


def _done(key, pending, which, status):
    pending.waiting -= 1
    if pending.waiting <= 0:
        _pending.pop(key, None)
    callback = getattr(pending, which)
    if which == "on_sent":
        pending.payload = None  # the library no longer reads it
    try:
        callback(status)
    except BaseException as err:  # re-raised by Worker.progress
        pending.worker._errors.append(err)


@ffi.callback("ucp_ifunc_send_cb_t")
def _sent_cb(user_data, status):
    key = int(ffi.cast("uintptr_t", user_data))
    pending = _pending.get(key)
    if pending is not None:
        _done(key, pending, "on_sent", status)


@ffi.callback("ucp_ifunc_report_cb_t")
def _report_cb(user_data, status):
    key = int(ffi.cast("uintptr_t", user_data))
    pending = _pending.get(key)
    if pending is not None:
        _done(key, pending, "on_report", status)


@ffi.callback("ucp_ifunc_peer_cb_t")
def _peer_cb(peer_handle, status, arg):
    worker = _workers.get(int(ffi.cast("uintptr_t", arg)))
    if worker is not None:
        worker._peer_event(peer_handle, status)


def _release_worker(handles):
    iworker, worker = handles
    lib.ucp_ifunc_worker_destroy(iworker)
    lib.ucp_worker_destroy(worker)


class Worker(Closable):
    """An ifunc worker (ucp_ifunc_worker_create) on a UCP worker of
    ``context``, made for it.

    ``target_args``: a writable buffer (bytearray, NumPy array, ctypes
    object, anything with the buffer protocol) whose address every message
    this worker runs gets as its ``target_args``; it is kept alive with the
    worker. ``on_peer(peer, status)``: called from :meth:`progress` when a
    peer connects to a listener (status 0) or fails or is closed by the
    other side (:data:`ucx_ifunc.PEER_CLOSED` for a clean close). ``path``:
    "auto" (default), "channel" or "am" for its peers.

    It owns its listeners and peers: :meth:`close` (or a ``with`` block,
    or the interpreter's exit) closes them first.
    """

    def __init__(self, context, target_args=None, on_peer=None, path=None):
        if not isinstance(context, Context) or context.closed:
            raise ValueError("Worker needs an open ucx_ifunc.Context")
        # Checked before the UCP worker exists, so a bad argument leaks
        # nothing.
        target_buffer = None if target_args is None else \
            ffi.from_buffer(target_args, require_writable=True)
        path_number = None if path is None else PATHS[path]
        self.context = context
        self.target_args = target_args
        self.on_peer = on_peer
        self._errors = []
        self._progressing = 0  # calls of progress under way
        self._accepted = {}
        self._children = weakref.WeakSet()
        self._key = next(_keys)
        params = ffi.new("ucp_worker_params_t *")
        handle = ffi.new("ucp_worker_h *")
        clear_logged()
        check(lib.ucp_worker_create(context._h, params, handle),
              "ucp_worker_create")
        self._worker = handle[0]
        iparams = ffi.new("ucp_ifunc_worker_params_t *")
        iparams.field_mask = _ffi.UCP_IFUNC_WORKER_FIELD_PEER_CB
        iparams.peer_cb = _peer_cb
        iparams.peer_cb_arg = ffi.cast("void *", self._key)
        if target_buffer is not None:
            self._target_buffer = target_buffer
            iparams.field_mask |= _ffi.UCP_IFUNC_WORKER_FIELD_TARGET_ARGS
            iparams.target_args = target_buffer
        if path_number is not None:
            iparams.field_mask |= _ffi.UCP_IFUNC_WORKER_FIELD_PATH
            iparams.path = path_number
        ihandle = ffi.new("ucp_ifunc_worker_h *")
        status = lib.ucp_ifunc_worker_create(context._h, self._worker,
                                             iparams, ihandle)
        if status < 0:
            lib.ucp_worker_destroy(self._worker)
            check(status, "ucp_ifunc_worker_create")
        self._h = ihandle[0]
        _workers[self._key] = self
        context._children.add(self)
        self._owned = Owned((self._h, self._worker), _release_worker,
                            context._owned)
        self._finalizer = weakref.finalize(self, self._owned)

    def progress(self):
        """Runs what arrived and sends what waits
        (ucp_ifunc_worker_progress); returns the number of events. Raises
        the first exception a callback raised meanwhile."""
        if self._h == _NULL:
            raise refuse_closed("ucp_ifunc_worker_progress", "worker")
        self._progressing += 1
        try:
            count = lib.ucp_ifunc_worker_progress(self._h)
        finally:
            self._progressing -= 1
        if self._errors:
            error = self._errors.pop(0)
            raise error
        return count

    def progress_until(self, condition, timeout=10.0):
        """Progresses until ``condition()`` is true; raises TimeoutError
        after ``timeout`` seconds (None: never)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        progress = self.progress
        while not condition():
            progress()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("ucx_ifunc: condition not met in %ss"
                                   % timeout)

    def listen(self, address="0"):
        """Accepts peers on ``address`` ("HOST:PORT", ":PORT" or "PORT";
        port 0: any) and returns the :class:`Listener`
        (ucp_ifunc_listen)."""
        return Listener(self, address)

    def connect(self, address, timeout_ms=None, path=None):
        """Connects to the listener at "HOST:PORT" and returns the
        :class:`Peer` (ucp_ifunc_peer_connect); progresses until the peer
        answered."""
        return Peer._connect(self, address, timeout_ms, path)

    def _peer_event(self, handle, status):
        key = int(ffi.cast("uintptr_t", handle))
        peer = self._accepted.get(key)
        if peer is None:
            for child in list(self._children):
                if isinstance(child, Peer) and child._h == handle:
                    peer = child
                    break
        if peer is None and status == 0:
            peer = Peer(self, handle, accepted=True)
            self._accepted[key] = peer
        if peer is not None and peer.accepted and status != 0:
            # The worker releases an accepted peer that failed once this
            # returns: forgotten first, so on_peer closing it does nothing.
            self._accepted.pop(key, None)
            peer._forget()
        try:
            if self.on_peer is not None and peer is not None:
                self.on_peer(peer, status)
        except BaseException as err:
            self._errors.append(err)

    @property
    def closed(self):
        """Whether the worker was closed."""
        return self._owned.released

    def close(self):
        """Closes the peers this worker connected (what is under way
        arrives first) and its listeners, then the worker, with the peers
        its listeners accepted. Closing again does nothing."""
        if self._owned.released:
            return
        self._refuse_progressing("ucp_ifunc_worker_destroy", "worker")
        first_error = None
        for child in list(self._children):
            if not (isinstance(child, Peer) and child.accepted):
                try:
                    child.close()
                except BaseException as err:  # the worker goes anyway
                    first_error = first_error or err
        for peer in self._accepted.values():
            peer._forget()  # ucp_ifunc_worker_destroy frees them
        self._accepted.clear()
        self._finalizer()
        self._h = self._worker = _NULL
        _workers.pop(self._key, None)
        if first_error is None and self._errors:
            first_error = self._errors.pop(0)  # a callback's, while closing
        if first_error is not None:
            raise first_error

    def _refuse_progressing(self, call, what):
        # The C API forbids closing a peer or destroying the worker from
        # its callbacks (they run inside ucp_ifunc_worker_progress), and
        # from another thread while one progresses.
        if self._progressing:
            raise UcxIfuncError(
                STATUS["UCS_ERR_INVALID_PARAM"], call,
                "cannot close the %s while the worker progresses (from a "
                "callback, or from another thread): close it after "
                "progress() returned" % what)


class Listener(Closable):
    """Accepts peers for a :class:`Worker` (made by
    :meth:`Worker.listen`); ``port`` is the port it listens on."""

    def __init__(self, worker, address):
        if worker.closed:
            raise refuse_closed("ucp_ifunc_listen", "worker")
        params = ffi.new("ucp_ifunc_listener_params_t *")
        params.field_mask = _ffi.UCP_IFUNC_LISTENER_FIELD_ADDRESS
        c_address = ffi.new("char[]", str(address).encode())
        params.address = c_address
        handle = ffi.new("ucp_ifunc_listener_h *")
        clear_logged()
        check(lib.ucp_ifunc_listen(worker._h, params, handle),
              "ucp_ifunc_listen")
        self.worker = worker
        self._h = handle[0]
        worker._children.add(self)
        self._owned = Owned(self._h, lib.ucp_ifunc_listener_destroy,
                            worker._owned)
        self._finalizer = weakref.finalize(self, self._owned)
        attr = ffi.new("ucp_ifunc_listener_attr_t *")
        attr.field_mask = _ffi.UCP_IFUNC_LISTENER_ATTR_FIELD_PORT
        check(lib.ucp_ifunc_listener_query(self._h, attr),
              "ucp_ifunc_listener_query")
        self.port = attr.port

    def close(self):
        """Stops accepting peers; peers already accepted stay."""
        self._finalizer()
        self._h = _NULL

    @property
    def closed(self):
        """Whether the listener was closed."""
        return self._owned.released


def _release_peer(handle):
    lib.ucp_ifunc_peer_close(handle)


class Peer(Closable):
    """Another process this worker exchanges messages with: one this side
    connected (:meth:`Worker.connect`) or one a listener accepted (passed
    to the worker's ``on_peer``; ``accepted`` is True, and the worker
    releases it when it fails or the worker closes)."""

    def __init__(self, worker, handle, accepted):
        self.worker = worker
        self.accepted = accepted
        self._h = handle
        worker._children.add(self)
        self._owned = Owned(handle, _release_peer, worker._owned)
        self._finalizer = weakref.finalize(self, self._owned)
        if accepted:
            self._owned.forget()  # the worker's to release

    @classmethod
    def _connect(cls, worker, address, timeout_ms, path):
        params = ffi.new("ucp_ifunc_peer_params_t *")
        params.field_mask = _ffi.UCP_IFUNC_PEER_FIELD_ADDRESS
        c_address = ffi.new("char[]", str(address).encode())
        params.address = c_address
        if timeout_ms is not None:
            params.field_mask |= _ffi.UCP_IFUNC_PEER_FIELD_TIMEOUT
            params.timeout_ms = timeout_ms
        if path is not None:
            params.field_mask |= _ffi.UCP_IFUNC_PEER_FIELD_PATH
            params.path = PATHS[path]
        if worker.closed:
            raise refuse_closed("ucp_ifunc_peer_connect", "worker")
        handle = ffi.new("ucp_ifunc_peer_h *")
        clear_logged()
        check(lib.ucp_ifunc_peer_connect(worker._h, params, handle),
              "ucp_ifunc_peer_connect")
        return cls(worker, handle[0], accepted=False)

    def send(self, code, payload=b"", on_sent=None, on_report=None,
             with_code=False, retry=True):
        """Sends ``payload`` to the peer, for ``code``'s NAME_main to run
        there once (ucp_ifunc_peer_send_nbx).

        ``payload``: bytes, bytearray, memoryview, a NumPy array or any
        C-contiguous buffer; the library reads it in place (no copy here).
        Without ``on_sent`` it may be changed as soon as this returns (the
        library copies what it still needs). With ``on_sent(status)``, the
        buffer is kept alive and must not change until that is called:
        at once if the send went at once, else from :meth:`Worker.progress`
        (status 0, UCS_ERR_CANCELED if a close ended it unsent, or the
        peer's failure). ``on_report(status)``: asks for a delivery
        report, called once from :meth:`Worker.progress` with what became
        of the message (0: it ran; the C header lists the rest).
        ``with_code``: send the code with it even if the peer holds it.
        ``retry``: when the peer's queue is full, progress the worker and
        send again (else raise UCS_ERR_NO_RESOURCE).

        Returns 0 (sent or queued) or 1 (UCS_INPROGRESS: ``on_sent``
        comes later); raises :class:`UcxIfuncError` for a failure.
        """
        if on_sent is None and on_report is None and not with_code:
            buffer = payload if type(payload) is bytes else \
                _from_buffer(payload)
            status = _send_nbx(self._h, code._h, buffer, len(buffer), _NULL)
            if status == 0:
                return 0
            return self._send_again(code, buffer, status, retry)
        return self._send_with(code, payload, on_sent, on_report, with_code,
                               retry)

    def sender(self, code):
        """A function ``send(payload)`` that sends ``payload`` to this peer
        for ``code``, as :meth:`send` does without its options (no
        callbacks; a full queue: progress and send again), at the least
        cost per call: for loops that send many small messages. It fails
        as :meth:`send` does once the peer or the code is closed."""
        peer, worker = self, self.worker
        send_nbx, from_buffer, null = _send_nbx, _from_buffer, _NULL

        def send(payload):
            buffer = payload if type(payload) is bytes else \
                from_buffer(payload)
            status = send_nbx(peer._h, code._h, buffer, len(buffer), null)
            if status == 0:
                return 0
            return peer._send_again(code, buffer, status, True)

        return send

    def _send_again(self, code, buffer, status, retry):
        # The slow path of a send without options. The fast path does not
        # clear the thread's logged line (it costs), so a failed send is
        # sent once more after clearing it, for the exception to carry
        # this send's line rather than an older call's: a send that
        # failed sent nothing. A full queue: progress and send again.
        first = True
        while status < 0:
            if status == _NO_RESOURCE and retry:
                self.worker.progress()
            elif not first:
                return self._sent(status)
            first = False
            clear_logged()
            status = _send_nbx(self._h, code._h, buffer, len(buffer), _NULL)
        return status

    def send_array(self, code, payloads, length=None):
        """Sends one message of ``code`` per payload of ``payloads``, in
        order, in one call of the library for as many as the peer's queue
        takes (ucp_ifunc_peer_send_array_nbx): for many small messages,
        where a call from Python costs more than the send.

        ``payloads``: the payloads back to back in one C-contiguous buffer,
        each ``length`` bytes; without ``length``, a buffer of two or more
        dimensions (a 2-D NumPy array: a row a payload). Read in place; it
        may be changed once this returns. A full queue: progress the worker
        and send the rest. Returns how many were sent (all); raises
        :class:`UcxIfuncError` for a failure, and ValueError for a buffer
        that is not a whole number of payloads.
        """
        view = memoryview(payloads)
        if length is None:
            if view.ndim < 2:
                raise ValueError("send_array: give length (the size of each "
                                 "payload in bytes) for a buffer of one "
                                 "dimension")
            if view.shape[0] == 0:
                return 0
            length = view.nbytes // view.shape[0]
        count = view.nbytes // length if length > 0 else 0
        if length <= 0 or count * length != view.nbytes:
            raise ValueError("send_array: %d bytes are not a whole number of "
                             "%s-byte payloads" % (view.nbytes, length))
        buffer = _from_buffer(payloads)
        sent = ffi.new("size_t *")
        done = 0
        while done < count:
            status = _send_array_nbx(self._h, code._h, buffer + done * length,
                                     length, count - done, sent, _NULL)
            done += sent[0]
            if status == _NO_RESOURCE:
                self.worker.progress()
            elif status < 0:
                check(status, "ucp_ifunc_peer_send_array_nbx")
        return count

    def _send_with(self, code, payload, on_sent, on_report, with_code, retry):
        buffer = payload if type(payload) is bytes else \
            ffi.from_buffer(payload)
        params = ffi.new("ucp_ifunc_peer_send_params_t *")
        if with_code:
            params.field_mask |= _ffi.UCP_IFUNC_PEER_SEND_FIELD_FLAGS
            params.flags = _ffi.UCP_IFUNC_SEND_FLAG_WITH_CODE
        key = None
        if on_sent is not None or on_report is not None:
            key = next(_keys)
            # The library copies the payload before the send returns
            # unless on_sent is to say when it is done with it.
            pending = _Pending(self.worker,
                               buffer if on_sent is not None else None,
                               on_sent, on_report)
            params.field_mask |= _ffi.UCP_IFUNC_PEER_SEND_FIELD_USER_DATA
            params.user_data = ffi.cast("void *", key)
            if on_sent is not None:
                params.field_mask |= _ffi.UCP_IFUNC_PEER_SEND_FIELD_CALLBACK
                params.cb = _sent_cb
            if on_report is not None:
                params.field_mask |= _ffi.UCP_IFUNC_PEER_SEND_FIELD_REPORT
                params.report = _report_cb
            _pending[key] = pending
        clear_logged()
        status = lib.ucp_ifunc_peer_send_nbx(self._h, code._h, buffer,
                                             len(buffer), params)
        try:
            while retry and status == _NO_RESOURCE:
                self.worker.progress()
                clear_logged()
                status = lib.ucp_ifunc_peer_send_nbx(self._h, code._h, buffer,
                                                     len(buffer), params)
        except BaseException:
            if key is not None:
                _pending.pop(key, None)  # not sent: no callback will come
            raise
        if key is not None:
            if status < 0:
                _pending.pop(key, None)  # no callback will come
            elif status == 0 and on_sent is not None:
                _done(key, pending, "on_sent", 0)
                errors = self.worker._errors
                if errors:
                    raise errors.pop(0)  # the oldest, as progress() does
        return self._sent(status)

    def _sent(self, status):
        if status < 0:
            check(status, "ucp_ifunc_peer_send_nbx")
        return status

    def query(self):
        """What the library knows of the peer, as a :data:`PeerInfo`
        (ucp_ifunc_peer_query)."""
        attr = ffi.new("ucp_ifunc_peer_attr_t *")
        attr.field_mask = _ffi.UCP_IFUNC_PEER_ATTR_FIELDS
        clear_logged()
        check(lib.ucp_ifunc_peer_query(self._h, attr), "ucp_ifunc_peer_query")
        key = bytes(ffi.buffer(attr.key)) if attr.key_verified else None
        return PeerInfo(_PATH_NAMES.get(attr.path, str(attr.path)),
                        attr.machine, attr.status, attr.sent_with_code,
                        attr.sent_by_ref, attr.queued, attr.held_bytes, key)

    def _forget(self):
        self._h = ffi.NULL
        self._owned.forget()

    @property
    def closed(self):
        """Whether this handle no longer names a peer (closed here, or an
        accepted peer the worker released)."""
        return self._h == ffi.NULL or \
            (not self.accepted and self._owned.released)

    def close(self):
        """Closes the peer (ucp_ifunc_peer_close): what is queued or in
        flight is sent first, within the peer's timeout. Sending on it
        afterwards raises UCS_ERR_INVALID_PARAM. Closing again does
        nothing."""
        if self.closed:
            return
        self.worker._refuse_progressing("ucp_ifunc_peer_close", "peer")
        handle, self._h = self._h, ffi.NULL
        if self.accepted:
            self.worker._accepted.pop(int(ffi.cast("uintptr_t", handle)),
                                      None)
            _release_peer(handle)
        else:
            self._finalizer()
        if self.worker._errors:
            raise self.worker._errors.pop(0)
