//! The terminal summary printed at the end of every run and by `report`, in
//! at most [`WIDTH`] columns. Its first screen answers "did each prewarm
//! work, and what did it cost" (matrices: [`super::terminal_matrix`]) or "what landed
//! in step 1, and what did it cost" (single runs); each attempt's story per
//! rank follows. With many ranks it shows the worst ranks and the
//! distribution; the JSON keeps every rank.

use super::account_tables;
use super::escape::{command_line, terminal, terminal_block};
use super::model::{AttemptView, RankView, ReportModel};
use super::renderer::{Renderer, ReportError};
use super::select::Selection;
use super::step_text::step_label_in;
use super::text_layout::{print_text, write_table};
use super::{bytes, fine_seconds, plural, seconds, signed_bytes, step_text};
use crate::analysis::account::{
    ExceptionEvent, Forensic, GapAccount, PhaseAccount, ProcessAccount,
};
use crate::analysis::phases::Phase;
use crate::analysis::sources::TORCH_POOL;
use std::fmt::Write;

pub use super::text_layout::WIDTH;

/// The terminal summary of the attempts `selection` picks (after the
/// comparison, for matrices).
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal<'a> {
    pub selection: Selection<'a>,
}

impl Renderer for Terminal<'_> {
    fn render(&self, model: &ReportModel, out: &mut dyn std::io::Write) -> Result<(), ReportError> {
        let text = self.text(model)?;
        out.write_all(terminal_block(&text).as_bytes())?;
        Ok(())
    }
}

impl Terminal<'_> {
    /// The summary as text (not yet passed through the terminal escape).
    pub fn text(&self, model: &ReportModel) -> Result<String, ReportError> {
        let chosen = self.selection.pick(model)?;
        let mut o = String::new();
        if let Some(m) = &model.matrix {
            super::terminal_matrix::write_matrix(&mut o, m);
            if matches!(self.selection, Selection::Default) && !chosen.is_empty() {
                print_text(
                    &mut o,
                    "(the baseline's first attempt follows; --attempt VARIANT[/N] or --all shows others)",
                    "   ",
                    "     ",
                );
            }
        }
        for a in chosen {
            write_attempt(&mut o, a);
        }
        Ok(with_incomplete_data(o, model))
    }
}

/// The report with the run's damaged files said right under its first line.
fn with_incomplete_data(o: String, model: &ReportModel) -> String {
    if model.incomplete.is_empty() {
        return o;
    }
    let mut warning = String::new();
    for line in super::model::opening_lines(&model.incomplete, 3) {
        print_text(&mut warning, &terminal(&line), "   ", "     ");
    }
    match o.find('\n') {
        Some(i) => format!("{}{warning}{}", &o[..=i], &o[i + 1..]),
        None => format!("{o}{warning}"),
    }
}

fn who(p: &ProcessAccount) -> String {
    let dev = p.device.map(|d| format!(", cuda:{d}")).unwrap_or_default();
    match p.rank {
        Some(r) => format!("rank {r} (host {}, pid {}{dev})", terminal(&p.host), p.pid),
        None => format!("process {} (host {}{dev})", p.pid, terminal(&p.host)),
    }
}

/// One attempt: what landed in step 1 and what it cost (its worst rank),
/// then how it was run, the ranks side by side, and each rank's story.
fn write_attempt(o: &mut String, a: &AttemptView) {
    let _ = writeln!(
        o,
        "== prewarm-doctor: variant '{}', attempt {}{}{}",
        terminal(&a.variant),
        terminal(&a.attempt),
        a.status_suffix(),
        a.exit_code
            .map(|c| format!(" — exit code {c}"))
            .unwrap_or_default()
    );
    let summarised = a.worst_rank();
    if let Some(r) = summarised {
        step1_summary(o, a, r);
    }
    if !a.command.is_empty() {
        print_text(o, &command_line(&a.command), "   command: ", "     ");
    }
    for n in &a.notices {
        print_text(o, &terminal(n), "   note: ", "     ");
    }
    if a.ranks.is_empty() {
        let _ = writeln!(
            o,
            "   no GPU-side capture: no process created a CUDA context with the probe loaded."
        );
    }
    if a.ranks.len() > 1 {
        rank_table(o, a);
    }
    if let Some(line) = a
        .spread
        .as_ref()
        .and_then(super::ranks_text::missing_ranks_line)
    {
        print_text(o, &line, "   ", "     ");
    }
    let told = a.told_ranks();
    for r in &told {
        let is_summarised = summarised.is_some_and(|s| std::ptr::eq(s, *r));
        render_process(o, &r.account, is_summarised);
    }
    if told.len() < a.ranks.len() {
        let _ = writeln!(
            o,
            "   ({} other processes not told one by one: `report RUN --format json` holds each one's account)",
            a.ranks.len() - told.len()
        );
    }
    if !a.problems.is_empty() {
        let _ = writeln!(o, "-- problems reading the run");
        for pr in &a.problems {
            print_text(o, &terminal(&pr.to_string()), "   ", "     ");
        }
    }
}

