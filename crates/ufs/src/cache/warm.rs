//! Warm memory for new buffers: zeroed and already faulted in, made ahead
//! of need by a thread that is waiting anyway.
//!
//! A cache that is filling (a fresh mount taking in `tar -x`) gets fresh
//! memory for every new buffer, and the first touch of each 4 KiB page is a
//! page fault, 2-3 µs on the development VM, paid inside the request that
//! wanted the buffer while its client waits. A thread with time to spare (a
//! ring thread polling for the next request, ufs-fuse's `uring`, while
//! hand-off polling is on) calls [`Maker::step`], which zeroes one page of a buffer being
//! made; a finished buffer waits in the stock of its size, and
//! [`BufferCache`](super::BufferCache) takes one ([`Warm::take`], [`WARM`]) instead of
//! allocating.
//!
//! Invariants:
//! - Every buffer in stock has `len() == capacity()`, a size that is a
//!   multiple of 4 KiB up to [`MAX_LEN`], and holds zeros.
//! - The stock and the buffers being made hold at most [`STOCK_BYTES`]
//!   plus one buffer: a maker counts its buffer as it starts it, so two
//!   makers never make the same wanted buffer; what is made follows the sizes asked for in the last 256
//!   asks, half of each size's share.
//! - Nothing depends on the stock for correctness: an empty stock means a
//!   fresh allocation, as without it. Until some thread has called
//!   [`Maker::step`], [`Warm::take`] does not even record what was asked.
//! - [`Warm::drain`] gives the stock back (an idle or trimmed cache, dropped
//!   caches) and forgets what was asked; a buffer half made then is dropped
//!   by its maker when finished, not stocked (each drain starts a new
//!   generation).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

const PAGE: usize = 4096;
/// The largest buffer made ahead: a 64 KiB block.
pub const MAX_LEN: usize = 16 * PAGE;
const CLASSES: usize = MAX_LEN / PAGE;
/// The most the stock holds.
pub const STOCK_BYTES: usize = 4 << 20;
const ASKS: usize = 256;
static ZERO_PAGE: [u8; PAGE] = [0; PAGE];

struct Stock {
    bufs: [Vec<Vec<u8>>; CLASSES],
    /// The classes of the last `ASKS` asks (`u8::MAX`: none yet).
    asks: [u8; ASKS],
    next: usize,
    /// How many of `asks` are of each class.
    counts: [u16; CLASSES],
    /// Buffers being made, per class.
    making: [u16; CLASSES],
    /// Counts the drains: a buffer begun before the last one is not stocked.
    generation: u64,
}

impl Stock {
    const fn new() -> Self {
        Stock {
            bufs: [const { Vec::new() }; CLASSES],
            asks: [u8::MAX; ASKS],
            next: 0,
            counts: [0; CLASSES],
            making: [0; CLASSES],
            generation: 0,
        }
    }

    fn note_ask(&mut self, class: usize) {
        let old = self.asks[self.next];
        if let Some(c) = self.counts.get_mut(old as usize) {
            *c -= 1;
        }
        // CLASSES (16) fits a byte: the ring of asks keeps classes small.
        let Ok(small) = u8::try_from(class) else {
            return;
        };
        self.asks[self.next] = small;
        self.counts[class] += 1;
        self.next = (self.next + 1) % ASKS;
    }

    /// Bytes in stock.
    fn bytes(&self) -> usize {
        (0..CLASSES)
            .map(|c| self.bufs[c].len() * (c + 1) * PAGE)
            .sum()
    }

    /// Bytes being made.
    fn making_bytes(&self) -> usize {
        (0..CLASSES)
            .map(|c| self.making[c] as usize * (c + 1) * PAGE)
            .sum()
    }

    /// The class most short of its target, counting the buffers being
    /// made, if any is and there is room.
    fn most_wanted(&self) -> Option<usize> {
        if self.bytes() + self.making_bytes() >= STOCK_BYTES {
            return None;
        }
        (0..CLASSES)
            .filter_map(|c| {
                let target = (self.counts[c] as usize).div_ceil(2);
                let have = self.bufs[c].len() + self.making[c] as usize;
                let short = target.saturating_sub(have);
                (short > 0).then_some((short, c))
            })
            .max()
            .map(|(_, c)| c)
    }
}

