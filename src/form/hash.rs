//! Fingerprints from declared values, by hashing ([`fingerprint`]): never by formatting text.
//!
//! A part of a state that an explorer compares exactly declares itself through
//! [`std::hash::Hash`]: `#[derive(Hash)]` declares every field exact (a field added later is
//! hashed with the rest: sound by construction), and a type with a field that is not (a float,
//! compared by its bits; a statistic left out; a cache) writes `Hash` by hand destructuring
//! itself with no `..` (`let Self { a, b, c } = self;`), so that a field added later fails to
//! build until it is declared. What is not exact (an instant relative to now, slack, a value
//! left out with its reason) is declared in the part's `form` ([`super::Form`]), by the same
//! exhaustive destructuring.
//!
//! [`Fold`] is the hasher: a fixed multiply-rotate over 64-bit words (no random seed: the same
//! state has the same fingerprint in every run and on every thread), every write a word or
//! whole words of bytes, nothing formatted.

use std::hash::{Hash, Hasher};

/// The fingerprint of a value's declared parts ([`Hash`]), 64 bits.
#[inline]
pub fn fingerprint<T: Hash + ?Sized>(v: &T) -> u64 {
    let mut h = Fold::default();
    v.hash(&mut h);
    h.finish()
}

/// The fingerprint of floats declared exact, by their bits ([`Floats`]).
#[inline]
pub fn fingerprint_bits<T: Floats + ?Sized>(v: &T) -> u64 {
    let mut h = Fold::default();
    v.hash_bits(&mut h);
    h.finish()
}

/// The width of a fingerprint, bits (a [`super::Key`]'s exact part).
pub const WIDTH: u32 = 64;

/// An estimate of the chance that two of `states` distinct states share a fingerprint (so that
/// one was taken for the other and its continuations never explored): the birthday bound
/// `n (n - 1) / 2 / 2^64`, at most 1 (as TLC reports it).
pub fn collision_odds(states: u64) -> f64 {
    let n = states as f64;
    (n * (n - 1.0).max(0.0) / 2.0 / 2f64.powi(WIDTH as i32)).min(1.0)
}

/// A hasher of declared values into 64 bits: a fixed multiply-rotate step per word (every bit
/// of a word reaches every bit of the state, and order matters), a finalizer at the end.
#[derive(Clone, Debug)]
pub struct Fold(u64);

impl Default for Fold {
    fn default() -> Fold {
        Fold(0x243F_6A88_85A3_08D3)
    }
}

impl Fold {
    /// Add one word.
    #[inline(always)]
    pub fn word(&mut self, w: u64) {
        self.0 = (self.0 ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(31);
    }
}

impl Hasher for Fold {
    #[inline]
    fn finish(&self) -> u64 {
        let z = self.0;
        let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes(w.try_into().expect("eight bytes")));
        }
        let t = words.remainder();
        if !t.is_empty() {
            let mut last = [0u8; 8];
            last[..t.len()].copy_from_slice(t);
            // (its length in the top byte: "a" and "a\0" differ)
            self.word(u64::from_le_bytes(last) | ((t.len() as u64) << 56));
        }
    }

    #[inline(always)]
    fn write_u8(&mut self, i: u8) {
        self.word(u64::from(i));
    }
    #[inline(always)]
    fn write_u16(&mut self, i: u16) {
        self.word(u64::from(i));
    }
    #[inline(always)]
    fn write_u32(&mut self, i: u32) {
        self.word(u64::from(i));
    }
    #[inline(always)]
    fn write_u64(&mut self, i: u64) {
        self.word(i);
    }
    #[inline(always)]
    fn write_u128(&mut self, i: u128) {
        self.word(i as u64);
        self.word((i >> 64) as u64);
    }
    #[inline(always)]
    fn write_usize(&mut self, i: usize) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_i8(&mut self, i: i8) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_i16(&mut self, i: i16) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_i32(&mut self, i: i32) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_i64(&mut self, i: i64) {
        self.word(i as u64);
    }
    #[inline(always)]
    fn write_isize(&mut self, i: isize) {
        self.word(i as u64);
    }
}

/// A float declared exact: compared by its bits (`-0.0` and `0.0` differ, as do NaNs with
/// other payloads: a finer comparison, never a coarser one).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Bits(pub f64);

