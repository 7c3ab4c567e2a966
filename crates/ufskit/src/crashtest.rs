//! `ufskit crashtest`: runs the crash tester of `ufs-bench` (workloads
//! under each write mode, every crash state checked with fsck and against
//! what fsync promised), shows a progress bar, prints the table, writes
//! JSON, and fails when a mode that promises consistency broke it.
//!
//! With `--mount` it runs `ufs_bench::mountcrash` instead: the real daemon
//! killed with SIGKILL under real programs, each image checked.
//!
//! Exit status: 0 when normal, sync and softdep kept every guarantee
//! (async is reported, never judged: it has no ordering by design); 2 when
//! one of them did not; 1 on a usage or operational error.
use std::path::PathBuf;
use std::process::ExitCode;
use ufs::order::WriteMode;
use ufs_bench::crashtest::{self, Config, Report, Workload};
use ufs_bench::mountcrash;

#[derive(clap::Args)]
pub struct CrashtestArgs {
    /// Write modes to test (comma-separated: normal, sync, async, softdep;
    /// default all four, or normal, sync and softdep with --mount).
    #[arg(long = "mode", value_delimiter = ',')]
    modes: Vec<String>,
    /// Workloads (comma-separated: create, mkdir, rename, unlink, truncate,
    /// maildir, bigdir, inodes, threads, xattr).
    #[arg(
        long = "workload",
        value_delimiter = ',',
        default_value = "create,mkdir,rename,unlink,truncate,maildir,bigdir,inodes,threads,xattr"
    )]
    workloads: Vec<String>,
    /// Prefix crash states per mode and workload (evenly spaced over the
    /// write log).
    #[arg(long, default_value_t = Config::default().max_prefix)]
    prefixes: usize,
    /// Reordered crash states per mode and workload (random subsets of
    /// the writes since the last flush).
    #[arg(long, default_value_t = Config::default().reorders)]
    reorders: usize,
    /// What the ordered writes wait for: flush (a device cache flush; the
    /// order holds across a power cut, checked with reordered states) or
    /// write (completion, FreeBSD's bwrite; the order holds for a killed
    /// daemon, checked with prefix states only). Default: each mode's own
    /// (flush with softdep, write in normal and sync).
    #[arg(long, value_parser = ["flush", "write"])]
    barrier: Option<String>,
    /// Seed for the workloads' data and the reorderings.
    #[arg(long, default_value_t = Config::default().seed)]
    seed: u64,
    /// The file system the workloads run on: ufs2 (the default), ufs1,
    /// ufs2-be, ufs1-be (UFS1 or UFS2, little- or big-endian).
    #[arg(long, default_value = "ufs2", value_parser = ["ufs2", "ufs1", "ufs2-be", "ufs1-be"])]
    format: String,
    /// Threads checking crash states (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write the JSON report to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the JSON report as DIR/crashtest.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Failing states kept (JSON) and printed per mode and workload
    /// (printed for normal, sync and softdep only).
    #[arg(long, default_value_t = Config::default().max_examples)]
    examples: usize,
    /// Save the image of every failing state printed (as the crash left
    /// it, before repair) in this directory, to inspect with `ufskit fsck
    /// -n` or `dumpfs` (with --mount, WORK/failed when not given).
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Kill the real mount daemon instead (root): `ufskit mount -f` under
    /// tar, cp, mv, rm, a maildir writer with fsyncs, stress-ng (and fsx
    /// and fsstress when installed), SIGKILL at a random moment, then the
    /// image checked, repaired, its fsynced mail verified, mounted again.
    #[arg(long)]
    mount: bool,
    /// --mount: kills per mode and image kind.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// --mount: images made with `newfs -U` (on), without (off), or both.
    #[arg(long, default_value = "both", value_parser = ["on", "off", "both"])]
    newfs_u: String,
    /// --mount: size of each image.
    #[arg(long, default_value = "2G")]
    size: String,
    /// --mount: the tree extracted into the mount (tarred once).
    #[arg(long, default_value = "/usr/include")]
    tree: PathBuf,
    /// --mount: the kill comes between MIN and MAX seconds after the load
    /// starts.
    #[arg(long, default_value = "2,6", value_name = "MIN,MAX")]
    kill_after: String,
    /// --mount: busy loops on every CPU and cache drops during the load
    /// (on), or a quiet machine (off).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    busy: String,
    /// --mount: what runs beside tar, cp, mv and rm, in turn from one kill
    /// to the next: bulk (nothing: the cache fills), mail (a maildir writer
    /// whose fsynced messages are checked, and stress-ng), stress
    /// (stress-ng, fsx, fsstress).
    #[arg(long, value_delimiter = ',', default_value = "bulk,mail,bulk,stress")]
    mix: Vec<String>,
    /// --mount: the ufskit binary whose newfs and mount daemon are tested
    /// (default: this one; another build compares versions).
    #[arg(long, value_name = "PATH")]
    daemon: Option<PathBuf>,
    /// --mount: scratch directory (image, mountpoint, daemon log).
    #[arg(long, default_value = "/tmp/ufskit-crashtest-mount")]
    work: PathBuf,
    /// With --mount: power cuts instead of kills. The daemon logs every
    /// device write and flush (`-o record=`) under tar -x, a maildir
    /// writer, a git-like object writer and a database-like file (all
    /// fsyncing), rm -rf; then the images a power cut could leave
    /// (--prefixes prefixes and --reorders reorderings per mode) are
    /// built, repaired with fsck -p and checked for every fsynced byte.
    /// --barrier write adds each mode with write barriers (promises less:
    /// preen failures counted, not failed).
    #[arg(long, requires = "mount")]
    powercut: bool,
    /// --powercut: fsynced messages, objects and page rewrites per mode.
    #[arg(long, default_value_t = 40)]
    fsyncs: usize,
}

