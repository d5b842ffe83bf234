//! `classify`: a pure function from failure evidence to a class, the deciding
//! signal and a reasoning.
//!
//! Order of reading:
//! 1. Text markers in every text field of the failed steps (error, output,
//!    stdout, stderr), then the run status, the runner's stderr and the free
//!    text. Each field is scanned separately, from its last `scan-bytes` bytes;
//!    a marker found inside a longer marker's match is dropped (the longer one
//!    reads the same words more specifically, see `markers::Tables::scan`).
//! 2. Structured facts: the error type and code; a retryable HTTP status only
//!    when no type or code is known to the tables (a 429 covers both a rate
//!    limit and a spent quota; the code tells them apart). A status that is
//!    never retried (401, 403, 413) always counts, so a transient code beside
//!    it cannot make it a retry.
//! 3. The strongest class wins: work > environmental > usage-limit >
//!    transient-transport. Within a class a structured fact is reported before
//!    a marker, and among markers the earliest, then the longest.
//! 4. Weak markers decide only when nothing else does.
//! 5. Exit codes and signals count only when the text and facts say nothing.

use crate::markers::{tables, Hit, MarkerMatch, Tables};
use crate::model::*;
use crate::reset;

/// At most this many steps and headers are read; the rest are ignored.
pub const MAX_STEPS: usize = 1024;
pub const MAX_HEADERS: usize = 256;
/// A step id is cut to this many bytes in the record.
pub const MAX_STEP_ID: usize = 256;
/// The line of the deciding signal kept in front of a cut echo, at most.
const SIGNAL_LINE_MAX: usize = 240;
const ELIDED: &str = "…(earlier evidence elided)…\n";

const COMPLETED: [&str; 6] = ["success", "succeeded", "completed", "ok", "passed", "skipped"];

/// Options of classification that come from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub scan_bytes: usize,
    pub echo_bytes: usize,
    pub retry_bare_signals: bool,
}

impl Default for Options {
    fn default() -> Self {
        let e = EvidenceConfig::default();
        Options { scan_bytes: e.scan_bytes as usize, echo_bytes: e.echo_bytes as usize, retry_bare_signals: false }
    }
}

impl Options {
    pub fn from_config(c: &Config) -> Options {
        Options {
            scan_bytes: c.evidence.scan_bytes as usize,
            echo_bytes: c.evidence.echo_bytes as usize,
            retry_bare_signals: c.transport.retry_bare_signals,
        }
    }
}

/// The tail of `s` of at most `max` bytes, cut at a character boundary.
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The head of `s` of at most `max` bytes, cut at a character boundary.
pub fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A piece of text the classifier reads, with the label it carries in the echo.
struct Part<'a> {
    label: String,
    text: &'a str,
}

fn is_completed(status: &str) -> bool {
    let s = status.trim();
    COMPLETED.iter().any(|c| s.eq_ignore_ascii_case(c))
}

/// A candidate decision: a class and the signal that backs it.
#[derive(Debug, Clone)]
struct Candidate {
    class: FailureClass,
    signal: String,
    source: SignalSource,
    /// The part and line the signal was found in (markers only).
    line: Option<String>,
    weak: bool,
    generic: bool,
    /// Sort key within a class: structured facts first, then position, then length.
    rank: (u8, usize, usize, std::cmp::Reverse<usize>),
}

pub fn classify(evidence: &Evidence) -> Classification {
    classify_with(evidence, &Options::default())
}

pub fn classify_with(evidence: &Evidence, opts: &Options) -> Classification {
    classify_in(tables(), evidence, opts)
}

