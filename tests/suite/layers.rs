//! The module graph, as a rule (issue 32, item 5): every top-level module has a layer, and a
//! module uses only modules of its own layer or lower ones; the graph has no circle.
//!
//! The graph is read from the source: module `a` depends on `b` when `a`'s code (comments and
//! `#[cfg(test)]` modules left out) names `crate::b`. Every edge is such a path: each type's
//! functions are defined with the type (`Scenario::parse` in `scenario.rs`, taking the rules it
//! judges backends by as an argument; `LiveOptions::cli` in live mode, taking the backends), so
//! nothing below the registry reaches it without naming `crate::registry`.
//!
//! The registry ([`pacesim::registry`]) sits above the simulator and live mode, which it
//! builds; nothing below it looks a backend up by name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, bottom first: each module may use only modules of its own or a lower layer.
/// Every top-level module of `src/` is in one.
const LAYERS: &[&[&str]] = &[
    // foundations: virtual time, seeded streams, statistics, the in-process pacers
    &["time", "choice", "form", "rng", "stats"],
    &["clock", "pacer", "engine"],
    // the trace and what reads it
    &["trace"],
    &["check", "timeline"],
    // the world a scenario describes, as data
    &["dist", "platform", "task"],
    &["fault", "destination"],
    &["store"],
    &["scenario"],
    // backends (the contract and pacesim's designs) and what drives them
    &["backend", "budget"],
    &["worker"],
    &["sim"],
    &["summary", "junit"],
    &["builder"],
    &["live"],
    // the registry: names to backends, above everything it builds
    &["registry"],
    // the commands
    &["run", "plot"],
    &["report", "matrix", "explore"],
    &["sweep"],
    &["cli"],
    // the front door: `pub use`s of what a team needs, from every layer
    &["prelude"],
];

/// The modules that lie on a circle today: none. (Issue 32 dissolved the last, 17 modules
/// around the registry.)
const KNOWN_CIRCLE: &[&str] = &[];

/// Top-level module -> the top-level modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if name == "lib" || name == "main" {
            continue;
        }
        let mut list = Vec::new();
        if p.is_dir() {
            walk(&p, &mut list);
        } else if p.extension().is_some_and(|x| x == "rs") {
            list.push(p);
        }
        files.entry(name).or_default().extend(list);
    }
    let names: BTreeSet<String> = files.keys().cloned().collect();
    let text: BTreeMap<&String, String> = files
        .iter()
        .map(|(m, fs)| {
            (
                m,
                fs.iter().map(|f| code(&std::fs::read_to_string(f).unwrap())).collect(),
            )
        })
        .collect();
    let mut g = BTreeMap::new();
    for (m, t) in &text {
        let deps: BTreeSet<String> = uses(t).into_iter().filter(|d| names.contains(d) && d != *m).collect();
        g.insert((*m).clone(), deps);
    }
    g
}

/// A file's code: comments and everything from the first `#[cfg(test)]` on left out.
fn code(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
    code
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules a file's code names: `crate::x` and `crate::{x, y::z}`; comments and
/// everything from the first `#[cfg(test)]` on are left out.
fn uses(text: &str) -> BTreeSet<String> {
    let code = code(text);
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect() };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let item = item.trim();
                let id = ident(item);
                if !id.is_empty() && (item.len() == id.len() || item[id.len()..].starts_with("::")) {
                    out.insert(id);
                }
            }
        } else {
            let id = ident(rest);
            if !id.is_empty() {
                out.insert(id);
            }
        }
    }
    out
}

