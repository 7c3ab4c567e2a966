//! A build-like workload standing in for seed `004_*`'s Buildworld (section
//! 4.1: a FreeBSD source tree checked out of a local CVS repository, built
//! with `make buildworld`, the kernel sources searched with `grep`, the
//! object tree removed), on a generated tree and with the compilers' CPU
//! time declared on the modeled clock.
//!
//! Tests, in order:
//! - `build-checkout`: `cvs checkout src`: depth first, every directory is
//!   made with its `CVS/` (`Root`, `Repository`), its files are created and
//!   written in name order, each one noted in `CVS/Entries.Log`, and when
//!   the directory is done `CVS/Entries.Backup` is written, renamed over
//!   `CVS/Entries` and the log removed (CVS's own sequence);
//! - `build-compile`: `make buildworld` reduced to its file system work:
//!   `make obj` (an object directory for every source directory outside the
//!   kernel), the headers installed into `obj/worldtmp/usr/include`, then
//!   per directory: make reads the Makefile and the `share/mk` files, stats
//!   every source and its (missing) object, and for every `.c` the compiler
//!   driver runs cpp, cc1 and as with `-pipe` off: the source is read, its
//!   `#include` lines parsed and each header looked up (first, in vain, in
//!   the source's directory, as `-I${.CURDIR}` makes cpp do) and read, the
//!   preprocessed text written to `obj/tmp/ccXXXXXX.i`, read back by cc1,
//!   which writes `ccXXXXXX.s`, read by as, which writes the `.o`; the two
//!   temporaries are removed when the driver exits. Then ar reads every
//!   `.o` of the directory and writes the archive to a temporary name
//!   renamed to `lib<dir>.a`, and mkdep's `.depend` is written;
//! - `build-grep`: `grep -r '#include' src/sys`: every entry of the kernel
//!   subtree looked up, every file read in 32 KB buffers;
//! - `build-remove`: `rm -rf obj`.
//!
//! The source tree is then removed untimed (the paper times only the four
//! tests above), so the file system ends as it began.
//!
//! The tree (from `p.seed`, `p.build_files` files, not counting `CVS/`):
//! FreeBSD 4.x `src/`'s top-level areas with their rough shares of files
//! (sys 30%, contrib 22%, lib 10%, usr.bin 10%, usr.sbin 8%, gnu 5%,
//! share 5%, sbin 3%, libexec 2%, games 2%, bin 1.5%, include 1.5%), the
//! kernel's well-known directories (`sys/sys`, `kern`, `vm`, `net`,
//! `netinet`, `ufs/ffs`, `i386/include`, ...) plus drivers under
//! `sys/dev/`; other directories hold log-normally many files (median 6 in
//! the program areas, 25 in contrib and lib, 2 to 400), nested up to three
//! levels. Sizes are log-normal: `.c` median 7 KB (sigma 1.0, cap 200 KB),
//! `.h` 2.5 KB (sigma 1.0, cap 100 KB), Makefile 600 B, man pages 4 KB,
//! about 8 KB a file on average (FreeBSD 4.5's src held some 300 MB in
//! about 35,000 files); a `.c` includes 0 to 2 headers of its directory and
//! 3 to 8 installed (or, in the kernel, kernel) headers, popular ones more
//! often.
//!
//! CPU constants (Pentium 4 at 1.6 GHz, gcc 2.95 at `-O`; our estimates,
//! calibrated so that a typical 11 KB source compiles in about 0.1 s and a
//! full build is CPU-bound only once soft updates remove the synchronous
//! writes, as in the paper's Table 1, where all four optimisations bring
//! the build to 47% of its unoptimised time; at the full size our compile
//! takes 48%):
//! - `EXEC_S`: 1 ms per process started (fork, exec of a static binary,
//!   exit; four per compile: driver, cpp, cc1, as; one per ar and make);
//! - `CPP_NS`: 50 ns per byte cpp reads (about 20 MB/s);
//! - `CC1_NS`: 9 µs per source byte (cc1 at about 110 KB/s of C);
//! - `AS_NS`: 100 ns per byte of assembly (10 MB/s);
//! - `AR_NS`: 20 ns per byte archived (copy and symbol table);
//! - `MAKE_S`: 20 ms per directory visited (make parsing `bsd.prog.mk`
//!   and friends);
//! - `GREP_NS`: 10 ns per byte searched (GNU grep's Boyer-Moore, about
//!   100 MB/s).
//!
//! Outputs: the assembly is `ASM_RATIO` (1.2) times the source, the object
//! `OBJ_RATIO` (0.5) times, the preprocessed text the source plus every
//! header it read.
//!
//! Invariants and checks: the same profile replays the same operations;
//! after the checkout every directory lists exactly its files, subdirectories
//! and `CVS/`, and every `CVS/Entries` has the expected size; the compile
//! parses the includes out of what it reads and fails unless they are the
//! ones generated, every header must read back with its own name on its
//! first line, every object with its source's, every archive must have the
//! size of its members and headers; grep must see every kernel file and
//! count exactly the `#include` lines generated there; after the removals
//! the root lists what it listed before.
use super::classic::{root_names, root_restored, write_all};
use super::meter::{Meter, UserCpu};
use super::{invalid, Profile};
use crate::tree::lognormal;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use ufs::{Cred, ErrorKind, FileKind, Fs, Ino, RenameMode};

