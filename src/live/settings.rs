//! Where the live stores are: connection settings from the usual environment, loopback
//! defaults, and a clear one-line error naming a missing server and how to start it.
//!
//! | variable     | default                    |
//! |--------------|----------------------------|
//! | `PGHOST`     | `127.0.0.1`                |
//! | `PGPORT`     | `5432`                     |
//! | `PGUSER`     | the current user, then `postgres` if that role does not exist |
//! | `PGPASSWORD` | none                       |
//! | `PGDATABASE` | `test`                     |
//! | `PGOPTIONS`  | none (e.g. `-c synchronous_commit=off`) |
//! | `REDIS_URL`  | `redis://127.0.0.1:6379/`  |

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// PostgreSQL connection settings (what a worker needs to connect).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PgSettings {
    /// Host (a name or address; a path starting with `/` is a Unix socket directory).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Role.
    pub user: String,
    /// Password, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Database.
    pub dbname: String,
    /// Server options sent at connection start (`PGOPTIONS`), e.g. `-c synchronous_commit=off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
}

impl PgSettings {
    /// From `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, with loopback defaults;
    /// a `PGPORT` that is not a port is an error naming it (never a silent 5432).
    pub fn try_from_env() -> Result<PgSettings, Missing> {
        PgSettings::from_vars(|k| std::env::var(k).ok())
    }

    /// [`try_from_env`](Self::try_from_env) with the default port in place of a bad `PGPORT`:
    /// for tests that only look for a server; commands use `try_from_env`.
    pub fn from_env() -> PgSettings {
        PgSettings::try_from_env().unwrap_or_else(|_| {
            PgSettings::from_vars(|k| if k == "PGPORT" { None } else { std::env::var(k).ok() })
                .expect("no PGPORT, no error")
        })
    }

    /// The settings from variables looked up by `lookup` (the environment, or a test's map).
    pub(crate) fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<PgSettings, Missing> {
        let var = |k: &str| lookup(k).filter(|v| !v.is_empty());
        let port = match var("PGPORT") {
            None => 5432,
            Some(p) => match p.trim().parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(Missing {
                        server: "PostgreSQL",
                        problem: "setting PGPORT is invalid".into(),
                        addr: "PGPORT".into(),
                        detail: format!("`{}` is not a port number from 1 to 65535", one_line(&p)),
                        hint: "set PGPORT to the server's port, or unset it for 5432".into(),
                    });
                }
            },
        };
        Ok(PgSettings {
            host: var("PGHOST").unwrap_or_else(|| "127.0.0.1".into()),
            port,
            user: var("PGUSER")
                .or_else(|| var("USER"))
                .or_else(|| var("LOGNAME"))
                .unwrap_or_else(|| "postgres".into()),
            password: var("PGPASSWORD"),
            dbname: var("PGDATABASE").unwrap_or_else(|| "test".into()),
            options: var("PGOPTIONS"),
        })
    }

    /// True when `PGUSER` was not set, so a missing role may fall back to `postgres`.
    pub(crate) fn user_is_default() -> bool {
        std::env::var("PGUSER").map_or(true, |v| v.is_empty())
    }

    /// The same settings pointed at another address (a fault proxy).
    pub fn via(&self, host: &str, port: u16) -> PgSettings {
        PgSettings {
            host: host.into(),
            port,
            ..self.clone()
        }
    }

    /// A tokio-postgres configuration with a connect timeout.
    pub fn config(&self, connect_timeout: Duration) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(&self.dbname)
            .application_name("pacesim-live")
            .connect_timeout(connect_timeout);
        if let Some(p) = &self.password {
            c.password(p);
        }
        if let Some(o) = &self.options {
            c.options(o);
        }
        c
    }

    /// `host:port` for messages.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Connect, spawning the connection task; the error is a [`Missing`] naming the server.
    pub async fn connect(&self, timeout: Duration) -> Result<tokio_postgres::Client, Missing> {
        let config = self.config(timeout);
        match tokio::time::timeout(timeout, config.connect(tokio_postgres::NoTls)).await {
            Ok(Ok((client, conn))) => {
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok(client)
            }
            Ok(Err(e)) => Err(Missing::postgres(self, &error_chain(&e))),
            Err(_) => Err(Missing::postgres(self, "timed out")),
        }
    }

    /// Connect as [`connect`](Self::connect), falling back to the role `postgres` when the
    /// default role (the current user) does not exist. Returns the settings that worked.
    pub async fn connect_resolving_user(
        mut self,
        timeout: Duration,
    ) -> Result<(PgSettings, tokio_postgres::Client), Missing> {
        match self.connect(timeout).await {
            Ok(c) => Ok((self, c)),
            Err(e) if Self::user_is_default() && self.user != "postgres" && e.detail.contains("does not exist") => {
                self.user = "postgres".into();
                let c = self.connect(timeout).await?;
                Ok((self, c))
            }
            Err(e) => Err(e),
        }
    }
}

