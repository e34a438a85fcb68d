//! Where events go: bounded in-memory buffers, drained to the per-process event
//! file by a background thread. Writers never block on I/O; when a buffer is
//! full or the disk fails, events are dropped and counted, never silently lost.
//! Once the process has started exiting ([`Sink::write_through`]), every record
//! is written as it comes, so callbacks that arrive during teardown (library
//! unloads, frees from destructors) still reach the file.
//!
//! The buffer is sharded by thread: a record is encoded into a per-thread
//! scratch buffer outside any lock, then copied into its thread's shard, so
//! threads allocating at once do not serialise on one lock, and the copy never
//! reallocates (each shard's capacity is reserved up front; a record that does
//! not fit is dropped and counted). The flush swaps each shard with one spare
//! buffer of the same capacity, so nothing is allocated after start-up. A
//! thread's records stay in order; records of different threads are ordered
//! by their timestamps when read (load/records.rs sorts the calls).

use crate::clock::thread_id;
use crate::guard::lock;
use prewarm_events::{Record, encode_record};
use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Upper bound of buffered, unwritten bytes (host memory the probe may hold),
/// over all shards (plus one spare shard's worth held by the flush).
pub const BUFFER_CAP: usize = 64 << 20;

/// Shards of the buffer; a thread always uses the same one (its id modulo).
const SHARDS: usize = 16;

/// Capacity of one shard, reserved at start (virtual memory until used).
const SHARD_CAP: usize = BUFFER_CAP / SHARDS;

/// Largest per-thread scratch buffer kept between records: above the
/// largest record the probe writes in a callback (strings are cut at
/// 4,096 bytes); a larger one (a long notice) is encoded, then the excess is
/// released.
const SCRATCH_KEEP: usize = 16 << 10;

struct Pending {
    bytes: Vec<u8>,
    records: u64,
}

/// One shard, on its own cache lines so threads on different shards do not
/// contend for the line that holds the lock.
#[repr(align(128))]
struct Shard(Mutex<Pending>);

/// The file and the spare buffer swapped into a shard at each flush.
struct Output {
    file: Option<File>,
    spare: Vec<u8>,
}

/// The per-process event sink.
pub struct Sink {
    shards: Box<[Shard]>,
    output: Mutex<Output>,
    dropped: AtomicU64,
    written: AtomicU64,
    failed: AtomicBool,
    write_through: AtomicBool,
}

