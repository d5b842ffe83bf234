//! Weighing: when no marker, structured fact, exit code or server hint
//! decides, the words of the evidence are weighed, and a failure whose words
//! clearly favour `work` or `environmental` is given that class.
//!
//! The weights are a multinomial naive Bayes model that `build.rs` learns
//! from the project's labelled real failures, the dev corpus and the working
//! half (`tests/corpus/`), never from the held-back half, which measures
//! them (`docs/markers.md`). They are data compiled into the crate: the
//! words found in at least six labelled texts, each with its
//! log-probability in each class, to 1/32 of a natural log unit.
//!
//! Weighing only ever stops a failure: it answers `work` or
//! `environmental`, never `transient_transport` or `usage_limit`, and only
//! when that class leads the runner-up by [`MARGIN`] (a likelihood ratio of
//! e^0.5, about 1.6:1), or by [`SHORT_MARGIN`] (e^2, about 7:1) when the
//! weights know fewer than [`SHORT`] of its words. Otherwise the failure stays `indeterminate`: ambiguity
//! resolves toward not retrying, and a guess never makes a failure
//! retryable. The reasoning names the words that weighed most.

use crate::model::FailureClass;
use crate::words::{words, TAIL_BYTES};

mod trained {
    include!(concat!(env!("OUT_DIR"), "/weights.rs"));
}

/// The classes in the order of the weights' columns (as `build.rs` writes them).
const CLASSES: [FailureClass; 5] = [
    FailureClass::TransientTransport,
    FailureClass::Environmental,
    FailureClass::Work,
    FailureClass::UsageLimit,
    FailureClass::Indeterminate,
];

/// How far, in natural log units, the leading class must lead the runner-up.
/// Weighing only ever chooses between two stops, so a small lead suffices:
/// cross-validated on the training texts and measured on four batches'
/// working halves as the rules before each batch saw them, 0.5 was right on
/// more texts than 2 (`docs/markers.md`, "How the settings were chosen").
pub const MARGIN: f32 = 0.5;
/// A text with fewer known words than this is short: a lean of a few words
/// (`Error: undefined`, `something went wrong`) says nothing, so it must lead
/// by [`SHORT_MARGIN`]. Half the labelled texts hold 18 known words or more.
pub const SHORT: usize = 8;
/// The lead a short text needs.
pub const SHORT_MARGIN: f32 = 2.0;
/// How many of the words that weighed most the answer names.
const NAMED: usize = 3;

/// What the words of a failure weigh toward.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighing {
    pub class: FailureClass,
    /// The class that came second.
    pub runner_up: FailureClass,
    /// The lead over the runner-up, in natural log units.
    pub margin: f32,
    /// The words that favoured `class` over `runner_up` most, strongest first.
    pub words: Vec<String>,
}

/// How many labelled texts the weights were learned from, and how many words they know.
pub fn trained_on() -> (usize, usize) {
    (trained::WEIGH_TEXTS, known_words())
}

/// Weighs `texts` (the evidence's parts, read from the last one back, at
/// most [`TAIL_BYTES`] in all): the class their words lead toward, if it is
/// a stop and leads by [`MARGIN`] ([`SHORT_MARGIN`] on a short text).
pub fn weigh(texts: &[&str]) -> Option<Weighing> {
    let known: Vec<(String, usize)> =
        words(&last_bytes(texts)).into_iter().filter_map(|w| find(&w).map(|i| (w, i))).collect();
    let mut score = trained::WEIGH_PRIOR;
    for (_, i) in &known {
        for (s, l) in score.iter_mut().zip(log(*i)) {
            *s += l;
        }
    }
    let mut order: Vec<usize> = (0..CLASSES.len()).collect();
    order.sort_by(|&a, &b| score[b].total_cmp(&score[a]));
    let (best, second) = (order[0], order[1]);
    let margin = score[best] - score[second];
    let class = CLASSES[best];
    let needed = if known.len() < SHORT { SHORT_MARGIN } else { MARGIN };
    if !matches!(class, FailureClass::Work | FailureClass::Environmental) || margin < needed {
        return None;
    }
    let lead = |i: usize| log(i)[best] - log(i)[second];
    let mut named: Vec<&(String, usize)> = known.iter().filter(|(_, i)| lead(*i) > 0.0).collect();
    named.sort_by(|a, b| lead(b.1).total_cmp(&lead(a.1)).then_with(|| a.0.cmp(&b.0)));
    let words = named.into_iter().take(NAMED).map(|(w, _)| w.clone()).collect();
    Some(Weighing { class, runner_up: CLASSES[second], margin, words })
}

