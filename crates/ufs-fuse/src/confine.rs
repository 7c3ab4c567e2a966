//! The daemon after mount: what a hostile image can reach if a parser bug
//! hands it the daemon's own rights.
//!
//! The daemon parses untrusted bytes (superblocks, cylinder groups,
//! inodes, directories, extended attributes) for the life of the mount.
//! Root is needed only to set the mount up. So once the mount answers:
//! - **Identity** ([`drop_identity`]): the daemon becomes an ordinary user
//!   (`-o daemon_user=`, `nobody` by default for a root mount): real,
//!   effective and saved ids, supplementary groups, and with them every
//!   capability. glibc applies set*id(2) to every thread of the process.
//!   RLIMIT_NICE is raised first to the nice value the daemon runs at, so
//!   `share=auto` can still take ring threads out of the idle class
//!   (sched(7)); the CPU latency device and the control socket are opened
//!   before, and keep working through their descriptors.
//! - **Landlock** ([`landlock`]): no file system access but reading
//!   `/proc` and `/sys`, `/dev/fuse` (fuser's threads attach to the
//!   connection through it), writing `/dev/null` and the kernel's readahead
//!   knob of this mount (`/sys/devices/virtual/bdi`); no TCP; no abstract
//!   Unix sockets made outside. Applied on the thread that starts the
//!   serving threads before it starts them (they inherit it), and on
//!   every thread where the kernel can (Landlock ABI 8, TSYNC).
//! - **seccomp** ([`seccomp`]): on every thread (TSYNC), an allow-list
//!   of the calls the serving daemon makes ([`ALLOWED`]); anything else
//!   (exec, ptrace, mount, namespaces, modules, BPF, keys, new io_uring
//!   instances, sockets other than Unix ones...) fails with EPERM; clone3
//!   fails with ENOSYS so threads are made with clone(2), whose namespace
//!   flags the filter can see and refuses.
//! - **Unmounting** ([`UnmountHelper`]): a daemon without root (and under
//!   Landlock, which refuses umount(2)) cannot unmount itself on SIGTERM.
//!   A helper started before confinement, this binary again under
//!   [`HELPER_ARG`], keeps the rights the mount was made with and does one
//!   thing on request: unmount this mount point (umount2(2) as root,
//!   `fusermount3 -u` otherwise). At end of input (the daemon is gone) it
//!   removes the control socket the daemon can no longer unlink, if it is
//!   still the one the daemon made, and exits. It ignores SIGINT, SIGTERM
//!   and SIGHUP (a terminal's ^C reaches the whole process group).
//!
//! Invariants:
//! - Confinement fails closed: if a step cannot be taken the mount is
//!   unmounted and `serve` returns the error (`daemon_user=root,sandbox=off`
//!   asks for none).
//! - After [`drop_identity`] every thread of the process has the target
//!   ids and empty capability sets (checked in `/proc/self/task/*/status`).
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::service::log;

/// The first argument that makes this binary the unmount helper.
pub const HELPER_ARG: &str = "--ufskit-unmount-helper";

/// The user the daemon runs as once mounted (`-o daemon_user=`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DaemonUser {
    /// `nobody` when started as root; otherwise the user who mounted.
    #[default]
    Auto,
    /// Keep the starting identity (`daemon_user=root` for a root mount).
    Keep,
    /// A user name, or a number (uid; the gid of that user, else the same
    /// number).
    Named(String),
}

/// Ids to switch to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

impl DaemonUser {
    /// Parses `daemon_user=`'s value.
    pub fn parse(v: &str) -> Result<DaemonUser, String> {
        match v {
            "" => Err("option daemon_user takes a user name or number, or root".into()),
            "auto" => Ok(DaemonUser::Auto),
            "root" | "0" => Ok(DaemonUser::Keep),
            v => Ok(DaemonUser::Named(v.to_string())),
        }
    }

