//! Analysis: events → phases → attributed account per process → per attempt
//! → per variant. Pure functions over data src/load decoded: no file I/O,
//! no printing.

pub mod account;
pub mod attempt;
pub mod comm_groups;
pub mod device;
pub mod forensics;
pub mod framework_joins;
pub mod gate;
pub mod matrix;
pub mod memory;
pub mod names;
pub mod noise;
pub mod own_time;
pub mod phases;
pub mod process;
pub mod ranks;
pub mod sources;
pub mod stats;
pub mod steady;
pub mod summary;
pub mod timeline;
pub mod timeline_build;
pub mod verdict;

pub use attempt::AttemptAccount;

use crate::load::RunData;

/// Analyses every attempt of a run.
pub fn analyse_run(run: &RunData) -> Vec<AttemptAccount> {
    let mut out = Vec::new();
    for attempt in &run.attempts {
        let mut processes = Vec::new();
        let mut problems = Vec::new();
        let mut notices = Vec::new();
        let mut command = Vec::new();
        let mut exit_code = None;
        let mut warmup = false;
        let mut interrupted = false;
        let mut not_started = false;
        for host in &attempt.hosts {
            problems.extend(host.problems.iter().cloned());
            let tag = host
                .meta
                .as_ref()
                .map(|m| m.host.clone())
                .unwrap_or_else(|| {
                    host.dir
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned()
                });
            if let Some(m) = &host.meta {
                notices.extend(m.notices.iter().map(|n| format!("{tag}: {n}")));
                if command.is_empty() {
                    command = m.command.clone();
                }
                warmup |= m.warmup;
                let never_ran = m.exit.is_none() && m.spawn_error.is_some();
                not_started |= never_ran;
                interrupted |= !never_ran && m.exit.is_none_or(|e| e.forwarded > 0);
                if let Some(e) = &m.exit {
                    exit_code =
                        Some(exit_code.map_or(e.code, |c: i32| if c != 0 { c } else { e.code }));
                } else if let Some(err) = &m.spawn_error {
                    notices.push(format!("{tag}: the command did not start: {err}"));
                } else {
                    notices.push(format!("{tag}: no exit status recorded (the doctor itself was stopped while the command ran)"));
                }
            }
            // src/load decodes each process (one at a time per worker) and
            // hands the records over; the analysis itself reads no file.
            processes.extend(host.map_processes(&run.root, |files, records| {
                process::analyse_process(host, files, records, &tag)
            }));
        }
        processes.sort_by_key(|p| (p.rank.unwrap_or(u32::MAX), p.host.clone(), p.pid));
        comm_groups::name_across_ranks(&mut processes);
        out.push(AttemptAccount {
            variant: attempt.variant.clone(),
            attempt: attempt.attempt.clone(),
            command,
            exit_code,
            interrupted,
            not_started,
            warmup,
            host_notices: notices,
            ranks: ranks::spread(&processes),
            processes,
            problems,
        });
    }
    out
}
