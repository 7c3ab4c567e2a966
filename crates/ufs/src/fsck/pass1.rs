//! Pass 1: cylinder-group headers, every initialised inode, block claims;
//! pass 1b: every owner of a block claimed twice.
use super::walk::{self, BlockRef, Kind, Step, Visitor};
use super::*;
use ufs_format::bytes::{low_u32, to_i32, to_index, to_signed};
use ufs_format::dinode::*;

const P1: &str = "pass1";
/// Bad or duplicate claims tolerated per inode before giving up on it.
const MAXBAD: u32 = 10;
/// Largest directory size (`MAXDIRSIZE`).
const MAXDIRSIZE: u64 = 0x7FFF_FFFF;
/// Bytes of inode table read at once.
const INOBUF: u64 = 1 << 20;

/// Integrity check of a cylinder-group header (`check_cgmagic`): `None` if
/// fine, else what is wrong. `b` holds the group's `cgsize` bytes.
pub(super) fn cg_header_problem(ctx: &Ctx, c: u64, b: &[u8], proto: &Cg) -> Option<String> {
    let g = &ctx.g;
    let cg = Cg::view(b, g.v.endian, to_index(g.cgsize));
    if ctx.ck_cg {
        let h = cg.compute_ckhash();
        let stored = cg.cg_ckhash();
        if h != stored {
            return Some(format!("check-hash {stored:#x} should be {h:#x}"));
        }
    }
    if cg.cg_magic() != CG_MAGIC {
        return Some(format!(
            "cg_magic {:#x} should be {CG_MAGIC:#x}",
            cg.cg_magic()
        ));
    }
    if cg.cg_cgx() as u64 != c {
        return Some(format!("cg_cgx {} should be {c}", cg.cg_cgx()));
    }
    let ndblk = g.fpg.min(g.size - g.cgbase(c));
    // A count short of the group's size, as a growfs cut short leaves the
    // formerly last group, is a header fault pass 5 repairs ("SUMMARY
    // INFORMATION BAD", with the maps): fsck_ffs's check_cgmagic asks only
    // cg_ndblk <= fs_fpg. Past the group's size it is damage.
    let disk_ndblk = cg.cg_ndblk() as u64;
    if disk_ndblk > ndblk || disk_ndblk == 0 {
        return Some(format!("cg_ndblk {disk_ndblk} should be {ndblk}"));
    }
    if g.v.is_ufs1() {
        // UFS1 counts its inodes in the old 16-bit field and keeps the
        // old tables before the inode map (check_cgmagic's UFS1 rules).
        // The field is FreeBSD's int16_t holding up to 65535 inodes: its
        // bit pattern is the count.
        if u64::from(cg.cg_old_niblk().cast_unsigned()) != g.ipg {
            return Some(format!(
                "cg_old_niblk {} should be {}",
                cg.cg_old_niblk(),
                g.ipg
            ));
        }
        // Every group spans fs_old_cpg cylinders (check_cgmagic); the last
        // one of an old multi-cylinder file system may span fewer, as
        // pass 5 counts them: howmany(ndblk, fpg / cpg).
        let last = c + 1 == g.ncg;
        let short = disk_ndblk
            .div_ceil((g.fpg / g.old_cpg.max(1)).max(1))
            .min(g.old_cpg);
        let ncyl = i64::from(cg.cg_old_ncyl());
        let is = |n: u64| i64::try_from(n) == Ok(ncyl);
        if !(is(g.old_cpg) || (last && is(short))) {
            return Some(format!(
                "cg_old_ncyl {ncyl} should be {}",
                if last { short } else { g.old_cpg }
            ));
        }
        if cg.cg_niblk() != 0 || cg.cg_initediblk() != 0 {
            return Some(format!(
                "cg_niblk {} and cg_initediblk {} should be 0 in a UFS1 group",
                cg.cg_niblk(),
                cg.cg_initediblk()
            ));
        }
        for (name, have, want) in [
            (
                "cg_old_btotoff",
                cg.cg_old_btotoff() as i64,
                proto.cg_old_btotoff() as i64,
            ),
            (
                "cg_old_boff",
                cg.cg_old_boff() as i64,
                proto.cg_old_boff() as i64,
            ),
        ] {
            if have != want {
                return Some(format!("{name} {have} should be {want}"));
            }
        }
    } else {
        if cg.cg_niblk() as u64 != g.ipg {
            return Some(format!("cg_niblk {} should be {}", cg.cg_niblk(), g.ipg));
        }
        let inited = cg.cg_initediblk() as u64;
        if inited > g.ipg {
            return Some(format!("cg_initediblk {inited} exceeds fs_ipg {}", g.ipg));
        }
        if !inited.is_multiple_of(g.inopb) {
            return Some(format!(
                "cg_initediblk {inited} is not a multiple of {} inodes per block",
                g.inopb
            ));
        }
    }
    for (name, have, want) in [
        ("cg_iusedoff", cg.cg_iusedoff(), proto.cg_iusedoff()),
        ("cg_freeoff", cg.cg_freeoff(), proto.cg_freeoff()),
        (
            "cg_nextfreeoff",
            cg.cg_nextfreeoff(),
            proto.cg_nextfreeoff(),
        ),
    ] {
        if have != want {
            return Some(format!("{name} {have} should be {want}"));
        }
    }
    if g.contigsumsize > 0 {
        let ncl = disk_ndblk / g.frag;
        if cg.cg_nclusterblks() as u64 != ncl {
            return Some(format!(
                "cg_nclusterblks {} should be {ncl}",
                cg.cg_nclusterblks()
            ));
        }
        for (name, have, want) in [
            (
                "cg_clustersumoff",
                cg.cg_clustersumoff(),
                proto.cg_clustersumoff(),
            ),
            ("cg_clusteroff", cg.cg_clusteroff(), proto.cg_clusteroff()),
        ] {
            if have != want {
                return Some(format!("{name} {have} should be {want}"));
            }
        }
    }
    None
}

