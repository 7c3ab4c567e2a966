//! `ufskit makefs`: a UFS image made from a host directory tree, without a
//! mount and without root, with FreeBSD's and NetBSD's makefs(8) option
//! names. The tree is put in by the engine's own operations (mkdir, mknod,
//! write, link, symlink, setxattr, setattr) on a freshly made file system,
//! so placement is the engine's (dirpref, inode order, block choice), not a
//! second allocator, and every image is one the mount could have written.
//!
//! Invariants:
//! - The host tree is read in name order (bytes), so the same tree and
//!   options give the same calls in the same order; with `-T` (or
//!   `SOURCE_DATE_EPOCH`) every stamped time is fixed and the allocator and
//!   newfs are seeded, so two runs give identical bytes.
//! - Sparse files stay sparse: only the source's data runs
//!   (SEEK_DATA/SEEK_HOLE) are written; the size is set after.
//! - An image that does not fit the size asked for is an error that names
//!   the size; with no size given, the image is made at an estimate and
//!   made again larger until the tree fits (the smallest fitting size
//!   within an eighth).
//! - The image left behind is unmounted cleanly (clean flag set), or
//!   removed when the command fails.
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use ufs::ops::linux_xattr::{acl_from_linux, LinuxXattr};
use ufs::{Cred, Fs, Ino, MountOptions, SetAttr, Time, TimeSet, XattrSet};

#[derive(clap::Args)]
pub struct MakefsArgs {
    /// File system type: ffs (the only one).
    #[arg(short = 't', default_value = "ffs")]
    fstype: String,
    /// Image size (bytes, or with k, M, G, T); default: the smallest that
    /// holds the tree, with -b and -f added.
    #[arg(short = 's')]
    size: Option<String>,
    /// Smallest image to make.
    #[arg(short = 'm')]
    minsize: Option<String>,
    /// Largest image to make (an error if the tree needs more).
    #[arg(short = 'M')]
    maxsize: Option<String>,
    /// Free space to leave beyond the tree: bytes (k, M, G) or a
    /// percentage of the tree's size (`10%`).
    #[arg(short = 'b')]
    free_blocks: Option<String>,
    /// Free inodes to leave beyond the tree: a count or a percentage.
    #[arg(short = 'f')]
    free_files: Option<String>,
    /// Byte order: le | be (also little, big, 1234, 4321).
    #[arg(short = 'B')]
    byte_order: Option<String>,
    /// Timestamp for every time in the image (seconds since the epoch, or
    /// a file whose modification time to use); makes the image
    /// reproducible. SOURCE_DATE_EPOCH in the environment does the same
    /// when -T is not given.
    #[arg(short = 'T')]
    timestamp: Option<String>,
    /// An mtree(5) specification: owners, groups, modes and times for the
    /// paths it names override the tree's (full-path or hierarchical form;
    /// `/set` and `/unset` understood; directories it names that the tree
    /// lacks are made).
    #[arg(short = 'F')]
    spec: Option<PathBuf>,
    /// Every file owned by root (uid and gid 0), as an unprivileged image
    /// builder wants; -F entries still win.
    #[arg(short = 'r', long = "root-owned")]
    root_owned: bool,
    /// File system options, comma-separated: version=1|2 (UFS1 or UFS2,
    /// default 2), softupdates=0|1, bsize=, fsize=, density=,
    /// minfree=, optimization=time|space, label=, avgfilesize=,
    /// avgfpdir=, maxbpg=.
    #[arg(short = 'o', action = clap::ArgAction::Append, value_name = "OPTIONS")]
    options: Vec<String>,
    /// Do not print the summary.
    #[arg(short, long)]
    quiet: bool,
    /// The image file to write (made or overwritten).
    image: PathBuf,
    /// The directory whose contents become the image's root.
    dir: PathBuf,
}

