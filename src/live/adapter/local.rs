//! `local` and `local_divided` live: no store; the process side is the whole backend.

use super::{AdapterError, Executed, LiveStore, Open, StoreFailure, StoreUse};
use crate::backend::NoOp;
use crate::backend::local::Local;
use crate::live::proto::WorkerSpec;
use crate::rng::Rng;
use std::time::Duration;

/// No connection: a per-process pacer never sends anything.
#[derive(Debug)]
pub struct NoConn;

impl LiveStore for NoConn {
    type Op = NoOp;
    type Reply = NoOp;

    async fn execute(&mut self, op: &NoOp, _rng: &mut Rng) -> Result<Executed<NoOp>, StoreFailure> {
        match *op {}
    }

    fn reset(&mut self) {}
}

impl Open for NoConn {
    type Backend = Local;
    const STORE: StoreUse = StoreUse::None;

    async fn open(_spec: &WorkerSpec, _b: &Local, _timeout: Duration) -> Result<NoConn, AdapterError> {
        Ok(NoConn)
    }
}
