//! The destination: the witness. It records every fetch arrival and answers it.
//!
//! It enforces its own true limit (GCRA at `destination.limit` per second with
//! `limit_burst`), answering 429 above it, and answers 503 with probability `p503`. Its
//! arrivals, not the pacer's grants, are what the destination feels, so they are what the
//! ceiling check counts first. During a `destination_throttle` fault window it answers every
//! arrival with the fault's status instead.

use crate::dist::Dist;
use crate::pacer::Gcra;
use crate::rng::Rng;
use crate::time::{Instant, Nanos};
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// HTTP-like status codes the model uses.
pub mod status {
    /// Success.
    pub const OK: u16 = 200;
    /// Above the destination's true limit.
    pub const TOO_MANY: u16 = 429;
    /// Transient unavailability.
    pub const UNAVAILABLE: u16 = 503;
}

/// The destination's state.
#[derive(Debug)]
pub struct Destination {
    limit: Option<Gcra>,
    // invariant: the GCRA's theoretical arrival time over *allowed* arrivals only.
    tat: Option<u64>,
    p503: f64,
    rng: Rng,
    // `(start ns, end ns, status)`: windows in which every arrival gets `status`.
    throttles: Vec<(u64, u64, u16)>,
    /// Arrivals so far.
    pub arrivals: u64,
}

impl Destination {
    /// A destination from its configuration and random stream.
    pub fn new(cfg: &DestinationCfg, rng: Rng) -> Destination {
        let limit = cfg
            .limit
            .map(|r| Gcra::new(Nanos::interval_of_rate(r).0, cfg.limit_burst.unwrap_or(1).max(1)));
        Destination {
            limit,
            tat: None,
            p503: cfg.p503,
            rng,
            throttles: Vec::new(),
            arrivals: 0,
        }
    }

    /// Adds throttle windows `[start, end)` in which every arrival is answered with the
    /// window's status (see [`crate::fault::throttles`]).
    pub fn with_throttles(mut self, throttles: Vec<(u64, u64, u16)>) -> Destination {
        self.throttles = throttles;
        self
    }

    /// A request arrives at `t`: the status it gets.
    pub fn arrive(&mut self, t: Instant) -> u16 {
        self.arrivals += 1;
        if let Some(&(_, _, code)) = self.throttles.iter().find(|&&(a, b, _)| (a..b).contains(&t.0)) {
            return code;
        }
        if let Some(g) = &self.limit {
            let d = g.decide(self.tat, t.0);
            if !d.is_allowed() {
                return status::TOO_MANY;
            }
            self.tat = Some(d.tat());
        }
        if self.p503 > 0.0 && self.rng.random_bool(self.p503) {
            return status::UNAVAILABLE;
        }
        status::OK
    }
}

/// `[destination]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationCfg {
    /// One-way latency from a worker to the destination. Default 0.
    #[serde(default)]
    pub latency: Dist,
    /// The destination's own true limit (GCRA, per second); above it, it answers 429.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// Burst the destination's limit tolerates. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_burst: Option<u32>,
    /// Probability of a 503 on any request. Default 0.
    #[serde(default)]
    pub p503: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Entity, stream};

    #[test]
    fn answers_429_above_its_limit() {
        let cfg = DestinationCfg {
            limit: Some(8.0),
            ..Default::default()
        };
        let mut d = Destination::new(&cfg, stream(1, Entity::Destination));
        assert_eq!(d.arrive(Instant(0)), status::OK);
        assert_eq!(d.arrive(Instant(100_000_000)), status::TOO_MANY);
        assert_eq!(d.arrive(Instant(125_000_000)), status::OK);
    }

    #[test]
    fn throttle_window_answers_every_arrival_with_its_status() {
        let cfg = DestinationCfg::default();
        let mut d = Destination::new(&cfg, stream(1, Entity::Destination)).with_throttles(vec![(10, 20, 503)]);
        let codes: Vec<u16> = [9, 10, 19, 20].iter().map(|&t| d.arrive(Instant(t))).collect();
        assert_eq!(
            codes,
            [status::OK, status::UNAVAILABLE, status::UNAVAILABLE, status::OK]
        );
        assert_eq!(d.arrivals, 4);
    }
}
