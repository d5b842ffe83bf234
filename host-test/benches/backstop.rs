//! What a decision costs, side by side, in one run (issue 7).
//!
//! - `classify/{native,component,naive}/{200B,2KiB,64KiB,1MiB}`: the core
//!   called in-process, the component through the wasmtime host
//!   (`backstop_host::Backstop`, deadline and memory limits on, as shipped), and a
//!   naive baseline that lowercases the text and searches for each marker
//!   separately (the seed's approach) over the same bytes the classifier reads
//!   (the last `scan_bytes` = 64 KiB). `classify/{native,naive}-full/1MiB`
//!   read all of the 1 MiB. `classify/bare-dfa/64KiB` is the limit the
//!   native classify is held to: aho-corasick's DFA (`AhoCorasickKind::DFA`)
//!   over the same literals the marker automaton holds, walking the same
//!   64 KiB (lower-cased beforehand) and nothing else.
//! - `markers/{single-pass,naive}/{1x,4x,16x}`: 64 KiB of evidence against the
//!   real table and tables of 4x and 16x as many markers (synthetic lines
//!   appended to the real ones, built with `Tables::build`; at most 60,000,
//!   what the automaton's 16-bit literal indexes hold).
//! - `next-action/{native,component}/{transport-retry,breaker-story,resume}`:
//!   states taken from the shared vectors.
//! - `start/*`: compiling the component, loading a precompiled artifact,
//!   instantiating from the `InstancePre`, a first call (2 KiB classify) on a
//!   fresh instance, to compare with the steady `classify/component/2KiB`, and
//!   the teardown of an instance.
//!
//! `scripts/bench` runs this with Python and JavaScript timings and prints the
//! ratios; run alone with `cargo bench -p backstop-host --bench backstop`.

use std::hint::black_box;
use std::time::Duration;

use backstop::classify::{classify_in, classify_with, Options};
use backstop::markers::{self, is_text, Tables, MARKERS_JSONL};
use backstop::model::{Classification, Evidence, FailureClass, State};
use backstop::text::tail;
use backstop_host::{Backstop, Limits, Origin, COMPONENT};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};

/// The deciding line every evidence text ends with (a real Anthropic overload).
const SIGNAL: &str =
    "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n";

/// Evidence sizes: name and bytes.
const SIZES: [(&str, usize); 4] = [("200B", 200), ("2KiB", 2 << 10), ("64KiB", 64 << 10), ("1MiB", 1 << 20)];

/// Log text of exactly `len` bytes: benign build and runner lines that no
/// marker matches, then the deciding line, so every marker is searched over
/// the whole text and the classification is a real one.
fn evidence_text(len: usize) -> String {
    let mut s = String::with_capacity(len + 128);
    let mut n = 0u32;
    while s.len() + SIGNAL.len() < len {
        let line = match n % 4 {
            0 => format!("   Compiling widget-{n} v0.{}.3 (/work/app/crates/widget-{n})\n", n % 17),
            1 => format!(
                "[2026-05-01T12:{:02}:{:02}Z] step build-{n}: wrote {} bytes to /tmp/out/obj{n}.o\n",
                n % 60,
                n % 59,
                4096 + n
            ),
            2 => format!(
                "    running {} checks in module app::store::case_{n}, seed {}\n",
                n % 40 + 1,
                n.wrapping_mul(2654435761)
            ),
            _ => format!(
                "  -> fetched https://example.org/pkg/{n}/archive.tar.gz ({} KiB) in {} ms\n",
                n % 900 + 10,
                n % 300 + 1
            ),
        };
        s.push_str(&line);
        n += 1;
    }
    let keep = len.saturating_sub(SIGNAL.len());
    s.truncate(keep);
    s.push_str(SIGNAL);
    assert_eq!(s.len(), len.max(SIGNAL.len()));
    s
}

/// The seed's matcher: ASCII-lowercase the text, then `find` each marker in
/// it, one search per marker; the strongest class wins, then the earliest hit,
/// then the longest marker. A `#` (digit run) marker is searched by its
/// longest literal piece. It is a cost baseline: without word boundaries and
/// digit runs its verdict can differ from the classifier's (on the benchmark
/// text it reads ` error` of `# error` inside `API Error: 529` and says work).
struct Naive {
    markers: Vec<(FailureClass, String)>,
}

fn strength(c: FailureClass) -> u8 {
    match c {
        FailureClass::Work => 0,
        FailureClass::Environmental => 1,
        FailureClass::UsageLimit => 2,
        FailureClass::TransientTransport => 3,
        FailureClass::Indeterminate => 4,
    }
}

