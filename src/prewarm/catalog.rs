//! The catalog of known prewarms: what each one is supposed to move out of
//! step 1. Verdicts judge a prewarm on the event classes it targets.
//!
//! NeMo AutoModel's entries are the keys of its recipe's `prewarm:` section
//! (`PrewarmConfig`; docs/variants.md lists each with its targets and where
//! it is documented). Its recipe config rejects keys it does not know, so a
//! flag the installed release lacks fails that variant at config parse.

use serde::Serialize;

/// A class of lazy-initialisation events a prewarm can move out of step 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventClass {
    /// cuBLAS/cuBLASLt handles, workspaces and their out-of-pool bytes.
    Cublas,
    /// Triton autotuning (benchmarking candidate configs).
    TritonAutotune,
    /// Local-memory reservation growth (spilling kernels).
    LocalMemory,
    /// Triton/JIT compilation.
    Compile,
    /// NCCL communicator creation and its buffers.
    NcclComm,
    /// Module loads and first kernel launches (lazy loading).
    ModuleLoad,
}

impl EventClass {
    /// Every class, in the order reports list them (a test matches each
    /// variant, so a new class cannot be left out).
    pub const ALL: [EventClass; 6] = [
        EventClass::Cublas,
        EventClass::TritonAutotune,
        EventClass::LocalMemory,
        EventClass::Compile,
        EventClass::NcclComm,
        EventClass::ModuleLoad,
    ];

    /// Label for reports.
    pub fn label(self) -> &'static str {
        match self {
            EventClass::Cublas => "cuBLAS init",
            EventClass::TritonAutotune => "Triton autotune",
            EventClass::LocalMemory => "local-memory growth",
            EventClass::Compile => "compile",
            EventClass::NcclComm => "NCCL communicator init",
            EventClass::ModuleLoad => "module loading",
        }
    }
}

/// Who ships a prewarm: how a variant names it (a recipe flag, an
/// environment switch, the prescription file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// NeMo AutoModel's `prewarm:` recipe keys (`--prewarm.KEY true`).
    NemoAutoModel,
    /// This repository's examples (`--prewarm-NAME`, `PREWARM_NAME=1`).
    Examples,
    /// A prescription written by `prewarm-doctor prescribe`.
    Prescribe,
}

impl Framework {
    /// Its name as users know it.
    pub fn label(self) -> &'static str {
        match self {
            Framework::NemoAutoModel => "NeMo AutoModel",
            Framework::Examples => "prewarm-doctor examples",
            Framework::Prescribe => "prewarm-doctor prescribe",
        }
    }
}

/// A known prewarm.
#[derive(Debug, Clone)]
pub struct Prewarm {
    pub name: &'static str,
    pub framework: Framework,
    pub description: &'static str,
    pub targets: &'static [EventClass],
    /// Command-line flag that enables it (recipe override), if any.
    pub flag: Option<&'static str>,
    /// Environment variable that enables it (=1), if any.
    pub env: Option<&'static str>,
}

use EventClass::*;

/// Every prewarm the doctor knows.
pub const CATALOG: &[Prewarm] = &[
    Prewarm {
        name: "cublas_backward",
        framework: Framework::NemoAutoModel,
        description: "tiny cuBLAS forward+backward matmul per dtype (fp32, bf16) at setup",
        targets: &[Cublas],
        flag: Some("--prewarm.cublas_backward"),
        env: None,
    },
    Prewarm {
        name: "fla_gdn_autotune",
        framework: Framework::NemoAutoModel,
        description: "warm flash-linear-attention gated-delta-net Triton autotune caches per model shape: the context-parallel backward kernels (pre-process, state merge) launched directly, then a tiny end-to-end forward+backward",
        targets: &[TritonAutotune, LocalMemory, Compile],
        flag: Some("--prewarm.fla_gdn_autotune"),
        env: None,
    },
    Prewarm {
        name: "mamba_ssd_autotune",
        framework: Framework::NemoAutoModel,
        description: "warm Mamba SSD Triton autotune caches per mixer shape (local CP geometry) with a tiny end-to-end forward+backward",
        targets: &[TritonAutotune, LocalMemory, Compile],
        flag: Some("--prewarm.mamba_ssd_autotune"),
        env: None,
    },
    Prewarm {
        name: "comm_groups",
        framework: Framework::NemoAutoModel,
        description: "one-element all-reduce per group grad-norm clipping reduces over: every non-Replicate mesh dim of each DTensor parameter group, plus the pp mesh",
        targets: &[NcclComm],
        flag: Some("--prewarm.comm_groups"),
        env: None,
    },
    Prewarm {
        name: "dry_run",
        framework: Framework::NemoAutoModel,
        description: "one side-effect-free forward+backward of the model at setup (RNG, buffers, router state restored; skipped with pipeline parallelism)",
        targets: &[
            Cublas,
            TritonAutotune,
            LocalMemory,
            Compile,
            ModuleLoad,
            NcclComm,
        ],
        flag: Some("--prewarm.dry_run"),
        env: None,
    },
    Prewarm {
        name: "cublas",
        framework: Framework::Examples,
        description: "tiny fwd+bwd per dtype at setup",
        targets: &[Cublas],
        flag: Some("--prewarm-cublas"),
        env: Some("PREWARM_CUBLAS"),
    },
    Prewarm {
        name: "cp_kernels",
        framework: Framework::Examples,
        description: "launch the context-parallel path's Triton kernel directly at setup (examples/context_parallel.py)",
        targets: &[TritonAutotune, LocalMemory, Compile],
        flag: Some("--prewarm-cp-kernels"),
        env: Some("PREWARM_CP_KERNELS"),
    },
    Prewarm {
        name: "triton_autotune",
        framework: Framework::Examples,
        description: "run the autotuned Triton kernel on every model shape at setup",
        targets: &[TritonAutotune, LocalMemory, Compile],
        flag: Some("--prewarm-triton-autotune"),
        env: Some("PREWARM_TRITON_AUTOTUNE"),
    },
    Prewarm {
        name: "pipeline_stage_compile",
        framework: Framework::Examples,
        description: "each pipeline stage's forward+backward once, locally, at setup (examples/pipeline_pp.py)",
        targets: &[Compile, ModuleLoad, Cublas, TritonAutotune, LocalMemory],
        flag: Some("--prewarm-pipeline-stage-compile"),
        env: Some("PREWARM_PIPELINE_STAGE_COMPILE"),
    },
    Prewarm {
        name: "nccl_comm",
        framework: Framework::Examples,
        description: "one tiny all-reduce per process group at setup (and a send/recv per pipeline link)",
        targets: &[NcclComm],
        flag: Some("--prewarm-nccl-comm"),
        env: Some("PREWARM_NCCL_COMM"),
    },
];

