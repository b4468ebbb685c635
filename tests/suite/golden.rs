//! Every scenario's recorded behaviour: for each `sims/*.toml` and each backend it compares,
//! the `pacesim run --json` summary (trace hash included) at the scenario's seed and at seed
//! + 1, byte for byte, against `tests/golden/runs.jsonl`.
//!
//! A behaviour change is deliberate: when a line moves, the commit says why. To record the
//! new behaviour, run `PACESIM_BLESS=1 cargo test --profile fast-test --test suite -- golden` and commit the file.

use std::path::Path;

fn actual() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("sims"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::new();
    for f in files {
        let Ok(sc) = pacesim::registry::load(&f) else {
            continue; // not a scenario (the expected matrix)
        };
        for b in sc.compared_backends() {
            for seed in [sc.seed, sc.seed + 1] {
                let mut v = pacesim::registry::with_backend(&sc, &b).unwrap();
                v.seed = seed;
                let s = pacesim::registry::simulate(&v, None, None).unwrap();
                out.push_str(&serde_json::to_string(&s).unwrap());
                out.push('\n');
            }
        }
    }
    out
}

#[test]
fn every_scenario_summary_and_trace_hash_is_as_recorded() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/runs.jsonl");
    let got = actual();
    if std::env::var_os("PACESIM_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).expect("tests/golden/runs.jsonl (PACESIM_BLESS=1 writes it)");
    let key = |line: &str| {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        format!("{} / {} / seed {}", v["scenario"], v["backend"], v["seed"])
    };
    let index = |text: &str| -> std::collections::BTreeMap<String, String> {
        text.lines().map(|l| (key(l), l.to_string())).collect()
    };
    let (g, w) = (index(&got), index(&want));
    let mut diffs = Vec::new();
    for (k, b) in &w {
        match g.get(k) {
            None => diffs.push(format!("{k}: recorded, no longer run")),
            Some(a) if a != b => diffs.push(format!("{k}:\n  want {b}\n  got  {a}")),
            _ => {}
        }
    }
    for k in g.keys().filter(|k| !w.contains_key(*k)) {
        diffs.push(format!("{k}: run, not recorded"));
    }
    assert!(
        diffs.is_empty(),
        "{} of {} recorded runs changed or are new; say why in the commit, then \
         PACESIM_BLESS=1 cargo test --release --test golden\n{}",
        diffs.len(),
        w.len(),
        diffs.join("\n")
    );
}
