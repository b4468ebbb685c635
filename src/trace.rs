//! The trace: a typed, versioned event stream, the only thing consumers read.
//!
//! The simulator ([`crate::sim`]) and the live runner produce it; checkers, statistics, plots
//! and reports consume it, streaming where they can. On disk it is JSON Lines: a
//! [`Header`] line, then one [`Event`] per line in non-decreasing `t` (nanoseconds on the
//! reference timeline: virtual time, or in live mode the destination's clock).
//!
//! The trace hash ([`hash::TraceHash`]) fingerprints the header and every field of every
//! event; two runs with the same hash produced the same trace, and since the encoding is a
//! pure function of the events, the same `--trace` bytes.

mod hash;
pub mod pipe;
pub use hash::TraceHash;

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Write};

/// Version of the trace format; bumped on any incompatible change.
pub const TRACE_VERSION: u32 = 1;

/// First line of every trace: what produced it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Always `"header"`.
    pub ev: String,
    /// [`TRACE_VERSION`].
    pub version: u32,
    /// `sim` or `live`.
    pub source: String,
    /// Scenario name.
    pub scenario: String,
    /// Backend name.
    pub backend: String,
    /// Seed used.
    pub seed: u64,
    /// Number of worker processes.
    pub processes: u32,
    /// The global ceiling, per second.
    pub rate: f64,
    /// The ceiling check's tolerated burst.
    pub burst: u64,
    /// Backoff multiplier cap.
    pub multiplier_cap: f64,
    /// Backend options in force.
    pub backend_detail: serde_json::Value,
}

/// Why an operation or a lock ended the way it did.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Reserve a slot (pace backends).
    Reserve,
    /// Report a response to shared backoff state.
    Report,
    /// GCRA check-and-update.
    Gcra,
    /// Try to take a lock.
    TryLock,
    /// Release a lock.
    Unlock,
    /// Any other request for permission: a backend's own operation (a user-defined backend
    /// maps its requests to it).
    Acquire,
}

/// One event. `t` is nanoseconds on the reference timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A process sent an operation to the store.
    OpSent {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Which operation.
        op: OpKind,
    },
    /// The store granted a slot (pace backends), at store-clock time `store_now`.
    Grant {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// The slot, in the granting authority's clock frame (ns).
        slot: i64,
        /// The authority's clock when it granted (ns).
        now: i64,
        /// The pacing interval applied, after the multiplier (ns).
        interval: u64,
        /// Backoff multiplier in force for this grant.
        multiplier: f64,
    },
    /// The store refused permission for now (GCRA deny, lock busy).
    Deny {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
    },
    /// A reply reached the process; `wait` is how long it will now sleep (ns).
    Reply {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Which operation this answers.
        op: OpKind,
        /// Sleep until the slot (ns, reference time).
        wait: u64,
    },
    /// A store operation failed (outage, partition, timeout).
    StoreError {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// `refused` or `timeout`.
        error: String,
    },
    /// A process started a fetch.
    FetchStart {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
    },
    /// A fetch reached the destination (the witness the ceiling check counts).
    Arrival {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// The destination's answer.
        status: u16,
    },
    /// A fetch's response reached the process.
    FetchEnd {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Status.
        status: u16,
    },
    /// A backoff multiplier changed; `pid` is `None` for the shared (global) multiplier.
    Multiplier {
        /// Time.
        t: u64,
        /// Process owning a per-process multiplier, or none for the global one.
        pid: Option<u32>,
        /// Old value.
        from: f64,
        /// New value.
        to: f64,
        /// `429`, `503` or `decay`.
        cause: String,
    },
    /// A lock was taken.
    LockAcquired {
        /// Time.
        t: u64,
        /// Holder.
        pid: u32,
        /// Lock number.
        lock: u32,
    },
    /// A lock was freed.
    LockReleased {
        /// Time.
        t: u64,
        /// Holder it was freed from.
        pid: u32,
        /// Lock number.
        lock: u32,
        /// `release`, `ttl`, `session_gone` or `store_restart`.
        reason: String,
    },
    /// A job ran without the lock after its bounded wait (the safety valve), or uncapped because
    /// the broker failed.
    Uncapped {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// `safety_valve` or `broker_error`.
        reason: String,
    },
    /// A process switched to or from its fallback pacer.
    Fallback {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// True on entry, false on exit.
        enter: bool,
        /// `fail_open`, `divided` or `fail_closed`.
        mode: String,
    },
    /// A process was killed (SIGKILL).
    Crash {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
        /// Where in its protocol.
        point: String,
    },
    /// A fresh process replaced a killed one.
    Restart {
        /// Time.
        t: u64,
        /// Process.
        pid: u32,
    },
    /// A fault window opened (`start`) or closed.
    Fault {
        /// Time.
        t: u64,
        /// Index in the scenario's fault list.
        id: u32,
        /// Fault kind.
        kind: String,
        /// True at start, false at end.
        start: bool,
    },
    /// The run ended.
    End {
        /// Time.
        t: u64,
    },
}

