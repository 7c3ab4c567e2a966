//! Reading an image without a mount: `extract` (a tree copied out onto the
//! host), `ls`, `cat` and `stat`. No FUSE and no root: the image is opened
//! read-only through the engine (`ufs::Fs`), so everything seen is what a
//! mount would show, and a file system that is not clean, or has a
//! journal or snapshots, is read as it stands (with a warning).
//!
//! Invariants: nothing is ever written to the image (the device is opened
//! read-only); paths inside the image are taken literally (a symlink in
//! one is not followed: its target would name the host's files); a host
//! file's holes are kept (only the image's data runs are written, then the
//! size set); a failure to keep an attribute, an owner or a node on the
//! host is a warning, counted, and the copy goes on; an error reading the
//! image stops the command with a non-zero exit.
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use ufs::ops::linux_xattr::{acl_to_linux, linux_xattr_name};
use ufs::{Attr, Cred, FileKind, Fs, Ino, MountOptions};

/// Bytes read from the image per request.
const CHUNK: usize = 1 << 20;

#[derive(clap::Args)]
pub struct ExtractArgs {
    /// Image file or device, or one partition of it (IMAGE:NAME, see
    /// `ufskit probe`).
    image: PathBuf,
    /// [PATH] DIR: the file or directory inside the image to copy (default
    /// the root, whose contents go straight into DIR; anything else is
    /// copied into DIR under its own name), and the host directory to copy
    /// into (made if missing).
    #[arg(num_args = 1..=2, required = true, value_names = ["PATH", "DIR"])]
    rest: Vec<PathBuf>,
    /// Do not print the closing summary.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Args)]
pub struct LsArgs {
    /// Long listing: type and mode, links, owner and group (numbers: the
    /// image's, not the host's names), size, modification time (UTC).
    #[arg(short = 'l')]
    long: bool,
    /// Show `.` and `..` too.
    #[arg(short = 'a')]
    all: bool,
    /// List subdirectories too, as `ls -R` does.
    #[arg(short = 'R')]
    recursive: bool,
    image: PathBuf,
    /// A path inside the image (default the root).
    #[arg(default_value = "/")]
    path: PathBuf,
}

#[derive(clap::Args)]
pub struct CatArgs {
    image: PathBuf,
    /// Files inside the image, written to standard output in order.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(clap::Args)]
pub struct StatArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    image: PathBuf,
    /// Paths inside the image.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

/// Opens `image` read-only, warning when the file system is not clean.
pub fn open_read_only(image: &Path) -> Result<Fs, String> {
    let dev = crate::open_dev(image, false)?;
    let opts = MountOptions {
        read_only: true,
        force: true,
        ..Default::default()
    };
    let fs = Fs::open(dev, opts).map_err(|e| format!("{}: {e}", image.display()))?;
    if !fs.was_clean() {
        eprintln!(
            "ufskit: warning: {}: the file system was not cleanly unmounted (or has not been checked since); read as it stands, some files may be damaged",
            image.display()
        );
    }
    Ok(fs)
}

/// The inode of `path` inside the image and its attributes.
fn find(fs: &Fs, path: &Path) -> Result<Attr, String> {
    let ino = fs
        .resolve(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    fs.getattr(ino)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Every entry of directory `ino` but `.` and `..` (with them if `dots`).
fn entries(fs: &Fs, ino: Ino, dots: bool) -> ufs::Result<Vec<(Vec<u8>, Ino)>> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(ino, cookie, 1024)?;
        let Some(last) = batch.last() else { break };
        cookie = last.next;
        for e in batch {
            if dots || (e.name != b"." && e.name != b"..") {
                out.push((e.name, e.ino));
            }
        }
    }
    Ok(out)
}

/// What an extraction did.
#[derive(Default)]
struct Tally {
    files: u64,
    dirs: u64,
    symlinks: u64,
    hard_links: u64,
    nodes: u64,
    bytes: u64,
    hole_bytes: u64,
    warnings: u64,
    /// Warnings of one kind are printed once each.
    said: std::collections::HashSet<String>,
}

impl Tally {
    fn warn(&mut self, kind: &str, what: String) {
        self.warnings += 1;
        if self.said.insert(kind.to_string()) {
            eprintln!(
                "ufskit: warning: {what} (further warnings of this kind are counted, not shown)"
            );
        }
    }
}

struct Extractor<'a> {
    fs: &'a Fs,
    root_user: bool,
    /// Host paths of files already copied that have other links.
    linked: HashMap<Ino, PathBuf>,
    /// Directories copied so far (a damaged image may loop).
    dirs_seen: std::collections::HashSet<Ino>,
    /// Entries the image could not give (damage).
    image_errors: u64,
    tally: Tally,
    bar: indicatif::ProgressBar,
}

pub fn cmd_extract(a: ExtractArgs) -> Result<(), String> {
    let (path, dest) = match a.rest.as_slice() {
        [dest] => (PathBuf::from("/"), dest.clone()),
        [path, dest] => (path.clone(), dest.clone()),
        _ => unreachable!("clap takes one or two"),
    };
    let fs = open_read_only(&a.image)?;
    let top = find(&fs, &path)?;
    std::fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    if !dest.is_dir() {
        return Err(format!("{}: not a directory", dest.display()));
    }
    let total = if crate::progress::shown() {
        count(&fs, &top).map_err(|e| format!("{}: {e}", path.display()))?
    } else {
        1
    };
    let mut x = Extractor {
        fs: &fs,
        root_user: nix::unistd::geteuid().is_root(),
        linked: HashMap::new(),
        dirs_seen: std::collections::HashSet::new(),
        image_errors: 0,
        tally: Tally::default(),
        bar: crate::progress::bar(total, "entries"),
    };
    let whole = top.ino == fs.root();
    let r = if whole {
        x.dirs_seen.insert(top.ino);
        x.dir_contents(top.ino, &dest, &path)
            .and_then(|()| x.finish_node(&top, &dest))
    } else {
        let name = path
            .file_name()
            .ok_or_else(|| format!("{}: names no entry", path.display()))?;
        x.copy(&top, &dest.join(name), &path)
    };
    x.bar.finish_and_clear();
    r?;
    let t = &x.tally;
    let damaged = x.image_errors;
    if !a.quiet {
        eprintln!(
            "extracted {} files ({} bytes, {} bytes of holes kept as holes), {} directories, {} symlinks, {} hard links, {} device and fifo nodes into {}{}",
            t.files,
            t.bytes,
            t.hole_bytes,
            t.dirs,
            t.symlinks,
            t.hard_links,
            t.nodes,
            dest.display(),
            if t.warnings > 0 {
                format!("; {} warnings", t.warnings)
            } else {
                String::new()
            }
        );
    }
    if damaged > 0 {
        return Err(format!(
            "{damaged} entries could not be read from the image (damage; run ufskit fsck -n on it); everything else was extracted"
        ));
    }
    Ok(())
}

/// The number of entries under (and including) `top`, for the bar.
fn count(fs: &Fs, top: &Attr) -> ufs::Result<u64> {
    let mut n = 1;
    let mut dirs = vec![top.ino];
    if top.kind != FileKind::Dir {
        return Ok(1);
    }
    let mut seen = std::collections::HashSet::from([top.ino]);
    while let Some(d) = dirs.pop() {
        for (_, ino) in entries(fs, d, false)? {
            n += 1;
            // A damaged image may name a directory twice (a loop).
            if fs.getattr(ino)?.kind == FileKind::Dir && seen.insert(ino) {
                dirs.push(ino);
            }
        }
    }
    Ok(n)
}

impl Extractor<'_> {
    /// Copies `a` (at `src` in the image) to host path `to`.
    fn copy(&mut self, a: &Attr, to: &Path, src: &Path) -> Result<(), String> {
        let here = |e: &dyn std::fmt::Display| format!("{}: {e}", to.display());
        self.bar.inc(1);
        // What is there already goes, unless both are directories (merged).
        if let Ok(m) = std::fs::symlink_metadata(to) {
            if !(m.is_dir() && a.kind == FileKind::Dir) {
                let r = if m.is_dir() {
                    std::fs::remove_dir_all(to)
                } else {
                    std::fs::remove_file(to)
                };
                r.map_err(|e| here(&e))?;
            }
        }
        if a.kind != FileKind::Dir && a.nlink > 1 {
            if let Some(first) = self.linked.get(&a.ino) {
                std::fs::hard_link(first, to).map_err(|e| here(&e))?;
                self.tally.hard_links += 1;
                return Ok(());
            }
            self.linked.insert(a.ino, to.to_path_buf());
        }
        match a.kind {
            FileKind::Dir => {
                if !self.dirs_seen.insert(a.ino) {
                    // A directory met again: a damaged image's loop, or a
                    // second name of one directory. Copied once.
                    self.tally.warn(
                        "dir-loop",
                        format!(
                            "{}: a directory already copied (the image names it twice: damage), left out",
                            src.display()
                        ),
                    );
                    return Ok(());
                }
                if !to.is_dir() {
                    std::fs::create_dir(to).map_err(|e| here(&e))?;
                }
                // Writable by us while it fills; its mode comes after.
                let _ = std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700));
                self.tally.dirs += 1;
                self.dir_contents(a.ino, to, src)?;
            }
            FileKind::File => match self.file(a, to) {
                Ok(()) => self.tally.files += 1,
                Err(Side::Host(e)) => return Err(here(&e)),
                Err(Side::Image(e)) => {
                    // What was copied of it stays, named as what it is.
                    self.unreadable(src, &e);
                    return Ok(());
                }
            },
            FileKind::Symlink => {
                let target = match self.fs.readlink(a.ino) {
                    Ok(t) => t,
                    Err(e) => {
                        self.unreadable(src, &e);
                        return Ok(());
                    }
                };
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), to).map_err(|e| here(&e))?;
                self.tally.symlinks += 1;
            }
            FileKind::Fifo => {
                nix::unistd::mkfifo(to, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .map_err(|e| here(&e))?;
                self.tally.nodes += 1;
            }
            FileKind::CharDev | FileKind::BlockDev => {
                let kind = if a.kind == FileKind::CharDev {
                    nix::sys::stat::SFlag::S_IFCHR
                } else {
                    nix::sys::stat::SFlag::S_IFBLK
                };
                let dev = host_dev(a.rdev);
                match nix::sys::stat::mknod(
                    to,
                    kind,
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                    dev,
                ) {
                    Ok(()) => self.tally.nodes += 1,
                    Err(e) => {
                        self.tally.warn(
                            "mknod",
                            format!(
                                "{}: device node not made ({e}; only root may)",
                                to.display()
                            ),
                        );
                        return Ok(());
                    }
                }
            }
            FileKind::Socket => {
                self.tally.warn(
                    "socket",
                    format!(
                        "{}: a socket, skipped (nothing listens on it)",
                        src.display()
                    ),
                );
                return Ok(());
            }
        }
        self.finish_node(a, to)
    }

    fn dir_contents(&mut self, ino: Ino, to: &Path, src: &Path) -> Result<(), String> {
        let list = match entries(self.fs, ino, false) {
            Ok(l) => l,
            Err(e) => {
                self.unreadable(src, &e);
                return Ok(());
            }
        };
        for (name, child) in list {
            let name = OsStr::from_bytes(&name);
            let csrc = src.join(name);
            match self.fs.getattr(child) {
                Ok(a) => self.copy(&a, &to.join(name), &csrc)?,
                Err(e) => self.unreadable(&csrc, &e),
            }
        }
        Ok(())
    }

    /// An entry the image could not give (damage): said, counted, and the
    /// extraction goes on with the rest, as tar goes on past a bad member.
    fn unreadable(&mut self, src: &Path, e: &ufs::Error) {
        self.image_errors += 1;
        if self.image_errors <= 20 {
            eprintln!("ufskit: {} (in the image): {e}; left out", src.display());
        }
    }

    /// A regular file's data runs, written where they are; holes stay
    /// holes on the host (the size is set at the end).
    fn file(&mut self, a: &Attr, to: &Path) -> Result<(), Side> {
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(to)
            .map_err(Side::Host)?;
        let mut off = 0;
        let mut data_bytes = 0;
        while off < a.size {
            let start = match self.fs.seek_data_hole(a.ino, off, true) {
                Ok(s) => s,
                Err(e) if e.kind == ufs::ErrorKind::NoSuchOffset => break,
                Err(e) => return Err(Side::Image(e)),
            };
            let end = self
                .fs
                .seek_data_hole(a.ino, start, false)
                .map_err(Side::Image)?;
            let mut pos = start;
            while pos < end {
                let n = ((end - pos) as usize).min(CHUNK);
                let buf = self.fs.read(a.ino, pos, n).map_err(Side::Image)?;
                if buf.is_empty() {
                    break;
                }
                out.write_all_at(&buf, pos).map_err(Side::Host)?;
                pos += buf.len() as u64;
            }
            data_bytes += pos - start;
            off = end;
        }
        out.set_len(a.size).map_err(Side::Host)?;
        self.tally.bytes += a.size;
        self.tally.hole_bytes += a.size - data_bytes;
        Ok(())
    }

    /// Owner (as root), mode, extended attributes and ACLs, then times.
    fn finish_node(&mut self, a: &Attr, to: &Path) -> Result<(), String> {
        let link = a.kind == FileKind::Symlink;
        if self.root_user {
            if let Err(e) = std::os::unix::fs::lchown(to, Some(a.uid), Some(a.gid)) {
                self.tally
                    .warn("chown", format!("{}: owner not kept ({e})", to.display()));
            }
        }
        if !link {
            if let Err(e) =
                std::fs::set_permissions(to, std::fs::Permissions::from_mode(u32::from(a.perm)))
            {
                self.tally
                    .warn("chmod", format!("{}: mode not kept ({e})", to.display()));
            }
        }
        self.attributes(a, to);
        let ts = |t: ufs::Time| nix::sys::time::TimeSpec::new(t.sec, i64::from(t.nsec));
        if let Err(e) = nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            to,
            &ts(a.atime),
            &ts(a.mtime),
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        ) {
            self.tally
                .warn("times", format!("{}: times not kept ({e})", to.display()));
        }
        Ok(())
    }

    fn attributes(&mut self, a: &Attr, to: &Path) {
        let Ok(names) = self.fs.listxattr(a.ino, Cred::ROOT) else {
            return;
        };
        for (ns, name) in names {
            let (linux, public) = linux_xattr_name(ns, &name);
            if !public && !self.root_user {
                continue;
            }
            let acl = match ufs::ops::linux_xattr::LinuxXattr::parse(&linux) {
                Some(ufs::ops::linux_xattr::LinuxXattr::Acl(kind)) => Some(kind),
                _ => None,
            };
            let value = match acl {
                Some(kind) => match self.fs.get_acl(a.ino, kind) {
                    Ok(Some(entries)) => acl_to_linux(&entries),
                    _ => continue,
                },
                None => match self.fs.getxattr(a.ino, ns, &name, Cred::ROOT) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
            };
            let linux = OsStr::from_bytes(&linux);
            if let Err(e) = xattr::set(to, linux, &value) {
                self.tally.warn(
                    &format!("xattr {}", linux.to_string_lossy()),
                    format!(
                        "{}: attribute {} not kept ({e})",
                        to.display(),
                        linux.to_string_lossy()
                    ),
                );
            }
        }
    }
}

