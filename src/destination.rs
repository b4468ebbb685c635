//! The destination: the witness. It records every fetch arrival and answers it.
//!
//! It enforces its own true limit (GCRA at `destination.limit` per second with
//! `limit_burst`), answering 429 above it, and answers 503 with probability `p503`. Its
//! arrivals, not the pacer's grants, are what the destination feels, so they are what the
//! ceiling check counts first.

use crate::pacer::Gcra;
use crate::rng::Rng;
use crate::scenario::DestinationCfg;
use crate::time::{Instant, Nanos};
use rand::RngExt;

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
            arrivals: 0,
        }
    }

    /// A request arrives at `t`: the status it gets.
    pub fn arrive(&mut self, t: Instant) -> u16 {
        self.arrivals += 1;
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
}
