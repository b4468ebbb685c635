//! A hand-written reference loop for R1: what the simulation costs with no harness at all.
//!
//! One binary heap of `(time, sequence, process, what)` entries, one FIFO for the row lock,
//! one random stream per process. It models exactly R1's protocol as the `row` backend runs
//! it (with R1's per-process backoff state, only reservations go through the lock):
//!
//! 1. reserve: a one-way store latency, then the row lock (FIFO, `service` each), where
//!    `slot = max(now, next_allowed_at); next_allowed_at = slot + interval`;
//! 2. the reply travels back (another one-way latency); the process sleeps `slot - now`;
//! 3. fetch: the request reaches the destination at once (R1 has no destination latency)
//!    and the response after the fetch duration; then it reserves again.
//!
//! No trace, no checkers, no timeouts, faults, clocks or dynamic dispatch. Draws come from the
//! same per-process streams in the same order as the simulator's, so both runs should count
//! the same fetches: the bench prints both counts side by side as a sanity check.

use pacesim::rng::{self, Entity, Rng};
use pacesim::scenario::Scenario;
use rand_distr::{Distribution, LogNormal};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// What happens next to a process.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    /// Its reservation reaches the store.
    AtStore,
    /// The row lock frees.
    LockFree,
    /// Its reply arrives.
    Reply,
    /// It wakes at its slot and fetches.
    Fetch,
    /// Its fetch's response arrives.
    FetchDone,
}

/// An R1 setup read from a scenario file (only the fields R1 uses).
#[derive(Clone, Debug)]
pub struct R1 {
    seed: u64,
    processes: u32,
    interval: u64,
    duration: u64,
    service: u64,
    latency: LogNormal<f64>,
    fetch: LogNormal<f64>,
}

fn lognormal(d: &pacesim::dist::Dist) -> LogNormal<f64> {
    match *d {
        pacesim::dist::Dist::Lognormal { median, sigma } => {
            LogNormal::new((median.0 as f64).ln(), sigma).expect("valid lognormal")
        }
        ref other => panic!("R1 uses lognormal distributions, got {other:?}"),
    }
}

impl R1 {
    /// Take R1's parameters from its scenario file.
    pub fn from(sc: &Scenario) -> R1 {
        let service = match sc.store.service {
            pacesim::dist::Dist::Constant { value } => value.0,
            ref other => panic!("R1's service time is constant, got {other:?}"),
        };
        R1 {
            seed: sc.seed,
            processes: sc.processes.count,
            interval: sc.interval().0,
            duration: sc.duration.0,
            service,
            latency: lognormal(&sc.store.latency),
            fetch: lognormal(&sc.fetch.duration),
        }
    }
}

fn draw(d: &LogNormal<f64>, r: &mut Rng) -> u64 {
    let v = d.sample(r);
    if v.is_finite() { v.min(1e18).round() as u64 } else { 0 }
}

/// The loop's whole state.
struct Bare<'a> {
    p: &'a R1,
    heap: BinaryHeap<Reverse<(u64, u64, u32, What)>>,
    seq: u64,
    rngs: Vec<Rng>,
    // per process: the sleep its reservation's reply carries
    wait: Vec<u64>,
    // the row lock and the row
    busy: bool,
    queue: VecDeque<u32>,
    next_allowed: Option<u64>,
}

impl Bare<'_> {
    fn push(&mut self, at: u64, pid: u32, what: What) {
        self.heap.push(Reverse((at, self.seq, pid, what)));
        self.seq += 1;
    }

    fn send(&mut self, now: u64, pid: u32) {
        let there = draw(&self.p.latency, &mut self.rngs[pid as usize]);
        self.push(now + there, pid, What::AtStore);
    }

    /// `pid`'s reservation runs under the row lock at `now`.
    fn serve(&mut self, now: u64, pid: u32) {
        let i = pid as usize;
        let slot = self.next_allowed.map_or(now, |n| n.max(now));
        self.next_allowed = Some(slot + self.p.interval);
        self.wait[i] = slot - now;
        let back = draw(&self.p.latency, &mut self.rngs[i]);
        self.push(now + self.p.service + back, pid, What::Reply);
        self.push(now + self.p.service, u32::MAX, What::LockFree);
    }
}

/// Run R1; returns the number of fetches that reached the destination.
pub fn run(p: &R1) -> u64 {
    let n = p.processes as usize;
    let mut b = Bare {
        p,
        heap: BinaryHeap::with_capacity(2 * n + 2),
        seq: 0,
        rngs: (0..p.processes)
            .map(|pid| rng::stream(p.seed, Entity::Process { pid, incarnation: 0 }))
            .collect(),
        wait: vec![0; n],
        busy: false,
        queue: VecDeque::new(),
        next_allowed: None,
    };
    let mut fetches = 0u64;
    for pid in 0..p.processes {
        b.send(0, pid); // every process reserves at t = 0
    }
    while let Some(Reverse((now, _, pid, what))) = b.heap.pop() {
        if now > p.duration {
            break;
        }
        let i = pid as usize;
        match what {
            What::AtStore if b.busy => b.queue.push_back(pid),
            What::AtStore => {
                b.busy = true;
                b.serve(now, pid);
            }
            What::LockFree => match b.queue.pop_front() {
                Some(next) => b.serve(now, next),
                None => b.busy = false,
            },
            What::Reply => {
                let wait = b.wait[i];
                b.push(now + wait, pid, What::Fetch);
            }
            What::Fetch => {
                fetches += 1; // the request reaches the destination now
                let d = draw(&p.fetch, &mut b.rngs[i]);
                b.push(now + d, pid, What::FetchDone);
            }
            What::FetchDone => b.send(now, pid), // the next job reserves at once
        }
    }
    fetches
}
