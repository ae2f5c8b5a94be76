//! The LogGOPS rules on schedules small enough to work out by hand.
//!
//! Unless a test says otherwise the parameters are `P`: L = 100, o = 10,
//! g = 20, G = 2, O = 1, S = 64, chosen so that every term shows in the
//! result. For a message of s bytes (s-1 = 7 for 8 bytes):
//! - sender CPU: o + (s-1)·O = 17; sender NIC: g + (s-1)·G = 34;
//! - arrival: send time + o + L = +110;
//! - receiver CPU: o + max((s-1)·O, (s-1)·G) = 24; receiver NIC: 34.

use mttl_sim::{input, simulate, Blocked, Params, Report};

const P: Params = Params {
    l: 100,
    o: 10,
    g: 20,
    big_g_ps: 2000,
    big_o_ps: 1000,
    s: 64,
};

fn run(text: &str, p: Params) -> Report {
    let sched = input::goal::parse("test.goal".as_ref(), text.as_bytes())
        .unwrap_or_else(|e| panic!("parse: {e}"));
    simulate(&sched, &p)
}

fn finish(r: &Report) -> Vec<u64> {
    r.ranks.iter().map(|t| t.finish).collect()
}

#[test]
fn eager_send_recv() {
    // Rank 0 sends at 0: CPU busy to 17. The message arrives at 110; rank 1's
    // receive is posted since 0, so it is taken at once: 110 + 24 = 134.
    let r = run(
        "num_ranks 2\nrank 0 {\nsend 8b to 1 tag 0\n}\nrank 1 {\nrecv 8b from 0 tag 0\n}\n",
        P,
    );
    assert_eq!(finish(&r), vec![17, 134]);
    assert!(r.deadlock.is_none());
    // Rank 1 spent 24 ns on the message and waited 110 for it.
    assert_eq!((r.ranks[1].comm, r.ranks[1].wait), (24, 110));
    assert_eq!(r.max, (134, 1));
    // Events: two operations and one message.
    assert_eq!(r.events, 3);
}

#[test]
fn rendezvous_send_completes_when_matched() {
    // 100 bytes > S: the send (CPU to 10 + 99 = 109) is done only when the
    // message is matched at 110, which also moves rank 0's CPU up to 110; the
    // calc that requires the send then runs 110..115. The receiver pays
    // 10 + max(99, 198) = 208 from 110: 318.
    let text = "num_ranks 2\nrank 0 {\ns: send 100b to 1 tag 0\nc: calc 5\nc requires s\n}\n\
                rank 1 {\nrecv 100b from 0 tag 0\n}\n";
    assert_eq!(finish(&run(text, P)), vec![115, 318]);
    // Eager instead (S = 1000): the send is done at once and the calc runs
    // as soon as the CPU is free, 109..114.
    assert_eq!(finish(&run(text, Params { s: 1000, ..P })), vec![114, 318]);
}

#[test]
fn eager_limit_is_inclusive() {
    // As in the reference, a message of exactly S bytes is eager: with S = 8
    // the calc after an 8-byte send starts when the CPU is free (17), after
    // a 9-byte send only when the receive matches at 110.
    let text = |n: u32| {
        format!(
            "num_ranks 2\nrank 0 {{\ns: send {n}b to 1\nc: calc 1\nc requires s\n}}\n\
             rank 1 {{\nrecv {n}b from 0\n}}\n"
        )
    };
    let p = Params { s: 8, ..P };
    assert_eq!(run(&text(8), p).ranks[0].finish, 18);
    assert_eq!(run(&text(9), p).ranks[0].finish, 111);
}

#[test]
fn ping_pong() {
    // Rank 0: send at 0 (CPU to 17), its receive is issued at 17 and posted.
    // Rank 1: message at 110, CPU to 134; its send is issued at 134 (CPU to
    // 151), arrives at 134 + 110 = 244; rank 0 takes it: 244 + 24 = 268.
    let text = "num_ranks 2\n\
                rank 0 {\ns: send 8b to 1 tag 0\nr: recv 8b from 1 tag 0\nr requires s\n}\n\
                rank 1 {\nr: recv 8b from 0 tag 0\ns: send 8b to 0 tag 0\ns requires r\n}\n";
    assert_eq!(finish(&run(text, P)), vec![268, 151]);
}

