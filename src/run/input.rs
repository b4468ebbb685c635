//! What `pacesim check` accepts: a trace file is the user's input, not pacesim's own output,
//! so nothing in it is trusted before the checkers see it.
//!
//! [`validate`] streams the file once, line by line with a bounded line length, and refuses:
//! a file that is not JSON Lines (`/dev/zero` fails at its first line, fast), a header whose
//! `rate` is not a usable ceiling or whose `processes` is absurd, an event whose `pid` is not
//! one of the header's processes or whose `status` is not an HTTP status, a header `burst`
//! below 1 or `multiplier_cap` below 1, an arrival no fetch start accounts for (a duplicated
//! line), a restart of a process never killed (no `crash` since its last start), an event
//! after `end`, and a trace without its `end` event (cut short: it must not pass as
//! complete). The trace reader ([`crate::trace::read`]) then reads the same file for the
//! checkers.

use std::io::BufRead;

/// The longest trace line read, in bytes (a trace line is a few hundred).
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The most processes a checked trace may declare: the checkers keep state per process.
pub const MAX_PROCESSES: u64 = 1_000_000;

/// Why a trace is not something the checkers can judge: the file, the 1-based line, the
/// field and what is wrong.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{file}:{line}: {field}: {message}")]
pub struct InputError {
    /// The trace file.
    pub file: String,
    /// 1-based line (the last line read for a problem at the end of the file).
    pub line: usize,
    /// The field, e.g. `rate`, `pid`, or `(line)` for the line as a whole.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Read one line of at most [`MAX_LINE_BYTES`] into `buf` (without its newline). `Ok(false)`
/// at the end of the input; `Err(None)` for a line too long, `Err(Some(e))` on an I/O error.
fn next_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> Result<bool, Option<std::io::Error>> {
    buf.clear();
    let mut any = false;
    loop {
        let avail = match input.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Some(e)),
        };
        if avail.is_empty() {
            return Ok(any);
        }
        any = true;
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        if buf.len() + take > MAX_LINE_BYTES {
            return Err(None);
        }
        buf.extend_from_slice(&avail[..take]);
        input.consume(take + usize::from(done));
        if done {
            return Ok(true);
        }
    }
}

