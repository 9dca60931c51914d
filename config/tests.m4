#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_TEST_DEPS: what "make check" needs beyond the build:
# GoogleTest (Debian: libgtest-dev), zlib (zlib1g-dev; a test ifunc calls
# it) and PyNaCl (python3-nacl; the tests sign code). The library builds
# without them; "make check" then says what is missing.
AC_DEFUN([UCX_IFUNC_CHECK_TEST_DEPS], [
    UCX_IFUNC_TEST_MISSING=
    PKG_CHECK_MODULES([GTEST], [gtest], [],
        [UCX_IFUNC_TEST_MISSING="$UCX_IFUNC_TEST_MISSING libgtest-dev"])
    AC_CHECK_HEADER([zlib.h], [],
        [UCX_IFUNC_TEST_MISSING="$UCX_IFUNC_TEST_MISSING zlib1g-dev"])
    AC_MSG_CHECKING([whether $PYTHON has nacl (for ucx-ifunc-cc --sign)])
    AS_IF(["$PYTHON" -c 'import nacl.signing' >/dev/null 2>&1],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no])
           UCX_IFUNC_TEST_MISSING="$UCX_IFUNC_TEST_MISSING python3-nacl"])
    AS_IF([test -z "$UCX_IFUNC_TEST_MISSING"],
          [UCX_IFUNC_TEST_NOTE=yes],
          [UCX_IFUNC_TEST_NOTE="no, make check needs:$UCX_IFUNC_TEST_MISSING"])
    AC_SUBST([UCX_IFUNC_TEST_MISSING])
    AM_CONDITIONAL([HAVE_TEST_DEPS], [test -z "$UCX_IFUNC_TEST_MISSING"])
])
