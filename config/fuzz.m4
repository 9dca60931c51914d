#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#

# UCX_IFUNC_CHECK_FUZZER: "make fuzz" needs a clang++ that links libFuzzer
# with AddressSanitizer and UndefinedBehaviorSanitizer (Debian: clang-14
# and libclang-rt-14-dev). Without one the library and "make check" build
# as before, and "make fuzz" says SKIP.
AC_DEFUN([UCX_IFUNC_CHECK_FUZZER], [
    AC_ARG_VAR([FUZZ_CXX], [clang++ with libFuzzer, for make fuzz (default: clang++, then clang++-14)])
    AC_LANG_PUSH([C++])
    ucx_ifunc_save_CXX=$CXX
    ucx_ifunc_save_CXXFLAGS=$CXXFLAGS
    ucx_ifunc_save_LDFLAGS=$LDFLAGS
    ucx_ifunc_save_LIBS=$LIBS
    ucx_ifunc_fuzz_cxx=
    AC_MSG_CHECKING([for a C++ compiler with -fsanitize=fuzzer,address,undefined])
    dnl The fuzzer runs on the build machine, against the build machine's
    dnl UCX: nothing to test in a cross build.
    AS_IF([test "x$cross_compiling" = xyes], [ucx_ifunc_fuzz_candidates=],
          [ucx_ifunc_fuzz_candidates="$FUZZ_CXX clang++ clang++-14"])
    for ucx_ifunc_candidate in $ucx_ifunc_fuzz_candidates; do
        AS_IF([command -v "$ucx_ifunc_candidate" >/dev/null 2>&1], [], [continue])
        CXX=$ucx_ifunc_candidate
        CXXFLAGS="-std=c++17 -fsanitize=fuzzer,address,undefined"
        LDFLAGS=
        LIBS=
        AC_LINK_IFELSE([AC_LANG_SOURCE([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return (size > 0) && (data[0] == 1);
}]])],
                       [ucx_ifunc_fuzz_cxx=$ucx_ifunc_candidate; break])
    done
    CXX=$ucx_ifunc_save_CXX
    CXXFLAGS=$ucx_ifunc_save_CXXFLAGS
    LDFLAGS=$ucx_ifunc_save_LDFLAGS
    LIBS=$ucx_ifunc_save_LIBS
    AC_LANG_POP([C++])
    AS_IF([test -n "$ucx_ifunc_fuzz_cxx"],
          [AC_MSG_RESULT([$ucx_ifunc_fuzz_cxx])
           UCX_IFUNC_FUZZ_NOTE=$ucx_ifunc_fuzz_cxx],
          [test "x$cross_compiling" = xyes],
          [AC_MSG_RESULT([no, cross build])
           UCX_IFUNC_FUZZ_NOTE="no, cross build"],
          [AC_MSG_RESULT([no])
           UCX_IFUNC_FUZZ_NOTE="no, make fuzz needs clang-14 and libclang-rt-14-dev"])
    UCX_IFUNC_FUZZ_CXX=$ucx_ifunc_fuzz_cxx
    AC_SUBST([UCX_IFUNC_FUZZ_CXX])
    AM_CONDITIONAL([HAVE_FUZZER], [test -n "$ucx_ifunc_fuzz_cxx"])
])