/// Check the trace `input` (named `file` in errors) before the checkers read it.
/// `rate_override`: `check --rate`, which replaces the header's rate (so that one is not
/// checked).
pub fn validate(file: &str, mut input: impl BufRead, rate_override: Option<f64>) -> Result<(), InputError> {
    let err = |line: usize, field: &str, message: String| InputError {
        file: file.to_string(),
        line,
        field: field.to_string(),
        message,
    };
    let mut buf = Vec::new();
    let mut line = 0;
    let mut processes: Option<u64> = None;
    let mut ended = false;
    // per process: fetch starts, arrivals, and whether it is dead (killed, not restarted)
    #[derive(Default)]
    struct Loop {
        starts: u64,
        arrivals: u64,
        dead: bool,
    }
    let mut loops: std::collections::HashMap<u64, Loop> = std::collections::HashMap::new();
    loop {
        match next_line(&mut input, &mut buf) {
            Ok(true) => line += 1,
            Ok(false) => break,
            Err(None) => {
                return Err(err(
                    line + 1,
                    "(line)",
                    format!("longer than {MAX_LINE_BYTES} bytes: not a JSON Lines trace"),
                ));
            }
            Err(Some(e)) => return Err(err(line + 1, "(file)", format!("cannot read: {e}"))),
        }
        if line == 1 && buf.starts_with(b"\xEF\xBB\xBF") {
            buf.drain(..3); // a UTF-8 byte-order mark, accepted as TOML accepts it
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_slice(&buf).map_err(|e| err(line, "(line)", format!("not a JSON Lines trace: {e}")))?;
        let Some(obj) = v.as_object() else {
            return Err(err(line, "(line)", "not a JSON object".into()));
        };
        let Some(n) = processes else {
            // the header: leave its shape to the reader, check the values the checkers trust
            if rate_override.is_none() {
                let rate = obj.get("rate").and_then(serde_json::Value::as_f64);
                match rate {
                    Some(r) if r.is_finite() && r > 0.0 => {
                        crate::scenario::rate_in_range(r).map_err(|m| err(line, "rate", m))?;
                    }
                    _ => {
                        let got = obj.get("rate").map_or("nothing".to_string(), ToString::to_string);
                        return Err(err(line, "rate", format!("must be a number above 0, got {got}")));
                    }
                }
            }
            // the ceiling's burst and the backoff's cap are bounds the checkers judge by: a
            // burst of 0 or a cap below 1 would fail every correct trace
            if let Some(b) = obj.get("burst")
                && b.as_u64().is_none_or(|b| b < 1)
            {
                return Err(err(
                    line,
                    "burst",
                    format!("must be a whole number at least 1, got {b}"),
                ));
            }
            if let Some(c) = obj.get("multiplier_cap")
                && !c.as_f64().is_some_and(|c| c.is_finite() && c >= 1.0)
            {
                return Err(err(
                    line,
                    "multiplier_cap",
                    format!("must be a finite number at least 1, got {c}"),
                ));
            }
            let p = obj.get("processes").and_then(serde_json::Value::as_u64);
            match p {
                Some(p) if (1..=MAX_PROCESSES).contains(&p) => processes = Some(p),
                _ => {
                    let got = obj.get("processes").map_or("nothing".to_string(), ToString::to_string);
                    return Err(err(
                        line,
                        "processes",
                        format!("must be a whole number from 1 to {MAX_PROCESSES}, got {got}"),
                    ));
                }
            }
            continue;
        };
        if ended {
            return Err(err(line, "ev", "an event after the `end` event".into()));
        }
        if let Some(pid) = obj.get("pid").filter(|p| !p.is_null())
            && pid.as_u64().is_none_or(|p| p >= n)
        {
            return Err(err(
                line,
                "pid",
                format!("process {pid} does not exist (the header says processes = {n})"),
            ));
        }
        if let Some(status) = obj.get("status")
            && !status.as_u64().is_some_and(|s| (100..=599).contains(&s))
        {
            return Err(err(
                line,
                "status",
                format!("must be an HTTP status (100 to 599), got {status}"),
            ));
        }
        let ev = obj.get("ev").and_then(serde_json::Value::as_str);
        let pid = obj.get("pid").and_then(serde_json::Value::as_u64);
        match (ev, pid) {
            (Some("fetch_start"), Some(p)) => loops.entry(p).or_default().starts += 1,
            (Some("arrival"), Some(p)) => {
                // every arrival is a fetch some process started: one more (a duplicated line)
                // would count twice against the ceiling
                let l = loops.entry(p).or_default();
                l.arrivals += 1;
                if l.arrivals > l.starts {
                    return Err(err(
                        line,
                        "ev",
                        format!(
                            "arrival {} of process {p} but it started only {} fetch(es): a duplicated or invented arrival",
                            l.arrivals, l.starts
                        ),
                    ));
                }
            }
            (Some("crash"), Some(p)) => {
                loops.entry(p).or_default().dead = true;
            }
            (Some("restart"), Some(p)) => {
                let l = loops.entry(p).or_default();
                if !l.dead {
                    return Err(err(
                        line,
                        "ev",
                        format!("process {p} restarts, but it was never killed (no `crash` before)"),
                    ));
                }
                l.dead = false;
            }
            _ => {}
        }
        ended = ev == Some("end");
    }
    if processes.is_some() && !ended {
        return Err(err(
            line,
            "end",
            "the trace has no `end` event: it was cut short, and a partial trace cannot pass as a whole run".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_too_long_fails_without_reading_further() {
        let big = vec![0u8; MAX_LINE_BYTES * 3];
        let e = validate("z", &big[..], None).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "(line)"), "{e}");
    }
}
