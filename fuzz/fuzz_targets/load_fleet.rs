//! Any bytes as a fleet file: loading and validating never panics.
#![no_main]

use gitfleet_load::{SourceFile, load_fleet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = load_fleet(&[SourceFile::new("f.yaml", data.to_vec())]);
});