impl Naive {
    fn new(t: &Tables) -> Naive {
        let markers = t
            .markers()
            .filter(|m| is_text(m.kind))
            .map(|m| {
                let piece = m.marker.split('#').max_by_key(|p| p.len()).unwrap_or("");
                (m.class, piece.to_string())
            })
            .collect();
        Naive { markers }
    }

    fn classify<'a>(&'a self, text: &str) -> Option<(FailureClass, &'a str)> {
        let hay = text.to_ascii_lowercase();
        type Rank = (u8, usize, std::cmp::Reverse<usize>);
        let mut best: Option<(Rank, FailureClass, &str)> = None;
        for (class, m) in &self.markers {
            if let Some(at) = hay.find(m.as_str()) {
                let key = (strength(*class), at, std::cmp::Reverse(m.len()));
                if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                    best = Some((key, *class, m.as_str()));
                }
            }
        }
        best.map(|(_, c, m)| (c, m))
    }
}

/// Synthetic marker lines: deterministic lower-case words no real text holds.
/// The first four letters of each come from the twelve commonest letters of
/// English, so their prefixes are met in the evidence and the walk stops on
/// them, and so 16x the real table stays within the automaton's 65,535
/// states (random letters gave a state or more per marker).
fn synthetic_markers(count: usize) -> String {
    const COMMON: &[u8; 12] = b"etaoinshrdlu";
    const CLASSES: [&str; 4] = ["transient_transport", "environmental", "work", "usage_limit"];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    for i in 0..count {
        let words = 2 + (next() % 2) as usize;
        let phrase: Vec<String> = (0..words)
            .map(|_| {
                let len = 4 + (next() % 5) as usize;
                (0..len)
                    .map(|k| {
                        if k < 4 {
                            COMMON[(next() % 12) as usize] as char
                        } else {
                            (b'a' + (next() % 26) as u8) as char
                        }
                    })
                    .collect()
            })
            .collect();
        out.push_str(&format!(
            "{{\"class\":\"{}\",\"marker\":\"{} {i}\",\"match\":\"word\",\"source\":\"synthetic (benchmark)\"}}\n",
            CLASSES[i % CLASSES.len()],
            phrase.join(" ")
        ));
    }
    out
}

/// The most markers a scaled table holds: the automaton indexes its
/// literals in 16 bits, so a table of more than 65,535 text markers does not
/// build; 16x the real table passed that at about 4,100 real markers.
const MAX_MARKERS: usize = 60_000;

/// How many markers the table scaled by `factor` holds: `factor` times the
/// real table's, at most [`MAX_MARKERS`].
fn markers_times(real: usize, factor: usize) -> usize {
    (real * factor).min(MAX_MARKERS.max(real))
}

/// The real table, or the real table plus synthetic markers up to `factor`
/// times as many ([`markers_times`]).
fn tables_times(factor: usize) -> Tables {
    let real = markers::parse(MARKERS_JSONL).expect("shipped markers parse");
    let total = markers_times(real.len(), factor);
    let source = format!("{MARKERS_JSONL}{}", synthetic_markers(total - real.len()));
    let all = markers::parse(&source).expect("synthetic markers parse");
    assert_eq!(all.len(), total);
    Tables::build(all, &source)
}

fn vector_case(file: &str, id: &str) -> serde_json::Value {
    let cases: serde_json::Value = serde_json::from_str(file).expect("vector file parses");
    cases["cases"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("vector case {id} not found"))
        .clone()
}

/// The three next-action states: a transport retry, the last step of a breaker
/// story (a work failure with its history of earlier events), a resume decision.
fn states() -> Vec<(&'static str, State)> {
    let transport = vector_case(include_str!("../../tests/vectors/next-action-transport.json"), "retry-second-529");
    let story = vector_case(include_str!("../../tests/vectors/story-breaker.json"), "story-breaker-manual-unblock");
    let resume =
        vector_case(include_str!("../../tests/vectors/next-action-resume.json"), "resume-usage-unified-header");
    let last_step = story["steps"].as_array().and_then(|s| s.last()).expect("story has steps")["input"].clone();
    vec![
        ("transport-retry", serde_json::from_value(transport["input"].clone()).expect("state")),
        ("breaker-story", serde_json::from_value(last_step).expect("state")),
        ("resume", serde_json::from_value(resume["input"].clone()).expect("state")),
    ]
}

