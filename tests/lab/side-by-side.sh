#!/usr/bin/env bash
# Run make targets side by side (the labs' set-up: each lab has its own daemons), each one's output in
# build/setup/TARGET.log. Prints one line per target with its wall time, and the end of the log of every
# target that failed; exits 1 if any did. Usage: MAKE=make side-by-side.sh TARGET...
set -u
MAKE=${MAKE:-make}
LOGS=build/setup
mkdir -p "$LOGS"
declare -A pid
t0=$(date +%s)
for t in "$@"; do
  ( s=$(date +%s); $MAKE --no-print-directory "$t" > "$LOGS/$t.log" 2>&1; rc=$?
    echo "$(( $(date +%s) - s ))" > "$LOGS/$t.seconds"; exit $rc ) &
  pid[$t]=$!
done
failed=()
for t in "$@"; do
  if wait "${pid[$t]}"; then
    echo "set-up: $t done in $(cat "$LOGS/$t.seconds") s"
  else
    failed+=("$t")
    echo "set-up: $t FAILED after $(cat "$LOGS/$t.seconds" 2>/dev/null || echo '?') s; the end of $LOGS/$t.log:"
    tail -n 25 "$LOGS/$t.log" | sed 's/^/    /'
  fi
done
echo "set-up: $# parts side by side in $(( $(date +%s) - t0 )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "!!! set-up FAILED: ${failed[*]}" >&2
  exit 1
fi
