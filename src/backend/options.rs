//! Reading a backend's options out of the scenario's `[pacer]` table.
//!
//! Each backend declares its options as one typed struct (`deny_unknown_fields`; each field's
//! doc states its default and where the default comes from). [`parse`] reads the struct from
//! `[pacer]`'s keys other than `backend`, `compare` and `rate`. With a `compare` list each
//! backend reads only the options it uses; an option none of them uses is an error.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// `[pacer]`'s backend options, as written.
pub type Table = toml::Table;

/// The field names of options struct `T`, as serde reads them.
pub fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Capture(Option<&'static [&'static str]>);
    #[derive(Clone, Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("stop")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Stop {
            Stop
        }
    }
    impl<'de> Deserializer<'de> for &mut Capture {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0 = Some(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut c = Capture(None);
    let _ = T::deserialize(&mut c);
    c.0.unwrap_or(&[])
}

/// Why options did not parse: the option (a `[pacer]` key, possibly dotted) and what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct OptionError {
    /// The option, e.g. `poll` or `in_transaction.hold`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl OptionError {
    /// An error about option `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> OptionError {
        OptionError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Read options struct `T` for backend `backend` from `table`. `strict`: every key must be
/// one of `T`'s (a scenario that runs only this backend); otherwise keys `T` does not have
/// are left for the other backends of a `compare` list.
pub fn parse<T: DeserializeOwned>(backend: &str, table: &Table, strict: bool) -> Result<T, OptionError> {
    let known = fields::<T>();
    let mut mine = Table::new();
    for (k, v) in table {
        if known.contains(&k.as_str()) {
            mine.insert(k.clone(), v.clone());
        } else if strict {
            return Err(OptionError::new(
                k.clone(),
                format!("backend `{backend}` does not use option `{k}`"),
            ));
        }
    }
    T::deserialize(toml::Value::Table(mine.clone())).map_err(|e| {
        let message = e.message().trim().replace('\n', " ");
        // serde names the field in its message for a bad value (`invalid value ... for key
        // `x``), but not for a value of the wrong type (`invalid type: integer `3`, expected
        // a string`): then the option that fails alone with the same message is the one
        let alone = |k: &String, v: &toml::Value| {
            let one = Table::from_iter([(k.clone(), v.clone())]);
            T::deserialize(toml::Value::Table(one))
                .err()
                .is_some_and(|e1| e1.message().trim().replace('\n', " ") == message)
        };
        let field = known
            .iter()
            .find(|f| message.contains(&format!("`{f}`")) || table.len() == 1 && table.contains_key(**f))
            .map(|f| f.to_string())
            .or_else(|| mine.iter().find(|(k, v)| alone(k, v)).map(|(k, _)| k.clone()))
            .unwrap_or_else(|| "(options)".to_string());
        OptionError::new(field, message)
    })
}

/// Behaviour when the store is unreachable.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// Pace locally at the full rate (restores N x rate during an outage).
    FailOpen,
    /// Pace locally at `rate / (cap + 1)`.
    Divided,
    /// Stop fetching until the store answers.
    FailClosed,
}

impl Fallback {
    /// The mode's name, as in scenario files and traces.
    pub fn name(self) -> &'static str {
        match self {
            Fallback::FailOpen => "fail_open",
            Fallback::Divided => "divided",
            Fallback::FailClosed => "fail_closed",
        }
    }
}

/// Where a piece of backoff state lives.
#[derive(Hash, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// In the shared store, one value for every process.
    Global,
    /// In each process's memory.
    PerProcess,
}

impl From<Placement> for crate::trace::BackoffPlace {
    fn from(p: Placement) -> Self {
        match p {
            Placement::Global => crate::trace::BackoffPlace::Global,
            Placement::PerProcess => crate::trace::BackoffPlace::PerProcess,
        }
    }
}

/// A count option that must be at least 1.
pub(crate) fn at_least_one(field: &str, v: Option<u32>) -> Result<(), OptionError> {
    match v {
        Some(0) => Err(OptionError::new(field, "must be at least 1")),
        _ => Ok(()),
    }
}

/// A duration option that must be above zero.
pub fn positive(field: &str, v: Option<crate::time::Nanos>) -> Result<(), OptionError> {
    match v {
        Some(d) if d.0 == 0 => Err(OptionError::new(field, "must be above 0")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Opts {
        a: Option<u32>,
        #[serde(default)]
        b: bool,
    }

    fn table(src: &str) -> Table {
        src.parse().unwrap()
    }

    #[test]
    fn fields_are_read_off_the_struct() {
        assert_eq!(fields::<Opts>(), &["a", "b"]);
    }

    #[test]
    fn strict_parsing_names_the_unused_option_and_lenient_leaves_it() {
        let t = table("a = 3\nc = 1");
        assert_eq!(
            parse::<Opts>("x", &t, true).unwrap_err(),
            OptionError::new("c", "backend `x` does not use option `c`")
        );
        assert_eq!(parse::<Opts>("x", &t, false).unwrap(), Opts { a: Some(3), b: false });
        let e = parse::<Opts>("x", &table("a = \"no\""), true).unwrap_err();
        assert_eq!(e.field, "a", "{e}");
        // a wrong type among other options names its own option, not "(options)"
        let e = parse::<Opts>("x", &table("b = true\na = \"no\""), true).unwrap_err();
        assert_eq!(e.field, "a", "{e}");
    }
}
