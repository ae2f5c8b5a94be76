//! Makes a large trace from a real one, to measure `mttl-trace`'s memory on
//! traces larger than a machine can record in the time at hand:
//!
//! ```text
//! cargo run --release -p mttl-trace --example replicate_trace -- IN OUT COPIES
//! ```
//!
//! Every rank file of IN is written to OUT with its event blocks repeated
//! COPIES times, each copy shifted later by the longest rank's span (first
//! block's base to the end block's base) plus 1 ms, the same for every
//! rank so that their clocks stay as they were; the payloads are copied
//! unchanged (their records are deltas from the block's base), each block's
//! header gets the shifted base and a new checksum, and the end block counts
//! COPIES times the events. Every rank repeats the same run, so messages,
//! clock records and suspensions pair and correct as in the original:
//! `mttl-trace check` on OUT must say what it says on IN, times COPIES.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use mttl_core::trace::format::{
    self, BlockHeader, EndTotals, BLOCK_END, BLOCK_EVENTS, BLOCK_HEADER_LEN, FILE_HEADER_LEN,
};

/// One block of the input: its header and payload.
struct Block {
    header: BlockHeader,
    payload: Vec<u8>,
}

fn blocks(path: &Path) -> Result<(Vec<u8>, Vec<Block>), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut r = BufReader::new(File::open(path).map_err(err)?);
    let mut head = vec![0u8; FILE_HEADER_LEN];
    r.read_exact(&mut head).map_err(err)?;
    let mut out = Vec::new();
    let mut at = FILE_HEADER_LEN;
    loop {
        let mut h = [0u8; BLOCK_HEADER_LEN];
        match r.read_exact(&mut h) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(format!(
                    "{}: ends at byte {at} without an end block (a complete trace is needed)",
                    path.display()
                ))
            }
            other => other.map_err(err)?,
        }
        let header = BlockHeader::decode(&h)
            .ok_or_else(|| format!("{}: bad block magic at byte {at}", path.display()))?;
        let mut payload = vec![0u8; header.len as usize];
        r.read_exact(&mut payload).map_err(err)?;
        at += BLOCK_HEADER_LEN + payload.len();
        let end = header.kind == BLOCK_END;
        out.push(Block { header, payload });
        if end {
            return Ok((head, out));
        }
    }
}

fn put(w: &mut impl Write, mut h: BlockHeader, payload: &[u8]) -> std::io::Result<()> {
    let unsummed = h.encode_unsummed();
    h.checksum = format::checksum(&[&unsummed, payload]);
    w.write_all(&unsummed)?;
    w.write_all(&h.checksum.to_le_bytes())?;
    w.write_all(payload)
}

/// A rank's span, ns: its first block's base to its end block's.
fn span(blocks: &[Block]) -> u64 {
    let end = blocks.last().map_or(0, |b| b.header.base);
    let first = blocks.first().map_or(end, |b| b.header.base);
    end.saturating_sub(first)
}

fn replicate(
    input: &Path,
    (head, blocks): &(Vec<u8>, Vec<Block>),
    output: &Path,
    copies: u64,
    shift: u64,
) -> Result<u64, String> {
    let (end, events) = blocks.split_last().expect("an end block was read");
    let mut totals = EndTotals::decode(&end.payload)
        .ok_or_else(|| format!("{}: an end block of the wrong length", input.display()))?;
    let err = |e: std::io::Error| format!("{}: {e}", output.display());
    let mut w = BufWriter::with_capacity(1 << 20, File::create(output).map_err(err)?);
    w.write_all(head).map_err(err)?;
    for k in 0..copies {
        for b in events {
            debug_assert_eq!(b.header.kind, BLOCK_EVENTS);
            let h = BlockHeader {
                base: b.header.base + k * shift,
                ..b.header
            };
            put(&mut w, h, &b.payload).map_err(err)?;
        }
    }
    totals.events *= copies;
    totals.flushes *= copies;
    let h = BlockHeader {
        base: end.header.base + (copies - 1) * shift,
        ..end.header
    };
    put(&mut w, h, &totals.encode()).map_err(err)?;
    w.flush().map_err(err)?;
    Ok(w.get_ref().metadata().map_err(err)?.len())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, copies] = &args[..] else {
        eprintln!("usage: replicate_trace IN_DIR OUT_DIR COPIES");
        return std::process::ExitCode::FAILURE;
    };
    let Ok(copies) = copies.parse::<u64>().map(|c| c.max(1)) else {
        eprintln!("replicate_trace: COPIES must be a number, not {copies:?}");
        return std::process::ExitCode::FAILURE;
    };
    let run = || -> Result<u64, String> {
        std::fs::create_dir_all(output).map_err(|e| format!("{output}: {e}"))?;
        let mut files = Vec::new();
        for entry in std::fs::read_dir(input).map_err(|e| format!("{input}: {e}"))? {
            let path = entry.map_err(|e| format!("{input}: {e}"))?.path();
            if path.extension().is_some_and(|x| x == "mttltrace") {
                let read = blocks(&path)?;
                files.push((path, read));
            }
        }
        let shift = files.iter().map(|(_, f)| span(&f.1)).max().unwrap_or(0) + 1_000_000;
        let mut total = 0;
        for (path, read) in &files {
            let name = path.file_name().expect("a file name");
            total += replicate(path, read, &Path::new(output).join(name), copies, shift)?;
        }
        Ok(total)
    };
    match run() {
        Ok(bytes) => {
            println!("{bytes} bytes written to {output} ({copies} copies)");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("replicate_trace: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
