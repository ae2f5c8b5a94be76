use std::cell::RefCell;
use std::io;
use std::rc::Rc;

use super::format::{self, *};
use super::recorder::{self, Recorder};
use super::sink::Sink;
use super::*;

/// A sink in memory that fails once `limit` bytes are appended.
struct MemSink {
    bytes: Rc<RefCell<Vec<u8>>>,
    limit: usize,
}

impl Sink for MemSink {
    fn append(&mut self, b: &[u8]) -> io::Result<()> {
        let mut v = self.bytes.borrow_mut();
        if v.len() + b.len() > self.limit {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"));
        }
        v.extend_from_slice(b);
        Ok(())
    }
    fn rewrite_header(&mut self, h: &[u8]) -> io::Result<()> {
        self.bytes.borrow_mut()[..h.len()].copy_from_slice(h);
        Ok(())
    }
    fn describe(&self) -> String {
        "memory".into()
    }
}

fn recorder(cap: usize, policy: Policy, limit: usize) -> (Recorder, Rc<RefCell<Vec<u8>>>) {
    let bytes = Rc::new(RefCell::new(Vec::new()));
    let sink = MemSink {
        bytes: bytes.clone(),
        limit,
    };
    let h = recorder::header(7, 1, 2, cap, policy);
    (
        Recorder::new(Box::new(sink), h, cap, policy).unwrap(),
        bytes,
    )
}

/// Every block of a file: (kind, records); panics on a bad one.
fn read_back(bytes: &[u8]) -> (FileHeader, Vec<Event>, Option<EndTotals>) {
    let header = FileHeader::decode(bytes).unwrap();
    let (mut pos, mut events, mut end) = (FILE_HEADER_LEN, Vec::new(), None);
    while pos < bytes.len() {
        let hb: [u8; BLOCK_HEADER_LEN] = bytes[pos..pos + BLOCK_HEADER_LEN].try_into().unwrap();
        let bh = BlockHeader::decode(&hb).unwrap();
        let payload = &bytes[pos + BLOCK_HEADER_LEN..pos + BLOCK_HEADER_LEN + bh.len as usize];
        assert_eq!(format::checksum(&[&hb[..24], payload]), bh.checksum);
        if bh.kind == BLOCK_END {
            end = EndTotals::decode(payload);
        } else {
            let (mut p, mut prev) = (0, bh.base);
            for _ in 0..bh.count {
                if let Record::Event(e) = decode_record(payload, &mut p, &mut prev).unwrap() {
                    events.push(e);
                }
            }
            assert_eq!(p, payload.len());
        }
        pos += BLOCK_HEADER_LEN + bh.len as usize;
    }
    (header, events, end)
}

fn ev(i: u64) -> Event {
    Event {
        kind: Kind::Send,
        peer: Some((i % 3) as u32),
        a: i,
        b: i * 8,
        begin: 1_000 + i * 10,
        end: 1_005 + i * 10,
    }
}

#[test]
fn local_policy_writes_when_full_and_loses_nothing() {
    let (mut rec, bytes) = recorder(MIN_BUFFER, Policy::Local, usize::MAX);
    let name = rec.name("solve").unwrap();
    for i in 0..5_000 {
        rec.push(&ev(i));
    }
    assert_eq!(rec.name("solve"), Some(name));
    let totals = rec.finish();
    assert!(totals.flushes >= 5, "{totals:?}");
    assert_eq!(totals.dropped, 0);
    let (h, events, end) = read_back(&bytes.borrow());
    assert_eq!(h.status, STATUS_FINISHED);
    assert_eq!(end, Some(totals));
    let sends: Vec<_> = events.iter().filter(|e| e.kind == Kind::Send).collect();
    assert_eq!(sends.len(), 5_000);
    for (i, e) in sends.iter().enumerate() {
        assert_eq!(**e, ev(i as u64));
    }
    let flushes = events.iter().filter(|e| e.kind == Kind::Flush).count();
    assert_eq!(flushes as u64, totals.flushes);
}

#[test]
fn the_buffer_never_grows() {
    for policy in [Policy::Memory, Policy::Local] {
        let (mut rec, bytes) = recorder(MIN_BUFFER, policy, usize::MAX);
        for i in 0..10_000 {
            // Names of every length, so blocks end at every alignment.
            let name = "abcdefghij".repeat(20)[..(i as usize * 7) % 200].to_owned();
            let name: &'static str = Box::leak(name.into_boxed_str());
            rec.name(name);
            rec.push(&ev(i));
            assert!(rec.used() <= MIN_BUFFER, "{policy:?} event {i}");
            assert_eq!(rec.capacity(), MIN_BUFFER, "{policy:?} event {i}");
        }
        if policy == Policy::Local {
            let totals = rec.finish();
            let (_, events, end) = read_back(&bytes.borrow());
            assert_eq!(end, Some(totals));
            assert_eq!(
                events.iter().filter(|e| e.kind == Kind::Send).count(),
                10_000
            );
        }
    }
    let (mut rec, _) = recorder(MIN_BUFFER, Policy::Memory, usize::MAX);
    for i in 0..10_000 {
        rec.push(&ev(i));
    }
    let totals = rec.finish();
    assert!(totals.dropped > 9_000 && totals.events + totals.dropped == 10_000);
}

#[test]
fn a_failed_write_stops_tracing_and_marks_the_header() {
    ON.with(|on| on.set(true));
    let (mut rec, bytes) = recorder(MIN_BUFFER, Policy::Local, 10_000);
    for i in 0..20_000 {
        rec.push(&ev(i));
    }
    assert!(rec.failed());
    assert!(!on(), "recording must stop after a failed write");
    rec.finish();
    let v = bytes.borrow();
    assert!(v.len() <= 10_000);
    let h = FileHeader::decode(&v).unwrap();
    assert_eq!(h.status, STATUS_WRITE_FAILED);
}

#[test]
fn a_region_opened_while_off_records_nothing() {
    ON.with(|on| on.set(false));
    let r = region("off");
    assert!(r.name.is_none());
}

#[test]
fn a_polling_wait_is_one_wait_event_spanning_it_and_nothing_when_off() {
    ON.with(|on| on.set(false));
    let w = waiting("off");
    assert!(w.begin.is_none());
    drop(w);

    let (rec, bytes) = recorder(MIN_BUFFER, Policy::Memory, usize::MAX);
    install(rec, false);
    let before = now();
    {
        let _w = waiting("landing");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    finish();
    let (_, events, _) = read_back(&bytes.borrow());
    let waits: Vec<_> = events.iter().filter(|e| e.kind == Kind::Wait).collect();
    assert_eq!(waits.len(), 1, "{events:?}");
    let w = waits[0];
    assert!(w.begin >= before && w.end - w.begin >= 2_000_000, "{w:?}");
}
