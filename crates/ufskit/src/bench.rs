//! `ufskit bench`: runs an in-process workload from `ufs-bench`, writes its
//! JSON results, prints a summary and, when Python with matplotlib is
//! installed, draws the plots with the scripts in `analysis/`.
use std::path::{Path, PathBuf};
use ufs::alloc::placement::InodeOrder;
use ufs_bench::{dirhash_ops, dirpref, largedir, maildir, paper, tree, writeorder};

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: Which,
    /// Directory for results and plots.
    #[arg(long, default_value = "results", global = true)]
    out: PathBuf,
    /// Skip the plots.
    #[arg(long, global = true)]
    no_plots: bool,
}

#[derive(clap::Subcommand)]
enum Which {
    /// Cost per create, remove, stat (sequential, random, missing) against
    /// directory size, dirhash against linear (the paper's Figures 2-6).
    Dirhash {
        /// The quick profile (seconds) instead of the full one.
        #[arg(long)]
        quick: bool,
    },
    /// Maildirs under delivery, IMAP-like scans and deletions, with a fixed
    /// 2 MiB, a large, and a growing/shrinking dirhash budget.
    Maildir {
        /// Size of the workload (1.0: the full run).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
    },
    /// Orlov's directory placement study (FreeBSD, 2001): extract a ports-like tree and `rm -rf` it, traditional
    /// against Orlov directory placement, on the seed's two systems (8 GB /
    /// 991 groups and 40 GB / 5,324 groups) on modeled disks, cold cache.
    Dirpref {
        /// Extract this real tree instead of the generated ports tree.
        #[arg(long)]
        tree: Option<PathBuf>,
        /// Only the first system, and the first N entries of the tree.
        #[arg(long)]
        quick: bool,
    },
    /// The large-directory study (Andreas Dilger, "getdents - ext4 vs btrfs
    /// performance", 2012): N files of 4 KB in one directory, then ls, tar, find,
    /// cp -a and rm -rf of it from a cold cache, fresh and after churn,
    /// under each inode order for large directories, on a modeled disk.
    Largedir {
        /// Directory sizes (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "10000,32000,100000,320000,1000000"
        )]
        sizes: Vec<u64>,
        /// Inode orders to compare (off, offset, name, hash).
        #[arg(long, value_delimiter = ',', default_value = "off,offset,name,hash")]
        orders: Vec<String>,
        /// 10,000 and 30,000 files, orders off and offset (a minute).
        #[arg(long)]
        quick: bool,
    },
    /// The write modes (normal, sync, async, softdep) on a modeled disk:
    /// 10,000 empty files created and removed, and the MH folder of Dowse and Malone's paper
    /// (33,164 messages created, `folder -pack`, `rm -rf`); modeled time
    /// of each phase with its sync, soft updates against normal and async.
    Writeorder {
        /// 2,000 files and a 3,000-message folder instead.
        #[arg(long)]
        quick: bool,
        /// Directory blocks in the main buffer cache (on) or a small pool
        /// of their own (off).
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        vmiodir: String,
    },
    /// Dowse and Malone, "Recent Filesystem Optimisations in FreeBSD"
    /// (USENIX FREENIX 2002), section 4: tar, the MH folder, Bonnie++'s small-file
    /// tests, Andrew, Postmark (10k and 20k), Netnews, a build, maildir
    /// (the dirhash memory study) and a large directory under all 16
    /// combinations of soft updates, dirpref, vmiodir and dirhash on a
    /// modeled disk and CPU; writes paper.json and paper.csv, the rank
    /// tables, linear models and figures (`analysis/paper_stats.py`), the
    /// dirhash per-operation figures, and report.html with findings.md
    /// (`analysis/paper_report.py`).
    Paper {
        /// Small sizes (a few minutes) instead of the paper's.
        #[arg(long)]
        quick: bool,
        /// Workloads to run (comma-separated; default all): tar, folder,
        /// bonnie, andrew, postmark, netnews, build, maildir, largedir.
        #[arg(long, value_delimiter = ',')]
        workloads: Vec<String>,
        /// Runs side by side (the figures do not depend on it).
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Factors to vary, every combination of them (comma-separated;
        /// the others stay off): the paper's su (soft updates), dp
        /// (dirpref), vm (vmiodir), dh (dirhash 2 MiB), and this project's
        /// io (inodes of large directories in name order) and gd (with
        /// dirhash: a budget growing to the cache size, given back on
        /// low-memory events).
        #[arg(long, default_value = "su,dp,vm,dh")]
        factors: String,
        /// On-disk formats, comma-separated: ufs2 (the default), ufs1 (the
        /// paper's FreeBSD 4.5 machine ran UFS1), ufs2-be, ufs1-be. The
        /// first goes to OUT, each further one to OUT/format-NAME, and the
        /// report in OUT sets them side by side.
        #[arg(long, value_delimiter = ',', default_value = "ufs2")]
        format: Vec<String>,
        /// End each test with a sync inside its time (the earlier
        /// procedure), instead of the paper's: a run's tests follow each
        /// other with delayed writes pending, one sync between runs.
        #[arg(long)]
        sync_each_test: bool,
        /// The modeled syncer: wheel (FreeBSD's: each modeled second it
        /// writes what was dirtied 28-30 s before) or whole (everything
        /// dirty every 30 modeled seconds, the model before 2026-11-28).
        #[arg(long, default_value = "wheel", value_parser = ["wheel", "whole"])]
        syncer: String,
        /// Ablations, comma-separated: each runs the evaluation again with
        /// one modeled element changed, into OUT/ablation-NAME, and the
        /// report in OUT sets each claim's verdict under each beside the
        /// main run's: syncer-whole, syncer-waits, bufdaemon-all,
        /// sync-each-test, vmiodir-twentieth, vmiodir-own-space,
        /// disk-write-cache, cold-cache, small-memory, andrew-slow-cc,
        /// disk-unskewed, or all.
        #[arg(long, value_delimiter = ',')]
        ablate: Vec<String>,
        /// The tree the tar workload extracts: `x11`, generated in the
        /// shape of the X11 sources the paper extracted (930 directories,
        /// 11,585 files, 133 MB); `ports`, generated in the shape of seed
        /// 000's ports collection (6,596 directories, 13,868 small files);
        /// or a directory: the directories and regular files under it
        /// (their names and sizes; contents generated). A directory named
        /// x11 or ports is given as ./x11 or ./ports.
        #[arg(long, value_name = "x11|ports|DIR", default_value = "x11")]
        tar_tree: String,
    },
}

