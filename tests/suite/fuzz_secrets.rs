//! Issue 34 item 4, fuzzed: whatever characters a password holds, pacesim's redaction removes
//! it from the URL it shows and from any text that quotes it (as written or percent-encoded).
//! Issue 52: the same for a password quoted in an escaped form (JSON, a Python repr, Rust's
//! `Debug`, percent-encoding, escaped twice), and Redis keys as bytes.
//! `just fuzz` runs it deeper (`PROPTEST_CASES`).

use pacesim::live::settings::{redact_all, redact_url, url_secrets};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_RNG_SEED")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(34),
        ),
        ..ProptestConfig::default()
    }
}

/// Passwords as people type them: letters, digits and the URL's own delimiters.
fn password() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[A-Za-z0-9@:/?#%&=!.~_-]{4,24}").unwrap()
}

proptest! {
    #![proptest_config(config())]

    /// `redis://user:PASSWORD@host:port/db[?query]`: the password never shows.
    #[test]
    fn a_userinfo_password_never_shows(
        pw in password(),
        user in "[a-z]{0,6}",
        query in prop_oneof![Just(String::new()), Just("?db=1".to_string()), Just("?timeout=5&x=y@z".to_string())],
    ) {
        let url = format!("redis://{user}:{pw}@cache.internal:6379/0{query}");
        let shown = redact_url(&url);
        let rest = format!("redis://{user}:@cache.internal:6379/0{query}");
        // (a password that is itself part of the URL's other text cannot be told apart)
        prop_assume!(!rest.contains(pw.as_str()));
        prop_assert!(!shown.contains(pw.as_str()), "{url} shown as {shown}");
        let quoted = format!("worker said: connecting to {url} with {pw}");
        let text = redact_all(&quoted, &url_secrets(&url));
        prop_assert!(!text.contains(pw.as_str()), "{text}");
    }

    /// `redis+unix:///path.sock?pass=PASSWORD`, in any parameter position.
    #[test]
    fn a_query_password_never_shows(
        pw in proptest::string::string_regex("[A-Za-z0-9@:/?%=!.~_-]{4,24}").unwrap(),
        key in prop_oneof![Just("pass"), Just("password"), Just("PASSWORD")],
        before in prop_oneof![Just(""), Just("db=2&")],
    ) {
        let url = format!("redis+unix:///run/redis.sock?{before}{key}={pw}");
        prop_assume!(!format!("redis+unix:///run/redis.sock?{before}{key}=").contains(pw.as_str()));
        let shown = redact_url(&url);
        prop_assert!(!shown.contains(pw.as_str()), "{url} shown as {shown}");
    }
}

// ---- issue 52 item 1: a secret quoted in an escaped form --------------------------------

