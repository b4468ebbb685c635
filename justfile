# pacesim tasks. `just simulate` compares backends; `just test` runs the test suite.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Compare every backend on every scenario in sims/ (tables to stdout, reports to reports/:
# index.md, plots as SVG and PNG, summary.json). `just simulate --seeds 5` adds 95% CIs.
simulate *ARGS:
    cargo run --release --quiet -- simulate --out reports {{ARGS}}

# The test suite: unit, integration, property tests (PROPTEST_CASES sets depth). Release
# profile: the property and scenario tests simulate millions of events.
test:
    cargo test --release --all-targets

# What CI runs: formatting, lints with warnings denied, then the tests.
ci:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings
    just test

# Deeper property testing.
deep:
    PROPTEST_CASES=2000 cargo test --release --all-targets

# (engine events/s; R1-small and R1-large fetches/s against a bare event loop; property-suite
# rate; peak memory. `just bench --quick` runs each case once.)
# Performance figures, release build.
bench *ARGS:
    cargo bench --bench perf -- {{ARGS}}

# (`just bench-scale --duration 60s` for a quick look.)
# 100,000 processes at 10,000/s for an hour of virtual time: wall time, peak memory (< 500 MB).
bench-scale *ARGS:
    cargo bench --bench scale -- {{ARGS}}

# Model-check the in-process concurrent code with loom.
loom:
    RUSTFLAGS="--cfg pacesim_loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_pacer

# The live tests: real worker processes against PostgreSQL and Redis (PGHOST, PGPORT, PGUSER,
# PGPASSWORD, PGDATABASE, REDIS_URL; loopback defaults). Without the servers they print
# "LIVE TESTS NOT RUN" and pass.
live:
    cargo test --test live -- --nocapture