/// A stock of warm buffers; the cache takes from [`WARM`], the process's.
pub struct Warm {
    stock: Mutex<Stock>,
    /// Whether some class is short: the fast test of an idle [`Maker::step`].
    wanted: AtomicBool,
    /// Whether any thread makes buffers (has called [`Maker::step`]).
    made: AtomicBool,
    asks: AtomicU64,
    hits: AtomicU64,
    pages: AtomicU64,
}

/// What the stock did, for `ufskit stats`.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct WarmStats {
    /// New buffers asked for since a thread began making them.
    pub asks: u64,
    /// Of which served from the stock.
    pub hits: u64,
    /// Pages zeroed ahead of need.
    pub pages_made: u64,
    pub stocked_bytes: u64,
}

/// The process's stock, which every cache takes from.
pub static WARM: Warm = Warm::new();

fn class_of(len: usize) -> Option<usize> {
    (len > 0 && len <= MAX_LEN && len.is_multiple_of(PAGE)).then(|| len / PAGE - 1)
}

impl Warm {
    pub const fn new() -> Self {
        Warm {
            stock: Mutex::new(Stock::new()),
            wanted: AtomicBool::new(false),
            made: AtomicBool::new(false),
            asks: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            pages: AtomicU64::new(0),
        }
    }

    fn stock(&self) -> std::sync::MutexGuard<'_, Stock> {
        self.stock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A zeroed buffer of `len` bytes from the stock, if one is there.
    pub fn take(&self, len: usize) -> Option<Vec<u8>> {
        if !self.made.load(Ordering::Relaxed) {
            return None;
        }
        let class = class_of(len)?;
        let mut s = self.stock();
        s.note_ask(class);
        let buf = s.bufs[class].pop();
        self.asks.fetch_add(1, Ordering::Relaxed);
        if buf.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        self.wanted
            .store(s.most_wanted().is_some(), Ordering::Relaxed);
        buf
    }

    /// Grows `data` (a buffer's contents) to `len` bytes, zero-filled, in a
    /// stock buffer if one of that size is there; otherwise (or when `len`
    /// is no growth) leaves `data` as it was and returns false.
    pub fn grow_into(&self, data: &mut Vec<u8>, len: usize) -> bool {
        if len <= data.len() {
            return false;
        }
        match self.take(len) {
            Some(mut buf) => {
                buf[..data.len()].copy_from_slice(data);
                *data = buf;
                true
            }
            None => false,
        }
    }

    /// Gives the whole stock back and forgets what was asked.
    pub fn drain(&self) {
        let mut s = self.stock();
        if s.bytes() == 0 && s.making_bytes() == 0 && s.counts.iter().all(|&c| c == 0) {
            return;
        }
        let generation = s.generation + 1;
        *s = Stock::new();
        s.generation = generation;
        self.wanted.store(false, Ordering::Relaxed);
    }

    /// Bytes in stock.
    pub fn stocked_bytes(&self) -> usize {
        self.stock().bytes()
    }

    pub fn stats(&self) -> WarmStats {
        WarmStats {
            asks: self.asks.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            pages_made: self.pages.load(Ordering::Relaxed),
            stocked_bytes: self.stocked_bytes() as u64,
        }
    }
}

impl Default for Warm {
    fn default() -> Self {
        Self::new()
    }
}

/// A thread's making of warm buffers: the buffer it has begun, its class
/// and the stock's generation when it began.
pub struct Maker<'a> {
    warm: &'a Warm,
    making: Option<(usize, Vec<u8>, u64)>,
}

impl<'a> Maker<'a> {
    pub fn new(warm: &'a Warm) -> Self {
        Maker { warm, making: None }
    }

