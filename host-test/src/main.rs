//! `backstop`: the command line of the Backstop component.
//!
//! Every command runs the WebAssembly component through the wasmtime host (an
//! empty linker: no capabilities). Output is JSON on stdout; bad input exits 2
//! with a message naming the problem; a limit hit inside the component exits 3;
//! a registry that cannot be reached or refuses exits 4; an artifact that fails
//! verification (a digest mismatch, not a Wasm component artifact) exits 5.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use backstop::model as m;
use backstop_host::oci::{self, OciError, Reference};
use backstop_host::{default_cache_dir, Backstop, HostError, Limits};
use clap::{Parser, Subcommand};

/// Input files and lines larger than this are refused.
const MAX_INPUT: u64 = 64 << 20;

#[derive(Parser)]
#[command(
    name = "backstop",
    version,
    about = "Classify agent-pipeline failures and decide the next action, through the Backstop WebAssembly component"
)]
struct Cli {
    /// Most linear memory the component may use, in MiB.
    #[arg(long, global = true, default_value_t = 256)]
    memory_mib: usize,
    /// Wall-clock time one call may take, in milliseconds (0: no deadline).
    #[arg(long, global = true, default_value_t = 10_000)]
    deadline_ms: u64,
    /// An exact budget of fuel (about one unit per wasm instruction) per call;
    /// compiles the component with fuel metering, which makes calls slower.
    #[arg(long, global = true, value_name = "UNITS")]
    fuel: Option<u64>,
    /// Accepted for older scripts: fuel metering is off unless --fuel is given.
    #[arg(long, global = true, hide = true, conflicts_with = "fuel")]
    no_fuel: bool,
    /// Do not read or write the precompiled-component cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Run (or publish) the component in FILE instead of the bundled one.
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "oci")]
    component: Option<PathBuf>,
    /// Run the component pulled from REF (registry/repository:tag or @sha256:...), every digest checked.
    #[arg(long, global = true, value_name = "REF")]
    oci: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Classify failure evidence: raw text from FILE (or stdin), printed as JSON.
    Classify {
        /// The file to read; `-` or nothing reads stdin.
        file: Option<PathBuf>,
        /// Read one JSON evidence object per line (at least {"text": ..., "exit_code": ...});
        /// print one classification per line, in order.
        #[arg(long)]
        jsonl: bool,
    },
    /// Decide the next action for a state (JSON) from FILE (or stdin).
    NextAction {
        /// The state file; `-` or nothing reads stdin.
        file: Option<PathBuf>,
        /// Print the greppable marker line `backstop.failure_class {json}` instead of the decision.
        #[arg(long)]
        marker: bool,
    },
    /// Print the failure signature of the detail in FILE (or stdin).
    Signature {
        /// The file to read; `-` or nothing reads stdin.
        file: Option<PathBuf>,
        /// The failing check's name, which leads the signature.
        #[arg(long)]
        check: Option<String>,
    },
    /// Replay the seed incidents: a 529 hours into a run, a retry that meets a test failure, the 84-failure task loop, a usage-limit stop.
    Demo,
    /// Print the package version, record schema version and marker-table digest.
    Info,
    /// Print the default configuration as JSON.
    DefaultConfig,
    /// Answer JSON requests, one per line on stdin, with one JSON response per line on stdout.
    Serve,
    /// Publish the component (bundled, or --component FILE) as an OCI artifact at REF (registry/repository:tag).
    Publish {
        /// e.g. 127.0.0.1:5000/backstop/policy:0.2.0 (plain HTTP, loopback registries only).
        reference: String,
    },
    /// Pull the component at REF (a tag, or @sha256:... to pin it), check every digest, write it to a file.
    Pull {
        /// e.g. 127.0.0.1:5000/backstop/policy@sha256:...
        reference: String,
        /// Where to write the component; default: the repository's last path component plus `.wasm`.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List the tags of a repository (registry/repository).
    Tags {
        /// e.g. 127.0.0.1:5000/backstop/policy
        repository: String,
    },
}

/// A failure of the command: exit code and message.
struct Fail(u8, String);

