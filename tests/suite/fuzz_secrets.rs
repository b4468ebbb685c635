//! Issue 34 item 4, fuzzed: whatever characters a password holds, pacesim's redaction removes
//! it from the URL it shows and from any text that quotes it (as written or percent-encoded).
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
