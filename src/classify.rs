//! `classify`: a pure function from failure evidence to a class, the deciding
//! signal, a reasoning and the server's hints. It reads every fact of the
//! evidence; the deciders act on what it says and never rewrite it.
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
//! 3. Server hints in the headers (`hints.rs`): `usage-limit-rejected` is a
//!    usage-limit fact, `rate-limit-reset` a throttle.
//! 4. A frame (a work marker flagged `frame`: a diagnostic's location prefix)
//!    yields to a transient marker in the message on its own line: a build
//!    tool that reports a dropped download as a diagnostic is retried. It
//!    yields the same way to a specific environmental marker: a build file's
//!    diagnostic that names a missing dependency or toolchain is the
//!    environment's (`meson.build:14:0: ERROR: Dependency "gtk4" not found`).
//! 5. A throttle (a marker or code flagged `throttle`, or a spent rate-limit
//!    window) outranks what only restates a status (entries of the status
//!    table and markers flagged `status`): a 403 or 400 whose server says it
//!    is throttling is a rate limit, not an auth failure or a bad request. A
//!    usage limit that the text names outranks an environmental status
//!    phrase of the generic family the same way (`Status Code: 403 -> API
//!    rate limit of 50 calls per hour exceeded`), a 401 phrase too (`HTTP
//!    Error 401` with `Maximum credits exceeded`), which a throttle never
//!    outranks, and a generic structured status (400, 402, 413, 422); a 400
//!    phrase stays work, and a specific or structured 401/403 is never
//!    outranked by a usage limit.
//! 6. The strongest class wins: work > environmental > usage-limit >
//!    transient-transport. Within a class a structured fact is reported before
//!    a marker, and among markers the earliest, then the longest.
//!    A throttle that decides and whose text states a wait of at least
//!    [`LONG_WAIT`] (`Try again in 24h`, `retry in 15 minutes`), or a wait
//!    until a stated date (`try again after Mon, 13 Jul 2026 19:14 GMT`), or,
//!    stating no wait, a window of an hour or more (`tokens per day`, `in 1
//!    hour`), is a usage limit: retries inside the transport budget cannot
//!    outlast it, waiting for the reset can.
//! 7. Weak markers decide only when nothing else does.
//! 8. Exit codes and signals count only when the text and facts say nothing.
//! 9. The server's word: `x-should-retry: true` makes an `indeterminate` or
//!    `usage-limit` failure `transient-transport` (never `work` or
//!    `environmental`); `x-should-retry: false` makes any failure not retryable.
//! 10. When nothing above decided, and the evidence shows no death by signal
//!     (an exit code of 128 or more, or a signal), the words of the texts are
//!     weighed (`weigh.rs`): a clear lead toward `work` or `environmental`
//!     gives that class; weighing never gives a retry.

use crate::hints;
use crate::markers::{operator_tables, tables, Marker, MarkerMatch, Tables};
use crate::model::*;
use crate::reset;
use crate::text::{head, tail};
use crate::weigh;

/// At most this many steps are read; the rest are ignored.
pub const MAX_STEPS: usize = 1024;
/// A step id is cut to this many bytes in the record.
pub const MAX_STEP_ID: usize = 256;
/// A throttle whose text states a wait this long or longer is a usage limit
/// (five minutes, in nanoseconds): a per-second or per-minute window clears
/// within it; a per-hour, per-day or per-month quota does not.
pub const LONG_WAIT: Duration = 5 * 60 * 1_000_000_000;
/// The line of the deciding signal kept in front of a cut echo, at most.
const SIGNAL_LINE_MAX: usize = 240;
/// The most bytes of an error type or code read as text for markers (an
/// exception class with its module path is far shorter); a longer value is
/// read from its start.
const MAX_CODE_TEXT: usize = 256;
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

/// A piece of text the classifier reads, with the label it carries in the echo.
struct Part<'a> {
    label: String,
    text: &'a str,
}

fn is_completed(status: &str) -> bool {
    let s = status.trim();
    COMPLETED.iter().any(|c| s.eq_ignore_ascii_case(c))
}

