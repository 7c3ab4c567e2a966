//! fsck and a read-only mount on a small arbitrary image (the fuzzer's
//! bytes overlaid on a valid image), must return, never panic
//! (`ufs::fuzz::fsck_image`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ufs::fuzz::fsck_image(data));
