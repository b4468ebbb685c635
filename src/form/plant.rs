//! Planted pruning bugs, for the prune audit's own test ([`planted`]): each a test-only
//! switch that breaks one thing a sound pruning relies on, so that the audit is seen to fail
//! on it. Outside `cfg(test)` nothing is ever planted (the check is a constant `false`).

/// A bug the audit must catch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Plant {
    /// `redis_gcra`'s store side leaves its TAT out of its form.
    GcraTat,
    /// `redis_gcra`'s store side leaves its TAT out of its form, and `slot_ceiling`'s meter of
    /// granted slots (a GCRA over the same grants at the same rate: the same TAT whenever the
    /// store's is ahead) leaves out its own: the TAT is then implied by nothing else.
    GcraTatAndItsMirror,
    /// `redis_gcra`'s store side leaves its TAT out of its form, and so does every part that
    /// implies it on the audit's trees: `slot_ceiling`'s slot meter, `backoff_coherence`'s
    /// spacing property (the shared authority's TAT: the previous shared grant's slot plus
    /// interval x multiplier, in reference time), and each process's fallback (its last
    /// shared slot, from which it spaces a fallback's first fetch).
    GcraTatAndEveryMirror,
    /// Pending events are fingerprinted without how far ahead they are due.
    PendingDue,
    /// A seen state covers a new one with *less* slack (the comparison the wrong way).
    SlackReversed,
    /// Closing a seen state forgets that a continuation was cut by the scenario's duration.
    CutForgotten,
    /// `ceiling`'s form leaves out its arrival meter's theoretical arrival time (its verdict
    /// reads it: the next arrival conforms or not by it).
    CeilingTat,
    /// The depth-first walk skips the last way of every choice.
    WalkSkipsLast,
    /// The world leaves itself out of a state's form (the checkers' parts alone).
    WorldLeftOut,
    /// Symmetry reduction: `ceiling`'s per-process memory (each process's multiplier, its
    /// threads' authorised ones, whether it is cut off) kept by the processes' ids, in their
    /// order, not by their labels.
    CeilingKeptById,
}

#[cfg(test)]
thread_local! {
    static PLANTED: std::cell::Cell<Option<Plant>> = const { std::cell::Cell::new(None) };
}

/// Is `p` planted (on this thread)? Always `false` outside tests.
#[inline(always)]
pub fn planted(p: Plant) -> bool {
    #[cfg(test)]
    {
        PLANTED.with(|c| c.get() == Some(p))
    }
    #[cfg(not(test))]
    {
        let _ = p;
        false
    }
}

/// Plant `p` on this thread while `f` runs.
#[cfg(test)]
pub fn with<R>(p: Plant, f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PLANTED.with(|c| c.set(None));
        }
    }
    PLANTED.with(|c| c.set(Some(p)));
    let _reset = Reset;
    f()
}

/// The value the form being made left out, and each made state's exact part with the value
/// its form left out.
#[cfg(test)]
type LeftOut = (Option<u64>, Vec<(u64, u64)>);

#[cfg(test)]
thread_local! {
    static LEFT_OUT: std::cell::RefCell<Option<LeftOut>> = const { std::cell::RefCell::new(None) };
}

/// A value a planted form left out (the part of the state it would have added), while
/// [`leaving_out`] on this thread: paired with the key of the state whose form it is.
#[cfg(test)]
pub fn left_out(v: u64) {
    LEFT_OUT.with(|l| {
        if let Some((last, _)) = l.borrow_mut().as_mut() {
            *last = Some(v);
        }
    });
}

/// A state's key was made: the value its form left out ([`left_out`]), if any, joins it.
#[cfg(test)]
pub fn keyed(k: &super::Key) {
    LEFT_OUT.with(|l| {
        if let Some((last, pairs)) = l.borrow_mut().as_mut()
            && let Some(v) = last.take()
        {
            pairs.push((k.exact, v));
        }
    });
}

/// Run `f`, with each value a planted form leaves out recorded beside its state's exact part:
/// its result and the pairs.
#[cfg(test)]
pub fn leaving_out<R>(f: impl FnOnce() -> R) -> (R, Vec<(u64, u64)>) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            LEFT_OUT.with(|l| *l.borrow_mut() = None);
        }
    }
    LEFT_OUT.with(|l| *l.borrow_mut() = Some((None, Vec::new())));
    let _reset = Reset;
    let r = f();
    let pairs = LEFT_OUT.with(|l| l.borrow_mut().take().map(|(_, p)| p).unwrap_or_default());
    (r, pairs)
}

#[cfg(test)]
thread_local! {
    static SAW: std::cell::RefCell<Option<Vec<super::Key>>> = const { std::cell::RefCell::new(None) };
}

/// A state a run visited (a pruning run's, or an auditing one's): recorded while
/// [`watching`] on this thread.
#[cfg(test)]
pub fn saw(k: &super::Key) {
    SAW.with(|s| {
        if let Some(v) = s.borrow_mut().as_mut() {
            v.push(k.clone());
        }
    });
    LOG.with(|l| {
        if let Some((ev, marks)) = l.borrow_mut().as_mut() {
            marks.push(ev.len());
        }
    });
}

/// Run `f`, with every state runs on this thread visit recorded: its result and the states.
#[cfg(test)]
pub fn watching<R>(f: impl FnOnce() -> R) -> (R, Vec<super::Key>) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            SAW.with(|s| *s.borrow_mut() = None);
        }
    }
    SAW.with(|s| *s.borrow_mut() = Some(Vec::new()));
    let _reset = Reset;
    let r = f();
    let seen = SAW.with(|s| s.borrow_mut().take().unwrap_or_default());
    (r, seen)
}

/// A run's events as the meetings audit compares them (kind, process, instant), and how many
/// had happened at each state visited.
#[cfg(test)]
type Log = (Vec<(u8, u32, u64)>, Vec<usize>);

#[cfg(test)]
thread_local! {
    static LOG: std::cell::RefCell<Option<Log>> = const { std::cell::RefCell::new(None) };
}

/// An event of the run (while [`logging`] on this thread).
#[cfg(test)]
pub fn log_event(kind: u8, pid: u32, t: u64) {
    LOG.with(|l| {
        if let Some((ev, _)) = l.borrow_mut().as_mut() {
            ev.push((kind, pid, t));
        }
    });
}

/// Run `f` with the events logged ([`log_event`]) and, at each state visited, how many there
/// were: its result, the events, the marks.
#[cfg(test)]
pub fn logging<R>(f: impl FnOnce() -> R) -> (R, Log) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            LOG.with(|l| *l.borrow_mut() = None);
        }
    }
    LOG.with(|l| *l.borrow_mut() = Some((Vec::new(), Vec::new())));
    let _reset = Reset;
    let r = f();
    let log = LOG.with(|l| l.borrow_mut().take().unwrap_or_default());
    (r, log)
}
