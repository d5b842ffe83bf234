// Conversions between the core's plain types (`m`, src/model.rs) and the
// types generated from wit/ (`w`). Field by field and case by case, no logic.
//
// This file is `include!`d by both sides of the boundary, so the guest glue
// (src/component.rs, wit-bindgen) and the wasmtime host (host-test, bindgen!)
// share one table: the includer brings `m` and `w` into scope. Every record
// lists all of its fields, so a field added to the WIT and the model without
// being added here fails to compile.

/// Converts a value to its twin on the other side of the boundary.
pub trait Conv<T> {
    fn conv(self) -> T;
}

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

macro_rules! identity {
    ($($t:ty),*) => { $(impl Conv<$t> for $t { fn conv(self) -> $t { self } })* };
}
identity!(String, bool, u16, u32, u64, i32, f64);

// The model's marker texts borrow the shipped tables where they can.
impl Conv<std::borrow::Cow<'static, str>> for String {
    fn conv(self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Owned(self)
    }
}
impl Conv<String> for std::borrow::Cow<'static, str> {
    fn conv(self) -> String {
        self.into_owned()
    }
}

macro_rules! record {
    ($name:ident { $($f:ident),* $(,)? }) => {
        record!($name { $($f),* ; });
    };
    // `model_name => wit_name` for a field the two sides name differently.
    ($name:ident { $($f:ident),* ; $($mf:ident => $wf:ident),* $(,)? }) => {
        impl Conv<w::$name> for m::$name {
            fn conv(self) -> w::$name { w::$name { $($f: self.$f.conv(),)* $($wf: self.$mf.conv(),)* } }
        }
        impl Conv<m::$name> for w::$name {
            fn conv(self) -> m::$name { m::$name { $($f: self.$f.conv(),)* $($mf: self.$wf.conv(),)* } }
        }
    };
}

macro_rules! enumeration {
    ($name:ident { $($v:ident),* $(,)? }) => {
        impl Conv<w::$name> for m::$name {
            fn conv(self) -> w::$name { match self { $(m::$name::$v => w::$name::$v),* } }
        }
        impl Conv<m::$name> for w::$name {
            fn conv(self) -> m::$name { match self { $(w::$name::$v => m::$name::$v),* } }
        }
    };
}

macro_rules! variant {
    ($name:ident { $($v:ident),* $(,)? }) => {
        impl Conv<w::$name> for m::$name {
            fn conv(self) -> w::$name { match self { $(m::$name::$v(x) => w::$name::$v(x.conv())),* } }
        }
        impl Conv<m::$name> for w::$name {
            fn conv(self) -> m::$name { match self { $(w::$name::$v(x) => m::$name::$v(x.conv())),* } }
        }
    };
}

enumeration!(FailureClass { TransientTransport, Environmental, Work, UsageLimit, Indeterminate });
enumeration!(SignalSource { Marker, ErrorCode, HttpStatus, ExitCode, Signal, Header, OperatorMarker, Weighing, None });
enumeration!(MarkerMatch { Substring, Word, Line, Code, Http, Exit });
enumeration!(HintKind { ShouldRetry, ShouldNotRetry, RetryAfter, RateLimitReset, UsageLimitReset, UsageLimitRejected });
enumeration!(SameFailure { Signature, CheckAndSignature });
enumeration!(OnTrip { Block });
enumeration!(ResetOn { CycleReset, Reclassified, Manual });
enumeration!(EventKind { Failure, Success, CycleReset, Reclassified, ManualUnblock, ForceOpen, ForceClose, Reset });
enumeration!(Action { Retry, Terminal, TerminalBudgetExhausted, Resume, Block, Refresh, Proceed });

record!(StepReport { id, status, error, output, stdout, stderr, exit_code, signal });
record!(Header { name, value });
record!(Evidence {
    steps, text, exit_code, signal, run_status, runner_stderr, http_status, error_type, error_code, headers
});
record!(ServerHint { kind, header, after, at });
record!(Classification {
    class, signal, source, reasoning, retryable, failed_steps, completed_steps, evidence, reset_hint, reset_at,
    reset_after, hints, ignored_hints
});
record!(TransportConfig {
    max_attempts, budget, initial_delay, multiplier, hint_ceiling, retry_bare_signals, max_elapsed
});
record!(EvidenceConfig { scan_bytes, echo_bytes });
record!(ResumeConfig { max_resumes, base_delay, max_delay, quota_cap_percent, reset_margin, max_reset_wait });
record!(BreakerConfig { kind, same_failure, threshold, on_trip, reset_on, look_at, unblock_commands });
record!(WindowConfig { window, limit, base_delay, max_delay, unblock_commands });
record!(CycleConfig { max_cycles, unblock_commands });
record!(Config { transport, evidence, resume, breakers, window, cycle, classify });
record!(ClassifyConfig { markers });

// `match` is a keyword in Rust: the bindings call the field `match_`, the
// model `kind`.
record!(Marker { class, marker, source, weak, generic, throttle, status, shape, unless, near, frame; kind => match_ });
record!(StepFailure { evidence, attempt, waited, elapsed });
record!(HistoryEvent { at, kind, breaker, actor, detail, check, diagnosis });
record!(WorkFailure { breaker, actor, history });
record!(TaskFailure { failures });
record!(CycleEntry { name, count });
record!(QuotaReading { window, percent, resets_at });
record!(RunStop { code, resumes_done, budget_cap, budget_tripped_at, budget_in_effect, quota, evidence });
variant!(Situation { StepFailed, WorkFailed, TaskFailed, CycleEntered, RunStopped });
record!(State { now, entropy, config, situation });
record!(CircuitBreaker { breaker, signature, count, threshold, manual, look_at, unblock_commands });
record!(RunAutoResumed { attempt, max, code, delay, reason });
record!(Decision {
    schema_version, action, delay, resume_at, class, signal, reasoning, attempt, max_attempts, retryable, waited,
    failed_steps, completed_steps, evidence, reset_hint, server_hint, circuit_breaker, run_auto_resumed, record_json
});
record!(FieldError { field, rule });
variant!(PolicyError { InvalidConfig, InvalidInput });
record!(PolicyInfo { package_version, schema_version, markers_digest, marker_count });
