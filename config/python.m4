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

    AC_MSG_CHECKING([for a Python 3 with pyelftools])
    ucx_ifunc_python=
    for ucx_ifunc_candidate in $ucx_ifunc_python_candidates; do
        AS_IF(["$ucx_ifunc_candidate" -c 'import sys, elftools; sys.exit(sys.version_info < (3, 7))' >/dev/null 2>&1],
              [ucx_ifunc_python=$ucx_ifunc_candidate; break])
    done
    AS_IF([test -z "$ucx_ifunc_python"],
          [AC_MSG_RESULT([no])
           AC_MSG_ERROR([no Python 3 with pyelftools found; install python3-pyelftools or set PYTHON=])])
    AC_MSG_RESULT([$ucx_ifunc_python])
    PYTHON=$ucx_ifunc_python

    AC_MSG_CHECKING([whether $PYTHON has capstone])
    AS_IF(["$PYTHON" -c 'import capstone' >/dev/null 2>&1],
          [AC_MSG_RESULT([yes]); UCX_IFUNC_CAPSTONE_NOTE=", capstone"],
          [AC_MSG_RESULT([no])
           AC_MSG_WARN([python3-capstone not found: ucx-ifunc-cc skips its disassembly check])
           UCX_IFUNC_CAPSTONE_NOTE=", no capstone"])
    AC_SUBST([PYTHON])
])