/// `s` as Python's `repr()` writes a `str` (the quotes included): `\\`, the quote escaped,
/// `\t` `\n` `\r`, other control characters as `\xNN`, and non-ASCII that Python would not
/// print (controls, separators) as `\xNN` / `\uNNNN` / `\UNNNNNNNN`; everything else as is.
/// With `ascii` every non-ASCII character is escaped, as Python's `ascii()` writes it.
pub(crate) fn python_repr(s: &str, ascii: bool) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        let n = c as u32;
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            _ if n < 0x20 || n == 0x7f => out.push_str(&format!("\\x{n:02x}")),
            c if !c.is_ascii() && (ascii || c.is_control() || (c.is_whitespace())) => {
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// `s` as Python's `json.dumps` writes it by default (`ensure_ascii`): JSON, with every
/// non-ASCII character as `\uNNNN` (an astral one as a surrogate pair).
pub(crate) fn json_ascii(s: &str) -> String {
    let mut out = String::new();
    for c in serde_json::to_string(s).unwrap().chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// Every form of `pw` that must never survive redaction (the quotes stripped where a form has
/// them, so a hit is the secret itself).
pub(crate) fn escaped_forms(pw: &str) -> Vec<String> {
    let strip = |s: String| s[1..s.len() - 1].to_string();
    let mut forms = vec![
        pw.to_string(),
        strip(serde_json::to_string(pw).unwrap()),
        strip(json_ascii(pw)),
        strip(python_repr(pw, false)),
        strip(python_repr(pw, true)),
        format!("{pw:?}").trim_matches('"').to_string(),
        pw.bytes().map(|b| format!("%{b:02X}")).collect(),
    ];
    forms.retain(|f| f.chars().count() >= 4);
    forms.sort();
    forms.dedup();
    forms
}

/// Passwords as anything can hold them: backslashes, quotes, control characters, non-ASCII
/// and astral characters among plain ones.
fn any_password() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        4 => proptest::char::range('a', 'z'),
        2 => proptest::char::range('0', '9'),
        3 => prop_oneof![Just('\\'), Just('"'), Just('\''), Just('/'), Just('%'), Just('+'), Just(' ')],
        2 => proptest::char::range('\u{0}', '\u{1f}'),
        2 => prop_oneof![Just('é'), Just('ß'), Just('€'), Just('\u{a0}'), Just('\u{2028}'), Just('中')],
        1 => proptest::char::range('\u{1f600}', '\u{1f64f}'),
        1 => any::<char>(),
    ];
    proptest::collection::vec(ch, 4..20).prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(config())]

    /// Issue 52 item 1: an environment printed as JSON (`json.dumps`, with or without
    /// `ensure_ascii`), as a Python repr (`repr`, `ascii`), as Rust's `Debug`, or
    /// percent-encoded: the password goes in every form, and the text around it stays.
    #[test]
    fn a_password_in_any_escaped_form_never_survives(pw in any_password()) {
        prop_assume!(!pw.contains('*'));
        let secrets = [pw.clone()];
        let forms = [
            serde_json::to_string(&pw).unwrap(),
            json_ascii(&pw),
            python_repr(&pw, false),
            python_repr(&pw, true),
            format!("{pw:?}"),
            format!("\"{}\"", pw.bytes().map(|b| format!("%{b:02X}")).collect::<String>()),
            format!("\"{}\"", pw.bytes().map(|b| format!("%{b:02x}")).collect::<String>()),
        ];
        for form in forms {
            let text = format!("{{\"PGPASSWORD\": {form}, \"HOME\": \"/root\"}}");
            let shown = redact_all(&text, &secrets);
            for f in escaped_forms(&pw) {
                prop_assert!(!shown.contains(f.as_str()), "{form} leaves {f:?} in {shown}");
            }
            prop_assert!(shown.ends_with(", \"HOME\": \"/root\"}"), "{text} -> {shown}");
            prop_assert!(shown.starts_with("{\"PGPASSWORD\": "), "{text} -> {shown}");
            prop_assert!(shown.contains("***"), "{text} -> {shown}");
        }
    }

    /// The same forms once more escaped: a JSON line quoted inside a JSON string, a repr of a
    /// JSON line, an event line's field name quoted by Rust's `Debug`.
    #[test]
    fn a_password_escaped_twice_never_survives(pw in any_password()) {
        prop_assume!(!pw.contains('*'));
        let secrets = [pw.clone()];
        let line = serde_json::json!({ "ev": "grant", pw.as_str(): 1 }).to_string();
        let ascii_line = format!("{{\"ev\": \"grant\", {}: 1}}", json_ascii(&pw));
        for text in [
            serde_json::to_string(&line).unwrap(),
            python_repr(&line, false),
            format!("{line:?}"),
            format!("{ascii_line:?}"),
            serde_json::to_string(&ascii_line).unwrap(),
        ] {
            let shown = redact_all(&text, &secrets);
            for f in escaped_forms(&pw) {
                prop_assert!(!shown.contains(f.as_str()), "{text} leaves {f:?} in {shown}");
            }
            prop_assert!(shown.contains("grant"), "{text} -> {shown}");
        }
    }
}

// ---- issue 52 item 3: Redis keys are bytes ----------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Any bytes after `pacesim:lease:`: never a panic, and a run id only when the bytes are
    /// exactly one of pacesim's own form.
    #[test]
    fn any_bytes_after_the_lease_prefix_name_a_run_only_of_pacesims_form(
        tail in proptest::collection::vec(any::<u8>(), 0..40),
        pid in 1u32..4_000_000,
        hex in 0u32..=u32::MAX,
    ) {
        use pacesim::live::redis::{is_own_run_id, lease_key, run_of_lease_key};
        let mut key = b"pacesim:lease:".to_vec();
        key.extend_from_slice(&tail);
        match run_of_lease_key(&key) {
            Some(run) => {
                prop_assert_eq!(run.as_bytes(), &tail[..]);
                prop_assert!(is_own_run_id(run));
            }
            None => prop_assert!(std::str::from_utf8(&tail).map_or(true, |t| !is_own_run_id(t))),
        }
        let id = format!("{pid}_{hex:08x}");
        let own = lease_key(&id);
        prop_assert_eq!(run_of_lease_key(own.as_bytes()), Some(id.as_str()));
        // not a lease key at all
        prop_assert_eq!(run_of_lease_key(&tail), None::<&str>);
    }

    /// A key is under a run's prefix by its bytes: whatever bytes follow the prefix (not UTF-8
    /// either) it is found under its own run's prefix, and never under another run's.
    #[test]
    fn byte_keys_are_matched_to_their_run_by_bytes(
        tail in proptest::collection::vec(any::<u8>(), 0..40),
        a in 0u32..=u32::MAX,
        b in 0u32..=u32::MAX,
    ) {
        use pacesim::live::redis::{is_under_prefix, key_prefix};
        prop_assume!(a != b);
        let (mine, other) = (key_prefix(&format!("7_{a:08x}")), key_prefix(&format!("7_{b:08x}")));
        let mut key = mine.clone().into_bytes();
        key.extend_from_slice(&tail);
        prop_assert!(is_under_prefix(&key, &mine));
        prop_assert!(!is_under_prefix(&key, &other));
        // the prefix cut anywhere is not under it
        prop_assert!(!is_under_prefix(&key[..mine.len() - 1], &mine));
    }
}