impl From<HostError> for Fail {
    fn from(e: HostError) -> Fail {
        match e {
            HostError::MemoryLimit { .. } | HostError::FuelLimit { .. } | HostError::Deadline { .. } => {
                Fail(3, e.to_string())
            }
            _ => Fail(1, e.to_string()),
        }
    }
}

impl From<OciError> for Fail {
    fn from(e: OciError) -> Fail {
        Fail(e.exit_code(), e.to_string())
    }
}

/// `println!` that returns a `Fail` instead of panicking when stdout is gone
/// (`backstop demo | head`).
macro_rules! say {
    () => {
        writeln!(std::io::stdout().lock()).map_err(|e| Fail(1, format!("writing stdout: {e}")))
    };
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*).map_err(|e| Fail(1, format!("writing stdout: {e}")))
    };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            eprintln!("backstop: {msg}");
            ExitCode::from(code)
        }
    }
}

/// The component's bytes: the bundled one, `--component FILE`, or pulled from `--oci REF`.
fn component_bytes(cli: &Cli) -> Result<std::borrow::Cow<'static, [u8]>, Fail> {
    if let Some(path) = &cli.component {
        let bytes = std::fs::read(path).map_err(|e| Fail(2, format!("cannot read {}: {e}", path.display())))?;
        return Ok(bytes.into());
    }
    if let Some(r) = &cli.oci {
        return Ok(oci::pull(&Reference::parse(r)?)?.component.into());
    }
    Ok(backstop_host::COMPONENT.into())
}

fn load(cli: &Cli) -> Result<Backstop, Fail> {
    load_bytes(cli, &component_bytes(cli)?)
}

fn load_bytes(cli: &Cli, bytes: &[u8]) -> Result<Backstop, Fail> {
    let deadline = (cli.deadline_ms > 0).then(|| std::time::Duration::from_millis(cli.deadline_ms));
    let limits = Limits { memory_bytes: cli.memory_mib.saturating_mul(1 << 20), deadline, fuel: cli.fuel };
    if !cli.no_cache {
        if let Some(dir) = default_cache_dir() {
            return Ok(Backstop::cached_bytes(bytes, &dir, limits)?.0);
        }
    }
    Ok(Backstop::from_bytes(bytes, limits)?)
}

fn read_input(file: Option<&Path>) -> Result<Vec<u8>, Fail> {
    let mut buf = Vec::new();
    match file {
        None => read_bounded(std::io::stdin().lock(), &mut buf, "stdin")?,
        Some(p) if p == Path::new("-") => read_bounded(std::io::stdin().lock(), &mut buf, "stdin")?,
        Some(p) => {
            let f = std::fs::File::open(p).map_err(|e| Fail(2, format!("cannot read {}: {e}", p.display())))?;
            read_bounded(f, &mut buf, &p.display().to_string())?
        }
    }
    Ok(buf)
}

fn read_bounded(r: impl Read, buf: &mut Vec<u8>, name: &str) -> Result<(), Fail> {
    r.take(MAX_INPUT + 1).read_to_end(buf).map_err(|e| Fail(2, format!("cannot read {name}: {e}")))?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(Fail(2, format!("{name} is larger than {} MiB", MAX_INPUT >> 20)));
    }
    Ok(())
}

/// Text for classification: invalid UTF-8 bytes become U+FFFD (documented).
fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_of<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, Fail> {
    let text = std::str::from_utf8(bytes).map_err(|e| Fail(2, format!("{what} is not UTF-8: {e}")))?;
    let mut de = serde_json::Deserializer::from_str(text);
    // serde_json refuses nesting deeper than 128 levels with an error, not a crash.
    let v = T::deserialize(&mut de).map_err(|e| Fail(2, format!("{what}: {e}")))?;
    de.end().map_err(|e| Fail(2, format!("{what}: {e}")))?;
    Ok(v)
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), Fail> {
    let s = serde_json::to_string(v).map_err(|e| Fail(1, e.to_string()))?;
    writeln!(std::io::stdout().lock(), "{s}").map_err(|e| Fail(1, format!("writing stdout: {e}")))
}

