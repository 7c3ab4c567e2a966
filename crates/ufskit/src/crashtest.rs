//! `ufskit crashtest`: runs the crash tester of `ufs-bench` (workloads
//! under each write mode, every crash state checked with fsck and against
//! what fsync promised), shows a progress bar, prints the table, writes
//! JSON, and fails when a mode that promises consistency broke it.
//!
//! Exit status: 0 when normal, sync and softdep kept every guarantee
//! (async is reported, never judged: it has no ordering by design); 2 when
//! one of them did not; 1 on a usage or operational error.
use std::path::PathBuf;
use std::process::ExitCode;
use ufs::order::WriteMode;
use ufs_bench::crashtest::{self, Config, Report, Workload};

#[derive(clap::Args)]
pub struct CrashtestArgs {
    /// Write modes to test (comma-separated: normal, sync, async, softdep).
    #[arg(
        long = "mode",
        value_delimiter = ',',
        default_value = "normal,sync,async,softdep"
    )]
    modes: Vec<String>,
    /// Workloads (comma-separated: create, mkdir, rename, unlink, truncate,
    /// maildir).
    #[arg(
        long = "workload",
        value_delimiter = ',',
        default_value = "create,mkdir,rename,unlink,truncate,maildir,bigdir,inodes,threads"
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
    /// Seed for the workloads' data and the reorderings.
    #[arg(long, default_value_t = Config::default().seed)]
    seed: u64,
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
    /// -n` or `dumpfs`.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
}

fn config(a: &CrashtestArgs) -> Result<Config, String> {
    let mut modes = Vec::new();
    for m in &a.modes {
        let m = WriteMode::parse(m.trim())
            .ok_or_else(|| format!("unknown mode '{m}' (normal, sync, async, softdep)"))?;
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
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
        seed: a.seed,
        threads: a.threads,
        max_examples: a.examples,
        keep: a.keep.clone(),
    })
}

fn print_table(rep: &Report) {
    println!(
        "{:<8} {:<9} {:>7} {:>6} {:>10} {:>12} {:>5} {:>13} {:>7} {:>8}",
        "mode",
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
            "{:<8} {:<9} {:>7} {:>6} {:>10} {:>12} {:>5} {:>13} {:>7} {:>8}{}",
            r.mode.name(),
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

pub fn cmd_crashtest(a: CrashtestArgs) -> Result<ExitCode, String> {
    let cfg = config(&a)?;
    let json = match (&a.json, &a.out) {
        (Some(_), Some(_)) => return Err("give --json FILE or --out DIR, not both".to_string()),
        (Some(f), None) => Some(f.clone()),
        (None, Some(d)) => {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            Some(d.join("crashtest.json"))
        }
        (None, None) => None,
    };
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} states {msg}",
        )
        .map_err(|e| e.to_string())?
        .progress_chars("=> "),
    );
    if std::env::var_os("CI").is_some() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
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