/// One entry of the host tree, as read.
struct Node {
    /// Path relative to the tree's top ("" for the top).
    rel: PathBuf,
    meta: std::fs::Metadata,
    /// Indexes of the children in the node list (directories only), in
    /// name order.
    children: Vec<usize>,
}

/// What the spec says about a path.
#[derive(Debug, Clone, Default, PartialEq)]
struct SpecEntry {
    uid: Option<u32>,
    gid: Option<u32>,
    mode: Option<u16>,
    time: Option<Time>,
    dir: bool,
}

pub fn cmd_makefs(a: MakefsArgs) -> Result<(), String> {
    if a.fstype != "ffs" {
        return Err(format!(
            "unknown file system type '{}': ufskit makes ffs only",
            a.fstype
        ));
    }
    let mut p = ufs::newfs::NewfsParams {
        // FreeBSD's makefs makes no .snap directory.
        no_snap: true,
        ..Default::default()
    };
    let mut user_density = false;
    for o in a.options.iter().flat_map(|s| s.split(',')) {
        if o.is_empty() {
            continue;
        }
        let (k, v) = o.split_once('=').unwrap_or((o, ""));
        let num = |v: &str| -> Result<u64, String> {
            crate::parse_size(v).map_err(|e| format!("-o {k}: {e}"))
        };
        match k {
            "version" => {
                p.format = match v {
                    "1" => ufs_format::Ufs::Ufs1,
                    "2" => ufs_format::Ufs::Ufs2,
                    _ => return Err(format!("-o version={v}: use 1 (UFS1) or 2 (UFS2)")),
                }
            }
            "softupdates" => p.softupdates = v == "1",
            "bsize" => {
                p.bsize = num(v)?;
                p.fsize = 0;
            }
            "fsize" => p.fsize = num(v)?,
            "density" => {
                p.density = Some(num(v)?);
                user_density = true;
            }
            "minfree" => p.minfree = num(v)?,
            "optimization" => {
                p.optim = match v {
                    "time" => ufs_format::FS_OPTTIME,
                    "space" => ufs_format::FS_OPTSPACE,
                    _ => return Err(format!("-o optimization={v}: use time or space")),
                }
            }
            "label" => p.volname = v.to_string(),
            "avgfilesize" => p.avgfilesize = num(v)? as u32,
            "avgfpdir" => p.avgfpdir = num(v)? as u32,
            "maxbpg" => p.maxbpg = Some(num(v)?),
            _ => {
                return Err(format!(
                    "unknown ffs option '{k}': use version, softupdates, bsize, fsize, density, minfree, optimization, label, avgfilesize, avgfpdir, maxbpg"
                ))
            }
        }
    }
    if let Some(b) = &a.byte_order {
        p.endian = crate::parse_byte_order(b)?;
    }
    let stamp = match (&a.timestamp, std::env::var("SOURCE_DATE_EPOCH")) {
        (Some(t), _) => Some(parse_timestamp(t)?),
        (None, Ok(s)) if !s.is_empty() => Some(
            s.trim()
                .parse::<i64>()
                .map_err(|_| format!("SOURCE_DATE_EPOCH={s}: not a number of seconds"))?,
        ),
        _ => None,
    };
    if let Some(t) = stamp {
        p.time = Some(t);
        p.seed = Some(t as u64);
    }
    let spec = match &a.spec {
        Some(f) => read_spec(f)?,
        None => HashMap::new(),
    };
    let size = a.size.as_deref().map(crate::parse_size).transpose()?;
    let minsize = a.minsize.as_deref().map(crate::parse_size).transpose()?;
    let maxsize = a.maxsize.as_deref().map(crate::parse_size).transpose()?;

    let top = std::fs::symlink_metadata(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    if !top.is_dir() {
        return Err(format!("{}: not a directory", a.dir.display()));
    }
    let nodes = scan(&a.dir, top)?;
    let need = estimate(&nodes, &p);
    let files = nodes.len() as u64 + spec.len() as u64;
    let extra_files = match a.free_files.as_deref() {
        Some(s) => amount(s, files)?,
        None => 0,
    };
    let extra_bytes = match a.free_blocks.as_deref() {
        Some(s) => amount(s, need)?,
        None => 0,
    };
    let inodes = files + extra_files + 64;
    let mut try_size = match size {
        Some(s) => s,
        None => {
            let guess = (need + extra_bytes) / 100 * (100 + p.minfree) + inodes * 256 + (4 << 20);
            guess.max(minsize.unwrap_or(0)).max(4 << 20)
        }
    };
    let bar = crate::progress::bar(need.max(1), "bytes");
    loop {
        if let Some(m) = maxsize {
            if try_size > m {
                bar.finish_and_clear();
                let _ = std::fs::remove_file(&a.image);
                return Err(format!(
                    "{} does not fit in -M {m} bytes (it needed more than {})",
                    a.dir.display(),
                    m
                ));
            }
        }
        let mut q = p.clone();
        q.size = Some(try_size);
        if !user_density && size.is_none() {
            // Enough inodes for the tree and -f, not the default's many.
            q.density = Some((try_size / inodes.max(1)).clamp(4096, 1 << 20));
        }
        bar.set_position(0);
        match build(&a, &q, &nodes, &spec, stamp, &bar) {
            Ok(fs_summary) => {
                bar.finish_and_clear();
                if !a.quiet {
                    eprintln!(
                        "ufskit makefs: {} ({} entries) into {}: {} bytes, {}",
                        a.dir.display(),
                        nodes.len(),
                        a.image.display(),
                        try_size,
                        fs_summary
                    );
                }
                return Ok(());
            }
            Err(Failure::Full(_)) if size.is_none() => {
                try_size += (try_size / 8).max(1 << 20);
            }
            Err(Failure::Full(why)) => {
                bar.finish_and_clear();
                let _ = std::fs::remove_file(&a.image);
                return Err(format!(
                    "{} does not fit in -s {} bytes ({why}); give a larger -s, or none to have the size found",
                    a.dir.display(),
                    try_size
                ));
            }
            Err(Failure::Other(e)) => {
                bar.finish_and_clear();
                let _ = std::fs::remove_file(&a.image);
                return Err(e);
            }
        }
    }
}

/// `-T`: seconds since the epoch, or a file whose modification time.
fn parse_timestamp(t: &str) -> Result<i64, String> {
    if let Ok(n) = t.parse::<i64>() {
        return Ok(n);
    }
    std::fs::metadata(t)
        .map(|m| m.mtime())
        .map_err(|e| format!("-T {t}: neither seconds since the epoch nor a file ({e})"))
}

/// `-b`/`-f`: a number (with a unit for bytes) or a percentage of `of`.
fn amount(s: &str, of: u64) -> Result<u64, String> {
    if let Some(pc) = s.strip_suffix('%') {
        let pc: u64 = pc.parse().map_err(|_| format!("bad percentage '{s}'"))?;
        return Ok(of / 100 * pc + of % 100 * pc / 100);
    }
    crate::parse_size(s)
}

/// Reads the tree under `top` (not following symlinks), each directory's
/// entries in byte order of their names.
fn scan(top: &Path, meta: std::fs::Metadata) -> Result<Vec<Node>, String> {
    let mut nodes = vec![Node {
        rel: PathBuf::new(),
        meta,
        children: Vec::new(),
    }];
    let mut i = 0;
    while i < nodes.len() {
        if nodes[i].meta.is_dir() {
            let dir = top.join(&nodes[i].rel);
            let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            names.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
            for n in names {
                let rel = nodes[i].rel.join(&n);
                let path = top.join(&rel);
                let meta = std::fs::symlink_metadata(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let at = nodes.len();
                nodes.push(Node {
                    rel,
                    meta,
                    children: Vec::new(),
                });
                nodes[i].children.push(at);
            }
        }
        i += 1;
    }
    Ok(nodes)
}

/// Bytes of blocks the tree's data, directories and indirect blocks take,
/// from the sizes (allocated bytes for sparse files), rounded as FFS
/// allocates: whole blocks but for a short file's last, in fragments.
fn estimate(nodes: &[Node], p: &ufs::newfs::NewfsParams) -> u64 {
    let bsize = if p.bsize == 0 { 32768 } else { p.bsize };
    let fsize = if p.fsize == 0 {
        (bsize / 8).max(4096)
    } else {
        p.fsize
    };
    let ptrs = bsize
        / if p.format == ufs_format::Ufs::Ufs1 {
            4
        } else {
            8
        };
    let up = |n: u64, to: u64| n.div_ceil(to) * to;
    let mut total = 0;
    for n in nodes {
        let m = &n.meta;
        let bytes = if m.is_dir() {
            // Entries: 8 bytes and the name padded to 4, in 512-byte chunks.
            let names: u64 = n.children.len() as u64 * 24 + 24;
            up(names, fsize)
        } else if m.is_file() || m.file_type().is_symlink() {
            let data = m.len().min(m.blocks() * 512 + bsize);
            let blocks = data.div_ceil(bsize);
            let mut b = if blocks <= 12 {
                up(data, fsize)
            } else {
                up(data, bsize)
            };
            if blocks > 12 {
                let ind = (blocks - 12).div_ceil(ptrs);
                b += (ind + ind.div_ceil(ptrs) + 1) * bsize;
            }
            b
        } else {
            0
        };
        total += bytes;
    }
    total
}

enum Failure {
    /// Out of space or inodes: a larger image may do.
    Full(String),
    Other(String),
}

fn full_or(e: ufs::Error, what: &Path) -> Failure {
    if e.kind == ufs::ErrorKind::NoSpace {
        Failure::Full(format!("{}: {e}", what.display()))
    } else {
        Failure::Other(format!("{}: {e}", what.display()))
    }
}

/// Makes the image at `q.size` and puts the tree in. Returns a summary.
fn build(
    a: &MakefsArgs,
    q: &ufs::newfs::NewfsParams,
    nodes: &[Node],
    spec: &HashMap<PathBuf, SpecEntry>,
    stamp: Option<i64>,
    bar: &indicatif::ProgressBar,
) -> Result<String, Failure> {
    let other = |e: String| Failure::Other(e);
    let size = q.size.unwrap_or(0);
    {
        let f = std::fs::File::create(&a.image)
            .map_err(|e| other(format!("{}: {e}", a.image.display())))?;
        f.set_len(size)
            .map_err(|e| other(format!("{}: {e}", a.image.display())))?;
    }
    let dev = crate::open_dev(&a.image, true).map_err(other)?;
    ufs::newfs::newfs(&*dev, q).map_err(|e| other(format!("newfs: {e}")))?;
    let opts = MountOptions {
        seed: Some(q.seed.unwrap_or(1)),
        write_mode: Some(ufs::order::WriteMode::Async),
        ..Default::default()
    };
    ufs::fs::set_thread_clock(stamp);
    let r = (|| {
        let fs = Fs::open(dev, opts).map_err(|e| other(format!("{}: {e}", a.image.display())))?;
        let mut put = Putter {
            fs: &fs,
            a,
            spec,
            stamp,
            links: HashMap::new(),
            bar,
            warned: Default::default(),
            buf: Vec::new(),
        };
        let root = fs.root();
        put.children(nodes, 0, root)?;
        put.spec_dirs(root)?;
        put.finish(&nodes[0], root, Path::new(""))?;
        let st = fs.statfs();
        fs.unmount()
            .map_err(|e| other(format!("{}: {e}", a.image.display())))?;
        Ok(format!(
            "{}, {} of {} fragments free, {} of {} inodes free",
            if q.format == ufs_format::Ufs::Ufs1 {
                "UFS1"
            } else {
                "UFS2"
            },
            st.bfree,
            st.blocks,
            st.ffree,
            st.files
        ))
    })();
    ufs::fs::set_thread_clock(None);
    r
}

struct Putter<'a> {
    fs: &'a Fs,
    a: &'a MakefsArgs,
    spec: &'a HashMap<PathBuf, SpecEntry>,
    stamp: Option<i64>,
    /// Host (device, inode) of files with other links → image inode.
    links: HashMap<(u64, u64), Ino>,
    bar: &'a indicatif::ProgressBar,
    warned: std::collections::HashSet<&'static str>,
    /// The copy buffer, kept from file to file.
    buf: Vec<u8>,
}

impl Putter<'_> {
    fn warn(&mut self, kind: &'static str, what: String) {
        if self.warned.insert(kind) {
            eprintln!(
                "ufskit makefs: warning: {what} (further warnings of this kind are not shown)"
            );
        }
    }

    /// Puts node `i`'s children into image directory `dir`.
    fn children(&mut self, nodes: &[Node], i: usize, dir: Ino) -> Result<(), Failure> {
        for &c in &nodes[i].children {
            let n = &nodes[c];
            let src = self.a.dir.join(&n.rel);
            let name = n.rel.file_name().unwrap_or_default().as_bytes();
            let m = &n.meta;
            let ft = m.file_type();
            let key = (m.dev(), m.ino());
            if !m.is_dir() && m.nlink() > 1 {
                if let Some(&ino) = self.links.get(&key) {
                    self.fs.link(ino, dir, name).map_err(|e| full_or(e, &src))?;
                    continue;
                }
            }
            let perm = (m.mode() & 0o7777) as u16;
            let ino = if ft.is_dir() {
                let at = self
                    .fs
                    .mkdir(dir, name, 0o700, Cred::ROOT)
                    .map_err(|e| full_or(e, &src))?;
                self.children(nodes, c, at.ino)?;
                at.ino
            } else if ft.is_file() {
                let at = self
                    .fs
                    .mknod(dir, name, 0o100000 | u32::from(perm), 0, Cred::ROOT)
                    .map_err(|e| full_or(e, &src))?;
                self.data(&src, m.len(), at.ino)?;
                at.ino
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&src)
                    .map_err(|e| Failure::Other(format!("{}: {e}", src.display())))?;
                self.fs
                    .symlink(dir, name, target.as_os_str().as_bytes(), Cred::ROOT)
                    .map_err(|e| full_or(e, &src))?
                    .ino
            } else {
                use std::os::unix::fs::FileTypeExt;
                let (kind, rdev) = if ft.is_char_device() {
                    (0o020000, crate::image::stored_dev(m.rdev()))
                } else if ft.is_block_device() {
                    (0o060000, crate::image::stored_dev(m.rdev()))
                } else if ft.is_fifo() {
                    (0o010000, 0)
                } else {
                    self.warn("socket", format!("{}: a socket, left out", src.display()));
                    continue;
                };
                self.fs
                    .mknod(dir, name, kind | u32::from(perm), rdev, Cred::ROOT)
                    .map_err(|e| full_or(e, &src))?
                    .ino
            };
            if !m.is_dir() && m.nlink() > 1 {
                self.links.insert(key, ino);
            }
            self.attributes(&src, ino)?;
            self.finish(n, ino, &n.rel)?;
            self.bar.inc(m.len().min(m.blocks() * 512).max(512));
        }
        Ok(())
    }

    /// A regular file's data runs, read with SEEK_DATA/SEEK_HOLE; the size
    /// set after (a hole at the end stays one).
    fn data(&mut self, src: &Path, len: u64, ino: Ino) -> Result<(), Failure> {
        let f = std::fs::File::open(src)
            .map_err(|e| Failure::Other(format!("{}: {e}", src.display())))?;
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(1 << 20, 0);
        let r = self.runs(&f, src, len, ino, &mut buf);
        self.buf = buf;
        r?;
        let cut = SetAttr {
            size: Some(len),
            ..Default::default()
        };
        self.fs
            .setattr(ino, &cut, Cred::ROOT)
            .map_err(|e| full_or(e, src))?;
        Ok(())
    }

    /// Copies the data runs of `f` (`len` bytes) into image inode `ino`.
    fn runs(
        &mut self,
        f: &std::fs::File,
        src: &Path,
        len: u64,
        ino: Ino,
        buf: &mut [u8],
    ) -> Result<(), Failure> {
        use nix::unistd::{lseek, Whence};
        let host = |e: &dyn std::fmt::Display| Failure::Other(format!("{}: {e}", src.display()));
        let mut off: u64 = 0;
        while off < len {
            let start = match lseek(f, off as i64, Whence::SeekData) {
                Ok(s) => s as u64,
                Err(nix::errno::Errno::ENXIO) => break,
                // A file system without SEEK_DATA: all of it is data.
                Err(nix::errno::Errno::EINVAL) => off,
                Err(e) => return Err(host(&e)),
            };
            let end = match lseek(f, start as i64, Whence::SeekHole) {
                Ok(e) => (e as u64).min(len),
                Err(_) => len,
            };
            let mut pos = start;
            while pos < end {
                let n = ((end - pos) as usize).min(buf.len());
                let got = f.read_at(&mut buf[..n], pos).map_err(|e| host(&e))?;
                if got == 0 {
                    break;
                }
                let mut done = 0;
                while done < got {
                    let w = self
                        .fs
                        .write(ino, pos + done as u64, &buf[done..got], Cred::ROOT)
                        .map_err(|e| full_or(e, src))?;
                    done += w;
                }
                pos += got as u64;
            }
            off = end.max(off + 1);
        }
        Ok(())
    }

    /// The source's extended attributes and ACLs (those this user can
    /// read; a name with no place on UFS is left out with a warning).
    fn attributes(&mut self, src: &Path, ino: Ino) -> Result<(), Failure> {
        let names = match xattr::list(src) {
            Ok(n) => n,
            Err(_) => return Ok(()),
        };
        let mut names: Vec<_> = names.collect();
        names.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
        for name in names {
            let Ok(Some(value)) = xattr::get(src, &name) else {
                continue;
            };
            let r = match LinuxXattr::parse(name.as_bytes()) {
                Some(LinuxXattr::Acl(kind)) => match acl_from_linux(&value) {
                    Some(entries) => self
                        .fs
                        .set_acl(ino, kind, Some(&entries), false, Cred::ROOT),
                    None => continue,
                },
                Some(LinuxXattr::Raw(ns, n)) => {
                    self.fs
                        .setxattr(ino, ns, n, &value, XattrSet::Either, Cred::ROOT)
                }
                None => {
                    self.warn(
                        "xattr-name",
                        format!(
                            "{}: attribute {} has no place on UFS, left out",
                            src.display(),
                            name.to_string_lossy()
                        ),
                    );
                    continue;
                }
            };
            r.map_err(|e| full_or(e, src))?;
        }
        Ok(())
    }

    /// Owner, mode and times of `n` (at `rel`) onto image inode `ino`:
    /// the source's, then -r, then the spec's, then -T's time.
    fn finish(&mut self, n: &Node, ino: Ino, rel: &Path) -> Result<(), Failure> {
        let m = &n.meta;
        let mut uid = m.uid();
        let mut gid = m.gid();
        if self.a.root_owned {
            (uid, gid) = (0, 0);
        }
        let mut perm = (m.mode() & 0o7777) as u16;
        let mut atime = Time {
            sec: m.atime(),
            nsec: m.atime_nsec() as u32,
        };
        let mut mtime = Time {
            sec: m.mtime(),
            nsec: m.mtime_nsec() as u32,
        };
        if let Some(s) = self.spec.get(rel) {
            uid = s.uid.unwrap_or(uid);
            gid = s.gid.unwrap_or(gid);
            perm = s.mode.unwrap_or(perm);
            if let Some(t) = s.time {
                (atime, mtime) = (t, t);
            }
        }
        if let Some(t) = self.stamp {
            let t = Time { sec: t, nsec: 0 };
            (atime, mtime) = (t, t);
        }
        // A symlink's mode is not set (Linux's are all 0777).
        let mode = (!m.file_type().is_symlink()).then_some(perm);
        self.set(ino, uid, gid, mode, atime, mtime, rel)
    }

    #[allow(clippy::too_many_arguments)]
    fn set(
        &mut self,
        ino: Ino,
        uid: u32,
        gid: u32,
        mode: Option<u16>,
        atime: Time,
        mtime: Time,
        rel: &Path,
    ) -> Result<(), Failure> {
        let s = SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            mode,
            atime: Some(TimeSet::At(atime)),
            mtime: Some(TimeSet::At(mtime)),
            ..Default::default()
        };
        self.fs
            .setattr(ino, &s, Cred::ROOT)
            .map_err(|e| full_or(e, &self.a.dir.join(rel)))?;
        Ok(())
    }

    /// Directories the spec names that the tree lacks.
    fn spec_dirs(&mut self, root: Ino) -> Result<(), Failure> {
        let mut dirs: Vec<(&PathBuf, &SpecEntry)> =
            self.spec.iter().filter(|(_, s)| s.dir).collect();
        dirs.sort_by(|x, y| x.0.cmp(y.0));
        for (rel, s) in dirs {
            if rel.as_os_str().is_empty() {
                continue;
            }
            let mut at = root;
            for comp in rel.components() {
                let name = comp.as_os_str().as_bytes();
                at = match self.fs.lookup(at, name) {
                    Ok(a) => a.ino,
                    Err(e) if e.kind == ufs::ErrorKind::NotFound => {
                        let made = self
                            .fs
                            .mkdir(at, name, 0o755, Cred::ROOT)
                            .map_err(|e| full_or(e, rel))?;
                        let t = Time {
                            sec: self.stamp.unwrap_or_else(|| ufs::fs::now().0),
                            nsec: 0,
                        };
                        let t = s.time.unwrap_or(t);
                        self.set(
                            made.ino,
                            s.uid.unwrap_or(0),
                            s.gid.unwrap_or(0),
                            Some(s.mode.unwrap_or(0o755)),
                            t,
                            t,
                            rel,
                        )?;
                        made.ino
                    }
                    Err(e) => return Err(full_or(e, rel)),
                };
            }
        }
        Ok(())
    }
}