pub(super) fn pass1(ctx: &mut Ctx) -> R<()> {
    let g = ctx.g;
    // Space the file system itself uses.
    for c in 0..g.ncg {
        let start = if c == 0 { 0 } else { g.cgsblock(c) };
        ctx.used.set_range(start, g.cgdmin(c));
    }
    ctx.used
        .set_range(g.csaddr, g.csaddr + g.cssize.div_ceil(g.fsize));
    ctx.used.set_range(g.size, g.size.div_ceil(g.frag) * g.frag);

    let proto = Cg::new_layout(&g, 0);
    ctx.cgs = (0..g.ncg).map(|_| CgInfo::default()).collect();
    for c in 0..g.ncg {
        let b = ctx.read_frags(g.cgtod(c), g.cgsize.div_ceil(g.fsize))?;
        let b = &b[..to_index(g.cgsize)];
        let problem = cg_header_problem(ctx, c, b, &proto);
        let view = Cg::view(b, g.v.endian, to_index(g.cgsize));
        // UFS1 groups have every inode initialised (newfs wrote them all).
        let disk_inited = if g.lazy_inodes() {
            view.cg_initediblk() as u64
        } else {
            g.ipg
        };
        let trusted = view.cg_magic() == CG_MAGIC
            && view.cg_cgx() as u64 == c
            && disk_inited <= g.ipg
            && disk_inited.is_multiple_of(g.inopb);
        let sound = problem.is_none();
        if let Some(why) = problem {
            let fix = ctx.ask(
                P1,
                Severity::Inconsistency,
                None,
                format!(
                    "CYLINDER GROUP {c}: INTEGRITY CHECK FAILED ({why}); REBUILD CYLINDER GROUP"
                ),
            )?;
            ctx.cgs[to_index(c)].corrupt = true;
            ctx.cgs[to_index(c)].rebuild = fix;
        }
        let inosused = if trusted { disk_inited } else { g.ipg };
        // With soft updates, preen trusts the inode map (fsck_ffs pass1):
        // no inode past the last one marked used is read, so a name of
        // such an inode is a name of an unallocated inode. Only the scan
        // is shorter: the group still counts the inodes it initialised.
        let scanned = if ctx.mode == FsckMode::Preen
            && ctx.sb.fs_flags() & FS_DOSOFTDEP != 0
            && trusted
            && sound
        {
            last_used_inode(&view, b, inosused).unwrap_or(inosused)
        } else {
            inosused
        };
        {
            // Both at most ipg (inosused is disk_inited only when that is
            // within ipg), which validation keeps within 2^31.
            let ci = &mut ctx.cgs[to_index(c)];
            ci.initediblk_disk = low_u32(disk_inited.min(g.ipg));
            ci.initediblk = low_u32(inosused);
        }
        scan_group(ctx, c, scanned)?;
        ctx.report("pass 1", c + 1, g.ncg);
        let ci = &mut ctx.cgs[to_index(c)];
        // Trim the table to the last allocated inode.
        let last = ci
            .inos
            .iter()
            .rposition(|x| x.state != USTATE)
            .map_or(0, |i| i + 1);
        ci.inos.truncate(last);
        ci.inos.shrink_to_fit();
        if !trusted && g.lazy_inodes() {
            // A rebuilt group keeps the initialised inodes it was found to use.
            let want = (last as u64).max(2 * g.inopb).div_ceil(g.inopb) * g.inopb;
            ci.initediblk = low_u32(want.min(g.ipg));
        }
    }
    Ok(())
}

