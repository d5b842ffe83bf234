//! The labelled real failures (`tests/corpus/`, format in its README) through
//! the classifier: each file's confusion matrix is printed, and
//!
//! - `dev.jsonl`, the set the first tables were written against: at least
//!   90 % agreement on its high-confidence rows;
//! - `working.jsonl`, the half of the collected texts that rules may be
//!   written from: at least 89 % of all rows;
//! - `held-back.jsonl`, the half no rule was written from: its figure is the
//!   honest estimate of what a user gets (docs/markers.md). It is held to a
//!   floor below today's figure, so that it cannot silently get worse;
//! - no row of the dev corpus whose expected class is `work` or
//!   `environmental` classified `transient_transport` (a false retry).
//!
//! The two halves are split by repository: a row belongs to the half that the
//! SHA-256 of its repository name says, and no repository is in both.
//!
//! A `usage_limit` answer counts as right where `environmental` is expected
//! for a usage or quota limit (the dev corpus has no usage-limit label).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use backstop::{classify, Evidence, FailureClass};
use serde_json::Value;

struct Row {
    id: String,
    source: String,
    evidence: String,
    exit_code: Option<i32>,
    expected: FailureClass,
    why: String,
    high: bool,
}

fn corpus_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("corpus").join(name)
}

fn load(name: &str) -> Vec<Row> {
    let path = corpus_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the real-failure corpus is required but could not be read at {} ({e}); \
             it ships with the repository (tests/corpus/README.md)",
            path.display()
        )
    });
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1));
        let s = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("{}:{}: no {k}", path.display(), n + 1)).to_string();
        let expected = FailureClass::parse(&s("expected"))
            .unwrap_or_else(|| panic!("{}:{}: unknown class", path.display(), n + 1));
        rows.push(Row {
            id: s("id"),
            source: s("source"),
            evidence: s("evidence"),
            exit_code: v["exit_code"].as_i64().map(|c| c as i32),
            expected,
            why: s("why"),
            high: v["confidence"].as_str() == Some("high"),
        });
    }
    rows
}

/// Whether `actual` counts as agreeing with the row's label.
fn agrees(row: &Row, actual: FailureClass) -> bool {
    if actual == row.expected {
        return true;
    }
    // The corpus labels usage and quota limits environmental; a separate
    // usage-limit class is right for them (README of the corpus).
    if row.expected == FailureClass::Environmental && actual == FailureClass::UsageLimit {
        let t = format!("{} {}", row.evidence, row.why).to_ascii_lowercase();
        return t.contains("limit") || t.contains("quota");
    }
    false
}

fn short(c: FailureClass) -> &'static str {
    match c {
        FailureClass::TransientTransport => "transient",
        FailureClass::Environmental => "environ.",
        FailureClass::Work => "work",
        FailureClass::UsageLimit => "usage_lim",
        FailureClass::Indeterminate => "indeterm.",
    }
}

