//! The Rust host's side of `bench/hosts_paired.py`: times the typed 2 KiB
//! `classify` call through the component in batches on request, so that the
//! Python and JavaScript hosts' calls are timed in alternation with it.
//!
//! Usage: host_call EVIDENCE_JSON. Prints `ready`, then for each line `N` on
//! stdin runs N calls and prints the mean nanoseconds per call; stops at the
//! end of stdin.

use std::io::{BufRead, Write};

use backstop::model::{Evidence, FailureClass};
use backstop_host::Backstop;

fn main() {
    let path = std::env::args().nth(1).expect("usage: host_call EVIDENCE_JSON");
    let text = std::fs::read_to_string(&path).expect("read the evidence");
    let evidence: Evidence = serde_json::from_str(&text).expect("evidence JSON");
    let mut host = Backstop::new().expect("component compiles");
    let first = host.classify(&evidence).expect("classifies");
    assert_eq!(first.class, FailureClass::TransientTransport, "the benchmark evidence is the 529");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").and_then(|_| out.flush()).expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let n: u32 = line.expect("stdin").trim().parse().expect("a call count");
        let t = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(host.classify(std::hint::black_box(&evidence)).expect("classifies"));
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(n.max(1));
        writeln!(out, "{ns}").and_then(|_| out.flush()).expect("stdout");
    }
}
