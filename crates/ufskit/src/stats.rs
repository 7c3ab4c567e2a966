//! `ufskit stats DIR`: the counters of the mount holding DIR, read from
//! its daemon over the control socket, and what dirhash knows about DIR.
use std::path::Path;
use ufs_fuse::control::{query, Request};

/// The daemon's answer (`query` has turned a refusal into an error) as
/// pretty JSON, or `line` of it.
fn answer(
    v: &serde_json::Value,
    json: bool,
    line: impl FnOnce(&serde_json::Value) -> String,
) -> Result<(), String> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(v).map_err(|e| e.to_string())?
        );
    } else {
        println!("{}", line(v));
    }
    Ok(())
}

pub fn cmd_stats(
    dir: &Path,
    json: bool,
    verify: bool,
    lowmem: bool,
    drop_caches: bool,
) -> Result<(), String> {
    if drop_caches {
        return answer(&query(dir, &Request::DropCaches)?, json, |v| {
            let cached = v
                .pointer("/stats/cache/bytes_cached")
                .and_then(|b| b.as_u64());
            format!("caches dropped: {} bytes left cached", cached.unwrap_or(0))
        });
    }
    if lowmem {
        return answer(&query(dir, &Request::Lowmem)?, json, |v| {
            let freed = v.get("freed_bytes").and_then(|f| f.as_u64()).unwrap_or(0);
            format!("low-memory event: dirhash freed {freed} bytes")
        });
    }
    let v = query(
        dir,
        &Request::Stats {
            path: dir.to_path_buf(),
            verify,
        },
    )?;
    if json {
        return answer(&v, true, |_| String::new());
    }
    let d = &v["dirhash"];
    let n = |k: &str| d[k].as_u64().unwrap_or(0);
    let cfg = &v["dirhash_config"];
    println!(
        "dirhash: {} (budget {} bytes, minimum directory {} bytes)",
        if cfg["enabled"].as_bool().unwrap_or(false) {
            "on"
        } else {
            "off"
        },
        n("maxmem"),
        cfg["minsize"].as_u64().unwrap_or(0)
    );
    println!(
        "  indexes:        {} in memory, {} bytes (peak {}), covering {} directory bytes",
        n("hashes"),
        n("mem_in_use"),
        n("mem_peak"),
        n("dir_bytes_hashed")
    );
    println!(
        "  built:          {}   refused (budget): {}   recycled: {}   dropped (rebuild): {}",
        n("built"),
        n("build_refused"),
        n("recycled"),
        n("dropped")
    );
    println!(
        "  low memory:     {} events, {} indexes / {} bytes freed",
        n("lowmem_events"),
        n("lowmem_freed"),
        n("lowmem_freed_bytes")
    );
    println!(
        "  lookups:        {} by hash, {} by sequential shortcut, {} linear",
        n("lookups_hash"),
        n("lookups_sequential"),
        n("lookups_linear")
    );
    println!(
        "  free slots by summary: {}   entries scanned linearly: {}",
        n("findfree_hash"),
        n("entries_scanned")
    );
    println!("  self-check failures: {}", n("check_failures"));
    if let Some(f) = v["last_check_failure"].as_str() {
        println!("  last failure: {f}");
    }
    if let Some(model) = v["disk_model"].as_str() {
        let k = &v["disk"];
        let f = |key: &str| k[key].as_f64().unwrap_or(0.0);
        println!("modeled disk {model}: {:.1} ms busy ({} requests: {} reads, {} writes; {} from its buffer, {} merged)", f("busy_ms"), k["requests"], k["reads"], k["writes"], k["buffer_hits"], k["merged"]);
        println!("  seeks: {} over {} cylinders, {:.1} ms; rotation {:.1} ms; transfer {:.1} ms; overhead {:.1} ms", k["seeks"], k["seek_cylinders"], f("seek_ms"), f("rotation_ms"), f("transfer_ms"), f("overhead_ms"));
    }
    let p = &v["placement"];
    println!(
        "inode order in large directories: {} ({} directories, {} ranges, {} inodes placed, {} on their goal, {} outside their range, {} recovered after mount)",
        v["inode_order"].as_str().unwrap_or("?"),
        p["directories"],
        p["ranges"],
        p["placed"],
        p["on_goal"],
        p["fallbacks"],
        p["recovered"]
    );
    let o = &v["order"];
    println!(
        "write ordering: {}{} ({} changes, {} waited, {} writes rolled back, {} forced writes, {} flushes, {} releases deferred, {} changes pending)",
        o["mode"].as_str().unwrap_or("?"),
        match (o["mode"].as_str(), o["barrier"].as_str()) {
            (Some("async"), _) => " (unsafe after a crash)",
            (_, Some("write")) => ", barrier=write (ordered by completion: holds for a killed daemon, not a power cut)",
            (_, Some("flush")) => ", barrier=flush (ordered by cache flushes: holds across a power cut)",
            _ => "",
        },
        o["changes"],
        o["held"],
        o["rollbacks"],
        o["forced_writes"],
        o["flushes"],
        o["deferred_frees"],
        o["pending_now"]
    );
    println!(
        "  background syncs: {} ({} rounds in all, the longest {})",
        o["background_syncs"], o["background_rounds"], o["longest_background_sync"]
    );
    if o["syncer_hurried"].as_u64().unwrap_or(0) + o["writer_syncs"].as_u64().unwrap_or(0) > 0 {
        println!(
            "  past the state's bound: {} operations hurried the syncer, {} of them waited for it, {} wrote everything themselves",
            o["syncer_hurried"], o["writer_waits"], o["writer_syncs"]
        );
    }
    if let Some(why) = v["failure"].as_str() {
        println!(
            "WRITING STOPPED: {why} (the file system stays marked unclean; unmount and run fsck)"
        );
    }
    let fr = &v["fuse_requests"];
    if let Some(by) = fr["by_op"].as_object() {
        let mut ops: Vec<(&String, u64)> = by
            .iter()
            .map(|(k, n)| (k, n.as_u64().unwrap_or(0)))
            .collect();
        ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = ops.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!("FUSE requests: {} ({})", fr["total"], list.join(", "));
        let rings = fr["ring_threads"].as_u64().unwrap_or(0);
        if rings > 0 {
            println!(
                "  transport: io_uring, {rings} ring threads ({} requests through the rings; forgets and the first requests through /dev/fuse)",
                fr["via_uring"]
            );
        } else {
            println!("  transport: /dev/fuse");
        }
        let holds = fr["cpu_latency_holds"].as_u64().unwrap_or(0);
        if holds > 0 {
            println!(
                "  CPU latency 0 held {holds} times while requests flowed, {} ms in all (-o cpulatency)",
                fr["cpu_latency_held_ms"]
            );
        }
        let turns = fr["spin_turns"].as_u64().unwrap_or(0);
        if turns > 0 {
            println!(
                "  ring threads polled between requests {turns} times, {} ms in all, {} requests picked up while polling, {} stops by CPU pressure (-o spin)",
                fr["spin_polling_ms"], fr["spin_hits"], fr["spin_pressure_stops"]
            );
        }
        let shared = fr["share_turns"].as_u64().unwrap_or(0);
        if shared > 0 {
            println!(
                "  ring threads shared their clients' CPUs in the idle scheduling class {shared} times, {} ms in all; {} stops by CPU pressure in all (-o share)",
                fr["share_ms"], fr["spin_pressure_stops"]
            );
        }
        let bare = fr["bare_entries"].as_u64().unwrap_or(0);
        if bare > 0 {
            println!(
                "  listing entries sent as names alone: {bare}; files went bare {} times, full again {} times (-o readdirplus=auto)",
                fr["bare_turns"], fr["full_turns"]
            );
        }
    }
    let l = &v["lock"];
    let takes = l["takes"].as_u64().unwrap_or(0);
    if takes > 0 {
        let waits = l["waits"].as_u64().unwrap_or(0);
        let ms = |k: &str| l[k].as_u64().unwrap_or(0) as f64 / 1e6;
        println!(
            "engine lock: taken {takes} times, held {:.1} ms in all; {waits} takes ({:.2}%) found it held and waited, {:.1} ms in all",
            ms("held_ns"),
            100.0 * waits as f64 / takes as f64,
            ms("wait_ns")
        );
    }
    let c = &v["cache"];
    println!(
        "buffer cache: {} of {} bytes held, {} evictions",
        c["bytes_cached"], c["limit_bytes"], c["evictions"]
    );
    let w = &c["warm"];
    if w["asks"].as_u64().unwrap_or(0) > 0 {
        println!(
            "  new buffers: {} asked for while ring threads made memory ahead, {} of them warm ({} pages made, {} bytes in stock)",
            w["asks"], w["hits"], w["pages_made"], w["stocked_bytes"]
        );
    }
    if let Some(kinds) = c["by_kind"].as_object() {
        for (kind, k) in kinds {
            let n = |key: &str| k[key].as_u64().unwrap_or(0);
            if n("hits") + n("misses") + n("writes") == 0 {
                continue;
            }
            println!(
                "  {kind:<10} {} hits, {} misses, {} reads ({} bytes), {} writes ({} bytes)",
                n("hits"),
                n("misses"),
                n("reads"),
                n("read_bytes"),
                n("writes"),
                n("write_bytes")
            );
        }
    }
    match (c["dir_pool_limit"].as_u64(), c["dir_pool_shared_bytes"].as_u64()) {
        (Some(lim), Some(others)) => println!(
            "vmiodir: off (directory blocks in FreeBSD 4.5's buffer space of {lim} bytes: {} bytes of them, {others} of the other blocks that passed through it)",
            c["dir_pool_bytes"]
        ),
        (Some(lim), None) => println!(
            "vmiodir: off (directory blocks in a pool of {lim} bytes, {} in use)",
            c["dir_pool_bytes"]
        ),
        (None, _) => println!("vmiodir: on (directory blocks share the buffer cache)"),
    }
    let di = &v["dir"];
    if di.is_object() {
        let hashed = di["hashed"].as_bool().unwrap_or(false);
        print!(
            "{}: inode {}, {} bytes, ",
            dir.display(),
            di["ino"],
            di["dir_bytes"]
        );
        if hashed {
            let ib = di["index_bytes"].as_u64().unwrap_or(0);
            let db = di["dir_bytes"].as_u64().unwrap_or(1).max(1);
            print!(
                "hashed ({ib} bytes, {:.3} bytes per directory byte, score {})",
                ib as f64 / db as f64,
                di["score"]
            );
        } else {
            print!("not hashed");
        }
        match di["verified"].as_bool() {
            Some(true) => println!(", index verified against the blocks"),
            Some(false) => println!(", nothing to verify"),
            None => println!(),
        }
    }
    Ok(())
}
