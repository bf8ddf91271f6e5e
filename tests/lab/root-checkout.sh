#!/bin/sh
# `make test` as root: the hook tests install this checkout's .venv interpreter as a root hook, and
# virtxml-cpu refuses an interpreter reached through a directory anyone but root can change (a sticky one
# such as /tmp too: once its name is gone, anyone may create it again). Say so once, before anything runs.
dir=$(cd "${1:-.}" && pwd -P) || exit 2
while :; do
    if [ "$(stat -c %u "$dir")" != 0 ] || [ -n "$(find "$dir" -maxdepth 0 \( -perm -0002 -o -perm -0020 \) -print)" ]; then
        echo "make test: as root the hook tests install this checkout's interpreter as a root hook, which virtxml-cpu refuses under $dir (not root's alone): clone the checkout where only root can write, e.g. under /root or /srv" >&2
        exit 2
    fi
    [ "$dir" = / ] && exit 0
    dir=$(dirname "$dir")
done
