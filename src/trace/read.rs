//! Reading a JSON Lines trace back.

use super::{Event, Header, OLDEST_TRACE_VERSION, Sink, TRACE_VERSION};
use std::io::{self, BufRead};

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
        // a UTF-8 byte-order mark before the header is accepted, as in scenario files
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}').to_string()
        } else {
            line
        };
        if line.trim().is_empty() {
            continue;
        }
        if header.is_none() {
            let h: Header = serde_json::from_str(&line).map_err(|e| bad(format!("not a trace header: {e}")))?;
            if !(OLDEST_TRACE_VERSION..=TRACE_VERSION).contains(&h.version) {
                return Err(bad(format!(
                    "trace version {} is not supported (expected {OLDEST_TRACE_VERSION} to {TRACE_VERSION})",
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
    use crate::trace::{Collect, MultiplierCause, Writer, encode_line};

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
            backend_detail: Default::default(),
        };
        let evs = vec![
            Event::FetchStart {
                t: 1,
                pid: 0,
                thread: 0,
            },
            Event::Arrival {
                t: 2,
                pid: 0,
                thread: 0,
                status: 200,
            },
            Event::Multiplier {
                t: 3,
                pid: None,
                from: 1.0,
                to: 2.0,
                cause: MultiplierCause::TooManyRequests,
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
