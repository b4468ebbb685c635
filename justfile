# pacesim tasks. `just simulate` compares backends; `just test` runs the test suite.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Compare every backend on every scenario in sims/ (tables to stdout, reports to reports/).
simulate *ARGS:
    cargo run --release --quiet -- simulate {{ARGS}}

# The test suite: unit, integration, property tests (PROPTEST_CASES sets depth).
test:
    cargo test --all-targets

# What CI runs: formatting, lints with warnings denied, then the tests.
ci:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings
    just test

# Deeper property testing.
deep:
    PROPTEST_CASES=2000 cargo test --release --all-targets

# Model-check the in-process concurrent code with loom.
loom:
    RUSTFLAGS="--cfg pacesim_loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_pacer
