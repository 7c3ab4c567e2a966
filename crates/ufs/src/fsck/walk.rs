//! Walking the blocks of an inode the way `ckinode`/`iblock` do: extended
//! attribute blocks, the 12 direct blocks (the last one of a small file
//! being a fragment run of `fragroundup(blkoff(size))`), then the indirect
//! trees, reading in each indirect block only the entries the file size
//! needs (`nif`). Device nodes and short symlinks have no blocks.
use super::*;
use ufs_format::bytes::{to_index, to_signed};

#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Data {
        lbn: u64,
    },
    /// An indirect block whose first data block is `lbn`.
    Indir {
        lbn: u64,
    },
    Ext,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockRef {
    pub kind: Kind,
    pub blk: u64,
    pub nfrags: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
    /// Go on (and read this indirect block).
    Continue,
    /// Do not read this indirect block.
    Skip,
    /// End the walk.
    Stop,
}

pub(crate) trait Visitor {
    fn visit(&mut self, ctx: &mut Ctx, r: &BlockRef) -> R<Step>;
    /// `count` nonzero entries past the ones the file size needs in the
    /// indirect block at `blk`; returning true zeroes them on disk.
    fn trailing(&mut self, _ctx: &mut Ctx, _blk: u64, _count: usize) -> R<bool> {
        Ok(false)
    }
}

/// Does this inode keep block pointers (as opposed to a device number or
/// an inline symlink)?
pub(crate) fn has_blocks(g: &Geometry, di: &Dinode) -> bool {
    use ufs_format::dinode::*;
    match di.file_type() {
        IFBLK | IFCHR => false,
        IFLNK => di.di_size() >= g.maxsymlinklen() as u64,
        _ => true,
    }
}

/// A snapshot's block map holds two values that are not addresses
/// (`sys/ufs/ffs/fs.h`): `BLK_NOCOPY`, a block that was free when the
/// snapshot was taken, and `BLK_SNAP`, a block of a snapshot itself. Both
/// mean "nothing to read here", and neither is counted (`pass1check` with
/// `id_type == SNAP`).
pub(crate) const BLK_NOCOPY: u64 = 1;
pub(crate) const BLK_SNAP: u64 = 2;

fn is_snapshot(di: &Dinode) -> bool {
    di.is_reg() && di.di_flags() & ufs_format::SF_SNAPSHOT != 0
}

/// Is `blk`, found in `di`'s block map, a block to visit?
fn visits(snapshot: bool, blk: u64) -> bool {
    blk != 0 && !(snapshot && (blk == BLK_NOCOPY || blk == BLK_SNAP))
}

/// Walks `di` as if its size were `size`.
pub(crate) fn walk(ctx: &mut Ctx, di: &Dinode, size: u64, v: &mut dyn Visitor) -> R<Step> {
    let g = ctx.g;
    let snap = is_snapshot(di);
    let extsize = di.di_extsize() as u64;
    if extsize > 0 {
        let mut ndb = to_signed(extsize.div_ceil(g.bsize));
        for j in 0..UFS_NXADDR {
            ndb -= 1;
            let off = g.blkoff(extsize);
            let nfrags = if ndb == 0 && off != 0 {
                g.numfrags(g.fragroundup(off))
            } else {
                g.frag
            };
            let blk = di.di_extb(j);
            if blk == 0 {
                continue;
            }
            if v.visit(
                ctx,
                &BlockRef {
                    kind: Kind::Ext,
                    blk,
                    nfrags,
                },
            )? == Step::Stop
            {
                return Ok(Step::Stop);
            }
        }
    }
    if !has_blocks(&g, di) {
        return Ok(Step::Continue);
    }
    let mut ndb = size.div_ceil(g.bsize) as i128;
    for i in 0..UFS_NDADDR {
        ndb -= 1;
        let off = g.blkoff(size);
        let nfrags = if ndb == 0 && off != 0 {
            g.numfrags(g.fragroundup(off))
        } else {
            g.frag
        };
        let blk = di.di_db(i);
        if !visits(snap, blk) {
            continue;
        }
        if v.visit(
            ctx,
            &BlockRef {
                kind: Kind::Data { lbn: i as u64 },
                blk,
                nfrags,
            },
        )? == Step::Stop
        {
            return Ok(Step::Stop);
        }
    }
    let mut remsize = size as i128 - (g.bsize as i128) * UFS_NDADDR as i128;
    let mut sizepb = g.bsize as i128;
    let mut lbn = UFS_NDADDR as u64;
    for i in 0..UFS_NIADDR {
        sizepb *= g.nindir as i128;
        let blk = di.di_ib(i);
        if visits(snap, blk) && iblock(ctx, v, blk, i + 1, remsize, lbn, snap)? == Step::Stop {
            return Ok(Step::Stop);
        }
        lbn = lbn.saturating_add(u64::try_from(sizepb / g.bsize as i128).unwrap_or(u64::MAX));
        remsize -= sizepb;
    }
    Ok(Step::Continue)
}

