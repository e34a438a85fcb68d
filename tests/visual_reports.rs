//! The picture formats (HTML, PNG, Perfetto) on the H200 recordings and on
//! a SYNTHETIC run with hostile names (tests/common/synthetic.rs writes it;
//! it is not a recording).

mod common;

use common::synthetic::{self, HOSTILE_KERNEL, SECRET_VALUE, Shape};
use common::{check_trace, decode_png, has_colour, model_of, not_blank, repo};
use prewarm_doctor::analysis::timeline::MarkerKind;
use prewarm_doctor::report::charts::{Chart, marker_color};
use prewarm_doctor::report::html::Html;
use prewarm_doctor::report::model::ReportModel;
use prewarm_doctor::report::perfetto::Perfetto;
use prewarm_doctor::report::png::PngChart;
use prewarm_doctor::report::renderer::{Renderer, render_to_vec};

fn hostile_model() -> (tempfile::TempDir, ReportModel) {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_run(
        dir.path(),
        Shape {
            ranks: 2,
            events: 400,
            hostile: true,
        },
    );
    let m = model_of(dir.path(), "synthetic-run");
    (dir, m)
}

fn html_of(m: &ReportModel) -> String {
    String::from_utf8(render_to_vec(&Html, m).unwrap()).unwrap()
}