    /// The ids to switch to, or None to keep the current ones. Resolved
    /// before anything is mounted, so a wrong name is an error at once.
    pub fn resolve(&self) -> Result<Option<Ids>, String> {
        use nix::unistd::{geteuid, User};
        let root = geteuid().is_root();
        let name = match self {
            DaemonUser::Keep => return Ok(None),
            DaemonUser::Auto if !root => return Ok(None),
            DaemonUser::Auto => "nobody",
            DaemonUser::Named(n) => n.as_str(),
        };
        let ids = match User::from_name(name) {
            Ok(Some(u)) => Ids {
                uid: u.uid.as_raw(),
                gid: u.gid.as_raw(),
            },
            _ => match name.parse::<u32>() {
                Ok(uid) => match User::from_uid(nix::unistd::Uid::from_raw(uid)) {
                    Ok(Some(u)) => Ids {
                        uid,
                        gid: u.gid.as_raw(),
                    },
                    _ => Ids { uid, gid: uid },
                },
                // Debian's and FreeBSD's nobody is 65534.
                Err(_) if matches!(self, DaemonUser::Auto) => Ids {
                    uid: 65534,
                    gid: 65534,
                },
                Err(_) => return Err(format!("daemon_user={name}: no such user")),
            },
        };
        if ids.uid == geteuid().as_raw() {
            return Ok(None);
        }
        if !root {
            return Err(format!(
                "daemon_user={name}: switching the daemon's user needs root"
            ));
        }
        if ids.uid == 0 {
            return Ok(None);
        }
        Ok(Some(ids))
    }
}

/// Lets the process keep, without root, the right to run at its nice
/// value and to take threads out of the idle scheduling class (sched(7):
/// RLIMIT_NICE n allows nice values down to 20 - n). Raising the hard
/// limit needs CAP_SYS_RESOURCE; without it the soft limit goes as far as
/// the hard one allows. Whether the limit now covers the nice value.
pub fn keep_nice() -> bool {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let nice = rustix::process::getpriority_process(None).unwrap_or(0);
    let need = u64::try_from(20 - i64::from(nice)).unwrap_or(40);
    let have = getrlimit(Resource::Nice);
    if have.current.is_none_or(|c| c >= need) {
        return true;
    }
    let want = Rlimit {
        current: Some(need),
        maximum: Some(need.max(have.maximum.unwrap_or(u64::MAX))),
    };
    if setrlimit(Resource::Nice, want).is_ok() {
        return true;
    }
    let hard = have.maximum;
    let _ = setrlimit(
        Resource::Nice,
        Rlimit {
            current: hard,
            maximum: hard,
        },
    );
    hard.is_none_or(|h| h >= need)
}

/// Switches every thread to `ids`, giving up root and every capability.
pub fn drop_identity(ids: Ids) -> Result<(), String> {
    use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};
    let gid = Gid::from_raw(ids.gid);
    let uid = Uid::from_raw(ids.uid);
    setgroups(&[gid]).map_err(|e| format!("setgroups({}): {e}", ids.gid))?;
    setresgid(gid, gid, gid).map_err(|e| format!("setresgid({}): {e}", ids.gid))?;
    setresuid(uid, uid, uid).map_err(|e| format!("setresuid({}): {e}", ids.uid))?;
    check_every_thread(ids)
}

/// Every thread of this process has `ids` and no capabilities.
fn check_every_thread(ids: Ids) -> Result<(), String> {
    let tasks =
        std::fs::read_dir("/proc/self/task").map_err(|e| format!("/proc/self/task: {e}"))?;
    for t in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue; // the thread ended
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or("")
                .to_string()
        };
        let uids: Vec<String> = field("Uid:").split_whitespace().map(String::from).collect();
        let want = ids.uid.to_string();
        if uids.is_empty() || uids.iter().any(|u| *u != want) {
            return Err(format!(
                "thread {} still has uids {uids:?}",
                t.file_name().to_string_lossy()
            ));
        }
        for cap in ["CapEff:", "CapPrm:"] {
            if u64::from_str_radix(&field(cap), 16) != Ok(0) {
                return Err(format!(
                    "thread {} kept capabilities ({cap} {})",
                    t.file_name().to_string_lossy(),
                    field(cap)
                ));
            }
        }
    }
    Ok(())
}

/// What [`landlock`] could enforce on this kernel.
pub fn landlock() -> Result<String, String> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, RestrictSelfAttr, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    let abi = ABI::V7;
    let err = |e: landlock::RulesetError| format!("Landlock: {e}");
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(err)?
        .scope(Scope::AbstractUnixSocket)
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(&["/proc", "/sys"]),
            AccessFs::from_read(abi),
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(&["/sys/devices/virtual/bdi"]),
            AccessFs::WriteFile | AccessFs::Truncate,
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(&["/dev/null"]),
            AccessFs::WriteFile | AccessFs::ReadFile | AccessFs::Truncate,
        ))
        .map_err(err)?
        // The FUSE threads fuser starts open the device again and attach
        // to this connection (FUSE_DEV_IOC_CLONE).
        .add_rules(path_beneath_rules(
            existing(&["/dev/fuse"]),
            AccessFs::WriteFile | AccessFs::ReadFile | AccessFs::IoctlDev,
        ))
        .map_err(err)?
        .all_threads(true)
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced if status.all_threads => "Landlock on every thread".into(),
        RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => {
            let part = if status.ruleset == RulesetStatus::FullyEnforced {
                ""
            } else {
                " (partly: an older Landlock ABI)"
            };
            if status.all_threads {
                format!("Landlock on every thread{part}")
            } else {
                format!("Landlock on the serving threads{part}")
            }
        }
        _ => "no Landlock (the kernel has none)".into(),
    })
}

