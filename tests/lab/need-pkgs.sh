# Sourced by the lab scripts (run as root): need_pkgs PKG... installs those of Debian's packages that are
# not installed yet, and nothing when all are. The labs are set up side by side: one apt at a time on the
# host (a lock file), the chroots' own apt runs do not wait for it.
need_pkgs() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    (
      flock 9
      echo "lab: installing ${missing[*]}" >&2
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    ) 9>/run/lock/virtxml-cpu-apt.lock
  fi
}
