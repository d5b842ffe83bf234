//! The data Backstop reads and returns: plain Rust mirrors of `wit/types.wit`.
//!
//! Names are the UpperCamel / snake_case forms of the WIT names, so the
//! conversions in `component.rs` read one to one. The JSON shape (CLI, vectors,
//! Python and JavaScript wrappers) uses snake_case keys and snake_case enum
//! values; optional fields may be left out; u64 fields accept a number or a
//! decimal string (JavaScript cannot hold integers above 2^53 in a number).

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};

/// A span of time in nanoseconds.
pub type Duration = u64;
/// Milliseconds since the Unix epoch, UTC.
pub type Timestamp = u64;

pub const NANOS_PER_MILLI: u64 = 1_000_000;
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Accepts a u64 written as a JSON number or as a decimal string.
pub fn de_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct U64;
    impl serde::de::Visitor<'_> for U64 {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an unsigned integer (a number or a decimal string)")
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<u64, E> {
            Ok(n)
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<u64, E> {
            u64::try_from(n).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<u64, E> {
            s.trim().parse::<u64>().map_err(|_| E::custom(format!("expected an unsigned integer, got {s:?}")))
        }
    }
    d.deserialize_any(U64)
}

/// As [`de_u64`], for an optional field.
pub fn de_opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct W(#[serde(deserialize_with = "de_u64")] u64);
    Ok(Option::<W>::deserialize(d)?.map(|W(n)| n))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    TransientTransport,
    Environmental,
    Work,
    UsageLimit,
    Indeterminate,
}

impl FailureClass {
    pub const ALL: [FailureClass; 5] = [
        FailureClass::TransientTransport,
        FailureClass::Environmental,
        FailureClass::Work,
        FailureClass::UsageLimit,
        FailureClass::Indeterminate,
    ];

