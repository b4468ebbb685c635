//! The front door stays on purpose (issue 54, item 1): `pacesim::prelude` is what a team's
//! backend, checker and `main` import (`examples/fixed_window.rs`, `examples/own-backend/`).
//!
//! - Every item of the prelude is named here, imported and used: one taken out of the prelude
//!   (or renamed, or moved so the prelude no longer holds it) fails to build the suite.
//! - The names here are compared with the prelude's source: one added to the prelude fails
//!   [`the_prelude_is_the_list_this_test_names`] until it is named here too, so the team API
//!   grows by decision, not by accident.

use std::collections::BTreeSet;
use std::path::Path;

/// Imports every listed item from the prelude and records the names, by kind.
macro_rules! front_door {
    (
        types: [$($ty:ident),* $(,)?],
        generic: [$($gen:ident),* $(,)?],
        traits: [$($tr:ident),* $(,)?],
        fns: [$($f:ident),* $(,)?],
        consts: [$($c:ident),* $(,)?],
        macros: [$($m:ident),* $(,)?] $(,)?
    ) => {
        use pacesim::prelude::{$($ty,)* $($gen,)* $($tr,)* $($f,)* $($c,)* $($m,)*};
        /// Every name the prelude holds, as this test knows it.
        const NAMES: &[&str] = &[
            $(stringify!($ty),)* $(stringify!($gen),)* $(stringify!($tr),)* $(stringify!($f),)*
            $(stringify!($c),)* $(stringify!($m),)*
        ];
    };
}

front_door! {
    types: [
        Facts, Session, Threads, OptionError, Report, SimBuilder, CheckerSpec, Status, Verdict,
        Reading, KillPoint, Form, PgLink, RedisLink, StoreFailure, StoreUse, WorkerSpec,
        BackendSpec, Registered, Rules, Rng, Scenario, Structure, Instant, Nanos, Event, Header,
        OpKind, StoreFallback, AdapterError,
    ],
    generic: [ProcCx, StoreCx, Served, Step, Executed, OpsOf, LiveOf],
    traits: [
        Backend, Configure, ProcessSide, StoreOp, StoreReply, StoreSide, Checker, Sink, LiveStore,
        Open,
    ],
    fns: [main_with_backends, main_with_checkers, redis_failure, pg_failure],
    consts: [NOT_JUDGED],
    macros: [exact_hash],
}

/// Each trait of the prelude, as a bound: one taken away fails to build this (a generic
/// function is checked whether or not it is called).
#[allow(dead_code)]
fn bounds<B, C, P, O, R, S, K, W, L, N>()
where
    B: Backend,
    C: Configure,
    P: ProcessSide,
    O: StoreOp,
    R: StoreReply,
    S: StoreSide,
    K: Checker,
    W: Sink,
    L: LiveStore,
    N: Open,
{
}

/// A state an explorer compares, declared field by field with the prelude's macro.
struct Window {
    count: u64,
    rate: f64,
}
exact_hash!(Window { count, rate: bits });

/// The types of the prelude, by name: each one is the item the prelude says it is.
fn type_names() -> Vec<&'static str> {
    use std::any::type_name;
    vec![
        type_name::<Facts>(),
        type_name::<Session>(),
        type_name::<Threads>(),
        type_name::<OptionError>(),
        type_name::<Report>(),
        type_name::<SimBuilder>(),
        type_name::<CheckerSpec>(),
        type_name::<Status>(),
        type_name::<Verdict>(),
        type_name::<Reading>(),
        type_name::<KillPoint>(),
        type_name::<Form>(),
        type_name::<PgLink>(),
        type_name::<RedisLink>(),
        type_name::<StoreFailure>(),
        type_name::<StoreUse>(),
        type_name::<WorkerSpec>(),
        type_name::<BackendSpec>(),
        type_name::<Registered>(),
        type_name::<Rules>(),
        type_name::<Rng>(),
        type_name::<Scenario>(),
        type_name::<Structure>(),
        type_name::<Instant>(),
        type_name::<Nanos>(),
        type_name::<Event>(),
        type_name::<Header>(),
        type_name::<OpKind>(),
        type_name::<StoreFallback>(),
        type_name::<AdapterError>(),
        type_name::<ProcCx<'static>>(),
        type_name::<StoreCx<'static>>(),
        type_name::<Served<u8>>(),
        type_name::<Step<u8>>(),
        type_name::<Executed<u8>>(),
        type_name::<OpsOf<u8>>(),
        type_name::<LiveOf<u8, u8>>(),
    ]
}

/// The names `src/prelude.rs` re-exports: every `pub use` (grouped or not, `as` renames
/// taken by their new name).
fn prelude_names() -> BTreeSet<String> {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/prelude.rs")).unwrap();
    let code: String = src
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for stmt in code.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let path = &stmt[at + "pub use ".len()..];
        let items: Vec<&str> = match (path.find('{'), path.rfind('}')) {
            (Some(a), Some(b)) => path[a + 1..b].split(',').collect(),
            _ => vec![path.rsplit("::").next().unwrap_or(path)],
        };
        for item in items.into_iter().map(str::trim).filter(|i| !i.is_empty()) {
            let name = item.rsplit(" as ").next().unwrap_or(item);
            out.insert(name.rsplit("::").next().unwrap_or(name).trim().to_string());
        }
    }
    out
}

#[test]
fn the_prelude_is_the_list_this_test_names() {
    let named: BTreeSet<String> = NAMES.iter().map(|s| s.to_string()).collect();
    assert_eq!(named.len(), NAMES.len(), "a name listed twice in front_door!");
    let prelude = prelude_names();
    let unnamed: Vec<&String> = prelude.difference(&named).collect();
    assert!(
        unnamed.is_empty(),
        "src/prelude.rs exports {unnamed:?}, not named in tests/suite/front_door.rs: add them to \
         front_door! (the team API grows on purpose)"
    );
    // (a name here that the prelude lacks fails to build, before this runs)
    let gone: Vec<&String> = named.difference(&prelude).collect();
    assert!(
        gone.is_empty(),
        "named here but not in src/prelude.rs's source: {gone:?}"
    );
}

#[test]
fn every_item_of_the_prelude_is_usable_from_outside() {
    // the types: each named where pacesim defines it
    let types = type_names();
    assert_eq!(
        types.len(),
        NAMES.len() - 10 - 4 - 1 - 1,
        "every type of the list, once"
    );
    for t in &types {
        assert!(t.starts_with("pacesim::") || *t == "i64", "{t}");
    }
    // the functions, as values of their signatures
    let _: fn(Vec<BackendSpec>) -> i32 = main_with_backends;
    let _: fn(Vec<BackendSpec>, Vec<CheckerSpec>) -> i32 = main_with_checkers;
    let _: fn(pacesim::live::adapter::redis::RedisError) -> StoreFailure = redis_failure;
    let _: fn(pacesim::live::adapter::tokio_postgres::Error) -> StoreFailure = pg_failure;
    // the constant: a checker's "cannot judge" prefix
    assert!(NOT_JUDGED.starts_with("not judged"), "{NOT_JUDGED}");
    // the macro: every declared field in the fingerprint, floats by their bits
    let a = Window { count: 1, rate: 0.0 };
    let b = Window { count: 1, rate: -0.0 };
    assert_ne!(pacesim::form::fingerprint(&a), pacesim::form::fingerprint(&b));
    assert_eq!(a.count, b.count);
    // and the values a backend works with
    assert_eq!(Nanos::from_millis(1500).0, 1_500_000_000);
    assert_eq!(Instant(7).0, 7);
}