/// Any `src=`/`href=` pointing at the network.
fn network_refs(html: &str) -> Vec<String> {
    let re = regex::Regex::new(r#"(?i)\b(src|href|xlink:href|action)\s*=\s*["']?\s*(https?:|//)"#)
        .unwrap();
    re.find_iter(html).map(|m| m.as_str().to_string()).collect()
}

/// The page with its style sheet and each inline SVG shortened, for snapshots.
fn without_svg(html: &str) -> String {
    let re = regex::Regex::new(r"(?s)<svg .*?</svg>").unwrap();
    let html = re.replace_all(html, |c: &regex::Captures| {
        format!("[svg: {} bytes]", c[0].len())
    });
    let style = regex::Regex::new(r"(?s)<style>.*?</style>").unwrap();
    style
        .replace(&html, "<style>[the report's CSS]</style>")
        .into_owned()
}

#[test]
fn hostile_names_are_escaped_everywhere_in_the_html() {
    let (_dir, m) = hostile_model();
    let html = html_of(&m);
    assert!(
        html.contains("content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"")
    );
    // No markup from the data survives: the only tags are the template's.
    assert!(
        !html.to_ascii_lowercase().contains("<script"),
        "a <script> tag got through"
    );
    assert!(!html.contains("<img"), "an <img> tag got through");
    assert!(!html.contains("<b onmouseover"));
    assert!(html.contains("&lt;script&gt;alert(&#39;kernel&#39;)&lt;/script&gt;"));
    // Terminal escapes and bidi overrides are shown, not obeyed.
    assert!(!html.contains('\u{1b}') && !html.contains('\u{202e}'));
    assert!(html.contains("\u{241b}[31mred"));
    // Hover titles in the SVG carry the escaped kernel name.
    assert!(
        html.contains("<title>local-memory growth of"),
        "markers have titles"
    );
    // Secrets from the variant environment and the command line stay out.
    assert!(!html.contains(SECRET_VALUE), "a secret reached the report");
    assert!(network_refs(&html).is_empty(), "{:?}", network_refs(&html));
    // The OOM is there, with its hostile library and message escaped.
    assert!(html.contains("OutOfMemoryError") || html.contains("CUDA out of memory"));
    insta::assert_snapshot!("synthetic_hostile_html", without_svg(&html));
}

#[test]
fn every_marker_of_the_synthetic_run_is_described_once_with_its_detail() {
    let (_dir, m) = hostile_model();
    let (_, r) = m.representative("baseline").unwrap();
    let texts: Vec<String> = r
        .timeline
        .markers
        .iter()
        .map(|m| prewarm_doctor::report::model::marker_text(m, r.no_step()))
        .collect();
    let shown: String = texts
        .join("\n")
        .chars()
        .map(prewarm_doctor::report::svg::inert)
        .collect();
    insta::assert_snapshot!("synthetic_marker_texts", shown);
    assert!(
        texts
            .iter()
            .any(|t| t.contains(HOSTILE_KERNEL) && t.contains("autotune candidate"))
    );
}

#[test]
fn the_perfetto_trace_follows_the_format_and_names_every_track() {
    let (_dir, m) = hostile_model();
    let bytes = render_to_vec(&Perfetto, &m).unwrap();
    let n = check_trace(&bytes);
    assert!(n > 100);
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    // A summary of everything but the counter values, for review.
    let mut lines: Vec<String> = events
        .iter()
        .filter(|e| e["ph"] != "C")
        .map(|e| {
            format!(
                "{} pid {} tid {} {} {}",
                e["ph"].as_str().unwrap(),
                e["pid"],
                e["tid"],
                e["name"],
                if e["ph"] == "M" {
                    e["args"]["name"].to_string()
                } else {
                    String::new()
                }
            )
        })
        .collect();
    let counters = events.iter().filter(|e| e["ph"] == "C").count();
    lines.push(format!("{counters} counter events"));
    insta::assert_snapshot!("synthetic_perfetto_outline", lines.join("\n"));
    for name in [
        "phases",
        "Triton autotune",
        "compile",
        "local-memory growth",
        "out of memory",
    ] {
        assert!(
            events
                .iter()
                .any(|e| e["name"] == "thread_name" && e["args"]["name"] == name),
            "no {name} thread"
        );
    }
    for counter in [
        "device used (MiB)",
        "pool reserved (MiB)",
        "out of pool (MiB)",
    ] {
        assert!(
            events
                .iter()
                .any(|e| e["ph"] == "C" && e["name"] == counter),
            "{counter}"
        );
    }
}

#[test]
fn pngs_of_the_synthetic_run_are_pictures_of_the_right_size() {
    let (_dir, m) = hostile_model();
    let charts = Chart::all(&m);
    assert!(charts.contains(&Chart::MovedVsCost));
    for chart in charts {
        let bytes = render_to_vec(&PngChart(chart.clone()), &m).unwrap();
        let (w, h, rgb) = decode_png(&bytes);
        assert_eq!((w, h), chart.size(&m), "{chart:?}");
        assert!(not_blank(&rgb), "{chart:?} is blank");
        if let Chart::Timeline { .. } = chart {
            let c = marker_color(MarkerKind::LocalMemory);
            assert!(
                has_colour(&rgb, (c.0, c.1, c.2)),
                "local-memory marker drawn"
            );
        }
    }
}

#[test]
fn the_bundled_matrix_renders_in_every_format_within_its_budgets() {
    let m = model_of(&repo("reports/h200-matrix"), "reports/h200-matrix");
    let html = html_of(&m);
    assert!(html.len() <= 2 << 20, "HTML is {} bytes", html.len());
    let html = common::html_as_read(&html);
    assert!(network_refs(&html).is_empty());
    for needle in [
        "cublas (works): moved 128.3 MiB",
        "nccl_comm (works): moved 558.0 MiB",
        "+390.0 MiB held at step-1 end that the baseline does not hold",
        "NCCL communicators 1 -&#62; 2",
        "rowwise_mix",
        "the account at the end of step 1",
    ] {
        assert!(html.contains(needle), "HTML lacks {needle:?}");
    }
    // One timeline and one waterfall per variant, plus moved-vs-cost.
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 11);
    assert!(
        html.matches("<title>").count() > 20,
        "markers carry hover text"
    );
    let trace = render_to_vec(&Perfetto, &m).unwrap();
    check_trace(&trace);
    assert!(trace.len() < 2 << 20);
    for chart in Chart::all(&m) {
        let (w, h, rgb) = decode_png(&render_to_vec(&PngChart(chart.clone()), &m).unwrap());
        assert_eq!((w, h), chart.size(&m));
        assert!(not_blank(&rgb), "{chart:?}");
    }
}

#[test]
fn every_h200_recording_renders_in_every_format() {
    let dir = repo("tests/fixtures/h200");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let m = model_of(&path, "fixture");
        let html = html_of(&m);
        assert!(html.contains("How the run was made"), "{}", path.display());
        assert!(network_refs(&html).is_empty());
        check_trace(&render_to_vec(&Perfetto, &m).unwrap());
        let charts = Chart::all(&m);
        assert!(
            charts.iter().any(|c| matches!(c, Chart::Timeline { .. })),
            "{}: no timeline",
            path.display()
        );
        for chart in charts {
            let mut out = Vec::new();
            PngChart(chart).render(&m, &mut out).unwrap();
            assert!(out.starts_with(b"\x89PNG"));
        }
        n += 1;
    }
    assert!(n >= 10, "found {n} recordings");
}