/// One line of `classify --jsonl`: a full evidence object, where `evidence`
/// is also accepted as the name of the text (as in labelled corpora).
fn jsonl_evidence(line: &str) -> Result<m::Evidence, String> {
    let mut v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let obj = v.as_object_mut().ok_or("expected a JSON object")?;
    if !obj.contains_key("text") {
        if let Some(t) = obj.remove("evidence") {
            obj.insert("text".into(), t);
        }
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn run(cli: Cli) -> Result<(), Fail> {
    match &cli.command {
        Command::Classify { file, jsonl: false } => {
            let text = text_of(&read_input(file.as_deref())?);
            let mut b = load(&cli)?;
            print_json(&b.classify(&m::Evidence::from_text(text))?)
        }
        Command::Classify { file, jsonl: true } => classify_jsonl(&cli, file.as_deref()),
        Command::NextAction { file, marker } => {
            let state: m::State = json_of(&read_input(file.as_deref())?, "state")?;
            let mut b = load(&cli)?;
            match b.next_action(&state)? {
                Ok(d) if *marker => {
                    say!("{}", backstop::marker_line(&d))?;
                    Ok(())
                }
                Ok(d) => print_json(&d),
                Err(e) => Err(Fail(2, e.to_string())),
            }
        }
        Command::Signature { file, check } => {
            let text = text_of(&read_input(file.as_deref())?);
            let mut b = load(&cli)?;
            say!("{}", b.signature(&text, check.as_deref())?)?;
            Ok(())
        }
        Command::Demo => demo(&mut load(&cli)?),
        Command::Info => print_json(&load(&cli)?.info()?),
        Command::DefaultConfig => print_json(&load(&cli)?.default_config()?),
        Command::Serve => {
            let mut b = load(&cli)?;
            let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
            backstop_host::serve::serve(&mut b, stdin.lock(), stdout.lock())
                .map_err(|e| Fail(1, format!("serve: {e}")))?;
            Ok(())
        }
        Command::Publish { reference } => publish(&cli, reference),
        Command::Pull { reference, output } => pull(reference, output.as_deref()),
        Command::Tags { repository } => print_json(&oci::tags(&Reference::parse(repository)?)?),
    }
}

/// RFC 3339 time of the artifact: `$SOURCE_DATE_EPOCH` (seconds) for a
/// reproducible artifact, else now.
fn created() -> Result<String, Fail> {
    let secs = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(s) => s.trim().parse::<u64>().map_err(|e| Fail(2, format!("SOURCE_DATE_EPOCH {s:?}: {e}")))?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| Fail(1, e.to_string()))?
            .as_secs(),
    };
    Ok(backstop::text::format_utc(secs.saturating_mul(1000)))
}

