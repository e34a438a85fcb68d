//! The subcommands: turn parsed arguments into core calls, print what comes
//! back, and choose the exit code (one table: [`exit`], and README "Exit codes").
//! Everything the doctor prints or writes goes through [`crate::output`], which
//! decides where bytes go (stdout, `-o` files and folders, the job summary,
//! stderr): a closed stdout or stderr never panics and never changes the code.

use crate::analysis::gate::{Gate, GateResult, Runs, evaluate};
use crate::capture::matrix::{AttemptResult, MatrixPlan, run_matrix};
use crate::capture::{CaptureError, default_host_tag};
use crate::cli::{
    CacheArg, CheckArgs, Command, DiffArgs, DumpArgs, PrescribeArgs, ReportArgs, RunArgs, TuiArgs,
};
use crate::injection::{Assets, cache_root, extract_assets, find_cupti, run_check, selftest_child};
use crate::output::{self, OutputError, write_diff, write_report};
use crate::pipeline::{Analysed, DiffInputs, end_of_run_summary};
use crate::prewarm::variants::{self, VariantError};
use crate::report::escape::{terminal, terminal_block};
use crate::report::renderer::ReportError;
use crate::report::seconds;
use crate::report::select::Selection;
use crate::run_folder::layout::{
    OutFolder, RUN_FILE, classify_out, create_default_run_dir, next_repeat, safe_component,
};
use crate::run_folder::meta::CacheMode;
use crate::run_folder::meta::{META_SCHEMA, RunMeta, VariantSpec};
use std::path::{Path, PathBuf};

/// Exit codes of the doctor's own outcomes (the README's "Exit codes" table).
/// `run` otherwise exits with the command's own code.
pub mod exit {
    /// `check`: this machine cannot capture (each line says why).
    pub const CANNOT_CAPTURE: i32 = 1;
    /// `report`, `diff`, `check`, `dump`: bad usage (unknown flag, malformed
    /// `--fail-if`, a format the verb does not have). `run` uses 125 instead.
    pub const USAGE: i32 = crate::cli::USAGE_ERROR;
    /// A `--fail-if` expression is malformed (a usage error).
    pub const BAD_GATE: i32 = USAGE;
    /// `report`, `diff`: the input is not a usable run directory; `dump`: the file cannot be opened.
    pub const BAD_INPUT: i32 = 3;
    /// The run has damaged files (the report was still produced; stderr names each file).
    pub const DAMAGED_INPUT: i32 = 4;
    /// `report --attempt`: no such attempt in the run (stderr lists the ones there are).
    pub const NO_SUCH_ATTEMPT: i32 = 5;
    /// `run` of a matrix: at least one attempt's command failed.
    pub const MATRIX_RUN_FAILED: i32 = 10;
    /// A `--fail-if` threshold was crossed.
    pub const GATE_FAILED: i32 = 11;
    /// The doctor itself failed: `run` before the command started (bad flags,
    /// unwritable or conflicting run folder); any verb that cannot write its
    /// own output (`report -o` into a missing folder, a full disk).
    pub const DOCTOR_FAILED: i32 = crate::cli::RUN_USAGE_ERROR;
    /// `run`: the command exists but cannot be executed (permissions).
    pub const COMMAND_NOT_EXECUTABLE: i32 = 126;
    /// `run`: the command was not found.
    pub const COMMAND_NOT_FOUND: i32 = 127;
}

/// Runs one subcommand and returns the process exit code.
pub fn dispatch(command: Command) -> i32 {
    match command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Diff(args) => diff(args),
        Command::Check(args) => check(args),
        Command::Dump(args) => dump(args),
        Command::Tui(args) => tui(args),
        Command::Prescribe(args) => prescribe(args),
        Command::InjectionSelftest => selftest_child(),
    }
}

fn cache_mode(c: CacheArg) -> CacheMode {
    match c {
        CacheArg::Cold => CacheMode::Cold,
        CacheArg::Warm => CacheMode::Warm,
        CacheArg::User => CacheMode::User,
        CacheArg::Shared => CacheMode::Shared,
    }
}

/// The name a run gets by default: the script (for python/torchrun) or program.
pub fn default_name(command: &[String]) -> String {
    let script = command
        .iter()
        .find(|a| a.ends_with(".py"))
        .or_else(|| command.first());
    script
        .map(|s| {
            Path::new(s)
                .file_stem()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| s.clone())
        })
        .unwrap_or_else(|| "run".into())
}