/// The paths of `paths` that exist here (a container may lack /sys).
fn existing<'a>(paths: &[&'a str]) -> Vec<&'a str> {
    paths
        .iter()
        .copied()
        .filter(|p| Path::new(p).exists())
        .collect()
}

/// The calls the daemon makes once confined: everything else fails with
/// EPERM. Found by running the test suites, pjdfstest and the benchmarks
/// with `UFSKIT_SECCOMP_AUDIT=1`, which logs (to the kernel log, audit
/// type 1326) every call outside the list instead of refusing it.
const ALLOWED: &[libc::c_long] = &[
    // File data and descriptors already open (the image, the write log,
    // /dev/fuse, the control socket) and reads of /proc and /sys.
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_lseek,
    libc::SYS_close,
    libc::SYS_openat,
    libc::SYS_statx,
    libc::SYS_newfstatat,
    libc::SYS_fstat,
    libc::SYS_fstatfs,
    libc::SYS_getdents64,
    libc::SYS_fcntl,
    libc::SYS_flock,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_sync_file_range,
    libc::SYS_fallocate,
    libc::SYS_fadvise64,
    libc::SYS_ftruncate,
    libc::SYS_ioctl,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_pipe2,
    libc::SYS_readlinkat,
    libc::SYS_unlinkat,
    libc::SYS_unlink,
    // The FUSE rings.
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // Threads, time, scheduling, memory.
    libc::SYS_futex,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_clock_gettime,
    libc::SYS_gettimeofday,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_getparam,
    libc::SYS_setpriority,
    libc::SYS_getpriority,
    libc::SYS_prlimit64,
    libc::SYS_getrlimit,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_mremap,
    libc::SYS_brk,
    libc::SYS_membarrier,
    libc::SYS_rseq,
    libc::SYS_set_robust_list,
    libc::SYS_sigaltstack,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_restart_syscall,
    libc::SYS_tgkill,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getrandom,
    libc::SYS_uname,
    libc::SYS_prctl,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_wait4,
    // clone3 passes (the second filter answers ENOSYS); clone is allowed
    // below without namespace flags.
    libc::SYS_clone3,
    // `ufskit stats` on the control socket.
    libc::SYS_accept4,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_recvmsg,
    libc::SYS_sendmsg,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_shutdown,
];

/// Installs the seccomp filters on every thread: [`ALLOWED`] and a few
/// calls with checked arguments pass, every other call fails with EPERM
/// (or, with `UFSKIT_SECCOMP_AUDIT=1` in the environment, is logged and
/// passes, for finding what the list lacks).
pub fn seccomp() -> Result<(), String> {
    use seccompiler::{
        apply_filter_all_threads, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp,
        SeccompCondition, SeccompFilter, SeccompRule,
    };
    use std::collections::BTreeMap;
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: {e}"))?;
    let e = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        ALLOWED.iter().map(|&n| (n, Vec::new())).collect();
    // Sockets: Unix ones only.
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_UNIX as u64,
        )
        .map_err(e)?])
        .map_err(e)?],
    );
    // clone(2) without any namespace flag (threads never ask for one).
    let namespaces = (libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP) as u64;
    rules.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(namespaces),
            0,
        )
        .map_err(e)?])
        .map_err(e)?],
    );
    let audit = std::env::var_os("UFSKIT_SECCOMP_AUDIT").is_some_and(|v| v == "1");
    let allow = SeccompFilter::new(
        rules,
        if audit {
            SeccompAction::Log
        } else {
            SeccompAction::Errno(libc::EPERM as u32)
        },
        SeccompAction::Allow,
        arch,
    )
    .map_err(e)?;
    // clone3's flags are in memory the filter cannot read: ENOSYS makes
    // glibc fall back to clone(2).
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(e)?;
    // clone3's filter first: once the allow-list is on, seccomp(2) itself
    // is refused.
    for f in [clone3, allow] {
        let prog: BpfProgram = f.try_into().map_err(e)?;
        apply_filter_all_threads(&prog).map_err(|e| format!("seccomp: {e}"))?;
    }
    Ok(())
}

