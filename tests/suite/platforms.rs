//! Issue 16, item 1: several platforms, each with its own lock key and its own destination,
//! running concurrently; a serialised set (`serialized_platforms`, the record's
//! `SERIALIZED_PLATFORMS={patreon}`), platforms left uncapped, and the ceiling judged per
//! platform (`sims/platforms.toml`, `sims/platforms-unserialized.toml`).

use pacesim::registry::simulate;
use pacesim::scenario::Scenario;
use pacesim::summary::Summary;
use pacesim::trace::{Collect, Event};
use std::path::Path;

fn load(name: &str) -> Scenario {
    pacesim::registry::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)).unwrap()
}

fn trace(sc: &Scenario) -> Vec<Event> {
    let mut c = Collect::default();
    pacesim::registry::run(sc, &mut c).expect("the run progresses");
    c.events
}

fn summary(sc: &Scenario) -> Summary {
    simulate(sc, None, None).unwrap()
}

/// An arrival with the platform of its process's job: `(t, pid, platform)`.
type Arrival = (u64, u32, u32);

/// Each arrival with the platform of its process's job.
fn arrivals(evs: &[Event]) -> Vec<Arrival> {
    let mut job = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for e in evs {
        match *e {
            Event::Platform { pid, platform, .. } => {
                job.insert(pid, platform);
            }
            Event::Arrival { t, pid, .. } => out.push((t, pid, job[&pid])),
            _ => {}
        }
    }
    out
}

/// The serialised platform walks one at a time while the uncapped one runs beside it: both
/// ceilings hold, each at its own platform's limit, and the key has one holder at a time.
#[test]
fn platforms_run_concurrently_and_only_the_serialised_one_waits() {
    let sc = load("platforms.toml");
    let s = summary(&sc);
    for name in ["ceiling", "mutual_exclusion"] {
        assert!(s.checks[name].passed(), "{name}: {:?}", s.checks[name]);
    }
    // a lock design grants no slots: slot_ceiling does not apply (not a vacuous pass)
    assert!(!s.checks.contains_key("slot_ceiling"), "{:?}", s.checks);
    assert!(s.checks["ceiling"].detail.contains("patreon:") && s.checks["ceiling"].detail.contains("deviantart:"));
    let evs = trace(&sc);
    let arr = arrivals(&evs);
    let (patreon, deviantart): (Vec<&Arrival>, Vec<&Arrival>) = arr.iter().partition(|a| a.2 == 0);
    assert!(
        patreon.len() > 400 && deviantart.len() > 400,
        "{} {}",
        patreon.len(),
        deviantart.len()
    );
    // concurrently: deviantart arrivals while a patreon walk holds its key
    let mut held = false;
    let mut beside = 0;
    for e in &evs {
        match *e {
            Event::LockAcquired { lock: 0, .. } => held = true,
            Event::LockReleased { lock: 0, .. } => held = false,
            Event::Arrival { t, .. } if held && arr.iter().any(|a| a.0 == t && a.2 == 1) => beside += 1,
            _ => {}
        }
    }
    assert!(beside > deviantart.len() / 2, "{beside} of {}", deviantart.len());
    // uncapped deviantart walks overlap each other (up to the worker concurrency): some 1 s
    // window holds arrivals of three or more processes on it
    let most = deviantart
        .iter()
        .map(|a| {
            let mut pids: Vec<u32> = deviantart
                .iter()
                .filter(|b| b.0 >= a.0 && b.0 < a.0 + 1_000_000_000)
                .map(|b| b.1)
                .collect();
            pids.sort();
            pids.dedup();
            pids.len()
        })
        .max()
        .unwrap();
    assert!(most >= 3, "{most}");
    // patreon: never two walkers' arrivals within one walk's span (one walk at a time)
    let long_run = patreon.len() as f64 / 300.0;
    assert!(long_run <= 2.5, "{long_run}");
    eprintln!(
        "platforms: patreon {} arrivals ({long_run:.2}/s), deviantart {} ({:.2}/s), {beside} deviantart arrivals during patreon walks, up to {most} deviantart walkers in 1 s",
        patreon.len(),
        deviantart.len(),
        deviantart.len() as f64 / 300.0
    );
}

/// The defective variant: patreon left out of the serialised set. Its walks take no lock and
/// overlap; its own ceiling fails, and the verdict names the platform.
#[test]
fn patreon_left_out_of_the_serialised_set_fails_its_own_ceiling() {
    let s = summary(&load("platforms-unserialized.toml"));
    let c = &s.checks["ceiling"];
    assert!(c.failed(), "{c:?}");
    assert!(c.detail.starts_with("platform patreon"), "{}", c.detail);
    assert!(!s.checks.contains_key("mutual_exclusion"), "no walk took a lock");
}

