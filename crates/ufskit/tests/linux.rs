//! What Linux programs expect of a local file system, through a real
//! mount: file handles (NFS export, `open_by_handle_at`), mount(8)'s
//! view of the mount (source, type, remount, umount), space allocation
//! (`fallocate`, holes). Each test names the xfstests case it stands for
//! where there is one (CI cannot fetch xfstests).
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use testkit::*;

mod common;
use common::*;

/// Drops the kernel's clean caches (dentries and inodes), as xfstests'
/// handle tests and an NFS server under memory pressure do.
fn drop_caches() {
    // Unwritten pages would keep their inodes.
    run(&mut Command::new("sync"));
    std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches (needs root)");
}

/// A file handle from name_to_handle_at(2): its type and bytes.
struct Handle {
    kind: i32,
    bytes: Vec<u8>,
}

fn c_path(p: &Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

// The handle calls have no safe wrapper in libc, nix or rustix.
#[allow(unsafe_code)]
fn handle_of(p: &Path) -> Handle {
    const MAX: usize = 128;
    // struct file_handle { u32 handle_bytes; i32 handle_type; u8 f_handle[] }
    let mut buf = vec![0u64; (8 + MAX) / 8];
    let fh = buf.as_mut_ptr().cast::<libc::file_handle>();
    let mut mount_id = 0;
    let path = c_path(p);
    // SAFETY: `buf` is 8-byte aligned and holds the header and MAX bytes,
    // which handle_bytes tells the kernel.
    let r = unsafe {
        (*fh).handle_bytes = MAX as u32;
        libc::name_to_handle_at(libc::AT_FDCWD, path.as_ptr(), fh, &mut mount_id, 0)
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    // SAFETY: the kernel filled the header and handle_bytes bytes after it.
    unsafe {
        let n = (*fh).handle_bytes as usize;
        let data = std::slice::from_raw_parts(buf.as_ptr().cast::<u8>().add(8), n);
        Handle {
            kind: (*fh).handle_type,
            bytes: data.to_vec(),
        }
    }
}

/// open_by_handle_at(2) of `h` on the mount whose root is `mnt`.
#[allow(unsafe_code)]
fn open_by_handle(mnt: &Path, h: &Handle, flags: i32) -> std::io::Result<std::fs::File> {
    let root = std::fs::File::open(mnt)?;
    let mut buf = vec![0u64; (8 + h.bytes.len()).div_ceil(8)];
    let fh = buf.as_mut_ptr().cast::<libc::file_handle>();
    // SAFETY: `buf` holds the header and the handle's bytes.
    let fd = unsafe {
        (*fh).handle_bytes = h.bytes.len() as u32;
        (*fh).handle_type = h.kind;
        std::ptr::copy_nonoverlapping(
            h.bytes.as_ptr(),
            buf.as_mut_ptr().cast::<u8>().add(8),
            h.bytes.len(),
        );
        libc::open_by_handle_at(root.as_raw_fd(), fh, flags)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel just returned, owned by nobody else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn read_all(mut f: std::fs::File) -> Vec<u8> {
    use std::io::Read;
    let mut v = Vec::new();
    f.read_to_end(&mut v).unwrap();
    v
}

/// xfstests generic/426, 467, 477, 756: a file handle stays good after the
/// kernel dropped its caches, after its parent was renamed, and across a
/// remount (what an NFS server needs); a removed file's handle is stale.
#[test]
fn file_handles_outlive_the_cache_a_rename_and_a_remount() {
    if !needs_fuse("file_handles_outlive_the_cache_a_rename_and_a_remount") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &[]);
    std::fs::create_dir_all(mnt.join("a/b")).unwrap();
    std::fs::write(mnt.join("a/b/file"), b"kept by handle").unwrap();
    std::fs::write(mnt.join("a/gone"), b"soon removed").unwrap();
    let file = handle_of(&mnt.join("a/b/file"));
    let dir = handle_of(&mnt.join("a/b"));
    let gone = handle_of(&mnt.join("a/gone"));

    drop_caches();
    assert_eq!(
        read_all(open_by_handle(&mnt, &file, libc::O_RDONLY).unwrap()),
        b"kept by handle"
    );
    // A directory decoded after the drop has a path again (its parent,
    // found through ".."), so it can be listed.
    drop_caches();
    let d = open_by_handle(&mnt, &dir, libc::O_RDONLY | libc::O_DIRECTORY).unwrap();
    let listed = std::fs::read_dir(format!("/proc/self/fd/{}", d.as_raw_fd()))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect::<Vec<_>>();
    assert_eq!(listed, ["file"]);
    drop(d);

    std::fs::rename(mnt.join("a"), mnt.join("renamed")).unwrap();
    drop_caches();
    assert_eq!(
        read_all(open_by_handle(&mnt, &file, libc::O_RDONLY).unwrap()),
        b"kept by handle"
    );

    std::fs::remove_file(mnt.join("renamed/gone")).unwrap();
    drop_caches();
    let e = open_by_handle(&mnt, &gone, libc::O_RDONLY).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "removed file: {e}");

    // A new daemon, the same numbers and generations.
    m.umount();
    let m = Mounted::new(&img, &mnt, &[]);
    assert_eq!(
        read_all(open_by_handle(&mnt, &file, libc::O_RDONLY).unwrap()),
        b"kept by handle"
    );
    // A handle whose inode number was never used, and one past the last
    // inode, are stale, not an error of the file system.
    // FUSE's handle: the node id's high and low 32 bits, the generation.
    for ino in [1000u64, 1 << 40] {
        let mut forged = Handle {
            kind: file.kind,
            bytes: file.bytes.clone(),
        };
        forged.bytes[..4].copy_from_slice(&((ino >> 32) as u32).to_ne_bytes());
        forged.bytes[4..8].copy_from_slice(&(ino as u32).to_ne_bytes());
        let e = open_by_handle(&mnt, &forged, libc::O_RDONLY).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "inode {ino}: {e}");
    }
    std::fs::write(mnt.join("after"), b"still writable").unwrap();
    m.umount();
    fsck_clean(&img);
}

/// setpriv's arguments for running as nobody (65534), in no group,
/// without capabilities.
const NOBODY: [&str; 4] = [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
];

/// A command run as nobody: `as_nobody().args([program, ...])`.
fn as_nobody() -> Command {
    let mut c = Command::new("setpriv");
    c.args(NOBODY);
    c
}

fn atime_ns(p: &Path) -> i128 {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    i128::from(m.atime()) * 1_000_000_000 + i128::from(m.atime_nsec())
}

/// xfstests generic/003 and 120: Linux's access-time rules, each mount
/// option in turn. relatime (the default) updates at the first read after
/// a change and not at the next; strictatime at every read; noatime never,
/// not even at exec; listing a directory leaves its access time alone.
#[test]
fn access_times_follow_relatime_strictatime_and_noatime() {
    if !needs_fuse("access_times_follow_relatime_strictatime_and_noatime") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let img = new_image(t.path(), "img", "64m");
    let mnt = t.path().join("m");
    let f = mnt.join("f");
    let read = || {
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::read(&f).unwrap();
        atime_ns(&f)
    };

    let m = Mounted::new(&img, &mnt, &[]);
    std::fs::write(&f, b"data").unwrap();
    let written = atime_ns(&f);
    let first = read();
    assert!(first > written, "relatime: first read after a write");
    assert_eq!(read(), first, "relatime: second read");
    let d = atime_ns(&mnt);
    std::fs::read_dir(&mnt).unwrap().for_each(drop);
    assert_eq!(atime_ns(&mnt), d, "listing a directory");
    m.umount();

    let m = Mounted::new(&img, &mnt, &["strictatime"]);
    let a = read();
    assert!(read() > a, "strictatime: every read");
    m.umount();

    let m = Mounted::new(&img, &mnt, &["noatime"]);
    std::fs::write(&f, b"changed").unwrap();
    let a = atime_ns(&f);
    assert_eq!(read(), a, "noatime: read after a write");
    let exe = mnt.join("prog");
    std::fs::copy("/bin/true", &exe).unwrap();
    let a = atime_ns(&exe);
    std::thread::sleep(std::time::Duration::from_millis(10));
    run(&mut Command::new(&exe));
    assert_eq!(atime_ns(&exe), a, "noatime: exec");
    m.umount();
    fsck_clean(&img);
}

/// posix_fallocate and fallocate(2) (xfstests' falloc and punch groups),
/// and SEEK_DATA/SEEK_HOLE (what `cp --sparse`, `tar -S` and xfstests'
/// seek_sanity_test use): allocation makes blocks that stay allocated,
/// keeps data, grows the file; zeroing a range zeroes it; punching frees
/// whole blocks and zeroes parts; what UFS cannot do (blocks past the end)
/// is EOPNOTSUPP and changes nothing; holes and data are found where they
/// are.
#[test]
fn fallocate_and_seeking_holes_and_data() {
    use nix::fcntl::{fallocate, FallocateFlags as F};
    use nix::unistd::{lseek, Whence};
    use std::os::unix::fs::{FileExt, MetadataExt};
    if !needs_fuse("fallocate_and_seeking_holes_and_data") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("128m", &[]);
    let p = mnt.join("f");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    let bsize = 32768u64; // newfs's default block size
                          // A sparse file: data in block 0 and at 4 MiB, a hole between.
    f.write_all_at(b"head", 0).unwrap();
    f.write_all_at(&[7u8; 100], 4 << 20).unwrap();
    let size = (4 << 20) + 100;
    let seek = |off: u64, w: Whence| lseek(&f, off as i64, w).map(|o| o as u64);
    assert_eq!(seek(0, Whence::SeekData), Ok(0));
    assert_eq!(seek(0, Whence::SeekHole), Ok(bsize));
    assert_eq!(seek(bsize, Whence::SeekData), Ok(4 << 20));
    assert_eq!(seek(4 << 20, Whence::SeekHole), Ok(size));
    assert_eq!(seek(size, Whence::SeekData), Err(nix::errno::Errno::ENXIO));
    assert_eq!(
        seek(size + 1, Whence::SeekHole),
        Err(nix::errno::Errno::ENXIO)
    );

    // Allocating over the hole fills it (reading zeros), keeps the data,
    // and leaves no hole; the block count grows by the hole's size.
    let blocks = std::fs::metadata(&p).unwrap().blocks();
    fallocate(&f, F::empty(), 0, size as i64).unwrap();
    let after = std::fs::metadata(&p).unwrap();
    assert_eq!(after.size(), size);
    assert!(
        after.blocks() >= blocks + (4 << 20) / 512 - 2 * bsize / 512,
        "blocks {blocks} -> {}",
        after.blocks()
    );
    assert_eq!(seek(0, Whence::SeekHole), Ok(size));
    let mut buf = vec![1u8; 8];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..4], b"head");
    f.read_exact_at(&mut buf, 1 << 20).unwrap();
    assert_eq!(buf, [0u8; 8]);

    // A range ending past the end inside the allocated last fragment
    // grows the file too (fsx found it).
    let small = std::fs::File::create(mnt.join("small")).unwrap();
    small.write_all_at(b"0123456789", 0).unwrap();
    fallocate(&small, F::empty(), 4, 5000).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("small")).unwrap().size(), 5004);
    drop(small);
    // Past the end: the file grows (mode 0); KEEP_SIZE cannot keep blocks
    // past the end on UFS.
    fallocate(&f, F::empty(), size as i64, 1 << 20).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().size(), size + (1 << 20));
    let size = size + (1 << 20);
    assert_eq!(
        fallocate(&f, F::FALLOC_FL_KEEP_SIZE, size as i64, 4096),
        Err(nix::errno::Errno::EOPNOTSUPP)
    );
    assert_eq!(std::fs::metadata(&p).unwrap().size(), size);
    // Inside the file, KEEP_SIZE is plain allocation.
    fallocate(&f, F::FALLOC_FL_KEEP_SIZE, 0, 4096).unwrap();

    // Zeroing a range over data.
    f.write_all_at(&[9u8; 8192], 8192).unwrap();
    fallocate(&f, F::FALLOC_FL_ZERO_RANGE, 10000, 1000).unwrap();
    let mut got = vec![0u8; 8192];
    f.read_exact_at(&mut got, 8192).unwrap();
    let mut want = vec![9u8; 8192];
    want[10000 - 8192..11000 - 8192].fill(0);
    assert!(got == want, "zeroed range");
    // Punching a hole: whole blocks freed (a hole SEEK_HOLE finds, fewer
    // blocks), parts of blocks zeroed, the size kept; without KEEP_SIZE
    // Linux refuses it.
    let before = std::fs::metadata(&p).unwrap();
    fallocate(
        &f,
        F::FALLOC_FL_PUNCH_HOLE | F::FALLOC_FL_KEEP_SIZE,
        100,
        4 * bsize as i64,
    )
    .unwrap();
    let after = std::fs::metadata(&p).unwrap();
    assert_eq!(after.size(), before.size());
    assert_eq!(after.blocks(), before.blocks() - 3 * bsize / 512);
    assert_eq!(seek(0, Whence::SeekHole), Ok(bsize));
    assert_eq!(seek(bsize, Whence::SeekData), Ok(4 * bsize));
    let mut head = vec![1u8; bsize as usize];
    f.read_exact_at(&mut head, 0).unwrap();
    assert_eq!(&head[..4], b"head");
    assert!(
        head[100..].iter().all(|&b| b == 0),
        "zeroed part of block 0"
    );
    assert_eq!(
        fallocate(&f, F::FALLOC_FL_PUNCH_HOLE, 0, 4096),
        Err(nix::errno::Errno::EOPNOTSUPP)
    );
    drop(f);

    // cp --sparse=always finds the holes of a sparse file through the mount.
    let sparse = mnt.join("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    run(Command::new("cp")
        .arg("--sparse=always")
        .arg(&sparse)
        .arg(mnt.join("copy")));
    let copy = std::fs::metadata(mnt.join("copy")).unwrap();
    assert_eq!(copy.size(), 256 << 20);
    // The last block (UFS keeps it allocated) and the indirect blocks
    // that map it.
    assert!(
        copy.blocks() * 512 <= 3 * bsize,
        "copy holds {} blocks",
        copy.blocks()
    );
    m.umount();
    fsck_clean(&img);
}

