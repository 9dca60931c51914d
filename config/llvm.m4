#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_LLVM: the on-target JIT of bitcode images
# (src/ucp/ifunc/load/jit.cc) links LLVM 14 or newer (Debian: llvm-14-dev).
# --with-llvm[=LLVM_CONFIG] asks for it, --without-llvm leaves it out, and
# by default it is used when an llvm-config of LLVM 14 or newer is found.
# Without LLVM the library builds and refuses bitcode images.
# Sets HAVE_LLVM, LLVM_CPPFLAGS, LLVM_LIBS, and BITCODE_CLANG (a clang of
# LLVM's major, which the tests make bitcode with).
AC_DEFUN([UCX_IFUNC_CHECK_LLVM], [
    AC_ARG_WITH([llvm],
        [AS_HELP_STRING([--with-llvm@<:@=LLVM_CONFIG@:>@],
            [JIT bitcode images with LLVM 14 or newer (default: if found)])],
        [], [with_llvm=check])
    ucx_ifunc_llvm_config=
    AS_CASE(["$with_llvm"],
        [no], [],
        [yes|check],
            [for ucx_ifunc_c in llvm-config llvm-config-19 llvm-config-18 \
                 llvm-config-17 llvm-config-16 llvm-config-15 llvm-config-14 \
                 /usr/bin/llvm-config-1[[4-9]]; do
                 ucx_ifunc_p=$(command -v "$ucx_ifunc_c" 2>/dev/null) || continue
                 ucx_ifunc_v=$("$ucx_ifunc_p" --version 2>/dev/null | cut -d. -f1)
                 AS_IF([test -n "$ucx_ifunc_v" && test "$ucx_ifunc_v" -ge 14 2>/dev/null],
                       [ucx_ifunc_llvm_config=$ucx_ifunc_p; break])
             done],
        [ucx_ifunc_llvm_config=$with_llvm])
    HAVE_LLVM=no
    LLVM_CPPFLAGS=
    LLVM_LIBS=
    BITCODE_CLANG=
    AS_IF([test -n "$ucx_ifunc_llvm_config"], [
        AC_MSG_CHECKING([LLVM for the bitcode JIT ($ucx_ifunc_llvm_config)])
        LLVM_VERSION=$("$ucx_ifunc_llvm_config" --version 2>/dev/null)
        ucx_ifunc_llvm_major=${LLVM_VERSION%%.*}
        ucx_ifunc_llvm_inc=$("$ucx_ifunc_llvm_config" --includedir 2>/dev/null)
        ucx_ifunc_llvm_lib=$("$ucx_ifunc_llvm_config" --libdir 2>/dev/null)
        ucx_ifunc_llvm_link=$("$ucx_ifunc_llvm_config" --link-shared --libs 2>/dev/null)
        ucx_ifunc_llvm_bin=$("$ucx_ifunc_llvm_config" --bindir 2>/dev/null)
        # A cross build: the build machine's llvm-config and headers (the
        # same source), the host's libLLVM from its multiarch directory
        # (Debian: libllvm14:ppc64el).
        AS_IF([test "x$cross_compiling" = xyes], [
            ucx_ifunc_llvm_host_lib=/usr/lib/$UCX_IFUNC_MULTIARCH
            AS_IF([test -e "$ucx_ifunc_llvm_host_lib/libLLVM-$ucx_ifunc_llvm_major.so"],
                  [ucx_ifunc_llvm_lib=$ucx_ifunc_llvm_host_lib
                   ucx_ifunc_llvm_link=-lLLVM-$ucx_ifunc_llvm_major],
                  [ucx_ifunc_llvm_link=])
        ])
        AS_IF([test -n "$ucx_ifunc_llvm_major" && test "$ucx_ifunc_llvm_major" -ge 14 2>/dev/null &&
               test -f "$ucx_ifunc_llvm_inc/llvm/ExecutionEngine/Orc/Core.h" &&
               test -n "$ucx_ifunc_llvm_link"],
              [HAVE_LLVM=yes
               LLVM_CPPFLAGS="-isystem $ucx_ifunc_llvm_inc"
               LLVM_LIBS="-L$ucx_ifunc_llvm_lib $ucx_ifunc_llvm_link"
               # A run path only where the loader would not find LLVM by
               # itself: Debian's libLLVM is in the loader's cache, and a
               # run path into /usr/lib/llvm-N hides it from dpkg-shlibdeps.
               ucx_ifunc_llvm_so=$(ls "$ucx_ifunc_llvm_lib"/libLLVM*.so 2>/dev/null | head -n 1)
               ucx_ifunc_llvm_soname=$(objdump -p "$ucx_ifunc_llvm_so" 2>/dev/null |
                                       sed -n 's/^ *SONAME *//p')
               AS_IF([test -z "$ucx_ifunc_llvm_soname" ||
                      ! /sbin/ldconfig -p 2>/dev/null | grep -qF "$ucx_ifunc_llvm_soname ("],
                     [LLVM_LIBS="-Wl,-rpath,$ucx_ifunc_llvm_lib $LLVM_LIBS"])
               AC_MSG_RESULT([$LLVM_VERSION])],
              [AC_MSG_RESULT([no (no ORC headers or shared library)])])
        # The library must link for the host: a cross build finds the build
        # machine's llvm-config, whose libLLVM is of another ISA.
        AS_IF([test "$HAVE_LLVM" = yes], [
            AC_MSG_CHECKING([whether LLVM links for $host])
            AC_LANG_PUSH([C])
            ucx_ifunc_save_LIBS=$LIBS
            ucx_ifunc_save_CPPFLAGS=$CPPFLAGS
            LIBS="$LLVM_LIBS $LIBS"
            CPPFLAGS="$LLVM_CPPFLAGS $CPPFLAGS"
            AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <llvm-c/Core.h>]],
                                            [[LLVMContextDispose(LLVMContextCreate());]])],
                           [AC_MSG_RESULT([yes])],
                           [AC_MSG_RESULT([no])
                            HAVE_LLVM=no
                            LLVM_CPPFLAGS=
                            LLVM_LIBS=])
            LIBS=$ucx_ifunc_save_LIBS
            CPPFLAGS=$ucx_ifunc_save_CPPFLAGS
            AC_LANG_POP([C])
        ])
        AS_IF([test "$HAVE_LLVM" = yes],
              [AC_PATH_PROGS([BITCODE_CLANG], [clang-$ucx_ifunc_llvm_major clang],
                             [], [$ucx_ifunc_llvm_bin:$PATH])])
    ])
    AS_IF([test "$with_llvm" != no && test "$with_llvm" != check &&
           test "$HAVE_LLVM" != yes],
          [AC_MSG_ERROR([--with-llvm: no usable LLVM 14 or newer (Debian: llvm-14-dev)])])
    AS_IF([test "$HAVE_LLVM" = yes],
          [AC_DEFINE([HAVE_LLVM], [1], [The bitcode JIT is built (LLVM)])
           UCX_IFUNC_LLVM_NOTE="$LLVM_VERSION ($ucx_ifunc_llvm_config)"],
          [UCX_IFUNC_LLVM_NOTE="no (bitcode images are refused; install llvm-14-dev)"])
    AC_SUBST([LLVM_CPPFLAGS])
    AC_SUBST([LLVM_LIBS])
    AC_SUBST([BITCODE_CLANG])
    AM_CONDITIONAL([HAVE_LLVM], [test "$HAVE_LLVM" = yes])
])
