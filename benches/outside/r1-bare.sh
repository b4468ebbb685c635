#!/usr/bin/env bash
# `just bench` (after the perf table): pacesim against an outside reference, the independent
# bare event loop of R1 in ../shared/bench/r1-bare (not part of this repository: built and run
# where it is, into target/r1-bare). Whole processes, timed the same way: `pacesim run
# sims/r1-<case>.toml` (simulator, checkers, figures, trace hash; no trace file) against
# `r1-bare <case> --seed 1`, alternated, REPS times each; medians of wall and CPU (user + sys).
#
# Like with like: both are built with the same settings. r1-bare's own Cargo.toml asks for fat
# LTO and one codegen unit; pacesim's release profile uses cargo's defaults (thin local LTO, 16
# codegen units). PROFILE=pacesim (default) builds r1-bare with pacesim's release settings;
# PROFILE=fat builds both with fat LTO and one codegen unit (slow to build: pacesim goes to
# target/fat-lto).
set -euo pipefail
cd "$(dirname "$0")/../.."
BARE_DIR="${R1_BARE_DIR:-../shared/bench/r1-bare}"
REPS="${REPS:-7}"
PROFILE="${PROFILE:-pacesim}"
CASES="${CASES:-large small}"
if [ ! -f "$BARE_DIR/Cargo.toml" ]; then
  echo "outside reference: $BARE_DIR not found; skipped (set R1_BARE_DIR)"
  exit 0
fi

case "$PROFILE" in
  pacesim)
    # r1-bare with pacesim's [profile.release]: no LTO override, 16 codegen units, line tables
    export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
      CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
    pacesim_target=target
    settings="pacesim's release profile (lto = false, codegen-units = 16, debug = line-tables-only) for both"
    ;;
  fat)
    export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
      CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
    pacesim_target=target/fat-lto
    settings="lto = fat, codegen-units = 1, debug = line-tables-only for both"
    ;;
  *) echo "PROFILE must be pacesim or fat" >&2; exit 2 ;;
esac
cargo build --release --quiet --manifest-path "$BARE_DIR/Cargo.toml" --target-dir "target/r1-bare-$PROFILE"
CARGO_TARGET_DIR="$pacesim_target" cargo build --release --quiet --bin pacesim
bare="target/r1-bare-$PROFILE/release/r1-bare"
pacesim="$pacesim_target/release/pacesim"

# wall and CPU seconds of one command, from bash's `times`-free /proc accounting via TIMEFORMAT
measure() {
  local TIMEFORMAT='%R %U %S'
  { time "$@" >/dev/null 2>&1; } 2>&1 | awk '{printf "%s %.3f\n", $1, $2 + $3}'
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo
echo "== pacesim against the outside bare loop ($BARE_DIR), whole processes, median of $REPS"
echo "   build: $settings"
printf '%-10s %12s %12s %12s %12s %10s %10s\n' case "pacesim wall" "bare wall" "pacesim cpu" "bare cpu" "ratio wall" "ratio cpu"
for c in $CASES; do
  : >"/tmp/pacesim-outside-$$-p" && : >"/tmp/pacesim-outside-$$-b"
  for _ in $(seq "$REPS"); do
    measure "$pacesim" run "sims/r1-$c.toml" >>"/tmp/pacesim-outside-$$-p" || true
    measure "$bare" "$c" --seed 1 >>"/tmp/pacesim-outside-$$-b"
  done
  pw=$(cut -d' ' -f1 "/tmp/pacesim-outside-$$-p" | median)
  pc=$(cut -d' ' -f2 "/tmp/pacesim-outside-$$-p" | median)
  bw=$(cut -d' ' -f1 "/tmp/pacesim-outside-$$-b" | median)
  bc=$(cut -d' ' -f2 "/tmp/pacesim-outside-$$-b" | median)
  # ratio = bare / pacesim: 1 would be as fast as the bare loop
  printf '%-10s %11.3fs %11.3fs %11.3fs %11.3fs %10.2f %10.2f\n' "r1-$c" "$pw" "$bw" "$pc" "$bc" \
    "$(echo "$bw / $pw" | bc -l)" "$(echo "$bc / $pc" | bc -l)"
  rm -f "/tmp/pacesim-outside-$$-p" "/tmp/pacesim-outside-$$-b"
done