/// One past the last inode below `n` that the group's inode map (in the
/// group's bytes `cg`) marks used; None when the map lies outside `cg`.
fn last_used_inode(view: &Cg, cg: &[u8], n: u64) -> Option<u64> {
    let off = view.cg_iusedoff() as usize;
    let map = cg.get(off..off.checked_add(to_index(n.div_ceil(8)))?)?;
    Some(
        (0..n)
            .rev()
            .find(|&i| map[to_index(i / 8)] & (1 << (i % 8)) != 0)
            .map_or(0, |i| i + 1),
    )
}

/// Reads and checks inodes `0..n` of group `c`.
fn scan_group(ctx: &mut Ctx, c: u64, n: u64) -> R<()> {
    let g = ctx.g;
    let ds = g.dinode_size();
    let per_read = (INOBUF / ds as u64).max(g.inopb) / g.inopb * g.inopb;
    let mut idx = 0;
    while idx < n {
        let cnt = per_read.min(n - idx);
        let first = c * g.ipg + idx;
        let off = ctx.ino_offset(first);
        let buf = ctx.read_bytes(off, to_index(cnt) * ds)?;
        for k in 0..cnt {
            let ino = first + k;
            let k = to_index(k);
            let disk = &buf[k * ds..(k + 1) * ds];
            let di = Dinode::decode(g.v, disk);
            let hash = if ctx.ck_inode {
                Dinode::ckhash_mismatch(g.v, disk)
            } else {
                None
            };
            check_inode(ctx, ino, di, hash)?;
        }
        idx += cnt;
    }
    Ok(())
}

/// Is a device inode's number `NODEV` ((dev_t)-1): all ones in its
/// `di_rdev`, 64-bit in UFS2 and 32-bit in UFS1 (where FreeBSD's `DIP`
/// sign-extends it).
fn is_nodev(g: &Geometry, di: &Dinode) -> bool {
    if g.v.is_ufs1() {
        di.di_rdev() == u32::MAX
    } else {
        di.di_db(0) == u64::MAX
    }
}

fn ftype_ok(t: u16) -> bool {
    matches!(t, IFDIR | IFREG | IFBLK | IFCHR | IFLNK | IFSOCK | IFIFO)
}