/// The first lines of an attempt: how long step 1 took against a steady
/// step, where its time went, and the warmups that still land after setup
/// (what to prewarm), of the worst rank.
fn step1_summary(o: &mut String, a: &AttemptView, r: &RankView) {
    let p = &r.account;
    let who = if a.ranks.len() > 1 {
        format!("   {} (highest step-1 peak): ", r.label)
    } else {
        "   ".to_string()
    };
    step_lines(o, p, &who);
    late_warmups(o, p);
    for f in &p.forensics {
        let text = format!(
            "OUT OF MEMORY in {}{}: {}; what led to it, and whether a prewarm would have saved it: below",
            step_label_in(p, f.phase, f.step),
            if f.recovered { " (recovered)" } else { "" },
            terminal(&super::verdict_text::request_text(f))
        );
        print_text(o, &text, "   ", "     ");
    }
    // An exception an out-of-memory line above already stands for is not
    // said twice; any other (whatever its phase) is.
    let quoted = |e: &ExceptionEvent| {
        p.forensics
            .iter()
            .any(|f| f.message.as_ref() == Some(&e.message))
    };
    for e in p.exceptions.iter().filter(|e| !quoted(e)) {
        let text = format!(
            "UNCAUGHT EXCEPTION {}: {}; where it was raised: below",
            step_text::exception_place(super::no_step(p), e),
            terminal(&step_text::exception_text(e))
        );
        print_text(o, &text, "   ", "     ");
    }
}

/// Each exception the process recorded, whatever its phase: its type and
/// message, where in the run, and the frames it was raised in.
fn exception_lines(o: &mut String, p: &ProcessAccount) {
    for e in &p.exceptions {
        let head = format!(
            "   exception {}: ",
            step_text::exception_place(super::no_step(p), e)
        );
        let what = terminal(&step_text::exception_text(e)).into_owned();
        print_wrapped(o, &head, &[what], " ");
        let frames: Vec<String> = e.where_.iter().map(|f| terminal(f).into_owned()).collect();
        if !frames.is_empty() {
            let head = "     raised at (most recent call last): ";
            for line in wrap_items(head, &frames, " > ", "       ") {
                let _ = writeln!(o, "{line}");
            }
        }
    }
}

/// How long step 1 took against a steady step, and where its time went.
fn step_lines(o: &mut String, p: &ProcessAccount, head: &str) {
    let s = &p.steps;
    let setup = s
        .setup_s
        .map(seconds)
        .unwrap_or_else(|| "not recorded".into());
    let done = super::step_text::steps_done(s);
    let line = match (s.step1_s, super::step_text::steady_text(s)) {
        (Some(s1), Some(steady)) => format!(
            "step 1 took {} vs {steady}; setup {setup}; {done}",
            seconds(s1)
        ),
        (Some(s1), None) if s.count == 0 => format!(
            "no optimizer step finished: step 1 ran {} until the process ended; setup {setup}",
            seconds(s1)
        ),
        (Some(s1), None) => format!("step 1 took {}; setup {setup}; {done}", seconds(s1)),
        _ => "no optimizer step finished, and no step-1 start, zero_grad() or forward of an \
              optimizer's module was recorded: the run is one phase, \"before any step\""
            .to_string(),
    };
    print_text(o, &line, head, "     ");
    if let Some(step1) = crate::analysis::ranks::step1(p) {
        let st = &step1.stall;
        let items = [
            format!("compile {}", seconds(st.compile_s)),
            format!("autotune {}", seconds(st.autotune_s)),
            format!("NCCL init {}", super::nccl_seconds(st.nccl_init_s)),
            format!("cuBLAS init {}", seconds(st.cublas_init_s)),
            format!("module loading {}", seconds(st.module_load_s)),
            format!("other {}", seconds(st.other_s)),
        ];
        let doctor = super::verdict_text::doctor_in_step1(step1);
        let text = format!("{}; {doctor}", items.join(", "));
        print_text(o, &text, "   step-1 time: ", "       ");
    }
}

