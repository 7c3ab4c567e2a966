//! The control channel of a running mount: a Unix socket the daemon
//! listens on, through which `ufskit stats DIR` reads the engine's
//! counters and asks for a dirhash low-memory event. (Extended attributes
//! would have been the obvious carrier, but a FUSE server that answers
//! `getxattr` is asked for `security.capability` at every chown and at
//! writes through the page cache.)
//!
//! Invariants: one request per connection, one JSON line each way; the
//! socket lives at a path computed from the mount point alone (so a client
//! finds it from any directory inside the mount), in a directory only the
//! daemon's user can write; the socket is removed when the mount ends.
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// Counters, and the index of the directory at `path` (relative to
    /// the mount's root), checked against its blocks if `verify`.
    Stats { path: PathBuf, verify: bool },
    /// A dirhash low-memory event, as memory pressure would deliver.
    Lowmem,
    /// Write everything dirty, then drop every clean cached block and every
    /// index (what SIGUSR1 does), answering once done: cold-cache
    /// benchmarks wait for it, where a signal returns at once.
    #[serde(rename = "drop_caches")]
    DropCaches,
    /// `mount -o remount`: the engine goes read-only (everything written,
    /// marked clean) or read-write, and takes the access-time rule
    /// (`relatime`, `strict`, `never`). The kernel's side of the mount is
    /// changed by the caller.
    Remount { read_only: bool, atime: String },
}

fn runtime_dir(uid: u32) -> PathBuf {
    if uid == 0 {
        return PathBuf::from("/run/ufskit");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("ufskit"),
        _ => std::env::temp_dir().join(format!("ufskit-{uid}")),
    }
}

fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Where the daemon of user `uid` serving `mountpoint` listens.
pub fn socket_path(uid: u32, mountpoint: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    runtime_dir(uid).join(format!(
        "{:016x}.sock",
        fnv64(mountpoint.as_os_str().as_bytes())
    ))
}

/// The listening side, run by the daemon.
pub struct Control {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A bound control socket, not yet served: bound while the daemon still
/// has the rights to make it (confine.rs), served once it has none.
pub struct Listener {
    path: PathBuf,
    listener: UnixListener,
}

impl Listener {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Control {
    /// Makes the socket of the daemon serving `mountpoint`.
    pub fn bind(mountpoint: &Path) -> Result<Listener, String> {
        let uid = nix::unistd::geteuid().as_raw();
        let path = socket_path(uid, mountpoint);
        let dir = path.parent().expect("socket has a directory");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .map_err(|e| format!("control socket {}: {e}", path.display()))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(Listener { path, listener })
    }