fn publish(cli: &Cli, reference: &str) -> Result<(), Fail> {
    let r = Reference::parse(reference)?;
    r.publish_tag()?;
    if cli.oci.is_some() {
        return Err(Fail(2, "publish takes the bundled component or --component FILE, not --oci".into()));
    }
    // Loading checks that the bytes are a Backstop component and reads its world.
    let bytes = component_bytes(cli)?;
    let mut b = load_bytes(cli, &bytes)?;
    let info = b.component_info()?;
    let created = created()?;
    let version = b.info()?.package_version;
    let annotations = [
        ("org.opencontainers.image.title", "backstop".to_string()),
        ("org.opencontainers.image.version", version),
        ("org.opencontainers.image.created", created.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let p = oci::publish(&r, &bytes, &oci::PublishOptions { component: info, created, annotations })?;
    print_json(&serde_json::json!({
        "reference": p.reference.to_string(),
        "manifest_digest": p.manifest_digest,
        "config_digest": p.config_digest,
        "layer_digest": p.layer_digest,
        "size": p.size,
    }))
}

fn pull(reference: &str, output: Option<&Path>) -> Result<(), Fail> {
    let r = Reference::parse(reference)?;
    let p = oci::pull(&r)?;
    let default = PathBuf::from(format!("{}.wasm", r.repository.rsplit('/').next().unwrap_or("component")));
    let path = output.unwrap_or(&default);
    std::fs::write(path, &p.component).map_err(|e| Fail(1, format!("cannot write {}: {e}", path.display())))?;
    print_json(&serde_json::json!({
        "reference": r.at_digest(&p.manifest_digest).to_string(),
        "manifest_digest": p.manifest_digest,
        "layer_digest": p.layer_digest,
        "size": p.component.len(),
        "file": path.display().to_string(),
    }))
}

fn classify_jsonl(cli: &Cli, file: Option<&Path>) -> Result<(), Fail> {
    let reader: Box<dyn BufRead> = match file {
        None => Box::new(std::io::stdin().lock()),
        Some(p) if p == Path::new("-") => Box::new(std::io::stdin().lock()),
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p).map_err(|e| Fail(2, format!("cannot read {}: {e}", p.display())))?,
        )),
    };
    let mut b = load(cli)?;
    let mut bad = 0usize;
    let mut first_bad = None;
    let out = std::io::stdout();
    let mut out = out.lock();
    for (n, line) in reader.split(b'\n').enumerate() {
        let line = line.map_err(|e| Fail(2, format!("reading line {}: {e}", n + 1)))?;
        if line.len() as u64 > MAX_INPUT {
            return Err(Fail(2, format!("line {} is larger than {} MiB", n + 1, MAX_INPUT >> 20)));
        }
        let line = text_of(&line);
        if line.trim().is_empty() {
            continue;
        }
        let result = match jsonl_evidence(&line) {
            Ok(e) => serde_json::to_string(&b.classify(&e)?).map_err(|e| Fail(1, e.to_string()))?,
            Err(e) => {
                bad += 1;
                first_bad.get_or_insert(format!("line {}: {e}", n + 1));
                // Keep the output aligned with the input: one line per line.
                serde_json::json!({ "error": format!("line {}: {e}", n + 1) }).to_string()
            }
        };
        writeln!(out, "{result}").map_err(|e| Fail(1, format!("writing stdout: {e}")))?;
    }
    match first_bad {
        None => Ok(()),
        Some(first) => Err(Fail(2, format!("{bad} malformed line(s); first: {first}"))),
    }
}

/// Asks the component and prints the decision and its marker line.
fn ask(
    b: &mut Backstop,
    label: &str,
    now: u64,
    entropy: u64,
    config: &m::Config,
    situation: m::Situation,
) -> Result<m::Decision, Fail> {
    let state = m::State { now, entropy, config: config.clone(), situation };
    let d = b.next_action(&state)?.map_err(|e| Fail(1, e.to_string()))?;
    say!("{label} -> {} ({})", d.action.as_str(), d.reasoning)?;
    say!("{}", backstop::marker_line(&d))?;
    Ok(d)
}

/// The seed incidents, decision by decision: the 529 hours into a run, a
/// retry that meets a real failure, the 84-failure task loop, and a run
/// stopped on a usage limit.
const SEC: u64 = 1_000_000_000;
const MIN_MS: u64 = 60_000;
/// Six hours into the seed run, ms since the epoch.
const HOURS_IN: u64 = 1_790_000_000_000 + 6 * 3_600_000;
const OVERLOADED: &str = "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.\nIf it persists, check https://status.claude.com.";

/// The seed run's step 12 failing with `stdout`, after five completed phases.
fn seed_step(stdout: &str, attempt: u32, waited: u64) -> m::Situation {
    let completed =
        ["workflow-prep", "workflow-worktree", "workflow-design", "workflow-tdd", "workflow-refactor-review"];
    let mut steps: Vec<m::StepReport> = completed
        .iter()
        .map(|id| m::StepReport { id: id.to_string(), status: "success".into(), ..Default::default() })
        .collect();
    steps.push(m::StepReport {
        id: "step-12-run-precommit".into(),
        status: "error".into(),
        error: Some("agent step failed: amplihack claude failed (exit 1)".into()),
        stdout: Some(stdout.into()),
        exit_code: Some(1),
        ..Default::default()
    });
    m::Situation::StepFailed(m::StepFailure {
        evidence: m::Evidence { steps, ..Default::default() },
        attempt,
        waited,
        ..Default::default()
    })
}