/// Redis connection settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedisSettings {
    /// `redis://host:port/db`.
    pub url: String,
}

impl RedisSettings {
    /// From `REDIS_URL`, default `redis://127.0.0.1:6379/`.
    pub fn from_env() -> RedisSettings {
        RedisSettings {
            url: std::env::var("REDIS_URL")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "redis://127.0.0.1:6379/".into()),
        }
    }

    /// The server's `host:port`, when the URL names one.
    pub(crate) fn host_port(&self) -> Option<(String, u16)> {
        let c = redis::Client::open(self.url.as_str()).ok()?;
        match c.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(h, p) => Some((h.clone(), *p)),
            _ => None,
        }
    }

    /// A blocking connection (optionally through a proxy at `via`), with read and write
    /// timeouts.
    pub fn connect(&self, via: Option<(&str, u16)>, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url.as_str())?;
        let client = match via {
            Some((h, p)) => {
                let info = client
                    .get_connection_info()
                    .clone()
                    .set_addr(redis::ConnectionAddr::Tcp(h.into(), p));
                redis::Client::open(info)?
            }
            None => client,
        };
        let con = client.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }

    /// Check that the server answers `PING` (a URL that does not parse, or a refused
    /// password, is named as such).
    pub fn check(&self, timeout: Duration) -> Result<(), Missing> {
        if let Err(e) = redis::Client::open(self.url.as_str()) {
            return Err(Missing {
                server: "Redis",
                problem: "setting REDIS_URL is invalid".into(),
                addr: redact_url(&self.url),
                detail: redact(&e.to_string(), &self.url),
                hint: "set REDIS_URL to redis://[user:password@]host:port/db".into(),
            });
        }
        let r = self
            .connect(None, timeout)
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        r.map(|_| ()).map_err(|e| Missing::redis(self, &e.to_string()))
    }
}

/// A store that could not be reached, and how to start it. Displays as one line.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{server} {problem} at {addr} ({detail}); {hint}")]
pub struct Missing {
    /// `PostgreSQL` or `Redis`.
    pub server: &'static str,
    /// What is wrong: `is not reachable`, `has no database `test``, `refused the login`, ...
    pub problem: String,
    /// Where it was looked for.
    pub addr: String,
    /// The client's error.
    pub detail: String,
    /// How to start it or point pacesim elsewhere.
    pub hint: String,
}

