//! One seeded random stream per entity.
//!
//! Every random draw in a simulation comes from the stream of the entity that makes it: a
//! process (by id and incarnation), the store, the destination, or the fault schedule. A stream
//! is derived from the scenario seed and the entity's identity alone, so adding a process does
//! not change any other entity's draws, and a rerun with the same seed replays exactly.
//! The generator is PCG-64 (MCG variant) from `rand_pcg`, which is portable and value-stable.
//!
//! In a run tied to a choice source ([`crate::choice`], which the simulator enters for the
//! run's duration on its thread) every word drawn is recorded or replayed, and draws from
//! distributions become an explorer's choices. A stream stays 16 bytes: the source is the
//! thread's, not the stream's (a worker's hot fields fill three cache lines exactly).

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// A seeded random stream: PCG-64 (MCG variant), its words passed through the thread's choice
/// source while one is entered.
#[derive(Clone)]
#[repr(transparent)]
pub struct Rng(Pcg64Mcg);

/// Where the stream is (what tells two worlds apart): an explorer fingerprints a world by what
/// it declares (`Hash`, which reads the same two words), and two streams at different places
/// go on differently. (`rand_pcg` hides
/// its generator's state from `Debug`, printing `Mcg128Xsl64 {}` for every stream; the next
/// two words, drawn from a copy, name the place instead.)
impl std::fmt::Debug for Rng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use rand::Rng as _;
        let mut ahead = self.0.clone();
        write!(f, "Rng({:x}, {:x})", ahead.next_u64(), ahead.next_u64())
    }
}

/// Where the stream is, as its `Debug` names it: the next two words, drawn from a copy.
impl std::hash::Hash for Rng {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        use rand::Rng as _;
        let Rng(stream) = self;
        let mut ahead = stream.clone();
        h.write_u64(ahead.next_u64());
        h.write_u64(ahead.next_u64());
    }
}

impl Rng {
    /// A stream from a 16-byte seed.
    pub(crate) fn from_seed(seed: [u8; 16]) -> Rng {
        Rng(Pcg64Mcg::from_seed(seed))
    }
}

impl rand::TryRng for Rng {
    type Error = std::convert::Infallible;

    #[inline(always)]
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        // (the low half, as PCG's own `next_u32`: every draw is what it was)
        Ok(rand::TryRng::try_next_u64(self)? as u32)
    }

    #[inline(always)]
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        use rand::Rng as _;
        let w = self.0.next_u64();
        Ok(if crate::choice::active() {
            crate::choice::word(w)
        } else {
            w
        })
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        rand::rand_core::utils::fill_bytes_via_next_word(dst, || rand::TryRng::try_next_u64(self))
    }
}

/// Who owns a random stream.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Entity {
    /// Worker process `pid`, `incarnation` (a restarted process gets a fresh stream).
    Process {
        /// Process id.
        pid: u32,
        /// 0 for the first start, incremented on every restart.
        incarnation: u32,
    },
    /// The shared store (service times, network latency to and from it).
    Store,
    /// The destination (response times, 503 draws).
    Destination,
    /// The fault schedule (randomly drawn fault times and targets).
    Faults,
    /// Open-loop arrivals for process `pid`.
    Arrivals(u32),
    /// The monotonic clock epoch of process `pid`, `incarnation` (drawn the same way by the
    /// simulator and by a live worker).
    Clock {
        /// Process id.
        pid: u32,
        /// 0 for the first start, incremented on every restart.
        incarnation: u32,
    },
    /// The platforms of process `pid`'s jobs (only when the scenario declares platforms; a
    /// restarted process goes on with its predecessor's sequence afresh).
    Platforms(u32),
    /// Thread `thread` (>= 1) of process `pid`, `incarnation` (thread 0 draws from the
    /// process's own stream, [`Entity::Process`], so a one-thread process draws as before).
    Thread {
        /// Process id.
        pid: u32,
        /// 0 for the first start, incremented on every restart (taken modulo 4096).
        incarnation: u32,
        /// The thread.
        thread: u16,
    },
}

/// SplitMix64 finaliser: a bijective 64-bit mixer (Steele, Lea, Flood 2014).
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Entity {
    fn key(self) -> u64 {
        match self {
            Entity::Process { pid, incarnation } => (1 << 60) | ((incarnation as u64) << 32) | pid as u64,
            Entity::Store => 2 << 60,
            Entity::Destination => 3 << 60,
            Entity::Faults => 4 << 60,
            Entity::Arrivals(pid) => (5 << 60) | pid as u64,
            Entity::Clock { pid, incarnation } => (6 << 60) | ((incarnation as u64) << 32) | pid as u64,
            Entity::Platforms(pid) => (7 << 60) | pid as u64,
            Entity::Thread {
                pid,
                incarnation,
                thread,
            } => (8 << 60) | ((incarnation as u64 & 0xFFF) << 48) | ((thread as u64) << 32) | pid as u64,
        }
    }
}

/// The random stream of `entity` under scenario seed `seed`.
pub fn stream(seed: u64, entity: Entity) -> Rng {
    let a = mix64(seed ^ mix64(entity.key()));
    let b = mix64(a ^ 0xD1B5_4A32_D192_ED03);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    Rng::from_seed(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn streams_are_independent_and_stable() {
        let mut a = stream(1, Entity::Process { pid: 0, incarnation: 0 });
        let mut b = stream(1, Entity::Process { pid: 1, incarnation: 0 });
        let mut a2 = stream(1, Entity::Process { pid: 0, incarnation: 0 });
        let x: u64 = a.next_u64();
        assert_eq!(x, a2.next_u64());
        assert_ne!(x, b.next_u64());
        assert_ne!(x, stream(2, Entity::Process { pid: 0, incarnation: 0 }).next_u64());
    }

    /// An explorer's fingerprint of a world covers where each stream is: one stream drawn
    /// once more than another is another world, and the same place prints alike.
    #[test]
    fn a_streams_place_shows_in_its_fingerprint() {
        use crate::choice::fingerprint;
        let a = stream(1, Entity::Store);
        let mut b = a.clone();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let _ = b.next_u64();
        assert_ne!(fingerprint(&a), fingerprint(&b), "{a:?} against {b:?}");
        assert_ne!(
            fingerprint(&a),
            fingerprint(&stream(1, Entity::Destination)),
            "two entities' streams"
        );
    }
}