/// Handing the key over: the next walk's first request goes as soon as it holds the key,
/// about a fetch after the last walk's last request, not an interval after. With the walk's
/// rate equal to the platform's limit that debt adds up across back-to-back walks: burst 3
/// against 2. (The scenario's 2.5/s limit leaves the walks' 2/s the margin that absorbs it.)
#[test]
fn back_to_back_walks_at_the_limit_hand_over_early() {
    let mut sc = load("platforms.toml");
    sc.platforms[0].limit = Some(2.0);
    let s = summary(&sc);
    let c = &s.checks["ceiling"];
    assert!(c.failed(), "{c:?}");
    assert!(
        c.detail.starts_with("platform patreon: arrivals need burst 3"),
        "{}",
        c.detail
    );
    assert!(
        s.checks["mutual_exclusion"].passed(),
        "{:?}",
        s.checks["mutual_exclusion"]
    );
}

/// The key's TTL shorter than a walk (10 fetches at 2/s, about 5 s): the key expires under a
/// live patreon walker and a second walk takes it: mutual exclusion fails for that key, and
/// says which.
#[test]
fn a_ttl_shorter_than_a_walk_breaks_the_key_per_platform() {
    let mut sc = load("platforms.toml");
    sc.pacer.options.insert("ttl".into(), toml::Value::String("2s".into()));
    sc.validate(&pacesim::registry::Rules).unwrap();
    let s = summary(&sc);
    let m = &s.checks["mutual_exclusion"];
    assert!(m.failed(), "{m:?}");
    assert!(
        m.detail.starts_with("platform patreon (key fc:download_lock:patreon)"),
        "{}",
        m.detail
    );
}

/// Without platforms nothing changes: no platform events, no platforms in the header.
#[test]
fn a_scenario_without_platforms_writes_no_platform_events() {
    let sc = load("redis-lock-kill.toml");
    let h = pacesim::registry::header(&sc, "sim");
    assert!(h.backend_detail.platforms.is_none());
    assert!(!trace(&sc).iter().any(|e| matches!(e, Event::Platform { .. })));
    let p = pacesim::registry::header(&load("platforms.toml"), "sim");
    assert_eq!((p.version, p.backend_detail.platforms().len()), (3, 2));
}

fn parse_err(src: &str) -> String {
    pacesim::registry::parse("p.toml", src).unwrap_err().to_string()
}

const BASE: &str =
    "name = \"p\"\nduration = \"10s\"\n[pacer]\nbackend = \"redis_lock\"\nrate = 2.0\n[processes]\ncount = 2\n";

/// Download tasks (`[jobs]`) do not pick a platform: the two together are refused, not run
/// with every platform's ceiling judged on no arrivals.
#[test]
fn platforms_with_jobs_are_refused() {
    let src = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sims/lock-requeue-redelivered.toml"),
    )
    .unwrap();
    let e = parse_err(&format!("{src}\n[[platforms]]\nname = \"patreon\"\n"));
    assert!(
        e.contains("platforms: [[platforms]] with [jobs] is not modelled yet"),
        "{e}"
    );
}

#[test]
fn bad_platforms_are_refused_naming_file_line_and_field() {
    let two = "[[platforms]]\nname = \"patreon\"\n[[platforms]]\nname = \"deviantart\"\nlimit = -1.0\n";
    assert_eq!(
        parse_err(&format!("{BASE}{two}")),
        "p.toml:12: platforms[1].limit: must be a number above 0, got -1"
    );
    let dup = "[[platforms]]\nname = \"patreon\"\n[[platforms]]\nname = \"patreon\"\n";
    assert_eq!(
        parse_err(&format!("{BASE}{dup}")),
        "p.toml:11: platforms[1].name: `patreon` is declared twice"
    );
    let row = BASE.replace("redis_lock", "row");
    let e = parse_err(&format!("{row}[[platforms]]\nname = \"patreon\"\n"));
    assert!(
        e.starts_with("p.toml:4: pacer.backend: `row` with [[platforms]]"),
        "{e}"
    );
    let unknown = BASE.replace(
        "rate = 2.0\n",
        "rate = 2.0\nserialized_platforms = [\"patreon\", \"fanbox\"]\n",
    );
    let e = parse_err(&format!("{unknown}[[platforms]]\nname = \"patreon\"\n"));
    assert!(
        e.starts_with("p.toml:6: pacer.serialized_platforms: unknown platform `fanbox` (declared: patreon)"),
        "{e}"
    );
    let e = parse_err(&unknown);
    assert!(
        e.contains("pacer.serialized_platforms: names platforms, but the scenario declares none"),
        "{e}"
    );
    let limit = format!("{BASE}[destination]\nlimit = 8.0\n[[platforms]]\nname = \"patreon\"\n");
    assert!(parse_err(&limit).starts_with("p.toml:9: destination.limit: with [[platforms]]"));
}

/// Live mode refuses platforms before it connects to anything (so this runs without servers).
#[test]
fn live_mode_refuses_platforms_up_front() {
    let sc = load("platforms.toml");
    let e = pacesim::live::run_blocking(
        &sc,
        &pacesim::live::LiveOptions::with_exe("/nonexistent", &pacesim::registry::Registered),
    )
    .unwrap_err();
    assert!(e.to_string().contains("[[platforms]] is simulated only"), "{e}");
}