pub(super) const TESTS: &[&str] = &[
    "build-checkout",
    "build-compile",
    "build-grep",
    "build-remove",
];

const EXEC_S: f64 = 0.001;
const CPP_NS: f64 = 50.0;
const CC1_NS: f64 = 9_000.0;
const AS_NS: f64 = 100.0;
const AR_NS: f64 = 20.0;
const MAKE_S: f64 = 0.020;
const GREP_NS: f64 = 10.0;
const ASM_RATIO: f64 = 1.2;
const OBJ_RATIO: f64 = 0.5;
/// grep's read buffer.
const GREP_BUF: usize = 32 * 1024;
/// The `share/mk` files every make reads.
const MK_FILES: &[&str] = &["sys.mk", "bsd.own.mk", "bsd.prog.mk", "bsd.lib.mk"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ft {
    C,
    H,
    Make,
    Man,
}

/// An `#include` of a `.c`.
#[derive(Debug, Clone)]
enum Inc {
    /// `"name.h"`: a header of the same directory (its file index).
    Local(usize),
    /// `<path>`: an installed header (userland, index in `Src::installed`)
    /// or a kernel one (index in `Src::kernel_headers`).
    System(usize),
}

struct SFile {
    name: String,
    ft: Ft,
    size: usize,
    includes: Vec<Inc>,
}

struct SDir {
    /// Path under `src/` ("" for `src` itself).
    path: String,
    name: String,
    files: Vec<SFile>,
    subdirs: Vec<usize>,
    /// Under `sys/`: grepped, not compiled.
    kernel: bool,
}

struct Src {
    dirs: Vec<SDir>,
    /// Headers installed for userland: (dir, file, path under include/).
    installed: Vec<(usize, usize, String)>,
    /// Kernel headers: (dir, file, path under sys/).
    kernel_headers: Vec<(usize, usize, String)>,
}

/// Name stems for directories and files.
const STEMS: &[&str] = &[
    "ls", "cat", "cp", "mv", "sh", "ed", "make", "awk", "sed", "grep", "find", "tar", "cpio",
    "mail", "lpr", "cron", "init", "mount", "fsck", "newfs", "dump", "route", "ifconfig", "ping",
    "inetd", "syslogd", "named", "ntpd", "ppp", "sendmail", "perl", "gcc", "gdb", "binutils", "bc",
    "dc", "diff", "patch", "rcs", "cvs", "groff", "texinfo", "less", "vi", "top", "ps", "kill",
    "login", "passwd", "su", "chown", "chmod", "ln", "rm", "mkdir", "test", "expr", "date", "echo",
    "pwd", "sleep", "stty", "csh", "ftp", "telnet", "rlogin", "ssh", "openssl", "kerberos", "bind",
    "isc", "ipfilter", "tcpdump", "libpcap", "ncurses", "readline", "regex", "zlib", "bzip2",
    "gzip", "compress", "file", "lex", "yacc", "m4", "indent", "ctags", "fortune", "rogue", "hack",
    "banner", "atc", "trek",
];

fn content_filler() -> Vec<u8> {
    let mut b = Vec::with_capacity(256 * 1024 + 64);
    let mut n = 0u64;
    while b.len() < 256 * 1024 {
        b.extend_from_slice(
            format!(
                "\tval{} = lookup(tbl, {}) + (flags & 0x{:x});\n",
                n % 97,
                n,
                n % 251
            )
            .as_bytes(),
        );
        n += 1;
    }
    b
}

struct Gen<'a> {
    rng: StdRng,
    src: &'a mut Src,
}

impl Gen<'_> {
    fn dir(&mut self, parent: usize, name: &str, kernel: bool) -> usize {
        let p = &self.src.dirs[parent];
        let path = if p.path.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", p.path)
        };
        let kernel = kernel || p.kernel;
        let i = self.src.dirs.len();
        self.src.dirs.push(SDir {
            path,
            name: name.to_string(),
            files: Vec::new(),
            subdirs: Vec::new(),
            kernel,
        });
        self.src.dirs[parent].subdirs.push(i);
        i
    }

    /// `n` files in `dir`: a Makefile, then `.c`/`.h`/man pages in the
    /// proportions given.
    fn fill(&mut self, dir: usize, n: usize, c: f64, h: f64) {
        let stem = self.src.dirs[dir].name.replace('.', "_");
        let mut files = vec![SFile {
            name: "Makefile".into(),
            ft: Ft::Make,
            size: lognormal(&mut self.rng, 600.0, 0.6).clamp(40.0, 20_000.0) as usize,
            includes: Vec::new(),
        }];
        for k in 1..n {
            let x: f64 = self.rng.gen();
            let (ft, ext, size) = if x < c {
                (
                    Ft::C,
                    "c",
                    lognormal(&mut self.rng, 7_000.0, 1.0).clamp(200.0, 200_000.0),
                )
            } else if x < c + h {
                (
                    Ft::H,
                    "h",
                    lognormal(&mut self.rng, 2_500.0, 1.0).clamp(100.0, 100_000.0),
                )
            } else {
                (
                    Ft::Man,
                    "8",
                    lognormal(&mut self.rng, 4_000.0, 0.7).clamp(200.0, 60_000.0),
                )
            };
            files.push(SFile {
                name: format!("{stem}_{k}.{ext}"),
                ft,
                size: size as usize,
                includes: Vec::new(),
            });
        }
        self.src.dirs[dir].files.extend(files);
    }

    fn files_count(&mut self, median: f64) -> usize {
        lognormal(&mut self.rng, median, 1.0).clamp(2.0, 400.0) as usize
    }
}