#[test]
fn message_before_receive_goes_to_unexpected_queue() {
    // Rank 1 computes 0..500 and only then posts its receive. The message
    // arrives at 110 but the CPU is busy: it is handled at 500 (to 524) and,
    // no receive being posted yet, queued as unexpected; the receive, issued
    // at 500 after it, finds it there.
    let text = "num_ranks 2\nrank 0 {\nsend 8b to 1 tag 3\n}\n\
                rank 1 {\nc: calc 500\nr: recv 8b from 0 tag 3\nr requires c\n}\n";
    let r = run(text, P);
    assert_eq!(finish(&r), vec![17, 524]);
    assert_eq!(r.ranks[1].compute, 500);
    // Rendezvous from the unexpected queue: 100 bytes arrive at 110, are
    // handled at 500 (CPU to 500 + 10 + 198 = 708); the receive matches at
    // 500 and releases the send, whose rank's clocks move up to 500, so its
    // calc runs 500..505.
    let text = "num_ranks 2\nrank 0 {\ns: send 100b to 1\nc: calc 5\nc requires s\n}\n\
                rank 1 {\nc: calc 500\nr: recv 100b from 0\nr requires c\n}\n";
    assert_eq!(finish(&run(text, P)), vec![505, 708]);
}

#[test]
fn wildcards_match_in_queue_order() {
    // Rank 2 posts a (any source, tag 7) then b (any source, any tag). The
    // message from rank 0 (tag 5, at 110) skips a and matches b, releasing
    // calc 5000 at 134 (to 5134). Rank 1's message (tag 7, sent at 1000 after
    // its calc, arriving 1110) matches a but waits for the CPU: 5134 + 24.
    let text = "num_ranks 3\nrank 0 {\nsend 8b to 2 tag 5\n}\n\
                rank 1 {\nc: calc 1000\ns: send 8b to 2 tag 7\ns requires c\n}\n\
                rank 2 {\na: recv 8b from -1 tag 7\nb: recv 8b from -1 tag -1\n\
                w: calc 5000\nw requires b\n}\n";
    let r = run(text, P);
    assert_eq!(finish(&r), vec![17, 1017, 5158]);
    assert!(r.deadlock.is_none());
}

#[test]
fn gaps_space_back_to_back_sends() {
    // Three sends at 0: the NIC gap g + 7·G = 34 exceeds the CPU's 17, so
    // they leave at 0, 34, 68 (CPU to 85) and arrive at 110, 144, 178. The
    // receiving NIC has the same gap: handled at 110, 144, 178 -> 202.
    let text = "num_ranks 2\nrank 0 {\nsend 8b to 1\nsend 8b to 1\nsend 8b to 1\n}\n\
                rank 1 {\nrecv 8b from 0\nrecv 8b from 0\nrecv 8b from 0\n}\n";
    assert_eq!(finish(&run(text, P)), vec![85, 202]);
    // With G = 0 and g = 5 the CPU limits instead: sends at 0, 17, 34 (CPU to
    // 51); arrivals 110, 127, 144, each handled for 10 + 7 = 17: 161.
    let p = Params {
        big_g_ps: 0,
        g: 5,
        ..P
    };
    assert_eq!(finish(&run(text, p)), vec![51, 161]);
}

#[test]
fn calc_and_dependencies_across_cpus() {
    // a: calc 100 on CPU 0 starts at 0; b (send on CPU 1) only needs a to
    // have started, so it goes at 0 (CPU 1 to 17, arrival 110); c needs a
    // done, and runs 100..130 on CPU 0. The receiver handles the message on
    // the CPU index the send named (1): 110 + 24 = 134.
    let text = "num_ranks 2\nrank 0 {\na: calc 100\nb: send 8b to 1 cpu 1\nb irequires a\n\
                c: calc 30\nc requires a\n}\nrank 1 {\nrecv 8b from 0\n}\n";
    let r = run(text, P);
    assert_eq!(finish(&r), vec![130, 134]);
    assert_eq!((r.ranks[0].compute, r.ranks[0].comm), (130, 17));
    // On the calc's CPU and with `requires`, the send waits for the calc:
    // sent at 100 (CPU to 117), arrival 210, handled to 234.
    let text = "num_ranks 2\nrank 0 {\na: calc 100\nb: send 8b to 1\nb requires a\n}\n\
                rank 1 {\nrecv 8b from 0\n}\n";
    assert_eq!(finish(&run(text, P)), vec![117, 234]);
}

