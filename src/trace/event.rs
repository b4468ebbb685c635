//! Each event described once: `with_events!` holds every event's name, hash tag, fields (with
//! their docs and serde attributes) and who writes it; everything else is made from it: the
//! [`Event`] enum (and so serde's JSON, which the external-worker parser and the trace reader
//! use), [`Event::t`], the field walk [`Event::visit`] that the canonical encoder
//! (`encode_event`, crate-private) and the trace hash ([`crate::trace::TraceHash`]) are written
//! against, the [`Sink`](crate::trace::Sink) methods of the six kinds nearly every event is
//! ([`Event::to_own_method`]), and the table of events and fields ([`Event::KINDS`]) that
//! docs/traces.md holds.
//!
//! Adding a field to an event is one edit here (CONTRIBUTING.md's event recipe): the encoder,
//! the hash, serde, the docs table and every consumer that names the event with `..` follow;
//! the compiler lists the producers that must now give it a value.

use super::schema::*;
use serde::{Deserialize, Serialize};

fn one() -> f64 {
    1.0
}

fn is_zero(n: &u16) -> bool {
    *n == 0
}

/// Calls the macro `$cb` with every event's description, after the tokens `[$($pre)*]`.
///
/// Each event: its doc comment; `name Variant = tag`, the name the trace writes (`ev`), the
/// variant, and the word the trace hash starts it with (fixed here: declaration order may
/// change, hashes may not); `hot` when producers call its own [`Sink`](crate::trace::Sink)
/// method (one of the kinds a fetch always makes); `by "..."`, who writes it (the docs' table);
/// then its fields, each with its docs and serde attributes. `t` comes first in every event;
/// a field named `pid` is the process and `thread` (after `pid`) the thread of its loop: the
/// hash folds the two into one word, and the encoder leaves out a thread of 0, as serde does.
macro_rules! with_events {
    ($($cb:ident)::+ [$($pre:tt)*]) => {
        $($cb)::+! { [$($pre)*]
        /// A process sent an operation to the store.
        op_sent OpSent = 1 hot, by "the process side's worker loop" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process (0 unless `[processes] threads` > 1; absent before version 3).
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
            /// Which operation.
            op: OpKind,
        },
        /// The store granted a slot (pace backends), at `now` on the granting clock.
        grant Grant = 2 hot, by "the store side (pace backends)" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process (0 unless `[processes] threads` > 1; absent before version 3).
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
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
        deny Deny = 3, by "the store side (GCRA deny, lock busy)" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
        },
        /// A reply reached the process; `wait` is how long it will now sleep (ns).
        reply Reply = 4 hot, by "the worker loop" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process (0 unless `[processes] threads` > 1; absent before version 3).
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
            /// Which operation this answers.
            op: OpKind,
            /// Sleep until the slot (ns, reference time).
            wait: u64,
        },
        /// A store operation failed (outage, partition, timeout).
        store_error StoreError = 5, by "the worker loop" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process (0 unless `[processes] threads` > 1; absent before version 3).
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
            /// How it failed.
            error: StoreErrorKind,
        },
        /// A process started a fetch.
        fetch_start FetchStart = 6 hot, by "the worker loop (an external worker's run: the destination)" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process (0 unless `[processes] threads` > 1; absent before version 3).
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
        },
        /// A fetch reached the destination (the witness the ceiling check counts).
        arrival Arrival = 7 hot, by "the destination: the witness the ceiling counts" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process that sent it (0 unless `[processes] threads` > 1): the ceiling
            /// check charges the arrival the multiplier of that thread's grant. Absent before
            /// version 3, and in version 3 traces written before arrivals named their thread.
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
            /// The destination's answer.
            status: u16,
        },
        /// A fetch's response reached the process.
        fetch_end FetchEnd = 8 hot, by "the worker loop (an external worker's run: the destination)" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Thread of the process (0 unless `[processes] threads` > 1; absent before version 3).
            #[serde(default, skip_serializing_if = "is_zero")]
            thread: u16,
            /// Status.
            status: u16,
        },
        /// A backoff multiplier changed; `pid` is `None` for the shared (global) multiplier.
        multiplier Multiplier = 9, by "the backend (store side for a shared one)" {
            /// Time.
            t: u64,
            /// Process owning a per-process multiplier, or none for the global one.
            pid: Option<u32>,
            /// Old value.
            from: f64,
            /// New value.
            to: f64,
            /// Why it changed.
            cause: MultiplierCause,
        },
        /// A lock was taken.
        lock_acquired LockAcquired = 10, by "the store side (lock backends)" {
            /// Time.
            t: u64,
            /// Holder.
            pid: u32,
            /// Lock number.
            lock: u32,
        },
        /// A lock was freed.
        lock_released LockReleased = 11, by "the store side" {
            /// Time.
            t: u64,
            /// Holder it was freed from.
            pid: u32,
            /// Lock number.
            lock: u32,
            /// Why: the holder released it or died, or the store dropped it.
            reason: ReleaseReason,
        },
        /// A job ran without the lock after its bounded wait (the safety valve), or uncapped because
        /// the broker failed.
        uncapped Uncapped = 12, by "the process side (`redis_lock`)" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Why it ran without the lock.
            reason: UncappedReason,
        },
        /// A process switched to or from its fallback pacer.
        fallback Fallback = 13, by "the process side" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// True on entry, false on exit.
            enter: bool,
            /// The fallback pacer's mode.
            mode: FallbackMode,
            /// The multiplier the process's own fallback pacer paces by: on entry where it
            /// starts (the shared multiplier the process last saw, or its own), on exit where it
            /// ended. Version 1 traces lack it: 1.
            #[serde(default = "one")]
            multiplier: f64,
        },
        /// A process was killed (SIGKILL).
        crash Crash = 14, by "the simulator / harness" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Where in its protocol.
            point: CrashPoint,
        },
        /// A fresh process replaced a killed one.
        restart Restart = 15, by "the simulator / harness" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
        },
        /// A fault window opened (`start`) or closed.
        fault Fault = 16, by "the simulator / harness, at each window edge" {
            /// Time.
            t: u64,
            /// Index in the scenario's fault list.
            id: u32,
            /// Fault kind.
            kind: FaultKind,
            /// True at start, false at end.
            start: bool,
        },
        /// A download's event (the record's DownloadEvent) changed state: created `pending` by the
        /// tick, `requeued` or `redelivered` (still the same event), `running` when its walk
        /// starts, then finalised (`complete`, `partial`, `timeout`, `soft_limit`) or `stranded` by
        /// the recovery sweep.
        job_event JobEvent = 18, by "`[jobs]` scenarios (`src/task.rs`)" {
            /// Time.
            t: u64,
            /// The source the download is for.
            source: u32,
            /// The event's number (one per event the tick creates, never reused).
            event: u32,
            /// The process executing its task; none for the tick and the sweep.
            pid: Option<u32>,
            /// The new state.
            state: JobState,
        },
        /// A source's run-until-done backfill changed state (time-boxed chunks).
        backfill Backfill = 19, by "`[jobs]` scenarios with a catalog" {
            /// Time.
            t: u64,
            /// The source.
            source: u32,
            /// The new state.
            state: BackfillState,
            /// Chunks finished so far.
            chunks: u32,
        },
        /// A process's job (a walk) is on platform `platform` (an index into
        /// `backend_detail.platforms`), from now until its next `platform` event: the fetches it
        /// makes meanwhile reach that platform's destination. Only in traces that declare
        /// platforms (version 3).
        platform Platform = 20, by "`[[platforms]]` scenarios" {
            /// Time.
            t: u64,
            /// Process.
            pid: u32,
            /// Index into `backend_detail.platforms`.
            platform: u32,
        },
        /// The run ended.
        end End = 17, by "the simulator / harness, last" {
            /// Time.
            t: u64,
        },
        }
    };
}
pub(crate) use with_events;