    /// The snake_case name used in JSON and in the marker line.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::TransientTransport => "transient_transport",
            FailureClass::Environmental => "environmental",
            FailureClass::Work => "work",
            FailureClass::UsageLimit => "usage_limit",
            FailureClass::Indeterminate => "indeterminate",
        }
    }

    pub fn parse(s: &str) -> Option<FailureClass> {
        FailureClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Precedence rank: lower wins. Ambiguity resolves toward not retrying.
    pub fn precedence(self) -> u8 {
        match self {
            FailureClass::Work => 0,
            FailureClass::Environmental => 1,
            FailureClass::UsageLimit => 2,
            FailureClass::TransientTransport => 3,
            FailureClass::Indeterminate => 4,
        }
    }

    pub fn is_retryable(self) -> bool {
        self == FailureClass::TransientTransport
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalSource {
    Marker,
    ErrorCode,
    HttpStatus,
    ExitCode,
    Signal,
    Header,
    /// A marker of the operator's `config.classify.markers`.
    OperatorMarker,
    /// The words of the text, weighed when nothing else decided (`weigh.rs`).
    Weighing,
    None,
}

/// What a server hint says (see `hints.rs` for the headers read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintKind {
    /// `x-should-retry: true`.
    ShouldRetry,
    /// `x-should-retry: false`.
    ShouldNotRetry,
    /// `retry-after-ms` or `retry-after`: wait `after`, or until `at` (an HTTP date).
    RetryAfter,
    /// A spent rate-limit window that resets at `at` (`x-ratelimit-remaining: 0`
    /// with `x-ratelimit-reset`).
    RateLimitReset,
    /// A subscription usage limit that resets at `at` (`anthropic-ratelimit-unified-reset`).
    UsageLimitReset,
    /// The subscription usage limit is reached (`anthropic-ratelimit-unified-status: rejected`).
    UsageLimitRejected,
}

/// One server hint, read from the evidence's headers by `classify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerHint {
    pub kind: HintKind,
    /// The header(s) as received, `name: value`, `; `-separated.
    pub header: String,
    /// A wait relative to the failure, saturating at `hints::MAX_WAIT`.
    pub after: Option<Duration>,
    /// An instant, ms since the epoch: an HTTP date, or a reset.
    pub at: Option<Timestamp>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepReport {
    pub id: String,
    pub status: String,
    pub error: Option<String>,
    pub output: Option<String>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Header {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Evidence {
    pub steps: Vec<StepReport>,
    pub text: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub run_status: Option<String>,
    pub runner_stderr: Option<String>,
    pub http_status: Option<u16>,
    pub error_type: Option<String>,
    pub error_code: Option<String>,
    pub headers: Vec<Header>,
}

impl Evidence {
    /// Evidence that is only free text.
    pub fn from_text(text: impl Into<String>) -> Evidence {
        Evidence { text: Some(text.into()), ..Evidence::default() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    pub class: FailureClass,
    pub signal: Option<String>,
    pub source: SignalSource,
    pub reasoning: String,
    pub retryable: bool,
    pub failed_steps: Vec<String>,
    pub completed_steps: Vec<String>,
    pub evidence: String,
    pub reset_hint: Option<String>,
    pub reset_at: Option<Timestamp>,
    pub reset_after: Option<Duration>,
    /// The usable server hints of the evidence's headers, in header order.
    pub hints: Vec<ServerHint>,
    /// Hint headers present but unusable, each `` `name: value` (why) ``.
    pub ignored_hints: Vec<String>,
}

impl Classification {
    /// The first hint of `kind`.
    pub fn hint(&self, kind: HintKind) -> Option<&ServerHint> {
        self.hints.iter().find(|h| h.kind == kind)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransportConfig {
    pub max_attempts: u32,
    #[serde(deserialize_with = "de_u64")]
    pub budget: Duration,
    #[serde(deserialize_with = "de_u64")]
    pub initial_delay: Duration,
    pub multiplier: u32,
    #[serde(deserialize_with = "de_u64")]
    pub hint_ceiling: Duration,
    pub retry_bare_signals: bool,
    #[serde(deserialize_with = "de_u64")]
    pub max_elapsed: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvidenceConfig {
    pub scan_bytes: u32,
    pub echo_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResumeConfig {
    pub max_resumes: u32,
    #[serde(deserialize_with = "de_u64")]
    pub base_delay: Duration,
    #[serde(deserialize_with = "de_u64")]
    pub max_delay: Duration,
    pub quota_cap_percent: u32,
    #[serde(deserialize_with = "de_u64")]
    pub reset_margin: Duration,
    #[serde(deserialize_with = "de_u64")]
    pub max_reset_wait: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SameFailure {
    Signature,
    CheckAndSignature,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTrip {
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetOn {
    CycleReset,
    Reclassified,
    Manual,
}

/// An identical-failure breaker. Fields left out of JSON are *unanswered*
/// (not defaulted), so validation can name the missing checklist answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerConfig {
    #[serde(default)]
    pub kind: String,
    #[serde(default = "default_same_failure")]
    pub same_failure: SameFailure,
    #[serde(default)]
    pub threshold: u32,
    #[serde(default = "default_on_trip")]
    pub on_trip: OnTrip,
    #[serde(default)]
    pub reset_on: Vec<ResetOn>,
    #[serde(default)]
    pub look_at: String,
    #[serde(default)]
    pub unblock_commands: Vec<String>,
}

fn default_same_failure() -> SameFailure {
    SameFailure::Signature
}
fn default_on_trip() -> OnTrip {
    OnTrip::Block
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowConfig {
    #[serde(deserialize_with = "de_u64")]
    pub window: Duration,
    pub limit: u32,
    #[serde(deserialize_with = "de_u64")]
    pub base_delay: Duration,
    #[serde(deserialize_with = "de_u64")]
    pub max_delay: Duration,
    pub unblock_commands: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CycleConfig {
    pub max_cycles: u32,
    pub unblock_commands: Vec<String>,
}

/// How a marker matches (see `markers.rs` and `docs/markers.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerMatch {
    Substring,
    Word,
    Line,
    Code,
    Http,
    Exit,
}

/// One marker: a line of `markers/markers.jsonl`, or an operator's entry in
/// `config.classify.markers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub class: FailureClass,
    pub marker: Cow<'static, str>,
    #[serde(rename = "match")]
    pub kind: MarkerMatch,
    /// Where the text comes from; required in every written table, left out
    /// of the entries `build.rs` compiles into the crate.
    #[serde(default)]
    pub source: Cow<'static, str>,
    #[serde(default)]
    pub weak: bool,
    #[serde(default)]
    pub generic: bool,
    /// The server says it is throttling: outranks a restated status.
    #[serde(default)]
    pub throttle: bool,
    /// Only restates an HTTP status (`403 forbidden`): a throttle outranks it.
    #[serde(default)]
    pub status: bool,
    /// A regular expression the marker's context must match.
    #[serde(default)]
    pub shape: Option<Cow<'static, str>>,
    /// A regular expression the marker's context must not match.
    #[serde(default)]
    pub unless: Option<Cow<'static, str>>,
    /// The context is the marker's line and three lines either side, not the line alone.
    #[serde(default)]
    pub near: bool,
    /// A work marker that only frames a message (a diagnostic's location
    /// prefix, `path:line:col: error:`): a transient marker in the message
    /// on its line decides over it.
    #[serde(default)]
    pub frame: bool,
}

/// The operator's own markers, applied beside the shipped tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifyConfig {
    pub markers: Vec<Marker>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub transport: TransportConfig,
    pub evidence: EvidenceConfig,
    pub resume: ResumeConfig,
    pub breakers: Vec<BreakerConfig>,
    pub window: WindowConfig,
    pub cycle: CycleConfig,
    pub classify: ClassifyConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StepFailure {
    pub evidence: Evidence,
    pub attempt: u32,
    #[serde(deserialize_with = "de_u64")]
    pub waited: Duration,
    #[serde(deserialize_with = "de_u64")]
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Failure,
    Success,
    CycleReset,
    Reclassified,
    ManualUnblock,
    ForceOpen,
    ForceClose,
    Reset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryEvent {
    #[serde(default, deserialize_with = "de_u64")]
    pub at: Timestamp,
    pub kind: EventKind,
    #[serde(default)]
    pub breaker: String,
    #[serde(default)]
    pub actor: String,
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub check: Option<String>,
    #[serde(default)]
    pub diagnosis: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkFailure {
    pub breaker: String,
    pub actor: String,
    pub history: Vec<HistoryEvent>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskFailure {
    #[serde(deserialize_with = "de_vec_u64")]
    pub failures: Vec<Timestamp>,
}

fn de_vec_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    #[derive(Deserialize)]
    struct W(#[serde(deserialize_with = "de_u64")] u64);
    Ok(Vec::<W>::deserialize(d)?.into_iter().map(|W(n)| n).collect())
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CycleEntry {
    pub name: String,
    pub count: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaReading {
    pub window: String,
    pub percent: Option<f64>,
    #[serde(deserialize_with = "de_opt_u64")]
    pub resets_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunStop {
    pub code: String,
    pub resumes_done: u32,
    pub budget_cap: Option<String>,
    #[serde(deserialize_with = "de_opt_u64")]
    pub budget_tripped_at: Option<u64>,
    #[serde(deserialize_with = "de_opt_u64")]
    pub budget_in_effect: Option<u64>,
    pub quota: Vec<QuotaReading>,
    pub evidence: Option<Evidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Situation {
    StepFailed(StepFailure),
    WorkFailed(WorkFailure),
    TaskFailed(TaskFailure),
    CycleEntered(CycleEntry),
    RunStopped(RunStop),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    #[serde(default, deserialize_with = "de_u64")]
    pub now: Timestamp,
    #[serde(default, deserialize_with = "de_u64")]
    pub entropy: u64,
    #[serde(default)]
    pub config: Config,
    pub situation: Situation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Retry,
    Terminal,
    TerminalBudgetExhausted,
    Resume,
    Block,
    Refresh,
    Proceed,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Terminal => "terminal",
            Action::TerminalBudgetExhausted => "terminal_budget_exhausted",
            Action::Resume => "resume",
            Action::Block => "block",
            Action::Refresh => "refresh",
            Action::Proceed => "proceed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitBreaker {
    pub breaker: String,
    pub signature: String,
    pub count: u32,
    pub threshold: u32,
    pub manual: Option<String>,
    pub look_at: String,
    pub unblock_commands: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAutoResumed {
    pub attempt: u32,
    pub max: u32,
    pub code: String,
    pub delay: Duration,
    pub reason: String,
}

/// A decision. Field order here is the key order of the JSON record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub schema_version: u32,
    pub action: Action,
    pub delay: Option<Duration>,
    pub resume_at: Option<Timestamp>,
    pub class: Option<FailureClass>,
    pub signal: Option<String>,
    pub reasoning: String,
    pub attempt: u32,
    pub max_attempts: u32,
    pub retryable: bool,
    pub waited: Duration,
    pub failed_steps: Vec<String>,
    pub completed_steps: Vec<String>,
    pub evidence: String,
    pub reset_hint: Option<String>,
    pub server_hint: Option<String>,
    pub circuit_breaker: Option<CircuitBreaker>,
    pub run_auto_resumed: Option<RunAutoResumed>,
    /// The record as compact JSON (every field above, in this order). Not part
    /// of itself.
    #[serde(skip)]
    pub record_json: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub field: String,
    pub rule: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyError {
    InvalidConfig(FieldError),
    InvalidInput(FieldError),
}

impl PolicyError {
    pub fn config(field: impl Into<String>, rule: impl Into<String>) -> PolicyError {
        PolicyError::InvalidConfig(FieldError { field: field.into(), rule: rule.into() })
    }
    pub fn input(field: impl Into<String>, rule: impl Into<String>) -> PolicyError {
        PolicyError::InvalidInput(FieldError { field: field.into(), rule: rule.into() })
    }
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::InvalidConfig(e) => write!(f, "invalid config: {}: {}", e.field, e.rule),
            PolicyError::InvalidInput(e) => write!(f, "invalid input: {}: {}", e.field, e.rule),
        }
    }
}

impl std::error::Error for PolicyError {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyInfo {
    pub package_version: String,
    pub schema_version: u32,
    pub markers_digest: String,
    pub marker_count: u32,
}