/// How strongly a candidate's kind of fact speaks, first to last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Structured,
    Status,
    Marker,
    Exit,
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
    /// The server says it is throttling.
    throttle: bool,
    /// Only restates an HTTP status.
    status: bool,
    /// Only frames the message on its line (a diagnostic's location prefix).
    frame: bool,
    /// Sort key within a class: tier, then position, then the longer marker.
    rank: (Tier, usize, std::cmp::Reverse<usize>),
}

impl Candidate {
    fn fact(class: FailureClass, signal: String, source: SignalSource, tier: Tier) -> Candidate {
        Candidate {
            class,
            signal,
            source,
            line: None,
            weak: false,
            generic: false,
            throttle: false,
            status: false,
            frame: false,
            rank: (tier, 0, std::cmp::Reverse(0)),
        }
    }

    /// A candidate from a marker entry, with the entry's flags (the status
    /// table's say which structured statuses yield to a throttle).
    fn marker(m: &Marker, signal: String, source: SignalSource, tier: Tier) -> Candidate {
        Candidate {
            weak: m.weak,
            generic: m.generic,
            throttle: m.throttle,
            status: m.status,
            frame: m.frame,
            ..Candidate::fact(m.class, signal, source, tier)
        }
    }
}

/// What the evidence holds, gathered once.
struct Gathered<'a> {
    failed_steps: Vec<String>,
    completed_steps: Vec<String>,
    parts: Vec<Part<'a>>,
    exit_codes: Vec<i32>,
    signals: Vec<String>,
}

pub fn classify(evidence: &Evidence) -> Classification {
    classify_with(evidence, &Options::default())
}

pub fn classify_with(evidence: &Evidence, opts: &Options) -> Classification {
    classify_in(tables(), None, evidence, opts)
}

/// Classifies as the configuration says: its evidence bounds and its
/// operator markers (`config.classify.markers`, checked by `config::validate`).
pub fn classify_configured(evidence: &Evidence, config: &Config) -> Classification {
    let opts = Options::from_config(config);
    if config.classify.markers.is_empty() {
        return classify_in(tables(), None, evidence, &opts);
    }
    let ops = operator_tables(&config.classify.markers);
    classify_in(tables(), Some(&ops), evidence, &opts)
}

/// Classifies with the tables `t` and, when given, an operator's tables
/// `ops`, whose markers count as the shipped ones do (same precedence) and
/// report the source `operator-marker`.
pub fn classify_in(t: &Tables, ops: Option<&Tables>, evidence: &Evidence, opts: &Options) -> Classification {
    let g = gather(evidence, opts);
    let read = hints::read(&evidence.headers);
    let mut candidates = text_candidates(t, &g.parts);
    candidates.extend(fact_candidates(t, evidence));
    if let Some(o) = ops {
        let mut theirs = text_candidates(o, &g.parts);
        theirs.extend(fact_candidates(o, evidence));
        candidates.extend(theirs.into_iter().map(|c| Candidate { source: SignalSource::OperatorMarker, ..c }));
    }
    candidates.extend(hint_candidates(&read.hints));
    let exit = |t: &Tables| exit_or_signal(t, &g.exit_codes, &g.signals, opts);
    // The reset hint, read once: by the long-wait rule when a throttle
    // decides, else when the answer is a usage limit (`finish`).
    let mut reset = None;
    let best = long_wait(choose(candidates), &g.parts, &mut reset).or_else(|| ops.and_then(exit)).or_else(|| exit(t));
    // A death by signal is its own ambiguity (`retry_bare_signals` decides
    // it): the words around it describe the death, not its cause.
    let died = g.exit_codes.iter().any(|&c| c >= 128) || !g.signals.is_empty();
    let best = server_word(best, &read.hints).or_else(|| if died { None } else { weighed(&g.parts) });
    finish(g, best, read, reset, opts)
}

