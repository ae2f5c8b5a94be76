//! Smoke test and micro-benchmark of the MPI backend, run by hand under
//! `mpirun` (the shared conformance suite lives in `tests/conformance.rs`):
//!
//! ```text
//! cargo build --release -p mttl-comm --features mpi --example mpi_smoke
//! mpirun --allow-run-as-root --oversubscribe -n 2 target/release/examples/mpi_smoke
//! mpirun --allow-run-as-root --oversubscribe -n 4 target/release/examples/mpi_smoke
//! mpirun --allow-run-as-root --oversubscribe -n 2 target/release/examples/mpi_smoke bench
//! ```
//!
//! Without an argument every rank runs the checks (ping-pong of 0 B to
//! 16 MiB with probe and content checks, crossing large sends, many
//! outstanding nsends, self-sends, errors, timeouts, an all-to-all) and
//! panics on the first failure, which makes `mpirun` fail. With `bench`,
//! ranks 0 and 1 time ping-pong round trips and 1 MiB streaming on the
//! backend and on raw rsmpi calls in the same process, and rank 0 prints both.

#[cfg(feature = "mpi")]
fn main() {
    checks::run();
}

#[cfg(not(feature = "mpi"))]
fn main() {
    eprintln!("mpi_smoke needs the MPI backend: build it with `--features mpi`");
    std::process::exit(2);
}

#[cfg(feature = "mpi")]
mod checks {
    use std::time::{Duration, Instant};