#[test]
fn the_oom_recording_shows_its_forensics_in_html_and_a_cross_on_the_timeline() {
    let m = model_of(&repo("tests/fixtures/h200/oom-triton-baseline"), "oom");
    let html = html_of(&m);
    assert!(!html.contains("No rank ran out of memory."));
    assert!(
        html.contains("local-memory growth of"),
        "the failing request is named"
    );
    assert!(
        html.contains("class=\"ev ev-oom\""),
        "an OOM marker on the timeline"
    );
}

#[test]
fn the_cli_writes_html_png_and_perfetto() {
    let out = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_prewarm-doctor");
    let run = repo("tests/fixtures/h200/examples-nccl-baseline");
    let html = out.path().join("r.html");
    let st = std::process::Command::new(bin)
        .args(["report"])
        .arg(&run)
        .args(["--format", "html", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    let pngs = out.path().join("png");
    let st = std::process::Command::new(bin)
        .args(["report"])
        .arg(&run)
        .args(["--format", "png", "-o"])
        .arg(&pngs)
        .output()
        .unwrap();
    assert!(st.status.success());
    let stderr = String::from_utf8_lossy(&st.stderr);
    assert!(stderr.contains("timeline-default.png"), "{stderr}");
    assert!(pngs.join("timeline-default.png").exists());
    // PNG needs a folder.
    let st = std::process::Command::new(bin)
        .args(["report"])
        .arg(&run)
        .args(["--format", "png"])
        .output()
        .unwrap();
    assert!(!st.status.success());
    assert!(String::from_utf8_lossy(&st.stderr).contains("-o DIR"));
    // Perfetto to standard output is a trace.
    let st = std::process::Command::new(bin)
        .args(["report"])
        .arg(&run)
        .args(["--format", "perfetto"])
        .output()
        .unwrap();
    assert!(st.status.success());
    check_trace(&st.stdout);
}

/// The pairs of text boxes of a chart that share pixels.
fn overlapping(m: &ReportModel, chart: &Chart) -> Vec<String> {
    let boxes = prewarm_doctor::report::png::chart_text_boxes(m, chart).unwrap();
    assert!(!boxes.is_empty(), "{chart:?} drew no text");
    let mut out = Vec::new();
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            if a.overlaps(b) {
                out.push(format!("{a:?} / {b:?}"));
            }
        }
    }
    out
}

#[test]
fn no_two_labels_of_any_chart_overlap_on_any_recording() {
    for run in common::recordings() {
        let m = model_of(&run, &run.display().to_string());
        for chart in Chart::all(&m) {
            let clashes = overlapping(&m, &chart);
            assert!(
                clashes.is_empty(),
                "{}: {chart:?}: {clashes:#?}",
                run.display()
            );
        }
    }
}

