#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Real processes over shared memory and TCP: a Python target and a Python
source (code by name and from image bytes, every payload kind, delivery
reports), a C target with a Python source, a Python target with a C
source, and a process that exits with its peers open."""

import unittest

from .helpers import Process, build_path, env_for, python_node

# Payloads larger than a channel slot (UCX_IFUNC_PEER_SLOT_SIZE, 128 KiB
# here) go by active message on shared memory too.
SLOT = {"UCX_IFUNC_PEER_SLOT_SIZE": "128KB"}
KINDS = ["bytes:40:8", "bytearray:40:1000", "memoryview:40:8",
         "numpy:40:3000", "numpy:3:200000", "bytes:2:150000"]
TOTAL = 40 * 4 + 3 + 2


class Transports:
    """The tests, run over each transport (the subclasses below)."""

    transport = None

    def env(self):
        return env_for(self.transport, **SLOT)

    def start_python_target(self, count):
        target = python_node(["target", "127.0.0.1:0", str(count)],
                             self.env(), "python target")
        self.addCleanup(target.kill)
        return target, target.expect("port")["port"]

    def expect_clean(self, result, count):
        self.assertEqual(count, int(result["executed"]))
        self.assertEqual("0", result["corrupt"])
        self.assertEqual("0", result["duplicate"])
        self.assertEqual("0", result["unknown"])

    def python_to_python(self, images):
        target, port = self.start_python_target(TOTAL)
        args = ["source", "127.0.0.1:" + port, "--report"] + KINDS
        if images:
            args.append("--images")
        source = python_node(args, self.env(), "python source")
        self.addCleanup(source.kill)
        reports = source.expect("reports")
        self.assertEqual(str(TOTAL), reports["ok"], source.output())
        self.assertEqual("0", reports["other"])
        sent = source.expect("result")
        self.assertEqual(str(TOTAL), sent["sent"])
        self.assertEqual("channel" if self.transport == "sm" else "am",
                         sent["path"])
        # The code goes with the first messages only.
        self.assertGreaterEqual(int(sent["by_ref"]), 1)
        self.assertEqual(TOTAL, int(sent["by_ref"]) + int(sent["with_code"]))
        self.assertEqual(0, source.wait(), source.output())
        result = target.expect("result")
        self.expect_clean(result, TOTAL)
        self.assertEqual(str(TOTAL), result["run_peer"])
        self.assertEqual(str(TOTAL), result["streams"].split(",")[0])
        self.assertEqual(0, target.wait(), target.output())

    def test_python_target_python_source_library(self):
        self.python_to_python(images=False)

    def test_python_target_python_source_images(self):
        self.python_to_python(images=True)

    def test_c_target_python_source(self):
        node = build_path("IFUNC_TEST_PEER_NODE")
        target = Process([node, "target", "--listen", "127.0.0.1:0",
                          "--expect", "0:%d" % TOTAL], self.env(), "C target")
        self.addCleanup(target.kill)
        port = target.expect("port")["port"]
        source = python_node(["source", "127.0.0.1:" + port, "--images"] +
                             KINDS, self.env(), "python source")
        self.addCleanup(source.kill)
        self.assertEqual(str(TOTAL), source.expect("result")["sent"])
        self.assertEqual(0, source.wait(), source.output())
        result = target.expect("result")
        self.expect_clean(result, TOTAL)
        self.assertEqual("0", result["missing"])
        self.assertEqual("1", result["new"])
        self.assertEqual(0, target.wait(), target.output())

    def test_python_target_c_source(self):
        node = build_path("IFUNC_TEST_PEER_NODE")
        target, port = self.start_python_target(300 + 5)
        source = Process([node, "source", "--connect", "127.0.0.1:" + port,
                          "--stream", "2", "--send", "300:8", "--send",
                          "5:200000"], self.env(), "C source")
        self.addCleanup(source.kill)
        self.assertEqual("305", source.expect("result")["sent"])
        self.assertEqual(0, source.wait(), source.output())
        result = target.expect("result")
        self.expect_clean(result, 305)
        self.assertEqual("305", result["streams"].split(",")[2])
        # A new peer (0), then its clean close (UCS_ERR_NOT_CONNECTED).
        self.assertEqual("0", result["peers"].split(",")[0])
        self.assertEqual(0, target.wait(), target.output())

    def test_exit_with_everything_open(self):
        """A source that exits with its context, worker, listener, peer,
        code and a report under way open: it exits 0, without a crash or
        an error line, and its target hears a clean close."""
        node = build_path("IFUNC_TEST_PEER_NODE")
        target = Process([node, "target", "--listen", "127.0.0.1:0"],
                         self.env(), "C target")
        self.addCleanup(target.kill)
        port = target.expect("port")["port"]
        source = python_node(["exit-open", "127.0.0.1:" + port], self.env(),
                             "python source")
        self.addCleanup(source.kill)
        source.expect("open")
        self.assertEqual(0, source.wait(), source.output())
        for bad in ("UCX  ERROR", "Fatal Python error", "Segmentation",
                    "Traceback", "Exception ignored"):
            self.assertNotIn(bad, source.output())
        failed = target.expect("failed")
        self.assertEqual("1", failed.get("closed"), target.output())


class OverSharedMemory(Transports, unittest.TestCase):
    transport = "sm"


class OverTcp(Transports, unittest.TestCase):
    transport = "tcp"