/// How many words the weights know.
fn known_words() -> usize {
    trained::WEIGH_ENDS.len()
}

/// Word `i` of the weights (sorted).
fn word(i: usize) -> &'static str {
    let start = if i == 0 { 0 } else { trained::WEIGH_ENDS[i - 1] as usize };
    &trained::WEIGH_TEXT[start..trained::WEIGH_ENDS[i] as usize]
}

/// The index of `w` among the weights' words.
fn find(w: &str) -> Option<usize> {
    let (mut lo, mut hi) = (0, known_words());
    while lo < hi {
        let mid = (lo + hi) / 2;
        match word(mid).cmp(w) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
}

/// The log-probabilities of word `i` in each class, in natural log units
/// (stored as steps below each class's largest, `build.rs`).
fn log(i: usize) -> [f32; 5] {
    std::array::from_fn(|k| trained::WEIGH_TOP[k] - trained::WEIGH_Q[i][k] as f32 / trained::WEIGH_STEPS)
}

/// The last [`TAIL_BYTES`] of the texts joined by newlines, without copying more.
fn last_bytes(texts: &[&str]) -> String {
    let mut taken: Vec<&str> = Vec::new();
    let mut left = TAIL_BYTES;
    for t in texts.iter().rev() {
        if left == 0 {
            break;
        }
        let part = crate::text::tail(t, left);
        left = left.saturating_sub(part.len() + 1);
        taken.push(part);
    }
    taken.reverse();
    taken.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weights_come_from_the_dev_corpus_and_the_working_half() {
        let lines = |s: &str| s.lines().filter(|l| !l.trim().is_empty()).count();
        let expected =
            lines(include_str!("../tests/corpus/dev.jsonl")) + lines(include_str!("../tests/corpus/working.jsonl"));
        assert_eq!(trained_on().0, expected);
        assert!(trained_on().1 > 500, "{:?}", trained_on());
        assert!((1..known_words()).all(|i| word(i - 1) < word(i)), "sorted for binary search");
        assert!((0..known_words()).all(|i| find(word(i)) == Some(i)));
        assert_eq!(find("zzzz-not-a-word"), None);
    }

    #[test]
    fn words_that_favour_a_stop_weigh_to_it_and_nothing_weighs_to_a_retry() {
        let w =
            weigh(&["error: expected `;`, found `}`\n  --> src/main.rs:4:5\naborting due to previous error"]).unwrap();
        assert_eq!(w.class, FailureClass::Work, "{w:?}");
        assert!(w.margin >= MARGIN && !w.words.is_empty(), "{w:?}");
        // Words of a network blip lead toward a retry, which weighing never gives.
        let blip = weigh(&["the connection was reset by the upstream server; timed out while waiting for a response"]);
        assert!(blip.as_ref().is_none_or(|w| w.class != FailureClass::TransientTransport), "{blip:?}");
        assert_eq!(weigh(&[""]), None);
    }

    #[test]
    fn only_the_last_bytes_are_read() {
        let long = format!("{}\n{}", "compile error undefined reference ".repeat(1000), "x".repeat(TAIL_BYTES));
        assert_eq!(last_bytes(&[&long]).len(), TAIL_BYTES);
        assert_eq!(last_bytes(&["ab", "cd"]), "ab\ncd");
        assert_eq!(weigh(&[&long]), None, "the words before the last {TAIL_BYTES} bytes are not read");
    }
}
