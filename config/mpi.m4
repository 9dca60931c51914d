#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_MPI: the MPI launch helper (libucx_ifunc_mpi) and the
# pointer-chase example need an MPI library (Debian: libopenmpi-dev). Its
# flags come from pkg-config (ompi-c), else from "mpicc --showme" (Open
# MPI) or "mpicc -show" (MPICH). Without MPI both are left out and the rest
# builds as before. MPI_CFLAGS/MPI_LIBS on the command line override.
AC_DEFUN([UCX_IFUNC_CHECK_MPI], [
    AC_ARG_WITH([mpi],
        [AS_HELP_STRING([--without-mpi],
            [do not build the MPI launch helper and the pointer-chase example])],
        [], [with_mpi=check])
    AC_ARG_VAR([MPI_CFLAGS], [C compiler flags for MPI])
    AC_ARG_VAR([MPI_LIBS], [linker flags for MPI])
    AC_PATH_PROG([MPIRUN], [mpirun])
    UCX_IFUNC_MPI_NOTE=
    ucx_ifunc_have_mpi=no
    AS_IF([test "x$with_mpi" != xno], [
        AS_IF([test -z "$MPI_CFLAGS$MPI_LIBS"], [
            PKG_CHECK_MODULES([MPI], [ompi-c], [], [
                AC_PATH_PROG([MPICC], [mpicc])
                AS_IF([test -n "$MPICC"], [
                    AS_IF([MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null` &&
                           MPI_LIBS=`$MPICC --showme:link 2>/dev/null`], [],
                          [MPI_CFLAGS=; MPI_LIBS=])
                ])
            ])
        ])
        AC_MSG_CHECKING([whether an MPI program links])
        ucx_ifunc_save_CFLAGS=$CFLAGS
        ucx_ifunc_save_LIBS=$LIBS
        CFLAGS="$CFLAGS $MPI_CFLAGS"
        LIBS="$MPI_LIBS $LIBS"
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                [[MPI_Request r; MPI_Init(0, 0); MPI_Ibarrier(MPI_COMM_WORLD, &r);]])],
            [AC_MSG_RESULT([yes]); UCX_IFUNC_MPI_NOTE=yes; ucx_ifunc_have_mpi=yes],
            [AC_MSG_RESULT([no])])
        CFLAGS=$ucx_ifunc_save_CFLAGS
        LIBS=$ucx_ifunc_save_LIBS
    ])
    AS_IF([test -z "$UCX_IFUNC_MPI_NOTE"], [
        AS_IF([test "x$with_mpi" = xyes],
              [AC_MSG_ERROR([--with-mpi: no MPI found (Debian: apt install libopenmpi-dev openmpi-bin)])])
        AS_IF([test "x$with_mpi" = xno],
              [UCX_IFUNC_MPI_NOTE="no (--without-mpi)"],
              [UCX_IFUNC_MPI_NOTE="no: libucx_ifunc_mpi and the pointer-chase example are not built (Debian: apt install libopenmpi-dev openmpi-bin)"
               AC_MSG_WARN([MPI not found: $UCX_IFUNC_MPI_NOTE])])
        MPI_CFLAGS=
        MPI_LIBS=
    ], [
        AS_IF([test -n "$MPIRUN"], [],
              [UCX_IFUNC_MPI_NOTE="yes (no mpirun: the pointer-chase check is skipped)"])
    ])
    AC_SUBST([MPI_CFLAGS])
    AC_SUBST([MPI_LIBS])
    AM_CONDITIONAL([HAVE_MPI], [test "x$ucx_ifunc_have_mpi" = xyes])
    AM_CONDITIONAL([HAVE_MPIRUN], [test -n "$MPIRUN"])
])
