//! The front door: what a team's backend, checker and `main` need, in one `use`.
//!
//! ```
//! use pacesim::prelude::*;
//! ```
//!
//! - **A backend** (`examples/fixed_window.rs`, `examples/own-backend/`): the contract
//!   ([`Backend`], its [`ProcessSide`] and [`StoreSide`], the [`Step`] a process takes, the
//!   [`StoreOp`] it sends and the [`StoreReply`] it gets back, [`Served`], [`Session`],
//!   [`Threads`], the [`Facts`] the checkers judge it by), its `[pacer]` options
//!   ([`Configure`], [`OptionError`]), the time it sees ([`Nanos`], [`Instant`], [`Reading`]),
//!   the events it writes ([`Event`], [`OpKind`], [`StoreFallback`]), the kill points it
//!   reaches ([`KillPoint`]) and what an explorer compares of its state ([`Form`],
//!   [`exact_hash!`]).
//! - **Running it**: a [`Scenario`] (read with the registry's [`Rules`], or [`Structure`]'s for
//!   a backend not registered) and a [`SimBuilder`], which gives a [`Report`]; or registered by
//!   name with a [`BackendSpec`] (its options: [`OpsOf`]) for every command, live mode's view of
//!   them being [`Registered`].
//! - **A checker** of the team's own: [`Checker`] (a [`Sink`] of the trace, with its
//!   [`Header`]), its [`Verdict`] and [`Status`] ([`NOT_JUDGED`] for what it cannot judge), and
//!   its [`CheckerSpec`].
//! - **`main`**: pacesim's whole command line with the team's backends
//!   ([`main_with_backends`]) and checkers ([`main_with_checkers`]).
//! - **Live**: a backend's live store side ([`LiveOf`], [`LiveStore`], [`Open`] and its
//!   [`AdapterError`], [`Executed`],
//!   [`StoreFailure`], [`StoreUse`]) on pacesim's connections ([`RedisLink`], [`PgLink`]; an
//!   error of theirs as a failed operation: [`redis_failure`], [`pg_failure`]); the worker's
//!   [`WorkerSpec`] and its seeded [`Rng`]. The live store's own answer type is
//!   [`crate::live::adapter::Served`] (named by its path: [`Served`] here is the simulated
//!   store's).
//!
//! Everything else of pacesim is reached by its module path (`pacesim::registry`,
//! `pacesim::run`, `pacesim::report`, ...). `tests/suite/front_door.rs` names every item here:
//! one taken away fails to build the suite, one added fails it until the test names it too.

pub use crate::backend::options::OptionError;
pub use crate::backend::{
    Backend, Configure, Facts, ProcCx, ProcessSide, Served, Session, Step, StoreCx, StoreOp, StoreReply, StoreSide,
    Threads,
};
pub use crate::builder::{Report, SimBuilder};
pub use crate::check::{Checker, CheckerSpec, NOT_JUDGED, Status, Verdict};
pub use crate::cli::{main_with_backends, main_with_checkers};
pub use crate::clock::Reading;
pub use crate::exact_hash;
pub use crate::fault::KillPoint;
pub use crate::form::Form;
pub use crate::live::adapter::{
    AdapterError, Executed, LiveOf, LiveStore, Open, PgLink, RedisLink, StoreFailure, StoreUse, pg_failure,
    redis_failure,
};
pub use crate::live::proto::WorkerSpec;
pub use crate::registry::{BackendSpec, OpsOf, Registered, Rules};
pub use crate::rng::Rng;
pub use crate::scenario::{Scenario, Structure};
pub use crate::time::{Instant, Nanos};
pub use crate::trace::{Event, Header, OpKind, Sink, StoreFallback};