fn declared_variants(args: &RunArgs) -> Result<(Vec<VariantSpec>, String), VariantError> {
    let mut variants = Vec::new();
    let mut baseline = args.baseline.clone();
    if let Some(p) = &args.preset {
        variants.extend(variants::preset(p)?);
    }
    if let Some(f) = &args.variants_file {
        let (vs, b) = variants::from_file(f)?;
        variants.extend(vs);
        baseline = baseline.or(b);
    }
    for spec in &args.variants {
        variants.push(variants::parse_variant(spec)?);
    }
    if variants.is_empty() {
        variants.push(VariantSpec {
            name: "default".into(),
            args: vec![],
            env: vec![],
            prewarms: vec![],
        });
    }
    for spec in &args.variant_env {
        variants::apply_env(&mut variants, spec)?;
    }
    let base = variants::finish(&mut variants, baseline.as_deref())?;
    Ok((variants, base))
}

/// `--prescribe FILE`: every variant injects the prescription (`--force`
/// lets it run on a model it was not made for).
fn with_prescription(
    args: &RunArgs,
    (mut variants, baseline): (Vec<VariantSpec>, String),
) -> Result<(Vec<VariantSpec>, String), VariantError> {
    let Some(file) = &args.prescribe else {
        return Ok((variants, baseline));
    };
    let shown = file.display().to_string();
    let env = variants::prescription_env("--prescribe", &shown).map_err(|e| match e {
        VariantError::Prescription { file, why, .. } => VariantError::File {
            file: format!("--prescribe {file}"),
            why,
        },
        other => other,
    })?;
    for v in &mut variants {
        v.env.extend(env.iter().cloned());
        if args.force {
            v.env
                .push(("PREWARM_DOCTOR_PRESCRIPTION_FORCE".into(), "1".into()));
        }
        if !v.prewarms.iter().any(|p| p == "prescribed") {
            v.prewarms.push("prescribed".into());
        }
    }
    Ok((variants, baseline))
}

/// `prescribe`: the prescription module to a file or standard output, and
/// what it holds to standard error.
fn prescribe(args: PrescribeArgs) -> i32 {
    let p = match crate::prescribe::prescribe(&args.run, args.attempt.as_deref()) {
        Ok(p) => p,
        Err(e @ crate::prescribe::PrescribeError::NoSuchAttempt(..)) => {
            output::error(e);
            return exit::NO_SUCH_ATTEMPT;
        }
        Err(e) => {
            output::error(e);
            return exit::BAD_INPUT;
        }
    };
    if let Err(e) = output::write_text(
        args.output.as_deref(),
        p.text.as_bytes(),
        "the prescription",
    ) {
        output::error(e);
        return exit::DOCTOR_FAILED;
    }
    output::stderr_text(&format!(
        "prescription for {}: {} cuBLAS dtype(s), {} process group(s), {} Triton autotune key(s); {} item(s) not replayed (listed in the file)\n",
        terminal(&p.attempt),
        p.plan.cublas.len(),
        p.plan.groups.len(),
        p.plan.triton.len(),
        p.plan.not_replayed.len()
    ));
    0
}

/// The run folder `run` writes into: `--out` (checked against what it holds)
/// or a new default folder.
fn prepare_out(args: &RunArgs, name: &str, meta: &RunMeta) -> Result<PathBuf, String> {
    let Some(out) = &args.out else {
        return create_default_run_dir(Path::new("prewarm-runs"), name)
            .map_err(|e| format!("cannot create a run folder under prewarm-runs: {e}"));
    };
    if let OutFolder::Conflict(why) = classify_out(out, meta) {
        if !args.force {
            return Err(format!(
                "--out: {why}; choose another --out, or add --force to write into it anyway"
            ));
        }
        output::error(format_args!("--force: writing into it anyway: {why}"));
    }
    std::fs::create_dir_all(out)
        .map_err(|e| format!("cannot create the run folder {}: {e}", out.display()))?;
    Ok(out.clone())
}

/// Writes run.json. Every node of a multi-node job writes the same description
/// into the shared folder: write-then-rename, so a reader never sees half a file.
fn write_run_meta(out: &Path, meta: &RunMeta) -> Result<(), String> {
    let staged = out.join(format!(".{RUN_FILE}.{}", std::process::id()));
    std::fs::write(
        &staged,
        serde_json::to_string_pretty(meta).expect("run metadata serialises"),
    )
    .and_then(|()| std::fs::rename(&staged, out.join(RUN_FILE)))
    .map_err(|e| format!("cannot write {}: {e}", out.join(RUN_FILE).display()))
}

