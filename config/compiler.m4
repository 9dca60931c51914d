#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_CXX17: the runtime is C++17.
AC_DEFUN([UCX_IFUNC_CHECK_CXX17], [
    AC_LANG_PUSH([C++])
    ucx_ifunc_save_CXXFLAGS=$CXXFLAGS
    CXXFLAGS="$CXXFLAGS -std=c++17"
    AC_MSG_CHECKING([whether $CXX accepts -std=c++17])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <optional>
#include <shared_mutex>]],
                                       [[std::optional<int> v; std::shared_mutex m; return v.value_or(0);]])],
                      [AC_MSG_RESULT([yes])],
                      [AC_MSG_RESULT([no])
                       AC_MSG_ERROR([a C++17 compiler is required (g++ 8 or newer)])])
    CXXFLAGS=$ucx_ifunc_save_CXXFLAGS
    AC_LANG_POP([C++])
])

# UCX_IFUNC_CHECK_ARCH: the toolchain rewrites x86-64 assembly only.
AC_DEFUN([UCX_IFUNC_CHECK_ARCH], [
    AC_CANONICAL_HOST
    AS_CASE([$host_cpu],
            [x86_64], [],
            [AC_MSG_ERROR([ucx-ifunc supports x86_64 hosts only (host cpu: $host_cpu)])])
])
