//! What the binary's end-to-end tests share: running `ufskit`, new
//! images, mounts that go away with the test, fsck.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn ufskit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ufskit"))
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({:?}):\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh UFS2 image `dir/name` of `size` made by `ufskit newfs`.
pub fn new_image(dir: &Path, name: &str, size: &str) -> PathBuf {
    let img = dir.join(name);
    run(ufskit().args(["newfs", "-s", size]).arg(&img));
    img
}

/// A mounted image that unmounts itself if the test fails.
pub struct Mounted {
    pub dir: PathBuf,
    pub live: bool,
}

impl Mounted {
    pub fn new(img: &Path, dir: &Path, opts: &[&str]) -> Mounted {
        std::fs::create_dir_all(dir).unwrap();
        let mut c = ufskit();
        c.arg("mount");
        for o in opts {
            c.arg("-o").arg(o);
        }
        run(c.arg(img).arg(dir));
        Mounted {
            dir: dir.to_path_buf(),
            live: true,
        }
    }
    pub fn umount(mut self) {
        run(ufskit().arg("umount").arg(&self.dir));
        self.live = false;
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.live {
            // A test that failed may still hold files open in the mount:
            // detach it so that no daemon outlives the test run.
            let clean = ufskit().arg("umount").arg(&self.dir).output();
            if !clean.is_ok_and(|o| o.status.success()) {
                let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
            }
        }
    }
}

/// `ufskit mount -o OPTS IMG MNT` fails and its message says `says`.
pub fn mount_refused(img: &Path, mnt: &Path, opts: &str, says: &str) {
    let out = ufskit()
        .args(["mount", "-o", opts])
        .arg(img)
        .arg(mnt)
        .output()
        .unwrap();
    assert!(!out.status.success(), "mount -o {opts} succeeded");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(says),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn fsck_clean(img: &Path) {
    let out = ufskit().args(["fsck", "-n"]).arg(img).output().unwrap();
    assert!(
        out.status.success(),
        "fsck -n found problems:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new image of `size` in a new temporary directory (kept alive by the
/// first value), mounted at its `m` with `opts`: (dir, image, mount point,
/// the mount).
pub fn fresh_mount(size: &str, opts: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf, Mounted) {
    let t = tempfile::tempdir().unwrap();
    let img = new_image(t.path(), "img", size);
    let mnt = t.path().join("m");
    let m = Mounted::new(&img, &mnt, opts);
    (t, img, mnt, m)
}
