//! The `Netnews` benchmark of seed `004_*` (section 4.1): the simplified
//! form of Karl Swartz's news-server benchmark that Seltzer et al. used in
//! "Journaling versus Soft Updates" (USENIX 2000). A news server's file
//! system work is replayed on an INN `tradspool` spool, with the server's
//! own CPU work left out (the simplified benchmark replays file operations,
//! not article parsing).
//!
//! The spool: `news/spool/` holds one directory per newsgroup component
//! (`comp.lang.c` lives in `comp/lang/c/`, created on the first article
//! that needs it, as innd does), articles are files named by their number
//! in the group (1, 2, 3, ...), and each group directory also holds the
//! group's `.overview` (INN 1.x kept overview data in the spool, one line
//! per article). `news/db/` holds `history` (one line per article: its
//! Message-ID, arrival time and the `group/number` of every link, INN 1.x's
//! format) and `active` (one fixed-width line per group, high and low water
//! marks rewritten in place).
//!
//! Tests, in order:
//! - `netnews-unbatch`: `p.netnews_articles` articles arrive; each is
//!   created and written in its first group, then hard-linked into the
//!   others (crossposts), one overview line is appended in each of its
//!   groups, each group's high water mark is rewritten in `active`, and its
//!   history line is buffered and appended every `HISTORY_FLUSH` articles
//!   (INN 1.x's `ICD_SYNC_COUNT`, 10);
//! - `netnews-expire`: expire reads the history, removes the oldest half of
//!   every group (an article's link in group g goes when its number is at
//!   most half of g's last number), one `unlink` per link, writes the
//!   surviving lines to `history.n` and renames it over `history`, rewrites
//!   every group's `.overview` the same way and the low water marks in
//!   `active`;
//! - `netnews-remove`: `rm -rf news`.
//!
//! Shapes and constants (all generated from `p.seed`):
//! - groups: `p.netnews_articles / 40` clamped to 200..1000 (750 for the
//!   full 30,000 articles): 13 top-level hierarchies (the Big 8, `alt`,
//!   `biz` and three national ones) weighted as a full feed of 2000 was
//!   shared, each group 2 to 4 components deep with components drawn with
//!   a skew, so that prefixes such as `comp/os/` are shared by many groups;
//! - popularity: Zipf (exponent 1) over the groups in a random order, so a
//!   few groups get most articles and many get a handful;
//! - crossposts: 15% of articles go to 2 (60%), 3 (25%) or 4 (15%) groups,
//!   the extra groups from the same hierarchy 60% of the time;
//! - sizes: a log-normal of median 2,300 B (sigma 0.55) for 96% of
//!   articles and a tail of median 12 KB (sigma 1.1) for the rest, capped
//!   at 1 MiB: a mean near 3.4 KB, the 270 MB / 78,000 articles (3.5 KB)
//!   of Seltzer et al.'s unbatch phase.
//!
//! Invariants and checks: everything comes from the seed, so a profile
//! replays the same operations every time; every hard link must report the
//! link count it made; after the unbatch every group directory holds
//! exactly its articles and `.overview`, and a sample of articles reads
//! back with its own Message-ID; expire must read back exactly the history
//! the unbatch wrote and remove exactly the oldest half of every group, the
//! surviving history must be byte for byte what remains, and a sample of
//! surviving crossposts must have one link per remaining group; after the
//! removal the root lists what it listed before the workload. Any mismatch
//! fails the run.
use super::classic::{root_names, root_restored, write_all};
use super::meter::Meter;
use super::{invalid, Profile};
use crate::tree::lognormal;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use ufs::{Cred, Fs, Ino, RenameMode};

pub(super) const TESTS: &[&str] = &["netnews-unbatch", "netnews-expire", "netnews-remove"];