/// Every rank side by side, with the worst rank and the skew between
/// ranks; with many ranks, the worst ranks of each figure and the
/// distribution instead of every row.
fn rank_table(o: &mut String, a: &AttemptView) {
    let shown = a.shown_ranks(super::model::SHOWN_RANKS).len();
    if shown < a.ranks.len() {
        let _ = writeln!(
            o,
            "   {} processes; the worst of each figure (the JSON has every rank):",
            a.ranks.len()
        );
    }
    write_table(o, &account_tables::rank_table(a));
    if shown < a.ranks.len() {
        write_table(o, &account_tables::distribution_table(a));
    }
    let Some(s) = &a.spread else { return };
    for l in super::ranks_text::spread_lines(s) {
        let text = format!(
            "{}: {} ({}); skew across ranks {}",
            l.label, l.owner, l.value, l.skew
        );
        print_text(o, &text, "   ", "     ");
    }
}

/// Packs `items` after `head` into lines of at most `WIDTH` columns, joined by
/// `sep`: an item goes on the current line if it fits, else on a new line
/// (starting with `indent`, the separator left at the end of the line before)
/// if it fits there, else word by word.
fn wrap_items(head: &str, items: &[String], sep: &str, indent: &str) -> Vec<String> {
    let width = textwrap::core::display_width;
    let mut lines = Vec::new();
    let mut line = head.to_string();
    if width(head) > WIDTH / 2 {
        // A long head (it names a kernel): wrapped by words first.
        let lead: String = head.chars().take_while(|c| *c == ' ').collect();
        let mut wrapped = super::text_layout::wrap(head, &lead, indent, WIDTH);
        line = wrapped.pop().unwrap_or_default();
        if head.ends_with(' ') {
            line.push(' ');
        }
        lines = wrapped;
    }
    for (i, item) in items.iter().enumerate() {
        let glue = if i == 0 { "" } else { sep };
        // Room for the separator that ends this line if the next item breaks.
        let reserve = if i + 1 < items.len() {
            width(sep.trim_end())
        } else {
            0
        };
        if width(&line) + width(glue) + width(item) + reserve <= WIDTH {
            line.push_str(glue);
            line.push_str(item);
            continue;
        }
        line.push_str(glue.trim_end());
        if width(line.trim()) > 0 && width(indent) + width(item) + reserve <= WIDTH {
            lines.push(line.trim_end().to_string());
            line = format!("{indent}{item}");
            continue;
        }
        if !line.ends_with(' ') {
            line.push(' ');
        }
        let room = WIDTH.saturating_sub(width(indent) + 2).max(1);
        for (k, word) in super::text_layout::words(item, room).iter().enumerate() {
            let space = if k == 0 { "" } else { " " };
            if width(&line) + width(space) + width(word) > WIDTH && width(line.trim()) > 0 {
                lines.push(line.trim_end().to_string());
                line = format!("{indent}  {word}");
            } else {
                line.push_str(space);
                line.push_str(word);
            }
        }
    }
    lines.push(line);
    lines
}

/// Writes `items` after `head`, wrapped at `WIDTH` (continuations indented).
pub fn print_wrapped(o: &mut String, head: &str, items: &[String], sep: &str) {
    for line in wrap_items(head, items, sep, "       ") {
        let _ = writeln!(o, "{line}");
    }
}

