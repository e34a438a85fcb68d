//! Tidy CSV: one measurement per row (variant, attempt, host, rank, pid,
//! phase, metric, source, value, unit), for spreadsheets and dataframes.
//! A run with damaged files opens with one `incomplete_data` row per file.

use super::escape::csv_field;
use super::model::{AttemptView, ReportModel};
use super::renderer::{Renderer, ReportError};
use crate::analysis::account::{PhaseAccount, ProcessAccount};

const HEADER: [&str; 10] = [
    "variant", "attempt", "host", "rank", "pid", "phase", "metric", "source", "value", "unit",
];

struct Rows<'a, W: std::io::Write> {
    w: csv::Writer<W>,
    a: &'a AttemptView,
    /// The first write error (rows after it are not written).
    error: Option<csv::Error>,
}

impl<W: std::io::Write> Rows<'_, W> {
    fn row(
        &mut self,
        p: &ProcessAccount,
        phase: &str,
        metric: &str,
        source: &str,
        value: f64,
        unit: &str,
    ) {
        if self.error.is_some() {
            return;
        }
        let rank = p.rank.map(|r| r.to_string()).unwrap_or_default();
        let written = self.w.write_record([
            &*csv_field(&self.a.variant),
            &*csv_field(&self.a.attempt),
            &*csv_field(&p.host),
            rank.as_str(),
            &p.pid.to_string(),
            phase,
            metric,
            &*csv_field(source),
            &value.to_string(),
            unit,
        ]);
        self.error = written.err();
    }
}

/// `report --format csv`: every attempt's per-phase figures as tidy CSV,
/// every rank (in the analysis' order, as the JSON).
#[derive(Debug, Clone, Copy, Default)]
pub struct Csv;

impl Renderer for Csv {
    fn render(&self, model: &ReportModel, out: &mut dyn std::io::Write) -> Result<(), ReportError> {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(HEADER).map_err(csv_error)?;
        // The run's damaged files first: one `incomplete_data` row each, the
        // file as its source, the byte offset where its data stops or goes
        // bad as its value (empty when no one place is to blame).
        for d in &model.incomplete {
            let offset = d.problem.offset.map(|o| o.to_string()).unwrap_or_default();
            w.write_record([
                &*csv_field(&d.variant),
                &*csv_field(&d.attempt),
                "",
                "",
                "",
                "",
                "incomplete_data",
                &*csv_field(&d.problem.file),
                offset.as_str(),
                "byte_offset",
            ])
            .map_err(csv_error)?;
        }
        for a in model.attempts_in_run_order() {
            let mut rows = Rows { w, a, error: None };
            write_attempt(&mut rows)?;
            w = rows.w;
        }
        w.flush()?;
        Ok(())
    }
}

fn csv_error(e: csv::Error) -> ReportError {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => ReportError::Io(io),
        other => ReportError::Csv(format!("{other:?}")),
    }
}

/// The steady step (the median over the steps 2..N without lazy
/// initialisation, docs/step-rule.md), how many steps it is the median of,
/// the shim's own time in such a step, and each step 2..N that held lazy
/// initialisation.
fn steady_rows<W: std::io::Write>(rows: &mut Rows<'_, W>, p: &ProcessAccount) {
    let s = &p.steps;
    let Some(t) = s.steady_step_s else { return };
    rows.row(p, "steady", "median_step_time", "", t, "s");
    rows.row(
        p,
        "steady",
        "median_step_count",
        "",
        s.steady_steps as f64,
        "count",
    );
    if let Some(shim) = s.steady_shim_s {
        rows.row(p, "steady", "median_step_shim_time", "hooks", shim, "s");
    }
    for k in &s.lazy_steps {
        rows.row(p, "steady", "lazy_init_step", "", *k as f64, "step");
    }
}