/// Articles between two appends of the buffered history lines (INN 1.x's
/// `ICD_SYNC_COUNT`).
const HISTORY_FLUSH: usize = 10;
/// Share of articles crossposted, and the odds of 2, 3 or 4 groups.
const CROSSPOST: f64 = 0.15;
const CROSS_GROUPS: [(usize, f64); 3] = [(2, 0.60), (3, 0.25), (4, 0.15)];
/// Chance that an extra group of a crosspost is in the first one's
/// hierarchy.
const SAME_HIERARCHY: f64 = 0.6;
/// Expire and its readers go through files in chunks of this size (stdio
/// with a large buffer).
const CHUNK: usize = 64 * 1024;
/// One article in this many is read back after the unbatch.
const READ_SAMPLE: usize = 64;
/// One surviving crosspost in this many has its link count checked.
const NLINK_SAMPLE: usize = 8;

/// Top-level hierarchies and their shares of groups.
const HIERARCHIES: &[(&str, f64)] = &[
    ("alt", 0.25),
    ("comp", 0.22),
    ("rec", 0.14),
    ("soc", 0.07),
    ("sci", 0.06),
    ("de", 0.06),
    ("misc", 0.05),
    ("news", 0.03),
    ("fr", 0.03),
    ("uk", 0.03),
    ("biz", 0.03),
    ("talk", 0.02),
    ("humanities", 0.01),
];

/// Components below the top level; each hierarchy draws them in its own
/// order, skewed towards its first ones.
const WORDS: &[&str] = &[
    "misc",
    "answers",
    "announce",
    "lang",
    "os",
    "unix",
    "linux",
    "bsd",
    "sys",
    "protocols",
    "databases",
    "graphics",
    "software",
    "hardware",
    "music",
    "sport",
    "games",
    "arts",
    "tv",
    "movies",
    "books",
    "politics",
    "religion",
    "culture",
    "history",
    "physics",
    "math",
    "chem",
    "bio",
    "med",
    "econ",
    "jobs",
    "forsale",
    "wanted",
    "test",
    "config",
    "admin",
    "groups",
    "c",
    "perl",
    "java",
    "lisp",
    "python",
    "networks",
    "security",
    "mail",
    "editors",
    "emacs",
    "x",
    "windows",
    "mac",
    "amiga",
    "sun",
    "hp",
    "sgi",
    "storage",
    "compression",
    "ai",
    "theory",
    "programming",
    "benchmarks",
    "arch",
    "embedded",
    "realtime",
    "sources",
    "binaries",
    "pictures",
    "sounds",
    "fan",
    "humor",
    "food",
    "travel",
    "autos",
    "aviation",
    "boats",
    "bicycles",
    "photo",
    "radio",
    "audio",
    "video",
    "crafts",
    "pets",
    "gardens",
    "outdoors",
    "skiing",
    "golf",
    "soccer",
    "hockey",
    "chess",
    "puzzles",
    "anime",
    "comics",
    "scifi",
    "tolkien",
    "help",
    "advocacy",
    "hacker",
    "discuss",
    "d",
    "general",
];

struct Group {
    /// Path components under the spool (`["comp", "lang", "c"]`).
    parts: Vec<String>,
    /// Index in `HIERARCHIES`.
    top: usize,
}

impl Group {
    fn dotted(&self) -> String {
        self.parts.join(".")
    }
}

struct Article {
    /// (group, number in the group), the first where it is written.
    links: Vec<(usize, u64)>,
    size: usize,
}

struct Feed {
    groups: Vec<Group>,
    articles: Vec<Article>,
    /// The last article number of every group.
    last: Vec<u64>,
}

fn article_size(rng: &mut StdRng) -> usize {
    let s = if rng.gen_bool(0.96) {
        lognormal(rng, 2300.0, 0.55)
    } else {
        lognormal(rng, 12_000.0, 1.1)
    };
    s.clamp(600.0, (1 << 20) as f64) as usize
}