fn gap_lines(label: &str, g: &GapAccount) -> Vec<String> {
    let label = if label == Phase::Teardown.label() {
        "the run"
    } else {
        label
    };
    let mut lines = vec![format!(
        "   at end of {label}: device {} = pool {} + outside pool {}",
        bytes(g.device_used),
        bytes(g.pool_reserved),
        bytes(g.out_of_pool),
    )];
    let mut parts: Vec<String> = g
        .parts
        .iter()
        .map(|p| {
            let label = super::verdict_text::part_label(p);
            let name = match (p.inferred, label.strip_suffix(')')) {
                (true, Some(stem)) => format!("{stem}, inferred)"),
                (true, None) => format!("{label} (inferred)"),
                (false, _) => label.clone(),
            };
            format!("{name} {}", signed_bytes(p.bytes))
        })
        .collect();
    parts.push(super::verdict_text::unexplained_label(g));
    lines.extend(wrap_items("     outside pool = ", &parts, " + ", "       "));
    lines
}

/// A phase named inside a sentence ("out of pool in setup"), as the phase
/// table names it (`account_tables::phase_label`).
fn phase_name(p: &ProcessAccount, phase: Phase) -> String {
    if phase == Phase::Setup && p.steps.step1_s.is_none() {
        "the run".into()
    } else {
        account_tables::phase_label(p, phase)
    }
}

