//! The trace hash fingerprints every field of every event: changing any one field, alone, of
//! any event changes the hash (and so does any field of the header). Fields are changed one at
//! a time, never two together (swapping `slot` and `now` would hide a hash that drops one).
//!
//! Written against the public API only (`pacesim::trace::{TraceHash, Event, Header, OpKind}`),
//! going through each event's serde form to reach every field by name, so a field added to an
//! event is covered without editing this file; a new event variant fails to compile in
//! [`every_variant`] until it is given an example.

use pacesim::trace::{
    CrashPoint, Event, FallbackMode, FaultKind, Header, KillPoint, MultiplierCause, OpKind, ReleaseReason,
    StoreErrorKind, TRACE_VERSION, TraceHash, UncappedReason,
};
use serde_json::{Value, json};

/// One example of every event variant. The exhaustive match makes a new variant a compile
/// error here, so it cannot be left out of the test.
fn every_variant() -> Vec<Event> {
    let all = vec![
        Event::OpSent {
            t: 10,
            pid: 2,
            thread: 0,
            op: OpKind::Reserve,
        },
        Event::Grant {
            t: 11,
            pid: 2,
            thread: 0,
            slot: 30,
            now: 40,
            interval: 50,
            multiplier: 1.0,
        },
        Event::Deny { t: 12, pid: 2 },
        Event::Reply {
            t: 13,
            pid: 2,
            thread: 0,
            op: OpKind::Report,
            wait: 7,
        },
        Event::StoreError {
            t: 14,
            pid: 2,
            thread: 0,
            error: StoreErrorKind::Refused,
        },
        Event::FetchStart {
            t: 15,
            pid: 2,
            thread: 0,
        },
        Event::Arrival {
            t: 16,
            pid: 2,
            thread: 0,
            status: 200,
        },
        Event::FetchEnd {
            t: 17,
            pid: 2,
            thread: 0,
            status: 429,
        },
        Event::Multiplier {
            t: 18,
            pid: Some(2),
            from: 1.0,
            to: 2.0,
            cause: MultiplierCause::TooManyRequests,
        },
        Event::Multiplier {
            t: 18,
            pid: None,
            from: 2.0,
            to: 1.0,
            cause: MultiplierCause::Decay,
        },
        Event::LockAcquired { t: 19, pid: 2, lock: 1 },
        Event::LockReleased {
            t: 20,
            pid: 2,
            lock: 1,
            reason: ReleaseReason::Release,
        },
        Event::Uncapped {
            t: 21,
            pid: 2,
            reason: UncappedReason::SafetyValve,
        },
        Event::Fallback {
            t: 22,
            pid: 2,
            enter: true,
            mode: FallbackMode::Divided,
            multiplier: 1.0,
        },
        Event::Crash {
            t: 23,
            pid: 2,
            point: CrashPoint::At(KillPoint::MidFetch),
        },
        Event::Restart { t: 24, pid: 2 },
        Event::Fault {
            t: 25,
            id: 3,
            kind: FaultKind::StoreOutage,
            start: true,
        },
        Event::JobEvent {
            t: 25,
            source: 1,
            event: 4,
            pid: Some(2),
            state: pacesim::trace::JobState::Stranded,
        },
        Event::Backfill {
            t: 25,
            source: 1,
            state: pacesim::trace::BackfillState::Stalled,
            chunks: 3,
        },
        Event::Platform {
            t: 26,
            pid: 2,
            platform: 1,
        },
        Event::End { t: 27 },
    ];
    for e in &all {
        // exhaustive on purpose: no `_` arm
        match e {
            Event::OpSent { .. }
            | Event::Grant { .. }
            | Event::Deny { .. }
            | Event::Reply { .. }
            | Event::StoreError { .. }
            | Event::FetchStart { .. }
            | Event::Arrival { .. }
            | Event::FetchEnd { .. }
            | Event::Multiplier { .. }
            | Event::LockAcquired { .. }
            | Event::LockReleased { .. }
            | Event::Uncapped { .. }
            | Event::Fallback { .. }
            | Event::Crash { .. }
            | Event::Restart { .. }
            | Event::Fault { .. }
            | Event::JobEvent { .. }
            | Event::Backfill { .. }
            | Event::Platform { .. }
            | Event::End { .. } => {}
        }
    }
    all
}

fn header() -> Header {
    Header {
        ev: "header".into(),
        version: TRACE_VERSION,
        source: "sim".into(),
        scenario: "s".into(),
        backend: "row".into(),
        seed: 1,
        processes: 4,
        rate: 7.0,
        burst: 2,
        multiplier_cap: 8.0,
        backend_detail: serde_json::from_value(json!({"interval_ns": 5})).unwrap(),
    }
}

fn hash(h: &Header, evs: &[Event]) -> u64 {
    let mut x = TraceHash::new();
    x.header(h);
    for e in evs {
        x.event(e);
    }
    x.value()
}