fn progress_line(p: &crate::capture::matrix::Progress) -> String {
    let eta = p
        .eta
        .map(|d| format!(", about {} left", seconds(d.as_secs_f64())))
        .unwrap_or_default();
    let elapsed = if p.index > 1 {
        format!(" after {}", seconds(p.elapsed.as_secs_f64()))
    } else {
        String::new()
    };
    let what = if p.warmup {
        "cache warm-up (untimed)".to_string()
    } else {
        format!("repeat {}", p.attempt)
    };
    format!(
        "[prewarm-doctor] {}/{}: variant '{}' {what}{elapsed}{eta}\n",
        p.index, p.total, p.variant
    )
}

/// The code `run` exits with when the command could not be started.
fn spawn_failure_code(e: &crate::capture::child::ChildError) -> i32 {
    match e {
        crate::capture::child::ChildError::Spawn { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => exit::COMMAND_NOT_FOUND,
            std::io::ErrorKind::PermissionDenied => exit::COMMAND_NOT_EXECUTABLE,
            _ => exit::DOCTOR_FAILED,
        },
        _ => exit::DOCTOR_FAILED,
    }
}

/// `--step-marker` is compiled by the shim with Python's `re`; it is checked
/// here with a regex engine that accepts the same syntax (lookarounds,
/// backreferences, `(?P<name>...)`), so a pattern Python takes is not refused.
fn check_step_marker(m: &str) -> Result<(), String> {
    fancy_regex::Regex::new(m)
        .map(|_| ())
        .map_err(|e| format!("--step-marker '{m}' is not a valid regular expression: {e}"))
}

fn run(args: RunArgs) -> i32 {
    match run_checked(args) {
        Ok(code) => code,
        Err(message) => {
            output::error(message);
            exit::DOCTOR_FAILED
        }
    }
}

/// The probe and shim extracted into the cache; None (with a notice, on the
/// doctor's stderr) runs the command without them.
fn probe_assets() -> Option<Assets> {
    extract_assets(&cache_root())
        .inspect_err(|e| output::error(format_args!("{e}; running the command without the probe")))
        .ok()
}

/// `run` once its arguments are known good; an error is the doctor's own
/// failure (exit DOCTOR_FAILED), said by `run`.
fn run_checked(args: RunArgs) -> Result<i32, String> {
    if args.tui {
        crate::tui::require_terminal(
            "run --tui",
            "drop --tui (the run prints its summary at the end, and `prewarm-doctor tui RUN` replays it later)",
        )
        .map_err(|e| e.to_string())?;
    }
    if let Some(m) = &args.step_marker {
        check_step_marker(m)?;
    }
    let (variants, baseline) = declared_variants(&args)
        .and_then(|v| with_prescription(&args, v))
        .map_err(|e| e.to_string())?;
    let command = crate::capture::lossy(&args.command);
    let name = args.name.clone().unwrap_or_else(|| default_name(&command));
    let cache = cache_mode(args.cache);
    let single = variants.len() == 1 && args.repeat == 1 && cache != CacheMode::Warm;
    let mut meta = RunMeta {
        schema: META_SCHEMA,
        doctor_version: env!("CARGO_PKG_VERSION").into(),
        name: name.clone(),
        command: crate::run_folder::redact::redact_args(&command),
        created: chrono::Local::now().to_rfc3339(),
        variants: variants.clone(),
        repeat: args.repeat,
        cache,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker.clone(),
        baseline: Some(baseline),
        label: None,
    };
    let out = prepare_out(&args, &name, &meta)?;
    // Absolute, so children that change directory still find it.
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    let host = safe_component(&args.host_tag.clone().unwrap_or_else(default_host_tag));
    let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
    let first_repeat = next_repeat(&out, &names, &host);
    meta.repeat = (first_repeat - 1).saturating_add(args.repeat);
    if first_repeat > 1 {
        output::error(format_args!(
            "{} already holds attempts of this command from host '{host}': adding attempts {first_repeat}..{}",
            out.display(),
            meta.repeat
        ));
    }
    write_run_meta(&out, &meta)?;
    let assets = (!args.no_probe).then(probe_assets).flatten();
    let live = args.tui.then(crate::tui::live::LiveRun::new);
    let plan = MatrixPlan {
        run: out.clone(),
        host,
        command: args.command.clone(),
        variants,
        repeat: args.repeat,
        first_repeat,
        cache,
        keep_caches: args.keep_caches,
        assets: assets.as_ref(),
        cupti: find_cupti().0,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker.clone(),
        output: live.as_ref().map(|l| l.sink()),
        stop: live.as_ref().map(|l| l.stop_flag()),
    };
    let results = run_attempts(&plan, live, single);
    say_attempt_errors(&results, &plan)?;
    summarise(&out);
    Ok(run_exit_code(&results, single))
}

