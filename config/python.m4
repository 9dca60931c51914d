#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_PYTHON: ucx-ifunc-cc needs a Python 3 that can import
# elftools (Debian: python3-pyelftools). The first python3 on PATH may be a
# private build without Debian's modules, so try every candidate: $PYTHON,
# each python3 on PATH, then /usr/bin/python3. capstone (python3-capstone)
# is used by the toolchain's self-check when present.
AC_DEFUN([UCX_IFUNC_CHECK_PYTHON], [
    AC_ARG_VAR([PYTHON], [Python 3 interpreter with pyelftools for ucx-ifunc-cc])
    ucx_ifunc_python_candidates="$PYTHON"
    ucx_ifunc_save_IFS=$IFS; IFS=:
    for ucx_ifunc_dir in $PATH; do
        IFS=$ucx_ifunc_save_IFS
        test -x "$ucx_ifunc_dir/python3" && ucx_ifunc_python_candidates="$ucx_ifunc_python_candidates $ucx_ifunc_dir/python3"
    done
    IFS=$ucx_ifunc_save_IFS
    ucx_ifunc_python_candidates="$ucx_ifunc_python_candidates /usr/bin/python3"

    dnl The Python package (python/ucx_ifunc) and its tests need cffi (and
    dnl NumPy): prefer a candidate that has them too.
    AC_MSG_CHECKING([for a Python 3 with pyelftools])
    ucx_ifunc_python=
    for ucx_ifunc_modules in 'elftools, cffi, numpy' 'elftools'; do
        for ucx_ifunc_candidate in $ucx_ifunc_python_candidates; do
            AS_IF(["$ucx_ifunc_candidate" -c "import sys, $ucx_ifunc_modules; sys.exit(sys.version_info < (3, 7))" >/dev/null 2>&1],
                  [ucx_ifunc_python=$ucx_ifunc_candidate; break])
        done
        test -n "$ucx_ifunc_python" && break
    done
    AS_IF([test -z "$ucx_ifunc_python"],
          [AC_MSG_RESULT([no])
           AC_MSG_ERROR([no Python 3 with pyelftools found; install python3-pyelftools or set PYTHON=])])
    AC_MSG_RESULT([$ucx_ifunc_python])
    PYTHON=$ucx_ifunc_python
    AS_IF([test "x$ucx_ifunc_modules" != "xelftools, cffi, numpy"],
          [AC_MSG_WARN([$PYTHON lacks cffi or NumPy: the Python package's tests (python/tests) fail; install python3-cffi python3-numpy])])

    AC_MSG_CHECKING([whether $PYTHON has capstone])
    AS_IF(["$PYTHON" -c 'import capstone' >/dev/null 2>&1],
          [AC_MSG_RESULT([yes]); UCX_IFUNC_CAPSTONE_NOTE=", capstone"],
          [AC_MSG_RESULT([no])
           AC_MSG_WARN([python3-capstone not found: ucx-ifunc-cc skips its disassembly check])
           UCX_IFUNC_CAPSTONE_NOTE=", no capstone"])
    AC_SUBST([PYTHON])
])

# UCX_IFUNC_CHECK_IFUNC_TARGETS: the ISAs the test and benchmark ifunc
# libraries carry images for, passed to ucx-ifunc-cc as --target
# $(IFUNC_TARGETS): the host's first (the library itself runs on the host),
# then the other ISA when its cross compiler is on PATH, so that a source of
# either ISA can ship them to a target of the other (test/cross/run.sh).
AC_DEFUN([UCX_IFUNC_CHECK_IFUNC_TARGETS], [
    AC_REQUIRE([UCX_IFUNC_CHECK_ARCH])
    AC_REQUIRE([UCX_IFUNC_CHECK_PYTHON])
    AC_ARG_VAR([IFUNC_TARGETS], [ISAs of the test ifunc libraries, comma-separated, host first (default: host, plus the other ISA when its cross compiler is found)])
    AS_CASE([$ucx_ifunc_host_isa],
            [x86_64-linux-gnu], [ucx_ifunc_other_isa=aarch64-linux-gnu],
            [ucx_ifunc_other_isa=x86_64-linux-gnu])
    AS_IF([test -z "$IFUNC_TARGETS"], [
        AC_CHECK_PROG([ucx_ifunc_other_cc], [$ucx_ifunc_other_isa-gcc], [yes], [no])
        IFUNC_TARGETS=$ucx_ifunc_host_isa
        AS_IF([test "x$ucx_ifunc_other_cc" = xyes],
              [IFUNC_TARGETS="$IFUNC_TARGETS,$ucx_ifunc_other_isa"])
    ])
    dnl The toolchain in this tree may predate --target. A native build then
    dnl builds host-only libraries as before; a cross build passes --target
    dnl anyway, so that an old toolchain fails loudly instead of building
    dnl libraries for the build machine.
    AC_MSG_CHECKING([whether ucx-ifunc-cc knows --target])
    AS_IF([(cd "$srcdir/tools" &&
            "$PYTHON" -c 'import sys; from ucx_ifunc.cli import main; sys.exit(main(@<:@"--help"@:>@))') 2>/dev/null |
           grep -e '--target' >/dev/null],
          [AC_MSG_RESULT([yes])
           IFUNC_TARGET_FLAGS="--target $IFUNC_TARGETS"
           UCX_IFUNC_TARGETS_NOTE=$IFUNC_TARGETS],
          [test "x$cross_compiling" = xyes],
          [AC_MSG_RESULT([no])
           AC_MSG_WARN([ucx-ifunc-cc has no --target yet: the test ifunc libraries of this cross build will not build])
           IFUNC_TARGET_FLAGS="--target $IFUNC_TARGETS"
           UCX_IFUNC_TARGETS_NOTE="$IFUNC_TARGETS (ucx-ifunc-cc has no --target yet)"],
          [AC_MSG_RESULT([no])
           IFUNC_TARGET_FLAGS=
           UCX_IFUNC_TARGETS_NOTE="$ucx_ifunc_host_isa (ucx-ifunc-cc has no --target yet)"])
    IFUNC_HOST_ISA=$ucx_ifunc_host_isa
    AC_SUBST([IFUNC_HOST_ISA])
    AC_SUBST([IFUNC_TARGETS])
    AC_SUBST([IFUNC_TARGET_FLAGS])
    AM_CONDITIONAL([HAVE_MULTI_ISA_TARGETS],
                   [test -n "$IFUNC_TARGET_FLAGS" && test "x${IFUNC_TARGETS#*,}" != "x$IFUNC_TARGETS"])
])
