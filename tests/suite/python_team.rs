//! The Python team's template (`examples/python-team/`, issue 36): its GitHub Actions and
//! GitLab CI files are read, and their commands run here against the local PostgreSQL and Redis
//! with this build's `pacesim` first on the PATH (the `pip install` lines aside: the servers
//! and the wheel are what those install), in a copy of the template; the JUnit files they write
//! must say every case passed, and the artifacts they upload must exist. So the template
//! cannot rot. Without the servers or psycopg: "LIVE TESTS NOT RUN", and a pass.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn template() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/python-team")
}

fn yaml(file: &str) -> Value {
    let text = std::fs::read_to_string(template().join(file)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: not YAML: {e}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

fn env_of(v: &Value) -> Vec<(String, String)> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string)))
                .collect()
        })
        .unwrap_or_default()
}

/// The servers and psycopg, or why not.
fn ready() -> Result<(), String> {
    let py = Command::new("python3").args(["-c", "import psycopg, pytest"]).output();
    if !py.is_ok_and(|o| o.status.success()) {
        return Err("python3 has no psycopg or pytest (pip install 'psycopg[binary]' pytest)".into());
    }
    let pg = pacesim::live::settings::PgSettings::from_env();
    if std::net::TcpStream::connect((pg.host.as_str(), pg.port)).is_err() && !pg.host.starts_with('/') {
        return Err(format!("no PostgreSQL at {}:{}", pg.host, pg.port));
    }
    let redis = pacesim::live::settings::RedisSettings::from_env();
    if redis.check(std::time::Duration::from_secs(2)).is_err() {
        return Err("no Redis".into());
    }
    Ok(())
}

/// A directory with `pacesim` (this build) and `python` (python3) for the PATH.
fn bin_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pacesim-team-bin-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_pacesim"), d.join("pacesim")).unwrap();
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let py = String::from_utf8(out.stdout).unwrap();
    std::os::unix::fs::symlink(py.trim(), d.join("python")).unwrap();
    d
}

