//! The subcommands: turn parsed arguments into core calls, print what comes
//! back, and choose the exit code (one table: [`exit`], and README "Exit codes").
//! Everything the doctor prints or writes goes through [`crate::output`], which
//! decides where bytes go (stdout, `-o` files and folders, the job summary,
//! stderr): a closed stdout or stderr never panics and never changes the code.

use crate::analysis::gate::{Gate, GateResult, Runs, evaluate};
use crate::capture::matrix::Progress;
use crate::capture::run::{
    AttemptEnd, PreparedRun, RunNotice, RunOutcome, RunRequest, VariantFlags, prepare,
};
use crate::cli::{
    CacheArg, CheckArgs, Command, DiffArgs, DumpArgs, PrescribeArgs, ReportArgs, RunArgs, TuiArgs,
};
use crate::injection::{cache_root, extract_assets, run_check, selftest_child};
use crate::output::{self, OutputError, write_diff, write_report};
use crate::pipeline::{Analysed, DiffInputs, end_of_run_summary};
use crate::report::escape::{terminal, terminal_block};
use crate::report::renderer::ReportError;
use crate::report::seconds;
use crate::report::select::Selection;
use crate::run_folder::meta::CacheMode;
use crate::tui::live::LiveRun;
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

/// `run`'s flags as the core's request.
fn run_request(args: RunArgs) -> RunRequest {
    RunRequest {
        command: args.command,
        name: args.name,
        variants: VariantFlags {
            preset: args.preset,
            file: args.variants_file,
            variants: args.variants,
            env: args.variant_env,
            baseline: args.baseline,
            prescribe: args.prescribe,
        },
        repeat: args.repeat,
        cache: match args.cache {
            CacheArg::Cold => CacheMode::Cold,
            CacheArg::Warm => CacheMode::Warm,
            CacheArg::User => CacheMode::User,
            CacheArg::Shared => CacheMode::Shared,
        },
        out: args.out,
        force: args.force,
        host_tag: args.host_tag,
        kernel_steps: args.kernel_steps,
        step_marker: args.step_marker,
        keep_caches: args.keep_caches,
        probe: !args.no_probe,
    }
}

/// What `run` says on its way, on stderr.
fn say(notice: RunNotice<'_>) {
    output::error(notice);
}

fn run(args: RunArgs) -> i32 {
    if args.tui
        && let Err(e) = crate::tui::require_terminal(
            "run --tui",
            "drop --tui (the run prints its summary at the end, and `prewarm-doctor tui RUN` replays it later)",
        )
    {
        output::error(e);
        return exit::DOCTOR_FAILED;
    }
    let live = args.tui.then(LiveRun::new);
    let prepared = match prepare(run_request(args), &mut say) {
        Ok(p) => p,
        Err(e) => {
            output::error(e);
            return exit::DOCTOR_FAILED;
        }
    };
    let results = match live {
        Some(live) => {
            let log = live.log();
            let (sink, stop) = (live.sink(), live.stop_flag());
            live.show(
                prepared.folder(),
                || {
                    prepared.run_attempts(Some(sink), Some(stop), |p| {
                        if log.dashboard_open() {
                            log.attempt_started(&p.variant, &p.attempt, p.index, p.total)
                        } else {
                            progress(&prepared, p)
                        }
                    })
                },
                |r| run_code(prepared.outcome(r)),
            )
        }
        None => prepared.run_attempts(None, None, |p| progress(&prepared, p)),
    };
    match prepared.conclude(results, &mut say) {
        Ok(outcome) => {
            summarise(prepared.folder());
            run_code(outcome)
        }
        Err(e) => {
            output::error(e);
            exit::DOCTOR_FAILED
        }
    }
}

/// The code `run` exits with: the command's for a single run, else 0 or
/// MATRIX_RUN_FAILED.
fn run_code(outcome: RunOutcome) -> i32 {
    match outcome {
        RunOutcome::Single(AttemptEnd::Exited(code)) => code,
        RunOutcome::Single(AttemptEnd::NotFound) => exit::COMMAND_NOT_FOUND,
        RunOutcome::Single(AttemptEnd::NotExecutable) => exit::COMMAND_NOT_EXECUTABLE,
        RunOutcome::Single(AttemptEnd::DoctorFailed) => exit::DOCTOR_FAILED,
        RunOutcome::Matrix { failed: true } => exit::MATRIX_RUN_FAILED,
        RunOutcome::Matrix { failed: false } => 0,
    }
}

/// The progress line before each attempt of a matrix (none for a single
/// run, whose output is the training's alone). The attempts that start after
/// the dashboard was closed with the run going on print theirs as a run
/// without the dashboard does.
fn progress(run: &PreparedRun, p: &Progress) {
    if run.is_single() {
        return;
    }
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
    output::stderr_text(&format!(
        "[prewarm-doctor] {}/{}: variant '{}' {what}{elapsed}{eta}\n",
        p.index, p.total, p.variant
    ));
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