fn make_groups(rng: &mut StdRng, n: usize) -> Vec<Group> {
    let total: f64 = HIERARCHIES.iter().map(|h| h.1).sum();
    // Every hierarchy draws components in an order of its own.
    let orders: Vec<Vec<usize>> = HIERARCHIES
        .iter()
        .map(|_| {
            let mut o: Vec<usize> = (0..WORDS.len()).collect();
            for i in (1..o.len()).rev() {
                o.swap(i, rng.gen_range(0..=i));
            }
            o
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut x = rng.gen::<f64>() * total;
        let mut top = HIERARCHIES.len() - 1;
        for (i, h) in HIERARCHIES.iter().enumerate() {
            if x < h.1 {
                top = i;
                break;
            }
            x -= h.1;
        }
        let below = match rng.gen::<f64>() {
            x if x < 0.35 => 1,
            x if x < 0.80 => 2,
            _ => 3,
        };
        let mut parts = vec![HIERARCHIES[top].0.to_string()];
        for level in 0..below {
            // Shallow components share more (a stronger skew).
            let power = if level == 0 { 4.0 } else { 2.0 };
            let k = (rng.gen::<f64>().powf(power) * WORDS.len() as f64) as usize;
            let w = WORDS[orders[top][k.min(WORDS.len() - 1)]];
            if parts.iter().any(|p| p == w) {
                continue;
            }
            parts.push(w.to_string());
        }
        if parts.len() < 2 {
            continue;
        }
        if seen.insert(parts.join(".")) {
            out.push(Group { parts, top });
        }
    }
    out
}

fn make_feed(p: &Profile) -> Feed {
    let mut rng = StdRng::seed_from_u64(p.seed ^ 0x6e65_7773);
    let n_articles = p.netnews_articles as usize;
    let n_groups = (n_articles / 40).clamp(200, 1000);
    let groups = make_groups(&mut rng, n_groups);
    // Zipf popularity over a random ranking of the groups.
    let mut rank: Vec<usize> = (0..n_groups).collect();
    for i in (1..n_groups).rev() {
        rank.swap(i, rng.gen_range(0..=i));
    }
    let mut cum = Vec::with_capacity(n_groups);
    let mut acc = 0.0;
    for &r in &rank {
        acc += 1.0 / (r + 1) as f64;
        cum.push(acc);
    }
    let pick = |rng: &mut StdRng| -> usize {
        let x = rng.gen::<f64>() * acc;
        cum.partition_point(|&c| c <= x).min(n_groups - 1)
    };
    let mut last = vec![0u64; n_groups];
    let mut articles = Vec::with_capacity(n_articles);
    for _ in 0..n_articles {
        let first = pick(&mut rng);
        let mut gs = vec![first];
        if rng.gen_bool(CROSSPOST) {
            let mut x = rng.gen::<f64>();
            let mut want = CROSS_GROUPS[CROSS_GROUPS.len() - 1].0;
            for &(k, share) in &CROSS_GROUPS {
                if x < share {
                    want = k;
                    break;
                }
                x -= share;
            }
            let mut tries = 0;
            while gs.len() < want && tries < 200 {
                tries += 1;
                let same = rng.gen_bool(SAME_HIERARCHY);
                let g = pick(&mut rng);
                if gs.contains(&g) || (same && tries < 100 && groups[g].top != groups[first].top) {
                    continue;
                }
                gs.push(g);
            }
        }
        let links = gs
            .into_iter()
            .map(|g| {
                last[g] += 1;
                (g, last[g])
            })
            .collect();
        articles.push(Article {
            links,
            size: article_size(&mut rng),
        });
    }
    Feed {
        groups,
        articles,
        last,
    }
}

fn message_id(i: usize) -> String {
    format!(
        "<{i}.{:x}@news.example.org>",
        (i as u64).wrapping_mul(0x9e37_79b9) & 0xffff
    )
}

/// Seconds since the epoch at which article `i` arrives (one every 3 s).
fn arrival(i: usize) -> u64 {
    1_020_000_000 + 3 * i as u64
}

/// History line of `art` listing `links` (those still on the spool).
fn history_line(f: &Feed, i: usize, links: &[(usize, u64)]) -> String {
    let paths: Vec<String> = links
        .iter()
        .map(|&(g, n)| format!("{}/{n}", f.groups[g].dotted()))
        .collect();
    let t = arrival(i);
    format!("{}\t{t}~-~{t}\t{}\n", message_id(i), paths.join(" "))
}

fn xref(f: &Feed, a: &Article) -> String {
    let x: Vec<String> = a
        .links
        .iter()
        .map(|&(g, n)| format!("{}:{n}", f.groups[g].dotted()))
        .collect();
    format!("Xref: news.example.org {}", x.join(" "))
}

/// The article's text: headers, then body lines up to its size.
fn article_text(f: &Feed, i: usize, body: &[u8]) -> Vec<u8> {
    let a = &f.articles[i];
    let groups: Vec<String> = a.links.iter().map(|&(g, _)| f.groups[g].dotted()).collect();
    let mut t = format!(
        "Path: news.example.org!feed.example.net!not-for-mail\nFrom: poster{}@example.net\n\
         Newsgroups: {}\nSubject: article {i}\nMessage-ID: {}\nDate: {}\n{}\n\n",
        i % 977,
        groups.join(","),
        message_id(i),
        arrival(i),
        xref(f, a)
    )
    .into_bytes();
    if t.len() < a.size {
        let need = a.size - t.len();
        t.extend_from_slice(&body[..need.min(body.len())]);
    }
    t
}

fn overview_line(f: &Feed, i: usize, number: u64) -> String {
    let a = &f.articles[i];
    format!(
        "{number}\tarticle {i}\tposter{}@example.net\t{}\t{}\t\t{}\t{}\t{}\n",
        i % 977,
        arrival(i),
        message_id(i),
        a.size,
        a.size / 60 + 1,
        xref(f, a)
    )
}

/// Body text: numbered lines of 64 bytes, long enough for any article.
fn body_text() -> Vec<u8> {
    let mut b = Vec::with_capacity((1 << 20) + 64);
    let mut n = 0u64;
    while b.len() < 1 << 20 {
        b.extend_from_slice(
            format!("{n:08} the quick brown fox jumps over the lazy dog ...\n").as_bytes(),
        );
        n += 1;
    }
    b
}

/// The server's fixed files: `news/`, `news/spool/`, `news/db/` with an
/// empty `history` and `active`.
struct Server {
    spool: Ino,
    db: Ino,
    history: Ino,
    active: Ino,
    /// Offset of each group's high water mark in `active` (the low one
    /// follows it after a space).
    marks: Vec<u64>,
}

fn set_up(fs: &Fs, f: &Feed) -> ufs::Result<Server> {
    let root = fs.root();
    let news = fs.mkdir(root, b"news", 0o755, Cred::ROOT)?.ino;
    let spool = fs.mkdir(news, b"spool", 0o755, Cred::ROOT)?.ino;
    let db = fs.mkdir(news, b"db", 0o755, Cred::ROOT)?.ino;
    let history = fs.mknod(db, b"history", 0o100644, 0, Cred::ROOT)?.ino;
    let active = fs.mknod(db, b"active", 0o100644, 0, Cred::ROOT)?.ino;
    let mut text = String::new();
    let mut marks = Vec::with_capacity(f.groups.len());
    for g in &f.groups {
        let name = g.dotted();
        marks.push((text.len() + name.len() + 1) as u64);
        text.push_str(&format!("{name} {:010} {:010} y\n", 0, 1));
    }
    write_all(fs, active, 0, text.as_bytes())?;
    Ok(Server {
        spool,
        db,
        history,
        active,
        marks,
    })
}

/// `mkdir -p` of a group's directory, remembering every directory made.
fn group_dir(fs: &Fs, spool: Ino, made: &mut HashMap<String, Ino>, g: &Group) -> ufs::Result<Ino> {
    let mut dir = spool;
    let mut path = String::new();
    for part in &g.parts {
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(part);
        dir = match made.get(&path) {
            Some(&ino) => ino,
            None => {
                let ino = fs.mkdir(dir, part.as_bytes(), 0o755, Cred::ROOT)?.ino;
                made.insert(path.clone(), ino);
                ino
            }
        };
    }
    Ok(dir)
}

/// Per group: its directory and its `.overview` (inode, size).
struct Spooled {
    dirs: Vec<Ino>,
    overview: Vec<(Ino, u64)>,
    history_size: u64,
}

fn unbatch(fs: &Fs, f: &Feed, s: &Server, body: &[u8]) -> ufs::Result<Spooled> {
    let n = f.groups.len();
    let mut made = HashMap::new();
    let mut dirs = vec![Ino::NONE; n];
    let mut overview = vec![(Ino::NONE, 0u64); n];
    let mut pending = String::new();
    let mut history_size = 0u64;
    for (i, a) in f.articles.iter().enumerate() {
        let text = article_text(f, i, body);
        let mut ino = Ino::NONE;
        for (k, &(g, number)) in a.links.iter().enumerate() {
            if dirs[g].is_none() {
                dirs[g] = group_dir(fs, s.spool, &mut made, &f.groups[g])?;
                let ov = fs.mknod(dirs[g], b".overview", 0o100644, 0, Cred::ROOT)?;
                overview[g] = (ov.ino, 0);
            }
            let name = number.to_string();
            if k == 0 {
                ino = fs
                    .mknod(dirs[g], name.as_bytes(), 0o100644, 0, Cred::ROOT)?
                    .ino;
                write_all(fs, ino, 0, &text)?;
            } else {
                let at = fs.link(ino, dirs[g], name.as_bytes())?;
                if at.nlink as usize != k + 1 {
                    return Err(invalid(format!(
                        "netnews: link {} of article {i} reports {} links",
                        k + 1,
                        at.nlink
                    )));
                }
            }
        }
        for &(g, number) in &a.links {
            let line = overview_line(f, i, number);
            let (ov, size) = overview[g];
            write_all(fs, ov, size, line.as_bytes())?;
            overview[g].1 += line.len() as u64;
            write_all(fs, s.active, s.marks[g], format!("{number:010}").as_bytes())?;
        }
        pending.push_str(&history_line(f, i, &a.links));
        if (i + 1) % HISTORY_FLUSH == 0 || i + 1 == f.articles.len() {
            write_all(fs, s.history, history_size, pending.as_bytes())?;
            history_size += pending.len() as u64;
            pending.clear();
        }
    }
    Ok(Spooled {
        dirs,
        overview,
        history_size,
    })
}

/// The whole of a file, read in chunks.
fn read_whole(fs: &Fs, ino: Ino) -> ufs::Result<Vec<u8>> {
    let size = fs.getattr(ino)?.size as usize;
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let got = fs.read(ino, out.len() as u64, CHUNK.min(size - out.len()))?;
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    if out.len() != size {
        return Err(invalid(format!(
            "netnews: read {} of {size} bytes of inode {ino}",
            out.len()
        )));
    }
    Ok(out)
}

/// Writes `data` to a new file `name` in `dir` in chunks, then renames it
/// over `over`.
fn replace_file(fs: &Fs, dir: Ino, name: &[u8], over: &[u8], data: &[u8]) -> ufs::Result<()> {
    let ino = fs.mknod(dir, name, 0o100644, 0, Cred::ROOT)?.ino;
    for (k, c) in data.chunks(CHUNK).enumerate() {
        write_all(fs, ino, (k * CHUNK) as u64, c)?;
    }
    fs.rename(dir, name, dir, over, RenameMode::Replace)
}

/// Whether the link `(g, number)` is in the oldest half of its group.
fn expired(f: &Feed, g: usize, number: u64) -> bool {
    number <= f.last[g] / 2
}

/// Expire: walk the history, unlink the old half of every group, rewrite
/// history, overviews and low water marks. Returns the links removed.
fn expire(fs: &Fs, f: &Feed, s: &Server, expect_history: &[u8]) -> ufs::Result<u64> {
    let history = read_whole(fs, s.history)?;
    if history != expect_history {
        return Err(invalid(format!(
            "netnews: expire read {} bytes of history that differ from the {} written",
            history.len(),
            expect_history.len()
        )));
    }
    let by_name: HashMap<String, usize> = f
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.dotted(), i))
        .collect();
    // A fresh process: group directories found by lookups from the spool,
    // each remembered once found (the name cache).
    let mut found: HashMap<String, Ino> = HashMap::new();
    let mut dir_of = |g: usize| -> ufs::Result<Ino> {
        let mut dir = s.spool;
        let mut path = String::new();
        for part in &f.groups[g].parts {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(part);
            dir = match found.get(&path) {
                Some(&d) => d,
                None => {
                    let d = fs.lookup(dir, part.as_bytes())?.ino;
                    found.insert(path.clone(), d);
                    d
                }
            };
        }
        Ok(dir)
    };
    let mut removed = 0u64;
    let mut kept_history = Vec::with_capacity(history.len());
    for line in history.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let text = std::str::from_utf8(line)
            .map_err(|_| invalid("netnews: history line is not text".into()))?;
        let mut fields = text.split('\t');
        let (Some(id), Some(times), Some(paths)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(invalid(format!("netnews: bad history line {text:?}")));
        };
        let mut kept: Vec<&str> = Vec::new();
        for path in paths.split(' ') {
            let bad = || invalid(format!("netnews: bad history path {path:?}"));
            let (group, number) = path.rsplit_once('/').ok_or_else(bad)?;
            let g = *by_name.get(group).ok_or_else(bad)?;
            let number: u64 = number.parse().map_err(|_| bad())?;
            if expired(f, g, number) {
                fs.unlink(dir_of(g)?, number.to_string().as_bytes())?;
                removed += 1;
            } else {
                kept.push(path);
            }
        }
        if !kept.is_empty() {
            kept_history
                .extend_from_slice(format!("{id}\t{times}\t{}\n", kept.join(" ")).as_bytes());
        }
    }
    replace_file(fs, s.db, b"history.n", b"history", &kept_history)?;
    // Overviews, in the order of the active file.
    for g in 0..f.groups.len() {
        if f.last[g] == 0 {
            continue;
        }
        let dir = dir_of(g)?;
        let ov = fs.lookup(dir, b".overview")?.ino;
        let old = read_whole(fs, ov)?;
        let mut new = Vec::with_capacity(old.len() / 2 + 1);
        for line in old.split_inclusive(|&b| b == b'\n') {
            let number: u64 = line
                .split(|&b| b == b'\t')
                .next()
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| invalid(format!("netnews: bad overview line in group {g}")))?;
            if !expired(f, g, number) {
                new.extend_from_slice(line);
            }
        }
        replace_file(fs, dir, b".overview.n", b".overview", &new)?;
        let low = f.last[g] / 2 + 1;
        write_all(
            fs,
            s.active,
            s.marks[g] + 11,
            format!("{low:010}").as_bytes(),
        )?;
    }
    Ok(removed)
}

