//! The account's arithmetic on every real H200 recording (issue 15): it never
//! over-explains the device, identical attempts agree, headroom is read
//! before each request, and the memory cost of any pair of attempts is the
//! total's change, split by source without a one-sided sum.

use prewarm_doctor::analysis::account::{PartSource, PhaseAccount, ProcessAccount};
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::analysis::summary::{Headline, HeldPart, headline, summary_of};
use prewarm_doctor::analysis::verdict::costs::costs;
use prewarm_doctor::analysis::{AttemptAccount, analyse_run};
use prewarm_doctor::load::load_run;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;

const MIB: f64 = (1u64 << 20) as f64;

/// Every run folder under `dir` (a folder holding a run.json), sorted.
fn runs_under(dir: &Path) -> Vec<PathBuf> {
    let mut f: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("run.json").is_file())
        .collect();
    f.sort();
    f
}

/// Every recording: the fixtures, the zoo of models not written for the
/// tool (tests/fixtures/h200-zoo, with the first-use experiment's runs),
/// the zoo's scripts on an H100 shared with other processes
/// (tests/fixtures/h100-shared-gpu) and with CUPTI detached after the first
/// steps (tests/fixtures/h100-detached, h100-callback-split), and the
/// bundled matrix.
fn folders() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut f = runs_under(&root.join("tests/fixtures/h200"));
    f.extend(runs_under(&root.join("tests/fixtures/h200-zoo")));
    f.extend(runs_under(&root.join("tests/fixtures/h200-zoo/first-use")));
    f.extend(runs_under(&root.join("tests/fixtures/h100-shared-gpu")));
    f.extend(runs_under(&root.join("tests/fixtures/h100-detached")));
    f.extend(runs_under(&root.join("tests/fixtures/h100-callback-split")));
    f.push(root.join("reports/h200-matrix"));
    assert!(f.len() >= 40, "{f:?}");
    f
}

/// Each recording analysed once for the whole test binary.
fn recordings() -> &'static Vec<(String, Vec<AttemptAccount>)> {
    static ALL: OnceLock<Vec<(String, Vec<AttemptAccount>)>> = OnceLock::new();
    ALL.get_or_init(|| {
        folders()
            .into_iter()
            .map(|f| {
                let name = f.file_name().unwrap().to_string_lossy().to_string();
                (name, analyse_run(&load_run(&f).unwrap()))
            })
            .collect()
    })
}

fn recording(name: &str) -> &'static [AttemptAccount] {
    &recordings().iter().find(|r| r.0 == name).unwrap().1
}

/// The most the parts may claim beyond the device: 16 MiB (eight device
/// pages: NVML and the probe's readings are sampled), whatever the device
/// holds (issue 35: 2% of an H200's 140 GiB would allow 2.8 GiB).
const OVER_EXPLAINED_MIB: f64 = 16.0;

#[test]
fn no_phase_end_of_any_rank_is_over_explained() {
    let mut ends = 0;
    for (name, attempts) in recordings() {
        for a in attempts {
            for p in &a.processes {
                for ph in &p.phases {
                    let Some(g) = &ph.gap_end else { continue };
                    ends += 1;
                    assert!(
                        g.unexplained as f64 >= -OVER_EXPLAINED_MIB * MIB,
                        "{name} {}/{} pid {} {:?}: the parts claim {:.1} MiB more than the device holds ({:.1} MiB)",
                        a.variant,
                        a.attempt,
                        p.pid,
                        ph.phase,
                        -(g.unexplained as f64) / MIB,
                        g.device_used as f64 / MIB
                    );
                }
            }
        }
    }
    assert!(ends > 200, "{ends}");
}

/// A remainder above 64 MiB is flagged not understood (the report says so),
/// one at or below it is not; the flag is the remainder's own, whichever
/// recording holds it.
#[test]
fn a_remainder_above_64_mib_is_flagged_not_understood() {
    let (mut flagged, mut ends) = (0, 0);
    for (_, attempts) in recordings() {
        for a in attempts {
            for p in &a.processes {
                for g in p.phases.iter().filter_map(|ph| ph.gap_end.as_ref()) {
                    ends += 1;
                    assert_eq!(g.not_understood, g.unexplained > 64 << 20, "{g:?}");
                    flagged += usize::from(g.not_understood);
                }
            }
        }
    }
    // The stream-ordered pool's first growth (async recordings) is such memory.
    assert!(flagged >= 8 && flagged < ends, "{flagged} of {ends}");
}

/// Each part's bytes at a phase end, by source.
fn parts_of(g: &prewarm_doctor::analysis::account::GapAccount) -> BTreeMap<String, i64> {
    g.parts
        .iter()
        .map(|p| (format!("{:?}", p.source), p.bytes))
        .collect()
}