impl Hash for Bits {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        let Bits(x) = self;
        h.write_u64(x.to_bits());
    }
}

/// Floats declared exact, by their bits ([`Bits`]): what [`exact_hash!`](crate::exact_hash)
/// hashes a field declared `bits` with (a float, or a container of floats).
pub trait Floats {
    /// Hash every float by its bits, in order.
    fn hash_bits<H: Hasher>(&self, h: &mut H);
}

impl Floats for f64 {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.to_bits());
    }
}

impl Floats for u64 {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        h.write_u64(*self);
    }
}

impl<A: Floats, B: Floats> Floats for (A, B) {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        self.0.hash_bits(h);
        self.1.hash_bits(h);
    }
}

impl<T: Floats + ?Sized> Floats for &T {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        (**self).hash_bits(h);
    }
}

impl<T: Floats> Floats for Option<T> {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        match self {
            None => h.write_u8(0),
            Some(v) => {
                h.write_u8(1);
                v.hash_bits(h);
            }
        }
    }
}

impl<T: Floats> Floats for [T] {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        h.write_usize(self.len());
        for v in self {
            v.hash_bits(h);
        }
    }
}

impl<T: Floats> Floats for Vec<T> {
    #[inline]
    fn hash_bits<H: Hasher>(&self, h: &mut H) {
        self.as_slice().hash_bits(h);
    }
}

/// `Hash` for a struct, every field declared, destructured with no `..`: a field added later
/// fails to build until it is declared here. Each field is one of
/// - `name`: exact (its own `Hash`);
/// - `name: bits`: exact, floats by their bits ([`Floats`]);
/// - `name: ignored("why")`: left out, with the reason it cannot change what the state does
///   next (a statistic, a witness's text, a cache of other fields).
///
/// ```
/// # use pacesim::exact_hash;
/// struct Window { count: u64, rate: f64, reads: u64 }
/// exact_hash!(Window { count, rate: bits, reads: ignored("a statistic, never read back") });
/// let w = Window { count: 1, rate: 2.0, reads: 3 };
/// let v = Window { count: 1, rate: 2.0, reads: 4 };
/// assert_eq!(pacesim::form::fingerprint(&w), pacesim::form::fingerprint(&v));
/// ```
#[macro_export]
macro_rules! exact_hash {
    ($ty:ident $(<$($g:ident),*>)? { $($f:ident $(: $how:ident $(($why:literal))?)?),* $(,)? }) => {
        impl$(<$($g: ::std::hash::Hash),*>)? ::std::hash::Hash for $ty$(<$($g),*>)? {
            #[allow(unused_variables)]
            fn hash<H__: ::std::hash::Hasher>(&self, h: &mut H__) {
                let $ty { $($f),* } = self;
                $( $crate::exact_hash!(@field h, $f $(, $how)?); )*
            }
        }
    };
    (@field $h:ident, $f:ident) => { ::std::hash::Hash::hash($f, $h) };
    (@field $h:ident, $f:ident, bits) => { $crate::form::Floats::hash_bits($f, $h) };
    (@field $h:ident, $f:ident, ignored) => { let _ = $f; };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_declared_value_and_its_place_show_in_the_fingerprint() {
        assert_eq!(fingerprint(&(1u64, "ab")), fingerprint(&(1u64, "ab")));
        assert_ne!(fingerprint(&(1u64, 2u64)), fingerprint(&(2u64, 1u64)), "order matters");
        assert_ne!(fingerprint("a"), fingerprint("a\0"));
        assert_ne!(fingerprint(&(Some(0u64),)), fingerprint(&(None::<u64>,)));
        assert_ne!(fingerprint(&vec![1u8]), fingerprint(&vec![1u8, 0]));
        assert_ne!(fingerprint(&Bits(0.0)), fingerprint(&Bits(-0.0)));
    }

    #[test]
    fn the_collision_estimate_is_the_birthday_bound() {
        assert_eq!(collision_odds(0), 0.0);
        assert_eq!(collision_odds(1), 0.0);
        let n = 1u64 << 20;
        let want = (n as f64) * ((n - 1) as f64) / 2.0 / 2f64.powi(64);
        assert!((collision_odds(n) - want).abs() < want * 1e-12);
        assert_eq!(collision_odds(u64::MAX), 1.0);
    }
}