/// Areas of `src/`: name, share of files, median files a directory, share
/// of `.c` and `.h` among the files, chance a new directory nests in an
/// earlier one of the area.
const AREAS: &[(&str, f64, f64, f64, f64, f64)] = &[
    ("bin", 0.015, 6.0, 0.75, 0.05, 0.1),
    ("contrib", 0.22, 25.0, 0.55, 0.30, 0.5),
    ("games", 0.02, 6.0, 0.65, 0.15, 0.1),
    ("gnu", 0.05, 8.0, 0.6, 0.2, 0.4),
    ("lib", 0.10, 25.0, 0.7, 0.15, 0.4),
    ("libexec", 0.02, 6.0, 0.7, 0.1, 0.1),
    ("sbin", 0.03, 6.0, 0.7, 0.1, 0.1),
    ("share", 0.05, 15.0, 0.0, 0.0, 0.3),
    ("usr.bin", 0.10, 6.0, 0.7, 0.1, 0.1),
    ("usr.sbin", 0.08, 6.0, 0.7, 0.1, 0.15),
];
/// The kernel's named directories: path under sys/, share of the kernel's
/// files, share of `.c` and `.h`; the rest of the kernel is drivers under
/// `sys/dev/`.
const KERNEL_DIRS: &[(&str, f64, f64, f64)] = &[
    ("sys", 0.08, 0.0, 1.0),
    ("kern", 0.07, 0.95, 0.05),
    ("vm", 0.03, 0.6, 0.4),
    ("net", 0.04, 0.6, 0.4),
    ("netinet", 0.05, 0.6, 0.4),
    ("ufs/ufs", 0.015, 0.6, 0.4),
    ("ufs/ffs", 0.015, 0.6, 0.4),
    ("nfs", 0.03, 0.7, 0.3),
    ("i386/i386", 0.04, 0.8, 0.1),
    ("i386/include", 0.05, 0.0, 1.0),
    ("i386/isa", 0.04, 0.7, 0.3),
    ("cam/scsi", 0.03, 0.6, 0.4),
    ("pci", 0.03, 0.6, 0.4),
    ("boot/i386", 0.03, 0.7, 0.2),
];
const KERNEL_SHARE: f64 = 0.30;
const INCLUDE_SHARE: f64 = 0.015;

