//! The front door stays on purpose (issue 54, item 1): `pacesim::prelude` is what a team's
//! backend, checker and `main` import (`examples/fixed_window.rs`, `examples/own-backend/`).
//!
//! - Every item of the prelude is named here, imported and used: one taken out of the prelude
//!   (or renamed, or moved so the prelude no longer holds it) fails to build the suite.
//! - The names here are compared with the prelude's source: one added to the prelude fails
//!   [`the_prelude_is_the_list_this_test_names`] until it is named here too, so the team API
//!   grows by decision, not by accident.
//! - The modules `cargo doc` shows are the front door and nothing else: every public module of
//!   `src/` is named in [`DOCUMENTED`] or carries `#[doc(hidden)]` with a comment saying who
//!   reaches it ([`the_documented_modules_are_the_front_door`]), so a module made public for the
//!   suite does not join the team's docs by accident.

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

/// The modules `cargo doc` shows (by path below the crate): the prelude, the modules a team's
/// backend, checker and `main` name by path (`examples/fixed_window.rs`, `examples/own-backend/`:
/// the registry, `run` and its `compare` and `live`, the matrix, `live`'s settings and adapter,
/// a backend's options, `check::register`, `cli`, `form`), and those the prelude's items and the
/// crate doc's guide point to (the trace, the scenario, a run's summary, reports).
const DOCUMENTED: &[&str] = &[
    "backend",
    "backend::options",
    "backend::redis_gcra",
    "check",
    "cli",
    "form",
    "live",
    "live::adapter",
    "live::settings",
    "matrix",
    "prelude",
    "registry",
    "report",
    "run",
    "run::compare",
    "run::live",
    "scenario",
    "summary",
    "trace",
];

/// A module declared at the top level of a file of `src/` (not inside an inline block).
struct ModDecl {
    path: String,
    public: bool,
    hidden: bool,
    /// the comment above it says why it is public ("..., not the team API")
    reason: bool,
    at: String,
}

/// Every module declaration of `src/` (the binary's `main.rs` left out), with the attributes and
/// comments right above it.
fn module_decls() -> (Vec<ModDecl>, Vec<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && p != src.join("main.rs") {
                files.push(p);
            }
        }
    }
    let mut decls = Vec::new();
    let mut stray_hidden = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
            parts.pop();
        }
        let parent = parts.join("::");
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let decl = ["pub mod ", "pub(crate) mod ", "pub(super) mod ", "mod "]
                .iter()
                .find_map(|p| line.strip_prefix(p).map(|rest| (*p == "pub mod ", rest)));
            let above = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("#[") || (l.starts_with("//") && !l.starts_with("//!")))
                .collect::<Vec<_>>();
            if line.trim() == "#[doc(hidden)]" {
                // allowed only in the attributes of a public module's declaration
                let next = lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.starts_with("#["));
                if !next.is_some_and(|l| l.starts_with("pub mod ")) {
                    stray_hidden.push(format!("{}:{}", f.display(), i + 1));
                }
            }
            let Some((public, rest)) = decl else { continue };
            let name = rest.trim_end_matches(['{', ';', ' ']).trim();
            decls.push(ModDecl {
                path: if parent.is_empty() {
                    name.to_string()
                } else {
                    format!("{parent}::{name}")
                },
                public,
                hidden: above.contains(&"#[doc(hidden)]"),
                reason: above
                    .iter()
                    .any(|l| l.starts_with("//") && l.contains("not the team API")),
                at: format!("{}:{}", f.display(), i + 1),
            });
        }
    }
    (decls, stray_hidden)
}

/// The modules rustdoc shows: public, not hidden, inside a shown module (the crate root is).
fn shown(decls: &[ModDecl]) -> BTreeSet<String> {
    let by_path: std::collections::BTreeMap<&str, &ModDecl> = decls.iter().map(|d| (d.path.as_str(), d)).collect();
    let visible = |path: &str| {
        let mut at = path;
        loop {
            let Some(d) = by_path.get(at) else { return false };
            if !d.public || d.hidden {
                return false;
            }
            match at.rfind("::") {
                Some(k) => at = &at[..k],
                None => return true,
            }
        }
    };
    decls
        .iter()
        .filter(|d| visible(&d.path))
        .map(|d| d.path.clone())
        .collect()
}

#[test]
fn the_documented_modules_are_the_front_door() {
    let (decls, stray_hidden) = module_decls();
    assert!(decls.len() > 50, "read {} module declarations from src/", decls.len());
    let shown = shown(&decls);
    let documented: BTreeSet<String> = DOCUMENTED.iter().map(|s| s.to_string()).collect();
    let extra: Vec<&String> = shown.difference(&documented).collect();
    assert!(
        extra.is_empty(),
        "`cargo doc` shows {extra:?}, which is not the front door: make it `pub(crate)`, or, if the \
         suite, the benches or the binary reach it, put `#[doc(hidden)]` on it with a comment \
         saying who (\"reached by ..., not the team API\"), or name it in DOCUMENTED (the team API \
         grows on purpose)"
    );
    let gone: Vec<&String> = documented.difference(&shown).collect();
    assert!(
        gone.is_empty(),
        "named in DOCUMENTED but not shown by `cargo doc`: {gone:?}"
    );
    for d in decls.iter().filter(|d| d.hidden) {
        assert!(d.public, "{}: `#[doc(hidden)]` on a module that is not public", d.at);
        assert!(
            d.reason,
            "{}: `#[doc(hidden)]` on `{}` without a comment above saying who reaches it (\"reached by \
             ..., not the team API\")",
            d.at, d.path
        );
    }
    assert!(
        stray_hidden.is_empty(),
        "`#[doc(hidden)]` on something other than a public module: {stray_hidden:?} (make the item \
         private or document it)"
    );
}
