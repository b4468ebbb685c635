#!/usr/bin/env bash
# `just bench` (after the perf table): pacesim against two bare event loops of R1, whole
# processes timed the same way, alternated, REPS times each; medians of wall and CPU (user +
# sys). `pacesim run sims/r1-<case>.toml` (simulator, checkers, figures, trace hash; no trace
# file) against
# - the outside reference, the independent bare loop in ../shared/bench/r1-bare (not part of
#   this repository: built and run where it is, into target/r1-bare-*): `r1-bare <case> --seed 1`;
# - the in-repo bare loop, `benches/perf/bare.rs`, as its bench binary runs it alone
#   (`--case bare-<case> --quick`: loading the scenario, then one run of the loop).
# The ratio is bare / pacesim (1 = as fast as the bare loop); the issue's target is 0.5 by wall
# for R1-large against the outside reference.
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
# the perf bench's binary (its bare loop, benches/perf/bare.rs), built with the same settings
# (its path from cargo's JSON messages, read with jq; without jq that row is skipped)
inrepo=""
if command -v jq >/dev/null; then
  inrepo=$(CARGO_TARGET_DIR="$pacesim_target" cargo bench --quiet --bench perf --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .target.name == "perf" and .executable != null) | .executable' |
    tail -1) || inrepo=""
else
  echo "jq not found: the in-repo bare loop (benches/perf/bare.rs) is not timed here"
fi

# wall and CPU seconds of one command, from bash's `times`-free /proc accounting via TIMEFORMAT
measure() {
  local TIMEFORMAT='%R %U %S'
  { time "$@" >/dev/null 2>&1; } 2>&1 | awk '{printf "%s %.3f\n", $1, $2 + $3}'
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

ratio() { echo "$1 / $2" | bc -l; }
summary=()
echo
echo "== pacesim against bare loops of R1, whole processes, median of $REPS (ratio = bare / pacesim)"
echo "   build: $settings"
printf '%-10s %-22s %10s %10s %12s %12s\n' case command wall cpu "ratio wall" "ratio cpu"
for c in $CASES; do
  for f in p b i; do : >"/tmp/pacesim-outside-$$-$f"; done
  for _ in $(seq "$REPS"); do
    measure "$pacesim" run "sims/r1-$c.toml" >>"/tmp/pacesim-outside-$$-p" || true
    measure "$bare" "$c" --seed 1 >>"/tmp/pacesim-outside-$$-b"
    if [ -n "$inrepo" ]; then
      measure "$inrepo" --case "bare-$c" --quick >>"/tmp/pacesim-outside-$$-i"
    fi
  done
  med() { cut -d' ' -f"$2" "/tmp/pacesim-outside-$$-$1" | median; }
  pw=$(med p 1) pc=$(med p 2) bw=$(med b 1) bc=$(med b 2)
  printf '%-10s %-22s %9.3fs %9.3fs %12s %12s\n' "r1-$c" "pacesim run" "$pw" "$pc" "" ""
  printf '%-10s %-22s %9.3fs %9.3fs %12.2f %12.2f\n' "r1-$c" "outside r1-bare" "$bw" "$bc" \
    "$(ratio "$bw" "$pw")" "$(ratio "$bc" "$pc")"
  line="r1-$c: against the outside r1-bare $(printf '%.2f' "$(ratio "$bw" "$pw")") by wall, $(printf '%.2f' "$(ratio "$bc" "$pc")") by CPU"
  if [ -s "/tmp/pacesim-outside-$$-i" ]; then
    iw=$(med i 1) ic=$(med i 2)
    printf '%-10s %-22s %9.3fs %9.3fs %12.2f %12.2f\n' "r1-$c" "in-repo bare.rs" "$iw" "$ic" \
      "$(ratio "$iw" "$pw")" "$(ratio "$ic" "$pc")"
    line="$line; against the in-repo benches/perf/bare.rs $(printf '%.2f' "$(ratio "$iw" "$pw")") by wall, $(printf '%.2f' "$(ratio "$ic" "$pc")") by CPU"
  fi
  summary+=("$line")
  rm -f "/tmp/pacesim-outside-$$-"[pbi]
done
echo
echo "bare / pacesim, whole processes (target for r1-large against the outside r1-bare: >= 0.5 by wall):"
for l in "${summary[@]}"; do echo "  $l"; done
