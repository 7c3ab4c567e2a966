//! Running the FUSE server: in the foreground, or as a background daemon
//! that tells its parent when the mount is live.
//!
//! Protocol: the parent starts `ufskit mount -f ...` in its own process
//! group with stdout and stderr piped, reads one line; `ready` means the
//! mount is live (the parent exits 0); anything else is an error message.
//! After `ready` the daemon points its stdout/stderr at /dev/null so it
//! never writes into a closed pipe.
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

const READY: &str = "ufskit-mount-ready";

pub fn serve_foreground(cfg: &ufs_fuse::MountConfig) -> Result<(), String> {
    let background = std::env::var_os("UFSKIT_DAEMON").is_some();
    ufs_fuse::serve(cfg, || {
        if background {
            println!("{READY}");
            detach_stdio();
        }
    })
}

pub fn spawn_background(options: &[String], cfg: &ufs_fuse::MountConfig) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount").arg("-f");
    for o in options {
        cmd.arg("-o").arg(o);
    }
    cmd.arg(&cfg.image).arg(&cfg.mountpoint);
    cmd.env("UFSKIT_DAEMON", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the mount daemon: {e}"))?;
    let stdout = child.stdout.take().ok_or("no daemon stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    if line.trim() == READY {
        return Ok(());
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = child.wait();
    let msg = err.trim().trim_start_matches("ufskit: ").to_string();
    Err(if msg.is_empty() {
        "mount daemon exited before the mount was live".into()
    } else {
        msg
    })
}

/// Points stdout and stderr at /dev/null.
#[allow(unsafe_code)]
fn detach_stdio() {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        // SAFETY: dup2 on valid descriptors has no memory-safety preconditions.
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(null.as_raw_fd(), 2);
        }
    }
}