/// One field's value as [`Event::visit`] hands it over: what the encoder and the hash need
/// to know of its type.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Val {
    /// An unsigned integer.
    U(u64),
    /// A signed integer.
    I(i64),
    /// A number.
    F(f64),
    /// A boolean.
    B(bool),
    /// A store operation (the hash takes it as its fixed number).
    Op(OpKind),
    /// One of a closed set of names.
    Name(&'static str),
    /// The process (a field named `pid`).
    Pid(u32),
    /// The thread of the process's loop (a field named `thread`, after `pid`).
    Thread(u16),
    /// A process, or none (a field named `pid` that may be absent: `null`).
    MaybePid(Option<u32>),
}

/// A type an event's field may have: how [`Event::visit`] hands it over, and the names it
/// takes (for the docs' table).
pub(crate) trait FieldValue: Copy {
    /// The value as the walk hands it over.
    fn val(self) -> Val;
    /// Every name it takes, when it is one of a closed set of names.
    fn names() -> Vec<&'static str> {
        Vec::new()
    }
}

macro_rules! plain_values {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl FieldValue for $t {
            #[inline(always)]
            fn val(self) -> Val {
                Val::$v(self.into())
            }
        })*
    };
}
plain_values!(u64 => U, u32 => U, u16 => U, i64 => I, f64 => F, bool => B);

impl FieldValue for OpKind {
    #[inline(always)]
    fn val(self) -> Val {
        Val::Op(self)
    }
    fn names() -> Vec<&'static str> {
        OpKind::ALL.iter().map(|o| o.name()).collect()
    }
}

