# shellcheck shell=bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Sourced by the scripts that fetch Debian 13 (trixie) packages on a Debian
# 12 machine (check-ucx-headers.sh: binary packages; check-ucx.sh: the
# source package): apt-get with a sources list of its own and its state and
# cache in a directory of the caller's, so that the machine's apt
# configuration and state are left alone. The archive is the one this
# machine's apt configuration names (signed with debian-archive-keyring)
# unless the caller gives another.
#
#     trixie_apt_update DIR TYPE VAR
#         TYPE is deb or deb-src; writes DIR/sources.list, runs apt-get
#         update into DIR and sets trixie_apt_opts, the options that later
#         apt-get commands (download, source) take. VAR names the caller's
#         variables: VAR_MIRROR=URI replaces the archive found in the apt
#         configuration, VAR_KEYRING=FILE the keyring that signs it. Exits
#         on failure, its messages prefixed with $me.

me=${me:-debian13-apt}

# The URI of the Debian archive that serves this release (its codename among
# the Suites), from deb822 .sources files or one-line .list files.
debian_archive_uri() {
    local codename f
    # shellcheck source=/dev/null
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || return 1
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk -v want="$codename" '
            function flush() {
                if (!found && enabled != "no" && (" " types " ") ~ / deb / &&
                    (" " suites " ") ~ (" " want " ") && uris != "") {
                    split(uris, u, " "); print u[1]; found = 1
                }
                types = suites = uris = enabled = key = ""
            }
            /^#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { if (key == "uris") uris = uris " " $0
                       if (key == "suites") suites = suites " " $0
                       next }
            {
                key = tolower(substr($0, 1, index($0, ":") - 1))
                val = substr($0, index($0, ":") + 1)
                gsub(/[ \t]+/, " ", val)
                if (key == "types") types = val
                if (key == "suites") suites = val
                if (key == "uris") uris = val
                if (key == "enabled") { gsub(/ /, "", val); enabled = tolower(val) }
            }
            END { flush() }' "$f" | head -n1
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk -v want="$codename" '
            $1 == "deb" {
                i = 2
                if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == want) { print $i; exit }
            }' "$f"
    done
}

trixie_apt_update() {
    local dir=$1 type=$2 var=$3 out
    local mirror_var=${var}_MIRROR keyring_var=${var}_KEYRING
    local uri=${!mirror_var:-} keyring=${!keyring_var:-}
    [ -n "$uri" ] || uri=$(debian_archive_uri | head -n1)
    if [ -z "$uri" ]; then
        echo "$me: no Debian archive found in /etc/apt (set $mirror_var=URI)" >&2
        exit 1
    fi
    [ -n "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -r "$keyring" ] || { echo "$me: keyring $keyring not found (debian-archive-keyring)" >&2; exit 1; }
    echo "$type [signed-by=$keyring] $uri trixie main" >"$dir/sources.list"
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    # apt drops root to _apt for downloads; let it read the list there.
    if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
        chmod 755 "$dir"
    fi
    trixie_apt_opts=(-q -o Dir::Etc::SourceList="$dir/sources.list"
                     -o Dir::Etc::SourceParts=/dev/null
                     -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache"
                     -o Acquire::Languages=none)
    local bad_sig='NO_PUBKEY|EXPKEYSIG|KEYEXPIRED|not signed|signatures were invalid|GPG error'
    echo "$me: apt-get update: $type $uri trixie main"
    if ! out=$(apt-get "${trixie_apt_opts[@]}" update 2>&1) ||
            grep -qE "^E:|$bad_sig" <<<"$out"; then
        echo "$out" >&2
        if grep -qE "$bad_sig" <<<"$out"; then
            echo "$me: the trixie Release file does not verify with $keyring;" \
                 "update debian-archive-keyring or set $keyring_var" >&2
        fi
        echo "$me: apt-get update for trixie failed" >&2
        exit 1
    fi
    grep '^W:' <<<"$out" >&2 || true
}