fn chattr(flags: &str, p: &Path) {
    run(Command::new("chattr").arg(flags).arg(p));
}

/// xfstests generic/079 (immutable and append-only files and directories,
/// as Linux's VFS checks them): a flag's EPERM comes before ENOTEMPTY;
/// an append-only file takes `touch` (times set to now) but not given
/// times; attributes of a flagged file, trusted.* too, cannot be removed.
#[test]
fn immutable_and_append_only_answer_as_linux_does() {
    if !needs_fuse("immutable_and_append_only_answer_as_linux_does")
        || !prerequisite(
            Command::new("chattr").arg("--help").output().is_ok(),
            "immutable_and_append_only_answer_as_linux_does",
            "chattr (apt-get install e2fsprogs)",
        )
    {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &[]);
    let d = mnt.join("imm");
    std::fs::create_dir_all(d.join("child")).unwrap();
    std::fs::write(d.join("child/f"), b"x").unwrap();
    let app = mnt.join("app");
    std::fs::write(&app, b"log").unwrap();
    run(Command::new("setfattr")
        .args(["-n", "trusted.t", "-v", "1"])
        .arg(&app));
    run(Command::new("setfattr")
        .args(["-n", "user.u", "-v", "1"])
        .arg(&app));
    chattr("+i", &d);
    chattr("+a", &app);

    let e = std::fs::remove_dir(d.join("child")).unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::EPERM),
        "rmdir in an immutable dir: {e}"
    );
    // touch: times to now, allowed; given times refused.
    run(Command::new("touch").arg(&app));
    let given = Command::new("touch")
        .args(["-d", "2001-01-01"])
        .arg(&app)
        .output()
        .unwrap();
    assert!(
        !given.status.success(),
        "given times on an append-only file"
    );
    for name in ["trusted.t", "user.u"] {
        let out = Command::new("setfattr")
            .args(["-x", name])
            .arg(&app)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("Operation not permitted"),
            "removing {name}: {err}"
        );
    }
    chattr("-i", &d);
    chattr("-a", &app);
    run(Command::new("setfattr").args(["-x", "trusted.t"]).arg(&app));
    m.umount();
    fsck_clean(&img);
}