impl Missing {
    fn postgres(s: &PgSettings, detail: &str) -> Missing {
        let version = std::fs::read_dir("/etc/postgresql")
            .ok()
            .and_then(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .max()
            })
            .unwrap_or_else(|| "<version>".into());
        let mut detail = one_line(detail);
        if let Some(p) = &s.password {
            detail = detail.replace(p.as_str(), "***");
        }
        let (problem, hint) = if detail.contains("database") && detail.contains("does not exist") {
            (
                format!("has no database `{}`", s.dbname),
                format!("create it (`createdb {}`) or set PGDATABASE", s.dbname),
            )
        } else if detail.contains("role") && detail.contains("does not exist") {
            (
                format!("has no role `{}`", s.user),
                format!("create it (`createuser {}`) or set PGUSER", s.user),
            )
        } else if detail.contains("password authentication failed") || detail.contains("no password") {
            (
                format!("refused the login of role `{}`", s.user),
                "check PGUSER and PGPASSWORD".into(),
            )
        } else {
            (
                "is not reachable".into(),
                format!(
                    "start it (Debian: `pg_ctlcluster {version} main start`) or set PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE (database `{}`, role `{}`)",
                    s.dbname, s.user
                ),
            )
        };
        Missing {
            server: "PostgreSQL",
            problem,
            addr: s.addr(),
            detail,
            hint,
        }
    }

    fn redis(s: &RedisSettings, detail: &str) -> Missing {
        let detail = redact(&one_line(detail), &s.url);
        let auth = [
            "NOAUTH",
            "WRONGPASS",
            "invalid password",
            "Authentication",
            "AuthenticationFailed",
        ]
        .iter()
        .any(|w| detail.contains(w));
        let (problem, hint) = if auth {
            (
                "refused the password".to_string(),
                "check the user and password in REDIS_URL (redis://user:password@host:port/db)".to_string(),
            )
        } else {
            (
                "is not reachable".to_string(),
                "start it (`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no`) or set REDIS_URL".to_string(),
            )
        };
        Missing {
            server: "Redis",
            problem,
            addr: redact_url(&s.url),
            detail,
            hint,
        }
    }
}

/// Query parameters whose values are secrets (`redis+unix:///x.sock?pass=...`, libpq's
/// `password=`, `sslpassword=`, tokens).
const SECRET_PARAMS: [&str; 8] = [
    "pass",
    "password",
    "passwd",
    "pwd",
    "sslpassword",
    "secret",
    "token",
    "auth",
];

/// The byte ranges of `url`'s secrets: the password of `user:password@`, and each secret query
/// parameter's value. Parsed, not searched for, and on the safe side where a raw password makes
/// the URL ambiguous: the userinfo may end at any `@` whose user part holds no `/`, `?` or `#`
/// (a password may hold `@`, `/`, `?`; each such end is a candidate), and secret parameters are read both from the first
/// `?` and from the first `?` after the last candidate userinfo.
fn url_secret_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let base = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[base..];
    // every `@` that can end the userinfo gives a candidate: each is a secret (text quoting
    // the real password is redacted whichever it is), and the URL loses their union
    let mut after_userinfo = 0;
    for at in rest.match_indices('@').map(|(i, _)| i) {
        if rest[..at]
            .split(':')
            .next()
            .is_some_and(|u| !u.contains(['/', '?', '#']))
        {
            after_userinfo = at + 1;
            if let Some(colon) = rest[..at].find(':')
                && colon + 1 < at
            {
                out.push(base + colon + 1..base + at);
            }
        }
    }
    for from in [0, after_userinfo] {
        let Some(q) = rest[from..].find('?') else { continue };
        let qbase = base + from + q + 1;
        let query = &url[qbase..];
        let query = &query[..query.find('#').unwrap_or(query.len())];
        let mut off = 0;
        for pair in query.split('&') {
            if let Some((k, v)) = pair.split_once('=')
                && !v.is_empty()
                && SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str())
            {
                let start = qbase + off + k.len() + 1;
                out.push(start..start + v.len());
            }
            off += pair.len() + 1;
        }
    }
    out.sort_by_key(|r| (r.start, r.end));
    out.dedup();
    out
}