/// Run `lines` (each with bash, -e) in a fresh copy of the template, with `env` (the CI file's,
/// with the connection's host and port the local servers'); the copy's directory.
fn run_lines(tag: &str, lines: &[String], env: &[(String, String)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pacesim-team-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cp = Command::new("cp")
        .args(["-r", template().to_str().unwrap(), dir.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(cp.success());
    let bin = bin_dir(tag);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let local_pg = pacesim::live::settings::PgSettings::from_env();
    let local_redis = pacesim::live::settings::RedisSettings::from_env();
    for line in lines {
        let mut cmd = Command::new("bash");
        cmd.args(["-euo", "pipefail", "-c", line]).current_dir(&dir);
        cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        // the local servers stand in for the service containers
        cmd.env("PGHOST", &local_pg.host)
            .env("PGPORT", local_pg.port.to_string())
            .env("REDIS_URL", &local_redis.url)
            .env("PATH", &path)
            // the pytest plugin from the source tree (the wheel's install puts it on the path)
            .env("PYTHONPATH", plugin_dir())
            .env("PYTEST_PLUGINS", "pytest_pacesim")
            .env("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1");
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{tag}: `{line}` failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&bin);
    dir
}

fn plugin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/pytest-pacesim")
}

/// Every JUnit file in `files` parses and has cases, none failing.
fn junit_passes(dir: &Path, files: &[&str]) {
    for f in files {
        let xml = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "testsuites");
        // pacesim's counts on the root; pytest's (--junitxml) on its one testsuite
        let counted = if root.attribute("tests").is_some() {
            root
        } else {
            root.children()
                .find(|n| n.has_tag_name("testsuite"))
                .expect("a testsuite")
        };
        assert!(
            counted.attribute("tests").unwrap().parse::<u32>().unwrap() > 0,
            "{f}: {xml}"
        );
        assert_eq!(counted.attribute("failures"), Some("0"), "{f}: {xml}");
        assert_eq!(counted.attribute("errors").unwrap_or("0"), "0", "{f}: {xml}");
    }
}

/// The commands that install things: the wheel (pacesim) and the worker's libraries.
fn is_install(line: &str) -> bool {
    line.trim_start().starts_with("pip install")
}

#[test]
fn the_github_workflow_runs_here() {
    let w = yaml(".github/workflows/pacesim.yml");
    let jobs = w["jobs"].as_object().expect("jobs");
    assert_eq!(jobs.len(), 1);
    let job = jobs.values().next().unwrap();
    let services = job["services"].as_object().expect("services");
    assert!(services["postgres"]["image"].as_str().unwrap().starts_with("postgres:"));
    assert!(services["redis"]["image"].as_str().unwrap().starts_with("redis:"));
    let env = env_of(&job["env"]);
    let password = env.iter().find(|(k, _)| k == "PGPASSWORD").map(|p| p.1.clone());
    assert_eq!(
        services["postgres"]["env"]["POSTGRES_PASSWORD"].as_str(),
        password.as_deref(),
        "the service's password is pacesim's"
    );
    let steps = job["steps"].as_array().expect("steps");
    let mut lines = Vec::new();
    let mut installs = Vec::new();
    let mut uploads = Vec::new();
    for s in steps {
        if let Some(run) = s["run"].as_str() {
            for l in run.lines().filter(|l| !l.trim().is_empty()) {
                if is_install(l) {
                    installs.push(l.to_string());
                } else {
                    lines.push(l.to_string());
                }
            }
        }
        if s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        {
            assert_eq!(
                s["if"].as_str(),
                Some("always()"),
                "the reports go up when a check fails too"
            );
            uploads.push(s["with"]["path"].as_str().expect("an upload's path").to_string());
        }
    }
    assert!(
        installs.iter().any(|l| l.contains("pacesim")),
        "installs pacesim: {installs:?}"
    );
    assert!(
        installs.iter().any(|l| l.contains("pytest-pacesim")),
        "installs the pytest plugin: {installs:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("python -m pytest test_pacer.py --junitxml")),
        "runs the template's pytest tests: {lines:?}"
    );
    if let Err(why) = ready() {
        crate::common::live_not_run("python_team", &why);
        return;
    }
    let dir = run_lines("github", &lines, &env);
    junit_passes(&dir, &["reports/pytest.xml", "reports/live.xml", "reports/conform.xml"]);
    assert_eq!(uploads, ["reports/"]);
    assert!(dir.join("reports/simulated/index.md").exists(), "the plots' report");
    assert!(dir.join("reports/live.jsonl").exists(), "the live trace");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_gitlab_job_runs_here() {
    let ci = yaml(".gitlab-ci.yml");
    let jobs = ci.as_object().expect("jobs");
    assert_eq!(jobs.len(), 1);
    let job = jobs.values().next().unwrap();
    let services: Vec<String> = job["services"]
        .as_array()
        .expect("services")
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert!(services.iter().any(|s| s.starts_with("postgres:")) && services.iter().any(|s| s.starts_with("redis:")));
    let env = env_of(&job["variables"]);
    let (installs, mut lines): (Vec<String>, Vec<String>) =
        strings(&job["script"]).into_iter().partition(|l| is_install(l));
    assert!(
        installs.iter().any(|l| l.contains("pacesim")),
        "installs pacesim: {installs:?}"
    );
    lines.extend(strings(&job["after_script"]));
    let artifacts = &job["artifacts"];
    assert_eq!(artifacts["when"].as_str(), Some("always"));
    assert_eq!(strings(&artifacts["paths"]), ["reports/"]);
    let junit = strings(&artifacts["reports"]["junit"]);
    if let Err(why) = ready() {
        crate::common::live_not_run("python_team", &why);
        return;
    }
    let dir = run_lines("gitlab", &lines, &env);
    junit_passes(&dir, &junit.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(dir.join("reports/simulated/index.md").exists(), "the plots' report");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 51: the template's pytest test through the plugin (`pytest-pacesim`'s `pacesim`
/// fixture) fails for a defective worker, the ceiling's witness and the reproduce command in
/// pytest's output. (The correct worker's pass is `the_github_workflow_runs_here`.)
#[test]
fn the_pytest_plugin_fails_a_defective_worker_with_the_witness() {
    if let Err(why) = ready() {
        crate::common::live_not_run("python_team", &why);
        return;
    }
    let dir = run_lines("pytest-defective", &["mkdir -p reports".to_string()], &[]);
    let bin = bin_dir("pytest-defective");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let pg = pacesim::live::settings::PgSettings::from_env();
    let out = Command::new("python3")
        .args([
            "-m",
            "pytest",
            "test_pacer.py",
            "-k",
            "holds_live",
            "-p",
            "no:cacheprovider",
        ])
        .current_dir(&dir)
        .env("PATH", &path)
        .env("PGHOST", &pg.host)
        .env("PGPORT", pg.port.to_string())
        .env("PYTHONPATH", plugin_dir())
        .env("PYTEST_PLUGINS", "pytest_pacesim")
        .env("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        .env("PACESIM_WORKER", "python defective_worker.py")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&bin);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "pytest fails:\n{text}");
    assert!(text.contains("ceiling FAILED: "), "the witness:\n{text}");
    assert!(
        text.contains("reproduce: pacesim live pacesim.toml --worker-cmd 'python defective_worker.py'"),
        "the reproduce command:\n{text}"
    );
}

/// Issue 51 item 4: what a new user reads is true of a clone.
#[test]
fn the_install_docs_exist_and_the_small_items_are_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |f: &str| std::fs::read_to_string(root.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert!(read("pyproject.toml").contains("docs/install.md") && root.join("docs/install.md").exists());
    assert!(
        !read("README.md").contains("../shared/seeds"),
        "a clone has no ../shared/seeds/"
    );
    let commands = read("docs/commands.md");
    for c in ["| `pacesim live FILE", "| `pacesim conform FILE"] {
        let row = commands.lines().find(|l| l.starts_with(c)).expect(c);
        assert!(row.contains("[--junit FILE]"), "{row}");
    }
    let live = read("docs/live.md");
    assert!(live.contains("| `PGDATABASE` | `test`"), "PGDATABASE's default");
    assert!(
        live.contains("declares `backend = \"local\"`"),
        "the backend of a worker with no store"
    );
    assert!(
        live.contains("`{\"ev\":\"ready\"}`") && live.contains("ready_timeout"),
        "readiness"
    );
}