/// The four seed scenarios, decision by decision.
fn demo(b: &mut Backstop) -> Result<(), Fail> {
    let defaults = m::Config::default();
    demo_seed_incident(b, &defaults)?;
    say!()?;
    demo_retry_meets_work(b, &defaults)?;
    say!()?;
    demo_task_loop(b, &defaults)?;
    say!()?;
    demo_usage_limit(b)
}

fn demo_seed_incident(b: &mut Backstop, defaults: &m::Config) -> Result<(), Fail> {
    say!("== Scenario 1: the seed incident. Five phases done, six hours in; step 12 says only `exit 1`, its stdout holds a 529.")?;
    let (mut waited, mut now) = (0u64, HOURS_IN);
    for attempt in 1..=2u32 {
        let label = format!("attempt {attempt} failed");
        let d = ask(b, &label, now, 0x5eed_0000 + attempt as u64, defaults, seed_step(OVERLOADED, attempt, waited))?;
        let delay = d.delay.unwrap_or(0);
        waited += delay;
        now += delay / 1_000_000;
    }
    say!(
        "attempt 3 succeeded after {}s of backoff: the six-hour run goes on with its five completed phases.",
        waited / SEC
    )?;
    Ok(())
}

fn demo_retry_meets_work(b: &mut Backstop, defaults: &m::Config) -> Result<(), Fail> {
    say!(
        "== Scenario 2: the retry meets a real failure. The 529 retries; then the tests fail, which no retry can fix."
    )?;
    let d = ask(b, "attempt 1 failed", HOURS_IN, 7, defaults, seed_step(OVERLOADED, 1, 0))?;
    let delay = d.delay.unwrap_or(0);
    let tests_failed = "running 4 tests\ntest result: FAILED. 3 passed; 1 failed";
    ask(b, "attempt 2 failed", HOURS_IN + delay / 1_000_000, 8, defaults, seed_step(tests_failed, 2, delay))?;
    say!("The run stops loudly with the class and the completed phases; whether the work should go on is the host's judgement.")?;
    Ok(())
}

fn demo_task_loop(b: &mut Backstop, defaults: &m::Config) -> Result<(), Fail> {
    say!("== Scenario 3: a task loop that once failed 84 times in three minutes on the same worktree error.")?;
    let mut failures = Vec::new();
    let mut at = HOURS_IN;
    loop {
        failures.push(at);
        let situation = m::Situation::TaskFailed(m::TaskFailure { failures: failures.clone() });
        let d = ask(b, &format!("task failure {}", failures.len()), at, 0, defaults, situation)?;
        match d.delay {
            Some(delay) if d.action == m::Action::Proceed => at += delay / 1_000_000 + MIN_MS / 2,
            _ => break,
        }
    }
    say!("{} failures instead of 84, then the work is blocked until a human unblocks it.", failures.len())?;
    Ok(())
}

fn demo_usage_limit(b: &mut Backstop) -> Result<(), Fail> {
    say!(
        "== Scenario 4: a run stops on a usage limit whose reset is stated as an epoch; auto-resume is on (3 resumes)."
    )?;
    let mut config = m::Config::default();
    config.resume.max_resumes = 3;
    let reset_s = HOURS_IN / 1000 + 2 * 3600;
    let stop = m::RunStop {
        code: "USAGE_LIMIT_REACHED".into(),
        evidence: Some(m::Evidence::from_text(format!("Claude AI usage limit reached|{reset_s}"))),
        ..Default::default()
    };
    let d = ask(b, "run stopped", HOURS_IN, 3, &config, m::Situation::RunStopped(stop))?;
    if let Some(at) = d.resume_at {
        say!(
            "The run resumes by itself at {} (the reset plus a margin), no human needed.",
            backstop::text::format_utc(at)
        )?;
    }
    Ok(())
}
