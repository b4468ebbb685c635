//! `pacesim backends`, the backend tables of docs/backends.md and the registry agree: the same
//! backends in the same order, the same defective ones, the same options.

use pacesim::registry::REGISTRY;

/// `(name, defective)` rows, and `(name, options)` rows.
type Tables = (Vec<(String, bool)>, Vec<(String, Vec<String>)>);

fn docs_tables() -> Tables {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/backends.md")).unwrap();
    let section = doc.split("\n## The backends").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    let mut semantics = Vec::new();
    let mut options = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let first = cells[1];
        let name = first.split('`').nth(1).unwrap().to_string();
        if cells.len() == 4 {
            let opts = cells[2]
                .split(',')
                .map(|o| o.trim().trim_matches('`').to_string())
                .filter(|o| !o.is_empty() && o != "none")
                .collect();
            options.push((name, opts));
        } else {
            semantics.push((name, first.contains("(defective)")));
        }
    }
    (semantics, options)
}

#[test]
fn docs_tables_match_the_registry() {
    let (semantics, options) = docs_tables();
    let want: Vec<(String, bool)> = REGISTRY.iter().map(|b| (b.name.to_string(), b.defective)).collect();
    assert_eq!(semantics, want, "docs/backends.md's semantics table");
    let want: Vec<(String, Vec<String>)> = REGISTRY
        .iter()
        .map(|b| {
            (
                b.name.to_string(),
                b.option_names().iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(options, want, "docs/backends.md's options table");
}

#[test]
fn pacesim_backends_lists_the_registry() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pacesim"))
        .arg("backends")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<(String, bool)> = text
        .lines()
        .map(|l| {
            let name = l.split_whitespace().next().unwrap().to_string();
            (name, l.ends_with("(defective)"))
        })
        .collect();
    let want: Vec<(String, bool)> = REGISTRY.iter().map(|b| (b.name.to_string(), b.defective)).collect();
    assert_eq!(listed, want);
    for b in REGISTRY {
        assert!(text.contains(b.summary), "{} summary", b.name);
    }
}