fn iblock(
    ctx: &mut Ctx,
    v: &mut dyn Visitor,
    blk: u64,
    level: usize,
    isize: i128,
    lbn: u64,
    snap: bool,
) -> R<Step> {
    let g = ctx.g;
    match v.visit(
        ctx,
        &BlockRef {
            kind: Kind::Indir { lbn },
            blk,
            nfrags: g.frag,
        },
    )? {
        Step::Stop => return Ok(Step::Stop),
        Step::Skip => return Ok(Step::Continue),
        Step::Continue => {}
    }
    if ctx.chkrange(blk, g.frag) {
        return Ok(Step::Continue);
    }
    let mut buf = ctx.read_frags(blk, g.frag)?;
    let nindir = to_index(g.nindir);
    // Bytes (and blocks) each entry of this block spans.
    let mut sizepb = g.bsize as i128;
    for _ in 1..level {
        sizepb *= g.nindir as i128;
    }
    let lbnspan = u64::try_from(sizepb / g.bsize as i128).unwrap_or(u64::MAX);
    let nif = if isize <= 0 {
        0
    } else {
        usize::try_from(((isize + sizepb - 1) / sizepb).min(nindir as i128)).unwrap_or(nindir)
    };
    let entry = |b: &[u8], i: usize| g.v.get_ptr(b, i);
    if nif < nindir {
        let count = (nif..nindir).filter(|&i| entry(&buf, i) != 0).count();
        if count > 0 && v.trailing(ctx, blk, count)? {
            for i in nif..nindir {
                g.v.set_ptr(&mut buf, i, 0);
            }
            ctx.write_frags(blk, &buf)?;
        }
    }
    let mut isize = isize;
    for i in 0..nif {
        let p = entry(&buf, i);
        let child_lbn = lbn.saturating_add(i as u64 * lbnspan);
        if visits(snap, p) {
            let step = if level == 1 {
                v.visit(
                    ctx,
                    &BlockRef {
                        kind: Kind::Data { lbn: child_lbn },
                        blk: p,
                        nfrags: g.frag,
                    },
                )?
            } else {
                iblock(ctx, v, p, level - 1, isize, child_lbn, snap)?
            };
            if step == Step::Stop {
                return Ok(Step::Stop);
            }
        }
        isize -= sizepb;
    }
    Ok(Step::Continue)
}

/// Collects the data blocks of a file in logical order: `(lbn, blk,
/// nfrags)`. Used for directories, whose size is bounded.
pub(crate) struct DataBlocks {
    pub blocks: Vec<(u64, u64, u64)>,
}

impl Visitor for DataBlocks {
    fn visit(&mut self, ctx: &mut Ctx, r: &BlockRef) -> R<Step> {
        match r.kind {
            Kind::Data { lbn } => {
                self.blocks.push((lbn, r.blk, r.nfrags));
                Ok(Step::Continue)
            }
            Kind::Indir { .. } => Ok(if ctx.chkrange(r.blk, r.nfrags) {
                Step::Skip
            } else {
                Step::Continue
            }),
            Kind::Ext => Ok(Step::Continue),
        }
    }
}

pub(crate) fn data_blocks(ctx: &mut Ctx, di: &Dinode, size: u64) -> R<Vec<(u64, u64, u64)>> {
    let mut v = DataBlocks { blocks: Vec::new() };
    walk(ctx, di, size, &mut v)?;
    v.blocks.sort_unstable();
    Ok(v.blocks)
}

/// Frees every fragment an inode claims in fsck's map (`pass4check`): a
/// fragment claimed more than once loses one claim instead. When pass 1
/// gave up on the inode part way, only what it claimed is released.
pub(crate) struct Release {
    /// (runs fully claimed, fragments claimed of the next run).
    pub limit: Option<(u64, u64)>,
    pub runs: u64,
}

impl Release {
    pub(crate) fn all() -> Release {
        Release {
            limit: None,
            runs: 0,
        }
    }
}

impl Visitor for Release {
    fn visit(&mut self, ctx: &mut Ctx, r: &BlockRef) -> R<Step> {
        let mut n = r.nfrags;
        if let Some((runs, part)) = self.limit {
            if self.runs > runs || (self.runs == runs && part == 0) {
                return Ok(Step::Stop);
            }
            if self.runs == runs {
                n = part.min(n);
            }
        }
        self.runs += 1;
        let anyout = ctx.chkrange(r.blk, r.nfrags);
        let mut res = Step::Continue;
        for f in r.blk..r.blk.saturating_add(n) {
            if anyout && ctx.chkrange(f, 1) {
                res = Step::Skip;
                continue;
            }
            if ctx.used.test(f) {
                match ctx.dups.get_mut(&f) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        if *n == 0 {
                            ctx.dups.remove(&f);
                        }
                    }
                    _ => ctx.used.clear(f),
                }
            }
        }
        if n < r.nfrags {
            return Ok(Step::Stop);
        }
        Ok(res)
    }
}

/// Releases an inode's blocks and clears the inode on disk (`clri`).
pub(crate) fn clear_inode(ctx: &mut Ctx, ino: u64) -> R<()> {
    let mut di = ctx.read_inode(ino)?;
    let size = di.di_size();
    if di.file_type() != 0 {
        let limit = ctx.claim_limit.get(&ino).copied();
        walk(
            ctx,
            &di,
            size.min(ctx.file_size_limit),
            &mut Release { limit, runs: 0 },
        )?;
    }
    let gen = di.di_gen();
    di = Dinode::default();
    di.set_di_gen(gen);
    ctx.write_inode(ino, &mut di)?;
    ctx.set_state(ino, USTATE);
    Ok(())
}
