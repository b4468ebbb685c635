//! Reports (issue 6): regenerating a report gives byte-identical files; the table's numbers are
//! the `--json` numbers and the trace's; the confidence interval is the hand-computed one.

use pacesim::report::{self, table};
use pacesim::run::compare::{self, Derived, Options, Row};
use pacesim::scenario::Scenario;
use pacesim::summary;
use pacesim::timeline::Timeline;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn sims(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sims").join(name)
}

fn load(name: &str) -> Scenario {
    Scenario::load(&sims(name)).unwrap()
}

/// A kill scenario (store round trips, a crash, a stall), its text shortened to 15 s to keep
/// the test quick.
fn kill_text() -> String {
    let src = std::fs::read_to_string(sims("kill-mid-reservation.toml")).unwrap();
    assert!(
        src.contains("\nduration = \"30s\""),
        "the kill scenario changed; update this test"
    );
    src.replacen("\nduration = \"30s\"", "\nduration = \"15s\"", 1)
}

fn kill_scenario() -> Scenario {
    Scenario::parse("kill-mid-reservation.toml", &kill_text()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every file under `dir`, relative path -> bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn a_report_regenerates_byte_identical() {
    let scenarios = vec![load("four-limiters.toml"), kill_scenario()];
    let opts = Options {
        seeds: 3,
        series: true,
        progress: false,
    };
    let mut dirs = Vec::new();
    for k in 0..2 {
        let dir = scratch(&format!("twice{k}"));
        let all = compare::run_all(&scenarios, opts).unwrap();
        report::write(&dir, &all, "pacesim simulate (test)").unwrap();
        dirs.push(dir);
    }
    let (a, b) = (files(&dirs[0]), files(&dirs[1]));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, bytes) in &a {
        assert!(bytes == &b[name], "{name} differs between two regenerations");
    }
    // what a report must hold
    for want in [
        "index.md",
        "four-limiters/rate.svg",
        "four-limiters/rate.png",
        "four-limiters/processes.svg",
        "four-limiters/processes.png",
        "four-limiters/seeds.svg",
        "four-limiters/seeds.png",
        "four-limiters/summary.json",
        "kill-mid-reservation/latency.svg",
        "kill-mid-reservation/latency.png",
    ] {
        assert!(
            a.contains_key(want),
            "missing {want}; have {:?}",
            a.keys().collect::<Vec<_>>()
        );
    }
    let index = String::from_utf8(a["index.md"].clone()).unwrap();
    assert!(index.contains("## Verdict matrix"));
    assert!(index.contains("(four-limiters/rate.svg)"));
    assert!(
        index.contains("local delivered 216.7/s against a 50/s ceiling (4.33x)"),
        "{index}"
    );
    let svg = String::from_utf8(a["four-limiters/rate.svg"].clone()).unwrap();
    assert!(svg.contains("ceiling 50/s") && svg.contains("time (s)"));
    for d in dirs {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn table_numbers_are_the_json_and_the_trace_numbers() {
    let sc = kill_scenario();
    let file = scratch("table");
    let scenario_file = file.join("kill.toml");
    std::fs::write(&scenario_file, kill_text()).unwrap();

    // 1. The numbers a report computes, and the trace it streamed from.
    let sr = compare::run_all(
        std::slice::from_ref(&sc),
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap()
    .remove(0);
    assert!(sr.has_kills(), "the kill scenario kills");
    let cells = table::comparison(&sr);

    // 2. Each backend's trace, summarised again from the file, gives the same cells.
    for (i, b) in sc.compared_backends().iter().enumerate() {
        let v = sc.with_backend(b).unwrap();
        let path = file.join(format!("{b}.jsonl"));
        let f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let streamed = pacesim::registry::simulate(&v, Some(Box::new(f)), None).unwrap();
        let from_file = summary::from_trace(
            &path.display().to_string(),
            std::io::BufReader::new(std::fs::File::open(&path).unwrap()),
        )
        .unwrap();
        assert_eq!(streamed, from_file, "{b}: trace file summary");
        let mut tl = Timeline::new();
        pacesim::trace::read(
            "trace",
            std::io::BufReader::new(std::fs::File::open(&path).unwrap()),
            &mut tl,
        )
        .unwrap();
        let row = Row {
            derived: Derived::of(&from_file, &tl),
            summary: from_file,
        };
        assert_eq!(row, sr.base()[i].row, "{b}: report row vs trace");
        let keys: Vec<&str> = table::COLUMNS.iter().map(|c| c.0).collect();
        let expect: Vec<String> = keys.iter().map(|k| table::cell(&row, k)).collect();
        // the report drops no column but `stall`, which shows here because there are kills
        assert_eq!(cells.rows[i], expect, "{b}: table cells");
        // the latency plot's quantiles are the summary's
        let h = tl.latency();
        if !h.is_empty() {
            assert_eq!(h.value_at_quantile(0.99) as f64 / 1e6, row.summary.reservation.p99_ms);
        }
    }

    // 3. `pacesim simulate --json` prints the same rows; `pacesim run --json` the same summaries.
    let exe = env!("CARGO_BIN_EXE_pacesim");
    let out = Command::new(exe)
        .args(["simulate", "--json"])
        .arg(&scenario_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), sr.runs.len());
    for (line, run) in lines.iter().zip(&sr.runs) {
        // the very same text the report's rows serialise to, plus, last, the reproducer of a
        // failing run
        let (row_text, reproduce) = match line.rfind(",\"reproduce\":") {
            Some(i) => (format!("{}}}", &line[..i]), Some(&line[i..])),
            None => (line.to_string(), None),
        };
        assert_eq!(row_text, serde_json::to_string(&run.row).unwrap());
        assert_eq!(reproduce.is_some(), !run.row.summary.all_pass(), "{line}");
        let one = Command::new(exe)
            .args(["run", "--json", "--backend", &run.backend])
            .arg(&scenario_file)
            .output()
            .unwrap();
        // both parsed by the same parser from the same digits
        let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
        let mut flat: serde_json::Value = serde_json::from_str(line).unwrap();
        flat.as_object_mut().unwrap().remove("derived");
        assert_eq!(one, flat, "{}: run --json vs simulate --json", run.backend);
    }
    // 4. The printed table is the same cells.
    let text = Command::new(exe).arg("simulate").arg(&scenario_file).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains(&cells.text()), "{text}\n---\n{}", cells.text());
    std::fs::remove_dir_all(file).unwrap();
}

#[test]
fn confidence_interval_by_hand() {
    // Achieved rates 48, 50, 52, 50 over four seeds: mean 50, s^2 = (4 + 0 + 4 + 0) / 3 = 8/3,
    // s = 1.6329932, s / sqrt(4) = 0.8164966; t(0.975; 3) = 3.1824463 (tables), so the
    // half-width is 3.1824463 * 0.8164966 = 2.5984565 and the interval [47.4015435, 52.5984565].
    let ci = pacesim::stats::mean_ci(&[48.0, 50.0, 52.0, 50.0], 0.95).unwrap();
    assert_eq!(ci.n, 4);
    assert!((ci.mean - 50.0).abs() < 1e-12);
    assert!((ci.std_dev.unwrap() - 1.632_993_2).abs() < 1e-6);
    assert!((ci.half_width.unwrap() - 2.598_456_5).abs() < 1e-6, "{ci:?}");
    assert!((ci.lo.unwrap() - 47.401_543_5).abs() < 1e-6);
    assert!((ci.hi.unwrap() - 52.598_456_5).abs() < 1e-6);
}

/// What the reader of a platform run sees: each platform's limit, labelled; no fleet-wide
/// ceiling (the figures' data: `src/plot/figures_tests.rs`).
#[test]
fn platform_plots_label_each_platforms_limit() {
    let sc = load("platforms.toml");
    let dir = scratch("platforms");
    let all = compare::run_all(
        &[sc],
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    for plot in ["rate", "processes"] {
        let svg = std::fs::read_to_string(dir.join(format!("platforms/{plot}.svg"))).unwrap();
        for want in ["patreon limit 2.5/s", "deviantart limit 10/s (uncapped)"] {
            assert!(svg.contains(want), "{plot}.svg lacks `{want}`");
        }
        assert!(
            !svg.contains("ceiling 2/s"),
            "{plot}.svg draws the fleet against pacer.rate"
        );
    }
    let rate = std::fs::read_to_string(dir.join("platforms/rate.svg")).unwrap();
    assert!(rate.contains("serialised: one walk at a time") && rate.contains("uncapped: walks not serialised"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `jobs.svg` / `jobs.png` are written for a scenario with download jobs, and only for one.
#[test]
fn the_jobs_figure_is_drawn_for_job_scenarios_only() {
    let dir = scratch("jobs");
    let all = compare::run_all(
        &[load("stranded-old-limits.toml"), load("four-limiters.toml")],
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    let written = report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    let f = files(&dir);
    for want in ["stranded-old-limits/jobs.svg", "stranded-old-limits/jobs.png"] {
        assert!(f.contains_key(want), "missing {want}");
    }
    assert!(!f.keys().any(|k| k.starts_with("four-limiters/jobs")), "{:?}", f.keys());
    assert!(written[0].plots.iter().any(|p| p.0 == "jobs"));
    assert!(!written[1].plots.iter().any(|p| p.0 == "jobs"));
    let index = String::from_utf8(f["index.md"].clone()).unwrap();
    assert!(index.contains("(stranded-old-limits/jobs.svg)"));
    let svg = String::from_utf8(f["stranded-old-limits/jobs.svg"].clone()).unwrap();
    for want in [
        "source 0",
        "time (s)",
        "stranded by the recovery",
        "5 stranded",
        "5 strands in a row",
    ] {
        assert!(svg.contains(want), "jobs.svg lacks `{want}`");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 35 item 10: `index.md` opens with the reviewer's section: per record, the claims
/// pacesim refutes (first) and confirms, each with its note, figure, plot and the command that
/// reproduces it; before the verdict matrix. A scenario without a `finding` is not listed.
#[test]
fn the_index_opens_with_what_a_review_must_be_told() {
    let dir = scratch("review");
    let scenarios = vec![
        load("lock-broker-hiccup-acquire.toml"),
        load("lock-ttl-past-valve.toml"),
        load("backoff-per-process.toml"),
        load("lock-requeue-lost.toml"),
    ];
    let all = compare::run_all(
        &scenarios,
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    let index = std::fs::read_to_string(dir.join("index.md")).unwrap();
    let review = index
        .find("## For a design review: what pacesim confirms and refutes")
        .expect("the review section");
    let matrix = index.find("## Verdict matrix").unwrap();
    assert!(review < matrix, "the review comes first");
    let section = &index[review..matrix];
    let pace = section.find("### global-pace-row").unwrap();
    let lock = section.find("### platform-lock-and-backfill").unwrap();
    assert!(pace < lock, "records in order");
    // within a record, what it refutes before what it confirms
    let refuted = section
        .find("**refutes** (platform-lock-and-backfill, the lock): [lock-ttl-past-valve]")
        .unwrap();
    let confirmed = section
        .find("confirms (platform-lock-and-backfill, the lock): [lock-broker-hiccup-acquire]")
        .unwrap();
    assert!(lock < refuted && refuted < confirmed, "{section}");
    for want in [
        "Issue 35 finding 1",
        "burst needed 301",
        "Plot: [`lock-ttl-past-valve/rate.svg`](lock-ttl-past-valve/rate.svg)",
        "Reproduce: `pacesim run ",
        "lock-ttl-past-valve.toml --seed 1 --backend redis_lock`",
        "**refutes** (global-pace-row, three properties): [backoff-per-process]",
    ] {
        assert!(section.contains(want), "lacks `{want}`:\n{section}");
    }
    assert!(!section.contains("lock-requeue-lost"), "no finding, not listed");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 52 item 10: the index never reads "all pass" or "every check passes" for a run with a
/// check not judged. `eight-reservers` (seed 47) offers less load than the rate: `liveness`
/// is not judged for every backend it compares, and none fails; the scenario's line says which
/// checks were not judged, and each run's reading says so instead of "every check passes".
#[test]
fn the_index_says_not_judged_never_all_pass() {
    let dir = scratch("unjudged");
    let all = compare::run_all(
        &[load("eight-reservers.toml")],
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    for r in &all[0].runs {
        let s = &r.row.summary;
        assert!(
            s.all_pass() && s.not_judged() == ["liveness"],
            "{}: {:?}",
            r.backend,
            s.checks
        );
    }
    report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    let index = std::fs::read_to_string(dir.join("index.md")).unwrap();
    let line = index
        .lines()
        .find(|l| l.starts_with("- [eight-reservers]"))
        .unwrap_or_else(|| panic!("{index}"));
    assert!(!line.contains("all pass"), "{line}");
    assert!(
        line.contains("not judged: row (liveness), shared_cache (liveness), redis_gcra (liveness)"),
        "{line}"
    );
    assert!(!index.contains("every check passes"), "{index}");
    assert!(index.contains("no check fails, but liveness not judged"), "{index}");
    std::fs::remove_dir_all(dir).unwrap();
}
