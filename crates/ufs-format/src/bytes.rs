//! Field access on byte slices in either byte order. Callers guarantee the
//! slice is long enough (structures are sized before fields are read); these
//! helpers are the only place raw offsets are dereferenced.
//!
//! A file system's byte order is its writer's: FreeBSD and NetBSD write
//! every multi-byte field in the order of the machine that made the file
//! system, so a disk from a big-endian machine (powerpc, sparc64, mips) is
//! big-endian throughout. Bitmaps and names are byte arrays and have no
//! order. [`Endian`] is that order, carried by every structure this crate
//! decodes.
/// Narrowings of values their callers guarantee fit the field (a name of
/// at most 255 bytes, a record within a 512-byte chunk, an address within
/// a UFS1 file system): the crate's one place that truncates, checked in
/// debug builds. A value that broke the guarantee would keep its low bits,
/// as C's assignment to the narrower field does.
#[allow(clippy::cast_possible_truncation)]
pub fn low_u8(v: usize) -> u8 {
    debug_assert!(v <= usize::from(u8::MAX), "{v} does not fit 8 bits");
    v as u8
}

/// See [`low_u8`].
#[allow(clippy::cast_possible_truncation)]
pub fn low_u16(v: usize) -> u16 {
    debug_assert!(v <= usize::from(u16::MAX), "{v} does not fit 16 bits");
    v as u16
}

/// An offset, length or count within one block of a validated geometry
/// as an index: `usize` holds every such value on the 64-bit targets
/// ufskit builds for, and one that did not fit would become `usize::MAX`
/// and fail the bounds check that follows instead of wrapping.
pub fn to_index(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// A count, size or offset in the signed 64-bit arithmetic FreeBSD does
/// with them (`off_t`, `int64_t` totals, mkfs's layout). Every value of a
/// validated geometry fits; one that did not would stay at `i64::MAX`
/// instead of turning negative.
pub fn to_signed(v: impl TryInto<i64>) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// A count in one of FreeBSD's `int32_t` fields (a group's summary counts,
/// a link count fsck tallies). Every count of a validated geometry fits;
/// one that did not would stay at `i32::MAX` instead of turning negative.
pub fn to_i32(v: impl TryInto<i32>) -> i32 {
    v.try_into().unwrap_or(i32::MAX)
}

/// The low 32 bits of `t`, as C's assignment of a 64-bit time to an
/// `int32_t` field (FreeBSD's UFS1 `fs_old_time` and `cg_old_time`, which
/// wrap in 2038 on FreeBSD too).
pub fn low_i32(t: i64) -> i32 {
    let b = t.to_le_bytes();
    i32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// See [`low_u8`].
#[allow(clippy::cast_possible_truncation)]
pub fn low_u32(v: u64) -> u32 {
    debug_assert!(v <= u64::from(u32::MAX), "{v} does not fit 32 bits");
    v as u32
}

/// The byte order of a file system's multi-byte fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Endian {
    /// Least significant byte first (amd64, arm64, i386, riscv).
    #[default]
    Little,
    /// Most significant byte first (powerpc, powerpc64, sparc64, mips).
    Big,
}

macro_rules! accessors {
    ($( $get:ident / $set:ident : $ty:ty, $n:expr ;)*) => {
        $(
            #[inline]
            pub fn $get(self, b: &[u8], off: usize) -> $ty {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[off..off + $n]);
                match self {
                    Endian::Little => <$ty>::from_le_bytes(a),
                    Endian::Big => <$ty>::from_be_bytes(a),
                }
            }
            #[inline]
            pub fn $set(self, b: &mut [u8], off: usize, v: $ty) {
                let a = match self {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                };
                b[off..off + $n].copy_from_slice(&a);
            }
        )*
    };
}

impl Endian {
    /// The order of the machine running this code.
    pub const HOST: Endian = if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    };

    accessors! {
        get_u16 / set_u16: u16, 2;
        get_i16 / set_i16: i16, 2;
        get_u32 / set_u32: u32, 4;
        get_i32 / set_i32: i32, 4;
        get_u64 / set_u64: u64, 8;
        get_i64 / set_i64: i64, 8;
    }

    #[inline]
    pub fn get_u8(self, b: &[u8], off: usize) -> u8 {
        b[off]
    }
    #[inline]
    pub fn set_u8(self, b: &mut [u8], off: usize, v: u8) {
        b[off] = v;
    }

    /// A 32-bit value as it reads in this order, from one read in the other.
    pub fn swapped(self) -> Endian {
        match self {
            Endian::Little => Endian::Big,
            Endian::Big => Endian::Little,
        }
    }

    /// "little-endian" or "big-endian".
    pub fn name(self) -> &'static str {
        match self {
            Endian::Little => "little-endian",
            Endian::Big => "big-endian",
        }
    }
}

/// Declares getter/setter pairs for fields at fixed offsets of a struct that
/// wraps its raw bytes in a field named `raw` and tells its byte order with
/// a method `endian()`.
#[macro_export]
macro_rules! fields {
    ($( $get:ident / $set:ident : $ty:ident @ $off:expr ;)*) => {
        $(
            #[inline]
            pub fn $get(&self) -> $ty { $crate::fields!(@get $ty, self.endian(), &self.raw[..], $off) }
            #[inline]
            pub fn $set(&mut self, v: $ty) { let e = self.endian(); $crate::fields!(@set $ty, e, &mut self.raw[..], $off, v) }
        )*
    };
    (@get u8, $e:expr, $b:expr, $o:expr) => { $e.get_u8($b, $o) };
    (@get i8, $e:expr, $b:expr, $o:expr) => { $e.get_u8($b, $o).cast_signed() };
    (@get u16, $e:expr, $b:expr, $o:expr) => { $e.get_u16($b, $o) };
    (@get i16, $e:expr, $b:expr, $o:expr) => { $e.get_i16($b, $o) };
    (@get u32, $e:expr, $b:expr, $o:expr) => { $e.get_u32($b, $o) };
    (@get i32, $e:expr, $b:expr, $o:expr) => { $e.get_i32($b, $o) };
    (@get u64, $e:expr, $b:expr, $o:expr) => { $e.get_u64($b, $o) };
    (@get i64, $e:expr, $b:expr, $o:expr) => { $e.get_i64($b, $o) };
    (@set u8, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_u8($b, $o, $v) };
    (@set i8, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_u8($b, $o, $v.cast_unsigned()) };
    (@set u16, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_u16($b, $o, $v) };
    (@set i16, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_i16($b, $o, $v) };
    (@set u32, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_u32($b, $o, $v) };
    (@set i32, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_i32($b, $o, $v) };
    (@set u64, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_u64($b, $o, $v) };
    (@set i64, $e:expr, $b:expr, $o:expr, $v:expr) => { $e.set_i64($b, $o, $v) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_orders_read_what_they_wrote_and_differ_in_bytes() {
        let mut b = [0u8; 8];
        Endian::Little.set_u32(&mut b, 0, 0x0102_0304);
        Endian::Big.set_u32(&mut b, 4, 0x0102_0304);
        assert_eq!(b, [4, 3, 2, 1, 1, 2, 3, 4]);
        assert_eq!(Endian::Little.get_u32(&b, 0), 0x0102_0304);
        assert_eq!(Endian::Big.get_u32(&b, 4), 0x0102_0304);
        assert_eq!(Endian::Big.get_u32(&b, 0), 0x0403_0201);
        Endian::Big.set_i64(&mut b, 0, -2);
        assert_eq!(b, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(Endian::Big.get_i64(&b, 0), -2);
        assert_eq!(Endian::Little.swapped(), Endian::Big);
    }
}
