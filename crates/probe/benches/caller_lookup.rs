//! What finding the library of a return address seen for the first time
//! costs: `dladdr` (which also walks the object's dynamic symbol table for
//! the nearest symbol) against the probe's loaded-object ranges
//! (`objects.rs`, a binary search). On the H200 every recorded driver call
//! from a new call site (each lazy module load from a new kernel launch site
//! in libtorch_cuda, each of NCCL's allocation sites) pays this once, inside
//! the training's call.
//!
//! `cargo bench -p prewarm-probe --bench caller_lookup`; `LOOKUP_LIBRARY`
//! names the library to look addresses up in (default: libLLVM if installed,
//! else libstdc++, ~6,000 exported symbols; libtorch_cuda exports more than
//! either). Prints the median microseconds per lookup over ADDRESSES
//! addresses spread through the library, each looked up once per round.

use prewarm_probe::objects::LoadedObjects;
use std::ffi::{CString, c_void};
use std::time::Instant;

const ADDRESSES: usize = 200;
const ROUNDS: usize = 9;

fn library() -> String {
    if let Ok(l) = std::env::var("LOOKUP_LIBRARY") {
        return l;
    }
    for l in ["libLLVM-15.so.1", "libLLVM-14.so.1", "libstdc++.so.6"] {
        let c = CString::new(l).unwrap();
        // SAFETY: valid C string; the handle is kept open (never closed).
        if !unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) }.is_null() {
            return l.to_string();
        }
    }
    panic!("no library to look addresses up in: set LOOKUP_LIBRARY");
}

/// Addresses spread through the library's mapped range (by dladdr's base
/// and a symbol's distance from it).
fn addresses(name: &str) -> Vec<usize> {
    let c = CString::new(name).unwrap();
    // SAFETY: as above.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "cannot load {name}");
    // SAFETY: plain data, filled by dladdr below.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // A symbol of the library, for its base and a span of its code.
    let sym = ["LLVMContextCreate", "_ZNSt9exceptionD1Ev"]
        .iter()
        .find_map(|s| {
            let s = CString::new(*s).unwrap();
            // SAFETY: valid handle and C string.
            let p = unsafe { libc::dlsym(h, s.as_ptr()) };
            (!p.is_null()).then_some(p)
        })
        .expect("a known symbol of the library");
    // SAFETY: dladdr fills `info`.
    assert!(unsafe { libc::dladdr(sym, &mut info) } != 0);
    let base = info.dli_fbase as usize;
    let span = (sym as usize - base).max(1 << 20);
    (0..ADDRESSES)
        .map(|i| base + 4096 + i * (span / ADDRESSES))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let name = library();
    let addrs = addresses(&name);
    let mut by_dladdr = Vec::new();
    let mut by_ranges = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for &a in &addrs {
            // SAFETY: plain data, filled by dladdr.
            let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
            // SAFETY: dladdr only reads the address and fills `info`.
            std::hint::black_box(unsafe { libc::dladdr(a as *const c_void, &mut info) });
        }
        by_dladdr.push(t.elapsed().as_secs_f64() * 1e6 / addrs.len() as f64);
        // A fresh map each round: its first lookup reads the loader's list.
        let mut objects = LoadedObjects::new();
        let t = Instant::now();
        for &a in &addrs {
            std::hint::black_box(objects.find(a).map(|(_, base)| base));
        }
        by_ranges.push(t.elapsed().as_secs_f64() * 1e6 / addrs.len() as f64);
    }
    println!(
        "caller lookup in {name}, {} addresses, median of {ROUNDS} rounds: dladdr {:.2} us, loaded-object ranges {:.3} us per address",
        addrs.len(),
        median(by_dladdr),
        median(by_ranges)
    );
}
