//! The destination: the witness. It records every fetch arrival and answers it.
//!
//! It enforces its own true limit (GCRA at `destination.limit` per second with
//! `limit_burst`), answering 429 above it, and answers 503 with probability `p503`. Its
//! arrivals, not the pacer's grants, are what the destination feels, so they are what the
//! ceiling check counts first. During a `destination_throttle` fault window it answers every
//! arrival with the fault's status instead.
//!
//! With `[[platforms]]` ([`crate::platform`]) each platform is a destination of its own: an
//! arrival for platform `k` is judged by that platform's GCRA, at its `limit` with its `burst`
//! (issue 35 item 4: before, a platform's limit was only the checker's yardstick and an
//! overshooting platform answered no 429s).

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
    /// A stuck file: the destination never answered and the downloader gave up after its
    /// retries ([`crate::fault::StuckCfg`]); pacesim's code for it (a gateway timeout), only ever in a
    /// `fetch_end`.
    pub const TIMED_OUT: u16 = 504;
}

/// The destination's state.
#[derive(Clone, Debug)]
pub struct Destination {
    limit: Option<Gcra>,
    // invariant: the GCRA's theoretical arrival time over *allowed* arrivals only.
    tat: Option<u64>,
    p503: f64,
    rng: Rng,
    // `(start ns, end ns, status)`: windows in which every arrival gets `status`.
    throttles: Vec<(u64, u64, u16)>,
    // invariant: one `(limit, tat over its allowed arrivals)` per declared platform, by index.
    platforms: Vec<(Gcra, Option<u64>)>,
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
            platforms: Vec::new(),
            arrivals: 0,
        }
    }

    /// Each declared platform's own limit: `(requests per second, burst)` by platform index.
    pub fn with_platforms(mut self, limits: impl IntoIterator<Item = (f64, u64)>) -> Destination {
        self.platforms = limits
            .into_iter()
            .map(|(rate, burst)| {
                let burst = u32::try_from(burst.max(1)).unwrap_or(u32::MAX);
                (Gcra::new(Nanos::interval_of_rate(rate).0, burst), None)
            })
            .collect();
        self
    }

    /// Adds throttle windows `[start, end)` in which every arrival is answered with the
    /// window's status (see [`crate::fault::throttles`]).
    pub fn with_throttles(mut self, throttles: Vec<(u64, u64, u16)>) -> Destination {
        self.throttles = throttles;
        self
    }

    /// An explorer's form of the destination at `now` ([`crate::form`]): each limit's
    /// theoretical arrival time by how far ahead of now it is (a past one reads as none: a
    /// GCRA reads only `max(tat, now)`), its stream's place; absolute while a throttle window
    /// has not ended. (Not the count of arrivals: a statistic.)
    pub fn form(&self, f: &mut crate::form::Form, now: Instant) {
        // (every field named: one added later is placed here, or the build fails)
        let Destination {
            limit,
            tat,
            p503,
            rng,
            throttles,
            platforms,
            arrivals: _,
        } = self;
        f.word(crate::choice::fingerprint(&(limit, p503.to_bits(), rng)));
        f.ahead(tat.unwrap_or(0));
        for (g, t) in platforms {
            f.word(crate::choice::fingerprint(g));
            f.ahead(t.unwrap_or(0));
        }
        if throttles.iter().any(|&(_, end, _)| end > now.0) {
            f.absolute();
        }
    }

    /// A request for platform `platform` (0 without platforms) arrives at `t`: the status it
    /// gets.
    pub fn arrive(&mut self, t: Instant, platform: u32) -> u16 {
        self.arrivals += 1;
        if let Some(&(_, _, code)) = self.throttles.iter().find(|&&(a, b, _)| (a..b).contains(&t.0)) {
            return code;
        }
        if let Some((g, tat)) = self.platforms.get_mut(platform as usize) {
            let d = g.decide(*tat, t.0);
            if !d.is_allowed() {
                return status::TOO_MANY;
            }
            *tat = Some(d.tat());
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
        assert_eq!(d.arrive(Instant(0), 0), status::OK);
        assert_eq!(d.arrive(Instant(100_000_000), 0), status::TOO_MANY);
        assert_eq!(d.arrive(Instant(125_000_000), 0), status::OK);
    }

    /// Issue 35 item 4: each platform answers 429 over its own limit, not over another's.
    #[test]
    fn each_platform_answers_429_over_its_own_limit() {
        let mut d = Destination::new(&DestinationCfg::default(), stream(1, Entity::Destination))
            .with_platforms([(2.0, 1), (10.0, 1)]);
        // platform 0 at 2/s: a second arrival 100 ms later is over its limit
        assert_eq!(d.arrive(Instant(0), 0), status::OK);
        assert_eq!(d.arrive(Instant(100_000_000), 0), status::TOO_MANY);
        // platform 1 at 10/s keeps its own account
        assert_eq!(d.arrive(Instant(100_000_000), 1), status::OK);
        assert_eq!(d.arrive(Instant(150_000_000), 1), status::TOO_MANY);
        assert_eq!(d.arrive(Instant(500_000_000), 0), status::OK);
    }

    #[test]
    fn throttle_window_answers_every_arrival_with_its_status() {
        let cfg = DestinationCfg::default();
        let mut d = Destination::new(&cfg, stream(1, Entity::Destination)).with_throttles(vec![(10, 20, 503)]);
        let codes: Vec<u16> = [9, 10, 19, 20].iter().map(|&t| d.arrive(Instant(t), 0)).collect();
        assert_eq!(
            codes,
            [status::OK, status::UNAVAILABLE, status::UNAVAILABLE, status::OK]
        );
        assert_eq!(d.arrivals, 4);
    }
}
