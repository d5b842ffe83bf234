// Declarations of the JSON wrapper (index.mjs): snake_case keys and enum
// values, the `situation` variant as `{ step_failed: {...} }`, u64 values as
// numbers. The meaning, unit, default and bounds of every field are in the
// WIT (wit/types.wit); jco's own declarations of the raw component (camelCase,
// BigInt) are in gen/. test/package.mjs checks these against jco's, field by field.

/** A u64 on input: a number, a decimal string or a BigInt. */
export type U64In = number | string | bigint;
/** A u64 on output: a number, or a decimal string above 2^53 - 1. */
export type U64 = number | string;

export type FailureClass = 'transient_transport' | 'environmental' | 'work' | 'usage_limit' | 'indeterminate';
export type SignalSource =
  | 'marker'
  | 'error_code'
  | 'http_status'
  | 'exit_code'
  | 'signal'
  | 'header'
  | 'operator_marker'
  | 'weighing'
  | 'none';
export type MarkerMatch = 'substring' | 'word' | 'line' | 'code' | 'http' | 'exit';
export type HintKind =
  | 'should_retry'
  | 'should_not_retry'
  | 'retry_after'
  | 'rate_limit_reset'
  | 'usage_limit_reset'
  | 'usage_limit_rejected';
export type SameFailure = 'signature' | 'check_and_signature';
export type OnTrip = 'block';
export type ResetOn = 'cycle_reset' | 'reclassified' | 'manual';
export type EventKind =
  | 'failure'
  | 'success'
  | 'cycle_reset'
  | 'reclassified'
  | 'manual_unblock'
  | 'force_open'
  | 'force_close'
  | 'reset';
export type Action = 'retry' | 'terminal' | 'terminal_budget_exhausted' | 'resume' | 'block' | 'refresh' | 'proceed';

// ---------------------------------------------------------------------------
// Inputs: a left-out field takes its zero value (in `config`, its default).

export interface StepReport {
  id?: string;
  status?: string;
  error?: string | null;
  output?: string | null;
  stdout?: string | null;
  stderr?: string | null;
  exit_code?: number | null;
  signal?: string | null;
}

export interface Header {
  name?: string;
  value?: string;
}

export interface Evidence {
  steps?: StepReport[];
  text?: string | null;
  exit_code?: number | null;
  signal?: string | null;
  run_status?: string | null;
  runner_stderr?: string | null;
  http_status?: number | null;
  error_type?: string | null;
  error_code?: string | null;
  headers?: Header[];
}

export interface StepFailure {
  evidence?: Evidence;
  attempt?: number;
  waited?: U64In;
  /** Time since the step's first attempt; read only with `transport.max_elapsed`. */
  elapsed?: U64In;
}

export interface HistoryEvent {
  at?: U64In;
  kind: EventKind;
  breaker?: string;
  actor?: string;
  detail?: string;
  check?: string | null;
  diagnosis?: string | null;
}

export interface WorkFailure {
  breaker?: string;
  actor?: string;
  history?: HistoryEvent[];
}

export interface TaskFailure {
  failures?: U64In[];
}

export interface CycleEntry {
  name?: string;
  count?: number;
}

export interface QuotaReading {
  window?: string;
  percent?: number | null;
  resets_at?: U64In | null;
}

export interface RunStop {
  code?: string;
  resumes_done?: number;
  budget_cap?: string | null;
  budget_tripped_at?: U64In | null;
  budget_in_effect?: U64In | null;
  quota?: QuotaReading[];
  evidence?: Evidence | null;
}

/** Exactly one case. */
export type Situation =
  | { step_failed: StepFailure }
  | { work_failed: WorkFailure }
  | { task_failed: TaskFailure }
  | { cycle_entered: CycleEntry }
  | { run_stopped: RunStop };

/** Every part of `config` may be left out; what is left out takes its default. */
export type ConfigInput = {
  [K in keyof Config]?: Config[K] extends (infer E)[] ? E[] : Partial<Config[K]>;
};

export interface State {
  /** Milliseconds since the Unix epoch. */
  now?: U64In;
  entropy?: U64In;
  config?: ConfigInput;
  situation: Situation;
}

// ---------------------------------------------------------------------------
// Configuration: what `defaultConfig()` returns, every field present.

export interface TransportConfig {
  max_attempts: number;
  budget: U64;
  initial_delay: U64;
  multiplier: number;
  hint_ceiling: U64;
  retry_bare_signals: boolean;
  /** An optional total deadline; 0 is off. */
  max_elapsed: U64;
}

export interface EvidenceConfig {
  scan_bytes: number;
  echo_bytes: number;
}

export interface ResumeConfig {
  max_resumes: number;
  base_delay: U64;
  max_delay: U64;
  quota_cap_percent: number;
  reset_margin: U64;
  max_reset_wait: U64;
}

export interface BreakerConfig {
  kind: string;
  same_failure: SameFailure;
  threshold: number;
  on_trip: OnTrip;
  reset_on: ResetOn[];
  look_at: string;
  unblock_commands: string[];
}