/// What one corpus measured.
struct Report {
    rows: usize,
    all_ok: usize,
    high: usize,
    high_ok: usize,
    transient: usize,
    transient_ok: usize,
    false_retries: Vec<String>,
    /// The confusion matrix, the figures and the disagreements, for people.
    text: String,
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

const ORDER: [FailureClass; 5] = [
    FailureClass::TransientTransport,
    FailureClass::Environmental,
    FailureClass::UsageLimit,
    FailureClass::Work,
    FailureClass::Indeterminate,
];

fn matrix_text(matrix: &BTreeMap<(u8, u8), usize>) -> String {
    let cell = |e: FailureClass, a: FailureClass| matrix.get(&(e.precedence(), a.precedence())).copied().unwrap_or(0);
    let mut out = String::from("confusion matrix (rows: expected, columns: actual)\n");
    out.push_str(&format!("{:<11}", "expected"));
    for a in ORDER {
        out.push_str(&format!("{:>11}", short(a)));
    }
    out.push('\n');
    for e in ORDER.into_iter().filter(|&e| ORDER.iter().any(|&a| cell(e, a) > 0)) {
        out.push_str(&format!("{:<11}", short(e)));
        for a in ORDER {
            out.push_str(&format!("{:>11}", cell(e, a)));
        }
        out.push('\n');
    }
    out
}

/// Measures `rows`; `list_misses` prints each disagreement (never for the
/// held-back half, whose rows no rule may be written from).
fn measure(name: &str, rows: &[Row], list_misses: bool) -> Report {
    let mut matrix: BTreeMap<(u8, u8), usize> = BTreeMap::new();
    let mut r = Report {
        rows: rows.len(),
        all_ok: 0,
        high: 0,
        high_ok: 0,
        transient: 0,
        transient_ok: 0,
        false_retries: Vec::new(),
        text: String::new(),
    };
    let mut misses = Vec::new();
    for row in rows {
        let evidence = Evidence { text: Some(row.evidence.clone()), exit_code: row.exit_code, ..Evidence::default() };
        let c = classify(&evidence);
        *matrix.entry((row.expected.precedence(), c.class.precedence())).or_default() += 1;
        let ok = agrees(row, c.class);
        r.all_ok += ok as usize;
        r.high += row.high as usize;
        r.high_ok += (row.high && ok) as usize;
        if row.expected == FailureClass::TransientTransport {
            r.transient += 1;
            r.transient_ok += (c.class == FailureClass::TransientTransport) as usize;
        }
        let retry = c.class == FailureClass::TransientTransport;
        if retry && matches!(row.expected, FailureClass::Work | FailureClass::Environmental) {
            r.false_retries.push(format!("{} expected {} on {:?}", row.id, row.expected.as_str(), c.signal));
        }
        if !ok && list_misses {
            let conf = if row.high { "high" } else { "medium" };
            let (e, a) = (row.expected.as_str(), c.class.as_str());
            misses.push(format!("  {} [{conf}] expected {e} got {a} (signal {:?})\n", row.id, c.signal));
        }
    }
    r.text = format!(
        "\n== {name}\n{}all rows {}/{} ({:.1} %), high-confidence {}/{} ({:.1} %), transient recall {}/{} ({:.1} %), false retries {}\n{}",
        matrix_text(&matrix),
        r.all_ok,
        r.rows,
        pct(r.all_ok, r.rows),
        r.high_ok,
        r.high,
        pct(r.high_ok, r.high),
        r.transient_ok,
        r.transient,
        pct(r.transient_ok, r.transient),
        r.false_retries.len(),
        misses.concat()
    );
    println!("{}", r.text);
    r
}

#[test]
fn dev_corpus_meets_the_bar() {
    let rows = load("dev.jsonl");
    assert!(rows.len() >= 50, "the corpus has only {} rows", rows.len());
    let r = measure("dev.jsonl", &rows, true);
    assert!(r.false_retries.is_empty(), "false retries:\n{}", r.false_retries.join("\n"));
    assert!(r.high > 0, "no high-confidence rows");
    assert!(r.high_ok * 100 >= r.high * 90, "high-confidence agreement below 90 %{}", r.text);
}

#[test]
fn working_half_meets_the_bar() {
    let rows = load("working.jsonl");
    assert!(rows.len() >= 400, "{}", rows.len());
    let r = measure("working.jsonl (rules are written from this half)", &rows, true);
    // In-sample, a floor against regressions, not a goal: the sixth batch,
    // a representative sample, took it from 90.2 % to 89.5 %; the twelfth
    // (applications and agent runs) to 89.1 % and the thirteenth (another
    // representative sample) to 88.6 %, each after the rules written from
    // it (contested labels are left as labelled).
    assert!(r.all_ok * 100 >= r.rows * 88, "agreement below 88 %{}", r.text);
}

/// The held-back half: no rule was written from it. Its figures are the
/// honest estimate (docs/markers.md); the floors only keep it from getting
/// worse unnoticed: below today's agreement and at today's false retries.
#[test]
fn held_back_half_is_measured() {
    let rows = load("held-back.jsonl");
    assert!(rows.len() >= 400, "{}", rows.len());
    let r = measure("held-back.jsonl (never read to write a rule)", &rows, false);
    assert!(r.all_ok * 100 >= r.rows * 75, "agreement fell below 75 %{}", r.text);
    // 61 of the fourteen batches' 3064 rows. Of the first nine batches' 1964:
    // 34 of the first eight before the HTTP status family (docs/markers.md),
    // which read 9 more real transient failures right and 4 more 5xx that
    // the labels call stable; 2 of the ninth's (3 at its first look, before
    // any rule was written from it); 1 more when Zhipu's codes replaced its
    // Chinese messages as markers (bytes outside ASCII widened every state
    // of the automaton, 13 KB); 2 fewer after the rules written from the
    // tenth batch's working half. The tenth's own held-back half brought 4,
    // all of them there at its first look; the eleventh's 6 (8 at its first
    // look), one fewer of the earlier batches' after the twelfth's rules; the
    // twelfth's 4 and the thirteenth's 3, as at their first looks. The
    // fourteenth's working-half rules retried 3 more of the earlier rows;
    // Mocha's test timeout (a stop worded like axios's request timeout, one
    // of those rules) took back 2. The fourteenth's held-back half brought
    // 4, as at its first look. The transient markers written after it
    // from tools' documentation (network banners, pools, mirrors, an etcd
    // election, a zone out of resources) retried 1 more. The documented
    // markers since (docs/markers.md, "Since the fourteenth batch") took
    // back 9, and the steps after them 5 more: 47 of the fourteen batches'
    // 3064 rows. The fifteenth batch's held-back half brought 5, as at its
    // first look, the sixteenth's 2 and the seventeenth's 5, each as at
    // its first look: 59. The rules written from the seventeenth's working
    // half took back 1: 58. The eighteenth's held-back half brought 1, as at
    // its first look, and the nineteenth's 2, as at its first look: 61.
    // The twentieth's held-back half brought 3, as at its first look: 64.
    // The twenty-first's brought 2, as at its first look: 66. The
    // documented markers of the audits after it took back 3: 63. The
    // twenty-second's brought 2, as at its first look: 65. The
    // twenty-third's brought 3, as at its first look: 68. The
    // twenty-fourth's brought none, as at its first look: 68. The
    // twenty-fifth's brought 3, as at its first look: 71. The
    // twenty-sixth's brought 8, as at its first look: 79. The
    // twenty-seventh's brought 5, as at its first look: 84. The
    // twenty-eighth's brought 9, as at its first look: 93. The rules
    // written from its working half took back 3: 90. The twenty-ninth's
    // brought 1, as at its first look: 91.
    assert!(r.false_retries.len() <= 91, "more false retries than before:\n{}", r.false_retries.join("\n"));
}

/// The repository a row's thread belongs to: `owner/name` of `owner/name#N`,
/// or the address of a Q&A page.
fn repository(source: &str) -> String {
    source.split('#').next().unwrap_or(source).trim().to_ascii_lowercase()
}

#[test]
fn the_halves_are_split_by_repository() {
    use sha2::{Digest, Sha256};
    let half = |source: &str| Sha256::digest(repository(source).as_bytes())[0] % 2;
    let working = load("working.jsonl");
    let held = load("held-back.jsonl");
    let mut wrong: Vec<String> = working.iter().filter(|r| half(&r.source) != 0).map(|r| r.id.clone()).collect();
    wrong.extend(held.iter().filter(|r| half(&r.source) != 1).map(|r| r.id.clone()));
    assert!(wrong.is_empty(), "rows in the wrong half: {wrong:?}");
    let repos: std::collections::BTreeSet<String> = working.iter().map(|r| repository(&r.source)).collect();
    assert!(held.iter().all(|r| !repos.contains(&repository(&r.source))));
    // No collected text repeats one of the dev corpus.
    let dev = load("dev.jsonl");
    let dev_texts: std::collections::BTreeSet<&str> = dev.iter().map(|r| r.evidence.trim()).collect();
    assert!(working.iter().chain(&held).all(|r| !dev_texts.contains(r.evidence.trim())));
}

/// Every marker of the shipped tables decides at least one classify vector:
/// some case under `tests/vectors/classify-*.json` expects it as its `signal`
/// (text markers by their text; `code`, `http` and `exit` markers as
/// `error-type X` / `error-code X`, `http N`, `exit N`). The vector runner
/// checks that the classifier really answers that signal.
#[test]
fn every_marker_decides_a_vector() {
    use backstop::markers::{parse, MarkerMatch, MARKERS_JSONL};
    let markers = parse(MARKERS_JSONL).expect("shipped tables parse");
    let mut signals = std::collections::HashSet::new();
    // A neutral marker decides nothing: its vector holds it and stays indeterminate.
    let mut neutral_texts: Vec<String> = Vec::new();
    for (file, v) in common::vector_files() {
        if !(file.starts_with("classify-") && v["function"] == "classify") {
            continue;
        }
        for case in v["cases"].as_array().into_iter().flatten() {
            if let Some(s) = case["expected"]["signal"].as_str() {
                signals.insert(s.to_string());
            }
            if case["expected"]["class"] == "indeterminate" {
                if let Some(t) = case["input"]["text"].as_str() {
                    neutral_texts.push(t.to_ascii_lowercase());
                }
            }
        }
    }
    let missing: Vec<String> = markers
        .iter()
        .filter(|m| {
            let names = match m.kind {
                MarkerMatch::Code => vec![format!("error-type {}", m.marker), format!("error-code {}", m.marker)],
                MarkerMatch::Http => vec![format!("http {}", m.marker)],
                MarkerMatch::Exit => vec![format!("exit {}", m.marker)],
                _ => vec![m.marker.to_string()],
            };
            if m.class == FailureClass::Indeterminate {
                return !neutral_texts.iter().any(|t| t.contains(m.marker.as_ref()));
            }
            !names.iter().any(|n| signals.contains(n))
        })
        .map(|m| format!("{:?} ({:?})", m.marker, m.kind))
        .collect();
    assert!(missing.is_empty(), "{} markers decide no classify vector:\n{}", missing.len(), missing.join("\n"));
}
