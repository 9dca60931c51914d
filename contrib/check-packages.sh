#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Checks the Debian packages (debian/) as a user gets them: builds them with
# dpkg-buildpackage -b in a copy of the tree (without "make check", which
# contrib/test.sh runs anyway), runs lintian on them (any error fails),
# installs them with apt-get, then, against the installed copy only:
#   - every program in the packages answers --version with the packaged
#     version, and has a manual page;
#   - the hello example is built with "pkg-config ucx-ifunc" and the
#     installed ucx-ifunc-cc, its code signed with a key from the installed
#     ucx-ifunc-keygen, and run between two processes over shared memory
#     (UCX_TLS=sm,tcp: UCX 1.13 connects by address over TCP) and over TCP,
#     the target trusting the key and holding no copy of hello.so;
#   - python3-ucx-ifunc imports with Debian's python3, reports the
#     packaged version, and a Python source sends hello to the C target;
#   - ucx_ifunc_perftest and ucx_ifunc_chase run briefly with the ifunc
#     libraries installed with them;
#   - a program of the MPI helper builds against its installed header;
# and purges the packages, and whatever apt-get installed for them, so that
# the machine is left as it was. Root or sudo; exits 77 (SKIP) where dpkg,
# apt-get or the packaging tools are missing (contrib/install-deps.sh
# installs them).
#
#     contrib/check-packages.sh [--keep DIR]    (--keep: copy the .deb files
#                                               and lintian's output to DIR)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=check-packages
keep=
case ${1:-} in
--keep) keep=${2:?--keep needs a directory}; mkdir -p "$keep"; keep=$(cd "$keep" && pwd) ;;
"") ;;
*) echo "usage: $0 [--keep DIR]" >&2; exit 2 ;;
esac

for tool in dpkg dpkg-buildpackage dh apt-get lintian pkg-config cc; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIP: $me: $tool not found (contrib/install-deps.sh installs debhelper, dh-python, lintian)"
        exit 77
    fi
done
sudo=
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "SKIP: $me: installing packages needs root or sudo"
        exit 77
    fi
    sudo=sudo
fi
apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }

# The packages debian/control defines.
packages=($(sed -n 's/^Package: *//p' "$top/debian/control"))
installed_now() {
    dpkg-query -W -f='${db:Status-Abbrev} ${Package}:${Architecture}\n' 2>/dev/null |
        awk '$1 ~ /^.i/ { print $2 }' | sort
}
ours=()
for pkg in "${packages[@]}"; do
    if dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null | grep -q '^.i'; then
        ours+=("$pkg")
    fi
