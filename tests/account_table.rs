//! Prints, per bundled recording, the figures issue 15 re-checks (verdict
//! classes, charged memory cost beside the total device difference, the
//! remainder at every phase end, the tightest step-1 headroom beside the
//! device peak and the smallest device). Run by hand:
//! `cargo test --test account_table -- --ignored --nocapture`.

use prewarm_doctor::analysis::analyse_run;
use prewarm_doctor::analysis::matrix::compare;
use prewarm_doctor::load::load_run;
use std::path::{Path, PathBuf};

const MIB: f64 = (1u64 << 20) as f64;

fn folders() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut f: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fixtures/h200"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    f.sort();
    f.push(root.join("reports/h200-matrix"));
    f
}

#[test]
#[ignore]
fn print_account_table() {
    for f in folders() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let run = load_run(&f).unwrap();
        let all = analyse_run(&run);
        for a in &all {
            for p in &a.processes {
                let rem: Vec<String> = p
                    .phases
                    .iter()
                    .map(|ph| {
                        ph.gap_end
                            .as_ref()
                            .map_or("?".into(), |g| format!("{:.1}", g.unexplained as f64 / MIB))
                    })
                    .collect();
                let tight = p
                    .tightest
                    .iter()
                    .map(|t| t.headroom_after.map_or(f64::NAN, |h| h as f64 / MIB))
                    .fold(f64::INFINITY, f64::min);
                let peak = p
                    .phases
                    .iter()
                    .filter_map(|ph| ph.device_used_peak)
                    .max()
                    .unwrap_or(0) as f64
                    / MIB;
                println!(
                    "ROW {name} {}/{} pid{} rem[{}] tightest {:.1} peak {:.1} mincap {:.1}",
                    a.variant,
                    a.attempt,
                    p.pid,
                    rem.join(","),
                    tight,
                    peak,
                    p.min_capacity_bytes.map_or(f64::NAN, |c| c as f64 / MIB)
                );
            }
        }
        if let Some(m) = compare(run.meta.as_ref(), &all) {
            for v in &m.verdicts {
                let total = |side: &str| {
                    let s = m.variants.iter().find(|x| x.name == side).unwrap();
                    let mut t: Vec<f64> = s
                        .attempts
                        .iter()
                        .filter_map(|h| h.held_step1_end.as_ref())
                        .map(|parts| parts.iter().map(|p| p.bytes as f64).sum::<f64>())
                        .collect();
                    t.sort_by(f64::total_cmp);
                    t
                };
                let (b, w) = (total("baseline"), total(&v.variant));
                let med = |t: &[f64]| {
                    if t.is_empty() {
                        f64::NAN
                    } else if t.len() % 2 == 1 {
                        t[t.len() / 2]
                    } else {
                        (t[t.len() / 2 - 1] + t[t.len() / 2]) / 2.0
                    }
                };
                println!(
                    "VERDICT {name} {} {:?} charged {:.1} MiB total-delta {:.1} MiB",
                    v.variant,
                    v.class,
                    v.costs.held_extra / MIB,
                    (med(&w) - med(&b)) / MIB
                );
            }
        }
    }
}

#[test]
#[ignore]
fn debug_parts() {
    let name = std::env::var("FIXTURE").unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200")
        .join(&name);
    let run = load_run(&root).unwrap();
    for a in analyse_run(&run) {
        for p in &a.processes {
            println!(
                "== {}/{} pid {} ctx {:?}",
                a.variant, a.attempt, p.pid, p.context_bytes
            );
            for ph in &p.phases {
                if let Some(g) = &ph.gap_end {
                    println!(
                        "  {:?} at {:.3} dev {:.1} pool {:.1} oop {:.1} rem {:.1}",
                        ph.phase,
                        g.at_s,
                        g.device_used as f64 / MIB,
                        g.pool_reserved as f64 / MIB,
                        g.out_of_pool as f64 / MIB,
                        g.unexplained as f64 / MIB
                    );
                    for part in &g.parts {
                        println!(
                            "     {:?} {:.1} {:?}",
                            part.source,
                            part.bytes as f64 / MIB,
                            part.context
                        );
                    }
                }
            }
            for l in &p.local_memory {
                println!(
                    "  local {:.4} {:?} {} {}->{} dev {:.1}",
                    l.t_s,
                    l.phase,
                    l.kernel,
                    l.before,
                    l.after,
                    l.device_growth as f64 / MIB
                );
            }
        }
    }
}