/// Attribution is stable: two attempts of one command (one variant of one
/// recording) whose device figures agree within noise at a phase end give
/// the same parts there, each within 16 MiB (a part missing on one side
/// counts as 0). A property over every pair of attempts of every recording.
#[test]
fn attempts_that_agree_on_the_device_agree_on_every_part() {
    let mut pairs = 0;
    for (name, attempts) in recordings() {
        for (i, a) in attempts.iter().enumerate() {
            for b in attempts
                .iter()
                .skip(i + 1)
                .filter(|b| b.variant == a.variant)
            {
                for (pa, pb) in a.processes.iter().zip(&b.processes) {
                    for pha in &pa.phases {
                        let Some(phb) = pb.phases.iter().find(|x| x.phase == pha.phase) else {
                            continue;
                        };
                        let (Some(ga), Some(gb)) = (&pha.gap_end, &phb.gap_end) else {
                            continue;
                        };
                        let same_device = (ga.out_of_pool as f64 - gb.out_of_pool as f64).abs()
                            <= OVER_EXPLAINED_MIB * MIB;
                        if !same_device {
                            continue;
                        }
                        pairs += 1;
                        let (xa, xb) = (parts_of(ga), parts_of(gb));
                        for source in xa.keys().chain(xb.keys()) {
                            let (va, vb) =
                                (xa.get(source).unwrap_or(&0), xb.get(source).unwrap_or(&0));
                            assert!(
                                ((va - vb) as f64).abs() <= OVER_EXPLAINED_MIB * MIB,
                                "{name} {}/{} vs /{} {:?} {source}: {:.1} vs {:.1} MiB",
                                a.variant,
                                a.attempt,
                                b.attempt,
                                pha.phase,
                                *va as f64 / MIB,
                                *vb as f64 / MIB
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(pairs > 100, "{pairs}");
}

#[test]
fn no_phase_peaks_below_what_the_device_held_at_its_end() {
    // NVML lags allocations by up to a sample: a peak read off its samples
    // alone sat 32-128 MiB below the probe's end-of-phase reading on six
    // recordings (shared-gpu steps 2..N: peak 1.2 GiB, end 1.4 GiB).
    let mut ends = 0;
    for (name, attempts) in recordings() {
        for a in attempts {
            for p in &a.processes {
                for ph in &p.phases {
                    let (Some(g), Some(peak)) = (&ph.gap_end, ph.device_used_peak) else {
                        continue;
                    };
                    ends += 1;
                    assert!(
                        peak >= g.device_used,
                        "{name} {}/{} pid {} {:?}: peak {:.1} MiB below the end's {:.1} MiB",
                        a.variant,
                        a.attempt,
                        p.pid,
                        ph.phase,
                        peak as f64 / MIB,
                        g.device_used as f64 / MIB
                    );
                }
            }
        }
    }
    assert!(ends > 200, "{ends}");
}

fn context_part(p: &ProcessAccount, phase: Phase) -> Option<i64> {
    let g = p
        .phases
        .iter()
        .find(|x| x.phase == phase)?
        .gap_end
        .as_ref()?;
    g.parts
        .iter()
        .find(|x| x.source == PartSource::Context)
        .map(|x| x.bytes)
}

/// Largest minus smallest of some figures.
fn spread(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    max - min
}

/// The attempts of each variant of the repeat recordings (identical runs)
/// give the same context figure, headroom and smallest device within noise.
#[test]
fn identical_attempts_agree_on_the_context_and_the_headroom() {
    for name in [
        "repeat-cublas",
        "repeat-nccl",
        "repeat-triton",
        "hf-llama-matrix",
    ] {
        let mut by: BTreeMap<&str, Vec<&ProcessAccount>> = BTreeMap::new();
        for a in recording(name) {
            by.entry(a.variant.as_str())
                .or_default()
                .extend(a.processes.iter().filter(|p| p.context_bytes.is_some()));
        }
        for (variant, ranks) in by {
            assert!(ranks.len() >= 2, "{name} {variant}");
            let ctx: Vec<f64> = ranks
                .iter()
                .filter_map(|p| context_part(p, Phase::Step1))
                .map(|b| b as f64)
                .collect();
            assert_eq!(ctx.len(), ranks.len(), "{name} {variant}");
            assert!(
                spread(&ctx) <= 4.0 * MIB,
                "{name} {variant}: context {ctx:?}"
            );
            let tight: Vec<f64> = ranks
                .iter()
                .filter_map(|p| {
                    p.tightest
                        .iter()
                        .filter(|t| t.phase == Phase::Step1)
                        .filter_map(|t| t.headroom_after)
                        .min()
                })
                .map(|h| h as f64)
                .collect();
            assert!(spread(&tight) <= 16.0 * MIB, "{name} {variant}: {tight:?}");
            let cap: Vec<f64> = ranks
                .iter()
                .filter_map(|p| p.min_capacity_bytes)
                .map(|c| c as f64)
                .collect();
            assert!(spread(&cap) <= 16.0 * MIB, "{name} {variant}: {cap:?}");
        }
    }
}

/// The smallest device that fits is never above what the process was seen
/// to hold plus the request that did not happen (a failed one).
#[test]
fn the_smallest_device_is_never_above_the_peak_plus_the_failed_request() {
    for (name, attempts) in recordings() {
        for a in attempts {
            for p in &a.processes {
                let Some(cap) = p.min_capacity_bytes else {
                    continue;
                };
                let peak = p
                    .phases
                    .iter()
                    .filter_map(|ph| ph.device_used_peak)
                    .max()
                    .unwrap_or(0) as f64;
                let failed: f64 = p
                    .exposures
                    .iter()
                    .filter(|e| !e.succeeded)
                    .map(|e| e.bytes as f64)
                    .fold(0.0, f64::max);
                assert!(
                    cap as f64 <= peak + failed + 16.0 * MIB,
                    "{name} {}/{} pid {}: smallest device {:.1} MiB, peak {:.1} MiB, failed request {:.1} MiB",
                    a.variant,
                    a.attempt,
                    p.pid,
                    cap as f64 / MIB,
                    peak / MIB,
                    failed / MIB
                );
                for e in &p.exposures {
                    // Every figure is of the device before the request.
                    if let (Some(own), Some(all)) = (e.process_used_before, e.device_used_before) {
                        assert!(own <= all, "{name}: {e:?}");
                    }
                }
            }
        }
    }
}

/// The shared-GPU recordings: the old probe's and today's (whose kernel
/// records came out of launch order, tests/fixtures/h200/README.md).
const SHARED_GPU: [&str; 2] = ["shared-gpu", "shared-gpu-2"];

fn shared_gpu_rank(name: &str) -> &'static ProcessAccount {
    recording(name)[0]
        .processes
        .iter()
        .find(|p| p.context_bytes.is_some())
        .unwrap()
}

/// On a GPU shared with a process holding 20 GiB, the smallest device is
/// this process's own need, not the other's memory.
#[test]
fn a_shared_gpu_counts_only_this_process_memory() {
    for name in SHARED_GPU {
        let p = shared_gpu_rank(name);
        assert!(
            p.memory_source.contains("per-process"),
            "{name}: {}",
            p.memory_source
        );
        let cap = p.min_capacity_bytes.unwrap() as f64;
        assert!(cap < 2048.0 * MIB, "{name}: {}", cap / MIB);
        let e = p.exposures.iter().max_by_key(|e| e.bytes).unwrap();
        let (own, all) = (
            e.process_used_before.unwrap(),
            e.device_used_before.unwrap(),
        );
        assert!((all - own) as f64 > 20.0 * 1024.0 * MIB, "{name}: {e:?}");
    }
}

/// Both shared-GPU recordings measure step 1's local-memory growth (the
/// forward's GELU, 148.5 -> 239.2 MiB) as the device showed it, +90 MiB,
/// and leave a few MiB at every phase end from step 1 on. On
/// `shared-gpu-2` CUPTI handed the autograd thread's records over first and
/// the probe named the growth at a backward kernel 120 ms later, after the
/// device had shown it: measured +0 B, 92.2 MiB unexplained, until the
/// loader put the growths in launch order.
#[test]
fn a_shared_gpu_measures_the_local_memory_growth_where_it_landed() {
    for name in SHARED_GPU {
        let p = shared_gpu_rank(name);
        let grown: Vec<_> = p
            .local_memory
            .iter()
            .filter(|l| l.phase == Phase::Step1)
            .collect();
        assert_eq!(grown.len(), 1, "{name}: {grown:?}");
        let g = grown[0];
        assert!(g.kernel.contains("Gelu"), "{name}: {}", g.kernel);
        assert_eq!(g.after - g.before, 95_158_272, "{name}");
        let measured = g.device_growth as f64 / MIB;
        assert!((88.0..=92.0).contains(&measured), "{name}: {measured}");
        // Headroom read before it: this process held less than at step-1 end.
        let e = p
            .exposures
            .iter()
            .find(|e| e.kind == "local memory" && e.phase == Phase::Step1)
            .unwrap();
        let end = p
            .phases
            .iter()
            .find(|ph| ph.phase == Phase::Step1)
            .unwrap()
            .gap_end
            .as_ref()
            .unwrap();
        assert!(
            e.process_used_before.unwrap() + e.bytes <= end.device_used,
            "{name}: {e:?}"
        );
        for ph in p.phases.iter().filter(|ph| ph.phase != Phase::Setup) {
            let left = ph.gap_end.as_ref().unwrap().unexplained as f64 / MIB;
            assert!(
                (-4.0..=4.0).contains(&left),
                "{name} {:?}: {left} MiB unexplained",
                ph.phase
            );
        }
    }
}

/// prescribe-all-matrix `prescribed/1`: the training's communicator comes up
/// in setup as the context does, its span starting 0.5 ms before the
/// context's first kernel (whose 92 MiB reservation growth the device showed
/// 1.4 ms before CUPTI's kernel start). Read from there the communicator's
/// kernel code was 78 MiB and +97 MiB stayed unexplained at every phase end;
/// read outside the launch's window it is what the baseline's communicator
/// and the hand-written prewarm's two load (168 and 170 MiB), and the
/// remainder theirs (+5.0 MiB against +7.0 MiB).
#[test]
fn a_communicator_next_to_the_first_launch_keeps_its_kernel_code() {
    let attempts = recording("prescribe-all-matrix");
    let figures = |variant: &str| {
        let a = attempts.iter().find(|a| a.variant == variant).unwrap();
        let p = a.processes.iter().find(|p| !p.nccl.is_empty()).unwrap();
        let code = p.nccl.iter().map(|c| c.inferred_bytes).sum::<u64>() as f64 / MIB;
        let worst = p
            .phases
            .iter()
            .filter_map(|ph| ph.gap_end.as_ref())
            .map(|g| g.unexplained.abs())
            .max()
            .unwrap() as f64
            / MIB;
        (code, worst)
    };
    // NCCL's kernel code by the first-use experiment's own readings (same
    // NCCL, one rank): the first collective's growth less the buffers the
    // group gave back at its destruction; read to a device page (2 MiB).
    let mib = |stage: &str| {
        common::first_use("torch plain default LAZY", stage)["delta_mib"]
            .as_f64()
            .unwrap()
    };
    let code = mib("nccl_first_collective") + mib("end");
    for variant in ["baseline", "hand", "prescribed"] {
        // The hand-written prewarm's two communicators load the code once.
        let (figure, worst) = figures(variant);
        assert!(
            (figure - code).abs() <= 2.0,
            "{variant}: {figure} vs {code}"
        );
        assert!(worst <= OVER_EXPLAINED_MIB, "{variant}: {worst}");
    }
}

/// NCCL's out-of-pool allocation in one phase, from its allocation calls.
fn nccl_allocated(ph: &PhaseAccount) -> u64 {
    ph.by_source
        .iter()
        .filter(|s| s.source == "nccl")
        .map(|s| s.allocated)
        .sum()
}

/// Every NCCL allocation counts for one communicator at most: per phase, the
/// communicators created in it claim no more than NCCL allocated outside the
/// pool in it (h200-matrix nccl_comm/2 read 388 + 396 MiB against 778 MiB:
/// two communicators created back to back counted the first one's last
/// allocations both), and per rank the communicators' bytes and NCCL's
/// allocations outside every communicator's init are NCCL's out-of-pool
/// allocation to the byte: every byte in one part.
#[test]
fn every_nccl_allocation_is_counted_once() {
    let mut ranks = 0;
    for (name, attempts) in recordings() {
        for a in attempts {
            for p in a.processes.iter().filter(|p| !p.nccl.is_empty()) {
                let at = format!("{name} {}/{} pid {}", a.variant, a.attempt, p.pid);
                for ph in &p.phases {
                    let comms: u64 = p
                        .nccl
                        .iter()
                        .filter(|c| c.phase == Some(ph.phase))
                        .map(|c| c.bytes)
                        .sum();
                    let nccl = nccl_allocated(ph);
                    assert!(
                        comms + ph.nccl_outside_comms <= nccl,
                        "{at} {:?}: communicators {:.1} MiB + outside any init {:.1} MiB > NCCL's {:.1} MiB",
                        ph.phase,
                        comms as f64 / MIB,
                        ph.nccl_outside_comms as f64 / MIB,
                        nccl as f64 / MIB
                    );
                }
                let told = p.nccl.iter().map(|c| c.bytes).sum::<u64>()
                    + p.phases.iter().map(|ph| ph.nccl_outside_comms).sum::<u64>();
                let nccl: u64 = p.phases.iter().map(nccl_allocated).sum();
                assert_eq!(told, nccl, "{at}");
                ranks += 1;
            }
        }
    }
    assert!(ranks >= 50, "{ranks}");
}

/// The recordings the review read: each communicator NCCL's 388 MiB, the
/// 2 MiB NCCL allocates before its first communicator's init said apart,
/// the same in every attempt (the windows read 388 to 404 MiB by where the
/// rounding of NCCL's total fell).
#[test]
fn back_to_back_communicators_each_hold_their_own_allocations() {
    for (name, variant) in [
        ("h200-matrix", "nccl_comm"),
        ("shared-cache", "nccl_comm"),
        ("prescribe-nccl-matrix", "nccl_comm"),
        ("h200-matrix", "baseline"),
        ("examples-nccl-baseline", "default"),
    ] {
        let with_comms = recording(name)
            .iter()
            .filter(|a| a.variant == variant)
            .filter_map(|a| Some((a, a.processes.iter().find(|p| !p.nccl.is_empty())?)));
        let mut seen = 0;
        for (a, p) in with_comms {
            seen += 1;
            let at = format!("{name} {variant}/{}", a.attempt);
            for c in &p.nccl {
                assert_eq!(c.bytes as f64 / MIB, 388.0, "{at} {}", c.comm);
            }
            let outside: u64 = p.phases.iter().map(|ph| ph.nccl_outside_comms).sum();
            assert_eq!(outside as f64 / MIB, 2.0, "{at}");
        }
        assert!(seen > 0, "{name} {variant}");
    }
}

/// Every attempt's step-1-end parts, with where it came from.
fn all_headlines() -> Vec<(String, Headline)> {
    recordings()
        .iter()
        .flat_map(|(name, attempts)| {
            attempts
                .iter()
                .map(move |a| (format!("{name} {}/{}", a.variant, a.attempt), headline(a)))
        })
        .filter(|(_, h)| h.held_step1_end.is_some())
        .collect()
}

fn one(name: &str, h: &Headline) -> prewarm_doctor::analysis::summary::VariantSummary {
    summary_of(name, Vec::new(), vec![h.clone()], 1, 1)
}

fn total(h: &Headline) -> f64 {
    h.held_step1_end
        .iter()
        .flatten()
        .map(|p| p.bytes as f64)
        .sum()
}

/// Over every pair of attempts of every recording: the split adds up to the
/// total's change, which is the device's own difference (device used − pool
/// at step-1 end), and the charge is never more than that change.
#[test]
fn every_pair_of_attempts_splits_and_charges_the_total() {
    let heads = all_headlines();
    assert!(heads.len() >= 40, "{}", heads.len());
    for (i, (bn, b)) in heads.iter().enumerate() {
        for (vn, v) in &heads[i..] {
            for (x, y, xn, yn) in [(b, v, bn, vn), (v, b, vn, bn)] {
                let c = costs(&one("baseline", x), &one("variant", y));
                let t = c.held_total_step1_end.expect("both sides have an account");
                assert!(
                    (t.delta - (total(y) - total(x))).abs() < 1.0,
                    "{xn} vs {yn}"
                );
                let split: f64 = c.held_step1_end.iter().flatten().map(|h| h.delta).sum();
                assert!((split - t.delta).abs() < 1.0, "{xn} vs {yn}");
                assert!(c.held_extra >= 0.0 && c.held_extra <= t.delta.max(0.0) + t.noise);
                assert_eq!(c.held_extra > 0.0, t.is_up(), "{xn} vs {yn}");
            }
        }
    }
}

/// Moves `bytes` from part `from` to part `to` of a real attempt.
fn relabel(h: &Headline, from: usize, to: usize, bytes: i64) -> Headline {
    let mut h = h.clone();
    let parts: &mut Vec<HeldPart> = h.held_step1_end.as_mut().unwrap();
    let (from, to) = (from % parts.len(), to % parts.len());
    parts[from].bytes -= bytes;
    parts[to].bytes += bytes;
    h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Bytes of a real attempt held under another source are no cost, and
    /// growth inside any part (inferred ones too) shows in the charge.
    #[test]
    fn real_attempts_relabelled_or_grown(
        i in any::<prop::sample::Index>(),
        j in any::<prop::sample::Index>(),
        from in 0usize..8,
        to in 0usize..8,
        mib in 0i64..2048,
        grow_mib in 0i64..2048,
    ) {
        let heads = all_headlines();
        let (b, v) = (&heads[i.index(heads.len())].1, &heads[j.index(heads.len())].1);
        let c = costs(&one("baseline", b), &one("variant", v));
        let moved = relabel(v, from, to, mib << 20);
        let m = costs(&one("baseline", b), &one("variant", &moved));
        prop_assert_eq!(c.held_extra, m.held_extra);
        prop_assert_eq!(c.held_total_step1_end, m.held_total_step1_end);
        let mut grown = v.clone();
        let parts = grown.held_step1_end.as_mut().unwrap();
        let k = from % parts.len();
        parts[k].bytes += grow_mib << 20;
        let g = costs(&one("baseline", b), &one("variant", &grown));
        let (t0, t1) = (c.held_total_step1_end.unwrap(), g.held_total_step1_end.unwrap());
        prop_assert!((t1.delta - t0.delta - (grow_mib << 20) as f64).abs() < 1.0);
        if t1.is_up() {
            prop_assert!((g.held_extra - t1.delta).abs() < 1.0);
        }
    }
}

/// The part of a source at the end of a phase, in MiB.
fn part_mib(p: &ProcessAccount, phase: Phase, source: &PartSource) -> f64 {
    p.phases
        .iter()
        .find(|x| x.phase == phase)
        .and_then(|x| x.gap_end.as_ref())
        .map_or(0.0, |g| {
            g.parts
                .iter()
                .filter(|x| &x.source == source)
                .map(|x| x.bytes as f64 / MIB)
                .sum()
        })
}

/// What the first-use experiment (tests/fixtures/h200-zoo/first-use,
/// the script's own cuMemGetInfo readings, no doctor) measured at the first
/// growth of PyTorch's cudaMallocAsync pool: the device's gain minus what
/// the pool reserved.
fn async_first_growth_beyond_the_pool_mib() -> f64 {
    let v = common::first_use("torch plain async LAZY", "pool_first_segment_64MiB");
    v["delta_mib"].as_f64().unwrap() - v["reserved_mib"].as_f64().unwrap()
}

/// With PyTorch on CUDA's stream-ordered pool (`backend:cudaMallocAsync`) the
/// device grows beyond the pool's records at its first use, before any
/// kernel: memory no record explains. No part may claim it: at the end of
/// setup the remainder is what the first-use experiment measured (within the
/// 16 MiB noise floor), flagged not understood; and module code reads what the
/// default allocator's recording of the same script reads (all_lazy_init:
/// 2.0 MiB in the run of the same day, tests/fixtures/h200/README.md;
/// hf_llama: 18.0 MiB in hf-llama-matrix). The binary before the pool rule
/// read -35.3 MiB, a 72 MiB commit and 34 MiB of module code on
/// async-lazy-init.
#[test]
fn a_stream_ordered_pools_first_growth_is_left_not_understood() {
    let beyond = async_first_growth_beyond_the_pool_mib();
    for (name, module_mib) in [("async-lazy-init", 2.0), ("async-hf-llama", 18.0)] {
        let attempts = recording(name);
        let p = attempts[0]
            .processes
            .iter()
            .find(|p| p.rank == Some(0))
            .unwrap_or_else(|| panic!("{name}: rank 0"));
        for ph in &p.phases {
            let g = ph.gap_end.as_ref().unwrap();
            assert!(g.unexplained >= 0, "{name} {:?}", ph.phase);
        }
        let setup = p.phases.iter().find(|x| x.phase == Phase::Setup).unwrap();
        let g = setup.gap_end.as_ref().unwrap();
        let left = g.unexplained as f64 / MIB;
        assert!(
            (left - beyond).abs() <= OVER_EXPLAINED_MIB,
            "{name}: {left} MiB"
        );
        assert!(g.not_understood, "{name}");
        let module = part_mib(p, Phase::Step1, &PartSource::ModuleCode);
        assert!(
            (module - module_mib).abs() < 0.5,
            "{name}: module code {module} MiB"
        );
    }
}

/// Under PyTorch's cudaMallocAsync backend the H200 recordings hold one
/// stream-ordered allocation that failed with CUDA_ERROR_INVALID_CONTEXT
/// (201) in step 1, on a thread with no CUDA context current (the probe
/// read no device there); the training went on. It is said as such, and no
/// other failed call of any recording is.
#[test]
fn a_failed_call_on_a_thread_without_a_context_is_named_so() {
    for (name, attempts) in recordings() {
        for p in attempts.iter().flat_map(|a| &a.processes) {
            for c in &p.failed_calls {
                // The recordings made with backend:cudaMallocAsync (their names say so).
                let expected = name.contains("async");
                assert_eq!(
                    c.no_current_context, expected,
                    "{name}: {} {} result {}",
                    c.api, c.bytes, c.result
                );
            }
        }
    }
    for name in ["async-lazy-init", "async-hf-llama"] {
        let attempts = recording(name);
        let calls: Vec<_> = attempts[0]
            .processes
            .iter()
            .flat_map(|p| &p.failed_calls)
            .collect();
        assert_eq!(calls.len(), 1, "{name}");
        assert_eq!(
            (calls[0].result, calls[0].no_current_context, calls[0].phase),
            (201, true, Phase::Step1),
            "{name}"
        );
    }
}

/// The probe's own time is arithmetic too: each phase's callback share is
/// part of its total, and the phases' callbacks never add up to more than
/// the whole run's callback time (the report's "probe:" line).
#[test]
fn the_probe_time_of_the_phases_fits_inside_the_run_total() {
    let mut phases = 0;
    for (name, attempts) in recordings() {
        for a in attempts {
            for p in &a.processes {
                let run_callbacks = p.health.callback_seconds;
                let run_total = run_callbacks + p.health.activity_seconds + p.health.writer_seconds;
                let mut callbacks = 0.0;
                let mut total = 0.0;
                for ph in &p.phases {
                    phases += 1;
                    assert!(
                        ph.probe_callbacks_s <= ph.probe_s + 1e-9,
                        "{name} pid {} {:?}: callbacks {} s of {} s",
                        p.pid,
                        ph.phase,
                        ph.probe_callbacks_s,
                        ph.probe_s
                    );
                    callbacks += ph.probe_callbacks_s;
                    total += ph.probe_s;
                }
                assert!(
                    callbacks <= run_callbacks + 1e-6,
                    "{name} pid {}: phases' callbacks {callbacks} s > the run's {run_callbacks} s",
                    p.pid
                );
                // Older probes did not time their writer: their total is
                // callbacks and activity only, as is the run's then.
                assert!(
                    total <= run_total + 1e-6,
                    "{name} pid {}: phases' own time {total} s > the run's {run_total} s",
                    p.pid
                );
            }
        }
    }
    assert!(phases > 100, "{phases}");
}

/// What a recording's account is made of, times aside: per phase its
/// first launches, local-memory growth, module code and end parts; every
/// local-memory growth (kernel and sizes); every warmup that still lands.
fn account_without_times(p: &ProcessAccount) -> Vec<String> {
    let mut out = Vec::new();
    for ph in &p.phases {
        out.push(format!(
            "{:?}: {} first launches, local memory +{}, module code {}, out of pool +{}",
            ph.phase,
            ph.kernels_first_launched,
            ph.local_memory_growth,
            ph.module_code_bytes,
            ph.out_of_pool_allocated
        ));
        if let Some(g) = &ph.gap_end {
            out.push(format!(
                "{:?} end: {:?}, unexplained {}",
                ph.phase,
                parts_of(g),
                g.unexplained
            ));
        }
    }
    for m in &p.local_memory {
        out.push(format!(
            "local memory {:?} {}: {} -> {} (device +{})",
            m.phase, m.kernel, m.before, m.after, m.device_growth
        ));
    }
    for w in &p.late_warmups {
        // A communicator is named by its id, which NCCL draws anew each run.
        let subject = if w.subject.starts_with("0x") {
            "(id)"
        } else {
            &w.subject
        };
        out.push(format!(
            "still lands: {:?} {subject} {} bytes",
            w.class, w.bytes
        ));
    }
    out
}

/// Issue 37: kernel activity records only for each function's first launch
/// (the probe's default) lose nothing the account explains. The same script
/// recorded on the H200 both ways (the records of every launch in setup and
/// the first three steps, the path before) gives the same account, part for
/// part and byte for byte, from a fraction of the records.
#[test]
fn first_launch_records_give_the_account_every_launch_records_give() {
    for (script, first, every) in [
        (
            "transformers Qwen3",
            "hf-decoder-first-launch-records",
            "hf-decoder-every-launch-records",
        ),
        (
            "lazy init",
            "lazy-init-first-launch-records",
            "lazy-init-every-launch-records",
        ),
    ] {
        let (a, b) = (&recording(first)[0], &recording(every)[0]);
        assert_eq!(a.processes.len(), 1, "{script}");
        assert_eq!(b.processes.len(), 1, "{script}");
        let (pa, pb) = (&a.processes[0], &b.processes[0]);
        let (xa, xb) = (account_without_times(pa), account_without_times(pb));
        assert!(
            pa.local_memory.iter().any(|m| m.device_growth > 0),
            "{script}: a recording with a local-memory growth to compare"
        );
        assert_eq!(xa, xb, "{script}");
        assert_eq!(pa.context_bytes, pb.context_bytes, "{script}");
        assert_eq!(pa.min_capacity_bytes, pb.min_capacity_bytes, "{script}");
        let (ha, hb) = (headline(a), headline(b));
        assert_eq!(ha.step1_out_of_pool, hb.step1_out_of_pool, "{script}");
        assert_eq!(
            format!("{:?}", ha.held_step1_end),
            format!("{:?}", hb.held_step1_end),
            "{script}"
        );
        // One record a first launch, against one for every launch watched.
        let first_launches: u32 = pa.phases.iter().map(|p| p.kernels_first_launched).sum();
        assert!(
            pa.health.activity_records <= u64::from(first_launches) + 1,
            "{script}: {} records for {first_launches} first launches",
            pa.health.activity_records
        );
        assert!(
            pb.health.activity_records > 4 * pa.health.activity_records,
            "{script}: {} vs {}",
            pb.health.activity_records,
            pa.health.activity_records
        );
        assert_eq!(pa.health.dropped_cupti_records, 0, "{script}");
        assert_eq!(pb.health.dropped_cupti_records, 0, "{script}");
    }
}

/// A CUDA context's size depends on the driver and the GPU, not on the
/// script nor on what other processes on the GPU do meanwhile: the four
/// H100 recordings on a shared GPU (tests/fixtures/h100-shared-gpu: three
/// scripts, and a neighbour that grew 56 MiB while `hf-first`'s context came
/// up) give one context figure, to a 2 MiB device page.
#[test]
fn a_context_on_a_shared_gpu_does_not_take_the_neighbours_growth() {
    let names = ["hf-first", "hf-detach", "lazy-first", "fsdp2-first"];
    let contexts: Vec<u64> = names
        .iter()
        .flat_map(|n| recording(n))
        .flat_map(|a| &a.processes)
        .filter_map(|p| p.context_bytes)
        .collect();
    assert_eq!(contexts.len(), names.len(), "{contexts:?}");
    let (lo, hi) = (
        contexts.iter().min().unwrap(),
        contexts.iter().max().unwrap(),
    );
    assert!(hi - lo <= 2 << 20, "{contexts:?}");
}

/// The probe's records in one stored recording's event files (its one
/// host folder, NVML's file aside), read apart from the analysis.
fn probe_records(folder: &str, run: &str) -> Vec<prewarm_events::Record> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder)
        .join(run)
        .join("default/1/vm");
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "events") || path.ends_with("nvml.events") {
            continue;
        }
        let file = prewarm_events::read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        records.extend(file.records);
    }
    records
}

/// The probe's untraced stretches in one recording's event files: (device
/// bytes that went into use across each, per its own readings).
fn untraced_growths(run: &str) -> Vec<i64> {
    probe_records("h100-detached", run)
        .into_iter()
        .filter_map(|r| match r {
            prewarm_events::Record::Untraced(u) => Some(u.free_before as i64 - u.free_after as i64),
            _ => None,
        })
        .collect()
}

/// The bytes of the untraced part at each phase end of a recording's one
/// process (0 where it has none).
fn untraced_part(run: &str) -> Vec<(Phase, i64)> {
    let p = &recording(run)[0].processes[0];
    p.phases
        .iter()
        .filter_map(|ph| {
            let g = ph.gap_end.as_ref()?;
            let part = g.parts.iter().find(|x| x.source == PartSource::Untraced);
            Some((ph.phase, part.map_or(0, |x| x.bytes)))
        })
        .collect()
}

/// CUPTI detached after the first steps (the default since 2026-12-07):
/// what the device's use changed by across the stretch nothing was traced
/// in is a part of its own, from the phase end after it on, equal to the
/// probe's own readings at the stretch's ends (hf with PyTorch's default
/// allocator: no pool reading inside it, alone on its GPU); a run that
/// stayed attached has no stretch and no such part, and one whose stretch
/// changed nothing has none either.
#[test]
fn the_stretch_cupti_was_detached_is_its_own_part() {
    let growths = untraced_growths("hf-detached");
    assert_eq!(growths.len(), 1, "{growths:?}");
    assert!(
        growths[0] > 0,
        "a recording whose gap allocated: {growths:?}"
    );
    let parts = untraced_part("hf-detached");
    for (phase, bytes) in &parts {
        let expected = match phase {
            Phase::Setup | Phase::Step1 => 0,
            _ => growths[0],
        };
        assert_eq!(*bytes, expected, "{phase:?}: {parts:?}");
    }
    assert!(untraced_growths("hf-attached").is_empty());
    assert!(untraced_part("hf-attached").iter().all(|p| p.1 == 0));
    assert_eq!(untraced_growths("fsdp2-detached"), [0]);
    assert!(untraced_part("fsdp2-detached").iter().all(|p| p.1 == 0));
}

/// The probe's own counters at the end of a recording's event files:
/// (callbacks, first-launch watch, module loads, readings, caller walks),
/// in ns, read from its last cost record.
fn last_cost_counters(run: &str) -> [u64; 5] {
    probe_records("h100-callback-split", run)
        .into_iter()
        .rev()
        .find_map(|r| match r {
            prewarm_events::Record::Cost(c) => Some([
                c.callback_ns,
                c.launch_ns,
                c.module_ns,
                c.reading_ns,
                c.walk_ns,
            ]),
            _ => None,
        })
        .expect("a cost record")
}

/// The probe's callbacks' time split (probe 0.2.2: the first-launch watch,
/// module loads, free-memory readings; 0.2.3 also its caller walks) on four
/// GPU recordings: each phase's parts lie inside its callbacks' time (the
/// watch and the module loads are disjoint callbacks; the readings and the
/// walks lie inside callbacks, apart from each other), each part summed
/// over the phases is the probe's own counter at the end of the run (read
/// from the event file, apart from the analysis), step 1 holds some of
/// each, and the walks are said only where the probe timed them.
#[test]
fn the_probes_callback_time_split_adds_up_to_its_own_counters() {
    for (run, walks_timed) in [
        ("hf-split", false),
        ("fsdp2-split", false),
        ("hf-walks", true),
        ("fsdp2-walks", true),
    ] {
        let p = &recording(run)[0].processes[0];
        let counters = last_cost_counters(run);
        let [callbacks, launches, modules, readings, walks] = counters;
        assert!(
            launches + modules <= callbacks && readings + walks <= callbacks,
            "{run}"
        );
        let mut sums = [0.0f64; 5];
        for ph in &p.phases {
            let whole = ph.probe_callbacks_s;
            let split = ph.probe_callbacks_split.as_ref().expect("a split");
            assert_eq!(split.caller_walks_s.is_some(), walks_timed, "{run}");
            let walks_s = split.caller_walks_s.unwrap_or(0.0);
            let slack = 1e-9;
            assert!(
                split.launches_s + split.module_loads_s <= whole + slack,
                "{run} {:?}",
                ph.phase
            );
            assert!(
                split.readings_s + walks_s <= whole + slack,
                "{run} {:?}",
                ph.phase
            );
            let parts = [
                whole,
                split.launches_s,
                split.module_loads_s,
                split.readings_s,
                walks_s,
            ];
            for (sum, part) in sums.iter_mut().zip(parts) {
                *sum += part;
            }
            if ph.phase == Phase::Step1 {
                assert!(
                    parts[1..4].iter().all(|&x| x > 0.0) && (walks_s > 0.0) == walks_timed,
                    "{run}: {parts:?}"
                );
                // The probe that timed its walks also named its longest
                // callbacks: step 1's is, in these runs, under its total,
                // and a driver call the probe traces.
                let longest = split.longest_callback;
                assert_eq!(longest.is_some(), walks_timed, "{run}");
                if let Some(l) = longest {
                    assert!(l.seconds > 0.0 && l.seconds <= whole, "{run}: {l:?}");
                    assert!(l.name.starts_with("cu"), "{run}: {l:?}");
                }
            }
        }
        for (sum, ns) in sums.iter().zip(counters) {
            assert!(
                (sum * 1e9 - ns as f64).abs() < 1e3,
                "{run}: {sums:?} vs {counters:?}"
            );
        }
    }
}

/// Probe 0.2.3 names the longest callback between two cost records. On
/// the two GPU recordings that have it: every named one is one of the
/// callbacks counted between those records (no longer than their time
/// together, no shorter than their mean), save for the time of the
/// detach's teardown, which 0.2.3 counted as callback time without naming
/// it (0.2.4 names it: the stand-in suite's
/// `a_slow_detach_teardown_is_named_as_the_slowest_callback`) — only the
/// records around the untraced stretch's start exceed the mean, by less
/// than the stretch. And none in a run is as long as the 8–18 ms stretch
/// that the first call from libcublasLt held in probe 0.2.2's recordings
/// of hf (docs/footprint.md, fifteenth session), which 0.2.3's walk,
/// classifying a never-seen caller by the loaded objects, was made to
/// remove.
#[test]
fn the_slowest_callback_of_each_cost_record_is_one_it_counted() {
    for run in ["hf-walks", "fsdp2-walks"] {
        let (mut costs, mut untraced) = (Vec::new(), Vec::new());
        for record in probe_records("h100-callback-split", run) {
            match record {
                prewarm_events::Record::Cost(c) => costs.push(c),
                prewarm_events::Record::Untraced(u) => untraced.push(u),
                _ => {}
            }
        }
        assert_eq!(untraced.len(), 1, "{run}: one detach");
        let (named, mut over_mean) = (
            costs
                .windows(2)
                .filter(|w| w[1].slowest_callback_ns > 0)
                .count(),
            0,
        );
        assert!(named > 3, "{run}: {named} records name a callback");
        for pair in costs.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            let count = after.callbacks - before.callbacks;
            let time = after.callback_ns - before.callback_ns;
            if after.slowest_callback_ns == 0 {
                assert_eq!(
                    (after.slowest_callback_id, count),
                    (0, 0),
                    "{run}: {after:?}"
                );
                continue;
            }
            assert!(after.slowest_callback_id != 0, "{run}: {after:?}");
            assert!(
                after.slowest_callback_ns <= time,
                "{run}: {before:?} -> {after:?}"
            );
            assert!(
                after.slowest_callback_ns < 5_000_000,
                "{run}: a callback of {} ns: {after:?}",
                after.slowest_callback_ns
            );
            let excess = time.saturating_sub(after.slowest_callback_ns * count);
            if excess > 0 {
                over_mean += 1;
                let u = &untraced[0];
                assert!(
                    (before.t..after.t).contains(&u.t_start) && excess < u.t_end - u.t_start,
                    "{run}: {excess} ns over the mean: {before:?} -> {after:?}, {u:?}"
                );
            }
        }
        assert!(over_mean <= 1, "{run}");
    }
}

/// Probe 0.2.4 names the probe's own work it counts as callback time: the
/// detach's teardown and the first-launch watch's pauses. On its GPU
/// recordings (hf, and lazy, whose Triton autotune pauses the watch) no
/// cost record holds callback time beyond its slowest callback times its
/// count any more (0.2.3's did, by the teardown), the record whose window
/// holds the untraced stretch's start names the teardown, and it took what
/// the detach's notice says `cuptiFinalize` took on the training's thread
/// or more (the notice times the finalize alone); the lazy run names the
/// pauses, one per watch switch around a benchmark at most.
#[test]
fn probe_0_2_4_names_its_own_teardown_and_pauses_among_the_callbacks() {
    use prewarm_events::{Record, SLOWEST_DETACH_TEARDOWN, SLOWEST_WATCH_PAUSE};
    for (run, pauses_expected) in [("hf-named", false), ("lazy-named", true)] {
        let records = probe_records("h100-callback-split", run);
        let (mut costs, mut untraced) = (Vec::new(), Vec::new());
        for record in &records {
            match record {
                Record::Cost(c) => costs.push(c.clone()),
                Record::Untraced(u) => untraced.push(u.clone()),
                _ => {}
            }
        }
        assert_eq!(untraced.len(), 1, "{run}: one detach");
        let u = &untraced[0];
        let switches = records
            .iter()
            .filter(|r| matches!(r, Record::Activity(_)))
            .count();
        let (mut teardowns, mut pauses) = (Vec::new(), 0);
        for pair in costs.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            let count = after.callbacks - before.callbacks;
            let time = after.callback_ns - before.callback_ns;
            assert!(
                after.slowest_callback_ns <= time
                    && time <= after.slowest_callback_ns * count.max(1),
                "{run}: {before:?} -> {after:?}"
            );
            match after.slowest_callback_id {
                SLOWEST_DETACH_TEARDOWN => {
                    teardowns.push((before.t, after.t, after.slowest_callback_ns))
                }
                SLOWEST_WATCH_PAUSE => pauses += 1,
                _ => {}
            }
        }
        assert_eq!(teardowns.len(), 1, "{run}: {teardowns:?}");
        let (from, to, teardown_ns) = teardowns[0];
        assert!(
            (from..to).contains(&u.t_start),
            "{run}: {teardowns:?} {u:?}"
        );
        let notice = records
            .iter()
            .find_map(|r| match r {
                Record::Notice(n) if n.text.contains("cuptiFinalize") => Some(n.text.clone()),
                _ => None,
            })
            .expect("the detach's notice");
        let finalize_ms: f64 = notice
            .split(" ms of it cuptiFinalize")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{run}: {notice}"));
        assert!(
            teardown_ns as f64 / 1e6 >= finalize_ms - 0.05,
            "{run}: teardown {teardown_ns} ns, notice {notice}"
        );
        assert_eq!(pauses > 0, pauses_expected, "{run}: {pauses} pauses named");
        assert!(pauses <= switches, "{run}: {pauses} of {switches}");
    }
}

