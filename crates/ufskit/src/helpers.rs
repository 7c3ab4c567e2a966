//! The names other programs run ufskit by, for the type `fuse.ufskit`:
//! mount(8)'s helper `mount.fuse.ufskit`, mkfs(8)'s `mkfs.fuse.ufskit` and
//! fsck(8)'s `fsck.fuse.ufskit` (scripts/install.sh links them in /sbin to
//! the binary). Each turns its caller's command line into the ufskit
//! subcommand's; nothing here touches a file system.
//!
//! Invariant: a helper's command line is only ever translated, never run
//! here, so the subcommands' checks (and messages) are the same whichever
//! name started the program.
use std::ffi::OsString;
use std::path::Path;

/// Which program a helper name stands in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Helper {
    Mount,
    Mkfs,
    Fsck,
}

/// The helper this binary runs as, from argv[0]'s file name.
pub(crate) fn helper_of(argv0: &OsString) -> Option<Helper> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    match name {
        "mount.fuse.ufskit" | "mount.ufskit" => Some(Helper::Mount),
        "mkfs.fuse.ufskit" | "mkfs.ufskit" => Some(Helper::Mkfs),
        "fsck.fuse.ufskit" | "fsck.ufskit" | "fsck.ufs" => Some(Helper::Fsck),
        _ => None,
    }
}

/// The ufskit command line for a helper's (`a[0]` is the helper's name);
/// None when nothing is to be done (mount(8)'s fake mode, `-f`).
pub(crate) fn translate(h: Helper, a: &[OsString], root: bool) -> Option<Vec<OsString>> {
    match h {
        Helper::Mount => mount_args(a, root),
        Helper::Mkfs => Some(mkfs_args(a)),
        Helper::Fsck => Some(fsck_args(a)),
    }
}

/// mount(8)'s helper convention:
///
///   mount.fuse.ufskit SOURCE DIR [-s] [-f] [-n] [-v] [-o OPTS] [-t TYPE]
///
/// is `ufskit mount -o OPTS SOURCE DIR`. `-f` is mount(8)'s fake mode
/// (nothing is done); `-n` (no mtab), `-v`, `-s` (sloppy) and `-t` need
/// nothing. Run by root, the mount is `dev,suid,allow_other` unless OPTS
/// say otherwise, as mount(8) makes a kernel file system's: every user
/// reaches it, with the kernel checking permissions (the mount always asks
/// FUSE for `default_permissions`), and devices and setuid work.
fn mount_args(a: &[OsString], root: bool) -> Option<Vec<OsString>> {
    let mut out: Vec<OsString> = vec!["ufskit".into(), "mount".into()];
    // A remount keeps the mount's flags unless named (`remount_flags`).
    let remount = a.iter().any(|x| {
        x.to_str()
            .is_some_and(|o| o.split(',').any(|o| o == "remount"))
    });
    if root && !remount {
        out.extend(["-o".into(), "dev,suid,allow_other".into()]);
    }
    let mut positional = Vec::new();
    let mut it = a[1..].iter();
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("-o") => {
                if let Some(o) = it.next() {
                    out.extend(["-o".into(), o.clone()]);
                }
            }
            Some("-t" | "-N") => {
                it.next();
            }
            Some("-f") => return None,
            Some("-s" | "-n" | "-v") => {}
            _ => positional.push(arg.clone()),
        }
    }
    out.extend(positional);
    Some(out)
}

/// Options of `ufskit newfs` that take a value (`-b 4096` or `-b4096`).
const NEWFS_VALUED: &str = "bfimoghecksLOB";

/// mkfs(8)'s helper convention (util-linux `mkfs -t fuse.ufskit [OPTIONS]
/// DEVICE [BLOCKS]`):
///
///   mkfs.fuse.ufskit [-V] [-q] [-F] [NEWFS OPTIONS] DEVICE [BLOCKS]
///
/// is `ufskit newfs --ask [NEWFS OPTIONS] [-s BLOCKSk] DEVICE`: the
/// options are newfs's (FreeBSD's letters), BLOCKS counts 1 KiB blocks as
/// mke2fs's does; a file system already on DEVICE is written over only
/// when the answer on stdin is yes (`--ask`), or with `-F` (force), as
/// Linux's mkfs tools do; `-V`/`-v` (verbose) and `-q` (quiet) need
/// nothing.
fn mkfs_args(a: &[OsString]) -> Vec<OsString> {
    let mut opts: Vec<OsString> = Vec::new();
    let mut positional: Vec<OsString> = Vec::new();
    let mut force = false;
    let mut it = a[1..].iter();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy();
        match s.as_ref() {
            "-V" | "-v" | "-q" => {}
            "-F" => force = true,
            "--" => positional.extend(it.by_ref().cloned()),
            _ if s.starts_with("--") => {
                // Long options: --seed N and --time N take a value.
                opts.push(arg.clone());
                if (s == "--seed" || s == "--time") && !s.contains('=') {
                    opts.extend(it.next().cloned());
                }
            }
            _ if s.starts_with('-') && s.len() >= 2 => {
                opts.push(arg.clone());
                let letter = s[1..].chars().next().unwrap_or('-');
                if s.len() == 2 && NEWFS_VALUED.contains(letter) {
                    opts.extend(it.next().cloned());
                }
            }
            _ => positional.push(arg.clone()),
        }
    }
    let mut out: Vec<OsString> = vec!["ufskit".into(), "newfs".into()];
    if !force {
        out.push("--ask".into());
    }
    out.extend(opts);
    if positional.len() == 2 {
        let blocks = positional.pop().unwrap();
        out.extend(["-s".into(), format!("{}k", blocks.to_string_lossy()).into()]);
    }
    out.extend(positional);
    out
}