fn make_src(p: &Profile) -> Src {
    let total = p.build_files as usize;
    let mut src = Src {
        dirs: vec![SDir {
            path: String::new(),
            name: "src".into(),
            files: Vec::new(),
            subdirs: Vec::new(),
            kernel: false,
        }],
        installed: Vec::new(),
        kernel_headers: Vec::new(),
    };
    let mut g = Gen {
        rng: StdRng::seed_from_u64(p.seed ^ 0x0062_7569_6c64),
        src: &mut src,
    };
    g.fill(0, 4, 0.0, 0.0);
    let per = |share: f64| ((share * total as f64).round() as usize).max(2);
    // Areas in name order, as the checkout meets them.
    let mut tops: Vec<(&str, f64)> = AREAS.iter().map(|a| (a.0, a.1)).collect();
    tops.push(("include", INCLUDE_SHARE));
    tops.push(("sys", KERNEL_SHARE));
    tops.sort_by(|a, b| a.0.cmp(b.0));
    for (name, share) in tops {
        let budget = per(share);
        match name {
            "include" => {
                let top = g.dir(0, "include", false);
                let n = budget;
                g.fill(top, n * 6 / 10, 0.0, 1.0);
                for sub in ["arpa", "protocols", "rpc"] {
                    let d = g.dir(top, sub, false);
                    g.fill(d, (n * 4 / 30).max(2), 0.0, 1.0);
                }
            }
            "sys" => {
                let top = g.dir(0, "sys", true);
                g.fill(top, 2, 0.0, 0.0);
                let mut made: HashMap<String, usize> = HashMap::new();
                let mut used = 0;
                for &(path, s, c, h) in KERNEL_DIRS {
                    let mut d = top;
                    let mut so_far = String::new();
                    for part in path.split('/') {
                        so_far = if so_far.is_empty() {
                            part.to_string()
                        } else {
                            format!("{so_far}/{part}")
                        };
                        d = match made.get(&so_far) {
                            Some(&d) => d,
                            None => {
                                let n = g.dir(d, part, true);
                                made.insert(so_far.clone(), n);
                                n
                            }
                        };
                    }
                    let n = ((s * budget as f64).round() as usize).max(2);
                    g.fill(d, n, c, h);
                    used += n;
                }
                let dev = g.dir(top, "dev", true);
                g.fill(dev, 2, 0.0, 0.0);
                let mut k = 0;
                while used < budget {
                    let n = g.files_count(5.0).min(budget - used).max(2);
                    let d = g.dir(dev, &format!("{}{k}", STEMS[k % STEMS.len()]), true);
                    g.fill(d, n, 0.65, 0.35);
                    used += n;
                    k += 1;
                }
            }
            _ => {
                let &(_, _, median, c, h, nest) = AREAS.iter().find(|a| a.0 == name).unwrap();
                let top = g.dir(0, name, false);
                g.fill(top, 2, 0.0, 0.0);
                let mut mine = vec![top];
                let mut used = 2;
                let mut k = 0;
                while used < budget {
                    let n = g.files_count(median).min(budget - used).max(2);
                    let parent = if mine.len() > 1 && g.rng.gen_bool(nest) {
                        mine[g.rng.gen_range(1..mine.len())]
                    } else {
                        top
                    };
                    // Not deeper than area/x/y/z.
                    let parent = if g.src.dirs[parent].path.matches('/').count() >= 2 {
                        top
                    } else {
                        parent
                    };
                    let stem = STEMS[g.rng.gen_range(0..STEMS.len())];
                    let d = g.dir(parent, &format!("{stem}{k}"), false);
                    g.fill(d, n, c, h);
                    mine.push(d);
                    used += n;
                    k += 1;
                }
            }
        }
    }
    // share/mk holds what make reads.
    let share = src.dirs.iter().position(|d| d.path == "share").unwrap_or(0);
    let mut g = Gen {
        rng: StdRng::seed_from_u64(p.seed ^ 0x6d6b),
        src: &mut src,
    };
    let mk = g.dir(share, "mk", false);
    g.fill(mk, 1, 0.0, 0.0);
    for name in MK_FILES {
        let size = lognormal(&mut g.rng, 8_000.0, 0.5) as usize;
        g.src.dirs[mk].files.push(SFile {
            name: (*name).into(),
            ft: Ft::Make,
            size,
            includes: Vec::new(),
        });
    }
    let mut rng = g.rng;
    // Children and files in name order (as CVS and readdir-sorting tools
    // meet them).
    let names: Vec<String> = src.dirs.iter().map(|d| d.name.clone()).collect();
    for d in &mut src.dirs {
        d.subdirs.sort_by(|&a, &b| names[a].cmp(&names[b]));
        d.files.sort_by(|a, b| a.name.cmp(&b.name));
    }
    // Headers: installed ones (include/ and the kernel's public
    // directories), and every kernel header by its path under sys/.
    for (i, d) in src.dirs.iter().enumerate() {
        for (j, f) in d.files.iter().enumerate() {
            if f.ft != Ft::H {
                continue;
            }
            if let Some(rest) = d.path.strip_prefix("include") {
                let rest = rest.trim_start_matches('/');
                let p = if rest.is_empty() {
                    f.name.clone()
                } else {
                    format!("{rest}/{}", f.name)
                };
                src.installed.push((i, j, p));
            }
            if let Some(rest) = d.path.strip_prefix("sys/") {
                if ["sys", "vm", "net", "netinet"].contains(&rest) {
                    src.installed.push((i, j, format!("{rest}/{}", f.name)));
                }
                src.kernel_headers
                    .push((i, j, format!("{rest}/{}", f.name)));
            }
        }
    }
    // Includes of every .c.
    for d in &mut src.dirs {
        let locals: Vec<usize> = (0..d.files.len())
            .filter(|&j| d.files[j].ft == Ft::H)
            .collect();
        let pool = if d.kernel {
            src.kernel_headers.len()
        } else {
            src.installed.len()
        };
        for f in d.files.iter_mut().filter(|f| f.ft == Ft::C) {
            let mut inc = Vec::new();
            let n_local = rng.gen_range(0..=2usize).min(locals.len());
            for _ in 0..n_local {
                let l = locals[rng.gen_range(0..locals.len())];
                if !inc.iter().any(|x| matches!(x, Inc::Local(y) if *y == l)) {
                    inc.push(Inc::Local(l));
                }
            }
            if pool > 0 {
                for _ in 0..rng.gen_range(3..=8) {
                    // Popular headers first (types.h, param.h...).
                    let s = ((rng.gen::<f64>().powi(2)) * pool as f64) as usize % pool;
                    if !inc.iter().any(|x| matches!(x, Inc::System(y) if *y == s)) {
                        inc.push(Inc::System(s));
                    }
                }
            }
            f.includes = inc;
        }
    }
    src
}

impl Src {
    fn include_text(&self, d: usize, inc: &Inc) -> String {
        let dir = &self.dirs[d];
        match *inc {
            Inc::Local(j) => format!("#include \"{}\"\n", dir.files[j].name),
            Inc::System(s) => {
                let table = if dir.kernel {
                    &self.kernel_headers
                } else {
                    &self.installed
                };
                format!("#include <{}>\n", table[s].2)
            }
        }
    }

    /// A file's contents: its identifying first line(s), then filler.
    fn text(&self, d: usize, j: usize, filler: &[u8]) -> Vec<u8> {
        let dir = &self.dirs[d];
        let f = &dir.files[j];
        let mut t = match f.ft {
            Ft::C => {
                let mut s = format!("/* src/{}/{} */\n", dir.path, f.name);
                for inc in &f.includes {
                    s.push_str(&self.include_text(d, inc));
                }
                s.push('\n');
                s.into_bytes()
            }
            Ft::H => format!("/* src/{}/{} */\n", dir.path, f.name).into_bytes(),
            Ft::Make => format!("# src/{}/{}\n", dir.path, f.name).into_bytes(),
            Ft::Man => format!(".\\\" src/{}/{}\n", dir.path, f.name).into_bytes(),
        };
        if t.len() < f.size {
            let need = (f.size - t.len()).min(filler.len());
            t.extend_from_slice(&filler[..need]);
        }
        t
    }