/// xfstests generic/355: a write by the owner, who lacks CAP_FSETID,
/// takes setuid away, and setgid when the group may execute, through an
/// O_DIRECT write too (the kernel leaves that one to the server); stat
/// right after shows it.
#[test]
fn a_direct_write_by_the_owner_takes_setuid_away() {
    if !needs_fuse("a_direct_write_by_the_owner_takes_setuid_away") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &["allow_other"]);
    std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    let f = mnt.join("f");
    std::fs::write(&f, b"0123456789").unwrap();
    run(Command::new("chown").arg("65534:65534").arg(&f));
    // dd as nobody (65534), with O_DIRECT; the image's 4 KiB write unit.
    let write_as_nobody = |mode: u32| -> u32 {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = as_nobody()
            .args([
                "dd",
                "if=/dev/zero",
                "bs=4096",
                "count=1",
                "oflag=direct",
                "conv=notrunc",
            ])
            .arg(format!("of={}", f.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777
    };
    assert_eq!(
        write_as_nobody(0o6644),
        0o2644,
        "setgid without group x stays"
    );
    assert_eq!(write_as_nobody(0o6754), 0o0754, "setgid with group x goes");
    // xfstests generic/683: fallocate by someone outside the file's group
    // takes both away, group x or not; root's keeps them.
    let g = mnt.join("g");
    std::fs::write(&g, vec![b'X'; 65536]).unwrap();
    std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o6666)).unwrap();
    let falloc = |who: &[&str]| {
        let out = Command::new("setpriv")
            .args(who)
            .args(["xfs_io", "-c", "falloc 0 131072"])
            .arg(&g)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::metadata(&g).unwrap().permissions().mode() & 0o7777
    };
    if prerequisite(
        Command::new("xfs_io").arg("-V").output().is_ok(),
        "a_direct_write_by_the_owner_takes_setuid_away",
        "xfs_io (apt-get install xfsprogs)",
    ) {
        assert_eq!(falloc(&["--reuid=0"]), 0o6666, "root keeps them");
        assert_eq!(falloc(&NOBODY), 0o0666);
    }
    m.umount();
    fsck_clean(&img);
}