/// aho-corasick's DFA over the literals the marker automaton holds (the
/// anchor of each text marker), with no prefilter: one table walk per byte.
fn bare_dfa() -> aho_corasick::AhoCorasick {
    let literals: Vec<String> = markers::tables()
        .markers()
        .filter(|m| is_text(m.kind))
        .map(|m| backstop::automaton::anchor(&m.marker).1.to_string())
        .collect();
    aho_corasick::AhoCorasick::builder()
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .prefilter(false)
        .build(&literals)
        .expect("the bare DFA builds")
}

fn expect_transient(c: &Classification) {
    assert_eq!(c.class, FailureClass::TransientTransport, "benchmark evidence must classify as the 529: {c:?}");
}

fn classify_sizes(c: &mut Criterion) {
    let opts = Options::default();
    let full = Options { scan_bytes: 2 << 20, ..Options::default() };
    let real = backstop::markers::tables();
    let naive = Naive::new(real);
    let mut host = Backstop::new().expect("component compiles");
    let mut g = c.benchmark_group("classify");
    for (name, len) in SIZES {
        let ev = Evidence::from_text(evidence_text(len));
        let text = ev.text.as_deref().unwrap();
        // Every path decides the same before it is timed.
        expect_transient(&classify_with(&ev, &opts));
        expect_transient(&host.classify(&ev).expect("component classifies"));
        assert!(naive.classify(tail(text, opts.scan_bytes)).is_some(), "naive at {name} finds the signal line");
        assert!(real.scan(text).len() <= real.scan(SIGNAL).len(), "filler text must hold no marker");

        g.bench_with_input(BenchmarkId::new("native", name), &ev, |b, ev| {
            b.iter(|| classify_with(black_box(ev), &opts))
        });
        g.bench_with_input(BenchmarkId::new("component", name), &ev, |b, ev| {
            b.iter(|| host.classify(black_box(ev)).expect("component classifies"))
        });
        if name == "64KiB" {
            // The same call with fuel metering on (an exact budget, on request), to show its cost.
            let mut metered = Backstop::from_bytes(
                COMPONENT,
                backstop_host::Limits { fuel: Some(10_000_000_000), ..Default::default() },
            )
            .expect("component compiles");
            expect_transient(&metered.classify(&ev).expect("component classifies"));
            g.bench_with_input(BenchmarkId::new("component-metered", name), &ev, |b, ev| {
                b.iter(|| metered.classify(black_box(ev)).expect("component classifies"))
            });
        }
        g.bench_with_input(BenchmarkId::new("naive", name), &ev, |b, ev| {
            b.iter(|| naive.classify(tail(black_box(ev).text.as_deref().unwrap(), opts.scan_bytes)))
        });
        if name == "2KiB" {
            // The JSON function the Python and JavaScript hosts call, from the Rust host.
            let json = serde_json::to_string(&ev).expect("evidence as JSON");
            let typed = host.classify(&ev).expect("component classifies");
            let answer: Classification =
                serde_json::from_str(&host.classify_json(&json).expect("no trap").expect("classifies")).expect("JSON");
            assert_eq!(answer, typed, "the JSON function answers as the typed one");
            g.bench_with_input(BenchmarkId::new("component-json", name), &json, |b, json| {
                b.iter(|| host.classify_json(black_box(json)).expect("no trap").expect("classifies"))
            });
        }
        if name == "64KiB" {
            let dfa = bare_dfa();
            let lowered = text.to_ascii_lowercase();
            assert_eq!(
                dfa.find_overlapping_iter(&lowered).count(),
                dfa.find_overlapping_iter(SIGNAL.to_ascii_lowercase().as_str()).count()
            );
            g.bench_with_input(BenchmarkId::new("bare-dfa", name), &lowered, |b, t| {
                b.iter(|| dfa.find_overlapping_iter(black_box(t.as_str())).count())
            });
        }
        if len > opts.scan_bytes {
            expect_transient(&classify_with(&ev, &full));
            g.bench_with_input(BenchmarkId::new("native-full", name), &ev, |b, ev| {
                b.iter(|| classify_with(black_box(ev), &full))
            });
            g.bench_with_input(BenchmarkId::new("naive-full", name), &ev, |b, ev| {
                b.iter(|| naive.classify(black_box(ev).text.as_deref().unwrap()))
            });
        }
    }
    g.finish();
}