/// The warmups still landing after setup, costliest first; minor ones folded.
fn late_warmups(o: &mut String, p: &ProcessAccount) {
    if p.late_warmups.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "   still lands after setup (the warmups you still need), costliest first:"
    );
    for w in p.late_warmups.iter().filter(|w| !w.minor) {
        let t = super::warmup_text::warmup_text(w);
        let mut items = vec![format!("[{}] {}", t.class, terminal(&t.what))];
        if !t.cost.is_empty() {
            items.push(t.cost);
        }
        items.push(t.when);
        for line in wrap_items("     - ", &items, "; ", "         ") {
            let _ = writeln!(o, "{line}");
        }
        if !t.keys.is_empty() {
            let keys: Vec<String> = t.keys.iter().map(|k| format!("key {k}")).collect();
            for line in wrap_items("         ", &keys, ", ", "         ") {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    if let Some(line) = super::warmup_text::minor_warmups_line(&p.late_warmups) {
        let prefix = if p.late_warmups.iter().all(|w| w.minor) {
            "     - only minor ones: "
        } else {
            "     - "
        };
        let _ = writeln!(o, "{prefix}{line}");
    }
}

/// Where the lazy initialisation that preceded a failure landed, in words.
fn preceded_span(p: &ProcessAccount, f: &Forensic) -> String {
    match f.step {
        Some(1) => "in step 1 (before the failure)".to_string(),
        Some(n) => format!("since setup ended (steps 1-{n}, before the failure)"),
        None if p.steps.step1_s.is_some() => "earlier in setup".to_string(),
        None => "before the failure (step 1's start unknown)".to_string(),
    }
}

/// An out-of-memory failure: the request, the budget, what preceded it,
/// whether each candidate prewarm would have saved the run, and the fix that
/// removes the demand when there is one.
fn forensic(o: &mut String, p: &ProcessAccount, f: &Forensic) {
    let head = format!(
        "   OUT OF MEMORY{} in {} at {:.2}s: ",
        if f.recovered {
            " (recovered: the allocator retried and training went on)"
        } else {
            ""
        },
        step_label_in(p, f.phase, f.step),
        f.t_s
    );
    let free = f.device_free_before.map_or_else(
        || "free memory not recorded".to_string(),
        |b| format!("with {} free", bytes(b)),
    );
    print_wrapped(
        o,
        &head,
        &[
            terminal(&super::verdict_text::request_text(f)).into_owned(),
            free,
        ],
        " ",
    );
    if let Some(b) = &f.budget {
        let items = [
            format!("device {}", bytes(b.device_total)),
            format!("in use {}", bytes(b.device_used)),
            format!("request {}", bytes(b.request)),
            format!("short by {}", signed_bytes(b.shortfall)),
            format!(
                "this process's pool {} (peak {}{})",
                bytes(b.pool_reserved),
                bytes(b.pool_peak),
                b.pool_cache
                    .map(|c| format!(", {} of it unused cache", bytes(c)))
                    .unwrap_or_default()
            ),
        ];
        print_wrapped(o, "     budget: ", &items, ", ");
    }
    if !f.preceded_by.is_empty() {
        let parts = super::verdict_text::preceded_by_texts(f);
        let head = format!("     lazy initialisation {}: ", preceded_span(p, f));
        print_wrapped(o, &head, &parts, ", ");
    }
    let groups = super::forensics_text::projection_texts(f);
    if !groups.is_empty() {
        let _ = writeln!(
            o,
            "     would a prewarm have saved it? (at the failure point, if the step needs the same memory)"
        );
        for g in groups {
            let head = format!("       - {}: ", g.prewarms.join(", "));
            let mut items = vec![g.outcome];
            items.extend(g.why);
            for line in wrap_items(&head, &items, "; ", "           ") {
                let _ = writeln!(o, "{line}");
            }
        }
    }
    for r in &f.remedies {
        print_wrapped(
            o,
            "     the fix that removes the demand: ",
            &[super::forensics_text::remedy_text(r)],
            " ",
        );
    }
}

/// One process's story; `summarised`: its step-1 lines and late warmups
/// already head the attempt, so they are not repeated.
fn render_process(o: &mut String, p: &ProcessAccount, summarised: bool) {
    let _ = writeln!(o, "-- {}", who(p));
    for note in super::step_text::capture_notes(p) {
        print_text(o, &terminal(&note), "   ", "     ");
    }
    if !summarised {
        step_lines(o, p, "   ");
    }
    if p.steps.step1_s.is_some() {
        print_wrapped(
            o,
            "   step 1 starts at: ",
            std::slice::from_ref(&p.steps.rule),
            " ",
        );
    }
    phase_lines(o, p);
    local_memory_lines(o, p);
    nccl_lines(o, p);
    autotune_lines(o, p);
    compile_and_tightest_lines(o, p);
    if !summarised {
        late_warmups(o, p);
    }
    failed_call_lines(o, p);
    exception_lines(o, p);
    for f in &p.forensics {
        forensic(o, p, f);
    }
    probe_lines(o, p);
}

/// The phase table, what each phase put outside the pool and loaded, and
/// each phase's end account.
fn phase_lines(o: &mut String, p: &ProcessAccount) {
    write_table(o, &account_tables::phase_table(p));
    for ph in &p.phases {
        let oop: Vec<String> = ph
            .by_source
            .iter()
            .filter(|x| x.source != TORCH_POOL && x.allocated > 0)
            .map(|x| {
                format!(
                    "{} {} ({} calls, {}{})",
                    x.source,
                    bytes(x.allocated),
                    x.calls,
                    seconds(x.alloc_seconds),
                    super::comm_text::outside_note(ph, &x.source)
                        .map_or(String::new(), |n| format!("; {n}"))
                )
            })
            .collect();
        if !oop.is_empty() {
            let head = format!("   out of pool in {}: ", phase_name(p, ph.phase));
            print_wrapped(o, &head, &oop, ", ");
        }
        let loads: Vec<String> = ph
            .by_source
            .iter()
            .filter(|x| x.module_loads > 0)
            .map(|x| {
                format!(
                    "{} {} ({})",
                    crate::analysis::sources::library_of(&x.source),
                    x.module_loads,
                    seconds(x.load_seconds)
                )
            })
            .collect();
        if !loads.is_empty() {
            let head = format!("   module loads in {}: ", phase_name(p, ph.phase));
            let mut items = loads;
            let last = items.pop().unwrap_or_default();
            items.push(format!(
                "{last}; {}",
                plural(
                    ph.kernels_first_launched,
                    "kernel first launched",
                    "kernels first launched"
                )
            ));
            print_wrapped(o, &head, &items, ", ");
        }
    }
    for ph in &p.phases {
        if let Some(g) = &ph.gap_end {
            for line in gap_lines(&phase_name(p, ph.phase), g) {
                let _ = writeln!(o, "{line}");
            }
        }
    }
}

/// Each local-memory growth (or failure to grow), with its kernel.
fn local_memory_lines(o: &mut String, p: &ProcessAccount) {
    for l in &p.local_memory {
        let head = format!(
            "   local memory {} {} -> {}{} in {} at {:.2}s: ",
            if l.failed { "could NOT grow" } else { "grew" },
            bytes(l.before),
            bytes(l.after),
            if l.failed {
                String::new()
            } else {
                format!(" (device +{})", bytes(l.device_growth))
            },
            step_label_in(p, l.phase, l.step),
            l.t_s,
        );
        // 0 registers: a growth placed at a first-launch record, which does not carry them.
        let mut items = vec![if l.registers > 0 {
            format!("{} ({} regs)", terminal(&l.kernel), l.registers)
        } else {
            terminal(&l.kernel).to_string()
        }];
        if let Some(c) = &l.autotune_config {
            items.push(format!("autotune candidate {}", terminal(c)));
        }
        print_wrapped(o, &head, &items, ", ");
    }
}

/// Each NCCL communicator: where it was created, what it cost.
fn nccl_lines(o: &mut String, p: &ProcessAccount) {
    for c in &p.nccl {
        // What the log did not say is said in words (a log cut short has
        // a communicator's start and nothing after it).
        let head = format!(
            "   NCCL communicator {}{} ({}) {}: ",
            terminal(&c.comm_id.clone().unwrap_or_else(|| c.comm.clone())),
            c.group.as_ref().map_or(String::new(), |g| {
                format!(" of {}", terminal(&super::comm_text::group_label(g)))
            }),
            c.nranks.map_or("number of ranks not recorded".into(), |n| {
                super::plural(n, "rank", "ranks")
            }),
            c.phase
                .map_or("created at a time not recorded".into(), |ph| {
                    format!("created in {}", step_label_in(p, ph, c.step))
                }),
        );
        let items = [
            c.init_seconds
                .map(super::nccl_seconds)
                .unwrap_or_else(|| "init time not recorded".into()),
            format!("{} allocated", bytes(c.bytes)),
            format!("{} without allocation calls", bytes(c.inferred_bytes)),
        ];
        print_wrapped(o, &head, &items, ", ");
    }
}

/// Each Triton autotune, or the one a failure interrupted.
fn autotune_lines(o: &mut String, p: &ProcessAccount) {
    for a in &p.autotune {
        if a.configs == 0 {
            let head = format!(
                "   Triton autotune of {} was interrupted by the failure while benchmarking ",
                terminal(&a.kernel)
            );
            let items: Vec<String> = a
                .spilling_configs
                .iter()
                .map(|c| format!("candidate {}", terminal(c)))
                .collect();
            print_wrapped(o, &head, &items, " | ");
            continue;
        }
        let head = format!(
            "   Triton autotune {} key {} in {}: ",
            terminal(&a.kernel),
            terminal(&super::shorten(&a.key, super::KEY_WIDTH)),
            step_label_in(p, a.phase, a.step),
        );
        let mut items = vec![
            seconds(a.seconds),
            format!(
                "{}/{} configs benchmarked ({})",
                a.benchmarked, a.configs, a.source
            ),
            format!("chose {}", terminal(&a.chosen)),
        ];
        if !a.spilling_configs.is_empty() {
            items.push(format!(
                "local memory grew while benchmarking {}{}",
                terminal(&a.spilling_configs.join(" | ")),
                if a.local_memory_growth > 0 {
                    format!(" (+{})", bytes(a.local_memory_growth))
                } else {
                    String::new()
                }
            ));
        }
        print_wrapped(o, &head, &items, "; ");
    }
}

/// The compiles in total, the tightest out-of-pool moments and the
/// smallest device the process fits on.
fn compile_and_tightest_lines(o: &mut String, p: &ProcessAccount) {
    let compile_total: f64 = p.compiles.iter().map(|c| c.seconds).sum();
    if !p.compiles.is_empty() {
        let misses = p
            .compiles
            .iter()
            .filter(|c| c.cache_hit == Some(false))
            .count();
        let unfinished: Vec<&str> = p
            .compiles
            .iter()
            .filter(|c| c.unfinished)
            .map(|c| c.kernel.as_str())
            .collect();
        let still = if unfinished.is_empty() {
            String::new()
        } else {
            format!(
                "; still compiling when the process ended: {}",
                terminal(&unfinished.join(", "))
            )
        };
        let _ = writeln!(
            o,
            "   compiles: {} ({} cache misses), {} in total{still}",
            p.compiles.len(),
            misses,
            seconds(compile_total)
        );
    }
    for t in &p.tightest {
        let head = format!(
            "   tightest out-of-pool moment in {}: ",
            phase_name(p, t.phase)
        );
        let items = [
            format!("{} {} of {}", t.source, terminal(&t.what), bytes(t.bytes)),
            format!(
                "{}{}",
                t.device_free_before.map_or_else(
                    || "free memory not recorded".to_string(),
                    |b| format!("with {} free", bytes(b))
                ),
                t.headroom_after
                    .map(|h| format!(" ({} left)", signed_bytes(h)))
                    .unwrap_or_default()
            ),
        ];
        print_wrapped(o, &head, &items, " ");
    }
    if let Some(c) = p.min_capacity_bytes {
        // Beside the process's own peak: the requests outside the pool are
        // not all the device must hold, and a user comparing two runs must
        // not read this figure as the run's need.
        let peak = p.phases.iter().filter_map(|ph| ph.device_used_peak).max();
        let own = peak.map_or(String::new(), |pk| {
            format!("; the process itself peaked at {}", bytes(pk))
        });
        let text = format!(
            "its out-of-pool requests fit on a device of {} or more (what it held when each \
             was made, plus the request{own})",
            bytes(c)
        );
        print_text(o, &text, "   ", "     ");
    }
}

/// Driver calls that failed for another reason than memory.
fn failed_call_lines(o: &mut String, p: &ProcessAccount) {
    for c in &p.failed_calls {
        let head = format!(
            "   failed call in {} at {:.2}s: ",
            step_label_in(p, c.phase, c.step),
            c.t_s
        );
        let why = if c.no_current_context {
            "not out of memory; no CUDA context was current on the calling thread"
        } else {
            "not out of memory"
        };
        let what = format!(
            "{} of {} by {}: {} ({why})",
            c.api,
            bytes(c.bytes),
            c.source,
            super::cu_result_name(c.result)
        );
        print_wrapped(o, &head, &[what], " ");
    }
}

/// The step check, what the probe lost and cost, and the problems met.
fn probe_lines(o: &mut String, p: &ProcessAccount) {
    if let Some(c) = p.step_checks.first() {
        let _ = writeln!(
            o,
            "   check at step {}: torch reserved {}, doctor's pool {}",
            c.step,
            c.torch_reserved
                .map(bytes)
                .unwrap_or_else(|| "not recorded".into()),
            bytes(c.doctor_pool_reserved)
        );
    }
    let h = &p.health;
    if h.dropped_probe_events > 0 || h.dropped_cupti_records > 0 {
        let _ = writeln!(
            o,
            "   LOST: {} probe events and {} CUPTI records were dropped (counts from the probe)",
            h.dropped_probe_events, h.dropped_cupti_records
        );
    }
    // Probes before the writer measured itself leave it at 0: not said.
    let writer = if h.writer_seconds > 0.0 {
        format!(", writer thread {}", seconds(h.writer_seconds))
    } else {
        String::new()
    };
    let items = [
        format!(
            "{} callbacks ({}), {} kernel records ({}){writer}",
            h.callbacks,
            seconds(h.callback_seconds),
            h.activity_records,
            seconds(h.activity_seconds)
        ),
        format!("memory from {}", p.memory_source),
    ];
    print_wrapped(o, "   probe: ", &items, "; ");
    if let Some(shim) = shim_line(p) {
        print_text(o, &shim, "   shim: ", "       ");
    }
    for pr in &p.problems {
        let _ = writeln!(o, "   problem: {}", terminal(&pr.to_string()));
    }
}

/// The shim's hooks over the run and per steady step, where its lines say
/// them (beside the probe's line: both are the doctor's own time).
fn shim_line(p: &ProcessAccount) -> Option<String> {
    let known: Vec<&PhaseAccount> = p.phases.iter().filter(|ph| ph.shim_s.is_some()).collect();
    if known.is_empty() {
        return None;
    }
    let total: f64 = known.iter().filter_map(|ph| ph.shim_s).sum();
    // The hooks' figures cover the whole process, the phases only from the
    // first line the process wrote (the shim's own installation comes
    // before it): both are said, so the parts never outgrow the total.
    let whole: f64 = p.shim_hooks.iter().map(|h| h.seconds).sum();
    let phases = if known.len() < p.phases.len() {
        format!("in {} of its {} phases", known.len(), p.phases.len())
    } else {
        "in its phases".to_string()
    };
    let mut text = if whole > total + 5e-5 {
        format!(
            "hooks {} on the training's threads over the process ({} of it {phases})",
            seconds(whole),
            seconds(total)
        )
    } else if known.len() < p.phases.len() {
        format!(
            "hooks {} on the training's threads ({phases})",
            seconds(total)
        )
    } else {
        format!("hooks {} on the training's threads", seconds(total))
    };
    // The step a process died in is in its steps 2..N but not among their
    // ended steps: no figure per step then.
    let died = p.steps.died_in_step.is_some();
    if let Some(ph) = known
        .iter()
        .find(|ph| ph.phase == Phase::Steady && ph.steps > 0 && !died)
    {
        let per_step = ph.shim_s.unwrap_or(0.0) / ph.steps as f64;
        text += &format!(", {} a step in steps 2..N", fine_seconds(per_step));
        // The average holds the first steps' memory snapshots: the median
        // over the steady step's own steps is what a warm step pays.
        if let (Some(m), Some(step)) = (p.steps.steady_shim_s, p.steps.steady_step_s) {
            // A short run's steady steps can be mostly the shim's first
            // ones, whose ends read memory statistics, and the median then
            // is one of theirs: say that a later step pays less, rather
            // than let the median stand for it.
            let first_only =
                first_steps_clause(p.steps.steady_shim_first_steps, p.steps.steady_steps);
            text += &format!(
                " (median {} of a {} steady step{first_only})",
                fine_seconds(m),
                seconds(step)
            );
        }
    }
    if let Some(w) = p.shim_writes {
        let lines = if w.lines == 1 { "line" } else { "lines" };
        text += &format!(
            "; writing its {} {lines} {}",
            w.lines,
            fine_seconds(w.seconds)
        );
    }
    let costliest: Vec<String> = p
        .shim_hooks
        .iter()
        .take(3)
        .map(|h| {
            let calls = if h.calls == 1 { "call" } else { "calls" };
            format!("{} {} ({} {calls})", h.name, seconds(h.seconds), h.calls)
        })
        .collect();
    if !costliest.is_empty() {
        text += &format!("; costliest hooks: {}", costliest.join(", "));
    }
    Some(text)
}

/// The shim line's clause when most of the steady steps its median is over
/// were its first, detailed ones (empty otherwise).
fn first_steps_clause(first: u32, steady: u32) -> String {
    const WHY: &str = "which read memory statistics at their ends; a later step pays its end alone";
    if first == 0 || 2 * first <= steady {
        String::new()
    } else if first >= steady {
        format!(", every one of them among its first steps, {WHY}")
    } else {
        format!(", {first} of its {steady} steps among its first steps, {WHY}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The median of 5 steady steps, 4 of them the shim's detailed first
    /// ones (a 6-step run: GPU, 2026-12-06), is a detailed step's: said;
    /// 2 of 5 leave the median a later step's: not said.
    #[test]
    fn the_shim_clause_names_first_steps_when_the_median_rests_on_them() {
        assert!(first_steps_clause(4, 5).starts_with(", 4 of its 5 steps among its first steps, "));
        assert!(
            first_steps_clause(3, 3).starts_with(", every one of them among its first steps, ")
        );
        assert_eq!(first_steps_clause(2, 5), "");
        assert_eq!(first_steps_clause(2, 4), "");
        assert_eq!(first_steps_clause(0, 0), "");
    }

    fn items(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn wrapped_lines_stay_within_the_width_and_break_between_items() {
        let parts = items(&[
            "a".repeat(50).as_str(),
            "b".repeat(30).as_str(),
            "c".repeat(40).as_str(),
        ]);
        let lines = wrap_items("   head = ", &parts, " + ", "       ");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].ends_with(" +"),
            "the separator ends the broken line: {lines:?}"
        );
        assert!(lines[1].starts_with("       cccc"));
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH));
        // An item wider than a line is broken at spaces.
        let long = items(&[&"word ".repeat(40)]);
        let lines = wrap_items("   x: ", &long, ", ", "       ");
        assert!(lines.len() > 1);
        assert!(
            lines.iter().all(|l| l.chars().count() <= WIDTH),
            "{lines:?}"
        );
        // A short list stays on one line.
        assert_eq!(
            wrap_items("   y: ", &items(&["1", "2"]), ", ", "  "),
            vec!["   y: 1, 2"]
        );
    }
}