/// Which side an error came from.
enum Side {
    Image(ufs::Error),
    Host(std::io::Error),
}

/// A device number as stored (the form the mount stores and shows, the
/// kernel's 32-bit `new_encode_dev`: minor's low byte, major's 12 bits,
/// minor's upper bits; FreeBSD's `makedev` packs small numbers the same
/// way) as the host's `dev_t`.
pub fn host_dev(rdev: u32) -> nix::sys::stat::dev_t {
    let major = (rdev & 0xfff00) >> 8;
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xfff00);
    nix::sys::stat::makedev(u64::from(major), u64::from(minor))
}

/// The host's `dev_t` in the stored form ([`host_dev`]'s inverse).
pub fn stored_dev(dev: nix::sys::stat::dev_t) -> u32 {
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    ((minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)) as u32
}

pub fn cmd_ls(a: LsArgs) -> Result<(), String> {
    let fs = open_read_only(&a.image)?;
    let top = find(&fs, &a.path)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if top.kind != FileKind::Dir {
        let name = a.path.as_os_str().as_bytes().to_vec();
        return print_entry(&mut out, &fs, &name, &top, a.long).map_err(|e| e.to_string());
    }
    let mut queue = vec![(a.path.clone(), top.ino)];
    // Each directory listed once, whatever loops a damaged image holds.
    let mut seen = std::collections::HashSet::from([top.ino]);
    let mut first = true;
    while let Some((dir, ino)) = queue.pop() {
        let mut list = entries(&fs, ino, a.all).map_err(|e| format!("{}: {e}", dir.display()))?;
        list.sort();
        let w = |e: std::io::Error| e.to_string();
        if a.recursive {
            if !first {
                writeln!(out).map_err(w)?;
            }
            writeln!(out, "{}:", dir.display()).map_err(w)?;
        }
        first = false;
        let mut subdirs = Vec::new();
        for (name, child) in list {
            let at = fs
                .getattr(child)
                .map_err(|e| format!("{}: {e}", dir.join(OsStr::from_bytes(&name)).display()))?;
            print_entry(&mut out, &fs, &name, &at, a.long).map_err(w)?;
            if a.recursive
                && at.kind == FileKind::Dir
                && name != b"."
                && name != b".."
                && seen.insert(child)
            {
                subdirs.push((dir.join(OsStr::from_bytes(&name)), child));
            }
        }
        // Depth first, in name order.
        queue.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

use std::io::Write;

fn print_entry(
    out: &mut impl Write,
    fs: &Fs,
    name: &[u8],
    a: &Attr,
    long: bool,
) -> std::io::Result<()> {
    if !long {
        out.write_all(name)?;
        return writeln!(out);
    }
    let size = match a.kind {
        FileKind::CharDev | FileKind::BlockDev => {
            let d = host_dev(a.rdev);
            format!("{}, {}", nix::sys::stat::major(d), nix::sys::stat::minor(d))
        }
        _ => a.size.to_string(),
    };
    write!(
        out,
        "{} {:>3} {:>5} {:>5} {:>10} {} ",
        mode_string(a),
        a.nlink,
        a.uid,
        a.gid,
        size,
        utc(a.mtime)
    )?;
    out.write_all(name)?;
    if a.kind == FileKind::Symlink {
        if let Ok(t) = fs.readlink(a.ino) {
            out.write_all(b" -> ")?;
            out.write_all(&t)?;
        }
    }
    writeln!(out)
}

/// `ls -l`'s ten characters: type, then rwx three times with setuid,
/// setgid and sticky folded in.
fn mode_string(a: &Attr) -> String {
    let t = match a.kind {
        FileKind::File => '-',
        FileKind::Dir => 'd',
        FileKind::Symlink => 'l',
        FileKind::Fifo => 'p',
        FileKind::Socket => 's',
        FileKind::CharDev => 'c',
        FileKind::BlockDev => 'b',
    };
    let p = a.perm;
    let bit = |m: u16, c: char| if p & m != 0 { c } else { '-' };
    let special = |x: u16, s: u16, on: char, off: char| match (p & x != 0, p & s != 0) {
        (true, true) => on,
        (false, true) => off,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        t,
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't', 'T'),
    ]
    .iter()
    .collect()
}

/// A time as `2026-11-28 10:15:00` (UTC).
fn utc(t: ufs::Time) -> String {
    let when = if t.sec >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.sec as u64)
    } else {
        std::time::UNIX_EPOCH - std::time::Duration::from_secs(t.sec.unsigned_abs())
    };
    let s = humantime::format_rfc3339_seconds(when).to_string();
    s.trim_end_matches('Z').replacen('T', " ", 1)
}