fn parse_modes(a: &CrashtestArgs) -> Result<Vec<WriteMode>, String> {
    let given: Vec<String> = if a.modes.is_empty() {
        let d: &[&str] = if a.mount {
            &["normal", "sync", "softdep"]
        } else {
            &["normal", "sync", "async", "softdep"]
        };
        d.iter().map(|s| s.to_string()).collect()
    } else {
        a.modes.clone()
    };
    let mut modes = Vec::new();
    for m in &given {
        let m = WriteMode::parse(m.trim())
            .ok_or_else(|| format!("unknown mode '{m}' (normal, sync, async, softdep)"))?;
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    Ok(modes)
}

fn config(a: &CrashtestArgs) -> Result<Config, String> {
    let modes = parse_modes(a)?;
    let mut workloads = Vec::new();
    for w in &a.workloads {
        let w = Workload::parse(w.trim()).ok_or_else(|| {
            format!(
                "unknown workload '{w}' (create, mkdir, rename, unlink, truncate, maildir, bigdir, inodes, threads)"
            )
        })?;
        if !workloads.contains(&w) {
            workloads.push(w);
        }
    }
    if modes.is_empty() || workloads.is_empty() {
        return Err("nothing to run: give at least one mode and one workload".to_string());
    }
    if a.prefixes == 0 && a.reorders == 0 {
        return Err("nothing to check: --prefixes and --reorders are both 0".to_string());
    }
    Ok(Config {
        modes,
        workloads,
        max_prefix: a.prefixes,
        reorders: a.reorders,
        barrier: a.barrier.as_deref().and_then(ufs::order::Barrier::parse),
        seed: a.seed,
        threads: a.threads,
        max_examples: a.examples,
        keep: a.keep.clone(),
        variant: variant(a)?,
    })
}

fn variant(a: &CrashtestArgs) -> Result<ufs_format::Variant, String> {
    ufs_format::Variant::parse(&a.format).ok_or_else(|| format!("unknown --format {}", a.format))
}

fn print_table(rep: &Report) {
    println!("file system: {}", rep.config.variant);
    println!(
        "{:<8} {:<7} {:<9} {:>7} {:>6} {:>10} {:>12} {:>5} {:>13} {:>7} {:>8}",
        "mode",
        "barrier",
        "workload",
        "states",
        "clean",
        "preen-only",
        "inconsistent",
        "lost",
        "repair-failed",
        "writes",
        "flushes"
    );
    for r in &rep.results {
        println!(
            "{:<8} {:<7} {:<9} {:>7} {:>6} {:>10} {:>12} {:>5} {:>13} {:>7} {:>8}{}",
            r.mode.name(),
            r.barrier.name(),
            r.workload.name(),
            r.states,
            r.clean,
            r.preen_only,
            r.inconsistent,
            r.fsynced_lost,
            r.repair_failed,
            r.log_writes,
            r.log_flushes,
            if r.ok() {
                ""
            } else if r.mode == WriteMode::Async {
                "  (async: no ordering, damage expected)"
            } else {
                "  FAILED"
            }
        );
    }
    let safe: usize = rep
        .results
        .iter()
        .filter(|r| r.mode != WriteMode::Async)
        .map(|r| r.states)
        .sum();
    println!(
        "{} crash states ({} in normal, sync and softdep) in {:.1} s",
        rep.total_states, safe, rep.seconds
    );
    let preen_ok: usize = rep
        .results
        .iter()
        .filter(|r| r.mode != WriteMode::Async)
        .map(|r| r.inconsistent_preen_repairs)
        .sum();
    if preen_ok > 0 {
        println!(
            "{preen_ok} of the inconsistent states in normal, sync and softdep were repaired \
             by fsck -p alone (fsck -n judged them beyond preen)"
        );
    }
}

fn print_examples(rep: &Report, max: usize) {
    for r in rep
        .results
        .iter()
        .filter(|r| !r.ok() && r.mode != WriteMode::Async)
    {
        for e in r.examples.iter().take(max) {
            println!(
                "{}/{} state {} ({}, {} writes applied, crash after write {}, {} durable): {}",
                r.mode.name(),
                r.workload.name(),
                e.state,
                e.kind,
                e.writes,
                e.crash_point,
                e.durable,
                e.problems.join(", ")
            );
            println!("    during {}", e.during);
            if let Some(img) = &e.image {
                println!("    image: {img}");
            }
            if e.preen_alone_repairs == Some(true) {
                println!(
                    "    (fsck -p alone repairs this state: the check-only verdict is stricter)"
                );
            }
            for f in e.findings.iter().take(4) {
                println!("    fsck: {f}");
            }
            for f in e.after_repair.iter().take(2) {
                println!("    after repair: {f}");
            }
            for l in e.lost.iter().take(2) {
                println!("    lost: {l}");
            }
        }
    }
}

fn json_path(a: &CrashtestArgs, name: &str) -> Result<Option<PathBuf>, String> {
    Ok(match (&a.json, &a.out) {
        (Some(_), Some(_)) => return Err("give --json FILE or --out DIR, not both".to_string()),
        (Some(f), None) => Some(f.clone()),
        (None, Some(d)) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            Some(d.join(name))
        }
        (None, None) => None,
    })
}