/// A layout case no recording has: the bundled matrix's verdicts under
/// eight names, long ones among them (an in-memory copy, not a recording).
#[test]
fn moved_vs_cost_stays_legible_with_many_variants_and_long_names() {
    let mut m = model_of(&repo("reports/h200-matrix"), "reports/h200-matrix");
    let matrix = m.matrix.as_mut().unwrap();
    let names = [
        "cublas_backward",
        "fla_gdn_autotune",
        "mamba_ssd_autotune",
        "comm_groups",
        "pipeline_stage_compile",
        "pipeline_stage_compile_and_every_other_prewarm_of_the_recipe_at_once",
        "a variant named with spaces that goes on for a while",
        "all",
    ];
    let template = matrix.verdicts.clone();
    matrix.verdicts = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut v = template[i % template.len()].clone();
            v.variant = n.to_string();
            v
        })
        .collect();
    if let Some(dir) = std::env::var_os("PD_KEEP_CHARTS") {
        // To look at it: PD_KEEP_CHARTS=/tmp/charts cargo test --test visual_reports
        let png = render_to_vec(&PngChart(Chart::MovedVsCost), &m).unwrap();
        std::fs::write(std::path::Path::new(&dir).join("moved-vs-cost-8.png"), png).unwrap();
    }
    let clashes = overlapping(&m, &Chart::MovedVsCost);
    assert!(clashes.is_empty(), "{clashes:#?}");
    let boxes = prewarm_doctor::report::png::chart_text_boxes(&m, &Chart::MovedVsCost).unwrap();
    let (w, h) = Chart::MovedVsCost.size(&m);
    for b in &boxes {
        assert!(
            b.x0 >= 0 && b.y0 >= 0 && b.x1 <= w as i32 && b.y1 <= h as i32,
            "{b:?} outside {w}x{h}"
        );
    }
    let all_text: Vec<&str> = boxes.iter().map(|b| b.text.as_str()).collect();
    // The name too long for two lines is numbered, and spelled out in the key.
    assert!(
        all_text
            .contains(&"6 = pipeline_stage_compile_and_every_other_prewarm_of_the_recipe_at_once"),
        "{all_text:#?}"
    );
    assert!(
        all_text.contains(&"7 = a variant named with spaces that goes on for a while"),
        "{all_text:#?}"
    );
    // Names that fit two lines are wrapped whole: every piece is drawn.
    for piece in ["pipeline_stage_", "compile", "mamba_ssd_autotune"] {
        assert!(all_text.contains(&piece), "{piece}: {all_text:#?}");
    }
}

#[test]
fn the_waterfalls_and_timelines_of_one_report_share_one_unit() {
    let m = model_of(&repo("reports/h200-matrix"), "reports/h200-matrix");
    let mut units = std::collections::BTreeSet::new();
    for chart in Chart::all(&m) {
        if matches!(chart, Chart::MovedVsCost) {
            continue;
        }
        for b in prewarm_doctor::report::png::chart_text_boxes(&m, &chart).unwrap() {
            if let Some(u) = b.text.strip_prefix("device memory (") {
                units.insert(u.trim_end_matches(')').to_string());
            }
        }
    }
    assert_eq!(units.len(), 1, "{units:?}");
    // Long part names are wrapped, never cut.
    let boxes = prewarm_doctor::report::png::chart_text_boxes(
        &m,
        &Chart::Waterfall {
            variant: "baseline".into(),
        },
    )
    .unwrap();
    assert!(boxes.iter().all(|b| !b.text.contains('…')), "{boxes:#?}");
    assert!(
        boxes
            .iter()
            .any(|b| b.text.starts_with("CUDA context (incl."))
    );
}

/// The page's text nodes, tags out (`<wbr>` kept as the break it is), the
/// style sheet, the charts and the title left out.
fn text_nodes(html: &str) -> Vec<String> {
    let skip = regex::Regex::new(r"(?s)<(svg|style|title)[ >].*?</(svg|style|title)>").unwrap();
    let html = skip.replace_all(html, "<x>");
    let tag = regex::Regex::new(r"<(?:wbr|[^>]*)>").unwrap();
    let mut out = Vec::new();
    let mut last = 0;
    for m in tag.find_iter(&html) {
        out.push(html[last..m.start()].to_string());
        out.push(if m.as_str() == "<wbr>" {
            "\u{200b}".into() // marks the break opportunity
        } else {
            "\n".into() // another element (inline ones taken apart too)
        });
        last = m.end();
    }
    out.push(html[last..].to_string());
    out.join("").split('\n').map(str::to_string).collect()
}

