#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_RECORD_INSERT: examples/record_insert compresses records
# with zstd on the source and inserts them into SQLite on the target, so it
# needs both libraries (Debian: libzstd-dev, libsqlite3-dev). The rest of
# the tree builds without them; configure's summary says the example is off.
AC_DEFUN([UCX_IFUNC_CHECK_RECORD_INSERT], [
    ucx_ifunc_record_missing=
    PKG_CHECK_MODULES([ZSTD], [libzstd], [],
        [ucx_ifunc_record_missing="$ucx_ifunc_record_missing libzstd-dev"])
    PKG_CHECK_MODULES([SQLITE3], [sqlite3], [],
        [ucx_ifunc_record_missing="$ucx_ifunc_record_missing libsqlite3-dev"])
    AS_IF([test -z "$ucx_ifunc_record_missing"],
          [UCX_IFUNC_RECORD_NOTE=yes],
          [UCX_IFUNC_RECORD_NOTE="no, needs:$ucx_ifunc_record_missing"
           AC_MSG_NOTICE([examples/record_insert is not built: install$ucx_ifunc_record_missing])])
    AM_CONDITIONAL([HAVE_RECORD_INSERT], [test -z "$ucx_ifunc_record_missing"])
])
