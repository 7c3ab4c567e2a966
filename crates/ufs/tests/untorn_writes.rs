//! A write the daemon makes whole (cylinder groups, the superblock) stays
//! whole when the process is killed in the middle of it.
//!
//! Linux's buffered write copies into the page cache page by page and
//! stops at a fatal signal, so a SIGKILL can leave a 32 KiB block half new
//! and half old: a cylinder group torn that way fails its check-hash, which
//! FreeBSD's preen does not repair. `FileDevice::write_untorn` goes around
//! the page cache (O_DIRECT). The test runs itself as a child process that
//! writes block after block, kills it at random moments, and checks every
//! block on disk is one write's pattern, never two.
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use ufs::dev::{BlockDevice, FileDevice};

const BLOCK: usize = 32 * 1024;
const SLOTS: u64 = 64;
/// Distinct patterns, prime to the slot count so that a slot's next
/// write always differs from what it holds.
const PATTERNS: usize = 61;

/// The child: writes forever (until killed) through `write_untorn`, or
/// through `write_at` for the control run.
fn child(path: &Path, untorn: bool) -> ! {
    let d = FileDevice::open(path, true).expect("open image");
    let pats: Vec<Vec<u8>> = (0..PATTERNS).map(|i| vec![i as u8 + 1; BLOCK]).collect();
    // The file's pages come into the page cache one by one (4 KiB writes
    // make 4 KiB folios), as a daemon's mixed reads and writes leave them:
    // a block then spans several folios, and a kill can land between two.
    for off in (0..SLOTS * 2 * BLOCK as u64).step_by(4096) {
        d.write_at(off, &[0xee; 4096]).expect("write");
    }
    println!("ready");
    let mut i = 0usize;
    loop {
        let off = (i as u64 % SLOTS) * 2 * BLOCK as u64;
        let p = &pats[i % PATTERNS];
        if untorn {
            d.write_untorn(off, p).expect("write");
        } else {
            d.write_at(off, p).expect("write");
        }
        i += 1;
    }
}

/// Kills `rounds` writers; returns how many left a torn block.
fn torn_after_kills(dir: &Path, untorn: bool, rounds: usize) -> usize {
    let img = dir.join(if untorn { "untorn.img" } else { "plain.img" });
    let mut torn = 0;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..rounds {
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(SLOTS * 2 * BLOCK as u64).unwrap();
        drop(f);
        let mut c = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "kill_never_tears_an_untorn_write", "--nocapture"])
            .env("UFS_TEAR_CHILD", &img)
            .env("UFS_TEAR_UNTORN", if untorn { "1" } else { "0" })
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn writer");
        // Wait for "ready", then let it write for a while.
        let mut out = c.stdout.take().unwrap();
        let mut buf = [0u8; 4096];
        let mut seen = String::new();
        while !seen.contains("ready") {
            let n = out.read(&mut buf).unwrap();
            assert!(n > 0, "the writer died before writing");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(5 + seed % 40));
        c.kill().unwrap();
        c.wait().unwrap();
        let data = std::fs::read(&img).unwrap();
        for s in 0..SLOTS as usize {
            let b = &data[s * 2 * BLOCK..s * 2 * BLOCK + BLOCK];
            if b.iter().any(|&x| x != b[0]) {
                torn += 1;
                break;
            }
        }
    }
    torn
}

#[test]
fn kill_never_tears_an_untorn_write() {
    if let Some(p) = std::env::var_os("UFS_TEAR_CHILD") {
        child(
            Path::new(&p),
            std::env::var("UFS_TEAR_UNTORN").as_deref() == Ok("1"),
        );
    }
    // A directory on a disk file system: tmpfs refuses O_DIRECT (the
    // device then writes the plain way, and could tear).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let untorn = torn_after_kills(dir.path(), true, 25);
    // The same kills on plain writes show what the test would catch.
    let plain = torn_after_kills(dir.path(), false, 25);
    println!("torn blocks after SIGKILL: untorn writes {untorn}/25 kills, plain writes {plain}/25");
    assert_eq!(untorn, 0, "an untorn write was left half done by a kill");
}