/// Issue 38: table cells broke inside words ("128.0 M / iB", "torc / h
/// pool", "16.309 / s"). On every recording, the HTML's text may wrap only
/// at spaces: no style breaks words anywhere, no figure can be parted from
/// its unit, and no run of text without a break is wider than a column can
/// be (paths and URLs break after their separators).
#[test]
fn html_text_wraps_only_between_words_on_every_recording() {
    let unit_apart =
        regex::Regex::new(r"\d (?:B|KiB|MiB|GiB|TiB|ns|µs|ms|s)(?:[^\p{L}\p{N}]|$)").unwrap();
    for run in common::recordings() {
        let html = html_of(&model_of(&run, "fixture"));
        let css = &html[html.find("<style>").unwrap()..html.find("</style>").unwrap()];
        for breaking in ["break-all", "anywhere", "word-break"] {
            assert!(!css.contains(breaking), "the style sheet has {breaking:?}");
        }
        let mut longest = String::new();
        for text in text_nodes(&html) {
            let text = text.replace("&amp;", "&");
            assert!(
                !unit_apart.is_match(&text),
                "{}: a figure can be parted from its unit: {text:?}",
                run.display()
            );
            // What cannot break: runs between spaces, <wbr> and hyphens.
            for piece in text.split(|c: char| c.is_ascii_whitespace() || c == '\u{200b}') {
                for run in piece.split_inclusive('-') {
                    if run.chars().count() > longest.chars().count() {
                        longest = run.to_string();
                    }
                }
            }
        }
        // 60 characters of monospace are 450 px: half the page.
        assert!(
            longest.chars().count() <= 60,
            "{}: {longest:?} cannot break",
            run.display()
        );
    }
}

/// The rows of one section's first table: each row's cells as text.
fn section_rows(html: &str, id: &str) -> Vec<Vec<String>> {
    let html = common::html_as_read(html);
    let start = html.find(&format!("<h2 id=\"{id}\"")).unwrap();
    let body = &html[start + 4..];
    let body = &body[..body.find("<h2").unwrap_or(body.len())];
    let cell = regex::Regex::new(r"(?s)<t[dh][^>]*>(.*?)</t[dh]>").unwrap();
    let tag = regex::Regex::new(r"<[^>]*>").unwrap();
    body.split("<tr")
        .skip(1)
        .map(|row| {
            cell.captures_iter(row)
                .map(|c| tag.replace_all(&c[1], "").replace("&#39;", "'"))
                .collect()
        })
        .collect()
}

/// Issue 38: the headline of oom-nccl-baseline said "3 warmup(s) still land
/// after setup" over a table of 2 (the text's "and 1 more under 50.0 ms"
/// was missing). On every recording, the late-warmups table accounts for
/// every warmup of each process it lists: its rows plus the N of its "and N
/// more" line are the process's late warmups, the count its headline gives.
#[test]
fn the_late_warmups_table_accounts_for_every_warmup_it_stands_for() {
    let more = regex::Regex::new(r"and (\d+) more under").unwrap();
    let mut remainders = 0;
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        let rows = section_rows(&html_of(&m), "late");
        for v in m.variants() {
            let Some((a, r)) = m.representative(v) else {
                continue;
            };
            let place = format!("{}, {}", a.id(), r.label);
            let mine: Vec<&Vec<String>> = rows.iter().filter(|c| c[0] == place).collect();
            let folded: usize = mine
                .iter()
                .filter_map(|c| more.captures(&c[1]))
                .map(|c| c[1].parse::<usize>().unwrap())
                .sum();
            remainders += usize::from(folded > 0);
            let listed = mine.iter().filter(|c| c.len() == 6).count();
            assert_eq!(
                listed + folded,
                r.late_warmups().len(),
                "{}: {place}: {mine:?}",
                run.display()
            );
        }
    }
    assert!(remainders > 0, "no recording has minor warmups to fold");
    // The single run's headline count is the table's.
    let m = model_of(&repo("tests/fixtures/h200/oom-nccl-baseline"), "oom");
    let html = common::html_as_read(&html_of(&m));
    assert!(html.contains("3 warmup(s) still land after setup"));
    assert!(
        html.contains(
            "<td colspan=\"5\">and 1 more under 50.0 ms / 1.0 MiB each (24.7 ms, 0 B in all)</td>"
        ),
        "the text's remainder line is in the table"
    );
}

