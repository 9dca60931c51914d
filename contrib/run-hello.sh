# shellcheck shell=bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Sourced by check-install.sh and check-packages.sh, which build the hello
# example against an installed copy and run it the same way:
#
#     run_hello ME MESSAGE WHAT
#         runs ./hello_target on a random port and ./hello_source with
#         MESSAGE from the current directory, the target with the
#         environment hello_target_env (an array of NAME=VALUE), the source
#         with hello_source_env; the source is retried until the target
#         listens. Prints "ME: OK: WHAT" if the target ran the ifunc with
#         MESSAGE, else both programs' output, and exits 1. hello_source_cmd
#         (an array) replaces ./hello_source when set.

# shellcheck disable=SC2154 # the caller sets both environments
run_hello() {
    local me=$1 message=$2 what=$3 port=$(( 20000 + RANDOM % 20000 ))
    local target tries=0
    env "${hello_target_env[@]}" timeout 60 ./hello_target $port \
        >target.out 2>&1 &
    target=$!
    local source=("${hello_source_cmd[@]:-./hello_source}")
    until env "${hello_source_env[@]}" "${source[@]}" "localhost:$port" \
              "$message" >source.out 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 20 ] || ! kill -0 $target 2>/dev/null; then
            break
        fi
        sleep 0.5
    done
    wait $target || true
    if grep -qF "hello_main: \"$message\"" target.out &&
       grep -q 'ifunc ran' target.out; then
        echo "$me: OK: $what"
    else
        echo "$me: $what: failed:" >&2
        cat target.out source.out >&2
        exit 1
    fi
}