/// [`url_secret_ranges`] with overlapping ranges merged.
fn merged_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for r in url_secret_ranges(url) {
        match merged.last_mut() {
            Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// The secrets in `url` (its password and secret query values), as written and
/// percent-decoded.
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    for r in url_secret_ranges(url) {
        let raw = &url[r];
        out.push(raw.to_string());
        let decoded = percent_decode(raw);
        if decoded != raw {
            out.push(decoded);
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = ((b[i + 1] as char).to_digit(16), (b[i + 2] as char).to_digit(16))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `url` with its password and secret query values replaced by `***` (for messages).
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    for r in merged_ranges(url).into_iter().rev() {
        out.replace_range(r, "***");
    }
    out
}

/// `text` with each of `secrets` replaced by `***`, in whatever form it is quoted: as written,
/// JSON-escaped (`\"`, `\\`, `\u00e9`, surrogate pairs), as Python's `repr` writes it (`\'`,
/// `\xNN`, `\uNNNN`, `\UNNNNNNNN`, or a bytes repr's `\xc3\xa9`), as Rust's `Debug` writes it
/// (`\u{e9}`), percent-encoded (`%C3%A9`, `+` for a space), hex digits in either case, any mix
/// of these, and any of them escaped once more (a JSON line inside a JSON string or a repr). A
/// secret of four or more characters goes wherever it appears; a shorter one only as a whole
/// word (so a password `ab` does not garble every message).
pub fn redact_all(text: &str, secrets: &[String]) -> String {
    render(text, &secret_spans(text, secrets), usize::MAX, text.len()).0
}

/// How deep escapes nest in [`redact_all`]: a secret's character escaped once (`\"`), and that
/// escape escaped once more (`\\\"`).
const ESCAPE_DEPTH: u8 = 2;

/// The byte ranges of `text` that quote one of `secrets` in any of [`redact_all`]'s forms,
/// overlapping ones merged (a secret that holds a shorter one goes whole).
fn secret_spans(text: &str, secrets: &[String]) -> Vec<std::ops::Range<usize>> {
    let mut secrets: Vec<Vec<char>> = secrets
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.chars().collect())
        .collect();
    secrets.sort();
    secrets.dedup();
    let mut spans = Vec::new();
    for sec in &secrets {
        spans_of(text, sec, &mut spans);
    }
    spans.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<std::ops::Range<usize>> = Vec::new();
    for r in spans {
        match merged.last_mut() {
            Some(m) if r.start < m.end => m.end = m.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// `text` up to byte `stop` with each of `spans` (merged, in order) as `***`, at most `max`
/// characters of it; and whether anything was left out. A span that starts before `stop` goes
/// whole, wherever it ends.
fn render(text: &str, spans: &[std::ops::Range<usize>], max: usize, stop: usize) -> (String, bool) {
    let mut out = String::with_capacity(text.len().min(stop).min(max.saturating_mul(4)));
    let mut n = 0;
    let mut i = 0;
    let mut spans = spans.iter().peekable();
    while i < stop {
        if n >= max {
            return (out, true);
        }
        if let Some(r) = spans.peek()
            && r.start == i
        {
            out.push_str("***");
            n += 3;
            i = r.end;
            spans.next();
            continue;
        }
        let c = text[i..].chars().next().expect("a char boundary");
        out.push(c);
        n += 1;
        i += c.len_utf8();
    }
    (out, i < text.len())
}

fn spans_of(text: &str, secret: &[char], spans: &mut Vec<std::ops::Range<usize>>) {
    let bytes = text.as_bytes();
    let whole_word = secret.len() < 4;
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        if !text.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let end = match_at(bytes, i, secret).filter(|&end| {
            !whole_word
                || (text[..i].chars().next_back().is_none_or(|c| !is_word(c))
                    && text[end..].chars().next().is_none_or(|c| !is_word(c)))
        });
        match end {
            Some(end) if end > i => {
                spans.push(i..end);
                i = end;
            }
            _ => i += 1,
        }
    }
}

/// The furthest end of `secret` quoted in any of [`redact_all`]'s forms from byte `pos`.
fn match_at(text: &[u8], pos: usize, secret: &[char]) -> Option<usize> {
    ends_of(text, pos, secret.iter().copied(), ESCAPE_DEPTH, false)
        .last()
        .copied()
}

/// Every end of `chars` quoted from byte `pos`, each char as written or in an escaped form
/// `depth` levels deep ([`char_ends`]), sorted, each once; empty when none matches.
fn ends_of(text: &[u8], pos: usize, chars: impl Iterator<Item = char>, depth: u8, fold: bool) -> Vec<usize> {
    let mut cur = vec![pos];
    for c in chars {
        let mut next = Vec::new();
        for &p in &cur {
            char_ends(text, p, c, depth, fold, &mut next);
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return next;
        }
        cur = next;
    }
    cur
}

/// The ends of every way character `c` can be written at `pos`: itself (ASCII case folded when
/// `fold`, inside an escape's hex digits), or, `depth` above 0, one of its escapes with each of
/// the escape's characters written in any way of depth `depth - 1`.
fn char_ends(text: &[u8], pos: usize, c: char, depth: u8, fold: bool, out: &mut Vec<usize>) {
    let mut buf = [0u8; 4];
    let lit = c.encode_utf8(&mut buf).as_bytes();
    if starts_with(text, pos, lit, fold) {
        out.push(pos + lit.len());
    }
    if depth == 0 || pos >= text.len() || !matches!(text[pos], b'\\' | b'%' | b'+') {
        return;
    }
    for form in escapes(c) {
        if depth == 1 {
            if starts_with(text, pos, form.as_bytes(), true) {
                out.push(pos + form.len());
            }
            continue;
        }
        out.extend(ends_of(text, pos, form.chars(), depth - 1, true));
    }
}

fn starts_with(text: &[u8], pos: usize, pat: &[u8], fold: bool) -> bool {
    text.get(pos..pos + pat.len())
        .is_some_and(|t| if fold { t.eq_ignore_ascii_case(pat) } else { t == pat })
}

/// The escaped forms of `c` (ASCII, hex in lower case; matched with case folded).
fn escapes(c: char) -> Vec<String> {
    let mut out = Vec::new();
    let short = match c {
        '\\' => Some("\\\\"),
        '"' => Some("\\\""),
        '\'' => Some("\\'"),
        '/' => Some("\\/"),
        '\n' => Some("\\n"),
        '\r' => Some("\\r"),
        '\t' => Some("\\t"),
        '\u{8}' => Some("\\b"),
        '\u{c}' => Some("\\f"),
        '\u{7}' => Some("\\a"),
        '\u{b}' => Some("\\v"),
        '\0' => Some("\\0"),
        ' ' => Some("+"),
        _ => None,
    };
    out.extend(short.map(str::to_string));
    let n = c as u32;
    if n < 0x100 {
        out.push(format!("\\x{n:02x}"));
    }
    if n <= 0xffff {
        out.push(format!("\\u{n:04x}"));
    } else {
        let mut units = [0u16; 2];
        out.push(
            c.encode_utf16(&mut units)
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect(),
        );
    }
    out.push(format!("\\U{n:08x}"));
    out.push(format!("\\u{{{n:x}}}"));
    let mut buf = [0u8; 4];
    let utf8 = c.encode_utf8(&mut buf).as_bytes();
    if utf8.len() > 1 {
        out.push(utf8.iter().map(|b| format!("\\x{b:02x}")).collect());
    }
    out.push(utf8.iter().map(|b| format!("%{b:02x}")).collect());
    out
}

/// `text` with the secrets of `url` replaced by `***` wherever they appear.
fn redact(text: &str, url: &str) -> String {
    redact_all(text, &url_secrets(url))
}

/// Every secret pacesim knows of from its environment: `PGPASSWORD`, the password and secret
/// values of `REDIS_URL`, `DATABASE_URL`, `PACESIM_PG_URL` and `PACESIM_REDIS_URL` (each as
/// written and percent-decoded). [`redact_known`] removes them from text pacesim did not write
/// (a worker's output, a server's error) before it is shown.
pub fn known_secrets() -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(p) = std::env::var("PGPASSWORD")
        && !p.is_empty()
    {
        out.push(p);
    }
    for k in ["REDIS_URL", "DATABASE_URL", "PACESIM_PG_URL", "PACESIM_REDIS_URL"] {
        if let Ok(u) = std::env::var(k) {
            out.extend(url_secrets(&u));
        }
    }
    // as they travel inside a URL too (`PACESIM_PG_URL` carries the password percent-encoded)
    let encoded: Vec<String> = out.iter().map(|s| percent_encode(s)).collect();
    out.extend(encoded);
    out.sort();
    out.dedup();
    out
}

/// `s` with every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX`, as pacesim
/// writes a password into a worker's URL.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `text` with every secret of [`known_secrets`] replaced by `***`.
pub fn redact_known(text: &str) -> String {
    let secrets = known_secrets();
    if secrets.is_empty() {
        text.to_string()
    } else {
        redact_all(text, &secrets)
    }
}

/// A bounded, redacted excerpt of text pacesim did not write (a worker's or a setup's line):
/// `secrets` and every secret of [`known_secrets`] replaced by `***` in any quoted form
/// ([`redact_all`]), then cut to at most `max` characters, with how many were cut. Redacted
/// before it is cut, so no cut leaves part of a secret.
pub fn excerpt(text: &str, secrets: &[String], max: usize) -> String {
    let mut all = known_secrets();
    all.extend(secrets.iter().cloned());
    // Only the first EXCERPT_WINDOW bytes are searched (a worker's 10 MB line costs no more
    // than that), and of those only what lies before the last form a secret could still be
    // cut in is shown: a secret is shown whole as `***`, never in part.
    let (window, stop) = if text.len() > EXCERPT_WINDOW {
        let mut end = EXCERPT_WINDOW;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let longest = all.iter().map(|s| s.chars().count()).max().unwrap_or(0);
        (&text[..end], end.saturating_sub(MAX_FORM * longest + 16))
    } else {
        (text, text.len())
    };
    let spans = secret_spans(window, &all);
    let (mut out, cut) = render(window, &spans, max, stop);
    if cut {
        out.push_str(&format!("... ({} characters in all)", text.chars().count()));
    }
    out
}

/// How much of a line [`excerpt`] searches for secrets.
const EXCERPT_WINDOW: usize = 16 * 1024;
/// The longest any one character of a secret can be written in [`redact_all`]'s forms (an
/// astral character as a surrogate pair, each of whose characters is escaped once more).
const MAX_FORM: usize = 128;

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error and its causes, on one line (tokio-postgres hides the useful part in `source`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    one_line(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_is_one_line_and_names_the_server() {
        let s = PgSettings {
            host: "127.0.0.1".into(),
            port: 1,
            user: "u".into(),
            password: None,
            dbname: "test".into(),
            options: None,
        };
        let m = Missing::postgres(&s, "connection refused\n(os error 111)");
        let line = m.to_string();
        assert!(line.starts_with("PostgreSQL is not reachable at 127.0.0.1:1 (connection refused (os error 111))"));
        assert!(line.contains("pg_ctlcluster") && !line.contains('\n'), "{line}");
    }

    #[test]
    fn a_bad_pgport_is_named_never_silently_5432() {
        for bad in ["abc", "99999", "0", "-1"] {
            let e = PgSettings::from_vars(|k| (k == "PGPORT").then(|| bad.to_string())).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!(
                    "PostgreSQL setting PGPORT is invalid at PGPORT (`{bad}` is not a port"
                )),
                "{e}"
            );
        }
        let s = PgSettings::from_vars(|k| (k == "PGPORT").then(|| "6543".into())).unwrap();
        assert_eq!(s.port, 6543);
    }

    #[test]
    fn the_real_cause_is_named_and_secrets_redacted() {
        let s = PgSettings {
            host: "127.0.0.1".into(),
            port: 5432,
            user: "u".into(),
            password: Some("hunter2".into()),
            dbname: "nodb".into(),
            options: None,
        };
        let m = Missing::postgres(&s, "db error: FATAL: database \"nodb\" does not exist");
        assert!(
            m.to_string()
                .starts_with("PostgreSQL has no database `nodb` at 127.0.0.1:5432"),
            "{m}"
        );
        let m = Missing::postgres(&s, "db error: FATAL: role \"u\" does not exist");
        assert!(m.to_string().starts_with("PostgreSQL has no role `u`"), "{m}");
        let m = Missing::postgres(&s, "password authentication failed for user \"u\" (hunter2)");
        assert!(m.to_string().starts_with("PostgreSQL refused the login"), "{m}");
        assert!(!m.to_string().contains("hunter2"), "{m}");

        let r = RedisSettings {
            url: "redis://user:s3cret@127.0.0.1:6379/".into(),
        };
        let m = Missing::redis(&r, "WRONGPASS invalid username-password pair (s3cret)");
        let line = m.to_string();
        assert!(
            line.starts_with("Redis refused the password at redis://user:***@127.0.0.1:6379/"),
            "{line}"
        );
        assert!(!line.contains("s3cret"), "{line}");
        let m = Missing::redis(&r, "Connection refused (os error 111)");
        assert!(
            m.to_string().starts_with("Redis is not reachable at redis://user:***@"),
            "{m}"
        );
        let bad = RedisSettings {
            url: "http://:pw@nowhere".into(),
        };
        let e = bad.check(Duration::from_millis(100)).unwrap_err().to_string();
        assert!(
            e.starts_with("Redis setting REDIS_URL is invalid at http://:***@nowhere"),
            "{e}"
        );
        assert!(!e.contains(":pw@"), "{e}");
    }

    /// Issue 34 item 4: passwords are found by parsing the URL, not by a first `@`.
    #[test]
    fn urls_are_redacted_by_parsing() {
        for (url, shown) in [
            ("redis://u:Sek@r3tPW9@host", "redis://u:***@host"),
            ("redis://u:Sek@r3tPW9@host:6379/0", "redis://u:***@host:6379/0"),
            ("redis://:pw@h/0?x=1", "redis://:***@h/0?x=1"),
            ("redis+unix:///x.sock?pass=SECRET", "redis+unix:///x.sock?pass=***"),
            (
                "redis+unix:///x.sock?db=1&password=S3&user=u",
                "redis+unix:///x.sock?db=1&password=***&user=u",
            ),
            ("redis://u:p/w@host/0", "redis://u:***@host/0"),
            ("redis://u:ab?cd@host/0", "redis://u:***@host/0"),
            (
                "redis+unix:///x.sock?pass=a@b&db=1",
                "redis+unix:///x.sock?pass=***&db=1",
            ),
            (
                "postgresql://u:p%40ss@h:5432/db?options=-c%20x",
                "postgresql://u:***@h:5432/db?options=-c%20x",
            ),
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            ("redis://u@h/", "redis://u@h/"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
        assert_eq!(url_secrets("postgresql://u:p%40ss@h/db"), ["p%40ss", "p@ss"]);
        let secrets = url_secrets("redis+unix:///x.sock?pass=SECRET");
        assert_eq!(
            redact_all("auth failed: SECRET (SECRET)", &secrets),
            "auth failed: *** (***)"
        );
        // a short secret goes only as a whole word
        assert_eq!(redact_all("ab abc xab ab.", &["ab".to_string()]), "*** abc xab ***.");
    }

    /// Issue 52 item 1: escaped forms go, and an excerpt never shows part of a secret, however
    /// long the line and wherever it is cut.
    #[test]
    fn escaped_secrets_go_and_excerpts_never_cut_one() {
        let pw = vec!["Sek\\r3t\"PW9".to_string(), "Sekrét99x".to_string()];
        for (text, shown) in [
            (r#"{"P": "Sek\\r3t\"PW9"}"#, r#"{"P": "***"}"#),
            (r#"{'P': 'Sek\\r3t"PW9'}"#, r#"{'P': '***'}"#),
            (r#""Sekr\u00e9t99x", "Sekr\u00E9t99x""#, r#""***", "***""#),
            (
                "'Sekr\\xe9t99x' b'Sekr\\xc3\\xa9t99x' Sekr%C3%A9t99x",
                "'***' b'***' ***",
            ),
            (r#""{\"Sek\\\\r3t\\\"PW9\": 1}""#, r#""{\"***\": 1}""#),
        ] {
            assert_eq!(redact_all(text, &pw), shown, "{text}");
        }
        let long = format!("{}{}{}", "a".repeat(EXCERPT_WINDOW - 6), pw[0], "b".repeat(100));
        let e = excerpt(&long, &pw, usize::MAX);
        assert!(
            !e.contains("Sek") && e.ends_with("characters in all)"),
            "{}",
            &e[e.len() - 80..]
        );
        let e = excerpt(&format!("x{}{}", pw[1], "c".repeat(500)), &pw, 10);
        assert_eq!(e, "x***cccccc... (510 characters in all)");
    }
}