    #[cfg(test)]
    fn files(&self) -> usize {
        self.dirs.iter().map(|d| d.files.len()).sum()
    }
}

fn entries_line(f: &SFile) -> String {
    format!(
        "/{}/1.{}/Mon Jan 14 10:{:02}:00 2002//\n",
        f.name,
        f.size % 97 + 1,
        f.size % 60
    )
}

/// `CVS/Entries` of a directory: its files, then its subdirectories.
fn entries(src: &Src, d: usize) -> String {
    let dir = &src.dirs[d];
    let mut s: String = dir.files.iter().map(entries_line).collect();
    for &c in &dir.subdirs {
        s.push_str(&format!("D/{}////\n", src.dirs[c].name));
    }
    s
}

fn new_file(fs: &Fs, dir: Ino, name: &[u8], data: &[u8]) -> ufs::Result<Ino> {
    let ino = fs.mknod(dir, name, 0o100644, 0, Cred::ROOT)?.ino;
    write_all(fs, ino, 0, data)?;
    Ok(ino)
}

fn read_whole(fs: &Fs, ino: Ino, size: u64) -> ufs::Result<Vec<u8>> {
    let got = fs.read(ino, 0, size as usize)?;
    if got.len() as u64 != size {
        return Err(invalid(format!(
            "build: read {} of {size} bytes of inode {ino}",
            got.len()
        )));
    }
    Ok(got)
}

/// `cvs checkout`: returns every source directory's inode.
fn checkout(fs: &Fs, src: &Src, filler: &[u8]) -> ufs::Result<Vec<Ino>> {
    let mut inos = vec![Ino::NONE; src.dirs.len()];
    fn walk(
        fs: &Fs,
        src: &Src,
        filler: &[u8],
        d: usize,
        parent: Ino,
        inos: &mut [Ino],
    ) -> ufs::Result<()> {
        let dir = &src.dirs[d];
        let ino = fs
            .mkdir(parent, dir.name.as_bytes(), 0o755, Cred::ROOT)?
            .ino;
        inos[d] = ino;
        let cvs = fs.mkdir(ino, b"CVS", 0o755, Cred::ROOT)?.ino;
        new_file(fs, cvs, b"Root", b"/home/ncvs\n")?;
        let repo = if dir.path.is_empty() {
            "src\n".to_string()
        } else {
            format!("src/{}\n", dir.path)
        };
        new_file(fs, cvs, b"Repository", repo.as_bytes())?;
        let log = fs.mknod(cvs, b"Entries.Log", 0o100644, 0, Cred::ROOT)?.ino;
        let mut log_size = 0u64;
        for (j, f) in dir.files.iter().enumerate() {
            new_file(fs, ino, f.name.as_bytes(), &src.text(d, j, filler))?;
            let line = format!("A {}", entries_line(f));
            write_all(fs, log, log_size, line.as_bytes())?;
            log_size += line.len() as u64;
        }
        new_file(fs, cvs, b"Entries.Backup", entries(src, d).as_bytes())?;
        fs.rename(cvs, b"Entries.Backup", cvs, b"Entries", RenameMode::Replace)?;
        fs.unlink(cvs, b"Entries.Log")?;
        for &c in &dir.subdirs {
            walk(fs, src, filler, c, ino, inos)?;
        }
        Ok(())
    }
    walk(fs, src, filler, 0, fs.root(), &mut inos)?;
    Ok(inos)
}

fn check_checkout(fs: &Fs, src: &Src, inos: &[Ino]) -> ufs::Result<()> {
    for (d, dir) in src.dirs.iter().enumerate() {
        let mut names: Vec<Vec<u8>> = fs
            .readdir(inos[d], 0, usize::MAX)?
            .into_iter()
            .map(|e| e.name)
            .filter(|n| n != b"." && n != b"..")
            .collect();
        names.sort();
        let mut want: Vec<Vec<u8>> = dir
            .files
            .iter()
            .map(|f| f.name.clone().into_bytes())
            .chain(
                dir.subdirs
                    .iter()
                    .map(|&c| src.dirs[c].name.clone().into_bytes()),
            )
            .chain([b"CVS".to_vec()])
            .collect();
        want.sort();
        if names != want {
            return Err(invalid(format!(
                "build: src/{} holds {} entries after the checkout, {} expected",
                dir.path,
                names.len(),
                want.len()
            )));
        }
        let cvs = fs.lookup(inos[d], b"CVS")?.ino;
        let size = fs.lookup(cvs, b"Entries")?.size;
        let want = entries(src, d).len() as u64;
        if size != want {
            return Err(invalid(format!(
                "build: src/{}/CVS/Entries holds {size} bytes, {want} expected",
                dir.path
            )));
        }
    }
    Ok(())
}

/// `mkdir -p` below `base`, remembering what it made.
fn mkdir_p(fs: &Fs, base: Ino, path: &str, made: &mut HashMap<String, Ino>) -> ufs::Result<Ino> {
    let mut dir = base;
    let mut so_far = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        dir = match made.get(&so_far) {
            Some(&d) => d,
            None => {
                let d = fs.mkdir(dir, part.as_bytes(), 0o755, Cred::ROOT)?.ino;
                made.insert(so_far.clone(), d);
                d
            }
        };
    }
    Ok(dir)
}