/// The steps, the texts to scan, the exit codes and the signals.
fn gather<'a>(evidence: &'a Evidence, opts: &Options) -> Gathered<'a> {
    let mut g = Gathered {
        failed_steps: Vec::new(),
        completed_steps: Vec::new(),
        parts: Vec::new(),
        exit_codes: Vec::new(),
        signals: Vec::new(),
    };
    for step in evidence.steps.iter().take(MAX_STEPS) {
        let id = head(&step.id, MAX_STEP_ID).to_string();
        if is_completed(&step.status) {
            g.completed_steps.push(id);
            continue;
        }
        for text in [&step.error, &step.output, &step.stdout, &step.stderr].into_iter().flatten() {
            let text = tail(text, opts.scan_bytes);
            if !text.trim().is_empty() {
                g.parts.push(Part { label: format!("[{id}] "), text });
            }
        }
        g.exit_codes.extend(step.exit_code);
        g.signals.extend(signal(&step.signal));
        g.failed_steps.push(id);
    }
    let labelled =
        [("[run status] ", &evidence.run_status), ("[runner stderr] ", &evidence.runner_stderr), ("", &evidence.text)];
    for (label, text) in labelled {
        if let Some(s) = text.as_deref().filter(|s| !s.trim().is_empty()) {
            g.parts.push(Part { label: label.to_string(), text: tail(s, opts.scan_bytes) });
        }
    }
    g.exit_codes.extend(evidence.exit_code);
    g.signals.extend(signal(&evidence.signal));
    g
}

/// A signal name, trimmed and cut; none when blank.
fn signal(s: &Option<String>) -> Option<String> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(|s| head(s, 64).to_string())
}

/// Every text marker of every part, positions counted across the parts.
fn text_candidates(t: &Tables, parts: &[Part]) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    for part in parts {
        for h in t.scan(part.text) {
            let m = t.marker(h.marker);
            // A neutral marker has hidden the markers inside it and decides nothing.
            if m.class == FailureClass::Indeterminate {
                continue;
            }
            out.push(Candidate {
                line: Some(line_at(part, h.start)),
                rank: (Tier::Marker, offset + h.start, std::cmp::Reverse(m.marker.len())),
                ..Candidate::marker(&m, m.marker.to_string(), SignalSource::Marker, Tier::Marker)
            });
        }
        offset += part.text.len() + 1;
    }
    out
}

/// The error type and code, and the HTTP status: a known type or code decides
/// before a bare retryable status; a status never retried always counts.
fn fact_candidates(t: &Tables, evidence: &Evidence) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (field, value) in [("error-type", &evidence.error_type), ("error-code", &evidence.error_code)] {
        if let Some(v) = value.as_deref() {
            out.extend(code_candidates(t, field, v));
        }
    }
    let code_known = !out.is_empty();
    if let Some(status) = evidence.http_status {
        if let Some(i) = t.lookup(MarkerMatch::Http, &status.to_string()) {
            let m = t.marker(i);
            if !code_known || m.class != FailureClass::TransientTransport {
                out.push(Candidate::marker(&m, format!("http {status}"), SignalSource::HttpStatus, Tier::Status));
            }
        }
    }
    out
}

/// A structured error type or code: its entry in the code table, or else
/// the text markers the value holds, read as the structured fact it is. A
/// host often passes an exception's class name (`RateLimitError`,
/// `openai.APIConnectionError`, `GroqInternalServerError`) or a documented
/// code that the tables know from logged bodies (`model_capacity_exceeded`,
/// `ER_LOCK_DEADLOCK`); the code table holds only about a hundred of these.
/// A weak marker is left out: a bare word says too little to decide a field.
fn code_candidates(t: &Tables, field: &str, value: &str) -> Vec<Candidate> {
    let fact =
        |m: &Marker| Candidate::marker(m, format!("{field} {}", m.marker), SignalSource::ErrorCode, Tier::Structured);
    if let Some(i) = t.lookup(MarkerMatch::Code, value) {
        return vec![fact(&t.marker(i))];
    }
    let found = t.scan(head(value.trim(), MAX_CODE_TEXT)).into_iter().map(|h| t.marker(h.marker));
    found.filter(|m| !m.weak && m.class != FailureClass::Indeterminate).map(|m| fact(&m)).collect()
}

/// The hints that are facts about the failure: a reached usage limit, a spent
/// rate-limit window.
fn hint_candidates(hints: &[ServerHint]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for h in hints {
        let signal = format!("header {}", h.header);
        match h.kind {
            HintKind::UsageLimitRejected => {
                out.push(Candidate::fact(FailureClass::UsageLimit, signal, SignalSource::Header, Tier::Structured))
            }
            HintKind::RateLimitReset => out.push(Candidate {
                throttle: true,
                ..Candidate::fact(FailureClass::TransientTransport, signal, SignalSource::Header, Tier::Structured)
            }),
            _ => {}
        }
    }
    out
}