fn write_attempt<W: std::io::Write>(rows: &mut Rows<'_, W>) -> Result<(), ReportError> {
    let a = rows.a;
    for p in a.ranks.iter().map(|r| &r.account) {
        if let Some(s) = p.steps.step1_s {
            rows.row(p, "step1", "wall_time", "", s, "s");
        }
        steady_rows(rows, p);
        for ph in &p.phases {
            phase_rows(rows, p, ph);
        }
    }
    rows.error.take().map_or(Ok(()), |e| Err(csv_error(e)))
}

/// One phase's rows: its duration and peaks, each source's bytes, the
/// stalls beside the profiler's own time, and the account at its end.
fn phase_rows<W: std::io::Write>(rows: &mut Rows<'_, W>, p: &ProcessAccount, ph: &PhaseAccount) {
    let name = format!("{:?}", ph.phase).to_ascii_lowercase();
    rows.row(p, &name, "duration", "", ph.duration_s, "s");
    if let Some(v) = ph.device_used_peak {
        rows.row(p, &name, "device_used_peak", "", v as f64, "B");
    }
    rows.row(
        p,
        &name,
        "pool_reserved_peak",
        "",
        ph.pool_reserved_peak as f64,
        "B",
    );
    rows.row(
        p,
        &name,
        "local_memory_growth",
        "",
        ph.local_memory_growth as f64,
        "B",
    );
    rows.row(
        p,
        &name,
        "kernels_first_launched",
        "",
        ph.kernels_first_launched as f64,
        "count",
    );
    for sb in &ph.by_source {
        rows.row(p, &name, "allocated", &sb.source, sb.allocated as f64, "B");
        rows.row(p, &name, "freed", &sb.source, sb.freed as f64, "B");
        rows.row(p, &name, "live_end", &sb.source, sb.live_end as f64, "B");
        rows.row(
            p,
            &name,
            "module_loads",
            &sb.source,
            sb.module_loads as f64,
            "count",
        );
    }
    let st = &ph.stall;
    for (k, v) in [
        ("compile", st.compile_s),
        ("autotune", st.autotune_s),
        ("nccl_init", st.nccl_init_s),
        ("cublas_init", st.cublas_init_s),
        ("module_load", st.module_load_s),
        ("other", st.other_s),
    ] {
        rows.row(p, &name, "stall_time", k, v, "s");
    }
    // The profiler's own time beside the stalls: the probe's,
    // its callbacks (inside the training's calls), and the
    // shim's hooks where its lines give them.
    rows.row(p, &name, "probe_time", "all", ph.probe_s, "s");
    rows.row(
        p,
        &name,
        "probe_time",
        "callbacks",
        ph.probe_callbacks_s,
        "s",
    );
    if let Some(s) = &ph.probe_callbacks_split {
        for (k, v) in [
            ("callbacks_launches", s.launches_s),
            ("callbacks_module_loads", s.module_loads_s),
            ("readings", s.readings_s),
        ] {
            rows.row(p, &name, "probe_time", k, v, "s");
        }
        if let Some(w) = s.caller_walks_s {
            rows.row(p, &name, "probe_time", "caller_walks", w, "s");
        }
        if let Some(l) = s.longest_callback {
            rows.row(p, &name, "probe_time", "longest_callback", l.seconds, "s");
        }
    }
    if let Some(shim) = ph.shim_s {
        rows.row(p, &name, "shim_time", "hooks", shim, "s");
    }
    if let Some(g) = &ph.gap_end {
        rows.row(p, &name, "out_of_pool_end", "", g.out_of_pool as f64, "B");
        for part in &g.parts {
            rows.row(
                p,
                &name,
                "out_of_pool_part",
                &super::verdict_text::part_label(part),
                part.bytes as f64,
                "B",
            );
        }
        rows.row(p, &name, "unexplained_end", "", g.unexplained as f64, "B");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_only_for_nothing() {
        let model = crate::report::model::ReportModel::build(Default::default(), &[], None);
        let bytes = crate::report::renderer::render_to_vec(&super::Csv, &model).unwrap();
        let out = String::from_utf8(bytes).unwrap();
        assert_eq!(
            out,
            "variant,attempt,host,rank,pid,phase,metric,source,value,unit\n"
        );
    }
}