/// What the compile did, for the checks.
#[derive(Debug, Default, PartialEq, Eq)]
struct Built {
    headers: usize,
    objects: usize,
    archives: usize,
}

/// A temporary name in the style of mkstemp's `ccXXXXXX`.
fn temp_name(n: u64, ext: &str) -> String {
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20;
    let mut s = String::from("cc");
    for _ in 0..6 {
        s.push((b'a' + (x % 26) as u8) as char);
        x /= 26;
    }
    s.push_str(ext);
    s
}

fn bad(what: String) -> ufs::Error {
    invalid(format!("build: {what}"))
}

/// `make buildworld`, reduced (see the module comment).
fn compile(fs: &Fs, src: &Src, inos: &[Ino], user: &UserCpu) -> ufs::Result<Built> {
    let root = fs.root();
    let obj = fs.mkdir(root, b"obj", 0o755, Cred::ROOT)?.ino;
    let tmp = fs.mkdir(obj, b"tmp", 0o755, Cred::ROOT)?.ino;
    let mut made = HashMap::new();
    let inc_root = mkdir_p(fs, obj, "worldtmp/usr/include", &mut made)?;
    // make obj.
    let mut objdirs = vec![Ino::NONE; src.dirs.len()];
    let mut made_obj = HashMap::new();
    for (d, dir) in src.dirs.iter().enumerate() {
        if !dir.kernel {
            objdirs[d] = mkdir_p(fs, obj, &format!("src/{}", dir.path), &mut made_obj)?;
        }
    }
    let mut built = Built::default();
    // Install the headers.
    let mut made_inc: HashMap<String, Ino> = HashMap::new();
    for (d, j, path) in &src.installed {
        let f = &src.dirs[*d].files[*j];
        let a = fs.lookup(inos[*d], f.name.as_bytes())?;
        let data = read_whole(fs, a.ino, a.size)?;
        let (sub, name) = path.rsplit_once('/').unwrap_or(("", path));
        let dir = mkdir_p(fs, inc_root, sub, &mut made_inc)?;
        new_file(fs, dir, name.as_bytes(), &data)?;
        built.headers += 1;
    }
    user.charge(EXEC_S * built.headers as f64);
    let mk = src
        .dirs
        .iter()
        .position(|d| d.path == "share/mk")
        .ok_or_else(|| bad("no share/mk".into()))?;
    let by_path: HashMap<&str, (usize, usize)> = src
        .installed
        .iter()
        .map(|(d, j, p)| (p.as_str(), (*d, *j)))
        .collect();
    let mut temps = 0u64;
    for (d, dir) in src.dirs.iter().enumerate() {
        if dir.kernel {
            continue;
        }
        // make: the Makefile and the system makefiles.
        user.charge(EXEC_S + MAKE_S);
        let mf = fs.lookup(inos[d], b"Makefile")?;
        read_whole(fs, mf.ino, mf.size)?;
        for name in MK_FILES {
            let a = fs.lookup(inos[mk], name.as_bytes())?;
            read_whole(fs, a.ino, a.size)?;
        }
        let sources: Vec<usize> = (0..dir.files.len())
            .filter(|&j| dir.files[j].ft == Ft::C)
            .collect();
        let mut objects: Vec<(String, u64)> = Vec::new();
        let mut depend = String::new();
        for &j in &sources {
            let f = &dir.files[j];
            let stem = f.name.trim_end_matches(".c");
            let oname = format!("{stem}.o");
            // make: is the object older than its source?
            let s = fs.lookup(inos[d], f.name.as_bytes())?;
            match fs.lookup(objdirs[d], oname.as_bytes()) {
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
                Ok(_) => return Err(bad(format!("{oname} exists before it is built"))),
            }
            // cpp: the source and its headers.
            let text = read_whole(fs, s.ino, s.size)?;
            let want: Vec<String> = f.includes.iter().map(|i| src.include_text(d, i)).collect();
            let got: Vec<String> = text
                .split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"#include "))
                .map(|l| format!("{}\n", String::from_utf8_lossy(l)))
                .collect();
            if got != want {
                return Err(bad(format!(
                    "src/{}/{} reads back with {} includes, {} written",
                    dir.path,
                    f.name,
                    got.len(),
                    want.len()
                )));
            }
            let mut pre = text.clone();
            depend.push_str(&format!("{oname}:"));
            for line in &got {
                let (local, path) = if let Some(p) = line.strip_prefix("#include \"") {
                    (true, p.trim_end().trim_end_matches('"'))
                } else {
                    let p = line["#include <".len()..].trim_end();
                    (false, p.trim_end_matches('>'))
                };
                let (hdir, name, first) = if local {
                    (inos[d], path, format!("/* src/{}/{path} */\n", dir.path))
                } else {
                    // -I${.CURDIR} first, in vain (namei stops at the
                    // first component missing).
                    let probe = path.split('/').next().unwrap_or(path);
                    match fs.lookup(inos[d], probe.as_bytes()) {
                        Err(e) if e.kind == ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                        Ok(_) => return Err(bad(format!("{path} found in src/{}", dir.path))),
                    }
                    let (sub, name) = path.rsplit_once('/').unwrap_or(("", path));
                    let hd = match sub {
                        "" => inc_root,
                        s => match made_inc.get(s) {
                            Some(&x) => x,
                            None => fs.lookup(inc_root, s.as_bytes())?.ino,
                        },
                    };
                    let &(sd, sj) = by_path
                        .get(path)
                        .ok_or_else(|| bad(format!("{path} is not installed")))?;
                    let first = format!(
                        "/* src/{}/{} */\n",
                        src.dirs[sd].path, src.dirs[sd].files[sj].name
                    );
                    (hd, name, first)
                };
                let h = fs.lookup(hdir, name.as_bytes())?;
                let data = read_whole(fs, h.ino, h.size)?;
                if !data.starts_with(first.as_bytes()) {
                    return Err(bad(format!("header {path} does not read back as written")));
                }
                pre.extend_from_slice(&data);
                depend.push(' ');
                depend.push_str(path);
            }
            depend.push('\n');
            let src_bytes = text.len() as f64;
            let asm_len = (ASM_RATIO * src_bytes) as usize;
            let obj_len = ((OBJ_RATIO * src_bytes) as usize).max(64);
            let iname = temp_name(temps, ".i");
            let sname = temp_name(temps + 1, ".s");
            temps += 2;
            new_file(fs, tmp, iname.as_bytes(), &pre)?;
            // cc1.
            let i = fs.lookup(tmp, iname.as_bytes())?;
            read_whole(fs, i.ino, i.size)?;
            let mut asm = format!("\t.file \"{}\"\n", f.name).into_bytes();
            asm.resize(asm_len.max(asm.len()), b'\n');
            new_file(fs, tmp, sname.as_bytes(), &asm)?;
            // as.
            let sa = fs.lookup(tmp, sname.as_bytes())?;
            read_whole(fs, sa.ino, sa.size)?;
            let mut o = format!("OBJ src/{}/{}\n", dir.path, f.name).into_bytes();
            o.resize(obj_len.max(o.len()), 0);
            new_file(fs, objdirs[d], oname.as_bytes(), &o)?;
            fs.unlink(tmp, iname.as_bytes())?;
            fs.unlink(tmp, sname.as_bytes())?;
            user.charge(
                4.0 * EXEC_S
                    + CPP_NS * 1e-9 * pre.len() as f64
                    + CC1_NS * 1e-9 * src_bytes
                    + AS_NS * 1e-9 * asm.len() as f64,
            );
            objects.push((oname, o.len() as u64));
            built.objects += 1;
        }
        if objects.is_empty() {
            continue;
        }
        // ar: every member read, the archive written under a temporary
        // name and renamed into place.
        let mut ar = b"!<arch>\n".to_vec();
        for (name, size) in &objects {
            let a = fs.lookup(objdirs[d], name.as_bytes())?;
            let data = read_whole(fs, a.ino, *size)?;
            let stem = name.trim_end_matches(".o");
            let first = format!("OBJ src/{}/{stem}.c\n", dir.path);
            if !data.starts_with(first.as_bytes()) {
                return Err(bad(format!("object {name} does not read back as written")));
            }
            let mut hdr = format!(
                "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
                format!("{name}/"),
                0,
                0,
                0,
                644,
                size
            )
            .into_bytes();
            hdr.truncate(60);
            ar.extend_from_slice(&hdr);
            ar.extend_from_slice(&data);
            if ar.len() % 2 == 1 {
                ar.push(b'\n');
            }
        }
        let want: u64 = 8 + objects.iter().map(|(_, s)| 60 + s + s % 2).sum::<u64>();
        let lib = format!("lib{}.a", dir.name.replace('.', "_"));
        let stn = format!("st{:06}", temps);
        temps += 1;
        new_file(fs, objdirs[d], stn.as_bytes(), &ar)?;
        fs.rename(
            objdirs[d],
            stn.as_bytes(),
            objdirs[d],
            lib.as_bytes(),
            RenameMode::Replace,
        )?;
        let size = fs.lookup(objdirs[d], lib.as_bytes())?.size;
        if size != want || ar.len() as u64 != want {
            return Err(bad(format!("{lib} holds {size} bytes, {want} expected")));
        }
        user.charge(EXEC_S + AR_NS * 1e-9 * ar.len() as f64);
        built.archives += 1;
        new_file(fs, objdirs[d], b".depend", depend.as_bytes())?;
    }
    // Nothing of the compilers' left in tmp.
    let left = fs.readdir(tmp, 0, usize::MAX)?.len();
    if left != 2 {
        return Err(bad(format!("{} temporaries left in obj/tmp", left - 2)));
    }
    Ok(built)
}

