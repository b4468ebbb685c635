#!/usr/bin/env bash
# `just bench` (last): exhaustive exploration, whole `pacesim explore` processes, each tree to
# its end: one line a case with the verdict's schedules and distinct states, the wall seconds,
# the CPU seconds (user + sys) and the peak resident set (GNU time's maximum RSS), the
# threads the search used. Cases (docs/performance.md, "Exploration"):
# - gcra-3x2-kill: redis_gcra, 3 processes x 2 requests, at most one kill, staying down;
# - gcra-3x2-kill-nosym: the same without symmetry reduction (--no-symmetry);
# - gcra-3x3: redis_gcra, 3 x 3, no kill;
# - sliding-log-3x2-kill: the example crate's backend (examples/own-backend, `sliding_log`)
#   at 3 x 2 with one kill, when its program is built (OWN_BACKEND=path/to/own-backend);
# - sliding-log-3x3-kill: the same at 3 x 3 with one kill (sims/sliding-log-racers.toml: the
#   racers with the log);
# - gcra-3x3-kill: redis_gcra 3 x 3 with one kill (issue 50's target: < 2 min, < 1 GiB on a
#   2-core machine);
# - gcra-4x3 (DEEP=1 only): redis_gcra 4 x 3 without a kill (minutes, about 3 GiB).
# PACESIM: the program (default target/release/pacesim, built by `just bench`); THREADS:
# --threads (default: the explorer's, every core); CASES: the cases to run (names above).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="$(realpath "${PACESIM:-target/release/pacesim}")"
OWN="${OWN_BACKEND:-}"
CASES="${CASES:-gcra-3x2-kill gcra-3x2-kill-nosym gcra-3x3 gcra-3x3-kill sliding-log-3x2-kill sliding-log-3x3-kill}"
if [ "${DEEP:-0}" = 1 ]; then CASES="$CASES gcra-4x3"; fi
THREADS_ARG=()
if [ -n "${THREADS:-}" ]; then THREADS_ARG=(--threads "$THREADS"); fi
if [ ! -x /usr/bin/time ]; then
  echo "explore bench: /usr/bin/time (GNU time) not found; skipped"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
RACERS=sims/explore-three-racers.toml
KILL=(--kills 1 --restart-after never)
BIG=(--schedules 1000000000 --max-memory 16GiB)

one() {
  local name="$1" prog="$2" dir="$3"
  shift 3
  if (cd "$dir" && /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$prog" explore "$@" "${THREADS_ARG[@]}" \
      >"$tmp/out" 2>&1); then :; fi
  local verdict
  verdict="$(grep -m1 -E 'no violation|violation of|INCOMPLETE|NOTHING JUDGED' "$tmp/out" || tail -1 "$tmp/out")"
  read -r wall user sys rss <"$tmp/time"
  local sched states threads
  sched="$(sed -nE 's/.*in all ([0-9]+) schedules.*/\1/p; s/.*in the ([0-9]+) schedules judged.*/\1/p' <<<"$verdict" | head -1)"
  states="$(sed -nE 's/.*\(([0-9]+) distinct states.*/\1/p' <<<"$verdict" | head -1)"
  threads="$(sed -nE 's/^\| threads \| ([0-9]+) \|$/\1/p' "$tmp/out" | head -1)"
  printf '%-22s %12s %12s %9.2f s %9.2f s %8.0f MiB  threads %s  %s\n' "$name" "${sched:--}" "${states:--}" \
    "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc)" "${threads:-${THREADS:-1}}" \
    "$(cut -c1-60 <<<"$verdict")"
}

# the example crate's case `$1` at 3 x `$2` with one kill, when its program is built
own() {
  if [ -n "$OWN" ] && [ -x "$OWN" ]; then
    one "$1" "$(realpath "$OWN")" examples/own-backend sims/sliding-log-racers.toml --backend sliding_log \
      --processes 3 --requests "$2" "${KILL[@]}" "${BIG[@]}"
  else
    echo "$1: the example crate's program is not built (OWN_BACKEND=path); skipped"
  fi
}

printf '%-22s %12s %12s %11s %11s %12s\n' case schedules states wall cpu "peak RSS"
for c in $CASES; do
  case "$c" in
    gcra-3x2-kill) one "$c" "$BIN" . $RACERS --backend redis_gcra --processes 3 --requests 2 "${KILL[@]}" "${BIG[@]}" ;;
    gcra-3x2-kill-nosym) one "$c" "$BIN" . $RACERS --backend redis_gcra --processes 3 --requests 2 "${KILL[@]}" "${BIG[@]}" --no-symmetry ;;
    gcra-3x3) one "$c" "$BIN" . $RACERS --backend redis_gcra --processes 3 --requests 3 "${BIG[@]}" ;;
    gcra-4x3) one "$c" "$BIN" . $RACERS --backend redis_gcra --processes 4 --requests 3 "${BIG[@]}" ;;
    gcra-3x3-kill) one "$c" "$BIN" . $RACERS --backend redis_gcra --processes 3 --requests 3 "${KILL[@]}" "${BIG[@]}" ;;
    sliding-log-3x2-kill) own "$c" 2 ;;
    sliding-log-3x3-kill) own "$c" 3 ;;
    *) echo "explore bench: no case $c" >&2; exit 2 ;;
  esac
done