/// The deciding candidate: limits over restated statuses, strong over
/// weak, the strongest class, generic markers over a retry or a wait but never
/// over a specific stop.
fn choose(candidates: Vec<Candidate>) -> Option<Candidate> {
    let throttled = candidates.iter().any(|c| c.throttle && !c.weak);
    let text = |c: &Candidate| matches!(c.source, SignalSource::Marker | SignalSource::OperatorMarker);
    let usage = candidates.iter().any(|c| c.class == FailureClass::UsageLimit && !c.weak && text(c));
    // A restated status yields to a throttle. A status phrase of the generic
    // family that is environmental (`status code: 403`, `status code: 401`)
    // also yields to a usage limit the text names, which servers answer with
    // it, and so does a generic structured status (402, 400, 413, 422); a
    // 400 phrase stays work, a 401 never yields to a throttle, and a specific
    // or structured 401/403 never yields to a usage limit.
    let restates = |c: &Candidate| {
        let generic_stop =
            c.generic && ((c.class == FailureClass::Environmental && text(c)) || c.source == SignalSource::HttpStatus);
        (c.status && throttled) || (usage && generic_stop)
    };
    // A frame yields to a transient or a specific environmental marker in
    // the message on its own line (a location says where a diagnostic is;
    // `meson.build:14:0: ERROR: Dependency "gtk4" not found` is a missing
    // dependency): the lines that hold one, gathered once (only markers
    // have a line).
    let yielding_lines: std::collections::HashSet<String> = candidates
        .iter()
        .filter(|t| !t.weak)
        .filter(|t| match t.class {
            FailureClass::TransientTransport => true,
            FailureClass::Environmental => !t.generic,
            _ => false,
        })
        .filter_map(|t| t.line.clone())
        .collect();
    let yields = |c: &Candidate| c.frame && c.line.as_ref().is_some_and(|l| yielding_lines.contains(l));
    let pool: Vec<Candidate> = candidates.into_iter().filter(|c| !(yields(c) || restates(c))).collect();
    let strong = pool.iter().any(|c| !c.weak);
    let pool: Vec<&Candidate> = pool.iter().filter(|c| !strong || !c.weak).collect();
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
    };
    best.map(|c| (*c).clone())
}

/// `x-should-retry: true` makes an unidentified failure or a usage limit a
/// transient one: the server is the authority on its own request. Never a
/// work or environmental failure: those give the same answer again.
fn server_word(best: Option<Candidate>, hints: &[ServerHint]) -> Option<Candidate> {
    let Some(h) = hints.iter().find(|h| h.kind == HintKind::ShouldRetry) else { return best };
    let upgrade = match &best {
        None => true,
        Some(c) => c.class == FailureClass::UsageLimit,
    };
    if !upgrade {
        return best;
    }
    let signal = format!("header {}", h.header);
    Some(Candidate::fact(FailureClass::TransientTransport, signal, SignalSource::Header, Tier::Structured))
}

/// A deciding throttle whose text states a wait of at least [`LONG_WAIT`],
/// or, stating no wait, a reset on a named date (servers state a short wait
/// in seconds, not as a day) or a window of an hour or more (`tokens per
/// day`, `in 1 hour`): the usage limit it is, with the same signal.
/// The reset it reads is kept in `read` for `finish`.
fn long_wait(best: Option<Candidate>, parts: &[Part], read: &mut Option<reset::Reset>) -> Option<Candidate> {
    let c = best?;
    if c.class != FailureClass::TransientTransport || !c.throttle {
        return Some(c);
    }
    let reset = read.insert(reset_of(parts));
    let long = match reset.after {
        Some(wait) => wait >= LONG_WAIT,
        None => reset.dated || reset.long_window,
    };
    Some(if long { Candidate { class: FailureClass::UsageLimit, ..c } } else { c })
}

/// What the words of the parts weigh toward, as a candidate (`weigh.rs`).
fn weighed(parts: &[Part]) -> Option<Candidate> {
    let texts: Vec<&str> = parts.iter().map(|p| p.text).collect();
    let w = weigh::weigh(&texts)?;
    let signal = format!("words: {}", w.words.join(", "));
    Some(Candidate::fact(w.class, signal, SignalSource::Weighing, Tier::Exit))
}

