//! Standard output, where a reader that went away (`| head -1`) is not an
//! error: what was left is dropped on purpose and the command keeps the exit
//! code it would have had.

use std::io::{ErrorKind, Write};

/// How writing to stdout went when it did not fail outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Everything was written.
    Written,
    /// The reader closed the pipe (`| head`): the rest was dropped on purpose.
    ReaderGone,
}

/// Writes `bytes` to stdout. A closed pipe is [`Delivery::ReaderGone`], not an
/// error; any other failure (disk full behind a redirect) is returned.
pub fn stdout_bytes(bytes: &[u8]) -> std::io::Result<Delivery> {
    write_to(&mut std::io::stdout().lock(), bytes)
}

/// [`stdout_bytes`] for any writer (tests use a closed pipe).
pub fn write_to(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<Delivery> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(Delivery::Written),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(Delivery::ReaderGone),
        Err(e) => Err(e),
    }
}

/// Writes standard output; a reader that went away is not an error, any
/// other failure is the message to print.
pub fn print_stdout(bytes: &[u8]) -> Result<(), String> {
    match stdout_bytes(bytes) {
        Ok(Delivery::Written | Delivery::ReaderGone) => Ok(()),
        Err(e) => Err(format!("cannot write to standard output: {e}")),
    }
}

/// A writer that remembers whether its reader went away (a broken pipe),
/// whatever layer the failure then comes back through (serde_json wraps it
/// in its own error for the JSON and Perfetto formats).
pub(super) struct PipeWatch<W: Write> {
    pub(super) inner: W,
    pub(super) gone: bool,
}

impl<W: Write> PipeWatch<W> {
    pub(super) fn new(inner: W) -> PipeWatch<W> {
        PipeWatch { inner, gone: false }
    }

    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r
            && e.kind() == ErrorKind::BrokenPipe
        {
            self.gone = true;
        }
        r
    }
}

impl<W: Write> Write for PipeWatch<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.note(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}

/// Lines to stdout that stop at the first write error (a closed pipe ends
/// `dump` quietly).
pub struct StdoutLines {
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    failed: Option<std::io::Error>,
}

impl Default for StdoutLines {
    fn default() -> Self {
        StdoutLines::new()
    }
}

impl StdoutLines {
    /// Buffered lines to the locked standard output.
    pub fn new() -> StdoutLines {
        StdoutLines {
            out: std::io::BufWriter::new(std::io::stdout().lock()),
            failed: None,
        }
    }

    /// Writes one line, unless a write already failed.
    pub fn line(&mut self, text: std::fmt::Arguments) {
        if self.failed.is_none()
            && let Err(e) = writeln!(self.out, "{text}")
        {
            self.failed = Some(e);
        }
    }

    /// Flushes; the message to print when writing failed for a reason other
    /// than a reader that went away.
    pub fn finish(mut self) -> Result<(), String> {
        if self.failed.is_none()
            && let Err(e) = self.out.flush()
        {
            self.failed = Some(e);
        }
        match self.failed {
            Some(e) if e.kind() != ErrorKind::BrokenPipe => {
                Err(format!("cannot write to standard output: {e}"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Closed(ErrorKind);
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_a_reader_that_went_away_and_other_failures_are_errors() {
        assert_eq!(
            write_to(&mut Closed(ErrorKind::BrokenPipe), b"x").unwrap(),
            Delivery::ReaderGone
        );
        assert!(write_to(&mut Closed(ErrorKind::StorageFull), b"x").is_err());
        let mut v = Vec::new();
        assert_eq!(write_to(&mut v, b"ok").unwrap(), Delivery::Written);
        assert_eq!(v, b"ok");
    }
}