impl Event {
    /// The event's time.
    pub fn t(&self) -> u64 {
        match *self {
            Event::OpSent { t, .. }
            | Event::Grant { t, .. }
            | Event::Deny { t, .. }
            | Event::Reply { t, .. }
            | Event::StoreError { t, .. }
            | Event::FetchStart { t, .. }
            | Event::Arrival { t, .. }
            | Event::FetchEnd { t, .. }
            | Event::Multiplier { t, .. }
            | Event::LockAcquired { t, .. }
            | Event::LockReleased { t, .. }
            | Event::Uncapped { t, .. }
            | Event::Fallback { t, .. }
            | Event::Crash { t, .. }
            | Event::Restart { t, .. }
            | Event::Fault { t, .. }
            | Event::End { t } => t,
        }
    }
}

/// A consumer of a trace.
pub trait Sink {
    /// The header, once, before any event.
    fn header(&mut self, _h: &Header) {}
    /// One event, in trace order.
    fn event(&mut self, ev: &Event);
}

/// Fans one stream out to several sinks.
#[derive(Default)]
pub struct Tee<'a> {
    sinks: Vec<&'a mut dyn Sink>,
}

impl std::fmt::Debug for Tee<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tee").field("sinks", &self.sinks.len()).finish()
    }
}

impl<'a> Tee<'a> {
    /// An empty fan-out.
    pub fn new() -> Self {
        Tee { sinks: Vec::new() }
    }
    /// Add a sink.
    pub fn push(&mut self, s: &'a mut dyn Sink) {
        self.sinks.push(s);
    }
}

impl Sink for Tee<'_> {
    fn header(&mut self, h: &Header) {
        for s in &mut self.sinks {
            s.header(h);
        }
    }
    fn event(&mut self, ev: &Event) {
        for s in &mut self.sinks {
            s.event(ev);
        }
    }
}

/// Collects events in memory (tests and small runs).
#[derive(Default, Debug)]
pub struct Collect {
    /// The header, once seen.
    pub header: Option<Header>,
    /// Every event.
    pub events: Vec<Event>,
}

impl Sink for Collect {
    fn header(&mut self, h: &Header) {
        self.header = Some(h.clone());
    }
    fn event(&mut self, ev: &Event) {
        self.events.push(ev.clone());
    }
}

/// Canonical encoding of one trace line (compact JSON, newline-terminated).
pub fn encode_line<T: Serialize>(v: &T, buf: &mut Vec<u8>) {
    serde_json::to_writer(&mut *buf, v).expect("trace events always serialise");
    buf.push(b'\n');
}

impl OpKind {
    /// The name the trace uses (its serde name).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Reserve => "reserve",
            OpKind::Report => "report",
            OpKind::Gcra => "gcra",
            OpKind::TryLock => "try_lock",
            OpKind::Unlock => "unlock",
            OpKind::Acquire => "acquire",
        }
    }
}

/// The canonical encoding of one event, appended to `buf`: byte for byte what
/// [`encode_line`] (serde_json) writes, but written by hand for the frequent events, since the
/// file holds every event and serde's generic path is most of a run's cost when a trace file
/// is written. Rare events go through serde_json. The tests compare the two on every variant.
pub fn encode_event(ev: &Event, buf: &mut Vec<u8>) {
    let mut j = Json(buf);
    match *ev {
        Event::OpSent { t, pid, op } => {
            j.head("op_sent", t);
            j.uint("pid", pid.into());
            j.string("op", op.name());
        }
        Event::Grant {
            t,
            pid,
            slot,
            now,
            interval,
            multiplier,
        } => {
            j.head("grant", t);
            j.uint("pid", pid.into());
            j.int("slot", slot);
            j.int("now", now);
            j.uint("interval", interval);
            j.float("multiplier", multiplier);
        }
        Event::Deny { t, pid } => {
            j.head("deny", t);
            j.uint("pid", pid.into());
        }
        Event::Reply { t, pid, op, wait } => {
            j.head("reply", t);
            j.uint("pid", pid.into());
            j.string("op", op.name());
            j.uint("wait", wait);
        }
        Event::FetchStart { t, pid } => {
            j.head("fetch_start", t);
            j.uint("pid", pid.into());
        }
        Event::Arrival { t, pid, status } => {
            j.head("arrival", t);
            j.uint("pid", pid.into());
            j.uint("status", status.into());
        }
        Event::FetchEnd { t, pid, status } => {
            j.head("fetch_end", t);
            j.uint("pid", pid.into());
            j.uint("status", status.into());
        }
        Event::Multiplier {
            t,
            pid,
            from,
            to,
            ref cause,
        } => {
            j.head("multiplier", t);
            match pid {
                Some(pid) => j.uint("pid", pid.into()),
                None => j.raw("pid", "null"),
            }
            j.float("from", from);
            j.float("to", to);
            j.string("cause", cause);
        }
        Event::LockAcquired { t, pid, lock } => {
            j.head("lock_acquired", t);
            j.uint("pid", pid.into());
            j.uint("lock", lock.into());
        }
        Event::LockReleased {
            t,
            pid,
            lock,
            ref reason,
        } => {
            j.head("lock_released", t);
            j.uint("pid", pid.into());
            j.uint("lock", lock.into());
            j.string("reason", reason);
        }
        Event::Restart { t, pid } => {
            j.head("restart", t);
            j.uint("pid", pid.into());
        }
        Event::End { t } => j.head("end", t),
        _ => return encode_line(ev, buf),
    }
    buf.extend_from_slice(b"}\n");
}

