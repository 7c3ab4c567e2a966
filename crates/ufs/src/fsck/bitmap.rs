//! A plain bitmap of fixed length, one bit per fragment of the file system.
//! Out-of-range queries answer "set" (in use) and out-of-range updates are
//! ignored, so callers never index past the end.
pub(crate) struct Bitmap {
    words: Vec<u64>,
    nbits: u64,
}

impl Bitmap {
    pub fn new(nbits: u64) -> Bitmap {
        Bitmap {
            words: vec![0; ufs_format::bytes::to_index(nbits.div_ceil(64))],
            nbits,
        }
    }

    #[inline]
    pub fn test(&self, i: u64) -> bool {
        if i >= self.nbits {
            return true;
        }
        self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    #[inline]
    pub fn set(&mut self, i: u64) {
        if i < self.nbits {
            self.words[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    #[inline]
    pub fn clear(&mut self, i: u64) {
        if i < self.nbits {
            self.words[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }

    /// Sets bits `[a, b)` (clamped to the map).
    pub fn set_range(&mut self, a: u64, b: u64) {
        let b = b.min(self.nbits);
        let mut i = a;
        while i < b {
            if i.is_multiple_of(64) && b - i >= 64 {
                self.words[(i / 64) as usize] = u64::MAX;
                i += 64;
            } else {
                self.set(i);
                i += 1;
            }
        }
    }

    /// The 64 bits starting at bit `start`; bits past the end read as set.
    #[inline]
    pub fn get64(&self, start: u64) -> u64 {
        if start >= self.nbits {
            return u64::MAX;
        }
        let w = (start / 64) as usize;
        let s = start % 64;
        let lo = self.words[w] >> s;
        let hi = if s == 0 {
            0
        } else {
            match self.words.get(w + 1) {
                Some(x) => x << (64 - s),
                None => u64::MAX << (64 - s),
            }
        };
        let mut v = lo | hi;
        let left = self.nbits - start;
        if left < 64 {
            v |= u64::MAX << left;
        }
        v
    }

    /// First run of `n` (1..=frag) clear bits inside one aligned block of
    /// `frag` bits, searching blocks from `from` (a block-aligned bit).
    pub fn find_free_run(&self, from: u64, n: u64, frag: u64) -> Option<u64> {
        let mut blk = from - from % frag;
        while blk + frag <= self.nbits {
            if frag == 8 && blk.is_multiple_of(64) && self.get64(blk) == u64::MAX {
                blk += 64;
                continue;
            }
            let mut run = 0;
            for j in 0..frag {
                if self.test(blk + j) {
                    run = 0;
                } else {
                    run += 1;
                    if run == n {
                        return Some(blk + j + 1 - n);
                    }
                }
            }
            blk += frag;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn get64_and_ranges() {
        let mut b = Bitmap::new(130);
        b.set_range(3, 70);
        assert!(b.test(3) && b.test(69) && !b.test(70) && !b.test(2));
        assert_eq!(b.get64(0) & 0xf, 0b1000);
        assert_eq!(b.get64(64) & 0x3f, 0x3f);
        // past the end reads as used
        assert_eq!(b.get64(128) >> 2, u64::MAX >> 2);
        assert!(b.test(500));
        assert_eq!(b.find_free_run(0, 3, 8), Some(0));
        assert_eq!(b.find_free_run(8, 8, 8), Some(72));
    }
}
