//! Platforms: the destinations a fleet's jobs go to, each with its own limit (issue 16, item 1;
//! design record "platform lock and backfill").
//!
//! The record's fleet downloads from several platforms at once: "different platforms still
//! run concurrently up to the worker concurrency; only a second walk on the SAME serialized
//! platform waits" (`SERIALIZED_PLATFORMS={patreon}`); "gallery-dl platforms are left
//! uncapped (self-pacing subprocesses)". A scenario declares them as `[[platforms]]`:
//!
//! ```toml
//! [[platforms]]
//! name = "patreon"     # required, unique
//! share = 1.0          # weight of the jobs that go to it (default 1)
//! rate = 2.0           # requests per second a walk on it paces itself to (default pacer.rate)
//! limit = 2.0          # its destination's ceiling, what `ceiling` judges (default its rate)
//! burst = 2            # the burst its destination tolerates (default checks.burst)
//! ```
//!
//! Each job goes to one platform, drawn by weight from its process's own platform stream
//! ([`crate::rng::Entity::Platforms`]), which exists only when platforms are declared: a
//! scenario without them draws nothing new and keeps its trace. Which platforms are
//! serialised is the design's choice, not the world's: `redis_lock`'s `serialized_platforms`
//! option. Every platform's destination is separate, so `ceiling` (and `mutual_exclusion`,
//! one lock key per platform) is judged per platform ([`crate::check::platforms`]).

use crate::rng::Rng;
use crate::time::Nanos;
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// One `[[platforms]]` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlatformCfg {
    /// The platform's name (`patreon`, `deviantart`): unique; the lock key is
    /// `fc:download_lock:<name>`.
    pub name: String,
    /// Its weight among the platforms: a job goes to it with probability `share / sum of
    /// shares`. Default 1 (pacesim's choice: the record gives no mix).
    #[serde(default = "one")]
    pub share: f64,
    /// Requests per second one walk on it paces itself to (the walker's or gallery-dl's own
    /// pacing). Default `pacer.rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Its destination's ceiling, requests per second: what `ceiling` judges its arrivals
    /// by. Default its `rate` (one walk at a time is what it tolerates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// The burst its destination tolerates at `limit` (GCRA: `burst - 1` intervals early):
    /// what its `ceiling` allows. Default `checks.burst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
}

crate::exact_hash!(PlatformCfg {
    name,
    share: bits,
    rate: bits,
    limit: bits,
    burst
});

fn one() -> f64 {
    1.0
}

impl PlatformCfg {
    /// The rate a walk on it paces itself to.
    pub fn rate(&self, pacer_rate: f64) -> f64 {
        self.rate.unwrap_or(pacer_rate)
    }

    /// Its destination's ceiling.
    pub fn limit(&self, pacer_rate: f64) -> f64 {
        self.limit.unwrap_or(self.rate(pacer_rate))
    }

    /// The interval between a walk's requests on it.
    pub fn interval(&self, pacer_rate: f64) -> Nanos {
        Nanos::interval_of_rate(self.rate(pacer_rate))
    }
}

/// The most platforms a scenario may declare (each is a lock index of the walk lock).
pub const MAX_PLATFORMS: usize = 4096;

/// Check the `[[platforms]]` list: `Err((field, message))`.
pub fn validate(platforms: &[PlatformCfg]) -> Result<(), (String, String)> {
    if platforms.len() > MAX_PLATFORMS {
        return Err((
            "platforms".into(),
            format!("{} platforms: at most {MAX_PLATFORMS}", platforms.len()),
        ));
    }
    for (i, p) in platforms.iter().enumerate() {
        let f = |k: &str| format!("platforms[{i}].{k}");
        if p.name.trim().is_empty() {
            return Err((f("name"), "must not be empty".into()));
        }
        if p.name.contains(char::is_whitespace) || p.name.contains(':') {
            return Err((
                f("name"),
                format!("`{}`: no spaces or `:` (it ends a Redis key)", p.name),
            ));
        }
        if platforms[..i].iter().any(|q| q.name == p.name) {
            return Err((f("name"), format!("`{}` is declared twice", p.name)));
        }
        if !(p.share.is_finite() && p.share > 0.0) {
            return Err((f("share"), format!("must be a number above 0, got {}", p.share)));
        }
        if p.burst == Some(0) {
            return Err((f("burst"), "must be at least 1".into()));
        }
        for (k, v) in [("rate", p.rate), ("limit", p.limit)] {
            if let Some(r) = v {
                if !(r.is_finite() && r > 0.0) {
                    return Err((f(k), format!("must be a number above 0, got {r}")));
                }
                crate::time::rate_in_range(r).map_err(|m| (f(k), m))?;
            }
        }
    }
    let total: f64 = platforms.iter().map(|p| p.share).sum();
    if !total.is_finite() {
        return Err(("platforms".into(), "the shares must add up to a finite number".into()));
    }
    Ok(())
}

/// Draw a job's platform by weight (one draw from `rng`).
pub fn choose(platforms: &[PlatformCfg], rng: &mut Rng) -> u32 {
    let total: f64 = platforms.iter().map(|p| p.share).sum();
    let mut x = rng.random_range(0.0..total);
    for (i, p) in platforms.iter().enumerate() {
        if x < p.share {
            return i as u32;
        }
        x -= p.share;
    }
    platforms.len().saturating_sub(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, share: f64) -> PlatformCfg {
        PlatformCfg {
            name: name.into(),
            share,
            rate: None,
            limit: None,
            burst: None,
        }
    }

    #[test]
    fn choose_follows_the_shares() {
        let ps = [p("a", 3.0), p("b", 1.0)];
        let mut rng = crate::rng::stream(1, crate::rng::Entity::Platforms(0));
        let n = 10_000;
        let a = (0..n).filter(|_| choose(&ps, &mut rng) == 0).count();
        assert!((7_200..7_800).contains(&a), "{a}");
    }

    #[test]
    fn validate_names_the_field() {
        assert_eq!(
            validate(&[p("a", 1.0), p("a", 1.0)]).unwrap_err().0,
            "platforms[1].name"
        );
        assert_eq!(validate(&[p("a", 0.0)]).unwrap_err().0, "platforms[0].share");
        assert_eq!(validate(&[p("a b", 1.0)]).unwrap_err().0, "platforms[0].name");
        let mut q = p("q", 1.0);
        q.limit = Some(-1.0);
        assert_eq!(validate(&[q]).unwrap_err().0, "platforms[0].limit");
    }
}