/// The numbered entries of a group directory, and whether `.overview` is
/// there.
fn listing(fs: &Fs, dir: Ino) -> ufs::Result<(Vec<u64>, bool)> {
    let mut numbers = Vec::new();
    let mut overview = false;
    for e in fs.readdir(dir, 0, usize::MAX)? {
        if e.name == b".overview" {
            overview = true;
        } else if let Some(n) = std::str::from_utf8(&e.name)
            .ok()
            .and_then(|s| s.parse().ok())
        {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    Ok((numbers, overview))
}

/// Every group directory holds exactly numbers `from..=last` and its
/// overview.
fn check_groups(fs: &Fs, f: &Feed, sp: &Spooled, expired_half: bool) -> ufs::Result<()> {
    for (g, &last) in f.last.iter().enumerate() {
        if last == 0 {
            continue;
        }
        let from = if expired_half { last / 2 + 1 } else { 1 };
        let (numbers, overview) = listing(fs, sp.dirs[g])?;
        let want: Vec<u64> = (from..=last).collect();
        if numbers != want || !overview {
            return Err(invalid(format!(
                "netnews: {} holds {} articles (overview {overview}), expected {from}..={last}",
                f.groups[g].dotted(),
                numbers.len()
            )));
        }
    }
    Ok(())
}

pub(super) fn workload(p: &Profile, m: &mut Meter) -> ufs::Result<()> {
    let f = make_feed(p);
    let body = body_text();
    let before = root_names(m.fs)?;
    let s = set_up(m.fs, &f)?;
    let sp = m.phase("netnews-unbatch", |fs| unbatch(fs, &f, &s, &body))?;

    // What the unbatch must have left.
    check_groups(m.fs, &f, &sp, false)?;
    let mut history = Vec::new();
    let mut overview = vec![0u64; f.groups.len()];
    for (i, a) in f.articles.iter().enumerate() {
        history.extend_from_slice(history_line(&f, i, &a.links).as_bytes());
        for &(g, n) in &a.links {
            overview[g] += overview_line(&f, i, n).len() as u64;
        }
    }
    for (g, &want) in overview.iter().enumerate() {
        let (ino, wrote) = sp.overview[g];
        let size = if ino.is_none() {
            0
        } else {
            m.fs.getattr(ino)?.size
        };
        if size != want || wrote != want {
            return Err(invalid(format!(
                "netnews: {}/.overview holds {size} bytes ({wrote} appended), {want} expected",
                f.groups[g].dotted()
            )));
        }
    }
    if sp.history_size != history.len() as u64 {
        return Err(invalid(format!(
            "netnews: {} bytes of history appended, {} expected",
            sp.history_size,
            history.len()
        )));
    }
    for (i, a) in f.articles.iter().enumerate().step_by(READ_SAMPLE) {
        let (g, number) = a.links[a.links.len() - 1];
        let ino = m.fs.lookup(sp.dirs[g], number.to_string().as_bytes())?.ino;
        let want = article_text(&f, i, &body);
        let text = m.fs.read(ino, 0, want.len() + 1)?;
        if text != want {
            return Err(invalid(format!(
                "netnews: article {i} ({}/{number}) reads back {} bytes, not its {}",
                f.groups[g].dotted(),
                text.len(),
                want.len()
            )));
        }
    }

    let removed = m.phase("netnews-expire", |fs| expire(fs, &f, &s, &history))?;
    let want_removed: u64 = f.last.iter().map(|&l| l / 2).sum();
    if removed != want_removed {
        return Err(invalid(format!(
            "netnews: expire removed {removed} links, {want_removed} expected"
        )));
    }
    check_groups(m.fs, &f, &sp, true)?;
    let mut kept_history = Vec::new();
    let mut crossposts = 0usize;
    for (i, a) in f.articles.iter().enumerate() {
        let left: Vec<(usize, u64)> = a
            .links
            .iter()
            .copied()
            .filter(|&(g, n)| !expired(&f, g, n))
            .collect();
        if left.is_empty() {
            continue;
        }
        kept_history.extend_from_slice(history_line(&f, i, &left).as_bytes());
        if a.links.len() > 1 {
            crossposts += 1;
            if crossposts.is_multiple_of(NLINK_SAMPLE) {
                let (g, n) = left[0];
                let at = m.fs.lookup(sp.dirs[g], n.to_string().as_bytes())?;
                if at.nlink as usize != left.len() {
                    return Err(invalid(format!(
                        "netnews: article {i} has {} links, {} groups still hold it",
                        at.nlink,
                        left.len()
                    )));
                }
            }
        }
    }
    let history_now = read_whole(m.fs, m.fs.lookup(s.db, b"history")?.ino)?;
    if history_now != kept_history {
        return Err(invalid(format!(
            "netnews: history after expire is {} bytes, {} expected",
            history_now.len(),
            kept_history.len()
        )));
    }
    if m.fs.lookup(s.db, b"history.n").is_ok() {
        return Err(invalid("netnews: history.n left after expire".into()));
    }

    let root = m.fs.root();
    m.phase("netnews-remove", |fs| {
        crate::dirpref::remove(fs, root, b"news")
    })?;
    root_restored(m.fs, &before, "netnews")
}

#[cfg(test)]
mod tests {
    use super::super::testing::checked_rows;
    use super::super::{Combo, Profile, Workload};
    use super::*;

    fn small() -> Profile {
        Profile {
            netnews_articles: 1_500,
            ..Profile::quick()
        }
    }

    const OFF: Combo = Combo::NONE;

    #[test]
    fn feed_has_the_stated_shape() {
        let f = make_feed(&Profile::full());
        assert_eq!(f.groups.len(), 750);
        assert_eq!(f.articles.len(), 30_000);
        let cross = f.articles.iter().filter(|a| a.links.len() > 1).count() as f64 / 30_000.0;
        assert!((0.12..0.18).contains(&cross), "{cross}");
        assert!(f.articles.iter().all(|a| (1..=4).contains(&a.links.len())));
        let mean = f.articles.iter().map(|a| a.size).sum::<usize>() as f64 / 30_000.0;
        assert!((2_800.0..4_200.0).contains(&mean), "{mean}");
        let mut sizes: Vec<usize> = f.articles.iter().map(|a| a.size).collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((2_000..3_000).contains(&median), "{median}");
        // Skewed popularity: the busiest tenth of groups has most articles.
        let mut per: Vec<u64> = f.last.clone();
        per.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = per[..75].iter().sum();
        let all: u64 = per.iter().sum();
        assert!(top * 2 > all, "{top} of {all}");
        // Groups are unique, and most share their parent directory with
        // another group: a tree, not a list of unrelated paths.
        let names: std::collections::HashSet<String> =
            f.groups.iter().map(|g| g.dotted()).collect();
        assert_eq!(names.len(), f.groups.len());
        let mut parents: HashMap<String, usize> = HashMap::new();
        let mut dirs = std::collections::HashSet::new();
        for g in &f.groups {
            *parents
                .entry(g.parts[..g.parts.len() - 1].join("/"))
                .or_default() += 1;
            for k in 1..=g.parts.len() {
                dirs.insert(g.parts[..k].join("/"));
            }
        }
        let sharing: usize = f
            .groups
            .iter()
            .filter(|g| parents[&g.parts[..g.parts.len() - 1].join("/")] > 1)
            .count();
        assert!(sharing * 2 > f.groups.len(), "{sharing}");
        assert!(dirs.len() < 2 * f.groups.len(), "{}", dirs.len());
        // Deterministic.
        let g = make_feed(&Profile::full());
        assert_eq!(f.last, g.last);
    }

    #[test]
    fn tests_run_in_order_check_clean_and_soft_updates_speed_the_unbatch() {
        let p = small();
        let su = Combo { su: true, ..OFF };
        let all = Combo::EVERY;
        let mut seconds = Vec::new();
        for c in [OFF, su, all] {
            let rows = checked_rows(&p, Workload::Netnews, c);
            seconds.push(rows[0].seconds);
        }
        // Soft updates delay the creations and links the normal mode writes
        // synchronously.
        assert!(seconds[1] < 0.7 * seconds[0], "{seconds:?}");
    }
}