#[test]
fn deadlock_names_blocked_ranks_and_operations() {
    // Both ranks receive before they send: nothing can ever match.
    let text = "num_ranks 2\n\
                rank 0 {\nr: recv 8b from 1\ns: send 8b to 1\ns requires r\n}\n\
                rank 1 {\nr: recv 8b from 0\ns: send 8b to 0\ns requires r\n}\n";
    let r = run(text, P);
    let d = r.deadlock.expect("a deadlock");
    assert_eq!(d.ranks.len(), 2);
    for (rank, list) in &d.ranks {
        let base = 2 * rank;
        assert_eq!(
            list,
            &vec![Blocked::UnmatchedRecv(base), Blocked::NotDone(base + 1)]
        );
    }
    // A message nobody receives also leaves the run incomplete.
    let r = run(
        "num_ranks 2\nrank 0 {\nsend 8b to 1 tag 4\n}\nrank 1 {\n}\n",
        P,
    );
    let d = r.deadlock.expect("an unreceived message");
    assert_eq!(d.ranks, vec![(1, vec![Blocked::UnreceivedMessage(0)])]);
}

#[test]
fn dependency_cycle_is_an_input_error() {
    let text = "num_ranks 1\nrank 0 {\na: calc 1\nb: calc 2\nc: calc 3\n\
                a requires c\nc requires b\nb irequires a\n}\n";
    let e = input::goal::parse("cyc.goal".as_ref(), text.as_bytes()).unwrap_err();
    assert!(e.message.contains("cycle"), "{e}");
    assert!(
        e.message.contains("line 3") && e.message.contains("line 5"),
        "{e}"
    );
}

#[test]
fn one_line_form_with_semicolons() {
    // The example, written on one line with `;`.
    let text = "num_ranks 2\nrank 0 { l1: send 8b to 1 tag 0; }\n\
                rank 1 { l2: recv 8b from 0 tag 0; l3: calc 100; l3 requires l2; }\n";
    // The calc runs after the receive is handled: 134 + 100.
    assert_eq!(finish(&run(text, P)), vec![17, 234]);
}

#[test]
fn rank_blocks_in_any_order() {
    // The ping-pong with rank 1's block first: operations are renumbered
    // rank by rank, dependencies follow, and the times are the same.
    let text = "num_ranks 2\n\
                rank 1 {\nr: recv 8b from 0 tag 0\ns: send 8b to 0 tag 0\ns requires r\n}\n\
                rank 0 {\ns: send 8b to 1 tag 0\nr: recv 8b from 1 tag 0\nr requires s\n}\n";
    assert_eq!(finish(&run(text, P)), vec![268, 151]);
}

#[test]
fn many_sends_wait_their_turn() {
    // 40 sends issued together (past 16, so the issue order is the
    // reference's unstable sort, and all but one wait for the NIC): they
    // leave every g + 7·G = 34 ns, the last at 34·39 = 1326 (CPU to 1343),
    // and arrive every 34 ns; the receiver's NIC needs the same 34, so each
    // is handled on arrival, the last at 1326 + 110 + 24 = 1460.
    let sends = "send 8b to 1\n".repeat(40);
    let recvs = "recv 8b from 0\n".repeat(40);
    let text = format!("num_ranks 2\nrank 0 {{\n{sends}}}\nrank 1 {{\n{recvs}}}\n");
    let r = run(&text, P);
    assert_eq!(finish(&r), vec![1343, 1460]);
    assert_eq!(r.events, 120);
}

#[test]
fn time_is_split_into_compute_comm_and_wait() {
    // Rank 0 sends (CPU 17 of comm) then computes 40. Rank 1 waits for the
    // message (arrives at 110), handles it (24 of comm), computes 50.
    let text = "num_ranks 2\nrank 0 {\ns: send 8b to 1\nc: calc 40\nc requires s\n}\n\
                rank 1 {\nr: recv 8b from 0\nc: calc 50\nc requires r\n}\n";
    let r = run(text, P);
    let t: Vec<(u64, u64, u64, u64)> = r
        .ranks
        .iter()
        .map(|t| (t.finish, t.compute, t.comm, t.wait))
        .collect();
    assert_eq!(t, vec![(57, 40, 17, 0), (184, 50, 24, 110)]);
    assert_eq!(r.max, (184, 1));
}

