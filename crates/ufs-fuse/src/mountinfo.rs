//! `/proc/self/mountinfo`: finding mounts by mount point.
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// One line of `/proc/self/mountinfo` (the fields ufskit needs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// The mount's own options (`rw,nosuid,nodev,relatime`).
    pub options: String,
    /// The file system's options (`rw,user_id=0,group_id=0,...`).
    pub super_options: String,
}

impl MountEntry {
    /// Whether the mount's own options include `o` (`nosuid`, `ro`...).
    pub fn has(&self, o: &str) -> bool {
        self.options.split(',').any(|x| x == o)
    }

    /// The `user_id=` of a FUSE mount: the user whose daemon serves it.
    pub fn fuse_user(&self) -> Option<u32> {
        self.super_options
            .split(',')
            .find_map(|x| x.strip_prefix("user_id="))
            .and_then(|v| v.parse().ok())
    }
}

/// The kernel's octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> Vec<u8> {
    ufs::text::unescape_octal(s)
}

/// Parses the text of a mountinfo file; malformed lines are skipped.
pub(crate) fn parse(text: &str) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 7 {
            continue;
        }
        let Some(sep) = f.iter().skip(6).position(|x| *x == "-").map(|p| p + 6) else {
            continue;
        };
        let (Some(fstype), Some(source)) = (f.get(sep + 1), f.get(sep + 2)) else {
            continue;
        };
        out.push(MountEntry {
            mount_point: PathBuf::from(OsString::from_vec(unescape(f[4]))),
            fstype: String::from_utf8_lossy(&unescape(fstype)).into_owned(),
            source: String::from_utf8_lossy(&unescape(source)).into_owned(),
            options: f[5].to_string(),
            super_options: f.get(sep + 3).map(|x| x.to_string()).unwrap_or_default(),
        });
    }
    out
}

pub(crate) fn read_self() -> Result<Vec<MountEntry>, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    Ok(parse(&text))
}

/// The absolute, symlink-free form of a mount point, without needing the
/// mounted file system itself to answer (a dead FUSE mount gives ENOTCONN).
pub(crate) fn resolve_mountpoint(p: &Path) -> Result<PathBuf, String> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Ok(c);
    }
    let abs = std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => {
            let parent =
                std::fs::canonicalize(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            Ok(parent.join(name))
        }
        _ => Ok(abs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_lines() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    90 22 0:50 / /mnt/with\\040space rw,nosuid,nodev,relatime - fuse.ufs ufskit:/img/a\\040b.img rw,user_id=0\n\
                    91 22 0:51 / /mnt/x rw shared:5 master:2 - fuse ufskit:/i rw\n\
                    garbage\n";
        let e = parse(text);
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(e[1].fstype, "fuse.ufs");
        assert_eq!(e[1].source, "ufskit:/img/a b.img");
        assert!(e[1].has("nosuid") && e[1].has("nodev") && !e[1].has("ro"));
        assert_eq!(e[1].fuse_user(), Some(0));
        assert_eq!(e[2].fuse_user(), None);
        assert_eq!(e[2].mount_point, PathBuf::from("/mnt/x"));
        assert_eq!(e[2].source, "ufskit:/i");
        assert_eq!(e[0].fstype, "ext4");
    }

    #[test]
    fn unescapes_backslash() {
        assert_eq!(unescape("a\\134b"), b"a\\b".to_vec());
        assert_eq!(unescape("trail\\04"), b"trail\\04".to_vec());
    }
}