/// Runs the plan's attempts, in the live dashboard when there is one, else
/// with a progress line for each attempt of a matrix (none for a single run,
/// whose output is the training's alone). The attempts that start after the
/// dashboard was closed with the run going on print their progress lines as
/// a run without the dashboard does.
fn run_attempts(
    plan: &MatrixPlan,
    live: Option<crate::tui::live::LiveRun>,
    single: bool,
) -> Vec<AttemptResult> {
    let progress = |p: &crate::capture::matrix::Progress| {
        if !single {
            output::stderr_text(&progress_line(p));
        }
    };
    match live {
        Some(live) => {
            let log = live.log();
            live.show(
                &plan.run,
                || {
                    run_matrix(plan, |p| {
                        if log.dashboard_open() {
                            log.attempt_started(&p.variant, &p.attempt, p.index, p.total)
                        } else {
                            progress(p)
                        }
                    })
                },
                |r| run_exit_code(r, single),
            )
        }
        None => run_matrix(plan, progress),
    }
}

/// Says each attempt whose command could not start; an attempt the doctor
/// itself could not set up (its folder, its metadata) ends the run.
fn say_attempt_errors(results: &[AttemptResult], plan: &MatrixPlan) -> Result<(), String> {
    for (planned, outcome) in results {
        match outcome {
            Ok(_) => {}
            Err(CaptureError::Child(e)) => output::error(format_args!(
                "variant '{}' attempt {}: {e}",
                plan.variants[planned.variant].name, planned.attempt
            )),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// The code `run` exits with: the command's for a single run, else 0 or
/// MATRIX_RUN_FAILED.
fn run_exit_code(results: &[AttemptResult], single: bool) -> i32 {
    let code = |o: &Result<crate::capture::AttemptOutcome, CaptureError>| match o {
        Ok(o) => o.exit.code,
        Err(CaptureError::Child(e)) => spawn_failure_code(e),
        Err(_) => exit::DOCTOR_FAILED,
    };
    if single {
        results
            .first()
            .map_or(exit::DOCTOR_FAILED, |(_, o)| code(o))
    } else if results.iter().any(|(_, o)| code(o) != 0) {
        exit::MATRIX_RUN_FAILED
    } else {
        0
    }
}

/// Prints the end-of-run summary to stderr; never changes the exit code.
fn summarise(out: &Path) {
    match end_of_run_summary(out) {
        Ok(text) => output::stderr_text(&text),
        Err(e) => output::error(format_args!("no summary: {e}")),
    }
}

fn parse_gates(exprs: &[String]) -> Result<Vec<Gate>, i32> {
    exprs
        .iter()
        .map(|e| Gate::parse(e))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            output::error(e);
            exit::BAD_GATE
        })
}

/// Prints gate results to stderr and returns whether any failed.
fn report_gates(results: &[GateResult]) -> bool {
    for r in results {
        output::stderr_text(&format!("{}\n", crate::report::gate_text::gate_line(r)));
    }
    results.iter().any(|r| r.failed)
}

/// Prints each damaged file of a run on stderr; returns whether there were any.
fn report_damage(lines: &[String]) -> bool {
    for line in lines {
        output::error(line);
    }
    !lines.is_empty()
}

/// The flags of `report` that a format cannot honour, as the usage error
/// that says what to do instead.
fn report_usage_error(args: &ReportArgs) -> Option<String> {
    let tells = args.format.tells_a_selection();
    let f = args.format.name();
    if !tells && (args.attempt.is_some() || args.all) {
        let flag = if args.all { "--all" } else { "--attempt" };
        return Some(format!(
            "{flag} chooses the attempts the text and Markdown reports tell; --format {f} always holds every attempt (drop {flag}, or use --format text or md)"
        ));
    }
    output::refuse_destination(args.format, args.output.as_deref())
}

fn report(args: ReportArgs) -> i32 {
    if let Some(why) = report_usage_error(&args) {
        output::error(why);
        return exit::USAGE;
    }
    let gates = match parse_gates(&args.fail_if) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let run = match Analysed::load(&args.run) {
        Ok(r) => r,
        Err(e) => {
            output::error(e);
            return exit::BAD_INPUT;
        }
    };
    let selection = Selection::from_flags(args.attempt.as_deref(), args.all);
    let damage = run.damage_lines();
    let summaries = run.summaries();
    let model = run.into_model();
    match write_report(args.format, &model, selection, args.output.as_deref()) {
        Ok(()) => {}
        Err(e @ OutputError::Report(ReportError::NoSuchAttempt(_))) => {
            output::error(e);
            return exit::NO_SUCH_ATTEMPT;
        }
        Err(e @ OutputError::Usage(_)) => {
            output::error(e);
            return exit::USAGE;
        }
        Err(e) => {
            output::error(e);
            return exit::DOCTOR_FAILED;
        }
    }
    let damaged = report_damage(&damage);
    if !gates.is_empty() {
        let runs = Runs {
            new: &summaries,
            new_matrix: model.matrix_account.as_ref(),
            old: None,
            allow_missing: false,
        };
        match evaluate(&gates, &runs) {
            Ok(results) => {
                if report_gates(&results) {
                    return exit::GATE_FAILED;
                }
            }
            Err(e) => {
                output::error(e);
                return exit::BAD_GATE;
            }
        }
    }
    if damaged { exit::DAMAGED_INPUT } else { 0 }
}

fn diff(args: DiffArgs) -> i32 {
    let gates = match parse_gates(&args.fail_if) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let inputs = match DiffInputs::load(&args.old, &args.new) {
        Ok(i) => i,
        Err(e) => {
            output::error(e);
            return exit::BAD_INPUT;
        }
    };
    if let Err(e) = write_diff(args.format, &inputs.diff()) {
        output::error(e);
        return exit::DOCTOR_FAILED;
    }
    let damaged_old = report_damage(&inputs.old.damage_lines());
    let damaged_new = report_damage(&inputs.new.damage_lines());
    let runs = Runs {
        new: &inputs.new_summaries,
        new_matrix: inputs.new.matrix.as_ref(),
        old: Some(&inputs.old_summaries),
        allow_missing: args.allow_missing,
    };
    match evaluate(&gates, &runs) {
        Ok(results) if report_gates(&results) => exit::GATE_FAILED,
        Ok(_) if damaged_old || damaged_new => exit::DAMAGED_INPUT,
        Ok(_) => 0,
        Err(e) => {
            output::error(e);
            exit::BAD_GATE
        }
    }
}

fn tui(args: TuiArgs) -> i32 {
    match crate::tui::replay(&args.run) {
        Ok(code) => code,
        Err(e @ crate::tui::TuiError::Load(_)) => {
            output::error(e);
            exit::BAD_INPUT
        }
        Err(e) => {
            output::error(e);
            exit::DOCTOR_FAILED
        }
    }
}

fn check(args: CheckArgs) -> i32 {
    let assets = match extract_assets(&cache_root()) {
        Ok(a) => a,
        Err(e) => {
            output::error(e);
            return exit::DOCTOR_FAILED;
        }
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("prewarm-doctor"));
    let report = run_check(&exe, &assets);
    let text = if args.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&report).expect("the check report serialises")
        )
    } else {
        let mut t = String::new();
        for item in &report.items {
            t.push_str(&format!(
                "{} {:<12} {}\n",
                if item.ok { "ok  " } else { "FAIL" },
                item.name,
                item.detail
            ));
        }
        t.push_str(&format!("probe: {}\n", assets.probe.display()));
        t
    };
    if let Err(e) = output::print_stdout(terminal_block(&text).as_bytes()) {
        output::error(e);
        return exit::DOCTOR_FAILED;
    }
    if report.all_ok() {
        0
    } else {
        exit::CANNOT_CAPTURE
    }
}

