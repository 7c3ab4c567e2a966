//! `ufskit growfs`: the command around `ufs::growfs` (FreeBSD's growfs(8)
//! options). An image file given a larger `-s` is lengthened first (and
//! given its old length back if growfs then refuses); a partition
//! (`IMAGE:NAME`) grows to the partition's size, as after `sgdisk` or
//! `gpart resize` enlarged it.
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct GrowfsArgs {
    /// New size (bytes, or with k, M, G, T); default: the whole device,
    /// image file or partition.
    #[arg(short = 's')]
    size: Option<String>,
    /// Say what would be done; write nothing.
    #[arg(short = 'N')]
    dry_run: bool,
    /// Accepted for FreeBSD's command lines (growfs asks nothing here).
    #[arg(short = 'y')]
    yes: bool,
    /// Image file or device, or one partition of it (IMAGE:NAME).
    image: PathBuf,
}

pub fn cmd_growfs(a: GrowfsArgs) -> Result<(), String> {
    let _ = a.yes;
    let size = a.size.as_deref().map(crate::parse_size).transpose()?;
    let (_, partition) = ufs::dev::partition::split_spec(&a.image);
    // An image file asked to grow past its end is lengthened first.
    let mut lengthened = None;
    if let (Some(s), None, false) = (size, &partition, a.dry_run) {
        let meta =
            std::fs::metadata(&a.image).map_err(|e| format!("{}: {e}", a.image.display()))?;
        if meta.is_file() && meta.len() < s {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&a.image)
                .map_err(|e| format!("{}: {e}", a.image.display()))?;
            f.set_len(s)
                .map_err(|e| format!("cannot lengthen {}: {e}", a.image.display()))?;
            lengthened = Some((f, meta.len()));
        }
    }
    let r = crate::open_dev(&a.image, !a.dry_run).and_then(|dev| {
        let p = ufs::growfs::GrowParams {
            size,
            dry_run: a.dry_run,
            ..Default::default()
        };
        ufs::growfs::growfs(&*dev, &p).map_err(|e| format!("growfs: {}: {e}", a.image.display()))
    });
    match r {
        Ok(rep) => {
            println!("{}: {}", a.image.display(), rep.summary());
            Ok(())
        }
        Err(e) => {
            if let Some((f, len)) = lengthened {
                let _ = f.set_len(len);
            }
            Err(e)
        }
    }
}
