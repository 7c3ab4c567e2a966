//! Text forms other tools write that ufskit reads: names with octal
//! escapes (`\040` for a space), as the kernel writes mount points in
//! `/proc/self/mountinfo` and mtree(5) writes file names (vis(3)'s octal
//! style).
//!
//! Invariant: text without a backslash followed by three octal digits
//! comes back byte for byte.
/// Undoes octal escapes: `\ooo` (at most `\377`) becomes the byte it
/// names; anything else, an incomplete escape or one past a byte included,
/// is kept as it is.
pub fn unescape_octal(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && (b'0'..=b'3').contains(&b[i + 1])
            && b[i + 2..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            // At most 3 * 64 + 7 * 8 + 7 = 255.
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_escapes_come_undone_and_nothing_else_changes() {
        assert_eq!(unescape_octal("my\\040file"), b"my file".to_vec());
        assert_eq!(unescape_octal("a\\134b"), b"a\\b".to_vec());
        assert_eq!(unescape_octal("\\377\\400"), b"\xff\\400".to_vec());
        assert_eq!(unescape_octal("trail\\04"), b"trail\\04".to_vec());
        assert_eq!(unescape_octal("\\x41 plain"), b"\\x41 plain".to_vec());
    }
}
