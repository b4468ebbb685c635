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
    pacesim::registry::load(&sims(name)).unwrap()
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
    pacesim::registry::parse("kill-mid-reservation.toml", &kill_text()).unwrap()
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
        let v = pacesim::registry::with_backend(&sc, b).unwrap();
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
    let failing = index.find("## Designs that fail").expect("the failing designs first");
    let review = index
        .find("## The records' claims: what pacesim confirms and refutes")
        .expect("the review section");
    let matrix = index.find("## Verdict matrix").unwrap();
    assert!(
        failing < review && review < matrix,
        "the failing designs, then the claims, then the matrix"
    );
    // every failing design, with its property, witness, plot and reproduce command
    let first = &index[failing..review];
    for r in all.iter().flat_map(|sr| sr.base()) {
        if r.row.summary.all_pass() {
            continue;
        }
        let sc = &all
            .iter()
            .find(|sr| sr.runs.iter().any(|x| std::ptr::eq(x, r)))
            .unwrap()
            .scenario;
        let line = first
            .lines()
            .find(|l| {
                l.contains(&format!("in [{}](#{})", sc.name, sc.name))
                    && l.contains(&format!("--backend {}`", r.backend))
            })
            .unwrap_or_else(|| panic!("{} {} not listed first:\n{first}", sc.name, r.backend));
        let fail = r.row.summary.checks.iter().find(|c| c.1.failed()).unwrap();
        for want in [
            format!("Witness ({}): {}", fail.0, fail.1.detail),
            format!("Plot: [`{0}/rate.svg`]({0}/rate.svg)", sc.name),
            "Reproduce: `pacesim run ".to_string(),
        ] {
            assert!(line.contains(&want), "lacks `{want}`: {line}");
        }
    }
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

/// Issue 53 item 1: a variant is named by what differs from its backend's defaults, the same
/// way in the comparison table, the matrix, the plots' legends and `summary.json`'s `label`.
#[test]
fn variants_are_named_by_what_differs() {
    use pacesim::registry::label;
    let clock = load("process-clock.toml");
    assert_eq!(label(&clock, "row"), "row (clock=process_monotonic, stale_after=10s)");
    let open = load("outage-fail-open.toml");
    assert_eq!(label(&open, "row"), "row (fallback=fail_open)");
    assert_eq!(label(&open, "shared_cache"), "shared_cache (fallback=fail_open)");
    // an option written with its default value is no difference; one the backend cannot be
    // shown to default (not in its stated detail) is
    let divided = load("outage-divided-record-cap.toml");
    assert_eq!(label(&divided, "row"), "row (cap=2)");
    let four = load("four-limiters.toml");
    for b in ["row", "shared_cache", "redis_gcra", "local_divided", "local"] {
        assert_eq!(label(&four, b), b, "no option differs");
    }

    let dir = scratch("labels");
    let all = compare::run_all(
        &[clock, open],
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    let index = std::fs::read_to_string(dir.join("index.md")).unwrap();
    for want in [
        // matrix row, comparison table row, the failing designs
        "| [process-clock](#process-clock) | row (clock=process_monotonic, stale_after=10s) |",
        "| shared_cache (fallback=fail_open) |",
        "- **shared_cache (fallback=fail_open)** in [outage-fail-open](#outage-fail-open)",
    ] {
        assert!(index.contains(want), "lacks `{want}`:\n{index}");
    }
    // no table row names a variant by its base name alone
    for l in index.lines().filter(|l| l.starts_with("| ")) {
        for bare in ["| row |", "| shared_cache |", "| redis_gcra |"] {
            assert!(!l.contains(bare), "a variant by its base name: {l}");
        }
    }
    let legend = svg_text(&std::fs::read_to_string(dir.join("outage-fail-open/rate.svg")).unwrap());
    assert!(
        legend.contains("shared_cache (fallback=fail_open) (achieved"),
        "{legend}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outage-fail-open/summary.json")).unwrap()).unwrap();
    assert_eq!(json["runs"][1]["backend"], "shared_cache", "field names stay");
    assert_eq!(json["runs"][1]["label"], "shared_cache (fallback=fail_open)");
    assert_eq!(json["labels"][0], "row (fallback=fail_open)");
    // the matrix names its rows the same way
    let m = pacesim::matrix::run(&[load("process-clock.toml")], 1).unwrap();
    let t = pacesim::matrix::table(&m);
    assert!(
        t.contains("process-clock/row (clock=process_monotonic, stale_after=10s)"),
        "{t}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The text of an SVG, each text element's words joined by single spaces (the legend wraps
/// long entries over several elements).
fn svg_text(svg: &str) -> String {
    let mut words = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text") {
        let after = &rest[i..];
        let open_end = after.find('>').unwrap();
        let close = after.find("</text>").unwrap();
        words.extend(after[open_end + 1..close].split_whitespace().map(str::to_string));
        rest = &after[close..];
    }
    words.join(" ")
}

