#!/bin/sh
# `make test`: the hook tests install this checkout's .venv interpreter as a hook libvirtd would run as root,
# and virtxml-cpu refuses an interpreter reached through a directory that anyone but root and the installing
# user can change (a sticky one such as /tmp too: once its name is gone, anyone may create it again). Say so
# once, before anything is set up.
dir=$(cd "${1:-.}" && pwd -P) || exit 2
me=$(id -u)
while :; do
    owner=$(stat -c %u "$dir")
    if { [ "$owner" != 0 ] && [ "$owner" != "$me" ]; } ||
       [ -n "$(find "$dir" -maxdepth 0 \( -perm -0002 -o -perm -0020 \) -print)" ]; then
        echo "make test: its hook tests install this checkout's interpreter as a hook libvirtd would run as root, which virtxml-cpu refuses under $dir (not yours and root's alone): clone the checkout where only you and root can write, e.g. your home directory" >&2
        exit 2
    fi
    [ "$dir" = / ] && exit 0
    dir=$(dirname "$dir")
done