pub fn cmd_cat(a: CatArgs) -> Result<(), String> {
    let fs = open_read_only(&a.image)?;
    let mut out = std::io::stdout().lock();
    for p in &a.paths {
        let at = find(&fs, p)?;
        if at.kind == FileKind::Dir {
            return Err(format!("{}: is a directory", p.display()));
        }
        if at.kind != FileKind::File {
            return Err(format!("{}: not a regular file", p.display()));
        }
        let mut pos = 0;
        while pos < at.size {
            let buf = fs
                .read(at.ino, pos, CHUNK)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            if buf.is_empty() {
                break;
            }
            match out.write_all(&buf) {
                Ok(()) => {}
                // A reader that went away (`| head`) ends the command quietly.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                Err(e) => return Err(format!("standard output: {e}")),
            }
            pos += buf.len() as u64;
        }
    }
    out.flush().map_err(|e| format!("standard output: {e}"))
}

#[derive(serde::Serialize)]
struct StatOut {
    path: String,
    #[serde(flatten)]
    attr: Attr,
    /// Extended attributes by their Linux names.
    xattrs: Vec<String>,
}

pub fn cmd_stat(a: StatArgs) -> Result<(), String> {
    let fs = open_read_only(&a.image)?;
    let mut all = Vec::new();
    for p in &a.paths {
        let attr = find(&fs, p)?;
        let xattrs = fs
            .listxattr(attr.ino, Cred::ROOT)
            .unwrap_or_default()
            .into_iter()
            .map(|(ns, n)| String::from_utf8_lossy(&linux_xattr_name(ns, &n).0).into_owned())
            .collect();
        all.push(StatOut {
            path: p.display().to_string(),
            attr,
            xattrs,
        });
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    for s in &all {
        let a = &s.attr;
        println!("  File: {}", s.path);
        println!(
            "  Size: {:<12} Blocks: {:<10} IO Block: {:<6} {}",
            a.size,
            a.blocks,
            a.blksize,
            kind_name(a.kind)
        );
        println!(
            " Inode: {:<12} Links: {:<10} Generation: {}",
            a.ino, a.nlink, a.gen
        );
        println!(
            "Access: ({:04o}/{})  Uid: {:<6} Gid: {:<6} Flags: {:#x}",
            a.perm,
            mode_string(a),
            a.uid,
            a.gid,
            a.flags
        );
        if matches!(a.kind, FileKind::CharDev | FileKind::BlockDev) {
            let d = host_dev(a.rdev);
            println!(
                "Device: {}, {}",
                nix::sys::stat::major(d),
                nix::sys::stat::minor(d)
            );
        }
        for (what, t) in [
            ("Access", a.atime),
            ("Modify", a.mtime),
            ("Change", a.ctime),
            (" Birth", a.birthtime),
        ] {
            println!("{what}: {}.{:09} UTC", utc(t), t.nsec);
        }
        if !s.xattrs.is_empty() {
            println!("Xattrs: {}", s.xattrs.join(", "));
        }
    }
    Ok(())
}

fn kind_name(k: FileKind) -> &'static str {
    match k {
        FileKind::File => "regular file",
        FileKind::Dir => "directory",
        FileKind::Symlink => "symbolic link",
        FileKind::Fifo => "fifo",
        FileKind::Socket => "socket",
        FileKind::CharDev => "character special file",
        FileKind::BlockDev => "block special file",
    }
}
