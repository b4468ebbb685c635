//! The documentation stays true where a test can hold it (issue 32 item 6).
//!
//! - **The backend recipe** (CONTRIBUTING.md, "Adding a backend") names the files a backend
//!   touches. For every backend of the registry, its name as a string literal (`"row"`) appears
//!   in `src/` only in the files the recipe names for it (its own file, the registry, its live
//!   adapter) and in [`KNOWN_ELSEWHERE`], each entry with its reason; the registry file is the
//!   one the recipe names (so when the registry moves, only the recipe's text changes); and the
//!   count of `src/` files the recipe states is the count of files it lists.
//! - **Links**: every relative link in README.md, CONTRIBUTING.md and docs/*.md points at a
//!   file that exists, and an anchor (`file.md#section`) at a heading or `<a id>` in it.

use pacesim::registry::REGISTRY;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Places outside the recipe's files whose code names a backend, and why. Each must still
/// name it (an entry that is no longer needed fails the test, so the list stays true).
const KNOWN_ELSEWHERE: &[(&str, &str, &str)] = &[
    (
        "src/scenario.rs",
        "row",
        "`FOUR_LIMITERS`, the smallest valid scenario's text, a fixture the tests start from",
    ),
    (
        "src/live/conform.rs",
        "row",
        "`conform --calibrate` measures the design record's own cost table, which is the pace \
         row's reservation",
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The text of the section of `doc` under heading `heading` (`## ...`), to the next `## `.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` section"));
    let body = &doc[start + heading.len() + 2..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

/// One file of the recipe: its path (with `<name>` for the backend's name) and its bullet's text.
struct RecipeFile {
    path: String,
    text: String,
}

/// The recipe's list: every bullet of the section that starts with a path in backquotes.
fn recipe() -> (Vec<RecipeFile>, String) {
    let doc = read("CONTRIBUTING.md");
    let sec = section(&doc, "## Adding a backend").to_string();
    let mut files: Vec<RecipeFile> = Vec::new();
    for line in sec.lines() {
        if let Some(rest) = line.strip_prefix("- `") {
            let path = rest.split('`').next().unwrap().to_string();
            if path.contains('/') {
                files.push(RecipeFile {
                    path,
                    text: line.to_string(),
                });
                continue;
            }
        }
        // a bullet's continuation lines
        if line.starts_with("  ")
            && let Some(f) = files.last_mut()
        {
            f.text.push(' ');
            f.text.push_str(line.trim());
        }
    }
    (files, sec)
}

fn src_files(recipe: &[RecipeFile]) -> Vec<&RecipeFile> {
    recipe.iter().filter(|f| f.path.starts_with("src/")).collect()
}

/// The registry file, as the recipe names it: the `src/` file whose bullet adds to `REGISTRY`.
fn registry_path(recipe: &[RecipeFile]) -> String {
    let hits: Vec<&RecipeFile> = src_files(recipe)
        .into_iter()
        .filter(|f| f.text.contains("`REGISTRY`"))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "CONTRIBUTING.md's backend recipe must name exactly one file whose bullet adds the entry to `REGISTRY`"
    );
    hits[0].path.clone()
}

/// A file's code: from the first `#[cfg(test)]` module on is left out, and comments.
/// A file that is a test module of its own (`#[cfg(test)] mod <stem>;` in the `mod.rs` beside it,
/// or in the parent `<dir>.rs`): test code, like a `#[cfg(test)] mod tests` block.
fn test_only(path: &Path) -> bool {
    let stem = path.file_stem().unwrap().to_string_lossy();
    let dir = path.parent().unwrap();
    let declared = format!("#[cfg(test)]\nmod {stem};");
    [dir.join("mod.rs"), dir.with_extension("rs")]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .any(|t| t.contains(&declared))
}

fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]")
            && lines.get(i + 1).is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        if line.trim_start().starts_with("//") {
            continue;
        }
        out.push_str(line.split(" // ").next().unwrap_or(""));
        out.push('\n');
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

