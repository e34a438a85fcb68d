//! Capturing the command's output for `run --tui`: both streams go, byte for
//! byte, to `output.log` in the attempt's host folder and to a sink (the
//! dashboard's log pane, or the doctor's own stdout/stderr once the dashboard
//! is closed). Without `--tui` the command keeps the doctor's streams.

use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// File name of the captured output inside a host folder.
pub const OUTPUT_FILE: &str = "output.log";

/// Which of the command's streams a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Where captured output goes besides the file.
pub trait OutputSink: Send + Sync {
    /// Called with each chunk as it arrives, in order per stream.
    fn chunk(&self, stream: Stream, bytes: &[u8]);
}

/// One attempt's output capture: the file and the sink.
pub struct OutputCapture {
    pub file: PathBuf,
    pub sink: Arc<dyn OutputSink>,
    /// The first error writing the file (the sink still got everything).
    error: Mutex<Option<String>>,
}

/// The threads copying a child's pipes; join them after the child exits.
pub struct Pumps(Vec<JoinHandle<()>>);

impl Pumps {
    /// Waits until both pipes are drained (the command and all its children closed them).
    pub fn join(self) {
        for h in self.0 {
            let _ = h.join();
        }
    }
}

impl OutputCapture {
    /// A capture into `file` and `sink`.
    pub fn new(file: PathBuf, sink: Arc<dyn OutputSink>) -> OutputCapture {
        OutputCapture {
            file,
            sink,
            error: Mutex::new(None),
        }
    }

    /// Why the file is incomplete, if it is.
    pub fn error(&self) -> Option<String> {
        self.error.lock().map(|e| e.clone()).unwrap_or(None)
    }

    fn note(&self, what: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(what);
        }
    }

    /// Starts copying the piped stdout and stderr of a just-spawned child.
    pub fn pump(self: &Arc<Self>, child: &mut Child) -> Pumps {
        let file = match File::create(&self.file) {
            Ok(f) => Some(Arc::new(Mutex::new(f))),
            Err(e) => {
                self.note(format!("cannot create {}: {e}", self.file.display()));
                None
            }
        };
        let mut threads = Vec::new();
        let streams: [(Option<Box<dyn Read + Send>>, Stream); 2] = [
            (
                child.stdout.take().map(|s| Box::new(s) as _),
                Stream::Stdout,
            ),
            (
                child.stderr.take().map(|s| Box::new(s) as _),
                Stream::Stderr,
            ),
        ];
        for (pipe, stream) in streams {
            let Some(mut pipe) = pipe else { continue };
            let me = self.clone();
            let file = file.clone();
            threads.push(std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    let n = match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            me.note(format!("reading the command's output failed: {e}"));
                            break;
                        }
                    };
                    if let Some(f) = &file {
                        let written = f.lock().map_err(|_| ()).and_then(|mut f| {
                            f.write_all(&buf[..n]).map_err(|e| {
                                me.note(format!("cannot write {}: {e}", me.file.display()))
                            })
                        });
                        let _ = written;
                    }
                    me.sink.chunk(stream, &buf[..n]);
                }
            }));
        }
        Pumps(threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[derive(Default)]
    struct Collect(Mutex<Vec<(Stream, Vec<u8>)>>);
    impl OutputSink for Collect {
        fn chunk(&self, stream: Stream, bytes: &[u8]) {
            self.0.lock().unwrap().push((stream, bytes.to_vec()));
        }
    }

    #[test]
    fn both_streams_reach_the_file_and_the_sink() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(Collect::default());
        let cap = Arc::new(OutputCapture::new(
            dir.path().join(OUTPUT_FILE),
            sink.clone(),
        ));
        let mut child = Command::new("sh")
            .args(["-c", "echo out; echo err >&2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pumps = cap.pump(&mut child);
        child.wait().unwrap();
        pumps.join();
        let file = std::fs::read_to_string(dir.path().join(OUTPUT_FILE)).unwrap();
        assert!(file.contains("out\n") && file.contains("err\n"), "{file:?}");
        let got = sink.0.lock().unwrap();
        assert!(
            got.iter()
                .any(|(s, b)| *s == Stream::Stdout && b == b"out\n")
        );
        assert!(
            got.iter()
                .any(|(s, b)| *s == Stream::Stderr && b == b"err\n")
        );
        assert_eq!(cap.error(), None);
    }
}