/// Contexts of one GPU model start with one local-memory reservation
/// whatever the script runs (the context's own figure, 535.6 MiB, is the
/// same in every recording of a model here). CUPTI reports the reservation
/// only after a launch, and the first launch of a kernel of a newly loaded
/// module can grow it: the first record read 148.5 MiB in the hf and lazy
/// scripts and 239.2 MiB in every FSDP2 one, whose first launch the device
/// showed gaining 92 MiB. The account's initial reservation (the first
/// record's total less that launch's gain) is one figure per model, to
/// within the first launch's module code, on every recording with kernel
/// records (before, 148.5 and 239.2 MiB). Three first-use runs stay apart,
/// each for its own documented reason (docs/accounting.md): under
/// `CUDA_MODULE_LOADING=EAGER` the first launch's window holds every
/// module's code, which the rule leaves to module code; with the
/// stream-ordered pool its first growth may fall in that window, which is
/// then not measured; the driver-only run loads its module with
/// `cuModuleLoadData`, which grows the reservation before any launch.
#[test]
fn every_context_of_one_gpu_model_starts_with_one_local_reservation() {
    const MIB: u64 = 1 << 20;
    let apart = ["fu-eager", "fu-async", "fu-driver"];
    let mut by_model: BTreeMap<&str, Vec<(String, u64)>> = BTreeMap::new();
    for (folder, (name, attempts)) in folders().iter().zip(recordings()) {
        let model = if folder.to_string_lossy().contains("/h100-") {
            "H100"
        } else {
            "H200"
        };
        for p in attempts.iter().flat_map(|a| &a.processes) {
            let initial = p
                .phases
                .iter()
                .filter_map(|ph| ph.gap_end.as_ref())
                .flat_map(|g| &g.parts)
                .find_map(|x| x.context.as_ref())
                .map(|c| c.initial_local_memory);
            if let Some(initial) = initial.filter(|&b| b > 0) {
                by_model
                    .entry(model)
                    .or_default()
                    .push((name.clone(), initial));
            }
        }
    }
    assert_eq!(by_model.len(), 2, "{by_model:?}");
    for (model, seen) in &by_model {
        let kept: Vec<u64> = seen
            .iter()
            .filter(|(n, _)| !apart.contains(&n.as_str()))
            .map(|s| s.1)
            .collect();
        assert!(kept.len() >= 10, "{model}: {seen:?}");
        let (lo, hi) = (kept.iter().min().unwrap(), kept.iter().max().unwrap());
        assert!(
            hi - lo <= FIRST_MODULE_MIB * MIB,
            "{model}: {lo} .. {hi}: {seen:?}"
        );
        for (n, b) in seen.iter().filter(|(n, _)| apart.contains(&n.as_str())) {
            assert!(b - lo > FIRST_MODULE_MIB * MIB, "{n} is not apart: {b}");
        }
    }
}

/// The smallest first-launch gain the account counts (its FIRST_MODULE_MIN):
/// below it, sampling noise.
const FIRST_MODULE_MIB: u64 = 4;
