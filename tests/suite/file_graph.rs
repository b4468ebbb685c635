//! The file graph, as a rule (issue 54, item 5): no file of `src/` reaches, through the paths
//! its code names, a file that reaches back to it. The module graph ([`super::layers`]) has no
//! circle between top-level modules; this is the same rule one level down, file by file inside
//! them (`live/adapter/mod.rs` -> `live/worker.rs` -> `live/driver.rs` -> back was one).
//!
//! A file depends on another when its code (comments and everything from the first
//! `#[cfg(test)]` on left out) names a path into it: `crate::a::b::X`, `super::X`,
//! `self::c::X`, grouped (`crate::a::{b::X, c}`) or not, in code or in a macro's body
//! (`$crate::...`). A path lands in the deepest file it names (`crate::a::b::X` in `a/b.rs`
//! when there is one, else in `a.rs` or `a/mod.rs`), followed through a `pub use` of that file
//! when the file does not define the item itself: a module's re-export is a door, not a
//! dependency of its own (nor is a `pub use`: a parent showing its children's items does not
//! need them; a child's `super::X` of an item its parent imports lands where the item is). A
//! private `use` is a dependency on what it imports (a file's bare `use child::X` included).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`["live", "adapter"]`; the root is `[]`).
type Module = Vec<String>;

/// One file's code and what it re-exports.
struct File {
    code: String,
    /// `use` of a single item (`pub` or not: a child module sees its parent's imports): the
    /// item's name -> its path from the crate root.
    reexports: BTreeMap<String, Module>,
    /// `use path::*`: the modules, from the crate root.
    globs: Vec<Module>,
}

/// The file graph: module -> (module it names -> the first path that names it).
type Graph = BTreeMap<Module, BTreeMap<Module, String>>;

/// The library's files by module (`src/main.rs`, the binary, is its own crate).
fn sources() -> BTreeMap<Module, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().with_extension("");
        let mut m: Module = rel.iter().map(|s| s.to_string_lossy().to_string()).collect();
        if m == ["main"] {
            continue;
        }
        if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
            m.pop();
        }
        out.insert(m, std::fs::read_to_string(&f).unwrap());
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
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

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The paths of a path tree starting at `s[*i]` (`a::{b::C, d as e, self}`), each appended to
/// `prefix`.
fn tree(s: &[u8], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_ws = |i: &mut usize| {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(i);
        if *i < s.len() && s[*i] == b'{' {
            *i += 1;
            loop {
                while *i < s.len() && (s[*i].is_ascii_whitespace() || s[*i] == b',') {
                    *i += 1;
                }
                if *i >= s.len() || s[*i] == b'}' {
                    *i += 1;
                    return;
                }
                let before = *i;
                tree(s, i, prefix.clone(), out);
                if *i == before {
                    *i += 1; // not a path: step over it
                }
            }
        }
        let start = *i;
        while *i < s.len() && (is_ident(s[*i]) || s[*i] == b'*') {
            *i += 1;
        }
        if *i == start {
            out.push(prefix);
            return;
        }
        prefix.push(String::from_utf8_lossy(&s[start..*i]).to_string());
        if s[*i..].starts_with(b"::") {
            *i += 2;
            continue;
        }
        // `X as Y`: the path is X's
        let mut j = *i;
        while j < s.len() && s[j].is_ascii_whitespace() {
            j += 1;
        }
        if s[j..].starts_with(b"as") && s.get(j + 2).is_some_and(|c| c.is_ascii_whitespace()) {
            j += 2;
            while j < s.len() && s[j].is_ascii_whitespace() {
                j += 1;
            }
            while j < s.len() && is_ident(s[j]) {
                j += 1;
            }
            *i = j;
        }
        out.push(prefix);
        return;
    }
}

/// The paths a file's code names from `crate::`, `super::` or `self::` (`$crate::` in macros).
fn paths(code: &str) -> Vec<Vec<String>> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(root) {
            if i > 0 && (is_ident(s[i - 1]) || s[i - 1] == b':') {
                continue;
            }
            let mut j = i;
            tree(s, &mut j, Vec::new(), &mut out);
        }
    }
    out
}