fn progress_bar(unit: &str) -> Result<indicatif::ProgressBar, String> {
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}"
        ))
        .map_err(|e| e.to_string())?
        .progress_chars("=> "),
    );
    if std::env::var_os("CI").is_some() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    Ok(bar)
}

fn mount_config(a: &CrashtestArgs) -> Result<mountcrash::Config, String> {
    if !nix_is_root() {
        return Err(
            "crashtest --mount needs root (it mounts through FUSE, detaches mounts and drops caches)"
                .to_string(),
        );
    }
    let modes = parse_modes(a)?;
    let (lo, hi) = a
        .kill_after
        .split_once(',')
        .and_then(|(l, h)| Some((l.trim().parse::<f64>().ok()?, h.trim().parse::<f64>().ok()?)))
        .filter(|(l, h)| *l >= 0.0 && h >= l)
        .ok_or_else(|| {
            format!(
                "bad --kill-after '{}': give MIN,MAX in seconds",
                a.kill_after
            )
        })?;
    if a.iterations == 0 {
        return Err("nothing to run: --iterations is 0".to_string());
    }
    let ufskit = match &a.daemon {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| format!("own binary: {e}"))?,
    };
    std::fs::create_dir_all(&a.work).map_err(|e| format!("{}: {e}", a.work.display()))?;
    if !a.tree.is_dir() {
        return Err(format!("--tree {}: not a directory", a.tree.display()));
    }
    let tarball = a.work.join("tree.tar");
    let parent = a.tree.parent().unwrap_or(std::path::Path::new("/"));
    let name = a.tree.file_name().unwrap_or_default();
    let st = std::process::Command::new("tar")
        .arg("-cf")
        .arg(&tarball)
        .arg("-C")
        .arg(parent)
        .arg(name)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !st.success() {
        return Err(format!("tar of {} failed", a.tree.display()));
    }
    Ok(mountcrash::Config {
        ufskit,
        work: a.work.clone(),
        modes,
        barrier: a.barrier.as_deref().and_then(ufs::order::Barrier::parse),
        newfs_softupdates: match a.newfs_u.as_str() {
            "on" => vec![true],
            "off" => vec![false],
            _ => vec![false, true],
        },
        variant: variant(a)?,
        iterations: a.iterations,
        image_bytes: crate::parse_size(&a.size)?,
        tarball,
        kill_after: (lo, hi),
        busy: a.busy == "on",
        use_fsx: true,
        mixes: a
            .mix
            .iter()
            .map(|m| {
                mountcrash::Mix::parse(m.trim())
                    .ok_or_else(|| format!("unknown --mix '{m}' (bulk, mail, stress)"))
            })
            .collect::<Result<Vec<_>, String>>()?,
        seed: a.seed,
        // A failing image is always kept: in --keep, or else next to the
        // scratch image.
        keep: Some(a.keep.clone().unwrap_or_else(|| a.work.join("failed"))),
    })
}

