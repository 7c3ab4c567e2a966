//! Partition probing (GPT, MBR with BSD slices, BSD disklabels) on
//! arbitrary leading sectors of a disk: must return, never panic, and
//! every partition it names must lie inside the disk
//! (`ufs::fuzz::partition_table`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ufs::fuzz::partition_table(data));