/// Modules that lie on a cycle (Tarjan's strongly connected components of size > 1).
fn in_cycles(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: BTreeSet<String>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.g[v] {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.extend(comp.into_iter().map(String::from));
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: BTreeSet::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn lower_layers_never_reach_up() {
    let g = graph();
    for (i, layer) in LAYERS.iter().enumerate() {
        let allowed: BTreeSet<&str> = LAYERS[..=i].iter().flat_map(|l| l.iter().copied()).collect();
        for m in *layer {
            let deps = g.get(*m).unwrap_or_else(|| panic!("no module `{m}` in src/"));
            let up: Vec<&String> = deps.iter().filter(|d| !allowed.contains(d.as_str())).collect();
            assert!(
                up.is_empty(),
                "`{m}` (layer {i}) uses {up:?}, above its layer: {LAYERS:?}"
            );
        }
    }
    let lower: BTreeMap<String, BTreeSet<String>> = g
        .iter()
        .filter(|(m, _)| LAYERS.iter().any(|l| l.contains(&m.as_str())))
        .map(|(m, d)| (m.clone(), d.clone()))
        .collect();
    assert!(
        in_cycles(&lower).is_empty(),
        "a circle among the lower layers: {lower:?}"
    );
}

#[test]
fn every_module_has_a_layer() {
    let g = graph();
    let placed: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let missing: Vec<&String> = g.keys().filter(|m| !placed.contains(m.as_str())).collect();
    assert!(
        missing.is_empty(),
        "modules without a layer (add them to LAYERS in tests/suite/layers.rs): {missing:?}"
    );
    let gone: Vec<&&str> = placed.iter().filter(|m| !g.contains_key(**m)).collect();
    assert!(gone.is_empty(), "LAYERS names modules src/ does not have: {gone:?}");
}

#[test]
fn the_circle_can_shrink_but_not_grow() {
    let g = graph();
    let cyc = in_cycles(&g);
    let known: BTreeSet<String> = KNOWN_CIRCLE.iter().map(|s| s.to_string()).collect();
    let joined: Vec<&String> = cyc.difference(&known).collect();
    assert!(
        joined.is_empty(),
        "modules joined a circle of the module graph: {joined:?} (the graph: {g:#?})"
    );
    let left: Vec<&String> = known.difference(&cyc).collect();
    assert!(
        left.is_empty(),
        "no longer in a circle, take them off KNOWN_CIRCLE in tests/suite/layers.rs: {left:?}"
    );
}

/// The reader itself: it finds `crate::` paths in code, grouped or not, and not in comments or
/// test modules.
#[test]
fn the_reader_finds_code_paths_only() {
    let u = uses(
        "use crate::{time::Nanos, rng};\nuse crate::trace::Event; // crate::sim\n/// [`crate::live`]\n\
         fn f() { crate::check::x(); }\n#[cfg(test)]\nmod tests { use crate::cli; }\n",
    );
    let want: BTreeSet<String> = ["time", "rng", "trace", "check"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(u, want);
}

/// pacesim's own machinery: crate-private, so `cargo doc` shows only the documented API
/// (issue 32, item 5). The simulator's world and loop, the event queue, the figures, sweeps,
/// the store and destination models, the platforms' and broker tasks' models and the worker's
/// state machine (issue 54: nothing outside the crate names them): a team reaches them through
/// the front door (`pacesim::prelude`), `SimBuilder`, the registry, `report` and the command
/// line.
const INTERNAL: &[&str] = &[
    "destination",
    "engine",
    "platform",
    "plot",
    "sim",
    "store",
    "sweep",
    "task",
    "worker",
];

/// Every top-level module is public, or one of [`INTERNAL`] and `pub(crate)`. Which public
/// modules the docs show, and that every other one is `#[doc(hidden)]` with its reason, is
/// `tests/suite/front_door.rs`'s rule.
#[test]
fn the_internal_modules_are_crate_private() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut internal = Vec::new();
    for line in lib.lines().map(str::trim) {
        if let Some(m) = line.strip_prefix("pub(crate) mod ") {
            internal.push(m.trim_end_matches(';'));
        } else if line.starts_with("mod ") || line.starts_with("pub(super) mod ") {
            panic!("src/lib.rs: `{line}`: a top-level module is public or `pub(crate)`");
        }
    }
    assert_eq!(internal, INTERNAL, "src/lib.rs's crate-private modules");
}
