//! Where the lines already read ended, and the hash of everything before each end: how
//! a follower tells which lines a truncated or rewritten file still holds, so that it
//! neither repeats them nor loses the ones that changed.
//!
//! Invariants: marks are in file order; the newest [`DENSE`] lines each have one (a
//! file shortened by its last lines, the common case, is matched exactly); older lines
//! keep one every `stride` lines over the whole file, the stride doubling whenever
//! they would be more than [`DENSE`], so there are never more than `2 * DENSE` marks
//! however long the file (a few KiB per followed file).

use super::Checkpoint;
use std::collections::VecDeque;

/// How many of the newest line ends are always marked, and how many older ones are.
const DENSE: usize = 256;

#[derive(Debug)]
pub(super) struct Marks {
    /// Older line ends, each at a line that is a multiple of `stride`.
    sparse: Vec<Checkpoint>,
    stride: u64,
    /// The newest line ends, every one.
    dense: VecDeque<Checkpoint>,
}

impl Default for Marks {
    fn default() -> Marks {
        Marks {
            sparse: Vec::new(),
            stride: 1,
            dense: VecDeque::new(),
        }
    }
}

impl Marks {
    /// Records the end of a line; `cp.hash` is the hash of every byte before it.
    pub fn push(&mut self, cp: Checkpoint) {
        if self.dense.back().is_some_and(|l| l.offset >= cp.offset) {
            return;
        }
        self.dense.push_back(cp);
        if self.dense.len() <= DENSE {
            return;
        }
        let old = self.dense.pop_front().expect("more than DENSE");
        if old.line % self.stride != 0 {
            return;
        }
        self.sparse.push(old);
        if self.sparse.len() > DENSE {
            self.stride *= 2;
            let stride = self.stride;
            self.sparse.retain(|m| m.line % stride == 0);
        }
    }

    pub fn clear(&mut self) {
        *self = Marks::default();
    }

    /// The marks at or before byte `len`, oldest first.
    pub fn upto(&self, len: u64) -> impl Iterator<Item = &Checkpoint> {
        self.sparse
            .iter()
            .chain(self.dense.iter())
            .take_while(move |m| m.offset <= len)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sparse.len() + self.dense.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(line: u64) -> Checkpoint {
        Checkpoint {
            offset: line * 10,
            line,
            hash: line,
        }
    }

    #[test]
    fn the_newest_lines_stay_dense_and_the_total_is_bounded() {
        let mut m = Marks::default();
        for line in 1..=100_000 {
            m.push(cp(line));
            assert!(m.len() <= 2 * DENSE);
        }
        let all: Vec<&Checkpoint> = m.upto(u64::MAX).collect();
        let newest: Vec<u64> = all[all.len() - DENSE..].iter().map(|c| c.line).collect();
        assert_eq!(
            newest,
            (100_000 - DENSE as u64 + 1..=100_000).collect::<Vec<_>>()
        );
        assert!(all.windows(2).all(|w| w[0].offset < w[1].offset));
        assert!(all[0].line <= 512, "old lines keep a mark: {}", all[0].line);
        let gaps = all.windows(2).map(|w| w[1].line - w[0].line).max();
        assert!(
            gaps <= Some(512),
            "the stride stays within the bound: {gaps:?}"
        );
        assert!(m.upto(995).all(|c| c.line <= 99));
    }
}