/// Whether this process runs as root (its /proc entry is root's).
pub(crate) fn nix_is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    })
}

fn cmd_mount_crashtest(a: &CrashtestArgs) -> Result<ExitCode, String> {
    let cfg = mount_config(a)?;
    let json = json_path(a, "crashtest-mount.json")?;
    let bar = progress_bar("kills")?;
    // Without a terminal (a log file, CI) a line per kill instead of the bar.
    let lines = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let t0 = std::time::Instant::now();
    let rep = mountcrash::run(&cfg, &mut |done, total, msg| {
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(msg.to_string());
        if lines {
            eprintln!(
                "crashtest --mount: {done}/{total} kills done after {:.0} s; next: {msg}",
                t0.elapsed().as_secs_f64()
            );
        }
    })?;
    bar.finish_and_clear();
    println!("file system: {}", rep.config.variant);
    println!(
        "{:<8} {:<9} {:>6} {:>6} {:>10} {:>12} {:>13} {:>5} {:>14} {:>8}",
        "mode",
        "image",
        "kills",
        "clean",
        "preen-only",
        "inconsistent",
        "repair-failed",
        "lost",
        "remount-failed",
        "records"
    );
    for s in &rep.summaries {
        println!(
            "{:<8} {:<9} {:>6} {:>6} {:>10} {:>12} {:>13} {:>5} {:>14} {:>8}",
            s.mode,
            if s.newfs_softupdates {
                "newfs -U"
            } else {
                "newfs"
            },
            s.iterations,
            s.clean,
            s.preen_only,
            s.inconsistent,
            s.repair_failed,
            s.fsynced_lost,
            s.remount_failed,
            s.records_checked
        );
    }
    // Every program that ran in some kill, with the number of kills it
    // ran in (the mixes take turns).
    let mut ran: Vec<(String, usize)> = Vec::new();
    for p in rep.iterations.iter().flat_map(|i| &i.programs) {
        match ran.iter_mut().find(|(n, _)| n == p) {
            Some((_, k)) => *k += 1,
            None => ran.push((p.clone(), 1)),
        }
    }
    let ran: Vec<String> = ran.iter().map(|(n, k)| format!("{n} ({k})")).collect();
    println!(
        "{} kills in {:.0} s; programs in the mount (kills they ran in): {}",
        rep.iterations.len(),
        rep.seconds,
        ran.join(", ")
    );
    println!(
        "write barrier: {}",
        match rep.config.barrier {
            Some(b) => format!("barrier={} (given)", b.name()),
            None =>
                "each mode's default (write in normal and sync, flush with softdep)".to_string(),
        }
    );
    if !rep.skipped_programs.is_empty() {
        println!(
            "skipped (not installed): {}",
            rep.skipped_programs.join(", ")
        );
    }
    for it in rep.failures().iter().take(a.examples.max(1) * 3) {
        println!(
            "{} {} kill {} after {:.2} s: {:?}",
            it.mode.name(),
            if it.newfs_softupdates {
                "newfs -U"
            } else {
                "newfs"
            },
            it.index,
            it.kill_after_s,
            it.class
        );
        if let Some(img) = &it.image {
            println!("    image: {img}");
        }
        for f in it
            .findings
            .iter()
            .filter(|f| !f.contains("NOT MARKED CLEAN"))
            .take(4)
        {
            println!("    fsck: {f}");
        }
        for f in it.after_repair.iter().take(2) {
            println!("    after repair: {f}");
        }
        for l in it.lost.iter().take(2) {
            println!("    lost: {l}");
        }
        if let Some(r) = &it.remount {
            println!("    remount: {r}");
        }
    }
    if let Some(path) = &json {
        let text = serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if rep.failures().is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "ufskit: crashtest --mount: {} of {} kills broke a guarantee",
            rep.failures().len(),
            rep.iterations.len()
        );
        Ok(ExitCode::from(2))
    }
}