    /// Serves requests on `listener` in a thread of its own.
    pub fn start(
        listener: Listener,
        fs: Arc<ufs::Fs>,
        requests: Arc<crate::requests::Requests>,
        disk_model: Option<String>,
    ) -> Result<Control, String> {
        let Listener { path, listener } = listener;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ufs-control".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Err(e) = serve_one(&fs, &requests, disk_model.as_deref(), stream)
                            {
                                crate::service::log(format_args!("control: {e}"));
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(e) => {
                            crate::service::log(format_args!("control socket: {e}"));
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Control {
            path,
            stop,
            thread: Some(thread),
        })
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(
    fs: &ufs::Fs,
    requests: &crate::requests::Requests,
    disk_model: Option<&str>,
    stream: UnixStream,
) -> Result<(), String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let reply = match serde_json::from_str::<Request>(&line) {
        Err(e) => serde_json::json!({ "error": format!("bad request: {e}") }),
        Ok(Request::Lowmem) => {
            serde_json::json!({ "freed_bytes": fs.dirhash_lowmem(), "stats": fs.stats(None, false).ok() })
        }
        Ok(Request::DropCaches) => match fs.drop_caches() {
            Ok(()) => serde_json::json!({ "dropped": true, "stats": fs.stats(None, false).ok() }),
            Err(e) => serde_json::json!({ "error": format!("dropping caches: {e}") }),
        },
        Ok(Request::Remount { read_only, atime }) => {
            let atime = match atime.as_str() {
                "strict" => ufs::Atime::Strict,
                "never" => ufs::Atime::Never,
                _ => ufs::Atime::Relatime,
            };
            match fs.remount(read_only, atime) {
                Ok(()) => serde_json::json!({ "read_only": fs.is_read_only() }),
                Err(e) => serde_json::json!({ "error": e.to_string() }),
            }
        }
        Ok(Request::Stats { path, verify }) => match fs
            .resolve(&path)
            .and_then(|ino| fs.stats(Some(ino), verify))
        {
            Ok(s) => {
                let mut v = serde_json::to_value(s).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert(
                        "fuse_requests".into(),
                        serde_json::to_value(requests.snapshot()).unwrap_or_default(),
                    );
                    // The modeled disk under the mount, if any (its
                    // figures are the engine's `disk`).
                    o.insert("disk_model".into(), serde_json::json!(disk_model));
                }
                v
            }
            Err(e) => serde_json::json!({ "error": format!("{}: {e}", path.display()) }),
        },
    };
    let mut out = serde_json::to_vec(&reply).map_err(|e| e.to_string())?;
    out.push(b'\n');
    (&stream).write_all(&out).map_err(|e| e.to_string())
}

/// The mount point of the file system holding `dir`: its highest ancestor
/// on the same device.
fn mount_root(dir: &Path) -> Result<PathBuf, String> {
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dev = std::fs::metadata(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .dev();
    let mut root = dir.clone();
    while let Some(p) = root.parent() {
        match std::fs::metadata(p) {
            Ok(m) if m.dev() == dev => root = p.to_path_buf(),
            _ => break,
        }
    }
    Ok(root)
}

/// Sends `req` about `dir` to the daemon serving the mount that holds it;
/// returns the daemon's JSON answer.
pub fn query(dir: &Path, req: &Request) -> Result<serde_json::Value, String> {
    let root = mount_root(dir)?;
    let me = nix::unistd::geteuid().as_raw();
    let candidates = [socket_path(me, &root), socket_path(0, &root)];
    let Some(sock) = candidates.iter().find(|p| p.exists()) else {
        return Err(format!(
            "{} is not on a ufskit mount (no control socket for {})",
            dir.display(),
            root.display()
        ));
    };
    // A cache drop first writes everything dirty, which on a modeled,
    // sleeping disk or under a large cache can take minutes.
    let wait = match req {
        Request::DropCaches | Request::Remount { .. } => Duration::from_secs(900),
        _ => Duration::from_secs(30),
    };
    let mut req = serde_json::to_value(req).map_err(|e| e.to_string())?;
    if let Some(p) = req.get_mut("path") {
        let abs = std::fs::canonicalize(dir).map_err(|e| e.to_string())?;
        let rel = abs
            .strip_prefix(&root)
            .unwrap_or(Path::new(""))
            .to_path_buf();
        *p = serde_json::Value::String(rel.to_string_lossy().into_owned());
    }
    let mut stream = UnixStream::connect(sock).map_err(|e| format!("{}: {e}", sock.display()))?;
    stream
        .set_read_timeout(Some(wait))
        .map_err(|e| e.to_string())?;
    let mut line = serde_json::to_vec(&req).map_err(|e| e.to_string())?;
    line.push(b'\n');
    stream.write_all(&line).map_err(|e| e.to_string())?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(|e| e.to_string())?;
    let v: serde_json::Value =
        serde_json::from_str(&answer).map_err(|e| format!("bad answer from the daemon: {e}"))?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(e.to_string());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_depend_on_mount_point_and_user() {
        let a = socket_path(0, Path::new("/mnt/a"));
        assert!(a.starts_with("/run/ufskit"));
        assert_ne!(a, socket_path(0, Path::new("/mnt/b")));
        assert_ne!(a, socket_path(1000, Path::new("/mnt/a")));
    }

    #[test]
    fn requests_round_trip() {
        let r: Request =
            serde_json::from_str(r#"{"op":"stats","path":"a/b","verify":true}"#).unwrap();
        assert!(matches!(r, Request::Stats { verify: true, .. }));
        let r: Request = serde_json::from_str(r#"{"op":"lowmem"}"#).unwrap();
        assert!(matches!(r, Request::Lowmem));
        let r: Request = serde_json::from_str(r#"{"op":"drop_caches"}"#).unwrap();
        assert!(matches!(r, Request::DropCaches));
    }
}
