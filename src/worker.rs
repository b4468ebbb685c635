//! The worker process model: an explicit state machine, so a fault can kill it in any state.
//!
//! A worker loops: (think or wait for a job) -> acquire permission from the backend (possibly
//! several store round trips) -> sleep until its slot -> fetch -> after-fetch bookkeeping
//! (report a response, release a lock) -> repeat. Its transitions are driven by
//! [`crate::sim`]; this file holds the state and the rules about which state admits which
//! event.

use crate::backend::Op;
use crate::clock::Clock;
use crate::rng::Rng;
use crate::time::Instant;

/// Where a worker is in its loop.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Phase {
    /// Not started yet.
    NotStarted,
    /// Between jobs: thinking (closed loop) or waiting for a job to arrive (open loop).
    Idle,
    /// Waiting for the backend to be asked again (a retry timer).
    Retrying,
    /// An operation is in flight to or queued at the store.
    Awaiting(Op),
    /// Permission granted; sleeping until the slot.
    SleepingToSlot,
    /// The fetch request left; waiting for the response.
    Fetching,
    /// Finished every request it had.
    Finished,
    /// Killed, and not (yet) restarted.
    Dead,
}

/// One worker process.
#[derive(Debug)]
pub struct Worker {
    /// Process id (stable across restarts).
    pub pid: u32,
    /// 0 for the first process with this id; +1 on each restart. Events addressed to an older
    /// incarnation are dropped: a killed process hears nothing.
    pub incarnation: u32,
    /// Current phase.
    pub phase: Phase,
    /// The process's monotonic clock.
    pub mono: Clock,
    /// The host's wall clock.
    pub wall: Clock,
    /// The process's random stream (think times, fetch durations, network draws it makes).
    pub rng: Rng,
    /// Fetches completed (across incarnations).
    pub fetches: u64,
    /// Open loop: jobs waiting to be served.
    pub queued: u64,
    // invariant: increases on every store operation sent; a reply or timeout carrying an older
    // number is stale and ignored.
    /// Sequence number of the store operation in flight.
    pub op_seq: u64,
    /// When the operation in flight was sent.
    pub op_sent: Instant,
    /// Sequence number of the current job (for time limits).
    pub job_seq: u64,
    /// When the current job began.
    pub job_start: Instant,
}

impl Worker {
    /// A process that has not started.
    pub fn new(pid: u32, incarnation: u32, mono: Clock, wall: Clock, rng: Rng) -> Worker {
        Worker {
            pid,
            incarnation,
            phase: Phase::NotStarted,
            mono,
            wall,
            rng,
            fetches: 0,
            queued: 0,
            op_seq: 0,
            op_sent: Instant::ZERO,
            job_seq: 0,
            job_start: Instant::ZERO,
        }
    }

    /// True while the process is alive and has not finished.
    pub fn is_active(&self) -> bool {
        !matches!(self.phase, Phase::Finished | Phase::Dead)
    }
}