#[test]
fn the_backend_recipe_names_every_file_that_names_a_backend() {
    let (recipe, text) = recipe();
    let src = src_files(&recipe);

    // the count the recipe states is the count it lists
    let stated = text
        .split(" files in `src/`")
        .next()
        .and_then(|s| s.split_whitespace().last())
        .and_then(|n| n.parse::<usize>().ok())
        .expect("the backend recipe says \"It touches N files in `src/`\"");
    assert_eq!(stated, src.len(), "the backend recipe's count of files in src/");
    let without_live = text
        .split(" without a live adapter")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|s| s.trim().parse::<usize>().ok())
        .expect("the backend recipe says \"(M without a live adapter)\"");
    let optional = src.iter().filter(|f| f.text.contains("optional")).count();
    assert_eq!(
        without_live,
        src.len() - optional,
        "the backend recipe's count without a live adapter (bullets not marked optional)"
    );

    // the registry is where the recipe says, and holds every backend
    let registry = registry_path(&recipe);
    let reg_text = std::fs::read_to_string(root().join(&registry)).unwrap_or_else(|_| {
        panic!(
            "CONTRIBUTING.md's backend recipe names the registry `{registry}`, which does not exist: update the recipe"
        )
    });
    for b in REGISTRY {
        assert!(
            reg_text.contains(&format!("name: \"{}\"", b.name)),
            "`{registry}` (the registry, as CONTRIBUTING.md names it) has no entry `name: \"{}\"`",
            b.name
        );
    }

    // each backend's own files exist, and its module is declared where the recipe says
    for b in REGISTRY {
        for f in &src {
            let p = f.path.replace("<name>", b.name);
            if f.path.contains("<name>") && !f.text.contains("optional") {
                assert!(root().join(&p).exists(), "backend `{}`: no `{p}`", b.name);
            }
            if f.path.ends_with("/mod.rs") && !f.text.contains("optional") {
                // crate-private unless a test outside the crate names it (the front door)
                let text = read(&p);
                assert!(
                    text.contains(&format!("pub(crate) mod {};", b.name))
                        || text.contains(&format!("pub mod {};", b.name)),
                    "backend `{}`: `{p}` has no `pub(crate) mod {};` (or `pub mod`)",
                    b.name,
                    b.name
                );
            }
        }
    }

    // its name, as a string literal, only in the recipe's files and the known exceptions
    let mut files = Vec::new();
    walk(&root().join("src"), &mut files);
    files.sort();
    let mut found: BTreeSet<(String, &str)> = BTreeSet::new();
    let mut stray = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
        if test_only(path) {
            continue;
        }
        let code = code(&std::fs::read_to_string(path).unwrap());
        for b in REGISTRY {
            if !code.contains(&format!("\"{}\"", b.name)) {
                continue;
            }
            let recipe_file = src.iter().any(|f| f.path.replace("<name>", b.name) == rel);
            let known = KNOWN_ELSEWHERE.iter().any(|(f, n, _)| *f == rel && *n == b.name);
            if known {
                found.insert((rel.clone(), b.name));
            } else if !recipe_file {
                stray.push(format!("{rel} names \"{}\"", b.name));
            }
        }
    }
    assert!(
        stray.is_empty(),
        "code outside the files CONTRIBUTING.md's backend recipe names hard-codes a backend's name \
         (find it through the registry instead, or list it in KNOWN_ELSEWHERE with the reason):\n  {}",
        stray.join("\n  ")
    );
    for (f, n, why) in KNOWN_ELSEWHERE {
        assert!(
            found.contains(&(f.to_string(), *n)),
            "KNOWN_ELSEWHERE lists {f} naming \"{n}\" ({why}), but it no longer does: remove the entry"
        );
    }
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(doc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
        for part in line.split("<a id=\"").skip(1) {
            out.insert(part.split('"').next().unwrap().to_string());
        }
    }
    out
}

/// The `](target)` links of a Markdown text, outside code fences and code spans.
fn links(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        // drop code spans
        let text: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        for part in text.split("](").skip(1) {
            if let Some(end) = part.find(')') {
                out.push(part[..end].to_string());
            }
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut docs = vec![PathBuf::from("README.md"), PathBuf::from("CONTRIBUTING.md")];
    let mut in_docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    in_docs.sort();
    docs.extend(in_docs);
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = read(&doc.to_string_lossy());
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match link.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            let full = root().join(&target);
            if !full.exists() {
                broken.push(format!("{}: `{link}`: no such file", doc.display()));
                continue;
            }
            if let Some(a) = anchor
                && !anchors(&std::fs::read_to_string(&full).unwrap_or_default()).contains(a)
            {
                broken.push(format!("{}: `{link}`: no heading `#{a}` in it", doc.display()));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} relative links found: is the link reader right?"
    );
    assert!(broken.is_empty(), "broken links:\n  {}", broken.join("\n  "));
}

/// docs/traces.md's table of events is made from the one description of the events
/// (`src/trace/event.rs`): a field added there and not here fails, naming the regeneration.
/// `PACESIM_BLESS=1` rewrites it.
#[test]
fn the_event_table_is_made_from_the_event_descriptions() {
    const BEGIN: &str = "<!-- made from src/trace/event.rs (docs::the_event_table_is_made_from_the_event_descriptions; PACESIM_BLESS=1 remakes it) -->\n";
    const END: &str = "<!-- end of the made table -->\n";
    let path = root().join("docs/traces.md");
    let doc = read("docs/traces.md");
    let a = doc.find(BEGIN).expect("docs/traces.md: the made table's first marker") + BEGIN.len();
    let b = a + doc[a..]
        .find(END)
        .expect("docs/traces.md: the made table's last marker");
    let made = pacesim::trace::event::markdown_table();
    if doc[a..b] != made {
        if std::env::var_os("PACESIM_BLESS").is_some() {
            std::fs::write(&path, format!("{}{made}{}", &doc[..a], &doc[b..])).unwrap();
            return;
        }
        panic!(
            "docs/traces.md's table of events differs from src/trace/event.rs's events; remake it with \
             PACESIM_BLESS=1 cargo test --profile fast-test --test suite -- docs::the_event_table\n\
             made:\n{made}\nin the docs:\n{}",
            &doc[a..b]
        );
    }
}
