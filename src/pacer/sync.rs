//! The synchronisation shim: every atomic, lock and `Arc` in the pacing core is imported from
//! here, so the same code runs on `std` in the simulator and in live workers, and on `loom` when
//! built with the `loom` feature (`just loom`) for model checking. Code switches by this module,
//! never by `if` (the pattern of loom's docs and nexosim's `loom_exports.rs`).
//!
//! `loom` paths mirror `std` paths, so only these `use` lines differ. Under the `loom` feature the
//! types may only be created and used inside `loom::model`.
//!
//! Not every re-export is used by the pacer itself; the rest are here so that other in-crate
//! code with concurrent state can be model-checked the same way (the trace's hand-off between
//! threads, [`crate::trace::handoff`], parks and wakes its threads through them).
//!
//! The simulator's threads of one process (`[processes] threads`) share one pacer built on
//! these types, but step one at a time under virtual time; real concurrency inside the pacer
//! is the loom models' to check, not the simulator's.

#[cfg(feature = "loom")]
#[allow(unused_imports)]
pub(crate) use loom::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    thread::{Thread, current, park},
};

#[cfg(not(feature = "loom"))]
#[allow(unused_imports)]
pub(crate) use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    thread::{Thread, current, park},
};