/// Issue 38: the out-of-memory message was printed twice, in Exceptions and
/// in Out-of-memory forensics. On every recording, each exception that a
/// forensic stands for has its message on the page once (the forensic's
/// row), and its row in Exceptions links to that forensic's row.
#[test]
fn an_out_of_memory_message_is_printed_once_and_referred_to() {
    let mut checked = 0;
    let svg = regex::Regex::new(r"(?s)<svg .*?</svg>").unwrap();
    let link = regex::Regex::new(r##"href="#(oom-\d+)""##).unwrap();
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        let html = common::html_as_read(&html_of(&m));
        let page = svg.replace_all(&html, "");
        for (_, r, f) in m.forensics() {
            let Some(message) = &f.message else { continue };
            let opening: String = message.chars().take(60).collect();
            let opening = opening
                .replace('&', "&amp;")
                .replace('\'', "&#39;")
                .replace('<', "&#60;")
                .replace('>', "&#62;");
            assert_eq!(
                page.matches(&opening).count(),
                1,
                "{}: {} ({})",
                run.display(),
                opening,
                r.label
            );
            checked += 1;
        }
        for target in link.captures_iter(&page) {
            assert!(
                page.contains(&format!("<tr id=\"{}\">", &target[1])),
                "{}: a link to {} has no row",
                run.display(),
                &target[1]
            );
        }
    }
    assert!(checked >= 2, "only {checked} out-of-memory messages");
    let m = model_of(&repo("tests/fixtures/h200/oom-nccl-baseline"), "oom");
    let exceptions = section_rows(&html_of(&m), "exceptions");
    assert!(
        exceptions[1][2].contains("OutOfMemoryError")
            && exceptions[1][2].contains("out-of-memory forensics"),
        "{exceptions:?}"
    );
}

/// Issue 38: the "after last step" band label ran past the plot's right
/// edge. On every recording, each phase band's label on a timeline (PNG,
/// drawn with the same code as the SVG) ends inside the plot.
#[test]
fn phase_labels_stay_inside_the_timeline_plot_on_every_recording() {
    let label = regex::Regex::new(
        r"^(setup|step 1|steps 2\.\.N|after last step|before any step|step \d+ \(died\)|steps 2\.\.\d+ \(died\))$",
    )
    .unwrap();
    let mut labels = 0;
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        for chart in Chart::all(&m) {
            if !matches!(chart, Chart::Timeline { .. }) {
                continue;
            }
            let right = chart.size(&m).0 as i32
                - prewarm_doctor::report::charts::TIMELINE_MARGIN_RIGHT as i32;
            for b in prewarm_doctor::report::png::chart_text_boxes(&m, &chart).unwrap() {
                if label.is_match(&b.text) {
                    labels += 1;
                    assert!(
                        b.x1 <= right,
                        "{}: {chart:?}: {b:?} ends past the plot's right edge {right}",
                        run.display()
                    );
                }
            }
        }
    }
    assert!(labels > 20, "only {labels} phase labels drawn");
}

/// Issue 38: a rank that never reached step 1 showed "step-1 out-of-pool
/// 0 B". On every recording, a process whose account has no step-1 phase
/// says in its row of the ranks table that it did not reach step 1, with no
/// step-1 figure; every other row gives its step-1 figures.
#[test]
fn a_rank_without_step_one_says_so_instead_of_figures() {
    use prewarm_doctor::analysis::phases::Phase;
    let mut without = 0;
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        let rows = section_rows(&html_of(&m), "ranks");
        for a in m.attempts.iter().filter(|a| !a.warmup) {
            for r in a.shown_ranks(prewarm_doctor::report::model::SHOWN_RANKS) {
                let row = rows
                    .iter()
                    .find(|c| c.len() > 2 && c[0] == a.id() && c[1].starts_with(&r.label))
                    .unwrap_or_else(|| panic!("{}: no row for {}", run.display(), r.label));
                let reached = r.account.phases.iter().any(|p| p.phase == Phase::Step1);
                if reached {
                    assert_eq!(row.len(), 11, "{}: {row:?}", run.display());
                    assert_eq!(row[3], prewarm_doctor::report::bytes(r.step1_out_of_pool));
                } else {
                    without += 1;
                    assert_eq!(row[2], "did not reach step 1", "{}: {row:?}", run.display());
                    assert!(
                        !row[2..].iter().any(|c| c.ends_with(" B")),
                        "{}: {row:?}",
                        run.display()
                    );
                }
            }
        }
    }
    assert!(without > 0, "no recording has a process without step 1");
}

