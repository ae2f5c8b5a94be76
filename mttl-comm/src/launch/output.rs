//! `--tag-output`: each rank's output, line by line, prefixed with its rank.
//!
//! A rank's stdout and stderr are pipes; one thread per pipe reads whole
//! lines and writes each as `[RANK] LINE` to the launcher's stream of the
//! same kind (stdout to stdout, stderr to stderr), with one `write` under the
//! stream's lock, then flushes, so lines of different ranks never interleave
//! and appear as soon as they are complete. A last line without a newline
//! gets one. If the launcher's stream is closed (e.g. piped into `head`), the
//! thread keeps reading and discards, so a rank never blocks on a full pipe.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

/// Which of the launcher's streams a pipe is copied to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// The forwarding threads of one job.
#[derive(Debug)]
pub(crate) struct OutputForwarders {
    started: usize,
    done_tx: Sender<()>,
    done_rx: Receiver<()>,
}

impl OutputForwarders {
    pub(crate) fn new() -> OutputForwarders {
        let (done_tx, done_rx) = mpsc::channel();
        OutputForwarders {
            started: 0,
            done_tx,
            done_rx,
        }
    }

    /// Copies `pipe` to `stream`, each line prefixed with `[rank] `.
    pub(crate) fn forward(
        &mut self,
        rank: usize,
        pipe: impl Read + Send + 'static,
        stream: Stream,
    ) -> io::Result<()> {
        let done = self.done_tx.clone();
        thread::Builder::new()
            .name(format!("mttlrun-output-{rank}"))
            .spawn(move || {
                let prefix = format!("[{rank}] ");
                match stream {
                    Stream::Stdout => copy_tagged(&prefix, pipe, |line| {
                        write_line(&mut io::stdout().lock(), line)
                    }),
                    Stream::Stderr => copy_tagged(&prefix, pipe, |line| {
                        write_line(&mut io::stderr().lock(), line)
                    }),
                }
                // The receiver is gone only if the job gave up waiting.
                let _ = done.send(());
            })?;
        self.started += 1;
        Ok(())
    }

    /// Waits until every pipe is drained, at most `limit` (a process that
    /// left the job's process groups may hold a pipe open forever).
    pub(crate) fn finish(self, limit: Duration) {
        let deadline = Instant::now() + limit;
        for _ in 0..self.started {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.done_rx.recv_timeout(left).is_err() {
                tracing::warn!(
                    "an output pipe is still open after the job ended; not waiting for it"
                );
                return;
            }
        }
    }
}

/// Reads `pipe` line by line and hands each tagged line to `sink`; after
/// the first failed write it only drains the pipe.
fn copy_tagged(prefix: &str, pipe: impl Read, mut sink: impl FnMut(&[u8]) -> io::Result<()>) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    let mut out = Vec::new();
    let mut writable = true;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("reading a rank's output failed: {e}");
                return;
            }
        }
        if !writable {
            continue;
        }
        out.clear();
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(&line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
        writable = sink(&out).is_ok();
    }
}

fn write_line(to: &mut impl Write, line: &[u8]) -> io::Result<()> {
    to.write_all(line)?;
    to.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(input: &[u8], fail_after: usize) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        copy_tagged("[7] ", input, |line| {
            if lines.len() == fail_after {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            lines.push(line.to_vec());
            Ok(())
        });
        lines
    }

    #[test]
    fn lines_are_prefixed_whole_and_terminated() {
        let lines = tag(b"one\n\ntwo words\nno newline", usize::MAX);
        assert_eq!(
            lines,
            vec![
                b"[7] one\n".to_vec(),
                b"[7] \n".to_vec(),
                b"[7] two words\n".to_vec(),
                b"[7] no newline\n".to_vec()
            ]
        );
        assert!(tag(b"", usize::MAX).is_empty());
    }

    #[test]
    fn a_closed_stream_stops_writing_but_drains() {
        // The sink fails on the second line; nothing is written after it.
        let lines = tag(b"a\nb\nc\n", 1);
        assert_eq!(lines, vec![b"[7] a\n".to_vec()]);
    }

    #[test]
    fn finish_waits_for_every_forwarder() {
        let mut forwarders = OutputForwarders::new();
        forwarders
            .forward(0, io::empty(), Stream::Stderr)
            .expect("thread");
        forwarders
            .forward(1, io::empty(), Stream::Stderr)
            .expect("thread");
        let start = Instant::now();
        forwarders.finish(Duration::from_secs(5));
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
