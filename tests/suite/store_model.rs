//! The store model's stages (issue 15, item 9): the statement's service time and the commit
//! (the WAL flush a PostgreSQL write waits for), both under the store's lock; which operations
//! commit is the backend's to say.

use pacesim::scenario::Scenario;
use pacesim::trace::{Collect, Event, OpKind};

fn trace(sc: &Scenario) -> Vec<Event> {
    let mut c = Collect::default();
    pacesim::registry::run(sc, &mut c).expect("the run progresses");
    c.events
}

/// Two processes asking at once, no network latency: `store` is the `[store]` table's body.
fn two_at_once(backend: &str, pacer_extra: &str, store: &str) -> Scenario {
    let src = format!(
        r#"
name = "store-stages"
duration = "2s"
[pacer]
backend = "{backend}"
rate = 1000.0
{pacer_extra}
[processes]
count = 2
requests = 1
[store]
{store}
"#
    );
    pacesim::registry::parse("store-stages.toml", &src).unwrap()
}

/// Times (ns) at which each reply of `kind` arrived, in order.
fn replies(evs: &[Event], kind: OpKind) -> Vec<u64> {
    evs.iter()
        .filter_map(|e| match *e {
            Event::Reply { t, op, .. } if op == kind => Some(t),
            _ => None,
        })
        .collect()
}

const MS: u64 = 1_000_000;

#[test]
fn a_commit_holds_the_row_lock_and_the_reply_waits_for_it() {
    let none = trace(&two_at_once("row", "", ""));
    assert_eq!(
        replies(&none, OpKind::Reserve),
        vec![0, 0],
        "no stages: both replies at once"
    );

    let commit = trace(&two_at_once(
        "row",
        "",
        r#"commit = { dist = "constant", value = "2ms" }"#,
    ));
    // the first reply leaves when its commit ends; the second statement waits behind that
    // commit for the row lock, then commits itself
    assert_eq!(replies(&commit, OpKind::Reserve), vec![2 * MS, 4 * MS]);

    let both = trace(&two_at_once(
        "row",
        "",
        r#"service = { dist = "constant", value = "1ms" }
commit = { dist = "constant", value = "2ms" }"#,
    ));
    assert_eq!(replies(&both, OpKind::Reserve), vec![3 * MS, 6 * MS]);
}

#[test]
fn an_open_transaction_commits_at_its_end() {
    // in_transaction: the statement returns at once (the caller's transaction stays open for
    // `hold`), then the commit: the second reserver waits for hold + commit
    let sc = two_at_once(
        "row",
        r#"in_transaction = { hold = { dist = "constant", value = "5ms" } }"#,
        r#"commit = { dist = "constant", value = "2ms" }"#,
    );
    assert_eq!(replies(&trace(&sc), OpKind::Reserve), vec![0, 7 * MS]);
}

#[test]
fn only_durable_writes_commit() {
    let commit = r#"commit = { dist = "constant", value = "2ms" }"#;
    // an advisory lock is not WAL-logged: no commit stage
    let adv = trace(&two_at_once("advisory", "", commit));
    assert_eq!(replies(&adv, OpKind::TryLock)[..2], [0, 0]);
    // a claimed row is an UPDATE: it commits
    let claim = trace(&two_at_once("claim_row", "", commit));
    assert_eq!(replies(&claim, OpKind::TryLock)[..2], [2 * MS, 4 * MS]);
    // Redis commands do not
    let gcra = trace(&two_at_once("redis_gcra", "", commit));
    assert_eq!(replies(&gcra, OpKind::Gcra)[..2], [0, 0]);
}

#[test]
fn a_zero_commit_draws_nothing() {
    // the default is no stage at all: the trace is the one without the field
    let plain = trace(&two_at_once(
        "row",
        "",
        r#"latency = { dist = "lognormal", median = "0.6ms", sigma = 0.5 }"#,
    ));
    let zero = trace(&two_at_once(
        "row",
        "",
        r#"latency = { dist = "lognormal", median = "0.6ms", sigma = 0.5 }
commit = { dist = "constant", value = "0ms" }"#,
    ));
    assert_eq!(plain, zero);
}

#[test]
fn a_bad_commit_names_its_field() {
    let src = r#"
name = "x"
duration = "1s"
[pacer]
backend = "row"
rate = 1.0
[processes]
count = 1
[store]
commit = { dist = "lognormal", median = "1ms", sigma = -1.0 }
"#;
    let e = pacesim::registry::parse("bad.toml", src).unwrap_err().to_string();
    assert!(e.contains("bad.toml") && e.contains("store.commit"), "{e}");
}