/// xfstests generic/676: seekdir/telldir through the mount, to the
/// offsets telldir gave and to made-up ones below the last: each lands on
/// an entry, never on the end of the directory.
#[test]
#[allow(unsafe_code)]
fn seekdir_to_any_offset_below_the_last_lands_on_an_entry() {
    if !needs_fuse("seekdir_to_any_offset_below_the_last_lands_on_an_entry") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &[]);
    let d = mnt.join("d");
    std::fs::create_dir(&d).unwrap();
    for i in 0..500 {
        std::fs::write(d.join(format!("file-{i:04}")), b"").unwrap();
    }
    let path = c_path(&d);
    // SAFETY: opendir/readdir/telldir/seekdir on a DIR the test owns and
    // closes; each dirent is read before the next call.
    unsafe {
        let dir = libc::opendir(path.as_ptr());
        assert!(!dir.is_null());
        let mut seen = Vec::new();
        loop {
            let pos = libc::telldir(dir);
            let e = libc::readdir(dir);
            if e.is_null() {
                break;
            }
            let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_owned();
            seen.push((pos, name));
        }
        assert_eq!(seen.len(), 502);
        let max = seen.iter().map(|s| s.0).max().unwrap();
        // Back to positions telldir gave: the same entries.
        for (pos, name) in seen.iter().rev().step_by(37) {
            libc::seekdir(dir, *pos);
            let e = libc::readdir(dir);
            assert!(!e.is_null());
            assert_eq!(
                std::ffi::CStr::from_ptr((*e).d_name.as_ptr()),
                name.as_c_str()
            );
        }
        // Made-up positions below the last: an entry each.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            libc::seekdir(dir, (x % max as u64) as libc::c_long);
            assert!(!libc::readdir(dir).is_null(), "end of directory");
        }
        libc::closedir(dir);
    }
    m.umount();
    fsck_clean(&img);
}