pub fn cmd_crashtest(a: CrashtestArgs) -> Result<ExitCode, String> {
    if a.powercut {
        return cmd_powercut(&a);
    }
    if a.mount {
        return cmd_mount_crashtest(&a);
    }
    let cfg = config(&a)?;
    let json = json_path(&a, "crashtest.json")?;
    let bar = progress_bar("states")?;
    let rep = crashtest::run(&cfg, &mut |done, total, msg| {
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(msg.to_string());
    })
    .map_err(|e| format!("crashtest: {e}"))?;
    bar.finish_and_clear();
    print_table(&rep);
    print_examples(&rep, a.examples);
    if let Some(path) = &json {
        let text = serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if rep
        .results
        .iter()
        .any(|r| r.mode == WriteMode::Async && !r.ok())
    {
        println!(
            "note: async mode orders no writes, so a crash may leave any damage; \
             its failures are expected and do not count"
        );
    }
    let failures = rep.failures();
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("ufskit: crashtest: crash guarantees broken:");
        for f in &failures {
            eprintln!("  {f}");
        }
        Ok(ExitCode::from(2))
    }
}

/// `crashtest --mount --powercut` (see `ufs_bench::powercut`).
fn cmd_powercut(a: &CrashtestArgs) -> Result<ExitCode, String> {
    use ufs::order::Barrier;
    if !nix_is_root() {
        return Err("crashtest --mount --powercut needs root (it mounts through FUSE)".to_string());
    }
    let mut modes: Vec<(WriteMode, Barrier)> = parse_modes(a)?
        .into_iter()
        .map(|m| (m, Barrier::Flush))
        .collect();
    if a.barrier.as_deref() == Some("write") {
        let more: Vec<_> = modes.iter().map(|&(m, _)| (m, Barrier::Write)).collect();
        modes.extend(more);
    }
    if !a.tree.is_dir() {
        return Err(format!("--tree {}: not a directory", a.tree.display()));
    }
    let cfg = ufs_bench::powercut::Config {
        ufskit: match &a.daemon {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| format!("own binary: {e}"))?,
        },
        work: a.work.clone(),
        modes,
        image_bytes: crate::parse_size(&a.size)?,
        tree: a.tree.clone(),
        prefixes: a.prefixes,
        reorders: a.reorders,
        fsyncs: a.fsyncs,
        seed: a.seed,
        keep: a.keep.clone().or_else(|| Some(a.work.join("failed"))),
    };
    let json = json_path(a, "crashtest-powercut.json")?;
    let bar = progress_bar("states")?;
    let rep = ufs_bench::powercut::run(&cfg, &mut |label, done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(label.to_string());
    })?;
    bar.finish_and_clear();
    println!(
        "power cuts through the mount: tar -x of {}, fsynced maildir, objects and database pages, rm -rf",
        cfg.tree.display()
    );
    print!("{}", rep.table());
    let states: usize = rep.modes.iter().map(|m| m.states).sum();
    println!("{states} crash states in all");
    if let Some(path) = &json {
        let text = serde_json::to_string_pretty(&rep).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(if rep.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
