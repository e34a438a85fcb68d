#![no_main]
//! cargo-fuzz entry point; the target itself is `prewarm_doctor_fuzz::step_file`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| prewarm_doctor_fuzz::step_file(data));
