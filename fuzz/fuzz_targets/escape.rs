#![no_main]
//! cargo-fuzz entry point; the target itself is `prewarm_doctor_fuzz::escape`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| prewarm_doctor_fuzz::escape(data));
