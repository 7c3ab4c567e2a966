//! Times copying a host tree into a fresh in-memory file system through the
//! engine alone (no FUSE): the engine's share of an extraction.
//! usage: cargo run --release -p ufs --example copy_tree [TREE]
fn main() {
    let tree = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/usr/include".into());
    let dev = ufs::dev::MemDevice::new(4 << 30);
    ufs::newfs::newfs(
        &dev,
        &ufs::newfs::NewfsParams {
            seed: Some(1),
            ..Default::default()
        },
    )
    .expect("newfs");
    let fs = ufs::Fs::open(Box::new(dev), ufs::MountOptions::default()).expect("open");
    let t = std::time::Instant::now();
    testkit::copy_in(&fs, std::path::Path::new(&tree), fs.root());
    let copy = t.elapsed();
    let t = std::time::Instant::now();
    fs.unmount().expect("unmount");
    println!(
        "copy {:.3} s, unmount {:.3} s; cache {:?}",
        copy.as_secs_f64(),
        t.elapsed().as_secs_f64(),
        fs.cache_stats()
            .by_kind
            .iter()
            .map(|k| (k.hits, k.misses, k.writes))
            .collect::<Vec<_>>()
    );
}
