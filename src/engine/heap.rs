//! A 4-ary min-heap: the engine's queue of keys.
//!
//! Half the depth of a binary heap, and a node's four children share a cache line or two, so a
//! pop (the engine's hottest operation: every heap event is popped once) touches half as many
//! levels for a few more comparisons per level. `std::collections::BinaryHeap` is the
//! reference it is tested against.

/// A min-heap: [`QuadHeap::pop`] returns the least element.
#[derive(Debug, Clone)]
pub struct QuadHeap<K> {
    // invariant: every element is >= its parent, `keys[(i - 1) / 4]`.
    keys: Vec<K>,
}

impl<K> QuadHeap<K> {
    /// Every key, in heap order (not sorted).
    pub fn keys(&self) -> &[K] {
        &self.keys
    }
}

impl<K: Ord + Copy> Default for QuadHeap<K> {
    fn default() -> Self {
        QuadHeap { keys: Vec::new() }
    }
}

impl<K: Ord + Copy> QuadHeap<K> {
    /// The least element.
    pub fn peek(&self) -> Option<&K> {
        self.keys.first()
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when empty.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Add `k`.
    pub fn push(&mut self, k: K) {
        // sift up: move parents down into the hole until k's place is found
        let mut i = self.keys.len();
        self.keys.push(k);
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.keys[parent] <= k {
                break;
            }
            self.keys[i] = self.keys[parent];
            i = parent;
        }
        self.keys[i] = k;
    }

    /// Remove and return the least element.
    pub fn pop(&mut self) -> Option<K> {
        let last = self.keys.pop()?;
        let Some(&top) = self.keys.first() else {
            return Some(last);
        };
        // sift down: the last element goes in at the root, the least child moves up until
        // none is less than it
        let n = self.keys.len();
        let mut i = 0;
        loop {
            let first = 4 * i + 1;
            if first >= n {
                break;
            }
            let least = if first + 4 <= n {
                // a full family: a two-round tournament the compiler can make branch-free
                let k = &self.keys[first..first + 4];
                let a = if k[1] < k[0] { 1 } else { 0 };
                let b = if k[3] < k[2] { 3 } else { 2 };
                first + if k[b] < k[a] { b } else { a }
            } else {
                let mut least = first;
                for c in first + 1..n {
                    if self.keys[c] < self.keys[least] {
                        least = c;
                    }
                }
                least
            };
            if self.keys[least] >= last {
                break;
            }
            self.keys[i] = self.keys[least];
            i = least;
        }
        self.keys[i] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Any mix of pushes and pops gives what std's binary heap gives.
    #[test]
    fn pops_what_a_binary_heap_pops() {
        for (range, seed) in [(8u64, 1), (1 << 20, 2), (u64::MAX, 3)] {
            let mut r = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
            let mut q = QuadHeap::default();
            let mut reference = BinaryHeap::new();
            for _ in 0..50_000 {
                if r.random_bool(0.52) {
                    let k = r.random_range(0..range);
                    q.push(k);
                    reference.push(Reverse(k));
                } else {
                    assert_eq!(q.pop(), reference.pop().map(|Reverse(k)| k));
                }
                assert_eq!(q.len(), reference.len());
                assert_eq!(q.peek(), reference.peek().map(|Reverse(k)| k));
            }
            while let Some(Reverse(k)) = reference.pop() {
                assert_eq!(q.pop(), Some(k));
            }
            assert!(q.is_empty() && q.pop().is_none());
        }
    }
}