macro_rules! named_values {
    ($($t:ty),* $(,)?) => {
        $(impl FieldValue for $t {
            #[inline(always)]
            fn val(self) -> Val {
                Val::Name(self.name())
            }
            fn names() -> Vec<&'static str> {
                <$t>::ALL.iter().map(|v| v.name()).collect()
            }
        })*
    };
}
named_values!(
    StoreErrorKind,
    MultiplierCause,
    ReleaseReason,
    UncappedReason,
    FallbackMode,
    CrashPoint,
    FaultKind,
    JobState,
    BackfillState,
);

/// A `pid` field's type: a process, or a process or none.
pub(crate) trait PidValue: Copy {
    /// The value as the walk hands it over.
    fn pid_val(self) -> Val;
}
impl PidValue for u32 {
    #[inline(always)]
    fn pid_val(self) -> Val {
        Val::Pid(self)
    }
}
impl PidValue for Option<u32> {
    #[inline(always)]
    fn pid_val(self) -> Val {
        Val::MaybePid(self)
    }
}
impl FieldValue for Option<u32> {
    #[inline(always)]
    fn val(self) -> Val {
        Val::MaybePid(self)
    }
}

/// A field's value by its name's role: `pid`, `thread`, or any other.
macro_rules! field_val {
    (pid, $e:expr) => {
        PidValue::pid_val($e)
    };
    (thread, $e:expr) => {
        Val::Thread($e)
    };
    ($f:ident, $e:expr) => {
        FieldValue::val($e)
    };
}

/// What walks an event's fields ([`Event::visit`]): the canonical encoder, the trace hash.
pub trait Walk {
    /// The event's kind: its name in the trace and its hash tag. Called first.
    fn kind(&mut self, name: &'static str, tag: u64);
    /// One field, in declaration order (`t` first).
    fn field(&mut self, name: &'static str, v: Val);
    /// After the last field.
    fn done(&mut self);
}

/// One event kind as the docs' table describes it ([`Event::KINDS`]).
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The name the trace writes (`ev`).
    pub name: &'static str,
    /// The trace hash's first word for it.
    pub tag: u64,
    /// Whether producers call its own [`Sink`](crate::trace::Sink) method.
    pub hot: bool,
    /// Who writes it.
    pub by: &'static str,
    /// Its docs.
    pub doc: &'static str,
    /// Its fields, in order.
    pub fields: &'static [Field],
}

/// One field of an event kind ([`Kind`]).
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Its name.
    pub name: &'static str,
    /// Its Rust type, as written.
    pub ty: &'static str,
    /// Its docs.
    pub doc: &'static str,
    /// Every name it takes, when it takes one of a closed set of names.
    pub names: fn() -> Vec<&'static str>,
}

macro_rules! is_hot {
    () => {
        false
    };
    (hot) => {
        true
    };
}

