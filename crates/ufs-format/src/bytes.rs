//! Little-endian field access on byte slices. Callers guarantee the slice is
//! long enough (structures are sized before fields are read); these helpers
//! are the only place raw offsets are dereferenced.

#[inline]
pub fn get_u8(b: &[u8], off: usize) -> u8 {
    b[off]
}
#[inline]
pub fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
#[inline]
pub fn get_i16(b: &[u8], off: usize) -> i16 {
    get_u16(b, off) as i16
}
#[inline]
pub fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap_or([0; 4]))
}
#[inline]
pub fn get_i32(b: &[u8], off: usize) -> i32 {
    get_u32(b, off) as i32
}
#[inline]
pub fn get_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap_or([0; 8]))
}
#[inline]
pub fn get_i64(b: &[u8], off: usize) -> i64 {
    get_u64(b, off) as i64
}
#[inline]
pub fn set_u8(b: &mut [u8], off: usize, v: u8) {
    b[off] = v;
}
#[inline]
pub fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub fn set_i16(b: &mut [u8], off: usize, v: i16) {
    set_u16(b, off, v as u16)
}
#[inline]
pub fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub fn set_i32(b: &mut [u8], off: usize, v: i32) {
    set_u32(b, off, v as u32)
}
#[inline]
pub fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub fn set_i64(b: &mut [u8], off: usize, v: i64) {
    set_u64(b, off, v as u64)
}

/// Declares getter/setter pairs for fields at fixed offsets of a struct that
/// wraps its raw bytes in a field named `raw`.
#[macro_export]
macro_rules! fields {
    ($( $get:ident / $set:ident : $ty:ident @ $off:expr ;)*) => {
        $(
            #[inline]
            pub fn $get(&self) -> $ty { $crate::fields!(@get $ty, &self.raw[..], $off) }
            #[inline]
            pub fn $set(&mut self, v: $ty) { $crate::fields!(@set $ty, &mut self.raw[..], $off, v) }
        )*
    };
    (@get u8, $b:expr, $o:expr) => { $crate::bytes::get_u8($b, $o) };
    (@get i8, $b:expr, $o:expr) => { $crate::bytes::get_u8($b, $o) as i8 };
    (@get u16, $b:expr, $o:expr) => { $crate::bytes::get_u16($b, $o) };
    (@get i16, $b:expr, $o:expr) => { $crate::bytes::get_i16($b, $o) };
    (@get u32, $b:expr, $o:expr) => { $crate::bytes::get_u32($b, $o) };
    (@get i32, $b:expr, $o:expr) => { $crate::bytes::get_i32($b, $o) };
    (@get u64, $b:expr, $o:expr) => { $crate::bytes::get_u64($b, $o) };
    (@get i64, $b:expr, $o:expr) => { $crate::bytes::get_i64($b, $o) };
    (@set u8, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_u8($b, $o, $v) };
    (@set i8, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_u8($b, $o, $v as u8) };
    (@set u16, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_u16($b, $o, $v) };
    (@set i16, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_i16($b, $o, $v) };
    (@set u32, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_u32($b, $o, $v) };
    (@set i32, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_i32($b, $o, $v) };
    (@set u64, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_u64($b, $o, $v) };
    (@set i64, $b:expr, $o:expr, $v:expr) => { $crate::bytes::set_i64($b, $o, $v) };
}
