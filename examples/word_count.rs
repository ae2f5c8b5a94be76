//! A distributed word count: every node generates its part of a text, counts
//! its words, and sends each count to the word's owner (the node its hash
//! picks), which merges the counts it receives into a table kept in a
//! `thread_local!`, this node's state. Node 0's main then gathers the
//! tables and checks them against the same text counted serially.
//!
//! It shows:
//!
//! - per-node state in `thread_local!` (each node is one OS thread, also
//!   with `MTTL_BACKEND=local`, where all nodes share one process; a
//!   `static` would be shared by all of them there);
//! - an exchange of variable-size, encoded data by [`mttl::ainvoke`] (one
//!   batch of `(word, count)` pairs per owner, all in flight at once, then
//!   waited for): the owner's remote function runs in a thread of its own
//!   and merges the batch;
//! - two SPMD phases run by node 0's main with [`mttl::spmd`]: the first
//!   returns only when every batch was merged (each task waits for its
//!   calls), so the second sees complete tables.
//!
//! ```text
//! cargo run --example word_count                        # one node
//! MTTL_NP=4 cargo run --release --example word_count    # four nodes on TCP
//! MTTL_NP=4 cargo run --example word_count 20000        # 20 000 words per node
//! ```
//!
//! It prints one line ending in `counts match: OK` when every check passed
//! (and panics, failing the job, otherwise).

use std::cell::RefCell;
use std::collections::HashMap;

/// Words each node generates, unless the first argument says otherwise.
const DEFAULT_WORDS: u64 = 200_000;
/// Distinct words the text is made of.
const VOCABULARY: u64 = 5_000;
/// Words per generated line.
const LINE: u64 = 12;

thread_local! {
    /// The counts of the words this node owns: per node, as each node is
    /// one OS thread.
    static COUNTS: RefCell<HashMap<String, u64>> = RefCell::new(HashMap::new());
}

/// A 64-bit mix (SplitMix64), enough for a made-up text.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Word number `w` of the vocabulary: letters from its number.
fn word(mut w: u64) -> String {
    let mut s = String::new();
    loop {
        s.push(char::from(b'a' + (w % 26) as u8));
        w /= 26;
        if w == 0 {
            return s;
        }
    }
}

/// The text of `rank`: `words` words in lines of `LINE`. Low word numbers
/// are far more frequent than high ones (the minimum of two draws), as in
/// real text.
fn text_of(rank: usize, words: u64) -> String {
    let mut text = String::new();
    for i in 0..words {
        let r = mix((rank as u64) << 40 | i);
        let w = (r % VOCABULARY).min((r >> 32) % VOCABULARY);
        text.push_str(&word(w));
        text.push(if i % LINE == LINE - 1 { '\n' } else { ' ' });
    }
    text
}

/// The node that owns `word` (FNV-1a, so every node agrees).
fn owner(word: &str, nodes: usize) -> usize {
    let hash = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % nodes as u64) as usize
}

/// Counts the words of `text`.
fn count(text: &str) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for w in text.split_whitespace() {
        *counts.entry(w.to_owned()).or_insert(0) += 1;
    }
    counts
}

/// Runs on a word's owner: merges a batch of counts into this node's table.
/// The borrow of the table ends before the function returns: nothing here
/// blocks, so no other thread of this node runs meanwhile.
#[mttl::remote]
fn merge(batch: Vec<(String, u64)>) {
    COUNTS.with(|table| {
        let mut table = table.borrow_mut();
        for (w, n) in batch {
            *table.entry(w).or_insert(0) += n;
        }
    });
}

/// Phase 1, on every node: count this node's text and send each owner its
/// batch; returns once every batch was merged.
#[mttl::remote]
fn count_and_send(words: u64) -> u64 {
    let nodes = mttl::size();
    let mut batches: Vec<Vec<(String, u64)>> = vec![Vec::new(); nodes];
    for (w, n) in count(&text_of(mttl::rank(), words)) {
        batches[owner(&w, nodes)].push((w, n));
    }
    let calls: Vec<_> = batches
        .into_iter()
        .enumerate()
        .map(|(node, batch)| mttl::ainvoke(node, merge, (batch,)))
        .collect();
    for call in calls {
        call.wait();
    }
    words
}

/// Phase 2, on every node: this node's table, emptied for a next run.
#[mttl::remote]
fn take_counts() -> Vec<(String, u64)> {
    COUNTS.with(|table| table.take().into_iter().collect())
}

#[mttl::main]
fn main() {
    let words: u64 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .unwrap_or_else(|_| panic!("the number of words must be a whole number, not {arg:?}")),
        None => DEFAULT_WORDS,
    };
    let nodes = mttl::size();
    let started = std::time::Instant::now();
    let generated: u64 = mttl::spmd(count_and_send, (words,)).into_iter().sum();
    let tables = mttl::spmd(take_counts, ());
    let elapsed = started.elapsed();

    let mut merged = HashMap::new();
    for (node, table) in tables.into_iter().enumerate() {
        for (w, n) in table {
            assert_eq!(owner(&w, nodes), node, "{w:?} was counted on rank {node}");
            assert!(merged.insert(w, n).is_none(), "a word has two owners");
        }
    }
    let total: u64 = merged.values().sum();
    assert_eq!(generated, words * nodes as u64);
    assert_eq!(
        total, generated,
        "{total} words counted, {generated} generated"
    );

    let mut serial: HashMap<String, u64> = HashMap::new();
    for rank in 0..nodes {
        for (w, n) in count(&text_of(rank, words)) {
            *serial.entry(w).or_insert(0) += n;
        }
    }
    assert!(
        merged == serial,
        "the merged counts differ from a serial count"
    );
    let top = merged
        .iter()
        .max_by_key(|&(w, &n)| (n, std::cmp::Reverse(w.clone())))
        .map(|(w, n)| format!("{w:?} x {n}"))
        .unwrap_or_default();
    println!(
        "word_count: {total} words, {} distinct (most frequent {top}), on {nodes} nodes in {:.3} s, counts match: OK",
        merged.len(),
        elapsed.as_secs_f64()
    );
}