macro_rules! define_events {
    ([] $(
        $(#[doc = $vdoc:literal])*
        $name:ident $V:ident = $tag:literal $($hot:ident)?, by $by:literal {
            $( $(#[doc = $fdoc:literal])* $(#[serde($($sa:tt)*)])? $f:ident : $ty:ty ),* $(,)?
        }
    ),* $(,)?) => {
        /// One event. `t` is nanoseconds on the reference timeline. Described once, in
        /// `with_events!` (`src/trace/event.rs`).
        ///
        /// (48 bytes; `thread` is a `u16` so that `grant` still fits. `repr(u8)` would put `t`
        /// at one offset in every variant, making [`Event::t`] one load for the consumers, but
        /// its C layout pads the event to 56 bytes, and the simulator's thread, which copies
        /// every event into the pipe and sets the wall time, would copy a sixth more.)
        #[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "ev", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Event {
            $(
                $(#[doc = $vdoc])*
                $V {
                    $( $(#[doc = $fdoc])* $(#[serde($($sa)*)])? $f: $ty, )*
                },
            )*
        }

        impl Event {
            /// Every kind of event, in declaration order: name, hash tag, fields (the docs' table).
            pub const KINDS: &'static [Kind] = &[$(
                Kind {
                    name: stringify!($name),
                    tag: $tag,
                    hot: is_hot!($($hot)?),
                    by: $by,
                    doc: concat!($($vdoc, "\n"),*),
                    fields: &[$(
                        Field {
                            name: stringify!($f),
                            ty: stringify!($ty),
                            doc: concat!($($fdoc, "\n"),*),
                            names: <$ty as FieldValue>::names,
                        },
                    )*],
                },
            )*];

            /// The event's time.
            #[inline]
            pub fn t(&self) -> u64 {
                match *self {
                    $( Event::$V { t, .. } => t, )*
                }
            }

            /// The name the trace writes for this event (`ev`).
            pub fn name(&self) -> &'static str {
                match *self {
                    $( Event::$V { .. } => stringify!($name), )*
                }
            }

            /// Walks the event: its kind, then each field in order.
            #[inline(always)]
            pub fn visit<W: Walk>(&self, w: &mut W) {
                match *self {
                    $( Event::$V { $($f),* } => {
                        w.kind(stringify!($name), $tag);
                        $( w.field(stringify!($f), field_val!($f, $f)); )*
                        w.done();
                    } )*
                }
            }
        }
    };
}

with_events!(define_events []);

/// A hot kind's own [`Sink`](crate::trace::Sink) method (nothing for other kinds), its body
/// by the mode in brackets: `[event]` (the trait's default: build the event, hand it to
/// `event`), `[#[attrs] by_ref m]` (build it, hand `&event` to `self.m`), `[by_value m]` (hand
/// it over by value), `[forward field]` (call the same method of `self.field`).
macro_rules! own_method {
    ($mode:tt; ; $($rest:tt)*) => {};
    ([event]; hot; $name:ident $V:ident; $($f:ident: $ty:ty),*) => {
        #[doc = concat!("`", stringify!($name), "`, as its own method (see the trait's docs).")]
        #[inline]
        #[allow(clippy::too_many_arguments)]
        fn $name(&mut self, $($f: $ty),*) {
            self.event(&$crate::trace::Event::$V { $($f),* });
        }
    };
    ([$(#[$a:meta])* by_ref $m:ident]; hot; $name:ident $V:ident; $($f:ident: $ty:ty),*) => {
        $(#[$a])*
        #[allow(clippy::too_many_arguments)]
        fn $name(&mut self, $($f: $ty),*) {
            self.$m(&$crate::trace::Event::$V { $($f),* });
        }
    };
    ([$(#[$a:meta])* by_value $m:ident]; hot; $name:ident $V:ident; $($f:ident: $ty:ty),*) => {
        $(#[$a])*
        #[allow(clippy::too_many_arguments)]
        fn $name(&mut self, $($f: $ty),*) {
            self.$m($crate::trace::Event::$V { $($f),* });
        }
    };
    ([forward $field:ident]; hot; $name:ident $V:ident; $($f:ident: $ty:ty),*) => {
        #[allow(clippy::too_many_arguments)]
        fn $name(&mut self, $($f: $ty),*) {
            self.$field.$name($($f),*);
        }
    };
}

/// The [`Sink`](crate::trace::Sink) methods of the hot kinds (`op_sent`, `grant`, `reply`,
/// `fetch_start`, `arrival`, `fetch_end`), each with its fields as arguments, in a `Sink`
/// trait or impl: `with_events!(own_methods [mode])`, the mode as `own_method`
/// says.
macro_rules! own_methods {
    ([$mode:tt] $(
        $(#[doc = $vdoc:literal])*
        $name:ident $V:ident = $tag:literal $($hot:ident)?, by $by:literal {
            $( $(#[doc = $fdoc:literal])* $(#[serde($($sa:tt)*)])? $f:ident : $ty:ty ),* $(,)?
        }
    ),* $(,)?) => {
        $( $crate::trace::event::own_method!($mode; $($hot)?; $name $V; $($f: $ty),*); )*
    };
}
pub(crate) use own_method;
pub(crate) use own_methods;

/// A field as the docs' table writes it: its name, then what it takes (the names, or its
/// type); `t`, `pid` and `thread` are described above the table.
fn field_markdown(f: &Field) -> String {
    let names = (f.names)();
    let what = if !names.is_empty() {
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    } else {
        // (`stringify!` writes `Option<u32>` spaced)
        match (f.name, f.ty.replace(' ', "").as_str()) {
            ("t" | "pid" | "thread", "u64" | "u32" | "u16") => String::new(),
            (_, "Option<u32>") => "u32, or `null`".into(),
            (_, "f64") => "number".into(),
            (_, ty) => ty.into(),
        }
    };
    if what.is_empty() {
        format!("`{}`", f.name)
    } else {
        format!("`{}` ({what})", f.name)
    }
}

/// The docs' table of events (docs/traces.md), made from [`Event::KINDS`]: each event's name,
/// what it says (its docs' first sentence), its fields in order and who writes it.
pub fn markdown_table() -> String {
    let mut out = String::from("| `ev` | what | fields | written by |\n|---|---|---|---|\n");
    for k in Event::KINDS {
        let first = k.doc.split("\n").map(str::trim).collect::<Vec<_>>().join(" ");
        let first = match first.find(". ") {
            Some(i) => &first[..=i],
            None => first.trim(),
        };
        let fields = k.fields.iter().map(field_markdown).collect::<Vec<_>>().join(", ");
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            k.name,
            first.trim(),
            fields,
            k.by
        ));
    }
    out
}