export interface WindowConfig {
  window: U64;
  limit: number;
  base_delay: U64;
  max_delay: U64;
  unblock_commands: string[];
}

export interface CycleConfig {
  max_cycles: number;
  unblock_commands: string[];
}

/** An operator's marker, in the format of a line of `markers/markers.jsonl`. */
export interface Marker {
  class: FailureClass;
  marker: string;
  match: MarkerMatch;
  source?: string;
  weak?: boolean;
  generic?: boolean;
  throttle?: boolean;
  status?: boolean;
  shape?: string | null;
  unless?: string | null;
  near?: boolean;
  frame?: boolean;
}

export interface ClassifyConfig {
  /** At most 64, applied beside the shipped tables. */
  markers: Marker[];
}

export interface Config {
  transport: TransportConfig;
  evidence: EvidenceConfig;
  resume: ResumeConfig;
  breakers: BreakerConfig[];
  window: WindowConfig;
  cycle: CycleConfig;
  classify: ClassifyConfig;
}

// ---------------------------------------------------------------------------
// Outputs: every field present, `null` where it does not apply.

export interface Classification {
  class: FailureClass;
  signal: string | null;
  source: SignalSource;
  reasoning: string;
  retryable: boolean;
  failed_steps: string[];
  completed_steps: string[];
  evidence: string;
  reset_hint: string | null;
  reset_at: U64 | null;
  reset_after: U64 | null;
  /** The usable server hints of the headers, in header order. */
  hints: ServerHint[];
  /** Hint headers present but not usable, each with why. */
  ignored_hints: string[];
}

/** One server hint, read by `classify` from the evidence's headers. */
export interface ServerHint {
  kind: HintKind;
  header: string;
  after: U64 | null;
  at: U64 | null;
}

export interface CircuitBreaker {
  breaker: string;
  signature: string;
  count: number;
  threshold: number;
  manual: string | null;
  look_at: string;
  unblock_commands: string[];
}

export interface RunAutoResumed {
  attempt: number;
  max: number;
  code: string;
  delay: U64;
  reason: string;
}

/** The decision: the record of docs/schema.md plus `record_json`, that record as one line of JSON. */
export interface Decision {
  schema_version: number;
  action: Action;
  delay: U64 | null;
  resume_at: U64 | null;
  class: FailureClass | null;
  signal: string | null;
  reasoning: string;
  attempt: number;
  max_attempts: number;
  retryable: boolean;
  waited: U64;
  failed_steps: string[];
  completed_steps: string[];
  evidence: string;
  reset_hint: string | null;
  server_hint: string | null;
  circuit_breaker: CircuitBreaker | null;
  run_auto_resumed: RunAutoResumed | null;
  record_json: string;
}

export interface FieldError {
  field: string;
  rule: string;
}

export interface PolicyInfo {
  package_version: string;
  schema_version: number;
  markers_digest: string;
  marker_count: number;
}

// ---------------------------------------------------------------------------
// Errors and functions.

export type PolicyErrorKind = 'invalid_config' | 'invalid_input';

/** The component refused a value: `field` (its JSON path) names what broke which `rule`. */
export declare class PolicyError extends Error {
  constructor(kind: PolicyErrorKind, field: string, rule: string);
  readonly kind: PolicyErrorKind;
  readonly field: string;
  readonly rule: string;
  toJSON(): { [kind: string]: FieldError };
}

/** An `invalid_input` PolicyError: the evidence or state breaks a rule (its
 * shape or the policy's); `path` is `field` (e.g. `situation.step_failed.attempt`). */
export declare class InputError extends PolicyError {
  constructor(path: string, rule: string);
  readonly kind: 'invalid_input';
  readonly path: string;
}

/** The component speaks a contract version this package does not support. */
export declare class ContractError extends Error {
  constructor(componentVersion: string, hostVersion: string);
  readonly componentVersion: string;
  readonly hostVersion: string;
}

/** This package's version: the version of the contract it speaks. */
export declare const version: string;

export declare function supportsContract(componentVersion: string, hostVersion?: string): boolean;
export declare function checkContract(componentInfo: { package_version?: unknown }, hostVersion?: string): void;

/** Classify failure evidence. */
export declare function classify(evidence: Evidence): Classification;
/** `classify` as `nextAction` sees it under a configuration (its evidence
 * bounds and operator markers); throws `PolicyError` or `InputError`. */
export declare function classifyWith(evidence: Evidence, config: ConfigInput): Classification;
export { classifyWith as classify_with };
/** The decision for one situation; throws `PolicyError` or `InputError`. */
export declare function nextAction(state: State): Decision;
export { nextAction as next_action };
/** The normalised one-line signature of a failure detail. */
export declare function signature(detail: string, check?: string | null): string;
/** The default configuration (a fresh object each call). */
export declare function defaultConfig(): Config;
export { defaultConfig as default_config };
/** Package version, record schema version, marker-table digest and count. */
export declare function info(): PolicyInfo;