pub fn classify_in(t: &Tables, evidence: &Evidence, opts: &Options) -> Classification {
    let mut failed_steps = Vec::new();
    let mut completed_steps = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    let mut exit_codes: Vec<i32> = Vec::new();
    let mut signals: Vec<String> = Vec::new();

    for step in evidence.steps.iter().take(MAX_STEPS) {
        let id = head(&step.id, MAX_STEP_ID).to_string();
        if is_completed(&step.status) {
            completed_steps.push(id);
            continue;
        }
        for text in [&step.error, &step.output, &step.stdout, &step.stderr].into_iter().flatten() {
            let text = tail(text, opts.scan_bytes);
            if !text.trim().is_empty() {
                parts.push(Part { label: format!("[{id}] "), text });
            }
        }
        exit_codes.extend(step.exit_code);
        signals.extend(step.signal.iter().filter(|s| !s.trim().is_empty()).map(|s| head(s.trim(), 64).to_string()));
        failed_steps.push(id);
    }
    if let Some(s) = evidence.run_status.as_deref().filter(|s| !s.trim().is_empty()) {
        parts.push(Part { label: "[run status] ".into(), text: tail(s, opts.scan_bytes) });
    }
    if let Some(s) = evidence.runner_stderr.as_deref().filter(|s| !s.trim().is_empty()) {
        parts.push(Part { label: "[runner stderr] ".into(), text: tail(s, opts.scan_bytes) });
    }
    if let Some(s) = evidence.text.as_deref().filter(|s| !s.trim().is_empty()) {
        parts.push(Part { label: String::new(), text: tail(s, opts.scan_bytes) });
    }
    exit_codes.extend(evidence.exit_code);
    signals.extend(evidence.signal.iter().filter(|s| !s.trim().is_empty()).map(|s| head(s.trim(), 64).to_string()));

    let mut candidates: Vec<Candidate> = Vec::new();
    let mut offset = 0usize;
    for part in &parts {
        let hits: Vec<Hit> = t.scan(part.text);
        for h in hits {
            let m = &t.markers[h.marker];
            candidates.push(Candidate {
                class: m.class,
                signal: m.marker.clone(),
                source: SignalSource::Marker,
                line: Some(line_at(part, h.start)),
                weak: m.weak,
                generic: m.generic,
                rank: (2, offset + h.start, 0, std::cmp::Reverse(m.marker.len())),
            });
        }
        offset += part.text.len() + 1;
    }

    // Structured facts: a known error type or code decides before a bare status.
    let mut code_known = false;
    for (field, value) in [("error-type", &evidence.error_type), ("error-code", &evidence.error_code)] {
        if let Some(v) = value.as_deref() {
            if let Some(i) = t.lookup(MarkerMatch::Code, v) {
                code_known = true;
                let m = &t.markers[i];
                candidates.push(Candidate {
                    class: m.class,
                    signal: format!("{field} {}", m.marker),
                    source: SignalSource::ErrorCode,
                    line: None,
                    weak: m.weak,
                    generic: m.generic,
                    rank: (0, 0, 0, std::cmp::Reverse(0)),
                });
            }
        }
    }
    if let Some(status) = evidence.http_status {
        if let Some(i) = t.lookup(MarkerMatch::Http, &status.to_string()) {
            let m = &t.markers[i];
            // A known code refines a retryable status (a 429 is a rate limit or
            // a spent quota), but a status that is never retried (401, 403,
            // 413) stays a candidate: a transient code beside it must not make
            // it a retry.
            if !code_known || m.class != FailureClass::TransientTransport {
                candidates.push(Candidate {
                    class: m.class,
                    signal: format!("http {status}"),
                    source: SignalSource::HttpStatus,
                    line: None,
                    weak: m.weak,
                    generic: m.generic,
                    rank: (1, 0, 0, std::cmp::Reverse(0)),
                });
            }
        }
    }

    let strong: Vec<&Candidate> = candidates.iter().filter(|c| !c.weak).collect();
    let pool: Vec<&Candidate> = if strong.is_empty() { candidates.iter().collect() } else { strong };
    let key = |c: &&&Candidate| (c.class.precedence(), c.rank);
    let specific = pool.iter().filter(|c| !c.generic).min_by_key(key);
    let generic = pool.iter().filter(|c| c.generic).min_by_key(key);
    // A generic stop marker never overrules a specific work or environmental
    // stop, but outranks a retry and a usage-limit wait (which a server hint
    // could turn into a retry).
    let overrulable = |c: FailureClass| c.precedence() > FailureClass::Environmental.precedence();
    let best = match (specific, generic) {
        (Some(s), Some(g)) if overrulable(s.class) && g.class.precedence() < s.class.precedence() => Some(g),
        (Some(s), _) => Some(s),
        (None, g) => g,
    }
    .map(|c| (*c).clone());

    let best = best.or_else(|| exit_or_signal(t, &exit_codes, &signals, opts));

    let echo = echo(&parts, opts.echo_bytes, best.as_ref().and_then(|c| c.line.as_deref()));
    let all_text: Vec<&str> = parts.iter().map(|p| p.text).collect();

    match best {
        Some(c) => {
            let reset = if c.class == FailureClass::UsageLimit {
                reset::find_reset(&all_text)
            } else {
                reset::Reset::default()
            };
            let reset_hint = reset.hint;
            let reasoning = reasoning(c.class, Some(&c.signal), reset_hint.as_deref());
            Classification {
                class: c.class,
                signal: Some(c.signal),
                source: c.source,
                reasoning,
                retryable: c.class.is_retryable(),
                failed_steps,
                completed_steps,
                evidence: echo,
                reset_hint,
                reset_at: reset.at,
                reset_after: reset.after,
            }
        }
        None => {
            let mut reasoning = reasoning(FailureClass::Indeterminate, None, None);
            if let Some(code) = exit_codes.iter().find(|&&c| c >= 128) {
                reasoning.push_str(&format!(
                    "; exit {code} (a death by signal) is not evidence of a transient fault by itself: it is as often the OOM killer, which a retry on the same host meets again"
                ));
            } else if let Some(sig) = signals.first() {
                reasoning.push_str(&format!(
                    "; signal {sig} is not evidence of a transient fault by itself: it is as often the OOM killer, which a retry on the same host meets again"
                ));
            }
            Classification {
                class: FailureClass::Indeterminate,
                signal: None,
                source: SignalSource::None,
                reasoning,
                retryable: false,
                failed_steps,
                completed_steps,
                evidence: echo,
                reset_hint: None,
                reset_at: None,
                reset_after: None,
            }
        }
    }
}