/// Checks one inode (`checkinode`).
/// `hash`: the inode's check-hash as (stored, computed) when they differ.
fn check_inode(ctx: &mut Ctx, ino: u64, mut di: Dinode, hash: Option<(u32, u32)>) -> R<()> {
    let g = ctx.g;
    let mut dirty = false;
    if let Some((stored, computed)) = hash.filter(|_| di.di_mode() != 0) {
        if ctx.ask(
            P1,
            Severity::Preen,
            Some(ino),
            format!(
                "INODE {ino}: CHECK-HASH FAILED (stored {stored:#x}, computed {computed:#x}); FIX"
            ),
        )? {
            dirty = true;
        }
    }
    if ino < UFS_ROOTINO {
        if dirty {
            ctx.write_inode(ino, &mut di)?;
        }
        return Ok(());
    }
    let mode = di.file_type();
    let size = di.di_size();
    if mode == 0 {
        let ptrs =
            (0..UFS_NDADDR).any(|i| di.di_db(i) != 0) || (0..UFS_NIADDR).any(|i| di.di_ib(i) != 0);
        if (di.di_mode() != 0 || size != 0 || ptrs)
            && ctx.ask(
                P1,
                Severity::Inconsistency,
                Some(ino),
                format!("PARTIALLY ALLOCATED INODE I={ino}; CLEAR"),
            )?
        {
            let gen = di.di_gen();
            di = Dinode::default();
            di.set_di_gen(gen);
            dirty = true;
        }
        if dirty {
            ctx.write_inode(ino, &mut di)?;
        }
        return Ok(());
    }
    // Shape checks: failures make the inode unusable ("unknown").
    let unknown = if size > ctx.file_size_limit || (mode == IFDIR && size > MAXDIRSIZE) {
        Some(format!("BAD FILE SIZE {size}"))
    } else if matches!(mode, IFBLK | IFCHR | IFIFO | IFSOCK) && size != 0 {
        Some(format!("BAD SPECIAL-FILE SIZE {size}"))
    } else if matches!(mode, IFBLK | IFCHR) && is_nodev(&g, &di) {
        Some("BAD SPECIAL-FILE RDEV".to_string())
    } else {
        None
    };
    if let Some(m) = unknown {
        return clear_unknown(ctx, ino, di, &m);
    }
    // Pointer slots past what the size needs must be empty. A short
    // symlink's are bytes: past its target, rounded up to a pointer's
    // width (`howmany(size, sizeof(daddr))` slots, fsck_ffs' checkinode),
    // the pointer area must be zero.
    if mode == IFLNK && size < g.maxsymlinklen() as u64 {
        let w = g.v.ptr_size();
        let keep = to_index(size.div_ceil(w as u64)) * w;
        let area = &di.shortlink()[..g.maxsymlinklen()];
        if let Some(first) = area[keep..].iter().position(|&b| b != 0) {
            let slot = (keep + first) / w;
            if ctx.ask(
                P1,
                Severity::Inconsistency,
                Some(ino),
                format!(
                    "INVALID DIRECT BLOCK IN SLOT {slot} OF SHORT SYMLINK I={ino} (SIZE {size}); CLEAR"
                ),
            )? {
                let text = area[..keep].to_vec();
                di.set_shortlink(&text);
                dirty = true;
            }
        }
    } else {
        let mut ndb: i128 = size.div_ceil(g.bsize) as i128;
        if matches!(mode, IFBLK | IFCHR) {
            ndb += 1;
        }
        for j in usize::try_from(ndb.max(0)).unwrap_or(usize::MAX)..UFS_NDADDR {
            if di.di_db(j) != 0
                && ctx.ask(
                    P1,
                    Severity::Inconsistency,
                    Some(ino),
                    format!(
                        "INVALID DIRECT BLOCK {} IN SLOT {j} OF I={ino} (SIZE {size}); CLEAR",
                        di.di_db(j)
                    ),
                )?
            {
                di.set_di_db(j, 0);
                dirty = true;
            }
        }
        let mut levels = 0;
        let mut rest = ndb - UFS_NDADDR as i128;
        while rest > 0 {
            levels += 1;
            rest /= g.nindir as i128;
        }
        for j in levels.min(UFS_NIADDR)..UFS_NIADDR {
            if di.di_ib(j) != 0
                && ctx.ask(
                    P1,
                    Severity::Inconsistency,
                    Some(ino),
                    format!(
                        "INVALID INDIRECT BLOCK {} AT LEVEL {} OF I={ino} (SIZE {size}); CLEAR",
                        di.di_ib(j),
                        j + 1
                    ),
                )?
            {
                di.set_di_ib(j, 0);
                dirty = true;
            }
        }
    }
    if !ftype_ok(mode) {
        let why = format!("UNKNOWN FILE TYPE {:o}", di.di_mode());
        return clear_unknown(ctx, ino, di, &why);
    }
    let nlink = di.nlink();
    let state = if mode == IFDIR {
        if size == 0 {
            DCLEAR
        } else if nlink == 0 {
            DZLINK
        } else {
            DSTATE
        }
    } else if nlink == 0 {
        FZLINK
    } else {
        FSTATE
    };
    if let Some(x) = ctx.info_mut(ino) {
        *x = InoInfo {
            state,
            dtype: iftodt(di.di_mode()),
            linkcnt: to_i32(nlink),
        };
    }
    if mode == IFDIR {
        ctx.add_dir(DirInfo {
            ino,
            parent: 0,
            dotdot: 0,
            dotdot_counted: false,
            size,
            depth: di.di_freelink(),
            first_blk: di.di_db(0),
            created: false,
        });
    }
    if let Some(why) = ext_area_problem(ctx, &di)? {
        if ctx.ask(
            P1,
            Severity::Inconsistency,
            Some(ino),
            format!("CORRUPT EXTENDED ATTRIBUTES I={ino} ({why}); CLEAR"),
        )? {
            // Its blocks, no longer claimed, are freed in pass 5 and the
            // block count corrected below.
            di.set_di_extsize(0);
            for j in 0..UFS_NXADDR {
                di.set_di_extb(j, 0);
            }
            dirty = true;
        }
    }
    // Claim the blocks.
    let mut v = Claim {
        ino,
        runs: 0,
        bad: 0,
        dup: 0,
        tally: 0,
        lballoc: -1,
        lbns: Vec::new(),
        is_dir: mode == IFDIR,
        trunc_asked: false,
    };
    walk::walk(ctx, &di, size, &mut v)?;
    let doomed = matches!(ctx.state(ino), FCLEAR | DCLEAR) && state != DCLEAR;
    if !doomed {
        let want = v.tally * (g.fsize / 512);
        if di.di_blocks() != want
            && ctx.ask(
                P1,
                Severity::Preen,
                Some(ino),
                format!(
                    "INCORRECT BLOCK COUNT I={ino} ({} should be {want}); CORRECT",
                    di.di_blocks()
                ),
            )?
        {
            di.set_di_blocks(want);
            dirty = true;
        }
        let short_link = mode == IFLNK && size < g.maxsymlinklen() as u64;
        // A directory is checked here only past its direct blocks (as in
        // FreeBSD): a hole at its end in the direct area is pass 2's
        // "CONTAINS EMPTY BLOCKS" below.
        let past_direct = size > UFS_NDADDR as u64 * g.bsize;
        // The size the rest of the checks go by: shortened here when the
        // finding below is made, even if the fix is declined (-n), so a
        // directory's hole at its end is not reported twice.
        let mut dsize = size;
        if (mode != IFDIR || past_direct)
            && !short_link
            && size > 0
            && v.lballoc < to_signed(g.lblkno(size - 1))
        {
            // lballoc is at least -1.
            let fixsize = u64::try_from(v.lballoc + 1).unwrap_or(0) * g.bsize;
            let sev = if past_direct {
                Severity::Preen
            } else {
                Severity::Inconsistency
            };
            dsize = fixsize;
            if ctx.ask(
                P1,
                sev,
                Some(ino),
                format!("INODE {ino}: FILE SIZE {size} BEYOND END OF ALLOCATED FILE, SIZE SHOULD BE {fixsize}; ADJUST"),
            )? {
                di.set_di_size(fixsize);
                dirty = true;
            }
            if let Some(d) = ctx.dir_mut(ino) {
                d.size = fixsize;
            }
        }
        if mode == IFDIR && state != DCLEAR {
            let ndb = dsize.div_ceil(g.bsize);
            v.lbns.sort_unstable();
            v.lbns.dedup();
            let have = v.lbns.iter().filter(|&&l| l < ndb).count() as u64;
            if have < ndb {
                let hole = v
                    .lbns
                    .iter()
                    .enumerate()
                    .find(|&(i, &l)| l != i as u64)
                    .map_or(have, |(i, _)| i as u64);
                if ctx.ask(
                    P1,
                    Severity::Inconsistency,
                    Some(ino),
                    format!("DIRECTORY I={ino}: CONTAINS EMPTY BLOCKS (first at logical block {hole}); ADJUST LENGTH"),
                )? {
                    if dirty {
                        ctx.write_inode(ino, &mut di)?;
                        dirty = false;
                    }
                    dirops::truncate_dir(ctx, ino, hole * g.bsize)?;
                    di = ctx.read_inode(ino)?;
                    if di.di_size() == 0 {
                        ctx.set_state(ino, DCLEAR);
                    }
                }
                if let Some(d) = ctx.dir_mut(ino) {
                    // Pass 2 reads only up to the hole.
                    d.size = d.size.min(hole * g.bsize);
                }
            }
        }
    }
    if dirty {
        ctx.write_inode(ino, &mut di)?;
    }
    Ok(())
}