/// A compact JSON object being written field by field, as serde_json's compact formatter
/// writes it.
struct Json<'a>(&'a mut Vec<u8>);

impl Json<'_> {
    /// `{"ev":"<tag>","t":<t>`: every event starts so (serde's internal tag, then `t`).
    fn head(&mut self, tag: &str, t: u64) {
        self.0.extend_from_slice(b"{\"ev\":\"");
        self.0.extend_from_slice(tag.as_bytes());
        self.0.extend_from_slice(b"\",\"t\":");
        self.0.extend_from_slice(itoa::Buffer::new().format(t).as_bytes());
    }
    /// `,"<key>":`
    fn key(&mut self, key: &str) {
        self.0.extend_from_slice(b",\"");
        self.0.extend_from_slice(key.as_bytes());
        self.0.extend_from_slice(b"\":");
    }
    fn raw(&mut self, key: &str, v: &str) {
        self.key(key);
        self.0.extend_from_slice(v.as_bytes());
    }
    fn uint(&mut self, key: &str, v: u64) {
        self.raw(key, itoa::Buffer::new().format(v));
    }
    fn int(&mut self, key: &str, v: i64) {
        self.raw(key, itoa::Buffer::new().format(v));
    }
    /// Finite floats as serde_json writes them (shortest round trip, via zmij); others `null`.
    fn float(&mut self, key: &str, v: f64) {
        if v.is_finite() {
            self.raw(key, zmij::Buffer::new().format_finite(v));
        } else {
            self.raw(key, "null");
        }
    }
    /// A string with serde_json's escapes: `\"`, `\\`, `\b \t \n \f \r`, and `\u00xx` for
    /// the other control characters; everything else (all of UTF-8 above 0x1f) verbatim.
    fn string(&mut self, key: &str, v: &str) {
        self.key(key);
        self.0.push(b'"');
        let bytes = v.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let short = match b {
                b'"' => b'"',
                b'\\' => b'\\',
                0x08 => b'b',
                b'\t' => b't',
                b'\n' => b'n',
                0x0c => b'f',
                b'\r' => b'r',
                0x00..=0x1f => b'u',
                _ => continue,
            };
            self.0.extend_from_slice(&bytes[start..i]);
            self.0.extend_from_slice(&[b'\\', short]);
            if short == b'u' {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                self.0
                    .extend_from_slice(&[b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 0xf) as usize]]);
            }
            start = i + 1;
        }
        self.0.extend_from_slice(&bytes[start..]);
        self.0.push(b'"');
    }
}

/// Streams the trace hash ([`TraceHash`]), and optionally writes the trace to a JSON Lines
/// file (encoding each event only then).
pub struct Writer {
    hash: TraceHash,
    buf: Vec<u8>,
    out: Option<Box<dyn Write + Send>>,
    error: Option<io::Error>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("hash", &self.hash).finish()
    }
}

