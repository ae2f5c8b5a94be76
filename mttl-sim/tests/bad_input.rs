//! Bad input is reported with file and line, and never panics.

use mttl_sim::{input, simulate, Params};

fn parse_err(text: &str) -> (u32, String) {
    match input::goal::parse("bad.goal".as_ref(), text.as_bytes()) {
        Ok(_) => panic!("accepted: {text:?}"),
        Err(e) => {
            assert_eq!(e.file, std::path::Path::new("bad.goal"));
            (e.line, e.message)
        }
    }
}

#[test]
fn malformed_lines_name_their_line() {
    let head = "num_ranks 2\nrank 0 {\n";
    let cases: &[(&str, u32, &str)] = &[
        // (statement on line 3 of rank 0, expected line, part of the message)
        ("send 8 to 1\n", 3, "expected `b`"),
        ("send 8b from 1\n", 3, "expected `to`"),
        ("recv 8b to 1\n", 3, "expected `from`"),
        ("send 8b to -1\n", 3, "expected a rank"),
        ("send 8b to 2\n", 3, "schedule has 2 ranks"),
        ("recv 8b from 7\n", 3, "schedule has 2 ranks"),
        ("send 8b to 1 tag\n", 3, "expected a tag"),
        ("send 8b to 1 nic 0 tag 1\n", 3, "in this order"),
        ("send 8b to 1 tag 99999999999\n", 3, "out of range"),
        ("send 8b to 1 cpu 300\n", 3, "out of range"),
        ("calc\n", 3, "expected a computation time"),
        ("calc 5 nic 1\n", 3, "expected `cpu`"),
        ("calc -5\n", 3, "negative"),
        ("a: jump 4\n", 3, "expected `send`, `recv` or `calc`"),
        ("a: calc 1\na: calc 2\n", 4, "already defined on line 3"),
        ("a requires b\n", 3, "not defined"),
        ("a: calc 1\na requires\n", 4, "expected a label"),
        (
            "a: calc 1\nb: calc 1\na requires b c\n",
            5,
            "end of the statement",
        ),
        ("send 8b to 1 $\n", 3, "unexpected `$`"),
        ("send 99999999999999999999b to 1\n", 3, "too large"),
        ("rank 1 {\n", 3, "inside another"),
        ("/* never closed\n", 3, "never closed"),
    ];
    for &(stmt, line, msg) in cases {
        let text = format!("{head}{stmt}}}\nrank 1 {{\n}}\n");
        let (l, m) = parse_err(&text);
        assert_eq!(l, line, "{stmt:?}: {m}");
        assert!(m.contains(msg), "{stmt:?}: {m:?} lacks {msg:?}");
    }
}

#[test]
fn structure_errors() {
    let cases: &[(&str, u32, &str)] = &[
        ("rank 0 {\n}\n", 1, "`num_ranks N` must come before"),
        ("num_ranks 0\n", 1, "at least one rank"),
        ("num_ranks 2\nnum_ranks 2\n", 2, "stated twice"),
        (
            "num_ranks 2\nrank 2 {\n}\n",
            2,
            "outside the schedule's 2 ranks",
        ),
        (
            "num_ranks 2\nrank 0 {\n}\nrank 0 {\n}\n",
            4,
            "already has a block (line 2)",
        ),
        (
            "num_ranks 3\nrank 0 {\n}\n",
            0,
            "2 of them have no block: 1, 2",
        ),
        ("num_ranks 1\nrank 0 {\ncalc 1\n", 4, "not closed"),
        ("num_ranks 1\n}\n", 2, "without an open rank block"),
        ("num_ranks 1\nsend 1b to 0\n", 2, "outside a rank block"),
        ("", 0, "no `num_ranks N`"),
        ("num_ranks 1\nrank 0 {\n}\n{\n", 4, "expected `num_ranks`"),
    ];
    for &(text, line, msg) in cases {
        let (l, m) = parse_err(text);
        assert_eq!(l, line, "{text:?}: {m}");
        assert!(m.contains(msg), "{text:?}: {m:?} lacks {msg:?}");
    }
}

#[test]
fn missing_file_is_an_error_not_a_panic() {
    let e = input::load("/nonexistent/mttl-sim.goal".as_ref()).unwrap_err();
    assert!(e
        .to_string()
        .contains("cannot read /nonexistent/mttl-sim.goal"));
}

/// Deterministic pseudo-random numbers, so failures reproduce.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn corrupted_schedules_never_panic() {
    let good = "num_ranks 3\n// a comment\nrank 0 {\nl1: send 8b to 1 tag 0\n\
                l2: recv 100000b from -1 tag -1 cpu 1 nic 1\nl3: calc 100\nl3 requires l1\n\
                l2 irequires l3\n}\nrank 1 {\nl1: recv 8b from 0 tag 0\n\
                l2: send 100000b to 0 tag 4\nl2 requires l1\n}\nrank 2 {\n/* empty */\n}\n";
    assert!(input::goal::parse("good.goal".as_ref(), good.as_bytes()).is_ok());
    let alphabet = b"0123456789-:;{}/*\n abrtsendcvlq\xff";
    let mut rng = Lcg(0x5eed);
    let (mut accepted, mut rejected) = (0, 0);
    for _ in 0..5000 {
        let mut text = good.as_bytes().to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(text.len());
            match rng.below(3) {
                0 => {
                    text.remove(at);
                }
                1 => text.insert(at, alphabet[rng.below(alphabet.len())]),
                _ => text[at] = alphabet[rng.below(alphabet.len())],
            }
        }
        match input::goal::parse("fuzz.goal".as_ref(), &text) {
            Ok(s) => {
                accepted += 1;
                // Whatever was accepted must simulate to an end, deadlocked or not.
                let r = simulate(&s, &Params::default());
                assert_eq!(r.ranks.len(), s.num_ranks());
            }
            Err(e) => {
                rejected += 1;
                assert!(!e.message.is_empty());
            }
        }
    }
    // Both outcomes occur, or the mutations test nothing.
    assert!(
        accepted > 100 && rejected > 100,
        "{accepted} accepted, {rejected} rejected"
    );
}