/// What makes the extended attribute area of `di` unreadable, if anything:
/// a size past the room `UFS_NXADDR` blocks give, a block missing or out of
/// range, or records that break `ffs_findextattr`'s rules. (FreeBSD's
/// fsck_ffs leaves the area to the kernel: its `eascan` is compiled out.)
fn ext_area_problem(ctx: &Ctx, di: &Dinode) -> R<Option<String>> {
    let g = ctx.g;
    let size = di.di_extsize() as u64;
    if size == 0 {
        return Ok(None);
    }
    let room = UFS_NXADDR as u64 * g.bsize;
    if size > room {
        return Ok(Some(format!("size {size}, room for {room}")));
    }
    for j in size.div_ceil(g.bsize)..UFS_NXADDR as u64 {
        if di.di_extb(to_index(j)) != 0 {
            return Ok(Some(format!(
                "block {j} at {} past the area's {size} bytes",
                di.di_extb(to_index(j))
            )));
        }
    }
    let mut area = Vec::with_capacity(to_index(size));
    for j in 0..size.div_ceil(g.bsize) {
        let blk = di.di_extb(to_index(j));
        let nfrags = g.numfrags(g.blksize(size, j));
        if blk == 0 {
            return Ok(Some(format!("block {j} missing")));
        }
        if ctx.chkrange(blk, nfrags) {
            return Ok(Some(format!("block {j} at {blk} out of range")));
        }
        let b = ctx.read_frags(blk, nfrags)?;
        let n = to_index((size - j * g.bsize).min(g.bsize));
        area.extend_from_slice(&b[..n.min(b.len())]);
    }
    Ok(ufs_format::extattr::parse_area(g.v.endian, &area)
        .err()
        .map(|e| e.to_string()))
}