/// A path named in module `m` (from `crate`, `super`, `self`, or a child module of `m`), from
/// the crate root; `None`: another crate's.
fn absolute(m: &Module, path: &[String], modules: &BTreeMap<Module, File>) -> Option<Module> {
    let mut base = m.clone();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {}
        Some(first) => {
            let mut child = m.clone();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The deepest file a path from the crate root lands in, and the rest of the path.
fn deepest<'a>(path: &'a [String], modules: &BTreeMap<Module, File>) -> (Module, &'a [String]) {
    for n in (0..=path.len()).rev() {
        if modules.contains_key(&path[..n]) {
            return (path[..n].to_vec(), &path[n..]);
        }
    }
    (Vec::new(), path)
}

/// Does a file's code define an item named `name`?
fn defines(code: &str, name: &str) -> bool {
    [
        "struct ",
        "enum ",
        "trait ",
        "fn ",
        "type ",
        "const ",
        "static ",
        "union ",
        "macro_rules! ",
        "mod ",
    ]
    .iter()
    .any(|kw| {
        let pat = format!("{kw}{name}");
        code.match_indices(&pat).any(|(i, _)| {
            let before = code[..i].bytes().last();
            let after = code.as_bytes().get(i + pat.len()).copied();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
    })
}

/// The file a path from the crate root lands in, through re-exports.
fn land(path: Module, modules: &BTreeMap<Module, File>) -> Module {
    let mut path = path;
    for _ in 0..8 {
        let (file, rest) = deepest(&path, modules);
        let Some(name) = rest.first() else { return file };
        let f = &modules[&file];
        if defines(&f.code, name) {
            return file;
        }
        let next = if let Some(to) = f.reexports.get(name) {
            Some(to.iter().chain(&rest[1..]).cloned().collect())
        } else {
            f.globs.iter().find_map(|g| {
                let p: Module = g.iter().chain(rest).cloned().collect();
                let (gf, grest) = deepest(&p, modules);
                let found = grest
                    .first()
                    .is_none_or(|n| defines(&modules[&gf].code, n) || modules[&gf].reexports.contains_key(n));
                (gf != file && found).then_some(p)
            })
        };
        match next {
            Some(p) => path = p,
            None => return file,
        }
    }
    deepest(&path, modules).0
}

/// The file graph of a crate's sources (module -> text).
fn graph(sources: &BTreeMap<Module, String>) -> Graph {
    let mut modules: BTreeMap<Module, File> = sources
        .iter()
        .map(|(m, t)| {
            let f = File {
                code: code(t),
                reexports: BTreeMap::new(),
                globs: Vec::new(),
            };
            (m.clone(), f)
        })
        .collect();
    // every file's imports first: a path is followed through them
    let mut uses: BTreeMap<Module, Vec<Module>> = BTreeMap::new();
    for m in sources.keys() {
        let code = modules[m].code.clone();
        let s = code.as_bytes();
        let mut found = Vec::new();
        for (i, _) in code.match_indices("use ") {
            let head = code[..i].trim_end();
            let door = ["pub", "pub(crate)", "pub(super)"].iter().any(|p| head.ends_with(p));
            if !door && !head.bytes().last().is_none_or(|c| b";{}]".contains(&c)) {
                continue;
            }
            let mut j = i + 4;
            let mut these = Vec::new();
            tree(s, &mut j, Vec::new(), &mut these);
            found.extend(these.into_iter().map(|p| (p, door)));
        }
        for (p, door) in found {
            let Some(abs) = absolute(m, &p, &modules) else { continue };
            let f = modules.get_mut(m).unwrap();
            match abs.last().map(String::as_str) {
                Some("*") => f.globs.push(abs[..abs.len() - 1].to_vec()),
                Some("self") => {
                    let module = abs[..abs.len() - 1].to_vec();
                    f.reexports.insert(module.last().cloned().unwrap_or_default(), module);
                }
                Some(name) => {
                    f.reexports.insert(name.to_string(), abs.clone());
                }
                None => {}
            }
            if !door {
                uses.entry(m.clone()).or_default().push(abs);
            }
        }
    }
    let mut g = Graph::new();
    for m in sources.keys() {
        let mut deps: BTreeMap<Module, String> = BTreeMap::new();
        let named = paths(&modules[m].code);
        let reexported = uses.get(m).cloned().unwrap_or_default();
        let all = named
            .iter()
            .filter_map(|p| absolute(m, p, &modules).map(|a| (a, p.join("::"))))
            .chain(reexported.into_iter().map(|a| {
                let text = format!("use crate::{}", a.join("::"));
                (a, text)
            }));
        for (abs, text) in all {
            let abs: Module = abs.into_iter().filter(|s| s != "*" && s != "self").collect();
            let to = land(abs, &modules);
            if to != *m {
                deps.entry(to).or_insert(text);
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

/// The shortest way from `from` back to itself, if any: the files in order.
fn circle_through(g: &Graph, from: &Module) -> Option<Vec<Module>> {
    let mut parent: BTreeMap<&Module, &Module> = BTreeMap::new();
    let mut queue: VecDeque<&Module> = g[from].keys().collect();
    for n in g[from].keys() {
        parent.insert(n, from);
    }
    while let Some(n) = queue.pop_front() {
        if n == from {
            let mut way = vec![from.clone()];
            let mut at = parent[from];
            while at != from {
                way.push(at.clone());
                at = parent[at];
            }
            way.push(from.clone());
            way.reverse();
            return Some(way);
        }
        for next in g.get(n).into_iter().flat_map(|d| d.keys()) {
            if !parent.contains_key(next) {
                parent.insert(next, n);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Every circle of the graph, once each, written `a -> b (by the path that names it) -> a`.
fn circles(g: &Graph) -> Vec<String> {
    let name = |m: &Module| if m.is_empty() { "lib".to_string() } else { m.join("/") };
    let mut seen: BTreeSet<Module> = BTreeSet::new();
    let mut out = Vec::new();
    for m in g.keys() {
        if seen.contains(m) {
            continue;
        }
        if let Some(way) = circle_through(g, m) {
            let mut text = name(&way[0]);
            for w in way.windows(2) {
                text += &format!(" -> {} ({})", name(&w[1]), g[&w[0]][&w[1]]);
            }
            seen.extend(way);
            out.push(text);
        }
    }
    out
}

#[test]
fn no_file_reaches_a_file_that_reaches_back() {
    let g = graph(&sources());
    assert!(g.len() > 100, "the reader found {} files in src/", g.len());
    let found = circles(&g);
    assert!(
        found.is_empty(),
        "files of src/ in a circle (move what both need into a lower file):\n{}",
        found.join("\n")
    );
}

/// The reader itself, on a small crate: `crate::`, `super::` and `self::` paths, grouped or
/// not, followed through a module's `pub use`, not in comments or test modules.
#[test]
fn the_file_reader_follows_paths_and_reexports() {
    let src: BTreeMap<Module, String> = [
        (vec![], "pub mod a;\npub mod b;\n"),
        (
            vec!["a"],
            "mod inner;\nuse inner::helper;\npub use inner::{Thing, Other as O};\npub struct Own;\n// crate::b::X\n",
        ),
        (
            vec!["a", "inner"],
            "pub struct Thing;\npub fn helper() { super::Own; }\n",
        ),
        (
            vec!["b"],
            "use crate::a::{Thing, self as m};\nfn f() { crate::a::Own; }\n#[cfg(test)]\nmod t { use crate::c; }\n",
        ),
        (vec!["c"], "fn g() { $crate::a::inner::helper(); }\n"),
        // a door only: `d` shows `e`'s item, `e` uses `d`'s
        (vec!["d"], "pub mod e;\npub use e::E;\npub struct D;\n"),
        (vec!["d", "e"], "pub struct E;\nfn f() { super::D; }\n"),
    ]
    .into_iter()
    .map(|(m, t)| (m.into_iter().map(String::from).collect(), t.to_string()))
    .collect();
    let g = graph(&src);
    let deps = |m: &[&str]| -> Vec<String> {
        let m: Module = m.iter().map(|s| s.to_string()).collect();
        g[&m].keys().map(|d| d.join("/")).collect()
    };
    // `a` uses `inner`'s helper, `inner` names its parent's `Own`: a circle
    assert_eq!(deps(&["a"]), ["a/inner"]);
    assert_eq!(deps(&["a", "inner"]), ["a"]);
    // `b` reaches `inner`'s `Thing` through `a`'s door, and `a` itself for `Own` and `self`
    assert_eq!(deps(&["b"]), ["a", "a/inner"]);
    assert_eq!(deps(&["c"]), ["a/inner"]);
    // a door is no dependency
    assert!(deps(&["d"]).is_empty());
    assert_eq!(deps(&["d", "e"]), ["d"]);
    assert_eq!(
        circles(&g),
        ["a -> a/inner (use crate::a::inner::helper) -> a (super::Own)"]
    );
}