    use mpi::topology::{Process, SimpleCommunicator};
    use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Equivalence, Source};
    use mttl_comm::backend::mpi::MpiComm;
    use mttl_comm::{Comm, ErrorKind, Message, Rank, SendHandle};

    const BARRIER: u32 = 32_000;

    /// One group of checks, run by every rank.
    type Phase = fn(&mut MpiComm);

    pub(super) fn run() {
        let mut comm = match MpiComm::init() {
            Ok(comm) => comm,
            Err(error) => {
                eprintln!("mpi_smoke: {error}");
                std::process::exit(1);
            }
        };
        if std::env::args().nth(1).as_deref() == Some("bench") {
            bench(&mut comm);
        } else {
            let phases: [(&str, Phase); 10] = [
                ("self-sends", self_sends),
                ("ping-pong 0 B..16 MiB with probe", ping_pong),
                ("crossing large sends", crossing_large),
                ("many outstanding nsends", many_nsends),
                (
                    "large nsends to all, completed by send_done alone",
                    nsend_wait_then_receive,
                ),
                (
                    "a receive waits while a large send to it waits",
                    waiting_cycle,
                ),
                ("errors", errors),
                ("timeouts", timeouts),
                ("all-to-all", all_to_all),
                ("empty at the end", nothing_left),
            ];
            for (name, phase) in phases {
                phase(&mut comm);
                barrier(&mut comm);
                if comm.rank() == 0 {
                    println!("ok  {name} ({} ranks)", comm.size());
                }
            }
        }
        let rank = comm.rank();
        if let Err(error) = comm.finish() {
            panic!("rank {rank}: finish failed: {error}");
        }
    }

    /// Deterministic contents for message `seed` of `len` bytes.
    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn expect_message(
        comm: &MpiComm,
        got: Option<Message>,
        source: Rank,
        tag: u32,
        seed: u64,
        len: usize,
    ) {
        let rank = comm.rank();
        let got = got
            .unwrap_or_else(|| panic!("rank {rank}: no message (wanted tag {tag} from {source})"));
        assert_eq!(
            (got.source, got.tag, got.data.len()),
            (source, tag, len),
            "rank {rank}: wrong envelope"
        );
        assert!(
            got.data == pattern(seed, len),
            "rank {rank}: corrupt payload from {source}, tag {tag}, {len} B"
        );
    }

    /// A barrier made of messages: everyone reports to rank 0, which releases all.
    fn barrier(comm: &mut MpiComm) {
        let (rank, size) = (comm.rank(), comm.size());
        if rank == 0 {
            for peer in 1..size {
                let m = comm
                    .recv_from(peer, None)
                    .expect("barrier recv")
                    .expect("no timeout");
                assert_eq!(
                    m.tag,
                    BARRIER,
                    "rank 0: stray message in barrier: {:?}",
                    m.envelope()
                );
            }
            for peer in 1..size {
                comm.send(peer, BARRIER, &[]).expect("barrier send");
            }
        } else {
            comm.send(0, BARRIER, &[]).expect("barrier send");
            let m = comm
                .recv_from(0, None)
                .expect("barrier recv")
                .expect("no timeout");
            assert_eq!(
                m.tag,
                BARRIER,
                "rank {rank}: stray message in barrier: {:?}",
                m.envelope()
            );
        }
    }

    fn wait_all(comm: &mut MpiComm, handles: &[SendHandle]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        for &handle in handles {
            while !comm.send_done(handle).expect("send_done") {
                assert!(
                    Instant::now() < deadline,
                    "rank {}: nsend {handle:?} never completed",
                    comm.rank()
                );
                let _ = comm.probe().expect("probe");
            }
        }
        for &handle in handles {
            assert!(
                comm.send_done(handle).expect("send_done"),
                "completion must stick"
            );
        }
    }

    fn self_sends(comm: &mut MpiComm) {
        let me = comm.rank();
        comm.send(me, 7, &pattern(1, 100)).expect("send to self");
        let handle = comm
            .nsend(me, 8, pattern(2, 100_000))
            .expect("nsend to self");
        assert!(comm.send_done(handle).expect("send_done"));
        let envelope = comm
            .probe()
            .expect("probe")
            .expect("self message visible to probe");
        assert_eq!((envelope.source, envelope.tag, envelope.len), (me, 7, 100));
        let first = comm
            .recv_from(me, Some(Duration::ZERO))
            .expect("recv_from self");
        expect_message(comm, first, me, 7, 1, 100);
        let second = comm
            .recv_from(me, Some(Duration::ZERO))
            .expect("recv_from self");
        expect_message(comm, second, me, 8, 2, 100_000);
        assert!(comm
            .recv_from(me, Some(Duration::ZERO))
            .expect("recv_from self")
            .is_none());
    }

    const SIZES: [usize; 14] = [
        0,
        1,
        8,
        100,
        3999,
        4000,
        4001,
        4096,
        65_536,
        300_000,
        1 << 20,
        4 << 20,
        (16 << 20) - 1,
        16 << 20,
    ];

    fn ping_pong(comm: &mut MpiComm) {
        if comm.rank() > 1 || comm.size() < 2 {
            return;
        }
        for (i, &len) in SIZES.iter().enumerate() {
            let tag = i as u32;
            let seed = 100 + i as u64;
            let nonblocking = i % 2 == 1;
            if comm.rank() == 0 {
                if nonblocking {
                    let handle = comm.nsend(1, tag, pattern(seed, len)).expect("nsend");
                    wait_all(comm, &[handle]);
                } else {
                    comm.send(1, tag, &pattern(seed, len)).expect("send");
                }
                let back = comm
                    .recv_from(1, Some(Duration::from_secs(60)))
                    .expect("recv_from");
                expect_message(comm, back, 1, tag + 1000, seed + 1, len);
            } else {
                let start = Instant::now();
                let envelope = loop {
                    if let Some(envelope) = comm.probe().expect("probe") {
                        break envelope;
                    }
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "rank 1: probe never saw the ping"
                    );
                };
                assert_eq!(
                    (envelope.source, envelope.tag, envelope.len),
                    (0, tag, len),
                    "probe envelope"
                );
                let ping = comm
                    .recv_any(Some(Duration::from_secs(60)))
                    .expect("recv_any");
                expect_message(comm, ping, 0, tag, seed, len);
                comm.send(0, tag + 1000, &pattern(seed + 1, len))
                    .expect("send back");
            }
        }
    }

    fn crossing_large(comm: &mut MpiComm) {
        if comm.rank() > 1 || comm.size() < 2 {
            return;
        }
        let peer = 1 - comm.rank();
        let me = comm.rank() as u64;
        let lens = [8 << 20, 5000, 1 << 20];
        for (k, &len) in lens.iter().enumerate() {
            comm.send(peer, 500 + k as u32, &pattern(me * 10 + k as u64, len))
                .expect("crossing send");
        }
        for (k, &len) in lens.iter().enumerate() {
            let got = comm
                .recv_from(peer, Some(Duration::from_secs(60)))
                .expect("recv_from");
            expect_message(
                comm,
                got,
                peer,
                500 + k as u32,
                (1 - me) * 10 + k as u64,
                len,
            );
        }
    }

    fn many_nsends(comm: &mut MpiComm) {
        if comm.rank() > 1 || comm.size() < 2 {
            return;
        }
        const COUNT: usize = 3000;
        let len_of = |i: usize| (i % 7) * 1500;
        if comm.rank() == 0 {
            let mut handles = Vec::new();
            for i in 0..COUNT {
                if i % 10 == 9 {
                    comm.send(1, i as u32, &pattern(i as u64, len_of(i)))
                        .expect("send");
                } else {
                    let handle = comm
                        .nsend(1, i as u32, pattern(i as u64, len_of(i)))
                        .expect("nsend");
                    if let Some(last) = handles.last() {
                        let last: &SendHandle = last;
                        assert!(
                            handle.seq > last.seq && handle.dest == 1,
                            "sequence numbers must grow"
                        );
                    }
                    handles.push(handle);
                }
            }
            wait_all(comm, &handles);
        } else {
            for i in 0..COUNT {
                let got = comm
                    .recv_from(0, Some(Duration::from_secs(60)))
                    .expect("recv_from");
                expect_message(comm, got, 0, i as u32, i as u64, len_of(i));
            }
        }
    }

    /// Every rank nsends 1 MiB to every other rank and waits for all its
    /// sends before receiving anything: only `send_done`'s draining lets the
    /// large messages move.
    fn nsend_wait_then_receive(comm: &mut MpiComm) {
        let (me, size) = (comm.rank(), comm.size());
        let len = 1 << 20;
        let handles: Vec<SendHandle> = (0..size)
            .filter(|&to| to != me)
            .map(|to| {
                comm.nsend(to, 600, pattern((me * 100 + to) as u64, len))
                    .expect("nsend")
            })
            .collect();
        wait_all(comm, &handles);
        for from in (0..size).filter(|&from| from != me) {
            let got = comm
                .recv_from(from, Some(Duration::from_secs(60)))
                .expect("recv_from");
            expect_message(comm, got, from, 600, (from * 100 + me) as u64, len);
        }
    }

    /// Rank 0 sends 1 MiB to rank 1, then tells rank 2; rank 2 then tells
    /// rank 1, which waits for rank 2 before it takes rank 0's message. Rank
    /// 1's wait must drain rank 0's message, or all three wait for ever.
    fn waiting_cycle(comm: &mut MpiComm) {
        if comm.size() < 3 {
            return;
        }
        let limit = Some(Duration::from_secs(30));
        let big = 1 << 20;
        match comm.rank() {
            0 => {
                comm.send(1, 700, &pattern(700, big)).expect("send");
                comm.send(2, 701, b"go").expect("send");
            }
            1 => {
                let go = comm.recv_from(2, limit).expect("recv_from");
                assert!(
                    go.is_some(),
                    "rank 1: rank 2 never spoke: the large message was not drained"
                );
                let got = comm.recv_from(0, limit).expect("recv_from");
                expect_message(comm, got, 0, 700, 700, big);
            }
            2 => {
                let go = comm.recv_from(0, limit).expect("recv_from");
                assert!(
                    go.is_some_and(|m| m.tag == 701),
                    "rank 2: no go from rank 0"
                );
                comm.send(1, 702, b"done").expect("send");
            }
            _ => {}
        }
    }

    fn errors(comm: &mut MpiComm) {
        let (rank, size) = (comm.rank(), comm.size());
        let show = |what: &str, error: &mttl_comm::CommError| {
            if rank == 0 {
                println!("    {what}: {error}");
            }
        };
        let e = comm
            .send(size, 1, b"x")
            .expect_err("send to a missing rank");
        assert!(matches!(e.kind, ErrorKind::NoSuchRank { peer, .. } if peer == size));
        assert_eq!(e.rank, Some(rank));
        show("bad rank", &e);
        let e = comm
            .nsend(size + 3, 1, vec![1])
            .expect_err("nsend to a missing rank");
        assert!(matches!(e.kind, ErrorKind::NoSuchRank { .. }));
        let e = comm
            .recv_from(size, Some(Duration::ZERO))
            .expect_err("recv_from a missing rank");
        assert!(matches!(e.kind, ErrorKind::NoSuchRank { .. }));
        let e = comm.send(rank, 32_768, b"x").expect_err("tag above 32767");
        assert!(e.to_string().contains("32767"), "{e}");
        show("bad tag", &e);
        let bogus = SendHandle {
            dest: rank,
            seq: 1 << 40,
        };
        let e = comm.send_done(bogus).expect_err("a handle never issued");
        show("bad handle", &e);
        match MpiComm::init() {
            Ok(_) => panic!("rank {rank}: a second init must fail"),
            Err(e) => show("second init", &e),
        }
        assert!(comm.max_message_len() <= i32::MAX as usize);
        let max = comm.max_message_len();
        if max < 64 << 20 {
            let e = comm
                .send(rank, 1, &vec![0; max + 1])
                .expect_err("too large");
            assert!(matches!(e.kind, ErrorKind::MessageTooLarge { len, .. } if len == max + 1));
            show("too large", &e);
        }
        assert!(comm
            .probe()
            .expect("probe")
            .is_none_or(|e| e.tag == BARRIER));
    }

    fn timeouts(comm: &mut MpiComm) {
        // Rank 0 may already see peers' next barrier messages; the others
        // get nothing until rank 0 releases them.
        let start = Instant::now();
        let me = comm.rank();
        if me == 0 {
            assert!(comm
                .recv_from(0, Some(Duration::ZERO))
                .expect("recv_from")
                .is_none());
        } else {
            let got = comm.recv_any(Some(Duration::ZERO)).expect("recv_any");
            assert!(
                got.is_none(),
                "rank {me}: unexpected message {:?}",
                got.map(|m| m.envelope())
            );
        }
        assert!(
            start.elapsed() < Duration::from_millis(20),
            "zero timeout waited {:?}",
            start.elapsed()
        );
        if comm.size() >= 2 && comm.rank() == 1 {
            let start = Instant::now();
            let got = comm
                .recv_from(0, Some(Duration::from_millis(30)))
                .expect("recv_from");
            let took = start.elapsed();
            assert!(
                got.is_none(),
                "rank 1: unexpected message {:?}",
                got.map(|m| m.envelope())
            );
            assert!(
                took >= Duration::from_millis(30),
                "timed out early: {took:?}"
            );
            assert!(
                took < Duration::from_millis(300),
                "timed out late: {took:?}"
            );
        }
    }

    fn all_to_all(comm: &mut MpiComm) {
        let (me, size) = (comm.rank(), comm.size());
        let lens = [8usize, 5000, 300_000];
        let big = 2 << 20;
        let seed = |from: Rank, to: Rank, k: usize| (from * 1000 + to * 10 + k) as u64;
        let mut handles = Vec::new();
        for to in 0..size {
            for (k, &len) in lens.iter().enumerate() {
                handles.push(
                    comm.nsend(to, 2000 + k as u32, pattern(seed(me, to, k), len))
                        .expect("nsend"),
                );
            }
        }
        for step in 1..size {
            let to = (me + step) % size;
            comm.send(to, 2003, &pattern(seed(me, to, 3), big))
                .expect("large send");
        }
        let mut next = vec![0usize; size];
        let expected = size * lens.len() + (size - 1);
        for _ in 0..expected {
            let m = comm
                .recv_any(Some(Duration::from_secs(60)))
                .expect("recv_any")
                .expect("message");
            let k = next[m.source];
            next[m.source] += 1;
            let len = if k < lens.len() { lens[k] } else { big };
            let source = m.source;
            expect_message(
                comm,
                Some(m),
                source,
                2000 + k as u32,
                seed(source, me, k),
                len,
            );
        }
        for (from, &n) in next.iter().enumerate() {
            let want = if from == me {
                lens.len()
            } else {
                lens.len() + 1
            };
            assert_eq!(n, want, "rank {me}: {n} messages from {from}");
        }
        wait_all(comm, &handles);
    }

    fn nothing_left(comm: &mut MpiComm) {
        let debug = format!("{comm:?}");
        assert!(debug.contains("inbox: 0"), "rank {}: {debug}", comm.rank());
    }

    // ----- bench -----

    /// The ways one round trip is done in the benchmark.
    #[derive(Debug, Clone, Copy)]
    enum Way {
        /// rsmpi `send` + `receive_into` a preallocated buffer (MPI_Recv).
        RawRecvInto,
        /// rsmpi `send` + `receive_vec` (matched probe + MPI_Mrecv).
        RawReceiveVec,
        /// rsmpi `send` + `immediate_probe` loop + `receive_into_with_tag`:
        /// the backend's receive structure without the backend.
        RawProbeRecv,
        /// The backend: `send` + `recv_from`.
        Backend,
        /// The backend as a message handler uses it: `probe` until a message
        /// is waiting, then `recv_any`.
        BackendProbe,
    }

    const WAYS: [Way; 5] = [
        Way::RawRecvInto,
        Way::RawReceiveVec,
        Way::RawProbeRecv,
        Way::Backend,
        Way::BackendProbe,
    ];

    /// Rank 0 pings and waits for the pong; rank 1 answers; others idle.
    fn round_trip(way: Way, comm: &mut MpiComm, other: &Process<'_>, data: &[u8], buf: &mut [u8]) {
        let (me, len) = (comm.rank(), data.len());
        if me > 1 {
            return;
        }
        let peer = 1 - me;
        let receive = |comm: &mut MpiComm, buf: &mut [u8]| match way {
            Way::RawRecvInto => {
                other.receive_into(buf);
            }
            Way::RawReceiveVec => assert_eq!(other.receive_vec::<u8>().0.len(), len),
            Way::RawProbeRecv => {
                let status = loop {
                    if let Some(status) = other.immediate_probe() {
                        break status;
                    }
                };
                assert_eq!(status.count(u8::equivalent_datatype()) as usize, len);
                other.receive_into_with_tag(buf, status.tag());
            }
            Way::Backend => {
                let m = comm
                    .recv_from(peer, None)
                    .expect("recv_from")
                    .expect("message");
                assert_eq!(m.data.len(), len);
            }
            Way::BackendProbe => {
                while comm.probe().expect("probe").is_none() {}
                let m = comm.recv_any(None).expect("recv_any").expect("message");
                assert_eq!(m.data.len(), len);
            }
        };
        let send = |comm: &mut MpiComm| match way {
            Way::RawRecvInto | Way::RawReceiveVec | Way::RawProbeRecv => other.send(data),
            Way::Backend | Way::BackendProbe => comm.send(peer, 1, data).expect("send"),
        };
        if me == 0 {
            send(comm);
            receive(comm, buf);
        } else {
            receive(comm, buf);
            send(comm);
        }
    }

    /// Seconds per round trip of `way` over `iters` round trips.
    fn time_way(
        way: Way,
        comm: &mut MpiComm,
        world: &SimpleCommunicator,
        iters: usize,
        data: &[u8],
        buf: &mut [u8],
    ) -> f64 {
        let other = world.process_at_rank(1 - comm.rank().min(1) as i32);
        for _ in 0..iters / 10 + 1 {
            round_trip(way, comm, &other, data, buf);
        }
        world.barrier();
        let start = Instant::now();
        for _ in 0..iters {
            round_trip(way, comm, &other, data, buf);
        }
        let took = start.elapsed().as_secs_f64() / iters as f64;
        world.barrier();
        took
    }

    /// Ping-pong round trips and 1 MiB streaming, raw rsmpi against the
    /// backend, interleaved so load on the machine hits all alike; the best
    /// of `REPEATS` runs of each.
    fn bench(comm: &mut MpiComm) {
        // Many short runs (about a millisecond each): the best of them is
        // what a quiet machine gives, even on a shared, loaded one.
        const REPEATS: usize = 60;
        let world = SimpleCommunicator::world();
        assert!(comm.size() >= 2, "bench needs 2 ranks");
        let report = comm.rank() == 0;
        if report {
            println!("round trip in µs, best of {REPEATS} (rsmpi: raw rsmpi calls; Δ: MpiComm send+recv_from minus the raw way)");
            println!(
                "{:>9} {:>14} {:>16} {:>15} {:>18} {:>16} {:>16} {:>16}",
                "size",
                "rsmpi recv_into",
                "rsmpi receive_vec",
                "rsmpi probe+recv",
                "MpiComm recv_from",
                "MpiComm probe+any",
                "Δ recv_into",
                "Δ probe+recv"
            );
        }
        for len in [8usize, 64, 512, 4000, 4096, 65_536, 1 << 20] {
            let iters = match len {
                0..=4096 => 1_000,
                4097..=65_536 => 200,
                _ => 10,
            };
            let data = pattern(len as u64, len);
            let mut buf = vec![0u8; len];
            let mut best = [f64::MAX; WAYS.len()];
            for _ in 0..REPEATS {
                for (best, &way) in best.iter_mut().zip(&WAYS) {
                    *best = best.min(time_way(way, comm, &world, iters, &data, &mut buf));
                }
            }
            if report {
                let us = |s: f64| s * 1e6;
                let delta = |raw: f64| {
                    format!(
                        "{:+.3} ({:+.1}%)",
                        us(best[3] - raw),
                        (best[3] / raw - 1.0) * 100.0
                    )
                };
                println!(
                    "{len:>7} B {:>14.3} {:>16.3} {:>15.3} {:>18.3} {:>16.3} {:>16} {:>16}",
                    us(best[0]),
                    us(best[1]),
                    us(best[2]),
                    us(best[3]),
                    us(best[4]),
                    delta(best[0]),
                    delta(best[2]),
                );
            }
        }
        streaming(comm, &world, report);
    }

    /// Rank 0 sends `COUNT` messages of 1 MiB back to back; rank 1 receives
    /// them and acknowledges the last. Raw rsmpi and the backend, interleaved.
    fn streaming(comm: &mut MpiComm, world: &SimpleCommunicator, report: bool) {
        const COUNT: usize = 20;
        const REPEATS: usize = 60;
        /// Raw rsmpi into one reused buffer, raw rsmpi into a fresh `Vec`
        /// per message (as the backend must), the backend.
        const WAYS: [&str; 3] = ["rsmpi receive_into", "rsmpi receive_vec", "MpiComm"];
        let len = 1 << 20;
        let data = pattern(7, len);
        let mut buf = vec![0u8; len];
        let me = comm.rank();
        let other = world.process_at_rank(1 - me.min(1) as i32);
        let mut best = [f64::MAX; WAYS.len()];
        for _ in 0..REPEATS {
            for (way, best) in best.iter_mut().enumerate() {
                world.barrier();
                let start = Instant::now();
                match (me, way) {
                    (0, 0 | 1) => {
                        for _ in 0..COUNT {
                            other.send(&data[..]);
                        }
                        other.receive_into(&mut buf[..1]);
                    }
                    (1, 0) => {
                        for _ in 0..COUNT {
                            other.receive_into(&mut buf[..]);
                        }
                        other.send(&data[..1]);
                    }
                    (1, 1) => {
                        for _ in 0..COUNT {
                            assert_eq!(other.receive_vec::<u8>().0.len(), len);
                        }
                        other.send(&data[..1]);
                    }
                    (0, _) => {
                        for _ in 0..COUNT {
                            comm.send(1, 2, &data).expect("send");
                        }
                        comm.recv_from(1, None).expect("recv").expect("ack");
                    }
                    (1, _) => {
                        for _ in 0..COUNT {
                            comm.recv_from(0, None).expect("recv").expect("message");
                        }
                        comm.send(0, 2, &data[..1]).expect("send");
                    }
                    _ => {}
                }
                *best = best.min(start.elapsed().as_secs_f64());
                world.barrier();
            }
        }
        if report {
            let gib = |s: f64| (COUNT * len) as f64 / s / f64::from(1u32 << 30);
            let ours = gib(best[2]);
            print!("1 MiB streaming, best of {REPEATS}:");
            for (name, &seconds) in WAYS.iter().zip(&best).take(2) {
                let raw = gib(seconds);
                print!(
                    " {name} {raw:.2} GiB/s (MpiComm {:+.1}%),",
                    (ours / raw - 1.0) * 100.0
                );
            }
            println!(" MpiComm {ours:.2} GiB/s");
        }
    }
}