fn clear_unknown(ctx: &mut Ctx, ino: u64, mut di: Dinode, why: &str) -> R<()> {
    ctx.set_state(ino, USTATE);
    if ctx.ask(
        P1,
        Severity::Inconsistency,
        Some(ino),
        format!("{why} I={ino}; CLEAR"),
    )? {
        let gen = di.di_gen();
        di = Dinode::default();
        di.set_di_gen(gen);
        ctx.write_inode(ino, &mut di)?;
    }
    Ok(())
}

/// Marks an inode with a bad or duplicate block (`blkerror`).
fn blkerror(ctx: &mut Ctx, ino: u64) {
    let s = ctx.state(ino);
    let n = match s {
        FSTATE | FZLINK => FCLEAR,
        DSTATE | DZLINK | DFOUND => DCLEAR,
        other => other,
    };
    ctx.set_state(ino, n);
}

/// Pass-1 claims (`pass1check`).
struct Claim {
    ino: u64,
    /// Runs visited so far.
    runs: u64,
    bad: u32,
    dup: u32,
    /// Fragments claimed, counted for `di_blocks`.
    tally: u64,
    lballoc: i64,
    lbns: Vec<u64>,
    is_dir: bool,
    trunc_asked: bool,
}

impl Visitor for Claim {
    fn visit(&mut self, ctx: &mut Ctx, r: &BlockRef) -> R<Step> {
        let ino = self.ino;
        let anyout = ctx.chkrange(r.blk, r.nfrags);
        if anyout {
            ctx.ask(
                P1,
                Severity::Inconsistency,
                Some(ino),
                format!("{} BAD I={ino} (block out of range); CLEAR INODE", r.blk),
            )?;
            blkerror(ctx, ino);
            self.bad += 1;
            if self.bad > MAXBAD {
                ctx.ask(
                    P1,
                    Severity::Inconsistency,
                    Some(ino),
                    format!("EXCESSIVE BAD BLKS I={ino}; SKIPPING REST OF INODE"),
                )?;
                ctx.claim_limit.insert(ino, (self.runs, 0));
                return Ok(Step::Stop);
            }
        }
        self.runs += 1;
        let mut res = Step::Continue;
        let mut dup_reported = false;
        for f in r.blk..r.blk.saturating_add(r.nfrags) {
            if anyout && ctx.chkrange(f, 1) {
                res = Step::Skip;
            } else if !ctx.used.test(f) {
                ctx.used.set(f);
            } else {
                if !dup_reported {
                    ctx.ask(
                        P1,
                        Severity::Inconsistency,
                        Some(ino),
                        format!("{f} DUP I={ino} (fragment already in use); CLEAR INODES"),
                    )?;
                    dup_reported = true;
                }
                blkerror(ctx, ino);
                *ctx.dups.entry(f).or_insert(0) += 1;
                self.dup += 1;
                if self.dup > MAXBAD {
                    self.tally += 1;
                    ctx.ask(
                        P1,
                        Severity::Inconsistency,
                        Some(ino),
                        format!("EXCESSIVE DUP BLKS I={ino}; SKIPPING REST OF INODE"),
                    )?;
                    ctx.claim_limit.insert(ino, (self.runs - 1, f - r.blk + 1));
                    return Ok(Step::Stop);
                }
            }
            self.tally += 1;
        }
        if let Kind::Data { lbn } = r.kind {
            let lbn_signed = to_signed(lbn);
            if lbn_signed > self.lballoc {
                self.lballoc = lbn_signed;
            }
            if self.is_dir && self.lbns.len() < (1 << 22) {
                self.lbns.push(lbn);
            }
        }
        Ok(res)
    }