/// xfstests generic/732: a second mount of a mounted image shows the same
/// file system (a rename through one is seen through the other), may be
/// read-only on its own, and unmounting either leaves the other working;
/// the image is written and released when the last goes.
#[test]
fn a_second_mount_of_an_image_is_the_same_file_system() {
    if !needs_fuse("a_second_mount_of_an_image_is_the_same_file_system") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let img = new_image(t.path(), "img", "64m");
    let (one, two) = (t.path().join("one"), t.path().join("two"));
    let first = Mounted::new(&img, &one, &[]);
    // Asking for dev and suid does not lift the first mount's nodev and
    // nosuid: a second place never has fewer restrictions.
    let second = Mounted::new(&img, &two, &["ro,dev,suid"]);
    let fm = run(Command::new("findmnt")
        .args(["-n", "-o", "OPTIONS", "--mountpoint"])
        .arg(&two));
    let opts = String::from_utf8_lossy(&fm.stdout).to_string();
    for o in ["ro", "nosuid", "nodev"] {
        assert!(
            opts.trim().split(',').any(|x| x == o),
            "{o} missing: {opts}"
        );
    }
    std::fs::create_dir_all(one.join("A")).unwrap();
    std::fs::create_dir_all(one.join("B")).unwrap();
    std::fs::write(one.join("A/f"), b"seen twice").unwrap();
    std::fs::rename(one.join("A/f"), one.join("B/f")).unwrap();
    assert_eq!(std::fs::read(two.join("B/f")).unwrap(), b"seen twice");
    assert!(!two.join("A/f").exists());
    let e = std::fs::write(two.join("no"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    first.umount();
    assert_eq!(std::fs::read(two.join("B/f")).unwrap(), b"seen twice");
    second.umount();
    fsck_clean(&img);
}

/// A remount changes what it names and keeps the rest: `-o remount,noatime`
/// leaves a read-only, noexec mount read-only and noexec.
#[test]
fn a_remount_keeps_the_flags_it_does_not_name() {
    if !needs_fuse("a_remount_keeps_the_flags_it_does_not_name") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &["ro,noexec"]);
    run(ufskit()
        .args(["mount", "-o", "remount,noatime"])
        .arg(&img)
        .arg(&mnt));
    let fm = run(Command::new("findmnt")
        .args(["-n", "-o", "OPTIONS", "--mountpoint"])
        .arg(&mnt));
    let opts = String::from_utf8_lossy(&fm.stdout).to_string();
    for o in ["ro", "noexec", "noatime", "nosuid", "nodev"] {
        assert!(
            opts.trim().split(',').any(|x| x == o),
            "{o} missing: {opts}"
        );
    }
    let e = std::fs::write(mnt.join("x"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));
    m.umount();
    fsck_clean(&img);
}

/// `system.security.*` and `system.trusted.*` are not second names for
/// `security.*` and `trusted.*` (the kernel guards those, not `system.*`),
/// and only root writes `trusted.*`.
#[test]
fn security_and_trusted_attributes_have_one_name_and_are_roots() {
    if !needs_fuse("security_and_trusted_attributes_have_one_name_and_are_roots") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &["allow_other"]);
    std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    let f = mnt.join("f");
    std::fs::write(&f, b"x").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
    for name in ["system.security.capability", "system.trusted.x"] {
        let out = Command::new("setfattr")
            .args(["-n", name, "-v", "0x01"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name} was stored");
    }
    let out = as_nobody()
        .args(["setfattr", "-n", "trusted.x", "-v", "1"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success(), "nobody wrote trusted.x");
    run(Command::new("setfattr")
        .args(["-n", "trusted.x", "-v", "1"])
        .arg(&f));
    m.umount();
    fsck_clean(&img);
}

/// `renameat2(RENAME_WHITEOUT)`, what overlayfs asks of its upper layer
/// (xfstests generic/631 and the overlay group): the file moves and a
/// whiteout, a character device 0:0 with mode 0, takes its old name, for
/// files and for directories moving between parents, in the default
/// (ordered) mode; `RENAME_NOREPLACE` still refuses an existing target.
/// Then overlayfs itself on the mount: a removed and a renamed lower file
/// leave whiteouts in the upper directory, a removed lower directory can
/// be made again (overlayfs's RENAME_EXCHANGE of a whiteout and a
/// directory, done in the ordered default mode), and the image stays
/// clean.
#[test]
fn rename_whiteout_for_overlayfs() {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if !needs_fuse("rename_whiteout_for_overlayfs") {
        return;
    }
    let (t, img, mnt, m) = fresh_mount("64m", &[]);
    let is_whiteout = |p: &Path| {
        let md = std::fs::symlink_metadata(p).unwrap();
        md.file_type().is_char_device() && md.rdev() == 0 && md.mode() & 0o7777 == 0
    };
    std::fs::write(mnt.join("a"), b"moved").unwrap();
    renameat2(
        AT_FDCWD,
        &mnt.join("a"),
        AT_FDCWD,
        &mnt.join("b"),
        RenameFlags::RENAME_WHITEOUT,
    )
    .unwrap();
    assert_eq!(std::fs::read(mnt.join("b")).unwrap(), b"moved");
    assert!(is_whiteout(&mnt.join("a")));
    std::fs::create_dir_all(mnt.join("d/inner")).unwrap();
    std::fs::create_dir(mnt.join("p")).unwrap();
    renameat2(
        AT_FDCWD,
        &mnt.join("d"),
        AT_FDCWD,
        &mnt.join("p/d2"),
        RenameFlags::RENAME_WHITEOUT | RenameFlags::RENAME_NOREPLACE,
    )
    .unwrap();
    assert!(is_whiteout(&mnt.join("d")));
    assert!(mnt.join("p/d2/inner").is_dir());
    assert_eq!(
        std::fs::metadata(mnt.join("p/d2/inner/..")).unwrap().ino(),
        std::fs::metadata(mnt.join("p/d2")).unwrap().ino()
    );
    std::fs::write(mnt.join("c"), b"c").unwrap();
    let e = renameat2(
        AT_FDCWD,
        &mnt.join("c"),
        AT_FDCWD,
        &mnt.join("b"),
        RenameFlags::RENAME_WHITEOUT | RenameFlags::RENAME_NOREPLACE,
    )
    .unwrap_err();
    assert_eq!(e, nix::errno::Errno::EEXIST);
    assert_eq!(std::fs::read(mnt.join("c")).unwrap(), b"c");

    let overlay = std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| f.contains("overlay"));
    if prerequisite(
        overlay,
        "rename_whiteout_for_overlayfs",
        "overlayfs (modprobe overlay)",
    ) {
        let lower = t.path().join("lower");
        let merged = t.path().join("merged");
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(&merged).unwrap();
        std::fs::write(lower.join("gone"), b"lower").unwrap();
        std::fs::write(lower.join("old"), b"renamed").unwrap();
        std::fs::create_dir_all(lower.join("dir")).unwrap();
        std::fs::write(lower.join("dir/inside"), b"lower").unwrap();
        std::fs::create_dir_all(mnt.join("upper")).unwrap();
        std::fs::create_dir_all(mnt.join("work")).unwrap();
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            mnt.join("upper").display(),
            mnt.join("work").display()
        );
        run(Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&merged));
        std::fs::remove_file(merged.join("gone")).unwrap();
        std::fs::rename(merged.join("old"), merged.join("new")).unwrap();
        // A lower directory removed, and one of the same name made again:
        // overlayfs swaps a whiteout and the directory with
        // RENAME_EXCHANGE, and makes the new one opaque (an attribute).
        std::fs::remove_dir_all(merged.join("dir")).unwrap();
        assert!(!merged.join("dir").exists());
        std::fs::create_dir(merged.join("dir")).unwrap();
        std::fs::write(merged.join("dir/fresh"), b"upper").unwrap();
        let names = |d: &Path| {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&merged), ["dir", "new"], "merged view");
        assert_eq!(
            names(&merged.join("dir")),
            ["fresh"],
            "the new directory is opaque"
        );
        assert_eq!(std::fs::read(merged.join("new")).unwrap(), b"renamed");
        run(Command::new("umount").arg(&merged));
        assert!(is_whiteout(&mnt.join("upper/gone")));
        assert!(is_whiteout(&mnt.join("upper/old")));
        assert_eq!(std::fs::read(mnt.join("upper/new")).unwrap(), b"renamed");
    }
    m.umount();
    fsck_clean(&img);
}