/// Reads an mtree(5) specification: each path's uid, gid, mode, time and
/// whether it is a directory. Full-path lines (`./a/b key=value...`) and
/// the hierarchical form (a bare name, `..` to go up) both; `/set` gives
/// defaults, `/unset` takes them back; uname/gname are taken when they
/// are `root`/`wheel` (0) since the image's names are not the host's.
fn read_spec(f: &Path) -> Result<HashMap<PathBuf, SpecEntry>, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
    parse_spec(&text).map_err(|e| format!("{}: {e}", f.display()))
}

fn parse_spec(text: &str) -> Result<HashMap<PathBuf, SpecEntry>, String> {
    let mut out = HashMap::new();
    let mut defaults: HashMap<String, String> = HashMap::new();
    let mut cwd = PathBuf::new();
    // Lines continued with a backslash are joined first.
    let joined = text.replace("\\\n", " ");
    for (no, line) in joined.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let kv: Vec<(String, String)> = words
            .map(|w| {
                let (k, v) = w.split_once('=').unwrap_or((w, ""));
                (k.to_string(), v.to_string())
            })
            .collect();
        match first {
            "/set" => {
                for (k, v) in kv {
                    defaults.insert(k, v);
                }
                continue;
            }
            "/unset" => {
                for (k, _) in kv {
                    if k == "all" {
                        defaults.clear();
                    } else {
                        defaults.remove(&k);
                    }
                }
                continue;
            }
            ".." => {
                cwd.pop();
                continue;
            }
            _ => {}
        }
        let name = unvis(first);
        let rel: PathBuf = if name.contains('/') {
            // Full path, from the top ("./a/b").
            Path::new(&name)
                .components()
                .filter(|c| matches!(c, std::path::Component::Normal(_)))
                .collect()
        } else if name == "." {
            PathBuf::new()
        } else {
            cwd.join(&name)
        };
        let mut all = defaults.clone();
        for (k, v) in kv {
            all.insert(k, v);
        }
        let bad = |k: &str, v: &str| format!("line {}: bad {k}={v}", no + 1);
        let mut e = SpecEntry::default();
        for (k, v) in &all {
            match k.as_str() {
                "uid" => e.uid = Some(v.parse().map_err(|_| bad(k, v))?),
                "gid" => e.gid = Some(v.parse().map_err(|_| bad(k, v))?),
                "uname" if v == "root" && !all.contains_key("uid") => e.uid = Some(0),
                "gname" if (v == "wheel" || v == "root") && !all.contains_key("gid") => {
                    e.gid = Some(0)
                }
                "mode" => e.mode = Some(u16::from_str_radix(v, 8).map_err(|_| bad(k, v))? & 0o7777),
                "time" => {
                    let (s, ns) = v.split_once('.').unwrap_or((v, "0"));
                    e.time = Some(Time {
                        sec: s.parse().map_err(|_| bad(k, v))?,
                        nsec: ns.parse().map_err(|_| bad(k, v))?,
                    });
                }
                "type" => e.dir = v == "dir",
                _ => {}
            }
        }
        if e.dir && !name.contains('/') && name != "." {
            cwd = rel.clone();
        }
        out.insert(rel, e);
    }
    Ok(out)
}

