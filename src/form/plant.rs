//! Planted pruning bugs, for the prune audit's own test ([`planted`]): each a test-only
//! switch that breaks one thing a sound pruning relies on, so that the audit is seen to fail
//! on it. Outside `cfg(test)` nothing is ever planted (the check is a constant `false`).

/// A bug the audit must catch.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Plant {
    /// `redis_gcra`'s store side leaves its TAT out of its form.
    GcraTat,
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