/// `open(O_TMPFILE)` (xfstests generic/004, 509, 530; overlayfs's copy-up
/// and `linkat`-based atomic file creation use it): an unnamed file in the
/// directory's file system, with no link and no entry, which `linkat` of
/// the descriptor names (unless opened `O_EXCL`) and whose space comes
/// back when it is closed unnamed. FUSE sends it as FUSE_TMPFILE, which the
/// mount serves on its io_uring transport (Linux 6.14+, as root); without
/// it the kernel answers EOPNOTSUPP, as for any file system lacking it.
#[test]
fn o_tmpfile_is_unnamed_until_linked() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    if !needs_fuse("o_tmpfile_is_unnamed_until_linked") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("64m", &[]);
    let uring = uring_offered();
    let open_tmp = |extra: i32| -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE | extra)
            .mode(0o640)
            .open(&mnt)
    };
    let linkat = |f: &std::fs::File, name: &str| -> std::io::Result<()> {
        let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
        nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            proc_path.as_str(),
            nix::fcntl::AT_FDCWD,
            &mnt.join(name),
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        )
        .map_err(std::io::Error::from)
    };
    let free = || {
        let s = nix::sys::statvfs::statvfs(&mnt).unwrap();
        s.blocks_free() as u64 * s.fragment_size() as u64
    };
    let mut f = match open_tmp(0) {
        Ok(f) => f,
        Err(e) if !uring => {
            assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}");
            m.umount();
            fsck_clean(&img);
            return;
        }
        Err(e) => panic!("O_TMPFILE on the io_uring transport: {e}"),
    };
    f.write_all(b"written unnamed").unwrap();
    let md = f.metadata().unwrap();
    assert_eq!(md.nlink(), 0);
    assert!(md.is_file());
    assert_eq!(
        md.mode() & 0o7777 & !0o640,
        0,
        "mode {:o} beyond 0640",
        md.mode()
    );
    assert_eq!(
        std::fs::read_dir(&mnt).unwrap().count(),
        1,
        "only .snap is listed"
    );
    linkat(&f, "named").unwrap();
    assert_eq!(
        std::fs::read(mnt.join("named")).unwrap(),
        b"written unnamed"
    );
    assert_eq!(
        std::fs::metadata(mnt.join("named")).unwrap().ino(),
        md.ino()
    );
    assert_eq!(f.metadata().unwrap().nlink(), 1);
    drop(f);

    // O_EXCL: never to be named.
    let g = open_tmp(libc::O_EXCL).unwrap();
    let e = linkat(&g, "never").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    drop(g);

    // An unnamed file's blocks come back when it is closed.
    let before = free();
    let mut h = open_tmp(0).unwrap();
    h.write_all(&vec![7u8; 4 << 20]).unwrap();
    h.sync_all().unwrap();
    assert!(
        free() + (3 << 20) < before,
        "4 MiB written: {} -> {}",
        before,
        free()
    );
    drop(h);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while free() + (1 << 20) < before && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        free() + (1 << 20) >= before,
        "space of a closed unnamed file: {} of {}",
        free(),
        before
    );
    m.umount();
    fsck_clean(&img);
}