    /// Zeroes one page of the buffer being made, starting one if the stock
    /// is short. Returns whether it did anything (a page's work, a few
    /// microseconds when the page is fresh); cheap when nothing is wanted.
    pub fn step(&mut self) -> bool {
        let w = self.warm;
        if self.making.is_none() {
            if !w.made.load(Ordering::Relaxed) {
                w.made.store(true, Ordering::Relaxed);
            }
            if !w.wanted.load(Ordering::Relaxed) {
                return false;
            }
            let mut s = w.stock();
            let Some(class) = s.most_wanted() else {
                w.wanted.store(false, Ordering::Relaxed);
                return false;
            };
            s.making[class] += 1;
            w.wanted.store(s.most_wanted().is_some(), Ordering::Relaxed);
            let generation = s.generation;
            drop(s);
            self.making = Some((class, Vec::with_capacity((class + 1) * PAGE), generation));
        }
        let (class, buf, _) = self.making.as_mut().expect("a buffer being made");
        buf.extend_from_slice(&ZERO_PAGE);
        w.pages.fetch_add(1, Ordering::Relaxed);
        if buf.len() == (*class + 1) * PAGE {
            let (class, buf, generation) = self.making.take().expect("a buffer being made");
            let mut s = w.stock();
            if s.generation == generation {
                s.making[class] -= 1;
                s.bufs[class].push(buf);
            }
            w.wanted.store(s.most_wanted().is_some(), Ordering::Relaxed);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `w` with a maker started and `n` asks of `len` bytes recorded.
    fn asked(w: &Warm, n: usize, len: usize) -> Maker<'_> {
        let mut m = Maker::new(w);
        m.step();
        for _ in 0..n {
            w.take(len);
        }
        m
    }

    fn make_all(m: &mut Maker) -> usize {
        let mut pages = 0;
        while m.step() {
            pages += 1;
            assert!(pages < 100_000, "making never ends");
        }
        pages
    }

    #[test]
    fn what_is_asked_for_is_made_ahead_and_handed_out_zeroed() {
        let w = Warm::new();
        assert_eq!(w.take(3 * PAGE), None, "no maker, nothing recorded");
        let mut m = Maker::new(&w);
        assert!(!m.step(), "nothing asked, nothing made");
        // Asks of 12 KiB and 32 KiB, as a tar extraction's tails and blocks.
        for _ in 0..20 {
            assert_eq!(w.take(3 * PAGE), None);
            assert_eq!(w.take(8 * PAGE), None);
        }
        // Half of each size's share: ten of each.
        assert_eq!(make_all(&mut m), 10 * 3 + 10 * 8);
        assert_eq!(w.stocked_bytes(), 10 * 11 * PAGE);
        let st = w.stats();
        assert_eq!((st.asks, st.hits, st.pages_made), (40, 0, 110));
        let b = w.take(8 * PAGE).expect("a 32 KiB buffer in stock");
        assert_eq!((b.len(), b.capacity()), (8 * PAGE, 8 * PAGE));
        assert!(b.iter().all(|&x| x == 0));
        // The one taken is made again, and one more: the take was an ask
        // too (21 of 32 KiB, 11 wanted).
        assert_eq!(make_all(&mut m), 2 * 8);
        // A size never asked for is not made, and odd sizes are never served.
        assert_eq!(w.take(5 * PAGE), None);
        assert_eq!(w.take(PAGE + 512), None);
        assert_eq!(w.take(MAX_LEN + PAGE), None);
        w.drain();
        assert_eq!(w.stocked_bytes(), 0);
        assert!(!m.step());
    }

    #[test]
    fn a_grown_buffer_keeps_its_bytes_and_is_zero_beyond() {
        let w = Warm::new();
        make_all(&mut asked(&w, 4, 5 * PAGE));
        let mut data = vec![7u8; 3 * PAGE];
        assert!(w.grow_into(&mut data, 5 * PAGE));
        assert_eq!((data.len(), data.capacity()), (5 * PAGE, 5 * PAGE));
        assert!(data[..3 * PAGE].iter().all(|&x| x == 7));
        assert!(data[3 * PAGE..].iter().all(|&x| x == 0));
        // Shrinking never goes through the stock.
        assert!(!w.grow_into(&mut data, 2 * PAGE));
        assert_eq!(data.len(), 5 * PAGE);
    }

    #[test]
    fn the_stock_stays_within_its_bound() {
        let w = Warm::new();
        make_all(&mut asked(&w, ASKS, MAX_LEN));
        // 128 wanted, 64 fit.
        assert_eq!(w.stocked_bytes(), STOCK_BYTES);
    }

    #[test]
    fn two_makers_never_make_the_same_wanted_buffer() {
        let w = Warm::new();
        let mut a = asked(&w, 2, 2 * PAGE);
        let mut b = Maker::new(&w);
        // One wanted: the first maker begins it, the second has nothing to do.
        assert!(a.step());
        assert!(!b.step());
        assert!(a.step());
        assert!(!a.step());
        assert_eq!(w.stocked_bytes(), 2 * PAGE);
    }

    #[test]
    fn a_buffer_begun_before_a_drain_is_not_stocked() {
        let w = Warm::new();
        let mut m = asked(&w, 8, 4 * PAGE);
        assert!(m.step(), "begun");
        w.drain();
        make_all(&mut m);
        assert_eq!(w.stocked_bytes(), 0);
        assert_eq!(w.take(4 * PAGE), None);
    }
}
