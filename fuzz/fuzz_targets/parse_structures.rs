//! Every parser of ufs-format on arbitrary bytes: must return, never panic
//! (`ufs::fuzz::parse_structures`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ufs::fuzz::parse_structures(data));