/// A second mount of a mounted image is a new mount, as a kernel file
/// system's is, not a peer of the first (xfstests generic/409-411, shared
/// subtrees): with the first mount shared, a mount under the second does
/// not appear under the first, and the second is in no group of the
/// first's. A remount through either place changes the file system.
#[test]
fn a_second_mount_is_no_peer_of_the_first() {
    if !needs_fuse("a_second_mount_is_no_peer_of_the_first") {
        return;
    }
    let (t, img, one, m) = fresh_mount("64m", &[]);
    std::fs::create_dir(one.join("sub")).unwrap();
    run(Command::new("mount").arg("--make-shared").arg(&one));
    let two = t.path().join("two");
    let second = Mounted::new(&img, &two, &[]);
    run(Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(two.join("sub")));
    std::fs::write(two.join("sub/on-tmpfs"), b"t").unwrap();
    assert!(
        !one.join("sub/on-tmpfs").exists(),
        "a mount under the second mount propagated to the first"
    );
    // The optional fields of /proc/self/mountinfo: `shared:N` names the
    // peer group.
    let groups = |dir: &Path| -> Vec<String> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let line = info
            .lines()
            .rfind(|l| l.split(' ').nth(4) == Some(dir.to_str().unwrap()))
            .unwrap_or_else(|| panic!("{} not in mountinfo", dir.display()))
            .to_string();
        line.split(' ')
            .skip(6)
            .take_while(|f| *f != "-")
            .filter(|f| f.starts_with("shared:"))
            .map(str::to_string)
            .collect()
    };
    let first_group = groups(&one);
    assert_eq!(first_group.len(), 1, "the first mount is shared");
    assert!(
        !groups(&two).contains(&first_group[0]),
        "the second mount joined the first's peer group"
    );
    run(Command::new("umount").arg(two.join("sub")));
    // A remount through the second mount point is the file system's, as
    // for a kernel file system (the daemon answers at the first's).
    run(ufskit()
        .args(["mount", "-o", "remount,ro"])
        .arg(&img)
        .arg(&two));
    let e = std::fs::write(one.join("x"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    run(ufskit()
        .args(["mount", "-o", "remount,rw"])
        .arg(&img)
        .arg(&two));
    std::fs::write(one.join("x"), b"x").unwrap();
    second.umount();
    m.umount();
    fsck_clean(&img);
}

/// statx's birth time (`stat` prints it as "Birth", `ls --time=birth`)
/// with `-o btime=on`: UFS2 keeps one per inode (`di_birthtime`), set at
/// creation and never changed by writes, `touch` or renames; the mount
/// gives it through FUSE_STATX on its io_uring transport. UFS1 inodes have
/// none, and a UFS1 mount says so (no STATX_BTIME), as ext2 does. By
/// default (`btime=off`) there is none, and a statx asks the daemon
/// nothing more than a stat does.
#[test]
fn birth_time_through_statx() {
    use std::io::Write;
    if !needs_fuse("birth_time_through_statx") {
        return;
    }
    let uring = uring_offered();
    {
        let (_t, img, mnt, m) = fresh_mount("64m", &[]);
        std::fs::write(mnt.join("f"), b"no birth time asked for").unwrap();
        let e = std::fs::metadata(mnt.join("f"))
            .unwrap()
            .created()
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
        m.umount();
        fsck_clean(&img);
    }
    let (t, img, mnt, m) = fresh_mount("64m", &["btime=on"]);
    let before = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    std::fs::write(mnt.join("f"), b"born").unwrap();
    let after = std::time::SystemTime::now() + std::time::Duration::from_secs(1);
    match std::fs::metadata(mnt.join("f")).unwrap().created() {
        Ok(born) => {
            assert!(before <= born && born <= after, "{born:?} not at creation");
            std::thread::sleep(std::time::Duration::from_millis(50));
            run(Command::new("touch")
                .args(["-d", "2001-01-01"])
                .arg(mnt.join("f")));
            std::fs::OpenOptions::new()
                .append(true)
                .open(mnt.join("f"))
                .unwrap()
                .write_all(b" again")
                .unwrap();
            std::fs::rename(mnt.join("f"), mnt.join("g")).unwrap();
            drop_caches();
            let md = std::fs::metadata(mnt.join("g")).unwrap();
            assert_eq!(md.created().unwrap(), born, "birth time changed");
            assert!(md.modified().unwrap() > born);
        }
        Err(e) => assert!(!uring, "no birth time on the io_uring transport: {e}"),
    }
    m.umount();
    fsck_clean(&img);

    let old = t.path().join("ufs1");
    run(ufskit().args(["newfs", "-O", "1", "-s", "32m"]).arg(&old));
    let mnt1 = t.path().join("m1");
    let m1 = Mounted::new(&old, &mnt1, &["btime=on"]);
    std::fs::write(mnt1.join("f"), b"no birth").unwrap();
    let e = std::fs::metadata(mnt1.join("f"))
        .unwrap()
        .created()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
    m1.umount();
    fsck_clean(&old);
}

/// `copy_file_range(2)` between two files of the mount is done by the
/// daemon (FUSE_COPY_FILE_RANGE): the data is read and written inside it,
/// with no READ or WRITE request for it; the copy equals the source, a
/// copy onto the middle of an existing file changes only that range, and
/// zeros past the destination's end stay a hole (xfstests generic/430-434
/// exercise the call).
#[test]
fn copy_file_range_is_done_by_the_daemon() {
    use std::os::unix::fs::MetadataExt;
    if !needs_fuse("copy_file_range_is_done_by_the_daemon") {
        return;
    }
    let (_t, img, mnt, m) = fresh_mount("128m", &[]);
    let requests = |op: &str| {
        let out = run(ufskit().args(["stats", "--json"]).arg(&mnt));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["fuse_requests"]["by_op"][op].as_u64().unwrap_or(0)
    };
    // 6 MiB of data, then 10 MiB of hole.
    let data: Vec<u8> = (0..6u32 << 20)
        .map(|i| ((i * 2_654_435_761u32) >> 24) as u8)
        .collect();
    std::fs::write(mnt.join("src"), &data).unwrap();
    std::fs::File::options()
        .write(true)
        .open(mnt.join("src"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    drop_caches();
    let (reads, writes, copies) = (
        requests("read"),
        requests("write"),
        requests("copy_file_range"),
    );
    let src = std::fs::File::open(mnt.join("src")).unwrap();
    let dst = std::fs::File::create(mnt.join("dst")).unwrap();
    let mut copied = 0usize;
    loop {
        let n = nix::fcntl::copy_file_range(&src, None, &dst, None, 64 << 20).unwrap();
        if n == 0 {
            break;
        }
        copied += n;
    }
    assert_eq!(copied, 16 << 20);
    assert!(
        requests("copy_file_range") > copies,
        "no COPY_FILE_RANGE request"
    );
    assert_eq!(requests("read"), reads, "data went through READ");
    assert_eq!(requests("write"), writes, "data went through WRITE");
    drop(dst);
    drop_caches();
    let got = std::fs::read(mnt.join("dst")).unwrap();
    assert_eq!(got.len(), 16 << 20);
    assert!(got[..6 << 20] == data[..], "copied data differs");
    assert!(got[6 << 20..].iter().all(|&b| b == 0));
    let md = std::fs::metadata(mnt.join("dst")).unwrap();
    assert!(
        md.blocks() * 512 < 8 << 20,
        "the hole was filled: {} bytes",
        md.blocks() * 512
    );

    // Onto the middle of an existing file: only that range changes.
    std::fs::write(mnt.join("mid"), vec![0xeeu8; 3 << 20]).unwrap();
    let mid = std::fs::File::options()
        .write(true)
        .open(mnt.join("mid"))
        .unwrap();
    let (mut off_in, mut off_out) = (100i64, (1 << 20) as i64);
    let n = nix::fcntl::copy_file_range(&src, Some(&mut off_in), &mid, Some(&mut off_out), 4096)
        .unwrap();
    assert_eq!(n, 4096);
    drop(mid);
    let got = std::fs::read(mnt.join("mid")).unwrap();
    assert_eq!(got.len(), 3 << 20);
    assert!(got[..1 << 20].iter().all(|&b| b == 0xee));
    assert!(got[1 << 20..(1 << 20) + 4096] == data[100..4196]);
    assert!(got[(1 << 20) + 4096..].iter().all(|&b| b == 0xee));
    drop(src);
    m.umount();
    fsck_clean(&img);
}

/// An NFS export of the mount, served by NFS-Ganesha's VFS back end (a
/// user-space NFS server that, like the kernel's nfsd, keeps every object
/// as a file handle from `name_to_handle_at` and reopens it with
/// `open_by_handle_at`) and read and written over loopback NFSv4 by
/// libnfs's client: it survives a server-side cache drop and a read-only
/// and read-write remount of the ufskit mount. (This machine's kernel has
/// neither nfsd nor the NFS client, so the kernel server cannot be used.)
#[test]
fn nfs_export_survives_a_cache_drop_and_a_remount() {
    if !needs_fuse("nfs_export_survives_a_cache_drop_and_a_remount") {
        return;
    }
    let have = |p: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !prerequisite(
        have("ganesha.nfsd") && have("nfs-cat") && have("nfs-cp"),
        "nfs_export_survives_a_cache_drop_and_a_remount",
        "NFS-Ganesha and libnfs's tools (apt-get install nfs-ganesha nfs-ganesha-vfs libnfs-utils)",
    ) {
        return;
    }
    let (t, img, mnt, m) = fresh_mount("64m", &[]);
    std::fs::create_dir(mnt.join("d")).unwrap();
    std::fs::write(mnt.join("d/f"), b"exported").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = t.path().join("ganesha.conf");
    std::fs::write(
        &conf,
        format!(
            "NFS_CORE_PARAM {{ Protocols = 4; NFS_Port = {port}; Enable_NLM = false; Enable_RQUOTA = false; }}\n\
             NFSV4 {{ Graceless = true; }}\n\
             EXPORT {{ Export_Id = 1; Path = {}; Pseudo = /ufs; Access_Type = RW; Squash = No_Root_Squash;\n\
             Protocols = 4; Transports = TCP; SecType = sys; FSAL {{ Name = VFS; }} Filesystem_id = 77.77; }}\n",
            mnt.display()
        ),
    )
    .unwrap();
    let pid = t.path().join("ganesha.pid");
    let log = t.path().join("ganesha.log");
    run(Command::new("ganesha.nfsd")
        .arg("-f")
        .arg(&conf)
        .arg("-L")
        .arg(&log)
        .arg("-p")
        .arg(&pid));
    struct Server(std::path::PathBuf);
    impl Drop for Server {
        fn drop(&mut self) {
            if let Ok(p) = std::fs::read_to_string(&self.0) {
                let _ = Command::new("kill").arg(p.trim()).status();
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        }
    }
    let server = Server(pid.clone());
    let url = |p: &str| format!("nfs://127.0.0.1/ufs/{p}?version=4&nfsport={port}");
    let cat = |p: &str| Command::new("nfs-cat").arg(url(p)).output().unwrap();
    // The server takes a moment to answer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !cat("d/f").status.success() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let o = cat("d/f");
    assert_eq!(
        o.stdout,
        b"exported",
        "{o:?}; server log: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let local = t.path().join("local");
    std::fs::write(&local, b"written over NFS").unwrap();
    // Read-only and back while exported (the server holds no file open
    // for writing yet: like nfsd's file cache, Ganesha keeps written files
    // open, and Linux refuses a read-only remount while one is).
    run(ufskit()
        .args(["mount", "-o", "remount,ro"])
        .arg(&img)
        .arg(&mnt));
    assert_eq!(cat("d/f").stdout, b"exported");
    let refused = Command::new("nfs-cp")
        .arg(&local)
        .arg(url("d/g"))
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "a write through a read-only mount: {refused:?}"
    );
    run(ufskit()
        .args(["mount", "-o", "remount,rw"])
        .arg(&img)
        .arg(&mnt));
    run(Command::new("nfs-cp").arg(&local).arg(url("d/g")));
    assert_eq!(std::fs::read(mnt.join("d/g")).unwrap(), b"written over NFS");
    // The server's objects are handles: after the kernel dropped every
    // cached inode and dentry of the mount, and after another remount,
    // they still open.
    drop_caches();
    assert_eq!(cat("d/g").stdout, b"written over NFS");
    assert_eq!(cat("d/f").stdout, b"exported");
    run(ufskit()
        .args(["mount", "-o", "remount,noatime"])
        .arg(&img)
        .arg(&mnt));
    drop_caches();
    std::fs::write(&local, b"again").unwrap();
    run(Command::new("nfs-cp").arg(&local).arg(url("d/h")));
    assert_eq!(std::fs::read(mnt.join("d/h")).unwrap(), b"again");
    assert_eq!(cat("d/g").stdout, b"written over NFS");
    drop(server);
    m.umount();
    fsck_clean(&img);
}