/// Other values for one field, each differing from `v` in that field only: numbers +1 and -1
/// (and 0), floats scaled, booleans flipped, strings changed, `null` <-> a number. The caller
/// keeps those that still deserialize (an enum field accepts only its variants' names).
fn alternatives(key: &str, v: &Value) -> Vec<Value> {
    match v {
        Value::Null => vec![json!(0), json!(2)],
        Value::Bool(b) => vec![json!(!b)],
        Value::Number(n) => {
            let mut out = Vec::new();
            if let Some(u) = n.as_u64() {
                out.extend([json!(u + 1), json!(u.saturating_sub(1)), json!(0)]);
            } else if let Some(i) = n.as_i64() {
                out.extend([json!(i + 1), json!(i - 1)]);
            } else if let Some(f) = n.as_f64() {
                out.extend([json!(f * 1.5), json!(f + 0.25)]);
            }
            if key == "pid" {
                out.push(Value::Null); // Multiplier's pid is optional
            }
            out.retain(|x| x != v);
            out
        }
        Value::String(s) => {
            let mut out = vec![json!(format!("{s}x")), json!("")];
            // a named value (an operation kind, a reason, a cause, ...): another of its kind
            out.extend(["reserve", "report", "gcra", "try_lock", "unlock", "acquire"].map(|k| json!(k)));
            out.extend(StoreErrorKind::ALL.iter().map(|k| json!(k.name())));
            out.extend(MultiplierCause::ALL.iter().map(|k| json!(k.name())));
            out.extend(ReleaseReason::ALL.iter().map(|k| json!(k.name())));
            out.extend(UncappedReason::ALL.iter().map(|k| json!(k.name())));
            out.extend(FallbackMode::ALL.iter().map(|k| json!(k.name())));
            out.extend(CrashPoint::ALL.iter().map(|k| json!(k.name())));
            out.extend(FaultKind::ALL.iter().map(|k| json!(k.name())));
            out.extend(pacesim::trace::JobState::ALL.iter().map(|k| json!(k.name())));
            out.extend(pacesim::trace::BackfillState::ALL.iter().map(|k| json!(k.name())));
            out.retain(|x| x != v);
            out
        }
        Value::Object(_) => vec![json!({}), json!({"other": 1})],
        Value::Array(_) => vec![json!([])],
    }
}

/// Every way of changing exactly one field of `e` that still makes an event.
fn one_field_changes(e: &Event) -> Vec<(String, Event)> {
    let base = serde_json::to_value(e).unwrap();
    let obj = base.as_object().unwrap();
    let mut out = Vec::new();
    for (k, v) in obj {
        if k == "ev" {
            continue; // the variant itself: covered by variants_are_distinguished
        }
        let mut any = false;
        for alt in alternatives(k, v) {
            let mut m = obj.clone();
            m.insert(k.clone(), alt.clone());
            if let Ok(changed) = serde_json::from_value::<Event>(Value::Object(m))
                && &changed != e
            {
                out.push((format!("{}.{k} = {alt}", obj["ev"]), changed));
                any = true;
            }
        }
        assert!(any, "no way found to change {}.{k} alone", obj["ev"]);
    }
    out
}

#[test]
fn changing_any_one_field_of_any_event_changes_the_hash() {
    let h = header();
    let evs = every_variant();
    let h0 = hash(&h, &evs);
    let mut checked = 0;
    for (i, e) in evs.iter().enumerate() {
        for (what, changed) in one_field_changes(e) {
            let mut v = evs.clone();
            v[i] = changed;
            assert_ne!(hash(&h, &v), h0, "the trace hash ignores {what}");
            // also alone, not only in company
            assert_ne!(
                hash(&h, &v[i..=i]),
                hash(&h, &evs[i..=i]),
                "the trace hash ignores {what} (event alone)"
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} single-field changes were tried");
}

#[test]
fn changing_any_one_field_of_the_header_changes_the_hash() {
    let evs = every_variant();
    let h = header();
    let h0 = hash(&h, &evs);
    let base = serde_json::to_value(&h).unwrap();
    let obj = base.as_object().unwrap();
    for (k, v) in obj {
        let mut any = false;
        for alt in alternatives(k, v) {
            let mut m = obj.clone();
            m.insert(k.clone(), alt.clone());
            if let Ok(changed) = serde_json::from_value::<Header>(Value::Object(m))
                && changed != h
            {
                assert_ne!(hash(&changed, &evs), h0, "the trace hash ignores header.{k} = {alt}");
                any = true;
            }
        }
        assert!(any, "no way found to change header.{k} alone");
    }
}

/// Events of different variants with the same field values, and the same events in another
/// order, hash differently.
#[test]
fn variants_and_order_are_distinguished() {
    let h = header();
    let same = [
        Event::FetchStart {
            t: 5,
            pid: 1,
            thread: 0,
        },
        Event::Restart { t: 5, pid: 1 },
        Event::Deny { t: 5, pid: 1 },
    ];
    for a in 0..same.len() {
        for b in 0..a {
            assert_ne!(
                hash(&h, &same[a..=a]),
                hash(&h, &same[b..=b]),
                "{:?} and {:?} hash alike",
                same[a],
                same[b]
            );
        }
    }
    let arrival = Event::Arrival {
        t: 5,
        pid: 1,
        thread: 0,
        status: 200,
    };
    let end = Event::FetchEnd {
        t: 5,
        pid: 1,
        thread: 0,
        status: 200,
    };
    assert_ne!(
        hash(&h, std::slice::from_ref(&arrival)),
        hash(&h, std::slice::from_ref(&end))
    );
    assert_ne!(hash(&h, &[arrival, end]), hash(&h, &[end, arrival]));
    let evs = every_variant();
    let mut rev = evs.clone();
    rev.reverse();
    assert_ne!(hash(&h, &evs), hash(&h, &rev));
    // equal traces, equal hashes
    assert_eq!(hash(&h, &evs), hash(&h, &every_variant()));
}
