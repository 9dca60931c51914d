#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_UCX: find the installed UCX, either with --with-ucx=DIR or
# through pkg-config's "ucx" module. Sets UCX_CFLAGS, UCX_LIBS and what the
# generated ucx-ifunc.pc needs (UCX_PC_REQUIRES, UCX_PC_CFLAGS, UCX_PC_LIBS).
AC_DEFUN([UCX_IFUNC_CHECK_UCX], [
    AC_ARG_WITH([ucx],
        [AS_HELP_STRING([--with-ucx=DIR], [UCX installation prefix (default: pkg-config ucx)])],
        [], [with_ucx=pkgconfig])

    AS_IF([test "x$with_ucx" = xno], [AC_MSG_ERROR([UCX is required])])
    AS_IF([test "x$with_ucx" = xpkgconfig || test "x$with_ucx" = xyes],
          [PKG_CHECK_MODULES([UCX], [ucx >= 1.11],
               [UCX_PC_REQUIRES=ucx; UCX_PC_CFLAGS=; UCX_PC_LIBS=],
               [AC_MSG_ERROR([UCX not found by pkg-config; install libucx-dev or use --with-ucx=DIR])])],
          [UCX_CFLAGS="-I$with_ucx/include"
           ucx_ifunc_ucx_libdir="$with_ucx/lib"
           AS_IF([test -d "$with_ucx/lib64" && test ! -d "$with_ucx/lib"], [ucx_ifunc_ucx_libdir="$with_ucx/lib64"])
           UCX_LIBS="-L$ucx_ifunc_ucx_libdir -Wl,-rpath,$ucx_ifunc_ucx_libdir -lucp -luct -lucs -lucm"
           UCX_PC_REQUIRES=; UCX_PC_CFLAGS=$UCX_CFLAGS; UCX_PC_LIBS=$UCX_LIBS])

    ucx_ifunc_save_CPPFLAGS=$CPPFLAGS
    ucx_ifunc_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"
    LIBS="$UCX_LIBS $LIBS"
    AC_CHECK_HEADERS([ucp/api/ucp.h ucs/config/parser.h ucs/debug/log_def.h], [],
                     [AC_MSG_ERROR([UCX development header $ac_header not found (libucx-dev)])])
    AC_MSG_CHECKING([whether UCX links])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <ucp/api/ucp.h>]],
                                    [[return ucp_rkey_ptr(0, 0, 0) == UCS_OK;]])],
                   [AC_MSG_RESULT([yes])],
                   [AC_MSG_RESULT([no]); AC_MSG_ERROR([cannot link with UCX ($UCX_LIBS)])])
    CPPFLAGS=$ucx_ifunc_save_CPPFLAGS
    LIBS=$ucx_ifunc_save_LIBS

    AC_SUBST([UCX_PC_REQUIRES])
    AC_SUBST([UCX_PC_CFLAGS])
    AC_SUBST([UCX_PC_LIBS])
])