/// mtree's vis(3) encoding of names: `\ooo` octal escapes.
fn unvis(s: &str) -> String {
    String::from_utf8_lossy(&ufs::text::unescape_octal(s)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_in_either_form_gives_owners_modes_and_directories() {
        let full = "#mtree\n/set type=file uid=0 gid=0 mode=0644\n. type=dir mode=0755\n./etc type=dir mode=0755\n./etc/master.passwd mode=0600\n./var/empty type=dir mode=0555 uname=root gname=wheel\n./my\\040file uid=1001 time=1700000000.5\n";
        let s = parse_spec(full).unwrap();
        assert_eq!(s[Path::new("etc/master.passwd")].mode, Some(0o600));
        assert_eq!(s[Path::new("etc/master.passwd")].uid, Some(0));
        assert!(s[Path::new("var/empty")].dir);
        assert_eq!(s[Path::new("var/empty")].mode, Some(0o555));
        assert_eq!(s[Path::new("my file")].uid, Some(1001));
        assert_eq!(
            s[Path::new("my file")].time,
            Some(Time {
                sec: 1_700_000_000,
                nsec: 5
            })
        );
        let tree = "/set uid=0 gid=0\n. type=dir mode=0755\nbin type=dir mode=0755\n    sh type=file mode=0555\n..\netc type=dir\n    rc mode=0644 uid=3\n..\n";
        let s = parse_spec(tree).unwrap();
        assert_eq!(s[Path::new("bin/sh")].mode, Some(0o555));
        assert_eq!(s[Path::new("etc/rc")].uid, Some(3));
        assert!(s[Path::new("etc")].dir);
        assert!(parse_spec("./x mode=99z\n").is_err());
    }
}
