//! The canonical encoding: one compact JSON line per header or event, and the [`Writer`] that
//! streams the trace hash and writes the lines.

use super::{Event, Header, Sink, TraceHash, Val, Walk};
use serde::Serialize;
use std::io::{self, Write};

/// Canonical encoding of one trace line (compact JSON, newline-terminated).
pub(crate) fn encode_line<T: Serialize>(v: &T, buf: &mut Vec<u8>) {
    serde_json::to_writer(&mut *buf, v).expect("trace events always serialise");
    buf.push(b'\n');
}

/// The canonical encoding of one event, appended to `buf`: byte for byte what
/// [`encode_line`] (serde_json) writes, but written by hand from the event's field walk
/// ([`Event::visit`]), since the file holds every event and serde's generic path is most of a
/// run's cost when a trace file is written. The tests compare the two on every variant.
#[inline]
pub(crate) fn encode_event(ev: &Event, buf: &mut Vec<u8>) {
    ev.visit(&mut Json(buf));
}

/// A compact JSON object being written field by field, as serde_json's compact formatter
/// writes it.
struct Json<'a>(&'a mut Vec<u8>);

impl Json<'_> {
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

/// Every event is written so: `{"ev":"<name>"` (serde's internal tag), then each field in
/// order (`t` first), a thread of 0 left out (serde skips it), then `}` and a newline.
impl Walk for Json<'_> {
    #[inline(always)]
    fn kind(&mut self, name: &'static str, _tag: u64) {
        self.0.extend_from_slice(b"{\"ev\":\"");
        self.0.extend_from_slice(name.as_bytes());
        self.0.push(b'"');
    }
    #[inline(always)]
    fn field(&mut self, key: &'static str, v: Val) {
        match v {
            Val::U(v) => self.uint(key, v),
            Val::Pid(p) | Val::MaybePid(Some(p)) => self.uint(key, p.into()),
            Val::Thread(0) => {}
            Val::Thread(n) => self.uint(key, n.into()),
            Val::MaybePid(None) => self.raw(key, "null"),
            Val::I(v) => self.int(key, v),
            Val::F(v) => self.float(key, v),
            Val::B(b) => self.raw(key, if b { "true" } else { "false" }),
            Val::Op(op) => self.string(key, op.name()),
            Val::Name(s) => self.string(key, s),
        }
    }
    #[inline(always)]
    fn done(&mut self) {
        self.0.extend_from_slice(b"}\n");
    }
}

/// Streams the trace hash ([`TraceHash`]), and optionally writes the trace to a JSON Lines
/// file (encoding each event only then).
pub(crate) struct Writer {
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
    #[inline(always)]
    fn event(&mut self, ev: &Event) {
        self.hash.event(ev);
        if self.out.is_some() {
            self.write(ev);
        }
    }
}

impl Writer {
    /// Encodes and writes one event (kept out of line: a writer that only hashes, inlined
    /// with the checkers, never calls it).
    #[inline(never)]
    fn write(&mut self, ev: &Event) {
        self.buf.clear();
        encode_event(ev, &mut self.buf);
        self.emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{
        BackfillState, CrashPoint, FallbackMode, FaultKind, JobState, MultiplierCause, OpKind, ReleaseReason,
        StoreErrorKind, UncappedReason,
    };

    /// Random events of every variant, with awkward values: extreme integers, floats that
    /// are negative zero, tiny, huge, integral or not finite, and every named value.
    fn random_events(n: usize) -> Vec<Event> {
        use rand::{RngExt, SeedableRng};
        let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(11);
        let ops = OpKind::ALL;
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
            // thread 0 (not written), a small one, the largest
            let thread: u16 = [0, 0, 3, u16::MAX][i % 4];
            let f = |r: &mut rand_pcg::Pcg64Mcg| {
                if r.random_bool(0.5) {
                    floats[r.random_range(0..floats.len())]
                } else {
                    f64::from_bits(r.random_range(0..u64::MAX))
                }
            };
            fn pick<T: Copy>(r: &mut rand_pcg::Pcg64Mcg, all: &[T]) -> T {
                all[r.random_range(0..all.len())]
            }
            let int = |r: &mut rand_pcg::Pcg64Mcg| match r.random_range(0..3u32) {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => r.random_range(-1_000_000_000_000i64..1_000_000_000_000),
            };
            out.push(match i % 20 {
                0 => Event::OpSent { t, pid, thread, op },
                1 => Event::Grant {
                    t,
                    pid,
                    thread,
                    slot: int(&mut r),
                    now: int(&mut r),
                    interval: r.random_range(0..u64::MAX),
                    multiplier: f(&mut r),
                },
                2 => Event::Deny { t, pid },
                3 => Event::Reply {
                    t,
                    pid,
                    thread,
                    op,
                    wait: r.random_range(0..u64::MAX),
                },
                4 => Event::StoreError {
                    t,
                    pid,
                    thread,
                    error: pick(&mut r, StoreErrorKind::ALL),
                },
                5 => Event::FetchStart { t, pid, thread },
                6 => Event::Arrival {
                    t,
                    pid,
                    thread,
                    status: r.random_range(0..u16::MAX),
                },
                7 => Event::FetchEnd {
                    t,
                    pid,
                    thread,
                    status: r.random_range(0..u16::MAX),
                },
                8 => Event::Multiplier {
                    t,
                    pid: r.random_bool(0.5).then_some(pid),
                    from: f(&mut r),
                    to: f(&mut r),
                    cause: pick(&mut r, MultiplierCause::ALL),
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
                    reason: pick(&mut r, ReleaseReason::ALL),
                },
                11 => Event::Uncapped {
                    t,
                    pid,
                    reason: pick(&mut r, UncappedReason::ALL),
                },
                12 => Event::Fallback {
                    t,
                    pid,
                    enter: r.random_bool(0.5),
                    mode: pick(&mut r, FallbackMode::ALL),
                    multiplier: 1.0 + r.random_range(0..3) as f64,
                },
                13 => Event::Crash {
                    t,
                    pid,
                    point: pick(&mut r, CrashPoint::ALL),
                },
                14 => Event::Restart { t, pid },
                15 => Event::Fault {
                    t,
                    id: pid,
                    kind: pick(&mut r, FaultKind::ALL),
                    start: r.random_bool(0.5),
                },
                16 => Event::JobEvent {
                    t,
                    source: r.random_range(0..u32::MAX),
                    event: r.random_range(0..u32::MAX),
                    pid: r.random_bool(0.5).then_some(pid),
                    state: pick(&mut r, JobState::ALL),
                },
                17 => Event::Backfill {
                    t,
                    source: pid,
                    state: pick(&mut r, BackfillState::ALL),
                    chunks: r.random_range(0..u32::MAX),
                },
                18 => Event::Platform {
                    t,
                    pid,
                    platform: r.random_range(0..u32::MAX),
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
}