    fn trailing(&mut self, ctx: &mut Ctx, blk: u64, count: usize) -> R<bool> {
        // Entries of an indirect block shared with another inode belong to
        // that inode: never zero them.
        if (blk..blk + ctx.g.frag).any(|f| ctx.dups.contains_key(&f)) {
            return Ok(false);
        }
        if self.trunc_asked && ctx.mode != FsckMode::Yes {
            return Ok(false);
        }
        self.trunc_asked = true;
        ctx.ask(
            P1,
            Severity::Inconsistency,
            Some(self.ino),
            format!("PARTIALLY TRUNCATED INODE I={} ({count} pointers past the end in block {blk}); FIX", self.ino),
        )
    }
}

/// Pass 1b: find the first claimer of every duplicate fragment.
pub(super) fn pass1b(ctx: &mut Ctx) -> R<()> {
    if ctx.dups.is_empty() {
        return Ok(());
    }
    let g = ctx.g;
    for c in 0..g.ncg {
        let n = ctx.cgs[to_index(c)].inos.len() as u64;
        let mut idx = 0;
        while idx < n {
            let ino = c * g.ipg + idx;
            idx += 1;
            if !matches!(ctx.state(ino), FSTATE | FZLINK | DSTATE | DZLINK) {
                continue;
            }
            let di = ctx.read_inode(ino)?;
            let mut v = FindDups { hit: None };
            walk::walk(ctx, &di, di.di_size().min(ctx.file_size_limit), &mut v)?;
            if let Some(f) = v.hit {
                ctx.ask(
                    "pass1b",
                    Severity::Inconsistency,
                    Some(ino),
                    format!("{f} DUP I={ino} (first owner of a shared fragment); CLEAR INODE"),
                )?;
                blkerror(ctx, ino);
            }
        }
    }
    Ok(())
}

struct FindDups {
    hit: Option<u64>,
}

impl Visitor for FindDups {
    fn visit(&mut self, ctx: &mut Ctx, r: &BlockRef) -> R<Step> {
        let anyout = ctx.chkrange(r.blk, r.nfrags);
        for f in r.blk..r.blk.saturating_add(r.nfrags) {
            if anyout && ctx.chkrange(f, 1) {
                continue;
            }
            if ctx.dups.contains_key(&f) {
                self.hit = Some(f);
                return Ok(Step::Stop);
            }
        }
        Ok(if anyout { Step::Skip } else { Step::Continue })
    }
}