impl Writer {
    /// Hash only.
    pub fn hash_only() -> Writer {
        Writer {
            hash: TraceHash::new(),
            buf: Vec::with_capacity(256),
            out: None,
            error: None,
        }
    }
    /// True when this writer writes a trace, not only hashes one.
    pub fn writes(&self) -> bool {
        self.out.is_some()
    }
    /// Hash and write to `out`.
    pub fn to(out: Box<dyn Write + Send>) -> Writer {
        Writer {
            out: Some(out),
            ..Writer::hash_only()
        }
    }
    /// Write the line now in `buf`.
    fn emit(&mut self) {
        if let Some(o) = &mut self.out
            && self.error.is_none()
            && let Err(e) = o.write_all(&self.buf)
        {
            self.error = Some(e);
        }
    }
    /// The hash so far, as 16 hex digits.
    pub fn hash_hex(&self) -> String {
        self.hash.hex()
    }
    /// Flush the file, reporting the first write error.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some(o) = &mut self.out {
            o.flush()?;
        }
        Ok(())
    }
}

impl Sink for Writer {
    fn header(&mut self, h: &Header) {
        self.hash.header(h);
        if self.out.is_some() {
            self.buf.clear();
            encode_line(h, &mut self.buf);
            self.emit();
        }
    }
    fn event(&mut self, ev: &Event) {
        self.hash.event(ev);
        if self.out.is_some() {
            self.buf.clear();
            encode_event(ev, &mut self.buf);
            self.emit();
        }
    }
}