fn exit_or_signal(t: &Tables, exit_codes: &[i32], signals: &[String], opts: &Options) -> Option<Candidate> {
    for code in exit_codes {
        if let Some(i) = t.lookup(MarkerMatch::Exit, &code.to_string()) {
            let m = &t.markers[i];
            return Some(Candidate {
                class: m.class,
                signal: format!("exit {code}"),
                source: SignalSource::ExitCode,
                line: None,
                weak: false,
                generic: false,
                rank: (3, 0, 0, std::cmp::Reverse(0)),
            });
        }
    }
    if opts.retry_bare_signals {
        if let Some(code) = exit_codes.iter().find(|&&c| c >= 128) {
            return Some(Candidate {
                class: FailureClass::TransientTransport,
                signal: format!("exit {code}"),
                source: SignalSource::ExitCode,
                line: None,
                weak: false,
                generic: false,
                rank: (3, 0, 0, std::cmp::Reverse(0)),
            });
        }
        if let Some(sig) = signals.first() {
            return Some(Candidate {
                class: FailureClass::TransientTransport,
                signal: format!("signal {sig}"),
                source: SignalSource::Signal,
                line: None,
                weak: false,
                generic: false,
                rank: (3, 0, 0, std::cmp::Reverse(0)),
            });
        }
    }
    None
}

/// The line of `part` around byte `at`, labelled, at most `SIGNAL_LINE_MAX` bytes.
fn line_at(part: &Part, at: usize) -> String {
    let text = part.text;
    let start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[at..].find('\n').map(|i| at + i).unwrap_or(text.len());
    let line = text[start..end].trim_end_matches('\r');
    format!("{}{}", part.label, head(line, SIGNAL_LINE_MAX))
}

/// The echoed evidence: labelled parts joined by newlines, cut to `max` bytes
/// from the end; when cut, the deciding signal's line is kept in front.
fn echo(parts: &[Part], max: usize, signal_line: Option<&str>) -> String {
    let mut all = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            all.push('\n');
        }
        // Never copy more than the echo can hold from any one part.
        all.push_str(&p.label);
        all.push_str(tail(p.text, max.saturating_add(1)));
    }
    if all.len() <= max {
        return all;
    }
    let kept = tail(&all, max);
    match signal_line {
        Some(line) if !kept.contains(line) => format!("{line}\n{ELIDED}{kept}"),
        _ => format!("{ELIDED}{kept}"),
    }
}

