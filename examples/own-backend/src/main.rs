//! `own-backend`: pacesim's command line with this team's backends and checker beside
//! pacesim's own.
//!
//! `cargo run -- simulate sims/sliding-log.toml`, `cargo run -- matrix sims/sliding-log.toml
//! --expected sims/expected-matrix.toml`, `cargo run -- live sims/sliding-log.toml`,
//! `cargo run -- conform sims/sliding-log.toml`: every pacesim command (README.md).

fn main() {
    std::process::exit(pacesim::prelude::main_with_checkers(
        own_backend::backends(),
        own_backend::checkers(),
    ));
}