/// The prescription `prewarm-doctor prescribe` wrote (a `NAME:@FILE` variant
/// or `run --prescribe`): judged on every class it can warm. Kept out of
/// [`CATALOG`], which lists the prewarms a user can switch on by name (and
/// which out-of-memory projections try one by one).
pub const PRESCRIBED: Prewarm = Prewarm {
    name: "prescribed",
    framework: Framework::Prescribe,
    description: "the prescription `prewarm-doctor prescribe` wrote from a recorded run, injected by the shim",
    targets: &[Cublas, TritonAutotune, LocalMemory, Compile, NcclComm],
    flag: None,
    env: None,
};

/// Looks a prewarm up by name.
pub fn find(name: &str) -> Option<&'static Prewarm> {
    CATALOG
        .iter()
        .find(|p| p.name == name)
        .or((name == PRESCRIBED.name).then_some(&PRESCRIBED))
}

/// The prewarms a variant's extra arguments and environment enable.
pub fn infer(args: &[String], env: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for p in CATALOG {
        let by_flag = p.flag.is_some_and(|f| {
            args.iter().enumerate().any(|(i, a)| {
                let truthy = |v: &str| {
                    !matches!(
                        v.to_ascii_lowercase().as_str(),
                        "false" | "0" | "no" | "off"
                    )
                };
                if let Some(v) = a.strip_prefix(f).and_then(|rest| rest.strip_prefix('=')) {
                    truthy(v)
                } else if a == f {
                    args.get(i + 1)
                        .is_none_or(|next| next.starts_with('-') || truthy(next))
                } else {
                    false
                }
            })
        });
        let by_env = p.env.is_some_and(|e| {
            env.iter()
                .any(|(k, v)| k == e && !matches!(v.as_str(), "" | "0" | "false"))
        });
        if by_flag || by_env {
            found.push(p.name.to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_holds_every_class_once() {
        for c in EventClass::ALL {
            let at = match c {
                EventClass::Cublas => 0,
                EventClass::TritonAutotune => 1,
                EventClass::LocalMemory => 2,
                EventClass::Compile => 3,
                EventClass::NcclComm => 4,
                EventClass::ModuleLoad => 5,
            };
            assert_eq!(EventClass::ALL[at], c);
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn infers_prewarms_from_flags_and_env() {
        assert_eq!(
            infer(&s(&["--prewarm.cublas_backward", "true"]), &[]),
            vec!["cublas_backward"]
        );
        assert_eq!(
            infer(&s(&["--prewarm.cublas_backward", "false"]), &[]),
            Vec::<String>::new()
        );
        assert_eq!(
            infer(&s(&["--prewarm.comm_groups=true"]), &[]),
            vec!["comm_groups"]
        );
        assert_eq!(infer(&s(&["--prewarm-nccl-comm"]), &[]), vec!["nccl_comm"]);
        assert_eq!(
            infer(&[], &[("PREWARM_CUBLAS".into(), "1".into())]),
            vec!["cublas"]
        );
        assert!(
            find("fla_gdn_autotune")
                .unwrap()
                .targets
                .contains(&EventClass::LocalMemory)
        );
        // The layout examples' switches, and a variant option after the flag.
        assert_eq!(
            infer(
                &s(&["--prewarm-nccl-comm", "--comm-prewarm", "incomplete"]),
                &[]
            ),
            vec!["nccl_comm"]
        );
        assert_eq!(
            infer(&s(&["--prewarm-pipeline-stage-compile"]), &[]),
            vec!["pipeline_stage_compile"]
        );
        assert_eq!(
            infer(&[], &[("PREWARM_CP_KERNELS".into(), "1".into())]),
            vec!["cp_kernels"]
        );
    }

    /// examples/common.py gives each prewarm NAME the flag --prewarm-NAME
    /// (dashes) and the variable PREWARM_<NAME>; the catalog must agree, or a
    /// variant enabling an example's prewarm is not judged on its targets.
    #[test]
    fn example_prewarms_follow_the_examples_naming() {
        for p in CATALOG
            .iter()
            .filter(|p| p.framework == Framework::Examples)
        {
            assert_eq!(
                p.flag,
                Some(format!("--prewarm-{}", p.name.replace('_', "-")).as_str())
            );
            assert_eq!(
                p.env,
                Some(format!("PREWARM_{}", p.name.to_uppercase()).as_str())
            );
        }
        for p in CATALOG
            .iter()
            .filter(|p| p.framework == Framework::NemoAutoModel)
        {
            assert_eq!(p.flag, Some(format!("--prewarm.{}", p.name).as_str()));
        }
    }
}
