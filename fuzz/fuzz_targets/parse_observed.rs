//! Any text as an observed-state file: parsing never panics.
#![no_main]

use gitfleet_load::observed::parse_observed;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_observed("o.yaml", text);
    }
});