/// The reset hint of the parts (`reset.rs`).
fn reset_of(parts: &[Part]) -> reset::Reset {
    let texts: Vec<&str> = parts.iter().map(|p| p.text).collect();
    reset::find_reset(&texts)
}

/// The classification of the chosen candidate, with the reset (`reset`, when
/// the long-wait rule already read it) and the hints.
fn finish(
    g: Gathered,
    best: Option<Candidate>,
    read: hints::Read,
    reset: Option<reset::Reset>,
    opts: &Options,
) -> Classification {
    let echo = echo(&g.parts, opts.echo_bytes, best.as_ref().and_then(|c| c.line.as_deref()));
    let class = best.as_ref().map_or(FailureClass::Indeterminate, |c| c.class);
    let reset = match class {
        FailureClass::UsageLimit => reset.unwrap_or_else(|| reset_of(&g.parts)),
        _ => reset::Reset::default(),
    };
    let header_reset = read.hints.iter().find(|h| h.kind == HintKind::UsageLimitReset).and_then(|h| h.at);
    let refused = read.hints.iter().find(|h| h.kind == HintKind::ShouldNotRetry);
    let mut reasoning = match best.as_ref().filter(|c| c.source == SignalSource::Weighing) {
        Some(c) => weighed_reasoning(class, &c.signal),
        None => reasoning(class, best.as_ref().map(|c| c.signal.as_str()), reset.hint.as_deref()),
    };
    if best.is_none() {
        reasoning.push_str(&death_note(&g.exit_codes, &g.signals));
    }
    if let Some(h) = refused {
        reasoning.push_str(&format!("; the server said `{}`: not retryable", h.header));
    }
    Classification {
        class,
        signal: best.as_ref().map(|c| c.signal.clone()),
        source: best.as_ref().map_or(SignalSource::None, |c| c.source),
        reasoning,
        retryable: class.is_retryable() && refused.is_none(),
        failed_steps: g.failed_steps,
        completed_steps: g.completed_steps,
        evidence: echo,
        reset_hint: reset.hint,
        reset_at: if class == FailureClass::UsageLimit { header_reset.or(reset.at) } else { None },
        reset_after: reset.after,
        hints: read.hints,
        ignored_hints: read.ignored,
    }
}

/// The reasoning of a class the words weighed toward.
fn weighed_reasoning(class: FailureClass, signal: &str) -> String {
    let words = signal.strip_prefix("words: ").unwrap_or(signal);
    format!(
        "classified `{}` — no marker, fact, exit code or server hint decided; the words of the text weigh toward it (most: {words}), by weights learned from labelled real failures. Weighing never makes a failure retryable.",
        class.as_str()
    )
}

/// Why a death by signal alone is not called transient.
fn death_note(exit_codes: &[i32], signals: &[String]) -> String {
    const WHY: &str = "is not evidence of a transient fault by itself: it is as often the OOM killer, which a retry on the same host meets again";
    if let Some(code) = exit_codes.iter().find(|&&c| c >= 128) {
        format!("; exit {code} (a death by signal) {WHY}")
    } else if let Some(sig) = signals.first() {
        format!("; signal {sig} {WHY}")
    } else {
        String::new()
    }
}

fn exit_or_signal(t: &Tables, exit_codes: &[i32], signals: &[String], opts: &Options) -> Option<Candidate> {
    for code in exit_codes {
        if let Some(i) = t.lookup(MarkerMatch::Exit, &code.to_string()) {
            let class = t.marker(i).class;
            return Some(Candidate::fact(class, format!("exit {code}"), SignalSource::ExitCode, Tier::Exit));
        }
    }
    if !opts.retry_bare_signals {
        return None;
    }
    let transient = FailureClass::TransientTransport;
    if let Some(code) = exit_codes.iter().find(|&&c| c >= 128) {
        return Some(Candidate::fact(transient, format!("exit {code}"), SignalSource::ExitCode, Tier::Exit));
    }
    signals.first().map(|sig| Candidate::fact(transient, format!("signal {sig}"), SignalSource::Signal, Tier::Exit))
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
            let when = reset_hint.map(|h| format!("; the reset is given as `{h}`")).unwrap_or_default();
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