/// `grep -r '#include' dir`: (files, bytes, matching lines). In fts(3)'s
/// order: a directory's entries are all looked up before any is read or
/// gone into (`fts_build`), then visited in the directory's order, files
/// opened by the names just looked up (see `classic::find`).
fn grep(fs: &Fs, dir: Ino, user: &UserCpu) -> ufs::Result<(u64, u64, u64)> {
    let mut out = (0, 0, 0);
    let mut found = Vec::new();
    for e in fs.readdir(dir, 0, usize::MAX)? {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        found.push(fs.lookup(dir, &e.name)?);
    }
    for a in found {
        if a.kind == FileKind::Dir {
            let (f, b, m) = grep(fs, a.ino, user)?;
            out = (out.0 + f, out.1 + b, out.2 + m);
            continue;
        }
        let mut off = 0u64;
        let mut carry: Vec<u8> = Vec::new();
        loop {
            let got = fs.read(a.ino, off, GREP_BUF)?;
            if got.is_empty() {
                break;
            }
            off += got.len() as u64;
            carry.extend_from_slice(&got);
            // Whole lines only; the rest waits for the next buffer.
            let cut = carry.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            out.2 += carry[..cut]
                .split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"#include"))
                .count() as u64;
            carry.drain(..cut);
        }
        if carry.starts_with(b"#include") {
            out.2 += 1;
        }
        if off != a.size {
            return Err(bad(format!("grep read {off} of {} bytes", a.size)));
        }
        user.charge(GREP_NS * 1e-9 * off as f64);
        out.0 += 1;
        out.1 += off;
    }
    Ok(out)
}