#[test]
fn torus_adds_hops_and_shares_links() {
    use mttl_sim::{simulate_on, Torus};
    // A ring of 4, 10 ns per hop. Ranks 0 and 1 both send 8 bytes to rank
    // 2 at time 0 (o = 10: they enter the network at 10). Rank 0's message
    // takes links 0->1 and 1->2: enters them at 10 and 20 (each busy
    // 8·G = 16 ns), reaches rank 2 at 30: arrival 10 + L + 20 = 130.
    // Rank 1's message needs link 1->2, busy until 36: enters it then,
    // arrives 10 + L + 36 = 146. Rank 2 handles the first at 130 (CPU to
    // 154, NIC to 164), the second when its NIC is free: 164 + 24 = 188.
    let text = "num_ranks 4\nrank 0 {\nsend 8b to 2\n}\nrank 1 {\nsend 8b to 2\n}\n\
                rank 2 {\nrecv 8b from 0\nrecv 8b from 1\n}\nrank 3 {\n}\n";
    let sched = input::goal::parse("t.goal".as_ref(), text.as_bytes()).unwrap();
    let torus = Torus::new(vec![4], 10, 4).unwrap();
    let r = simulate_on(&sched, &P, Some(torus));
    assert_eq!(finish(&r), vec![17, 17, 188, 0]);
    // Without the torus both arrive at 110: handled at 110 and 144.
    assert_eq!(finish(&simulate(&sched, &P)), vec![17, 17, 168, 0]);
}

#[test]
fn an_unmatched_rendezvous_blocks_the_sender_and_its_dependents() {
    // 100 bytes > S = 64: the send waits for a matching receive, which
    // asks for another tag; the calc after the send can never start.
    let text = "num_ranks 2\nrank 0 {\ns: send 100b to 1 tag 1\nc: calc 5\nc requires s\n}\n\
                rank 1 {\nr: recv 100b from 0 tag 2\n}\n";
    let d = run(text, P).deadlock.expect("a deadlock");
    assert_eq!(
        d.ranks,
        vec![
            (0, vec![Blocked::NotDone(0), Blocked::NotDone(1)]),
            (
                1,
                vec![Blocked::UnmatchedRecv(2), Blocked::UnreceivedMessage(0)]
            ),
        ]
    );
}

#[test]
fn long_queues_match_in_order_with_wildcards() {
    // 100 messages of distinct tags, sent one after the other, reach rank 1
    // while its first receive waits for tag 99, so its unexpected queue
    // grows long enough to be indexed. It receives tag 99
    // first, then a wildcard (the earliest message left: tag 0), then the
    // others by tag; `extra` adds a receive for tag 0 that nothing matches.
    let schedule = |extra: bool| {
        let mut r0 = String::from("s0: send 8b to 1 tag 0\n");
        for tag in 1..100 {
            r0.push_str(&format!(
                "s{tag}: send 8b to 1 tag {tag}\ns{tag} requires s{}\n",
                tag - 1
            ));
        }
        let mut r1 = String::from("c: calc 10000\nf: recv 8b from 0 tag 99\nf requires c\n");
        r1.push_str("w: recv 8b from -1 tag -1\nw requires f\n");
        let mut prev = "w".to_string();
        for tag in 1..99 {
            r1.push_str(&format!(
                "t{tag}: recv 8b from 0 tag {tag}\nt{tag} requires {prev}\n"
            ));
            prev = format!("t{tag}");
        }
        if extra {
            r1.push_str(&format!("z: recv 8b from 0 tag 0\nz requires {prev}\n"));
        }
        format!("num_ranks 2\nrank 0 {{\n{r0}}}\nrank 1 {{\n{r1}}}\n")
    };
    let r = run(&schedule(false), P);
    assert!(r.deadlock.is_none(), "{:?}", r.deadlock);
    // The messages leave 34 ns apart (g + 7·G) and arrive from 110 on, but
    // rank 1's CPU computes until 10,000: from then on they are handled 34
    // ns apart (its NIC's gap; the CPU needs 24), piling up in the
    // unexpected queue as the receives wait for tag 99, the last:
    // 10,000 + 99·34 + 24.
    assert_eq!(r.ranks[1].finish, 13_390);
    let d = run(&schedule(true), P)
        .deadlock
        .expect("one receive too many");
    let z = 100 + 3 + 98;
    assert_eq!(d.ranks, vec![(1, vec![Blocked::UnmatchedRecv(z)])]);
}