done
if [ ${#ours[@]} -gt 0 ]; then
    echo "$me: already installed here: ${ours[*]}; remove them first" \
         "(apt-get purge ${ours[*]}): this check installs and purges them" >&2
    exit 1
fi

# The version: debian/changelog's upstream part must be configure.ac's.
version=$(sed -n 's/^m4_define(\[ucx_ifunc_\(major\|minor\|release\)\], \[\([0-9]*\)\])/\2/p' \
              "$top/configure.ac" | paste -sd.)
deb_version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
if [ "${deb_version%-*}" != "$version" ]; then
    echo "$me: debian/changelog says $deb_version, configure.ac $version:" \
         "add an entry (dch -v $version-1)" >&2
    exit 1
fi

work=$(mktemp -d /tmp/ucx-ifunc-packages.XXXXXX)
before=$work/installed-before
installed_now >"$before"
cleanup() {
    local status=$?
    local added
    # Ours, and what apt-get pulled in for them: nothing else.
    added=$(comm -13 "$before" <(installed_now) | tr '\n' ' ')
    if [ -n "$added" ]; then
        echo "$me: purging $added"
        apt_get purge -y -q $added >"$work/purge.log" 2>&1 ||
            { cat "$work/purge.log" >&2; status=1; }
    fi
    if [ -n "$(comm -13 "$before" <(installed_now))" ]; then
        echo "$me: still installed: $(comm -13 "$before" <(installed_now) | tr '\n' ' ')" >&2
        status=1
    fi
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A copy of the tree: what git knows (tracked, and new files not ignored),
# else everything but build output.
src=$work/ucx-ifunc-$version
mkdir -p "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        xargs -0 cp --parents -P -t "$src")
else
    (cd "$top" && tar -c --exclude='./build*' --exclude='./debian/tmp' . ) |
        (cd "$src" && tar -x)
fi

step_start=$SECONDS
echo "$me: building the packages (dpkg-buildpackage -b, nocheck) in $work"
if ! (cd "$src" && env DEB_BUILD_OPTIONS="nocheck noddebs parallel=$(nproc)" \
        dpkg-buildpackage -b -us -uc -Pnocheck) >"$work/build.log" 2>&1; then
    tail -n 60 "$work/build.log" >&2
    echo "$me: dpkg-buildpackage failed (the log's end is above)" >&2
    exit 1
fi
debs=("$work"/*.deb)
echo "$me: built ${#debs[@]} packages in $((SECONDS - step_start)) s:" \
     "$(cd "$work" && echo *.deb)"

# lintian: errors fail; warnings are printed (debian/README.source says
# why each one stays).
lintian_rc=0
lintian --fail-on error "$work"/*.changes 2>&1 |
    grep -v '^running with root privileges' >"$work/lintian.txt" ||
    lintian_rc=${PIPESTATUS[0]}
[ -n "$keep" ] && cp "$work"/*.deb "$work/lintian.txt" "$keep"/
echo "$me: lintian: $(grep -c '^E: ' "$work/lintian.txt" || true) errors," \
     "$(grep -c '^W: ' "$work/lintian.txt" || true) warnings"
sed 's/^/    /' "$work/lintian.txt"
if [ $lintian_rc -ne 0 ]; then
    echo "$me: lintian failed (status $lintian_rc)" >&2
    exit 1
fi

echo "$me: apt-get install ./*.deb"
(cd "$work" && apt_get install -y -q ./*.deb) >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; exit 1; }

# Every program of the packages: its version, and its page.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
dpkg -L "${packages[@]}" | sort >"$work/files"
for prog in $(grep '^/usr/bin/' "$work/files"); do
    name=${prog##*/}
    said=$("$prog" --version) || { echo "$me: $prog --version failed" >&2; exit 1; }
    if [ "$said" != "$name $version" ]; then
        echo "$me: $prog --version says '$said', not '$name $version'" >&2
        exit 1
    fi
    if ! grep -qx "/usr/share/man/man1/$name.1.gz" "$work/files"; then
        echo "$me: $name is in the packages and its manual page is not" >&2
        exit 1
    fi
done
echo "$me: OK: every installed program says version $version and has a page"

# The hello example, against the installed copy only.
app=$work/app
mkdir -p "$app"
cp "$top"/examples/hello/hello.c "$top"/examples/hello/hello_target.c \
   "$top"/examples/hello/hello_source.c "$app"/
cd "$app"
export PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=/usr/lib/$multiarch/pkgconfig:/usr/share/pkgconfig
/usr/bin/ucx-ifunc-keygen demo >/dev/null
/usr/bin/ucx-ifunc-cc -O2 -Wall -Werror --sign demo.key -o hello.so hello.c
for prog in hello_target hello_source; do
    cc -Wall -Werror -o $prog $prog.c $(pkg-config --cflags --libs ucx-ifunc)
done
# (/lib is /usr/lib on a merged /usr: compare the files, not the names.)
lib=$(ldd ./hello_target | awk '/libucp_ifunc/ { print $3 }')
if [ -z "$lib" ] || [ "$(readlink -f "$lib")" != \
     "$(readlink -f "/usr/lib/$multiarch/libucp_ifunc.so.0")" ]; then
    echo "$me: hello_target uses '$lib', not the packaged libucp_ifunc" >&2
    exit 1
fi

# The target trusts demo.pub and has no hello.so.
# shellcheck source=contrib/run-hello.sh
. "$top/contrib/run-hello.sh"
for tls in sm,tcp tcp; do
    hello_target_env=("UCX_TLS=$tls" "UCX_IFUNC_TRUSTED_KEYS=$app/demo.pub")
    hello_source_env=("UCX_TLS=$tls" "UCX_IFUNC_LIB_DIR=$app")
    run_hello "$me" "hello over $tls" \
        "hello over UCX_TLS=$tls (signed, the target has no hello.so)"
done

# The Python package: it imports from Debian's python3 and finds the
# packaged library, and a source in Python sends hello to the C target.
said=$(/usr/bin/python3 -c 'import ucx_ifunc; print(ucx_ifunc.__file__, ucx_ifunc.library_version())')
if [ "$said" != "/usr/lib/python3/dist-packages/ucx_ifunc/__init__.py $version" ]; then
    echo "$me: python3 -c 'import ucx_ifunc' says '$said'" >&2
    exit 1
fi
cat >hello_source.py <<'EOP'
import sys
import ucx_ifunc

with ucx_ifunc.Context() as context:
    worker = ucx_ifunc.Worker(context)
    peer = worker.connect(sys.argv[1])
    hello = context.register("hello")  # $UCX_IFUNC_LIB_DIR/hello.so
    peer.send(hello, sys.argv[2].encode() + b"\0")
    peer.close()  # what is under way arrives first
EOP
hello_source_cmd=(/usr/bin/python3 hello_source.py)
for tls in sm,tcp tcp; do
    hello_target_env=("UCX_TLS=$tls" "UCX_IFUNC_TRUSTED_KEYS=$app/demo.pub")
    hello_source_env=("UCX_TLS=$tls" "UCX_IFUNC_LIB_DIR=$app")
    run_hello "$me" "hello from python over $tls" \
        "python3-ucx-ifunc: a Python source to the C target over UCX_TLS=$tls"
done
unset hello_source_cmd

# The benchmark, with the ifunc libraries of its package (no -L); tcp for
# the default path's connection (ifunc_auto_lat).
if ! UCX_TLS=sm,tcp timeout 120 /usr/bin/ucx_ifunc_perftest -l -p 0 -f \
        -t ifunc_lat,ifunc_am_lat,ifunc_auto_lat -s 8 -n 200 -w 20 \
        >perftest.out 2>&1; then
    echo "$me: ucx_ifunc_perftest failed:" >&2
    cat perftest.out >&2
    exit 1
fi
echo "$me: OK: ucx_ifunc_perftest -l (sm,tcp) with its installed ifunc libraries"

# The pointer chase, with its installed chase.so and chase.pub.
if command -v mpirun >/dev/null; then
    if ! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            OMPI_MCA_pml=ob1 UCX_TLS=tcp timeout 120 \
            mpirun --oversubscribe -np 2 -x UCX_TLS /usr/bin/ucx_ifunc_chase \
            -l 16 -c 1 -n 10 -t 50c >chase.out 2>&1; then
        echo "$me: ucx_ifunc_chase failed:" >&2
        cat chase.out >&2
        exit 1
    fi
    echo "$me: OK: mpirun -np 2 ucx_ifunc_chase (tcp) with its installed chase.so"
else
    echo "$me: no mpirun: the installed ucx_ifunc_chase was not run"
fi

# The MPI helper's development files: a program builds and links.
cat >mpi_helper.c <<'EOC'
#include <ucx_ifunc_mpi.h>

int main(int argc, char **argv)
{
    ucx_ifunc_mpi_h mpi;
    int             ok;

    MPI_Init(&argc, &argv);
    ok = ucx_ifunc_mpi_init(NULL, &mpi) == UCS_OK;
    if (ok) {
        ucx_ifunc_mpi_finalize(mpi);
    }
    MPI_Finalize();
    return !ok;
}
EOC
cc -Wall -Werror -o mpi_helper mpi_helper.c $(pkg-config --cflags ompi-c) \
    $(pkg-config --cflags --libs ucx-ifunc) -lucx_ifunc_mpi \
    $(pkg-config --libs ompi-c)
echo "$me: OK: a program of <ucx_ifunc_mpi.h> builds against the packages"
echo "$me: OK in $SECONDS s (packages built and checked; purging them now)"