fn marker_counts(c: &mut Criterion) {
    let opts = Options::default();
    let ev = Evidence::from_text(evidence_text(64 << 10));
    let mut g = c.benchmark_group("markers");
    for factor in [1usize, 4, 16] {
        let t = tables_times(factor);
        let naive = Naive::new(&t);
        let name = format!("{factor}x");
        expect_transient(&classify_in(&t, None, &ev, &opts));
        assert!(naive.classify(ev.text.as_deref().unwrap()).is_some());
        g.bench_with_input(BenchmarkId::new("single-pass", &name), &ev, |b, ev| {
            b.iter(|| classify_in(&t, None, black_box(ev), &opts))
        });
        g.bench_with_input(BenchmarkId::new("naive", &name), &ev, |b, ev| {
            b.iter(|| naive.classify(black_box(ev).text.as_deref().unwrap()))
        });
    }
    g.finish();
}

fn next_actions(c: &mut Criterion) {
    let mut host = Backstop::new().expect("component compiles");
    let mut g = c.benchmark_group("next-action");
    for (name, state) in states() {
        let native = backstop::next_action(&state).expect("vector state is valid");
        let through = host.next_action(&state).expect("component runs").expect("vector state is valid");
        assert_eq!(native, through, "{name}: the component decides as the core does");
        g.bench_with_input(BenchmarkId::new("native", name), &state, |b, s| {
            b.iter(|| backstop::next_action(black_box(s)))
        });
        g.bench_with_input(BenchmarkId::new("component", name), &state, |b, s| {
            b.iter(|| host.next_action(black_box(s)).expect("component runs"))
        });
    }
    g.finish();
}

fn host_start(c: &mut Criterion) {
    let limits = Limits::default();
    let ev = Evidence::from_text(evidence_text(2 << 10));
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, origin) = Backstop::cached(dir.path(), limits).expect("component compiles and is cached");
    assert_eq!(origin, Origin::Compiled);
    let (_, origin) = Backstop::cached(dir.path(), limits).expect("precompiled component loads");
    assert_eq!(origin, Origin::Precompiled, "the artifact written above loads");

    let mut g = c.benchmark_group("start");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function("compile", |b| b.iter(|| Backstop::from_bytes(black_box(COMPONENT), limits).expect("compiles")));
    g.bench_function("load-precompiled", |b| {
        b.iter(|| {
            let (bs, origin) = Backstop::cached(dir.path(), limits).expect("loads");
            debug_assert_eq!(origin, Origin::Precompiled);
            bs
        })
    });
    // What a first call would pay for without the build-time tables, measured
    // natively: parsing the marker lines and building the tables at run time.
    g.bench_function("native-tables-build", |b| {
        b.iter(|| Tables::build(markers::parse(black_box(MARKERS_JSONL)).expect("parse"), MARKERS_JSONL))
    });
    let mut host = Backstop::new().expect("component compiles");
    // Instantiation alone: each instance is torn down outside the timing,
    // before the next (the pool holds few).
    g.bench_function("instantiate-pre", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let t = std::time::Instant::now();
                let instance = black_box(host.fresh_instance().expect("instantiates"));
                spent += t.elapsed();
                drop(instance);
            }
            spent
        })
    });
    // `set_limits` drops the live instance: the next call instantiates a fresh
    // one from the InstancePre and makes the first call on it. Timed: the
    // instantiation and the first call; the teardown of the instance before
    // is timed on its own.
    g.bench_function("fresh-instance-first-call", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                host.set_limits(limits).expect("same metering");
                let t = std::time::Instant::now();
                black_box(host.classify(black_box(&ev)).expect("classifies"));
                spent += t.elapsed();
            }
            spent
        })
    });
    g.bench_function("teardown", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                host.classify(&ev).expect("classifies");
                let t = std::time::Instant::now();
                host.set_limits(limits).expect("same metering");
                spent += t.elapsed();
            }
            spent
        })
    });
    g.finish();
}

/// Rounds of the paired measurement, and calls of each kind per round.
const PAIRED_ROUNDS: usize = 21;
const PAIRED_CALLS: usize = 64;
/// Rounds run before the kept ones, to warm every path.
const WARM_ROUNDS: usize = 3;

/// The median, first and third quartile of `v`.
fn quartiles(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    let at = |q: usize| v[(v.len() - 1) * q / 4];
    serde_json::json!({ "median": at(2), "p25": at(1), "p75": at(3), "rounds": v.len() })
}