fn dump(args: DumpArgs) -> i32 {
    let file = match std::fs::File::open(&args.file) {
        Ok(f) => f,
        Err(e) => {
            output::error(format_args!("cannot open {}: {e}", args.file.display()));
            return exit::BAD_INPUT;
        }
    };
    let mut sink = output::StdoutLines::new();
    let outcome = crate::load::stream_records(std::io::BufReader::new(file), |r| {
        sink.line(format_args!("{}", terminal(&format!("{r:?}"))))
    });
    if let Some(h) = &outcome.header {
        for (k, v) in &h.fields {
            sink.line(format_args!("# {} = {}", terminal(k), terminal(v)));
        }
    }
    if let Err(e) = sink.finish() {
        output::error(e);
        return exit::DOCTOR_FAILED;
    }
    let problems = outcome.problems(Path::new(""), &args.file);
    for p in &problems {
        output::error(p);
    }
    if problems.iter().any(|p| p.damaged) {
        exit::DAMAGED_INPUT
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_marker_takes_what_pythons_re_takes() {
        for ok in [
            r"step (?=\d)",
            r"(?<!warm)step",
            r"(?P<n>step)\s(?P=n)?",
            r"^train_step$",
        ] {
            assert!(check_step_marker(ok).is_ok(), "{ok}");
        }
        let e = check_step_marker("step (").unwrap_err();
        assert!(e.contains("--step-marker 'step ('"), "{e}");
    }
}
