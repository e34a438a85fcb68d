//! The subcommands: turn parsed arguments into core calls, print what comes
//! back, and choose the exit code.

use crate::analysis::analyse_run;
use crate::capture::env::CacheMode;
use crate::capture::layout::{AttemptDir, RUN_FILE, default_run_dir, safe_component};
use crate::capture::meta::{META_SCHEMA, RunMeta, VariantSpec};
use crate::capture::{AttemptPlan, CaptureError, default_host_tag, run_attempt};
use crate::cli::{CacheArg, CheckArgs, Command, DumpArgs, FormatArg, ReportArgs, RunArgs};
use crate::load::load_run;
use crate::probe::{cache_root, extract_assets, find_cupti, run_check, selftest_child};
use crate::report::terminal::render_attempt;
use std::path::{Path, PathBuf};

/// Exit codes of the doctor's own (not the child's) outcomes.
pub mod exit {
    /// The doctor could not start the command (bad arguments, unwritable run folder).
    pub const DOCTOR_FAILED: i32 = 125;
    /// The command was not found or not executable.
    pub const COMMAND_NOT_FOUND: i32 = 127;
    /// `report`: the input is not a usable run directory.
    pub const BAD_INPUT: i32 = 3;
    /// `report`: the run has damaged files (the report was still produced).
    pub const DAMAGED_INPUT: i32 = 4;
}

/// Runs one subcommand and returns the process exit code.
pub fn dispatch(command: Command) -> i32 {
    match command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Check(args) => check(args),
        Command::Dump(args) => dump(args),
        Command::InjectionSelftest => selftest_child(),
    }
}

fn cache_mode(c: CacheArg) -> CacheMode {
    match c {
        CacheArg::Cold => CacheMode::Cold,
        CacheArg::Warm => CacheMode::Warm,
        CacheArg::User => CacheMode::User,
    }
}

/// The name a run gets by default: the script (for python/torchrun) or program.
pub fn default_name(command: &[String]) -> String {
    let script = command.iter().find(|a| a.ends_with(".py")).or_else(|| command.first());
    script
        .map(|s| Path::new(s).file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| s.clone()))
        .unwrap_or_else(|| "run".into())
}

fn run(args: RunArgs) -> i32 {
    let name = args.name.clone().unwrap_or_else(|| default_name(&args.command));
    let out = args.out.clone().unwrap_or_else(|| default_run_dir(Path::new("prewarm-runs"), &name));
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("prewarm-doctor: cannot create the run folder {}: {e}", out.display());
        return exit::DOCTOR_FAILED;
    }
    // Absolute, so children that change directory still find it.
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    let cache = cache_mode(args.cache);
    let meta = RunMeta {
        schema: META_SCHEMA,
        doctor_version: env!("CARGO_PKG_VERSION").into(),
        name: name.clone(),
        command: crate::capture::env::redact_args(&args.command),
        created: chrono::Local::now().to_rfc3339(),
        variants: vec![VariantSpec { name: "default".into(), args: vec![], env: vec![], prewarms: vec![] }],
        repeat: 1,
        cache,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker.clone(),
        baseline: None,
        label: None,
    };
    if let Err(e) = std::fs::write(out.join(RUN_FILE), serde_json::to_string_pretty(&meta).expect("serialises")) {
        eprintln!("prewarm-doctor: cannot write {}: {e}", out.join(RUN_FILE).display());
        return exit::DOCTOR_FAILED;
    }
    let assets = if args.no_probe {
        None
    } else {
        match extract_assets(&cache_root()) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("prewarm-doctor: {e}; running the command without the probe");
                None
            }
        }
    };
    let (cupti, _) = find_cupti();
    let host = safe_component(&args.host_tag.clone().unwrap_or_else(default_host_tag));
    let plan = AttemptPlan {
        dir: AttemptDir { run: out.clone(), variant: "default".into(), attempt: "1".into(), host },
        command: args.command.clone(),
        assets: assets.as_ref(),
        cupti,
        cache,
        warmup: false,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker.clone(),
        extra_env: vec![],
    };
    let outcome = match run_attempt(&plan) {
        Ok(o) => o,
        Err(CaptureError::Child(e)) => {
            eprintln!("prewarm-doctor: {e}");
            return match e {
                crate::capture::child::ChildError::Spawn { .. } => exit::COMMAND_NOT_FOUND,
                _ => exit::DOCTOR_FAILED,
            };
        }
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::DOCTOR_FAILED;
        }
    };
    summarise(&out);
    outcome.exit.code
}

/// Prints the end-of-run summary to stderr; never changes the exit code.
fn summarise(out: &PathBuf) {
    match load_run(out) {
        Ok(run) => {
            for a in analyse_run(&run) {
                eprint!("{}", render_attempt(&a));
            }
            eprintln!("   run folder: {}", out.display());
        }
        Err(e) => eprintln!("prewarm-doctor: no summary: {e}"),
    }
}

fn report(args: ReportArgs) -> i32 {
    let run = match load_run(&args.run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::BAD_INPUT;
        }
    };
    let attempts = analyse_run(&run);
    let text = match args.format {
        FormatArg::Text => attempts.iter().map(render_attempt).collect::<Vec<_>>().join("\n"),
        FormatArg::Json => serde_json::to_string_pretty(&attempts).expect("serialises") + "\n",
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("prewarm-doctor: cannot write {}: {e}", path.display());
                return exit::DOCTOR_FAILED;
            }
        }
        None => print!("{text}"),
    }
    let damaged = attempts.iter().any(|a| a.problems.iter().any(|p| p.damaged) || a.processes.iter().any(|p| p.problems.iter().any(|q| q.damaged)));
    if damaged { exit::DAMAGED_INPUT } else { 0 }
}

fn check(args: CheckArgs) -> i32 {
    let assets = match extract_assets(&cache_root()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("prewarm-doctor: {e}");
            return exit::DOCTOR_FAILED;
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("prewarm-doctor"));
    let report = run_check(&exe, &assets);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serialises"));
    } else {
        for item in &report.items {
            println!("{} {:<12} {}", if item.ok { "ok  " } else { "FAIL" }, item.name, item.detail);
        }
        println!("probe: {}", assets.probe.display());
    }
    if report.all_ok() { 0 } else { 1 }
}

fn dump(args: DumpArgs) -> i32 {
    let file = match std::fs::File::open(&args.file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("prewarm-doctor: cannot open {}: {e}", args.file.display());
            return exit::BAD_INPUT;
        }
    };
    let outcome = crate::load::stream_records(std::io::BufReader::new(file), |r| println!("{r:?}"));
    if let Some(h) = &outcome.header {
        for (k, v) in &h.fields {
            println!("# {k} = {v}");
        }
    }
    match outcome.problem(Path::new(""), &args.file) {
        Some(p) => {
            eprintln!("prewarm-doctor: {}: {}", p.file, p.what);
            if p.damaged { exit::DAMAGED_INPUT } else { 0 }
        }
        None => 0,
    }
}
