//! The integration tests, one binary (issue 32 item 7): a change to pacesim relinks one test
//! program, not thirty. Each module is one area; `cargo test --test suite -- <module>::` runs one.
//! The loom models stay apart (`tests/loom_*.rs`, behind the `loom` feature), and so does
//! `tests/memory_estimate.rs`: a child's peak memory counts its parent's at the spawn.

mod bounds;
mod checkers;
mod common;
mod docs;
mod drift;
mod explore;
mod external;
mod external_workers;
mod file_graph;
mod forms;
mod foundation;
mod front_door;
mod fuzz;
mod fuzz_secrets;
mod gcra_governor;
mod generated;
mod golden;
mod jobs;
mod junit;
mod layers;
mod live;
mod live_safety;
mod live_setup;
mod livelock;
mod matrix;
mod platforms;
mod python_team;
mod registry;
mod report;
mod robust;
mod store_model;
mod stories;
mod sweep;
mod threads;
mod trace_hash;
mod verdicts;
