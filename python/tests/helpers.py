#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""What the package's tests share: the programs of the build they run
(from the variables python/run-tests.sh sets) and a process driver."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.path.join(HERE, "node.py")
TRANSPORTS = {"sm": "sm,self,tcp", "tcp": "tcp"}


def build_path(variable):
    """The program or directory the variable names; the test fails (not
    skips) when it is not set: python/run-tests.sh sets them all."""
    value = os.environ.get(variable)
    if not value:
        raise RuntimeError("%s is not set: run the tests with "
                           "python/run-tests.sh (make check)" % variable)
    return value


def env_for(transport, **extra):
    env = dict(os.environ)
    env["UCX_TLS"] = TRANSPORTS[transport]
    env.update(extra)
    return env


class Process:
    """A process whose stdout and stderr are read line by line."""

    def __init__(self, argv, env, name):
        self.name = name
        self.lines = []
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)

    def expect(self, word, timeout=60):
        """The key=value fields of the next line starting with ``word``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.split(" ", 1)[0].strip() == word:
                return dict(w.split("=", 1) for w in line.split()[1:]
                            if "=" in w)
        raise AssertionError("%s: no '%s' line; its output:\n%s"
                             % (self.name, word, "".join(self.lines) +
                                self.rest()))

    def rest(self):
        """The rest of its output, once it exits (at most 30 s)."""
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.lines.append(out or "")
        return out or ""

    def wait(self, timeout=30):
        """Its exit status, once it exited (its stdin closed first)."""
        self.rest()
        return self.proc.wait(timeout)

    def output(self):
        return "".join(self.lines)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.rest()


def python_node(args, env, name):
    return Process([sys.executable, NODE] + args, env, name)