/// Errors reading a trace file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// I/O.
    #[error("{file}: {source}")]
    Io {
        /// File.
        file: String,
        /// Cause.
        source: io::Error,
    },
    /// A line is not a valid event.
    #[error("{file}:{line}: {message}")]
    Bad {
        /// File.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Read a JSON Lines trace, streaming each event to `sink`. Returns the header.
pub fn read(file: &str, input: impl BufRead, sink: &mut dyn Sink) -> Result<Header, ReadError> {
    let mut header: Option<Header> = None;
    let mut last_t = 0;
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| ReadError::Io {
            file: file.into(),
            source: e,
        })?;
        let bad = |message: String| ReadError::Bad {
            file: file.into(),
            line: i + 1,
            message,
        };
        if line.trim().is_empty() {
            continue;
        }
        if header.is_none() {
            let h: Header = serde_json::from_str(&line).map_err(|e| bad(format!("not a trace header: {e}")))?;
            if h.version != TRACE_VERSION {
                return Err(bad(format!(
                    "trace version {} is not supported (expected {TRACE_VERSION})",
                    h.version
                )));
            }
            sink.header(&h);
            header = Some(h);
            continue;
        }
        let ev: Event = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        if ev.t() < last_t {
            return Err(bad(format!("time goes backwards ({} after {last_t})", ev.t())));
        }
        last_t = ev.t();
        sink.event(&ev);
    }
    header.ok_or_else(|| ReadError::Bad {
        file: file.into(),
        line: 1,
        message: "empty trace (no header)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random events of every variant, with awkward values: extreme integers, floats that
    /// are negative zero, tiny, huge, integral or not finite, strings with quotes,
    /// backslashes, control characters and non-ASCII.
    fn random_events(n: usize) -> Vec<Event> {
        use rand::{RngExt, SeedableRng};
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let ops = [
            OpKind::Reserve,
            OpKind::Report,
            OpKind::Gcra,
            OpKind::TryLock,
            OpKind::Unlock,
            OpKind::Acquire,
        ];
        let floats = [
            0.0,
            -0.0,
            1.0,
            2.0,
            8.0,
            0.1,
            1.5,
            1e-300,
            5e-324,
            1e21,
            1e22,
            123456789.125,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let strings = [
            "429",
            "decay",
            "",
            "a\"b",
            "back\\slash",
            "ctl\u{1}\u{8}\t\n\u{c}\r\u{1f}\u{7f}",
            "é→😀",
        ];
        let mut time = || -> u64 {
            match r.random_range(0..4u32) {
                0 => 0,
                1 => u64::MAX,
                _ => r.random_range(0..u64::MAX),
            }
        };
        let mut out = Vec::with_capacity(n);
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(12);
        for i in 0..n {
            let t = time();
            let pid = if r.random_bool(0.1) {
                u32::MAX
            } else {
                r.random_range(0..100_000)
            };
            let op = ops[r.random_range(0..ops.len())];
            let f = |r: &mut rand_pcg::Pcg64Mcg| {
                if r.random_bool(0.5) {
                    floats[r.random_range(0..floats.len())]
                } else {
                    f64::from_bits(r.random_range(0..u64::MAX))
                }
            };
            let s = |r: &mut rand_pcg::Pcg64Mcg| strings[r.random_range(0..strings.len())].to_string();
            let int = |r: &mut rand_pcg::Pcg64Mcg| match r.random_range(0..3u32) {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => r.random_range(-1_000_000_000_000i64..1_000_000_000_000),
            };
            out.push(match i % 17 {
                0 => Event::OpSent { t, pid, op },
                1 => Event::Grant {
                    t,
                    pid,
                    slot: int(&mut r),
                    now: int(&mut r),
                    interval: r.random_range(0..u64::MAX),
                    multiplier: f(&mut r),
                },
                2 => Event::Deny { t, pid },
                3 => Event::Reply {
                    t,
                    pid,
                    op,
                    wait: r.random_range(0..u64::MAX),
                },
                4 => Event::StoreError {
                    t,
                    pid,
                    error: s(&mut r),
                },
                5 => Event::FetchStart { t, pid },
                6 => Event::Arrival {
                    t,
                    pid,
                    status: r.random_range(0..u16::MAX),
                },
                7 => Event::FetchEnd {
                    t,
                    pid,
                    status: r.random_range(0..u16::MAX),
                },
                8 => Event::Multiplier {
                    t,
                    pid: r.random_bool(0.5).then_some(pid),
                    from: f(&mut r),
                    to: f(&mut r),
                    cause: s(&mut r),
                },
                9 => Event::LockAcquired {
                    t,
                    pid,
                    lock: r.random_range(0..u32::MAX),
                },
                10 => Event::LockReleased {
                    t,
                    pid,
                    lock: r.random_range(0..u32::MAX),
                    reason: s(&mut r),
                },
                11 => Event::Uncapped {
                    t,
                    pid,
                    reason: s(&mut r),
                },
                12 => Event::Fallback {
                    t,
                    pid,
                    enter: r.random_bool(0.5),
                    mode: s(&mut r),
                },
                13 => Event::Crash {
                    t,
                    pid,
                    point: s(&mut r),
                },
                14 => Event::Restart { t, pid },
                15 => Event::Fault {
                    t,
                    id: pid,
                    kind: s(&mut r),
                    start: r.random_bool(0.5),
                },
                _ => Event::End { t },
            });
        }
        out
    }

    #[test]
    fn hand_encoding_is_byte_for_byte_serde_json() {
        let (mut fast, mut serde) = (Vec::new(), Vec::new());
        for ev in random_events(200_000) {
            fast.clear();
            serde.clear();
            encode_event(&ev, &mut fast);
            encode_line(&ev, &mut serde);
            assert_eq!(
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&serde),
                "{ev:?}"
            );
        }
    }

    #[test]
    fn writer_hashes_the_same_with_or_without_a_file_and_writes_the_serde_json_lines() {
        let evs = random_events(5_000);
        let mut plain = Writer::hash_only();
        let file = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut filed = Writer::to(Box::new(Shared(file.clone())));
        let mut bytes = Vec::new();
        let mut direct = TraceHash::new();
        for e in &evs {
            plain.event(e);
            filed.event(e);
            direct.event(e);
            encode_line(e, &mut bytes);
        }
        filed.finish().unwrap();
        assert_eq!(plain.hash_hex(), filed.hash_hex());
        assert_eq!(plain.hash_hex(), direct.hex());
        assert_eq!(
            *file.lock().unwrap(),
            bytes,
            "the file holds exactly the serde_json lines"
        );
    }

    #[test]
    fn round_trips_and_hashes() {
        let h = Header {
            ev: "header".into(),
            version: TRACE_VERSION,
            source: "sim".into(),
            scenario: "x".into(),
            backend: "row".into(),
            seed: 1,
            processes: 2,
            rate: 7.0,
            burst: 2,
            multiplier_cap: 8.0,
            backend_detail: serde_json::json!({}),
        };
        let evs = vec![
            Event::FetchStart { t: 1, pid: 0 },
            Event::Arrival {
                t: 2,
                pid: 0,
                status: 200,
            },
            Event::Multiplier {
                t: 3,
                pid: None,
                from: 1.0,
                to: 2.0,
                cause: "429".into(),
            },
        ];
        let mut w = Writer::hash_only();
        let mut bytes = Vec::new();
        w.header(&h);
        encode_line(&h, &mut bytes);
        for e in &evs {
            w.event(e);
            encode_line(e, &mut bytes);
        }
        let mut c = Collect::default();
        let h2 = read("mem", &bytes[..], &mut c).unwrap();
        assert_eq!(h2, h);
        assert_eq!(c.events, evs);
        let mut w2 = Writer::hash_only();
        w2.header(&h2);
        for e in &c.events {
            w2.event(e);
        }
        assert_eq!(w.hash_hex(), w2.hash_hex());
        let bad = read("mem", &b"{\"ev\":\"header\"}\n"[..], &mut Collect::default()).unwrap_err();
        assert!(bad.to_string().starts_with("mem:1: not a trace header"));
    }
}