/// Each arrival with its platform and status: `(t, platform, status)`.
fn statuses(evs: &[Event]) -> Vec<(u64, u32, u16)> {
    let mut job = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for e in evs {
        match *e {
            Event::Platform { pid, platform, .. } => {
                job.insert(pid, platform);
            }
            Event::Arrival { t, pid, status, .. } => out.push((t, job[&pid], status)),
            _ => {}
        }
    }
    out
}

/// Issue 35 item 4: each platform's destination throttles over its own limit. The unserialised
/// fleet's patreon (2.9/s against 2.5/s) gets 429s; deviantart, under its 10/s, none.
#[test]
fn each_platform_answers_429_over_its_own_limit() {
    let evs = trace(&load("platforms-unserialized.toml"));
    let st = statuses(&evs);
    let t429 = |p: u32| st.iter().filter(|a| a.1 == p && a.2 == 429).count();
    assert_eq!((t429(0), t429(1)), (289, 0));
    // serialised, with a margin under its limit, patreon draws none
    let st = statuses(&trace(&load("platforms.toml")));
    assert_eq!(st.iter().filter(|a| a.2 == 429).count(), 0);
}

/// Issue 35 item 4, the reactive cooldown alone: it cuts the 429s (13 against 289) but only
/// reacts: after each cooldown the held tasks start together and trip the limit again, so the
/// ceiling still fails, and patreon's throughput collapses. Between a cooldown's first walks'
/// end and its expiry no patreon request is made.
#[test]
fn the_cooldown_alone_reacts_but_does_not_prevent() {
    let sc = load("platforms-cooldown.toml");
    let evs = trace(&sc);
    let st = statuses(&evs);
    let n429 = st.iter().filter(|a| a.2 == 429).count();
    assert_eq!(n429, 13);
    let first = st.iter().find(|a| a.2 == 429).unwrap().0;
    let quiet = st
        .iter()
        .filter(|a| a.1 == 0 && a.0 > first + 15_000_000_000 && a.0 < first + 60_000_000_000)
        .count();
    assert_eq!(quiet, 0, "no patreon walk starts while the cooldown lives");
    let patreon = st.iter().filter(|a| a.1 == 0).count();
    assert!(patreon < 100, "{patreon}");
    let s = summary(&sc);
    assert!(s.checks["ceiling"].failed(), "{:?}", s.checks["ceiling"]);
}

/// Issue 35 item 4, both: the lock keeps one walk at a time, its back-to-back debt trips the
/// limit once, and the cooldown then holds every patreon task for its 60 s.
#[test]
fn the_lock_with_the_cooldown_stops_the_platform_for_the_cooldown_after_a_429() {
    let sc = load("platforms-lock-cooldown.toml");
    let st = statuses(&trace(&sc));
    let t429: Vec<u64> = st.iter().filter(|a| a.2 == 429).map(|a| a.0).collect();
    assert_eq!(t429.len(), 1, "{t429:?}");
    let held = st
        .iter()
        .filter(|a| a.1 == 0 && a.0 > t429[0] && a.0 < t429[0] + 60_000_000_000)
        .count();
    assert_eq!(held, 0, "patreon cools down for 60 s after its 429");
    assert!(st.iter().any(|a| a.1 == 0 && a.0 >= t429[0] + 60_000_000_000));
    let s = summary(&sc);
    assert!(
        s.checks["ceiling"].failed() && s.checks["mutual_exclusion"].passed(),
        "{:?}",
        s.checks
    );
    // the same fleet without the cooldown: the same debt, no pause
    let mut lock_alone = sc.clone();
    lock_alone.pacer.options.remove("cooldown");
    let alone = statuses(&trace(&lock_alone));
    let p = |v: &[(u64, u32, u16)]| v.iter().filter(|a| a.1 == 0).count();
    assert_eq!((p(&st), p(&alone)), (427, 535));
    // with a margin under the limit (platforms.toml's 2.5/s) the lock draws no 429 and the
    // cooldown never fires
    let mut margin = load("platforms.toml");
    margin.pacer.set("cooldown", "'60s'");
    let m = statuses(&trace(&margin));
    assert_eq!((m.iter().filter(|a| a.2 == 429).count(), p(&m)), (0, 540));
}

/// The cooldown is a platform's: without `[[platforms]]`, or not a positive duration, it is
/// refused naming the file, line and field.
#[test]
fn a_cooldown_without_platforms_is_refused() {
    let src = BASE.replace("rate = 2.0\n", "rate = 2.0\ncooldown = \"60s\"\n");
    assert_eq!(
        parse_err(&src),
        "p.toml:6: pacer.cooldown: is a platform's cooldown, but the scenario declares no platforms ([[platforms]])"
    );
    let src = BASE.replace("rate = 2.0\n", "rate = 2.0\ncooldown = \"0s\"\n") + "[[platforms]]\nname = \"patreon\"\n";
    let e = parse_err(&src);
    assert!(e.starts_with("p.toml:6: pacer.cooldown: "), "{e}");
}
