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

# UCX_IFUNC_CHECK_ARCH: the runtime and the toolchain know x86-64 and
# AArch64; the runtime also runs on ppc64el, from bitcode only (it needs
# LLVM there). UCX_IFUNC_MULTIARCH is the host's Debian multiarch triplet (the
# compiler's -print-multiarch; for a cross build, where its libraries are).
AC_DEFUN([UCX_IFUNC_CHECK_ARCH], [
    AC_REQUIRE([AC_CANONICAL_HOST])
    AS_CASE([$host_cpu],
            [x86_64], [ucx_ifunc_host_isa=x86_64-linux-gnu],
            [aarch64], [ucx_ifunc_host_isa=aarch64-linux-gnu],
            [powerpc64le], [ucx_ifunc_host_isa=powerpc64le-linux-gnu],
            [AC_MSG_ERROR([ucx-ifunc supports x86_64, aarch64 and powerpc64le hosts only (host cpu: $host_cpu)])])
    # The sandbox runs x86-64 code only: its test libraries are built there.
    AM_CONDITIONAL([HOST_X86_64], [test "$host_cpu" = x86_64])
    UCX_IFUNC_MULTIARCH=`$CC -print-multiarch 2>/dev/null`
    AS_IF([test -z "$UCX_IFUNC_MULTIARCH"], [UCX_IFUNC_MULTIARCH=$ucx_ifunc_host_isa])
])

# UCX_IFUNC_CHECK_CROSS_PKG_CONFIG: a cross build must find the host's .pc
# files, not the build machine's. With a host-prefixed pkg-config
# (aarch64-linux-gnu-pkg-config) or PKG_CONFIG_LIBDIR set by the user there
# is nothing to do. Otherwise, on Debian, where the plain pkg-config would
# read the build machine's UCX, point it at the host's multiarch directory.
AC_DEFUN([UCX_IFUNC_CHECK_CROSS_PKG_CONFIG], [
    AC_REQUIRE([UCX_IFUNC_CHECK_ARCH])
    AC_REQUIRE([PKG_PROG_PKG_CONFIG])
    AS_IF([test "x$cross_compiling" = xyes], [
        AC_MSG_CHECKING([where pkg-config finds the host's libraries])
        ucx_ifunc_pc_dir=/usr/lib/$UCX_IFUNC_MULTIARCH/pkgconfig
        AS_CASE([`basename "$PKG_CONFIG"`],
            [$host_alias-pkg-config*|$host-pkg-config*],
                [AC_MSG_RESULT([$PKG_CONFIG])],
            [AS_IF([test -n "$PKG_CONFIG_LIBDIR"],
                   [AC_MSG_RESULT([PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR])],
                   [test -d "$ucx_ifunc_pc_dir"],
                   [PKG_CONFIG_LIBDIR=$ucx_ifunc_pc_dir:/usr/share/pkgconfig
                    export PKG_CONFIG_LIBDIR
                    AC_MSG_RESULT([PKG_CONFIG_LIBDIR=$PKG_CONFIG_LIBDIR])],
                   [AC_MSG_RESULT([unknown])
                    AC_MSG_ERROR([cross build: no $host_alias-pkg-config, no PKG_CONFIG_LIBDIR and no $ucx_ifunc_pc_dir; set PKG_CONFIG_LIBDIR to the host's pkgconfig directory])])])
    ])
])