/// The reasoning sentence for a class and signal.
pub fn reasoning(class: FailureClass, signal: Option<&str>, reset_hint: Option<&str>) -> String {
    match (class, signal) {
        (FailureClass::UsageLimit, Some(s)) => {
            let when = reset_hint.map(|h| format!("; it resets {h}")).unwrap_or_default();
            format!(
                "classified `usage_limit` — evidence contains {s:?}{when}. This is temporary and not a work failure, but it is not retried inside the transport budget: a usage limit outlasts it. Wait for the reset and resume."
            )
        }
        (c, Some(s)) => format!("classified `{}` — evidence contains {s:?}", c.as_str()),
        (c, None) => format!(
            "classified `{}` — no transport, environmental, usage-limit or work marker found in the failure evidence",
            c.as_str()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of(text: &str) -> (FailureClass, Option<String>) {
        let c = classify(&Evidence::from_text(text));
        (c.class, c.signal)
    }

    #[test]
    fn seed_529_is_transient() {
        let (c, s) = class_of(
            "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
        );
        assert_eq!(c, FailureClass::TransientTransport);
        assert_eq!(s.as_deref(), Some("api error: 529"));
    }

    #[test]
    fn work_beats_transient() {
        let (c, s) = class_of("API Error: 529 Overloaded\nlater: test result: FAILED. 1 failed");
        assert_eq!(c, FailureClass::Work);
        assert_eq!(s.as_deref(), Some("test result: failed"));
    }

    #[test]
    fn status_401_is_environmental_even_with_transient_text() {
        let e = Evidence { http_status: Some(401), text: Some("upstream connect error".into()), ..Default::default() };
        assert_eq!(classify(&e).class, FailureClass::Environmental);
    }

    #[test]
    fn error_code_decides_before_status() {
        let e =
            Evidence { http_status: Some(429), error_code: Some("insufficient_quota".into()), ..Default::default() };
        let c = classify(&e);
        assert_eq!(c.class, FailureClass::Environmental);
        assert_eq!(c.signal.as_deref(), Some("error-code insufficient_quota"));
        assert_eq!(c.source, SignalSource::ErrorCode);
    }

    #[test]
    fn bare_exit_codes_say_nothing_but_127_is_environmental() {
        let e = Evidence { exit_code: Some(1), ..Default::default() };
        assert_eq!(classify(&e).class, FailureClass::Indeterminate);
        let e = Evidence { exit_code: Some(127), ..Default::default() };
        assert_eq!(classify(&e).class, FailureClass::Environmental);
        let e = Evidence { exit_code: Some(137), ..Default::default() };
        assert_eq!(classify(&e).class, FailureClass::Indeterminate);
        let opts = Options { retry_bare_signals: true, ..Options::default() };
        assert_eq!(classify_with(&e, &opts).class, FailureClass::TransientTransport);
    }

    #[test]
    fn text_beats_exit_code() {
        let e = Evidence { exit_code: Some(127), text: Some("socket hang up".into()), ..Default::default() };
        assert_eq!(classify(&e).class, FailureClass::TransientTransport);
    }

    #[test]
    fn marker_in_long_evidence_is_kept_in_echo() {
        let text = format!("fatal: API Error: 503 Service Unavailable\n{}", "noise line\n".repeat(2000));
        let c = classify(&Evidence::from_text(text));
        assert_eq!(c.class, FailureClass::TransientTransport);
        assert!(c.evidence.starts_with("fatal: API Error: 503"), "{}", &c.evidence[..80]);
        assert!(c.evidence.len() <= 2000 + 300);
    }

    #[test]
    fn tail_respects_char_boundaries() {
        assert_eq!(tail("ééé", 3), "é");
        assert_eq!(head("ééé", 3), "é");
    }
}