/// A run that captured nothing (`run --no-probe`, no GPU): every verdict
/// INCONCLUSIVE, what each moved and cost unknown.
fn run_without_capture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nocap");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
        .args(["run", "--no-probe", "--preset", "nemo-automodel", "--out"])
        .arg(&out)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    (dir, out)
}

/// The text boxes of one panel of the moved-vs-cost chart (0 left, 1 right).
fn moved_panel(m: &ReportModel, panel: usize) -> Vec<prewarm_doctor::report::png::TextBox> {
    let (w, _) = Chart::MovedVsCost.size(m);
    prewarm_doctor::report::png::chart_text_boxes(m, &Chart::MovedVsCost)
        .unwrap()
        .into_iter()
        .filter(|b| usize::from(b.x0 >= w as i32 / 2) == panel)
        .collect()
}

/// Issue 38: a run without capture drew "0 B" and "0.0 ms" bars over axes
/// of "0.0 0.0 0.0" for what the text calls unknown. Its verdicts say every
/// figure is unknown, and no chart is drawn: not in the HTML, not as PNG
/// (the folder is left empty, and the doctor says why).
#[test]
fn a_run_that_measured_nothing_draws_no_chart_of_zeros() {
    let (_dir, run) = run_without_capture();
    let m = model_of(&run, "nocap");
    let verdicts = &m.matrix.as_ref().unwrap().verdicts;
    assert!(!verdicts.is_empty());
    for v in verdicts {
        assert!(
            v.headline.contains("setup time unknown")
                && v.headline.contains("memory held at step-1 end unknown"),
            "{}",
            v.headline
        );
    }
    assert!(Chart::all(&m).is_empty(), "{:?}", Chart::all(&m));
    let html = html_of(&m);
    assert!(!html.contains("<svg"), "a chart in the HTML");
    let pngs = _dir.path().join("png");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
        .arg("report")
        .arg(&run)
        .args(["--format", "png", "-o"])
        .arg(&pngs)
        .output()
        .unwrap();
    assert!(st.status.success());
    assert_eq!(std::fs::read_dir(&pngs).unwrap().count(), 0);
    let said = String::from_utf8_lossy(&st.stderr);
    assert!(said.contains("wrote no chart into"), "{said}");
}

/// Where some verdicts have unknown figures and others measured ones (the
/// bundled matrix with its first verdict's figures taken away, in memory:
/// no recording has that mix), an unknown figure is written "not measured"
/// with no bar, and every axis reads distinct values.
#[test]
fn an_unknown_figure_is_written_not_measured_beside_measured_ones() {
    let mut m = model_of(&repo("reports/h200-matrix"), "reports/h200-matrix");
    {
        let v = &mut m.matrix.as_mut().unwrap().verdicts[0];
        v.moved_known = false;
        v.moved_bytes = 0.0;
        v.moved_seconds = 0.0;
        v.costs.setup_s = None;
        v.costs.held_known = false;
        v.costs.held_extra_bytes = 0.0;
    }
    assert!(Chart::all(&m).contains(&Chart::MovedVsCost));
    if let Some(dir) = std::env::var_os("PD_KEEP_CHARTS") {
        let png = render_to_vec(&PngChart(Chart::MovedVsCost), &m).unwrap();
        std::fs::write(
            std::path::Path::new(&dir).join("moved-vs-cost-unknown.png"),
            png,
        )
        .unwrap();
    }
    let figure = regex::Regex::new(r"^-?[\d.]+ (B|KiB|MiB|GiB|ms|s)( \(within noise\))?$").unwrap();
    for panel in [0, 1] {
        let boxes = moved_panel(&m, panel);
        let not_measured = boxes.iter().filter(|b| b.text == "not measured").count();
        assert_eq!(not_measured, 2, "panel {panel}: {boxes:#?}");
        // The other three rows have their two figures each.
        let figures: Vec<&str> = boxes
            .iter()
            .map(|b| b.text.as_str())
            .filter(|t| figure.is_match(t))
            .collect();
        assert_eq!(figures.len(), 6, "panel {panel}: {figures:?}");
    }
}

