#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""A process of the package's tests (test_processes.py), driven by its
arguments; it prints one line per event ("WORD key=value ...").

  node.py target ADDRESS COUNT
      listens ("port port=N"), runs the test ifunc pattern's messages into
      a NumPy target_args (struct pattern_result of test/ifuncs/
      test_ifunc.h) until COUNT ran, then prints "result executed=
      corrupt= duplicate= unknown= streams= run_peer= peers=" (peers: the
      statuses on_peer heard) and closes everything.
  node.py source ADDRESS SPEC... [--images] [--report] [--stream K]
      connects and sends pattern messages, SPEC "KIND:COUNT:SIZE" with KIND
      bytes, bytearray, memoryview or numpy (the payload's type); with
      --images the code is registered from the images of pattern.so
      (read with pyelftools), else by name; with --report every send asks
      for a delivery report, awaited before the peer closes ("reports
      ok=N other=M"). Prints "result sent=N path=P with_code= by_ref=".
  node.py exit-open ADDRESS
      connects, registers, sends one message with a report it does not
      wait for, prints "open" and exits without closing anything.
"""

import os
import sys

import numpy

import ucx_ifunc

STREAM_SHIFT = 48
STREAMS = 8
CAPACITY = 1 << 16


def say(*words):
    print(" ".join(str(w) for w in words), flush=True)


def pattern_payload(seq, size):
    """The pattern message of sequence number ``seq``, ``size`` bytes."""
    data = numpy.arange(size, dtype=numpy.uint64) + seq
    data = (data & 0xff).astype(numpy.uint8)
    data[:8] = numpy.frombuffer(seq.to_bytes(8, "little"), numpy.uint8)
    return data


def as_kind(array, kind):
    if kind == "bytes":
        return array.tobytes()
    if kind == "bytearray":
        return bytearray(array.tobytes())
    if kind == "memoryview":
        return memoryview(array.tobytes())
    if kind == "numpy":
        return array
    raise ValueError("unknown payload kind " + kind)


def library_images(path, name):
    """The code images of ifunc ``name`` in the library at ``path``, back
    to back: every __ucp_ifunc_image_NAME* and __ucp_ifunc_bitcode_NAME.*
    symbol's bytes, once each (this ISA's image has two names)."""
    from elftools.elf.elffile import ELFFile
    images, seen = [], set()
    with open(path, "rb") as f:
        elf = ELFFile(f)
        symbols = elf.get_section_by_name(".dynsym")
        for symbol in symbols.iter_symbols():
            sname = symbol.name
            if not (sname == "__ucp_ifunc_image_" + name or
                    sname.startswith("__ucp_ifunc_image_" + name + ".em") or
                    sname.startswith("__ucp_ifunc_bitcode_" + name + ".em")):
                continue
            address = symbol["st_value"]
            if address in seen:
                continue
            seen.add(address)
            section = elf.get_section(symbol["st_shndx"])
            f.seek(section["sh_offset"] + address - section["sh_addr"])
            images.append(f.read(symbol["st_size"]))
    return b"".join(images)


def run_target(address, count):
    header = numpy.zeros(13, dtype=numpy.uint64)
    seen = numpy.zeros(STREAMS * CAPACITY, dtype=numpy.uint8)
    header[12] = seen.ctypes.data
    peers = []
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(
            context, target_args=header,
            on_peer=lambda peer, status: peers.append(status))
        listener = worker.listen(address)
        say("port port=%d" % listener.port)
        worker.progress_until(lambda: header[0] >= count, timeout=60)
        counters = context.query()
        say("result executed=%d corrupt=%d duplicate=%d unknown=%d "
            "streams=%s run_peer=%d peers=%s" % (
                header[0], header[1], header[2], header[3],
                ",".join(str(int(n)) for n in header[4:12]),
                counters.run_peer, ",".join(str(s) for s in peers)))
    return 0


def run_source(address, specs, images, report, stream):
    lib_dir = os.environ.get("UCX_IFUNC_LIB_DIR", ".")
    statuses = []
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context)
        peer = worker.connect(address)
        if images:
            code = context.register_images(
                "pattern", library_images(lib_dir + "/pattern.so", "pattern"))
        else:
            code = context.register("pattern")
        sent = 0
        for spec in specs:
            kind, count, size = spec.split(":")
            for i in range(int(count)):
                seq = (stream << STREAM_SHIFT) | sent
                payload = as_kind(pattern_payload(seq, int(size)), kind)
                if report:
                    peer.send(code, payload, on_report=statuses.append)
                else:
                    peer.send(code, payload)
                worker.progress()
                sent += 1
        if report:
            worker.progress_until(lambda: len(statuses) == sent, timeout=30)
            ok = statuses.count(0)
            say("reports ok=%d other=%d" % (ok, len(statuses) - ok))
        info = peer.query()
        say("result sent=%d path=%s with_code=%d by_ref=%d" % (
            sent, info.path, info.sent_with_code, info.sent_by_ref))
        peer.close()
    return 0


def run_exit_open(address):
    # Module globals: they stay until the interpreter exits.
    global CONTEXT, WORKER, PEER, CODE, LISTENER
    CONTEXT = ucx_ifunc.Context()
    WORKER = ucx_ifunc.Worker(CONTEXT, target_args=bytearray(16))
    LISTENER = WORKER.listen("127.0.0.1:0")
    PEER = WORKER.connect(address)
    CODE = CONTEXT.register("pattern")
    PEER.send(CODE, pattern_payload(0, 64), on_report=lambda status: None,
              on_sent=lambda status: None)
    say("open")
    return 0


def main(argv):
    mode = argv[1]
    if mode == "target":
        return run_target(argv[2], int(argv[3]))
    if mode == "source":
        options = argv[3:]
        images = "--images" in options
        report = "--report" in options
        stream = 0
        if "--stream" in options:
            stream = int(options[options.index("--stream") + 1])
        specs = [o for o in options if o.count(":") == 2]
        return run_source(argv[2], specs, images, report, stream)
    if mode == "exit-open":
        return run_exit_open(argv[2])
    raise SystemExit("node.py: unknown mode " + mode)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