/// The privileged side that unmounts on the daemon's behalf.
pub struct UnmountHelper {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl UnmountHelper {
    /// Starts the helper for `mountpoint`; `socket` is the control
    /// socket it removes at the end.
    pub fn spawn(mountpoint: &Path, socket: Option<&Path>) -> Result<UnmountHelper, String> {
        let exe = std::env::current_exe().map_err(|e| format!("unmount helper: {e}"))?;
        let mut child = Command::new(exe)
            .arg(HELPER_ARG)
            .arg(mountpoint)
            .arg(socket.map(|p| p.as_os_str().to_owned()).unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("unmount helper: {e}"))?;
        let input = child.stdin.take();
        let output = BufReader::new(child.stdout.take().ok_or("unmount helper: no stdout")?);
        let mut h = UnmountHelper {
            child,
            input,
            output,
        };
        // A binary whose main does not run the helper says something else.
        match h.read_reply()? {
            r if r == "ready" => Ok(h),
            r => Err(format!("unmount helper did not start ({r:?})")),
        }
    }

    fn read_reply(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.output.read_line(&mut line) {
            Ok(0) => Err("the unmount helper is gone".into()),
            Ok(_) => Ok(line.trim_end().to_string()),
            Err(e) => Err(format!("unmount helper: {e}")),
        }
    }

    /// Unmounts the mount point; with `lazy_if_busy` a busy one is
    /// detached.
    pub fn unmount(&mut self, lazy_if_busy: bool) -> Result<(), String> {
        let input = self.input.as_mut().ok_or("unmount helper closed")?;
        writeln!(input, "unmount {}", u8::from(lazy_if_busy))
            .and_then(|_| input.flush())
            .map_err(|e| format!("unmount helper: {e}"))?;
        let r = self.read_reply()?;
        match r.strip_prefix("error ") {
            None if r == "ok" => Ok(()),
            Some(msg) => Err(msg.to_string()),
            None => Err(format!("unmount helper: {r:?}")),
        }
    }
}

impl Drop for UnmountHelper {
    fn drop(&mut self) {
        drop(self.input.take());
        let _ = self.child.wait();
    }
}

/// Runs the unmount helper and exits, when this process was started as
/// one (`HELPER_ARG MOUNTPOINT SOCKET`); returns otherwise. Every `main`
/// that may serve a mount calls it first.
pub fn helper_main_if_asked() {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).map(|a| a.as_os_str()) != Some(HELPER_ARG.as_ref()) {
        return;
    }
    let (Some(mp), Some(sock)) = (args.get(2), args.get(3)) else {
        std::process::exit(2);
    };
    let mp = PathBuf::from(mp);
    let sock = (!sock.is_empty()).then(|| PathBuf::from(sock));
    // Signals to the process group are the daemon's to act on.
    let mut set = nix::sys::signal::SigSet::empty();
    for s in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGUSR1,
    ] {
        set.add(s);
    }
    let _ = set.thread_block();
    let socket_id = sock
        .as_ref()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .map(|m| (m.dev(), m.ino()));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready").and_then(|_| out.flush());
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match line.as_str() {
            "unmount 0" | "unmount 1" => match crate::unmount_path(&mp, line.ends_with('1')) {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("error {}", e.replace('\n', " ")),
            },
            other => format!("error unknown request {other:?}"),
        };
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    // The daemon has ended: its control socket goes, if still its own.
    if let (Some(p), Some(id)) = (sock, socket_id) {
        if std::fs::symlink_metadata(&p).is_ok_and(|m| (m.dev(), m.ino()) == id) {
            if let Err(e) = std::fs::remove_file(&p) {
                log(format_args!("{}: {e}", p.display()));
            }
        }
    }
    std::process::exit(0);
}

/// Unmounts `mountpoint` through the helper when the daemon has one (it
/// is confined), else itself.
pub(crate) fn unmount(
    helper: &std::sync::Mutex<Option<UnmountHelper>>,
    mountpoint: &Path,
    lazy_if_busy: bool,
) -> Result<(), String> {
    match helper.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        Some(h) => h.unmount(lazy_if_busy),
        None => crate::unmount_path(mountpoint, lazy_if_busy),
    }
}