/// Issue 53 item 2: each curve's legend entry carries its verdicts, and the windows over the
/// ceiling of a run that fails it are marked on the rate plot.
#[test]
fn rate_plots_carry_their_verdicts() {
    let dir = scratch("verdicts");
    let all = compare::run_all(
        &[load("four-limiters.toml")],
        Options {
            seeds: 1,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    let legend = svg_text(&std::fs::read_to_string(dir.join("four-limiters/rate.svg")).unwrap());
    for want in [
        "row (achieved 50/s): PASS",
        "local (achieved 216.7/s): FAIL: ceiling burst 31, slot_ceiling burst 31",
        "local_divided (achieved 54.2/s): FAIL: ceiling burst 4",
        "over the ceiling: where arrivals outran it by more than the burst allowed",
    ] {
        assert!(legend.contains(want), "lacks `{want}`: {legend}");
    }
    // the marks: for the failing runs only
    assert!(
        legend.contains("a bar along the bottom per run failing the ceiling, in its colour: 2)"),
        "{legend}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A headless Chromium on this machine, if any: `PACESIM_CHROMIUM`, else `chromium`,
/// `chromium-browser` or `google-chrome` on `PATH`.
fn browser() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PACESIM_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Under CI (`.ci/run` sets it) a missing browser fails the browser tests.
const BROWSER_REQUIRED: &str = "PACESIM_BROWSER_REQUIRED";

/// The browser, or `None` after a loud `BROWSER TESTS NOT RUN` (a failure under CI).
fn browser_or_skip(test: &str) -> Option<PathBuf> {
    match browser() {
        Some(b) => Some(b),
        None if std::env::var_os(BROWSER_REQUIRED).is_some() => {
            panic!(
                "{test}: {BROWSER_REQUIRED} is set and no chromium was found (PACESIM_CHROMIUM, or chromium on PATH)"
            )
        }
        None => {
            eprintln!(
                "BROWSER TESTS NOT RUN ({test}): no chromium on PATH (set PACESIM_CHROMIUM, or install \
                 Debian's chromium); the HTML report was not opened in a browser"
            );
            None
        }
    }
}

/// Run the headless browser on `page` with `extra` flags and a fresh profile: (stdout, stderr).
fn headless(browser: &Path, page: &Path, profile: &Path, extra: &[String]) -> (String, String) {
    let _ = std::fs::remove_dir_all(profile);
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(format!("file://{}", page.display()));
    let out = cmd.output().unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    let _ = std::fs::remove_dir_all(profile);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The value of `data-<name>` on the dumped `<html>` element.
fn html_data<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let start = dom.find("<html")?;
    let head = &dom[start..start + dom[start..].find('>')?];
    let key = format!("data-{name}=\"");
    let i = head.find(&key)? + key.len();
    Some(&head[i..i + head[i..].find('"')?])
}

/// Open `dir/index.html` headless and say everything wrong with it: a script error or any
/// console message, a plot of `index.md` missing on the page, a link that does not resolve (a
/// `#` link to no element, a file link to no file), the one-page sections missing, or a
/// failing design of `index.md`'s first section missing from the page's.
fn page_problems(browser: &Path, dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let page = dir.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let md = std::fs::read_to_string(dir.join("index.md")).unwrap();
    let (dom, log) = headless(browser, &page, &dir.join("profile"), &["--dump-dom".to_string()]);
    if html_data(&dom, "ready") != Some("1") {
        bad.push(format!(
            "the page's script did not finish: {}",
            &dom[..dom.len().min(300)]
        ));
    }
    match html_data(&dom, "errors") {
        Some("") => {}
        e => bad.push(format!("script errors: {e:?}")),
    }
    for l in log.lines().filter(|l| l.contains(":CONSOLE")) {
        bad.push(format!("console: {l}"));
    }
    let plots = md.lines().filter(|l| l.starts_with("![")).count();
    if html_data(&dom, "plots") != Some(plots.to_string().as_str()) {
        bad.push(format!(
            "{plots} plots in index.md, on the page: {:?}",
            html_data(&dom, "plots")
        ));
    }
    match html_data(&dom, "broken-links") {
        Some("") => {}
        l => bad.push(format!("links to nothing on the page: {l:?}")),
    }
    // every other link is to a file beside the page
    for part in html.split("href=\"").skip(1) {
        let href = &part[..part.find('"').unwrap()];
        if href.starts_with('#') {
            continue;
        }
        if href.contains("://") || href.starts_with("//") {
            bad.push(format!("a link off the page's folder: {href}"));
        } else if !dir.join(href).is_file() {
            bad.push(format!("a link to a missing file: {href}"));
        }
    }
    // nothing loaded from anywhere: no src, no stylesheet link
    for what in [" src=\"", "<link ", "<iframe", "@import"] {
        if html.contains(what) {
            bad.push(format!("the page loads something (`{what}`)"));
        }
    }
    for id in [
        "designs-that-fail",
        "the-records-claims-what-pacesim-confirms-and-refutes",
        "verdict-matrix",
    ] {
        if !dom.contains(&format!("id=\"{id}\"")) {
            bad.push(format!("no one-page section `{id}`"));
        }
    }
    // the first section lists every failing design index.md lists
    let first = |text: &str, open: &str, close: &str| -> String {
        let a = text.find(open).map_or(text.len(), |i| i);
        let b = text[a..].find(close).map_or(text.len(), |i| a + i);
        text[a..b].to_string()
    };
    let md_first = first(&md, "## Designs that fail", "\n## ");
    let dom_first = first(&dom, "id=\"designs-that-fail\"", "<h2");
    for l in md_first.lines().filter(|l| l.starts_with("- **")) {
        let design = &l[4..l[4..].find("**").unwrap() + 4];
        if !dom_first.contains(&format!("<strong>{design}</strong>")) {
            bad.push(format!("the page's first section lacks {design}"));
        }
    }
    bad
}

/// Issue 53 item 4: the HTML report is one self-contained page that renders in a real headless
/// browser with every plot, every link resolving, no script error and the one-page sections
/// first; a screenshot is kept for looking at (`target/tmp/report-browser/index.png`).
#[test]
fn the_html_report_renders_in_a_headless_browser() {
    let Some(browser) = browser_or_skip("the_html_report_renders_in_a_headless_browser") else {
        return;
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenarios = vec![
        load("four-limiters.toml"),
        load("outage-fail-open.toml"),
        load("backfill-chunk-outlives-valve.toml"),
        load("backoff-per-process-lock-in.toml"),
    ];
    let all = compare::run_all(
        &scenarios,
        Options {
            seeds: 2,
            series: true,
            progress: false,
        },
    )
    .unwrap();
    report::write(&dir, &all, "pacesim simulate (test)").unwrap();
    let bad = page_problems(&browser, &dir);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // the screenshot, of the top of the page (the failing designs first)
    let shot = dir.join("index.png");
    headless(
        &browser,
        &dir.join("index.html"),
        &dir.join("profile"),
        &[
            "--window-size=1280,1800".to_string(),
            format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot {}: {e}", shot.display()));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());

    // and the check fails on what it must catch: a script error, a missing plot, a link to
    // nothing, a missing section
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let first_plot = html.find("<figure class=\"plot").unwrap();
    let plot_end = first_plot + html[first_plot..].find("</figure>").unwrap() + "</figure>".len();
    let broken = [
        (
            "script error",
            html.replacen("<body>", "<body><script>undefined_function();</script>", 1),
        ),
        ("missing plot", format!("{}{}", &html[..first_plot], &html[plot_end..])),
        (
            "broken link",
            html.replacen("<body>", "<body><a href=\"#nowhere\">x</a>", 1),
        ),
        (
            "missing section",
            html.replacen("id=\"designs-that-fail\"", "id=\"something-else\"", 1),
        ),
    ];
    for (what, page) in broken {
        std::fs::write(dir.join("index.html"), page).unwrap();
        assert!(!page_problems(&browser, &dir).is_empty(), "{what} passed the check");
    }
    std::fs::write(dir.join("index.html"), html).unwrap();
}