fn bar(total: u64) -> indicatif::ProgressBar {
    crate::progress::bar(total, "")
}

fn analysis_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("UFSKIT_ANALYSIS") {
        return PathBuf::from(d);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../analysis");
    if built.exists() {
        return built;
    }
    PathBuf::from("analysis")
}

fn plot(script: &str, json: &Path, out: &Path) {
    let s = analysis_dir().join(script);
    match std::process::Command::new("python3")
        .arg(&s)
        .arg(json)
        .arg(out)
        .output()
    {
        Ok(o) if o.status.success() => print!("{}", String::from_utf8_lossy(&o.stdout)),
        Ok(o) => eprintln!(
            "ufskit: plots not drawn ({}): {}",
            s.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("ufskit: plots not drawn: python3: {e}"),
    }
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs one benchmark into `a.out`, made if missing; a run that fails
/// before writing anything (an unknown ablation, say) leaves no empty
/// directory behind.
pub fn cmd_bench(a: BenchArgs) -> Result<(), String> {
    let out = a.out.clone();
    let existed = out.exists();
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let r = run_bench(a);
    if r.is_err() && !existed {
        // remove_dir takes only an empty directory: results stay.
        let _ = std::fs::remove_dir(&out);
    }
    r
}

fn run_bench(a: BenchArgs) -> Result<(), String> {
    match a.which {
        Which::Dirhash { quick } => {
            let cfg = if quick {
                dirhash_ops::OpsConfig::quick()
            } else {
                dirhash_ops::OpsConfig::full()
            };
            let total = (cfg.large_sizes.len() + cfg.small_bytes.len()) as u64;
            let b = bar(total);
            let r = dirhash_ops::run(&cfg, &mut |done, _, msg| {
                b.set_position(done);
                b.set_message(msg.to_string());
            })
            .map_err(|e| format!("bench dirhash: {e}"))?;
            b.finish_and_clear();
            let json = a.out.join("dirhash_ops.json");
            write_json(&json, &r)?;
            print_dirhash_summary(&r);
            println!("results: {}", json.display());
            if !r.fsck_clean {
                return Err("an image was not fsck clean after the benchmark".into());
            }
            if !a.no_plots {
                plot("plot_dirhash.py", &json, &a.out);
            }
        }
        Which::Maildir { scale } => {
            let mut reports = Vec::new();
            for (name, cfg) in maildir::profiles(scale) {
                let b = bar(100);
                b.set_prefix(name.clone());
                let r = maildir::run(&cfg, &mut |done, total, msg| {
                    b.set_length(total.max(1));
                    b.set_position(done);
                    b.set_message(format!("{name}: {msg}"));
                })
                .map_err(|e| format!("bench maildir ({name}): {e}"))?;
                b.finish_and_clear();
                println!(
                    "{:<24} {:>8.2} s   dirhash peak {:>10} bytes, end {:>10} bytes, fsck {}",
                    name,
                    r.total_seconds,
                    r.phases
                        .iter()
                        .map(|p| p.dirhash.mem_peak)
                        .max()
                        .unwrap_or(0),
                    r.phases.last().map(|p| p.dirhash.mem_in_use).unwrap_or(0),
                    if r.fsck_clean { "clean" } else { "NOT CLEAN" }
                );
                for p in &r.phases {
                    println!("    {:<14} {:>8.3} s  built {:>6} recycled {:>6} lowmem-freed {:>5} linear lookups {:>8}", p.name, p.seconds, p.dirhash.built, p.dirhash.recycled, p.dirhash.lowmem_freed, p.dirhash.lookups_linear);
                }
                reports.push(r);
            }
            let json = a.out.join("maildir.json");
            write_json(&json, &reports)?;
            println!("results: {}", json.display());
            if reports.iter().any(|r| !r.fsck_clean) {
                return Err("an image was not fsck clean after the benchmark".into());
            }
            if !a.no_plots {
                plot("plot_maildir.py", &json, &a.out);
            }
        }
        Which::Dirpref { tree: host, quick } => {
            let (mut t, name) = match &host {
                Some(p) => (
                    tree::host_tree(p).map_err(|e| format!("{}: {e}", p.display()))?,
                    p.display().to_string(),
                ),
                None => (
                    tree::ports_tree(1),
                    "ports (generated, the shape of Orlov's tree)".to_string(),
                ),
            };
            let mut systems = dirpref::systems();
            if quick {
                systems.truncate(1);
                t.entries.truncate(4000);
            }
            println!(
                "tree: {name}: {} directories, {} files, {:.1} MB",
                t.dirs(),
                t.files(),
                t.bytes() as f64 / 1e6
            );
            let b = bar(systems.len() as u64 * 2);
            let runs = dirpref::run_all(&systems, &t, &name, 1, &mut |done, _, msg| {
                b.set_position(done);
                b.set_message(msg.to_string());
            })
            .map_err(|e| format!("bench dirpref: {e}"))?;
            b.finish_and_clear();
            print_dirpref_table(&systems, &runs);
            let variants = dirpref::fill_variants();
            let b = bar((systems.len() * variants.len()) as u64);
            let mut fills = Vec::new();
            for sys in &systems {
                for v in &variants {
                    b.set_message(format!("tree first: {} / {}", sys.name, v.name));
                    fills.push(
                        dirpref::fill_run(sys, v, &t, 1)
                            .map_err(|e| format!("bench dirpref (tree first): {e}"))?,
                    );
                    b.inc(1);
                }
            }
            b.finish_and_clear();
            print_fill_table(&fills);
            let json = a.out.join("dirpref.json");
            write_json(
                &json,
                &serde_json::json!({ "tree": name, "systems": systems, "runs": runs, "tree_first": fills }),
            )?;
            println!("results: {}", json.display());
            if runs.iter().any(|r| !r.fsck_clean) || fills.iter().any(|r| !r.fsck_clean) {
                return Err("an image was not fsck clean after the benchmark".into());
            }
            if !a.no_plots {
                plot("plot_dirpref.py", &json, &a.out);
            }
        }
        Which::Largedir {
            sizes,
            orders,
            quick,
        } => {
            let (sizes, orders) = if quick {
                (
                    vec![10_000, 30_000],
                    vec!["off".to_string(), "offset".to_string()],
                )
            } else {
                (sizes, orders)
            };
            let orders: Vec<InodeOrder> = orders
                .iter()
                .map(|o| {
                    InodeOrder::parse(o).ok_or_else(|| {
                        format!("unknown inode order '{o}' (known: off, offset, name, hash)")
                    })
                })
                .collect::<Result<_, _>>()?;
            if sizes.is_empty() || sizes.iter().any(|n| !(2..=10_000_000).contains(n)) {
                return Err("sizes must be between 2 and 10,000,000 files".into());
            }
            let machine = largedir::Machine::default();
            println!(
                "disk {}, buffer cache {} MB, dirhash {} MB; files of 4 KB, cold cache before each step",
                machine.disk,
                machine.cache_bytes >> 20,
                machine.dirhash_maxmem >> 20
            );
            let b = bar((sizes.len() * orders.len() * 2) as u64);
            let runs = largedir::run_all(
                &machine,
                &sizes,
                &orders,
                &[false, true],
                1,
                &mut |done, _, msg| {
                    b.set_position(done);
                    b.set_message(msg.to_string());
                },
            )
            .map_err(|e| format!("bench largedir: {e}"))?;
            b.finish_and_clear();
            print_largedir_table(&runs);
            let json = a.out.join("largedir.json");
            write_json(
                &json,
                &serde_json::json!({ "machine": machine, "runs": runs }),
            )?;
            println!("results: {}", json.display());
            if runs.iter().any(|r| !r.fsck_clean) {
                return Err("an image was not fsck clean after the benchmark".into());
            }
            if !a.no_plots {
                plot("plot_largedir.py", &json, &a.out);
            }
        }
        Which::Writeorder { quick, vmiodir } => {
            let mut cfg = if quick {
                writeorder::Config::quick()
            } else {
                writeorder::Config::full()
            };
            cfg.vmiodir = vmiodir == "on";
            println!(
                "disk {}, {} MiB file system, buffer cache {} MiB, vmiodir {}; {} files, {} messages; cold cache at the start",
                cfg.disk,
                cfg.fs_bytes >> 20,
                cfg.cache_bytes >> 20,
                vmiodir,
                cfg.files,
                cfg.messages
            );
            let b = bar(1);
            let r = writeorder::run_all(&cfg, &mut |done, total, msg| {
                b.set_length(total.max(1));
                b.set_position(done);
                b.set_message(msg.to_string());
            })
            .map_err(|e| format!("bench writeorder: {e}"))?;
            b.finish_and_clear();
            print_writeorder_table(&r);
            let json = a.out.join("writeorder.json");
            write_json(&json, &r)?;
            println!("results: {}", json.display());
            for run in r.runs.iter().filter(|x| !x.fsck_clean) {
                eprintln!(
                    "ufskit: {} under {}: fsck findings: {}",
                    run.workload,
                    run.mode.name(),
                    run.fsck_findings.join("; ")
                );
            }
            if !r.fsck_clean() {
                return Err("an image was not fsck clean after the benchmark".into());
            }
            if !a.no_plots {
                plot("plot_writeorder.py", &json, &a.out);
            }
        }
        Which::Paper {
            quick,
            workloads,
            jobs,
            factors,
            format,
            sync_each_test,
            syncer,
            ablate,
            tar_tree,
        } => {
            let factors =
                paper::Factor::parse_list(&factors).map_err(|e| format!("bench paper: {e}"))?;
            let mut p = if quick {
                paper::Profile::quick()
            } else {
                paper::Profile::full()
            };
            p.jobs = jobs.max(1);
            p.sync_each_test = sync_each_test;
            let generated = paper::TarTree::GENERATED
                .into_iter()
                .find(|t| t.name() == tar_tree);
            p.tar_tree = match generated {
                Some(t) => t,
                None => {
                    let dir = PathBuf::from(&tar_tree);
                    let t = ufs_bench::tree::host_tree(&dir)
                        .map_err(|e| format!("bench paper: --tar-tree {}: {e}", dir.display()))?;
                    if t.files() == 0 {
                        return Err(format!(
                            "bench paper: --tar-tree {}: no regular files under it",
                            dir.display()
                        ));
                    }
                    paper::TarTree::Host {
                        dir,
                        tree: std::sync::Arc::new(t),
                    }
                }
            };
            p.syncer = paper::meter::SyncerModel::parse(&syncer)
                .ok_or_else(|| format!("bench paper: unknown syncer {syncer:?} (wheel, whole)"))?;
            let mut ablations = Vec::new();
            for n in &ablate {
                if n == "all" {
                    ablations.extend(paper::Ablation::ALL);
                } else {
                    ablations.push(paper::Ablation::parse(n).ok_or_else(|| {
                        // Two ablations of 2026-11-29 became the model.
                        let moved = match n.as_str() {
                            "bufdaemon-half" => {
                                "; bufdaemon-half is the model now, bufdaemon-all the earlier one"
                            }
                            "disk-skew" => {
                                "; disk-skew is the model now, disk-unskewed the earlier one"
                            }
                            _ => "",
                        };
                        format!(
                            "bench paper: unknown ablation {n:?} (known: {}, all){moved}",
                            paper::Ablation::ALL.map(|a| a.name()).join(", ")
                        )
                    })?);
                }
            }
            // `--ablate all,disk-unskewed` names one twice: each runs once.
            let mut seen = Vec::new();
            ablations.retain(|a| {
                let first = !seen.contains(a);
                seen.push(*a);
                first
            });
            let formats = format
                .iter()
                .map(|f| {
                    ufs_format::Variant::parse(f).ok_or_else(|| {
                        format!("bench paper: unknown format {f:?} (ufs2, ufs1, ufs2-be, ufs1-be)")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let ws: Vec<paper::Workload> = if workloads.is_empty() {
                paper::Workload::ALL.to_vec()
            } else {
                workloads
                    .iter()
                    .map(|n| {
                        paper::Workload::by_name(n).ok_or_else(|| {
                            format!(
                                "bench paper: no workload {n:?} (known: {})",
                                paper::Workload::ALL.map(|w| w.name()).join(", ")
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?
            };
            let tar_line = {
                let t = paper::tar_tree(&p);
                let shape = match &p.tar_tree {
                    paper::TarTree::Host { dir, .. } => dir.display().to_string(),
                    t => format!("{}-shaped", t.name()),
                };
                format!(
                    "{shape} ({} directories, {} files, {:.0} MB)",
                    t.dirs(),
                    t.files(),
                    t.bytes() as f64 / 1e6
                )
            };
            println!(
                "{} profile: disk {} ({}), {} MiB file system, buffer cache {} MiB, CPU model {}, syncer {} every {} modeled s, {}, their writes issued without waiting; tar tree {}; {} workloads ({}), {} combinations of {}, {} jobs",
                p.name,
                p.disk,
                if p.disk_skew { "tracks skewed" } else { "tracks unskewed" },
                p.fs_bytes >> 20,
                p.cache_bytes >> 20,
                paper::cpu::CpuModel::pentium4_2002().name,
                p.syncer.name(),
                p.sync_every_s,
                p.buf_daemon.describe(),
                tar_line,
                ws.len(),
                ws.iter().map(|w| w.name()).collect::<Vec<_>>().join(" "),
                1u32 << factors.len(),
                factors.iter().map(|f| f.name()).collect::<Vec<_>>().join(","),
                p.jobs
            );
            let b = bar(1);
            // Each ablation and each further format first, in
            // OUT/ablation-NAME and OUT/format-NAME, so the report of OUT
            // (made last) sets them beside the main run.
            let mut runs: Vec<(PathBuf, paper::Profile, String)> = Vec::new();
            for (i, &v) in formats.iter().enumerate() {
                let fp = paper::Profile {
                    format: v,
                    ..p.clone()
                };
                if i == 0 {
                    for &ab in &ablations {
                        runs.push((
                            a.out.join(format!("ablation-{}", ab.name())),
                            ab.apply(&fp),
                            format!("{v}, ablation {}: {}", ab.name(), ab.describe()),
                        ));
                    }
                    runs.push((a.out.clone(), fp, format!("{v}")));
                } else {
                    runs.insert(
                        0,
                        (
                            a.out.join(format!("format-{}", v.short_name())),
                            fp,
                            format!("{v}"),
                        ),
                    );
                }
            }
            for (out, p, what) in runs {
                let main = out == a.out;
                let v = p.format;
                std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
                println!("file system: {what}");
                let r = paper::run_all(&p, &ws, &factors, &mut |done, total, msg| {
                    b.set_length(total.max(1));
                    b.set_position(done);
                    b.set_message(format!("{} {msg}", v.short_name()));
                })
                .map_err(|e| format!("bench paper: {e}"))?;
                b.finish_and_clear();
                print_paper_table(&r, &ws, &factors);
                let json = out.join("paper.json");
                write_json(&json, &r)?;
                let csv = out.join("paper.csv");
                std::fs::write(&csv, paper::to_csv(&r))
                    .map_err(|e| format!("{}: {e}", csv.display()))?;
                println!(
                    "results: {} {} ({:.0} s)",
                    json.display(),
                    csv.display(),
                    r.wall_s
                );
                if !r.fsck_clean() {
                    return Err("an image was not fsck clean after the benchmark".into());
                }
                if !main && !a.no_plots {
                    paper_stats(&csv, &out, &factors);
                    paper_report(&out);
                }
            }
            let csv = a.out.join("paper.csv");
            // The per-operation figures of section 3 (Figures 2-6).
            let cfg = if quick {
                dirhash_ops::OpsConfig::quick()
            } else {
                dirhash_ops::OpsConfig::full()
            };
            let ops = dirhash_ops::run(&cfg, &mut |_, _, msg| b.set_message(msg.to_string()))
                .map_err(|e| format!("bench paper (dirhash per operation): {e}"))?;
            let ops_json = a.out.join("dirhash_ops.json");
            write_json(&ops_json, &ops)?;
            if !ops.fsck_clean {
                return Err("an image was not fsck clean after the dirhash figures".into());
            }
            if !a.no_plots {
                plot("plot_dirhash.py", &ops_json, &a.out);
                paper_stats(&csv, &a.out, &factors);
                paper_report(&a.out);
            }
        }
    }
    Ok(())
}

/// Runs `analysis/paper_report.py` on the results directory: report.html
/// and findings.md; a missing Python or library is reported, not an error.
fn paper_report(out: &Path) {
    let s = analysis_dir().join("paper_report.py");
    match std::process::Command::new("python3")
        .arg(&s)
        .arg(out)
        .output()
    {
        Ok(o) if o.status.success() => print!("{}", String::from_utf8_lossy(&o.stdout)),
        Ok(o) => eprintln!(
            "ufskit: report not written ({}): {}",
            s.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("ufskit: report not written: python3: {e}"),
    }
}

/// Runs `analysis/paper_stats.py` on the CSV; a missing Python or library
/// is reported, not an error.
fn paper_stats(csv: &Path, out: &Path, factors: &[paper::Factor]) {
    let s = analysis_dir().join("paper_stats.py");
    let names: Vec<&str> = factors.iter().map(|f| f.name()).collect();
    match std::process::Command::new("python3")
        .arg(&s)
        .arg(csv)
        .arg("--out")
        .arg(out)
        .arg("--factors")
        .arg(names.join(","))
        .output()
    {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let n = text.lines().filter(|l| !l.trim().is_empty()).count();
            println!("analysis ({}): {n} files written:", s.display());
            print!("{text}");
        }
        Ok(o) => eprintln!(
            "ufskit: analysis not run ({}): {}",
            s.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("ufskit: analysis not run: python3: {e}"),
    }
}

/// Per test: modeled seconds with every optimisation off, with every
/// factor varied on, and the best combination.
fn print_paper_table(r: &paper::Report, ws: &[paper::Workload], factors: &[paper::Factor]) {
    let (none, every) = (paper::Combo::NONE, paper::Combo::every(factors));
    println!(
        "modeled seconds of each test with its final sync ({} runs)",
        r.runs.len()
    );
    println!(
        "{:<20} {:>10} {:>10} {:>8}   {:<13} {:>10} {:>8}",
        "test", "none", "all", "gain", "best", "best s", "gain"
    );
    for t in paper::all_tests(ws) {
        let (Some(n), Some(e)) = (r.row(t, none), r.row(t, every)) else {
            continue;
        };
        let Some(best) = r
            .runs
            .iter()
            .filter(|x| x.test == t)
            .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
        else {
            continue;
        };
        println!(
            "{:<20} {:>10.3} {:>10.3} {:>7.2}x   {:<13} {:>10.3} {:>7.2}x",
            t,
            n.seconds,
            e.seconds,
            n.seconds / e.seconds,
            best.combo().label(),
            best.seconds,
            n.seconds / best.seconds
        );
    }
    println!(
        "(gain: time with nothing on / time; fsck {}; {:.1} s in all)",
        if r.fsck_clean() { "clean" } else { "NOT CLEAN" },
        r.wall_s
    );
}

/// Phase × mode: modeled seconds of each phase with its sync, the two
/// ratios, then the write-ordering counters of each run.
fn print_writeorder_table(r: &writeorder::Report) {
    use ufs::order::WriteMode;
    let opt = |v: Option<f64>, scale: f64| match v {
        Some(x) => format!("{:.3}", x * scale),
        None => "-".into(),
    };
    println!("modeled seconds of each phase with its final sync");
    print!("{:<12}", "phase");
    for m in WriteMode::ALL {
        print!(" {:>10}", m.name());
    }
    println!(" {:>16} {:>16}", "normal/softdep", "softdep/async");
    for x in &r.ratios {
        print!("{:<12}", format!("{} {}", x.workload, x.phase));
        for v in [x.normal_ms, x.sync_ms, x.async_ms, x.softdep_ms] {
            print!(" {:>10}", opt(v, 1e-3));
        }
        let ratio = |v: Option<f64>| match v {
            Some(x) => format!("{x:.2}x"),
            None => "-".into(),
        };
        println!(
            " {:>16} {:>16}",
            ratio(x.softdep_speedup_vs_normal),
            ratio(x.softdep_vs_async)
        );
    }
    println!(
        "\n{:<12} {:<8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "phase",
        "mode",
        "phase s",
        "+sync s",
        "wall ms",
        "reads",
        "writes",
        "changes",
        "held",
        "rollbk",
        "forced",
        "flushes"
    );
    for run in &r.runs {
        for p in &run.phases {
            println!(
                "{:<12} {:<8} {:>9.3} {:>9.3} {:>9.1} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>9}",
                format!("{} {}", p.workload, p.name),
                run.mode.name(),
                p.modeled_ms / 1e3,
                p.modeled_sync_ms / 1e3,
                p.wall_sync_ms,
                p.reads,
                p.writes,
                p.order_sync.changes,
                p.order_sync.held,
                p.order_sync.rollbacks,
                p.order_sync.forced_writes,
                p.order_sync.flushes
            );
        }
    }
    println!(
        "(order counters and device requests include the sync; fsck {}; {:.1} s in all)",
        if r.fsck_clean() { "clean" } else { "NOT CLEAN" },
        r.wall_s
    );
}

/// The large-directory study's figures: modeled µs per file for each step, and the layout.
fn print_largedir_table(runs: &[largedir::Run]) {
    let steps = ["create", "churn", "ls", "tar", "find", "cp -a", "rm -rf"];
    print!("{:>9} {:<7} {:<7}", "files", "order", "state");
    for s in steps {
        print!(" {s:>8}");
    }
    println!(
        " {:>8} {:>8} {:>8} {:>9} {:>9}",
        "readdir", "name", "data", "wall cp", "wall rm"
    );
    for r in runs {
        print!(
            "{:>9} {:<7} {:<7}",
            r.files,
            r.order,
            if r.churned { "churned" } else { "fresh" }
        );
        for s in steps {
            match r.step(s) {
                Some(x) => print!(" {:>8.1}", x.modeled_us_per_file),
                None => print!(" {:>8}", "-"),
            }
        }
        let wall = |s: &str| {
            r.step(s)
                .map_or(0.0, |x| x.wall_ms * 1e3 / r.files.max(1) as f64)
        };
        println!(
            " {:>8.4} {:>8.4} {:>8.4} {:>9.1} {:>9.1}",
            r.layout.readdir_locality,
            r.layout.name_locality,
            r.layout.data_locality,
            wall("cp -a"),
            wall("rm -rf")
        );
    }
    println!(
        "(modeled µs per file for each step, and wall µs per file in-process for cp -a and rm -rf;"
    );
    println!(" locality: share of adjacent pairs in increasing inode / data order)");
}

/// The tree-first case: every directory made first, then the files.
fn print_fill_table(fills: &[dirpref::FillRun]) {
    println!("\ntree created first, filled later (modeled seconds; interleaved = the usual archive order)");
    println!(
        "{:<44} {:>7} {:>7} {:>7} {:>11} {:>7} {:>6} {:>8} {:>9}",
        "system / variant",
        "mkdirs",
        "fill",
        "total",
        "interleaved",
        "rm -rf",
        "groups",
        "max/grp",
        "with dir"
    );
    let mut last = "";
    for r in fills {
        if r.system != last {
            println!("{}", r.system);
            last = &r.system;
        }
        println!(
            "  {:<42} {:>7.2} {:>7.2} {:>7.2} {:>11.2} {:>7.2} {:>6} {:>8} {:>8.1}%",
            r.variant.name,
            r.mkdirs_ms / 1e3,
            r.fill_ms / 1e3,
            (r.mkdirs_ms + r.fill_ms) / 1e3,
            r.interleaved_ms / 1e3,
            r.rm_ms / 1e3,
            r.dir_groups,
            r.max_dirs_per_group,
            r.files_with_dir * 100.0
        );
    }
}

/// The seed's table: old and new dirpref, modeled seconds, and speed-up.
fn print_dirpref_table(systems: &[dirpref::System], runs: &[dirpref::Run]) {
    println!("modeled seconds, cold cache, delayed writes synced at the end of each step");
    println!(
        "{:<44} {:>9} {:>9} {:>8}   {:>9} {:>9} {:>8}",
        "", "tar -x", "", "", "rm -rf", "", ""
    );
    println!(
        "{:<44} {:>9} {:>9} {:>8}   {:>9} {:>9} {:>8}",
        "system", "old", "new", "speedup", "old", "new", "speedup"
    );
    for sys in systems {
        let get = |p: &str| runs.iter().find(|r| r.system == sys.name && r.policy == p);
        let (Some(o), Some(n)) = (get("traditional"), get("orlov")) else {
            continue;
        };
        println!(
            "{:<44} {:>9.2} {:>9.2} {:>8.2}   {:>9.2} {:>9.2} {:>8.2}",
            sys.name,
            o.extract_ms / 1000.0,
            n.extract_ms / 1000.0,
            o.extract_ms / n.extract_ms,
            o.rm_ms / 1000.0,
            n.rm_ms / 1000.0,
            o.rm_ms / n.rm_ms
        );
        let s = sys.seed_normal;
        println!(
            "{:<44} {:>9.1} {:>9.1} {:>8.2}   {:>9.1} {:>9.1} {:>8.2}",
            "  Orlov's figures, normal mode (real disk, s)",
            s[0],
            s[1],
            s[0] / s[1],
            s[2],
            s[3],
            s[2] / s[3]
        );
        println!(
            "{:<44} directories in {} / {} of {} groups; seeks {} / {} (tar), {} / {} (rm)",
            "  layout (old / new)",
            o.dir_groups,
            n.dir_groups,
            o.groups,
            o.extract_disk.seeks,
            n.extract_disk.seeks,
            o.rm_disk.seeks,
            n.rm_disk.seeks
        );
    }
}

fn print_dirhash_summary(r: &dirhash_ops::OpsReport) {
    let Some(&largest) = r.config.large_sizes.iter().max() else {
        return;
    };
    let smallest = r
        .config
        .large_sizes
        .iter()
        .copied()
        .min()
        .unwrap_or(largest);
    println!("microseconds per operation, in-process (dirhash / linear):");
    println!(
        "{:<14} {:>22} {:>22} {:>9}",
        "operation",
        format!("{smallest} entries"),
        format!("{largest} entries"),
        "speed-up"
    );
    for op in dirhash_ops::OPS {
        let c = |m: &str, n: u64| r.cost(m, "large", n, op).unwrap_or(f64::NAN);
        println!(
            "{:<14} {:>10.2} / {:>9.2} {:>10.2} / {:>9.2} {:>8.0}x",
            op,
            c("dirhash", smallest),
            c("linear", smallest),
            c("dirhash", largest),
            c("linear", largest),
            c("linear", largest) / c("dirhash", largest)
        );
    }
    if let Some(m) = r.memory.iter().max_by_key(|m| m.dir_bytes) {
        println!("index memory: {} bytes for a {}-byte directory = {:.3} bytes per directory byte (paper: 0.507)", m.hash_bytes, m.dir_bytes, m.bytes_per_dir_byte);
    }
}