thread_local! {
    /// Where this thread encodes a record before it is copied into its shard.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Sink {
    /// A sink that appends to `file` (already holding the header).
    pub fn new(file: File, header_len: u64) -> Sink {
        let shards = (0..SHARDS)
            .map(|_| {
                Shard(Mutex::new(Pending {
                    bytes: Vec::with_capacity(SHARD_CAP),
                    records: 0,
                }))
            })
            .collect();
        Sink {
            shards,
            output: Mutex::new(Output {
                file: Some(file),
                spare: Vec::with_capacity(SHARD_CAP),
            }),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(header_len),
            failed: AtomicBool::new(false),
            write_through: AtomicBool::new(false),
        }
    }

    /// Queues one record; O(record size), no I/O (until the process exits),
    /// no allocation once this thread has encoded a record of this size.
    pub fn push(&self, record: &Record) {
        self.push_with(record, false);
    }

    /// As [`Sink::push`], but a full shard is written out first instead of
    /// dropping the record: for threads that may block on I/O (the writer,
    /// CUPTI's buffer hand-off), which can produce bursts larger than one
    /// shard (the first launches of thousands of kernels at once).
    pub fn push_or_write(&self, record: &Record) {
        self.push_with(record, true);
    }

    fn push_with(&self, record: &Record, write_when_full: bool) {
        if self.failed.load(Ordering::Relaxed) {
            self.count_dropped(1);
            return;
        }
        let mut queued = self.queue(record);
        if !queued && write_when_full {
            self.flush();
            queued = self.queue(record);
        }
        if !queued {
            self.count_dropped(1);
            return;
        }
        if self.write_through.load(Ordering::Relaxed) {
            self.flush();
        }
    }

    /// Encodes and queues `record` in this thread's shard; false when full.
    fn queue(&self, record: &Record) -> bool {
        SCRATCH
            .try_with(|scratch| match scratch.try_borrow_mut() {
                Ok(mut buf) => self.queue_encoded(record, &mut buf),
                // Re-entered on this thread (a signal during a push): a fresh buffer.
                Err(_) => self.queue_encoded(record, &mut Vec::new()),
            })
            // Thread-locals already gone (thread teardown): a fresh buffer.
            .unwrap_or_else(|_| self.queue_encoded(record, &mut Vec::new()))
    }

    /// Encodes `record` into `buf`, then copies it into this thread's shard;
    /// false when the shard has no room for it.
    fn queue_encoded(&self, record: &Record, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        encode_record(record, buf);
        let fits = {
            let mut p = lock(&self.shard().0);
            let fits = p.bytes.len() + buf.len() <= p.bytes.capacity();
            if fits {
                p.bytes.extend_from_slice(buf);
                p.records += 1;
            }
            fits
        };
        if buf.capacity() > SCRATCH_KEEP {
            buf.clear();
            buf.shrink_to(SCRATCH_KEEP);
        }
        fits
    }

    fn shard(&self) -> &Shard {
        &self.shards[thread_id() as usize % self.shards.len()]
    }

    /// Counts records the probe could not keep (shown as dropped events).
    pub fn count_dropped(&self, records: u64) {
        self.dropped.fetch_add(records, Ordering::Relaxed);
    }

    /// Writes everything queued so far. A write error (disk full) stops capture:
    /// the records are counted as dropped and the training run is not disturbed.
    pub fn flush(&self) {
        // The output first, then each shard: concurrent flushes write in queue order.
        let mut out = lock(&self.output);
        for shard in self.shards.iter() {
            let records = {
                let mut p = lock(&shard.0);
                if p.bytes.is_empty() {
                    continue;
                }
                std::mem::swap(&mut p.bytes, &mut out.spare);
                std::mem::take(&mut p.records)
            };
            let out = &mut *out;
            let Some(f) = out.file.as_mut() else {
                self.count_dropped(records);
                out.spare.clear();
                continue;
            };
            match f.write_all(&out.spare) {
                Ok(()) => {
                    self.written
                        .fetch_add(out.spare.len() as u64, Ordering::Relaxed);
                }
                Err(_) => {
                    self.failed.store(true, Ordering::Relaxed);
                    self.count_dropped(records);
                    out.file = None;
                }
            }
            out.spare.clear();
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
    /// (a shard the crashing thread holds is left behind) and never
    /// allocates; a plain write(2) of what is buffered.
    pub fn flush_from_signal(&self) {
        let Ok(mut out) = self.output.try_lock() else {
            return;
        };
        let Some(f) = out.file.as_mut() else {
            return;
        };
        for shard in self.shards.iter() {
            let Ok(mut pending) = shard.0.try_lock() else {
                continue;
            };
            if !pending.bytes.is_empty() && f.write_all(&pending.bytes).is_ok() {
                self.written
                    .fetch_add(pending.bytes.len() as u64, Ordering::Relaxed);
                pending.bytes.clear();
                pending.records = 0;
            }
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
        let held = sink.shard().0.lock().unwrap();
        sink.flush_from_signal(); // returns at once instead of deadlocking
        drop(held);
        let held = sink.output.lock().unwrap();
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
    fn a_burst_from_a_thread_that_may_write_is_written_not_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink_in(dir.path());
        let big = |i| {
            Record::Notice(Notice {
                t: i,
                level: NoticeLevel::Info,
                text: "x".repeat(4000),
            })
        };
        // Twice what one shard holds.
        let n = 2 * SHARD_CAP as u64 / 4000;
        for i in 0..n {
            sink.push_or_write(&big(i));
        }
        sink.flush();
        assert_eq!(sink.dropped(), 0);
        let out = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(out.records, (0..n).map(big).collect::<Vec<_>>());
    }

    #[test]
    fn threads_at_once_keep_every_record_and_each_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let (sink, path) = sink_in(dir.path());
        std::thread::scope(|s| {
            for th in 0..8u64 {
                let sink = &sink;
                s.spawn(move || {
                    for i in 0..1000 {
                        sink.push(&notice(th * 1_000_000 + i));
                    }
                });
            }
        });
        sink.flush();
        let out = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(out.records.len(), 8000);
        for th in 0..8u64 {
            let mine: Vec<u64> = out
                .records
                .iter()
                .filter_map(|r| match r {
                    Record::Notice(n) if n.t / 1_000_000 == th => Some(n.t % 1_000_000),
                    _ => None,
                })
                .collect();
            assert_eq!(mine, (0..1000).collect::<Vec<_>>());
        }
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