/// fsck(8)'s helper convention (util-linux `fsck -t fuse.ufskit [OPTIONS]
/// DEVICE`, and `fsck -A` for fstab lines of that type):
///
///   fsck.fuse.ufskit [-a|-p] [-n] [-y] [-f] [-r] [-V] [-C [FD]] DEVICE
///
/// is `ufskit fsck [-p|-n|-y] --exit-codes fsck8 DEVICE`: `-a` and `-p`
/// preen, `-n` checks only, `-y` fixes everything, no mode checks only;
/// `-f` (force: every check is full here), `-r`, `-V`, `-l` and `-C`'s
/// progress descriptor need nothing. The exit status is fsck(8)'s:
/// 0 clean, 1 errors corrected, 4 errors left, 8 operational error.
fn fsck_args(a: &[OsString]) -> Vec<OsString> {
    let mut mode: Option<&str> = None;
    let mut positional: Vec<OsString> = Vec::new();
    let mut it = a[1..].iter().peekable();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy();
        if s == "-C" {
            // -C FD: the descriptor is optional.
            if it
                .peek()
                .is_some_and(|n| n.to_string_lossy().parse::<u32>().is_ok())
            {
                it.next();
            }
            continue;
        }
        if s.starts_with('-') && s.len() >= 2 && !s.starts_with("--") {
            for c in s[1..].chars() {
                match c {
                    'a' | 'p' => mode = mode.or(Some("-p")),
                    'n' => mode = Some("-n"),
                    'y' => mode = Some("-y"),
                    _ => {}
                }
            }
            continue;
        }
        positional.push(arg.clone());
    }
    let mut out: Vec<OsString> = vec!["ufskit".into(), "fsck".into()];
    out.extend(mode.map(OsString::from));
    out.extend(["--exit-codes".into(), "fsck8".into()]);
    out.extend(positional);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    #[test]
    fn names_pick_the_helper() {
        assert_eq!(
            helper_of(&"/sbin/mkfs.fuse.ufskit".into()),
            Some(Helper::Mkfs)
        );
        assert_eq!(helper_of(&"fsck.fuse.ufskit".into()), Some(Helper::Fsck));
        assert_eq!(
            helper_of(&"/sbin/mount.fuse.ufskit".into()),
            Some(Helper::Mount)
        );
        assert_eq!(helper_of(&"ufskit".into()), None);
    }

    #[test]
    fn mkfs_options_and_block_count() {
        let a = v(&[
            "mkfs.fuse.ufskit",
            "-b",
            "8192",
            "-O1",
            "-q",
            "/dev/loop3",
            "1048576",
        ]);
        assert_eq!(
            mkfs_args(&a),
            v(&[
                "ufskit",
                "newfs",
                "--ask",
                "-b",
                "8192",
                "-O1",
                "-s",
                "1048576k",
                "/dev/loop3"
            ])
        );
        let a = v(&["mkfs.fuse.ufskit", "-V", "-F", "--", "img"]);
        assert_eq!(mkfs_args(&a), v(&["ufskit", "newfs", "img"]));
    }

    #[test]
    fn fsck_modes_and_progress_descriptor() {
        let a = v(&["fsck.fuse.ufskit", "-C", "3", "-a", "/dev/loop3"]);
        assert_eq!(
            fsck_args(&a),
            v(&[
                "ufskit",
                "fsck",
                "-p",
                "--exit-codes",
                "fsck8",
                "/dev/loop3"
            ])
        );
        let a = v(&["fsck.fuse.ufskit", "-fn", "img"]);
        assert_eq!(
            fsck_args(&a),
            v(&["ufskit", "fsck", "-n", "--exit-codes", "fsck8", "img"])
        );
    }

    #[test]
    fn mount_as_root_is_like_a_kernel_mount() {
        let a = v(&["mount.fuse.ufskit", "img", "/mnt", "-o", "rw,noatime"]);
        assert_eq!(
            mount_args(&a, true).unwrap(),
            v(&[
                "ufskit",
                "mount",
                "-o",
                "dev,suid,allow_other",
                "-o",
                "rw,noatime",
                "img",
                "/mnt"
            ])
        );
        let a = v(&["mount.fuse.ufskit", "img", "/mnt", "-o", "remount,ro"]);
        assert_eq!(
            mount_args(&a, true).unwrap(),
            v(&["ufskit", "mount", "-o", "remount,ro", "img", "/mnt"])
        );
        assert!(mount_args(&v(&["mount.fuse.ufskit", "-f", "img", "/mnt"]), true).is_none());
    }
}
