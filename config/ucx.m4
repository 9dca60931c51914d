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
          [PKG_CHECK_MODULES([UCX], [ucx >= 1.13],
               [UCX_PC_REQUIRES=ucx; UCX_PC_CFLAGS=; UCX_PC_LIBS=],
               [AC_MSG_ERROR([UCX not found by pkg-config; install libucx-dev or use --with-ucx=DIR])])],
          [UCX_CFLAGS="-isystem $with_ucx/include"
           ucx_ifunc_ucx_libdir="$with_ucx/lib"
           AS_IF([test -d "$with_ucx/lib64" && test ! -d "$with_ucx/lib"], [ucx_ifunc_ucx_libdir="$with_ucx/lib64"])
           UCX_LIBS="-L$ucx_ifunc_ucx_libdir -Wl,-rpath,$ucx_ifunc_ucx_libdir -lucp -luct -lucs -lucm"
           UCX_PC_REQUIRES=; UCX_PC_CFLAGS=$UCX_CFLAGS; UCX_PC_LIBS=$UCX_LIBS])

    dnl UCX's headers are not ours to keep free of warnings (UCX 1.18's trip
    dnl -Wsign-compare in C): include them as system headers, so that
    dnl -Werror applies to our code only.
    UCX_CFLAGS=`echo " $UCX_CFLAGS" | sed -e 's/ -I */ -isystem /g' -e 's/^ //'`
    ucx_ifunc_save_CPPFLAGS=$CPPFLAGS
    ucx_ifunc_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"
    LIBS="$UCX_LIBS $LIBS"
    AC_CHECK_HEADERS([ucp/api/ucp.h ucs/config/parser.h ucs/debug/log_def.h], [],
                     [AC_MSG_ERROR([UCX development header $ac_header not found (libucx-dev)])])
    dnl The UCX API differences are chosen with UCX's version macros in
    dnl src/ucp/ifunc/base/ucx_compat.h; compile it here, so that a UCX whose API it
    dnl does not cover fails now, with this message.
    AC_LANG_PUSH([C++])
    ucx_ifunc_save_CXXFLAGS=$CXXFLAGS
    CXXFLAGS="$CXXFLAGS -std=c++17"
    AC_MSG_CHECKING([UCX API version])
    AC_COMPUTE_INT([ucx_ifunc_api_major], [UCP_API_MAJOR], [[#include <ucp/api/ucp_version.h>]],
                   [AC_MSG_ERROR([cannot read UCP_API_MAJOR from ucp/api/ucp_version.h])])
    AC_COMPUTE_INT([ucx_ifunc_api_minor], [UCP_API_MINOR], [[#include <ucp/api/ucp_version.h>]],
                   [AC_MSG_ERROR([cannot read UCP_API_MINOR from ucp/api/ucp_version.h])])
    UCX_VERSION_NOTE="$ucx_ifunc_api_major.$ucx_ifunc_api_minor"
    AC_MSG_RESULT([$UCX_VERSION_NOTE])
    AC_MSG_CHECKING([whether ucx-ifunc supports UCX $UCX_VERSION_NOTE])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include "$srcdir/src/ucp/ifunc/base/ucx_compat.h"]],
                                       [[ucs_config_global_list_entry_t entry = {};
                                         return ucx_ifunc::compat::config_fill(0, &entry, "UCX_") == UCS_OK;]])],
                      [AC_MSG_RESULT([yes])],
                      [AC_MSG_RESULT([no])
                       AC_MSG_ERROR([ucx-ifunc supports UCX 1.13 to 1.18 (src/ucp/ifunc/base/ucx_compat.h does not compile against UCX $UCX_VERSION_NOTE; see config.log)])])
    AS_IF([test "$ucx_ifunc_api_major" -gt 1 || test "$ucx_ifunc_api_minor" -gt 18],
          [AC_MSG_WARN([UCX $UCX_VERSION_NOTE is newer than the newest release ucx-ifunc is tested with (1.18); it compiles, run "make check"])])
    CXXFLAGS=$ucx_ifunc_save_CXXFLAGS
    AC_LANG_POP([C++])

    AC_MSG_CHECKING([whether UCX links])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <ucp/api/ucp.h>]],
                                    [[return ucp_rkey_ptr(0, 0, 0) == UCS_OK;]])],
                   [AC_MSG_RESULT([yes])],
                   [AC_MSG_RESULT([no]); AC_MSG_ERROR([cannot link with UCX ($UCX_LIBS)])])
    CPPFLAGS=$ucx_ifunc_save_CPPFLAGS
    LIBS=$ucx_ifunc_save_LIBS

    AC_SUBST([UCX_VERSION_NOTE])
    AC_SUBST([UCX_PC_REQUIRES])
    AC_SUBST([UCX_PC_CFLAGS])
    AC_SUBST([UCX_PC_LIBS])
])
