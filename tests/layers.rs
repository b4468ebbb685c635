//! The module graph, as a ratchet (issue 32, item 5): lower layers never reach up, and the one
//! circle of top-level modules that remains can shrink but never grow.
//!
//! The graph is read from the source: module `a` depends on `b` when `a`'s code (comments and
//! `#[cfg(test)]` modules left out) names `crate::b`. The circle is the registry at the bottom
//! of the graph building the layers above it; issue 32 dissolves it step by step, and each step
//! removes its modules from [`KNOWN_CIRCLE`] (the test fails while a listed module is no longer
//! in a circle, so the list stays true).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The lower layers, bottom first: each module may use only modules of its own or a lower
/// layer, and nothing above them.
const LAYERS: &[&[&str]] = &[
    &["time", "rng", "stats"],
    &["clock", "pacer", "engine"],
    &["trace"],
    &["check", "timeline"],
];

/// The modules of the circle that remains today; no other module may join a circle.
const KNOWN_CIRCLE: &[&str] = &[
    "backend",
    "budget",
    "builder",
    "destination",
    "dist",
    "fault",
    "junit",
    "live",
    "matrix",
    "platform",
    "run",
    "scenario",
    "sim",
    "store",
    "summary",
    "task",
    "worker",
];

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
    let mut g = BTreeMap::new();
    for (m, fs) in &files {
        let mut deps = BTreeSet::new();
        for f in fs {
            for d in uses(&std::fs::read_to_string(f).unwrap()) {
                if names.contains(&d) && &d != m {
                    deps.insert(d);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
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
    let mut code = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        code.push_str(line.split("//").next().unwrap_or(""));
        code.push('\n');
    }
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
        "no longer in a circle, take them off KNOWN_CIRCLE in tests/layers.rs: {left:?}"
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