/// Ratios at 64 KiB measured in alternation: each round times a batch of
/// one path, then a batch of the other, on the same evidence, and keeps the
/// ratio of the two; the report takes the median round. On a shared machine
/// the speed drifts by more than the gap being measured between criterion's
/// rows, which run seconds apart; a round's two batches run within a few
/// milliseconds of each other, so the drift cancels in their ratio.
fn paired(_: &mut Criterion) {
    let Some(dir) = std::env::var_os("BACKSTOP_BENCH_OUT") else { return };
    let opts = Options::default();
    let ev = Evidence::from_text(evidence_text(64 << 10));
    let mut host = Backstop::new().expect("component compiles");
    expect_transient(&host.classify(&ev).expect("component classifies"));
    let dfa = bare_dfa();
    let lowered = ev.text.as_deref().unwrap().to_ascii_lowercase();
    let batch = |f: &mut dyn FnMut()| {
        let t = std::time::Instant::now();
        for _ in 0..PAIRED_CALLS {
            f();
        }
        t.elapsed().as_secs_f64()
    };
    let mut native = || {
        black_box(classify_with(black_box(&ev), &opts));
    };
    let mut component = || {
        black_box(host.classify(black_box(&ev)).expect("classifies"));
    };
    let mut scan = || {
        black_box(dfa.find_overlapping_iter(black_box(lowered.as_str())).count());
    };
    // A fresh instance's first 2 KiB call beside a steady one, on a second
    // host: `set_limits` drops its instance (untimed), and the next call
    // instantiates a fresh one and makes its first call.
    let small = Evidence::from_text(evidence_text(2 << 10));
    let mut starts = Backstop::new().expect("component compiles");
    let limits = starts.limits();
    let mut fresh_first = |steady: bool| {
        let mut spent = 0.0;
        for _ in 0..PAIRED_CALLS {
            if !steady {
                starts.set_limits(limits).expect("same metering");
            }
            let t = std::time::Instant::now();
            black_box(starts.classify(black_box(&small)).expect("classifies"));
            spent += t.elapsed().as_secs_f64();
        }
        spent
    };
    let (mut component_native, mut native_dfa, mut first_steady) = (Vec::new(), Vec::new(), Vec::new());
    // The first rounds warm every path and are not kept.
    for round in 0..WARM_ROUNDS + PAIRED_ROUNDS {
        let (n, c, d) = (batch(&mut native), batch(&mut component), batch(&mut scan));
        let (f, s) = (fresh_first(false), fresh_first(true));
        if round >= WARM_ROUNDS {
            component_native.push(c / n);
            native_dfa.push(n / d);
            first_steady.push(f / s);
        }
    }
    let out = serde_json::json!({
        "calls_per_batch": PAIRED_CALLS,
        "component_native_64k": quartiles(component_native),
        "native_dfa_64k": quartiles(native_dfa),
        "first_steady_2k": quartiles(first_steady),
    });
    let path = std::path::PathBuf::from(dir).join("paired.json");
    std::fs::write(path, serde_json::to_string_pretty(&out).unwrap()).expect("write paired ratios");
}

/// Facts the report prints beside the timings.
fn write_meta() {
    let Some(dir) = std::env::var_os("BACKSTOP_BENCH_OUT") else { return };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, COMPONENT).expect("gzip");
    let gz_len = gz.finish().expect("gzip").len();
    let real = markers::parse(MARKERS_JSONL).expect("markers parse");
    let text_markers = real.iter().filter(|m| is_text(m.kind)).count();
    let meta = serde_json::json!({
        "component_bytes": COMPONENT.len(),
        "component_gzip_bytes": gz_len,
        "markers": real.len(),
        "markers_at": { "1": markers_times(real.len(), 1), "4": markers_times(real.len(), 4), "16": markers_times(real.len(), 16) },
        "text_markers": text_markers,
        "wasmtime": backstop_host::wasmtime_version(),
        "scan_bytes": Options::default().scan_bytes,
    });
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("bench output dir");
    std::fs::write(dir.join("rust-meta.json"), serde_json::to_string_pretty(&meta).unwrap()).expect("write meta");
    // The 2 KiB evidence, for the Python and JavaScript timings (same text).
    let ev = serde_json::json!({ "text": evidence_text(2 << 10) });
    std::fs::write(dir.join("evidence-2KiB.json"), ev.to_string()).expect("write evidence");
}

fn config() -> Criterion {
    write_meta();
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(400))
        .measurement_time(Duration::from_millis(1200))
        .without_plots()
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = paired, classify_sizes, marker_counts, next_actions, host_start
}
criterion_main!(benches);
