//! Where events go: a bounded in-memory buffer, drained to the per-process event
//! file by a background thread. Writers never block on I/O; when the buffer is
//! full or the disk fails, events are dropped and counted, never silently lost.
//! Once the process has started exiting ([`Sink::write_through`]), every record
//! is written as it comes, so callbacks that arrive during teardown (library
//! unloads, frees from destructors) still reach the file.

use crate::guard::lock;
use prewarm_events::{Record, encode_record};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Upper bound of buffered, unwritten bytes (host memory the probe may hold).
pub const BUFFER_CAP: usize = 64 << 20;

struct Pending {
    bytes: Vec<u8>,
    records: u64,
}

/// The per-process event sink.
pub struct Sink {
    pending: Mutex<Pending>,
    file: Mutex<Option<File>>,
    dropped: AtomicU64,
    written: AtomicU64,
    failed: AtomicBool,
    write_through: AtomicBool,
}

impl Sink {
    /// A sink that appends to `file` (already holding the header).
    pub fn new(file: File, header_len: u64) -> Sink {
        Sink {
            pending: Mutex::new(Pending {
                bytes: Vec::with_capacity(1 << 16),
                records: 0,
            }),
            file: Mutex::new(Some(file)),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(header_len),
            failed: AtomicBool::new(false),
            write_through: AtomicBool::new(false),
        }
    }

    /// Queues one record; O(record size), no I/O (until the process exits).
    pub fn push(&self, record: &Record) {
        if self.failed.load(Ordering::Relaxed) {
            self.count_dropped(1);
            return;
        }
        {
            let mut p = lock(&self.pending);
            let start = p.bytes.len();
            encode_record(record, &mut p.bytes);
            if p.bytes.len() > BUFFER_CAP {
                p.bytes.truncate(start);
                drop(p);
                self.count_dropped(1);
                return;
            }
            p.records += 1;
        }
        if self.write_through.load(Ordering::Relaxed) {
            self.flush();
        }
    }

    /// Counts records the probe could not keep (shown as dropped events).
    pub fn count_dropped(&self, records: u64) {
        self.dropped.fetch_add(records, Ordering::Relaxed);
    }

    /// Writes everything queued so far. A write error (disk full) stops capture:
    /// the records are counted as dropped and the training run is not disturbed.
    pub fn flush(&self) {
        // File first, then the queue: concurrent flushes write in queue order.
        let mut file = lock(&self.file);
        let (bytes, records) = {
            let mut p = lock(&self.pending);
            if p.bytes.is_empty() {
                return;
            }
            let records = std::mem::take(&mut p.records);
            let next = Vec::with_capacity(p.bytes.len().min(1 << 20));
            (std::mem::replace(&mut p.bytes, next), records)
        };
        let Some(f) = file.as_mut() else {
            self.count_dropped(records);
            return;
        };
        match f.write_all(&bytes) {
            Ok(()) => {
                self.written
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            Err(_) => {
                self.failed.store(true, Ordering::Relaxed);
                self.count_dropped(records);
                *file = None;
            }
        }
    }

    /// From now on every record is written as it is pushed (the process is
    /// exiting: there may be no later flush).
    pub fn write_through(&self) {
        self.write_through.store(true, Ordering::Relaxed);
        self.flush();
    }

    /// Whether the process has started exiting ([`Sink::write_through`] was called).
    pub fn is_write_through(&self) -> bool {
        self.write_through.load(Ordering::Relaxed)
    }

    /// Best-effort flush from a fatal-signal handler: never waits for a lock
    /// (if the crashing thread holds one, the pending bytes are left behind) and
    /// never allocates; a plain write(2) of what is buffered.
    pub fn flush_from_signal(&self) {
        let Ok(mut file) = self.file.try_lock() else {
            return;
        };
        let Ok(mut pending) = self.pending.try_lock() else {
            return;
        };
        if let Some(f) = file.as_mut()
            && f.write_all(&pending.bytes).is_ok()
        {
            self.written
                .fetch_add(pending.bytes.len() as u64, Ordering::Relaxed);
            pending.bytes.clear();
            pending.records = 0;
        }
    }

    /// Records dropped so far (buffer full, disk error, capture stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Bytes written to the event file so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prewarm_events::{Notice, NoticeLevel, encode_header, read_file_bytes};

    fn sink_in(dir: &std::path::Path) -> (Sink, std::path::PathBuf) {
        let path = dir.join("p.events");
        let mut f = File::create(&path).unwrap();
        let header = encode_header(&[("pid", "1")]);
        f.write_all(&header).unwrap();
        (Sink::new(f, header.len() as u64), path)
    }

    fn notice(i: u64) -> Record {
        Record::Notice(Notice {
            t: i,
            level: NoticeLevel::Info,
            text: format!("n{i}"),
        })
    }

    #[test]
    fn flushes_write_everything_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink_in(dir.path());
        for i in 0..5 {
            sink.push(&notice(i));
        }
        sink.flush();
        sink.push(&notice(5));
        sink.flush_from_signal();
        let out = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(out.records, (0..6).map(notice).collect::<Vec<_>>());
        assert_eq!(sink.dropped(), 0);
        assert_eq!(sink.written(), std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn a_signal_flush_never_waits_for_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink_in(dir.path());
        sink.push(&notice(1));
        let held = sink.pending.lock().unwrap();
        sink.flush_from_signal(); // returns at once instead of deadlocking
        drop(held);
        let held = sink.file.lock().unwrap();
        sink.flush_from_signal();
        drop(held);
        let out = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert!(out.records.is_empty());
    }

    #[test]
    fn after_write_through_every_record_reaches_the_file_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink_in(dir.path());
        sink.push(&notice(1));
        sink.write_through();
        sink.push(&notice(2));
        let out = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(out.records, vec![notice(1), notice(2)]);
    }

    #[test]
    fn a_record_past_the_cap_is_counted_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink_in(dir.path());
        let big = Record::Notice(Notice {
            t: 0,
            level: NoticeLevel::Info,
            text: "x".repeat(4000),
        });
        let mut n = 0u64;
        while sink.dropped() == 0 {
            sink.push(&big);
            n += 1;
        }
        sink.flush();
        let out = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(out.records.len() as u64, n - 1);
        assert_eq!(sink.dropped(), 1);
    }
}