pub(super) fn workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let src = make_src(p);
    let filler = content_filler();
    let user = m.user();
    let before = root_names(m.fs)?;
    let root = m.fs.root();

    let inos = m.phase("build-checkout", |fs| checkout(fs, &src, &filler))?;
    check_checkout(m.fs, &src, &inos)?;

    let built = m.phase("build-compile", |fs| compile(fs, &src, &inos, &user))?;
    let user_dirs: Vec<&SDir> = src.dirs.iter().filter(|d| !d.kernel).collect();
    let want = Built {
        headers: src.installed.len(),
        objects: user_dirs
            .iter()
            .map(|d| d.files.iter().filter(|f| f.ft == Ft::C).count())
            .sum(),
        archives: user_dirs
            .iter()
            .filter(|d| d.files.iter().any(|f| f.ft == Ft::C))
            .count(),
    };
    if built != want {
        return Err(bad(format!(
            "the compile made {built:?}, expected {want:?}"
        )));
    }

    let sys = src
        .dirs
        .iter()
        .position(|d| d.path == "sys")
        .ok_or_else(|| bad("no sys".into()))?;
    let (files, _bytes, matches) = m.phase("build-grep", |fs| grep(fs, inos[sys], &user))?;
    let kernel: Vec<(usize, &SDir)> = src
        .dirs
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kernel)
        .collect();
    // Each kernel directory also holds CVS/Root, Repository and Entries.
    let want_files: u64 = kernel.iter().map(|(_, d)| d.files.len() as u64 + 3).sum();
    let want_matches: u64 = kernel
        .iter()
        .map(|(_, d)| d.files.iter().map(|f| f.includes.len() as u64).sum::<u64>())
        .sum();
    if files != want_files || matches != want_matches {
        return Err(bad(format!(
            "grep saw {files} files and {matches} matches, expected {want_files} and {want_matches}"
        )));
    }

    m.phase("build-remove", |fs| {
        crate::dirpref::remove(fs, root, b"obj")
    })?;
    // The source tree goes too, untimed.
    crate::dirpref::remove(m.fs, root, b"src")?;
    root_restored(m.fs, &before, "build")
}

#[cfg(test)]
mod tests {
    use super::super::testing::checked_rows;
    use super::super::{Combo, Profile, Workload};
    use super::*;

    fn small() -> Profile {
        Profile {
            build_files: 600,
            ..Profile::quick()
        }
    }

    const OFF: Combo = Combo::NONE;

    #[test]
    fn tree_has_the_stated_shape() {
        let p = Profile::full();
        let s = make_src(&p);
        let files = s.files();
        // The budget plus share/mk and the area Makefiles' rounding.
        assert!((12_000..12_600).contains(&files), "{files}");
        let kernel: usize = s
            .dirs
            .iter()
            .filter(|d| d.kernel)
            .map(|d| d.files.len())
            .sum();
        let share = kernel as f64 / files as f64;
        assert!((0.25..0.35).contains(&share), "{share}");
        let bytes: usize = s.dirs.iter().flat_map(|d| &d.files).map(|f| f.size).sum();
        let mean = bytes as f64 / files as f64;
        assert!((5_000.0..12_000.0).contains(&mean), "{mean}");
        let biggest = s.dirs.iter().map(|d| d.files.len()).max().unwrap();
        assert!(biggest >= 100, "{biggest}");
        assert!(s.dirs.len() > 500, "{}", s.dirs.len());
        assert!(s.installed.len() > 100, "{}", s.installed.len());
        let t = make_src(&p);
        assert_eq!(t.dirs.len(), s.dirs.len());
        assert!(s
            .dirs
            .iter()
            .zip(&t.dirs)
            .all(|(a, b)| a.path == b.path && a.files.len() == b.files.len()));
    }

    #[test]
    fn tests_run_in_order_check_clean_and_soft_updates_speed_the_compile() {
        let p = small();
        let su = Combo { su: true, ..OFF };
        let all = Combo::EVERY;
        let mut compile = Vec::new();
        for c in [OFF, su, all] {
            let rows = checked_rows(&p, Workload::Build, c);
            // The compilers' time is on the clock: most of the compile is
            // CPU once soft updates remove the synchronous writes.
            assert!(rows[1].cpu_s > 1.0, "{}", rows[1].cpu_s);
            compile.push(rows[1].seconds);
        }
        assert!(compile[1] < 0.8 * compile[0], "{compile:?}");
    }
}