/// On every recording, the moved-vs-cost chart's axes read distinct values
/// (never "0.0 0.0 0.0").
#[test]
fn moved_vs_cost_axes_read_distinct_values_on_every_recording() {
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        if !Chart::all(&m).contains(&Chart::MovedVsCost) {
            continue;
        }
        for panel in [0, 1] {
            let boxes = moved_panel(&m, panel);
            let ticks: Vec<&str> = boxes
                .iter()
                .map(|b| b.text.as_str())
                .filter(|t| t.parse::<f64>().is_ok())
                .collect();
            let distinct: std::collections::BTreeSet<&&str> = ticks.iter().collect();
            assert!(ticks.len() >= 2, "{}: {ticks:?}", run.display());
            assert_eq!(distinct.len(), ticks.len(), "{}: {ticks:?}", run.display());
        }
    }
}

/// Issue 38: negative setup costs were drawn as bars without the "(within
/// noise)" the text gives them. On every recording, a setup change the text
/// calls within noise carries it on its bar.
#[test]
fn a_setup_change_within_noise_says_so_on_its_bar_on_every_recording() {
    let mut noisy = 0;
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        if !Chart::all(&m).contains(&Chart::MovedVsCost) {
            continue;
        }
        let right: Vec<String> = moved_panel(&m, 1).into_iter().map(|b| b.text).collect();
        for v in &m.matrix.as_ref().unwrap().verdicts {
            let costs = prewarm_doctor::report::model::costs_text(&v.costs);
            let Some(said) = costs
                .strip_prefix("setup ")
                .filter(|c| c.contains(" (within noise)"))
                .and_then(|c| c.split(" (within noise)").next())
            else {
                continue;
            };
            noisy += 1;
            let drawn = format!("{} (within noise)", said.trim_start_matches('+'));
            assert!(
                right.contains(&drawn),
                "{}: {} says {costs:?}; drawn: {right:?}",
                run.display(),
                v.variant
            );
        }
    }
    assert!(noisy >= 2, "only {noisy} setup changes within noise");
}

/// Issue 38: the OOM timeline labelled the phase its process died in
/// "steps 2..N" where the text says "step 2 (died)". On every recording, a
/// process that died in a step has that step named on its timeline as the
/// text's phase table names it, never "steps 2..N"; a process without a
/// step has its one phase named as the text names it.
#[test]
fn timeline_bands_are_named_as_the_text_names_the_phases() {
    let label = regex::Regex::new(
        r"^(setup|step 1|steps 2\.\.N|after last step|before any step|step \d+ \(died\)|steps 2\.\.\d+ \(died\))$",
    )
    .unwrap();
    let mut died = 0;
    for run in common::recordings() {
        let m = model_of(&run, "fixture");
        let text = common::terminal_text(&run);
        for chart in Chart::all(&m) {
            let Chart::Timeline { variant } = &chart else {
                continue;
            };
            let (_, r) = m.representative(variant).unwrap();
            let names: Vec<String> = prewarm_doctor::report::png::chart_text_boxes(&m, &chart)
                .unwrap()
                .into_iter()
                .map(|b| b.text)
                .filter(|t| label.is_match(t))
                .collect();
            // The names that depend on the process (the others are the
            // phases' own: "setup", "step 1", "after last step").
            for n in names
                .iter()
                .filter(|n| n.contains("(died)") || n == &"before any step")
            {
                assert!(
                    text.contains(n.as_str()),
                    "{}: {chart:?} names a phase {n:?} the text does not",
                    run.display()
                );
            }
            if let Some(k) = r.account.steps.died_in_step.filter(|k| *k >= 2) {
                died += 1;
                let said = if k == 2 {
                    "step 2 (died)".to_string()
                } else {
                    format!("steps 2..{k} (died)")
                };
                assert!(
                    names.contains(&said) && !names.iter().any(|n| n == "steps 2..N"),
                    "{}: {chart:?}: {names:?}",
                    run.display()
                );
            }
        }
    }
    assert!(
        died >= 2,
        "only {died} timelines of a process that died in a step"
    );
}
