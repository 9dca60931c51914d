#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_GTEST: GoogleTest for "make check" (Debian: libgtest-dev).
# The library itself builds without it; "make check" then says what to install.
AC_DEFUN([UCX_IFUNC_CHECK_GTEST], [
    PKG_CHECK_MODULES([GTEST], [gtest],
        [have_gtest=yes; UCX_IFUNC_GTEST_NOTE=yes],
        [have_gtest=no;  UCX_IFUNC_GTEST_NOTE="no (make check needs libgtest-dev)"])
    AM_CONDITIONAL([HAVE_GTEST], [test "x$have_gtest" = xyes])
])
