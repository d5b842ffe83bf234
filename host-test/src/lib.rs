//! The wasmtime host of the Backstop component.
//!
//! The component imports nothing, so it is instantiated with an empty
//! [`Linker`]: no WASI, no capabilities. Each [`Backstop`] compiles (or loads a
//! precompiled) component once, links it once into an `InstancePre`, and
//! reuses one instance across calls; a call that traps (for example on a limit)
//! discards that instance and the next call starts a fresh one.
//!
//! Every call runs under limits, set per [`Limits`]: a cap on the instance's
//! linear memory (a store limiter), a wall-clock deadline (wasmtime's epoch
//! interruption: while a call runs, one process-wide thread advances the
//! epoch of every live engine every millisecond, and a call traps when its
//! deadline's epoch comes; the thread sleeps while no call runs), and, when asked for, an exact instruction budget (fuel, which
//! costs more: every instruction is counted). A call that exceeds a limit
//! fails with a [`HostError`] that names it.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use backstop::model as m;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, EngineWeak, ResourceLimiter, Store, Trap};

mod bindings {
    wasmtime::component::bindgen!({
        world: "backstop",
        path: "../wit",
    });
}

use bindings::exports::backstop::policy::types as w;

pub mod oci;
pub mod serve;

include!("../../src/wit_convert.rs");

/// The component built by `build.rs` from this workspace.
pub const COMPONENT: &[u8] = include_bytes!(env!("BACKSTOP_COMPONENT"));

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most linear memory the instance may grow to, in bytes. Default 256 MiB.
    pub memory_bytes: usize,
    /// The wall-clock time one call may take, to the next millisecond.
    /// Default 10 s: a bound on a runaway call, not a budget (a 64 KiB classify
    /// takes well under a millisecond; the largest history allowed, 100,000
    /// events, about 0.3 s).
    /// `None`: no deadline.
    pub deadline: Option<Duration>,
    /// An exact budget of fuel (roughly, wasm instructions) per call, for a
    /// host that needs a deterministic bound. Default `None`: the deadline
    /// bounds a call. `Some` compiles the component with fuel metering, which
    /// makes every call slower (see BENCHMARKS.md); metering is fixed when the
    /// component is compiled: `set_limits` cannot switch it.
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { memory_bytes: 256 << 20, deadline: Some(Duration::from_secs(10)), fuel: None }
    }
}

/// How often the epoch of every live engine advances.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The process-wide epoch ticker: the engines it advances, and how many
/// calls are running. Its thread sleeps while no call runs, and advances
/// every live engine's epoch each [`EPOCH_TICK`] while one does.
struct Ticker {
    state: Mutex<(Vec<EngineWeak>, usize)>,
    running: Condvar,
}

fn ticker() -> &'static Ticker {
    static TICKER: OnceLock<Ticker> = OnceLock::new();
    TICKER.get_or_init(|| {
        std::thread::Builder::new()
            .name("backstop-epoch".into())
            .spawn(|| {
                let t = ticker();
                loop {
                    let guard = t.state.lock().unwrap_or_else(|e| e.into_inner());
                    drop(t.running.wait_while(guard, |(_, calls)| *calls == 0).unwrap_or_else(|e| e.into_inner()));
                    std::thread::sleep(EPOCH_TICK);
                    let mut state = t.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.0.retain(|w| w.upgrade().map(|e| e.increment_epoch()).is_some());
                }
            })
            .expect("the epoch thread starts");
        Ticker { state: Mutex::new((Vec::new(), 0)), running: Condvar::new() }
    })
}

/// Registers `engine` with the ticker, which advances its epoch while any
/// call runs, until the engine is dropped.
fn tick(engine: &Engine) {
    ticker().state.lock().unwrap_or_else(|e| e.into_inner()).0.push(engine.weak());
}

/// A running call, for the ticker: counted while it lives.
struct Running;

impl Running {
    fn start() -> Running {
        let t = ticker();
        t.state.lock().unwrap_or_else(|e| e.into_inner()).1 += 1;
        t.running.notify_one();
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        ticker().state.lock().unwrap_or_else(|e| e.into_inner()).1 -= 1;
    }
}

/// The epoch ticks a call under `deadline` may run: the deadline rounded up
/// to whole ticks, and one more for the tick in progress. No deadline is
/// ten thousand years of ticks.
fn deadline_ticks(deadline: Option<Duration>) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    match deadline {
        Some(d) => (d.as_nanos().div_ceil(tick) + 1).min(u64::MAX as u128 / 2) as u64,
        None => 1 << 48,
    }
}

/// Why a call through the component failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The instance asked for more memory than `Limits::memory_bytes`.
    MemoryLimit { limit: usize, requested: usize },
    /// The call burned all of `Limits::fuel`.
    FuelLimit { limit: u64 },
    /// The call ran past `Limits::deadline`.
    Deadline { limit: Duration },
    /// `set_limits` asked to switch fuel metering on or off.
    MeteringFixed,
    /// The component trapped for another reason.
    Trap(String),
    /// The component could not be compiled, loaded or instantiated.
    Load(String),
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::MemoryLimit { limit, requested } => write!(
                f,
                "memory limit hit: the component asked for {requested} bytes of linear memory, the limit is {limit} bytes"
            ),
            HostError::FuelLimit { limit } => write!(f, "fuel limit hit: the call burned all {limit} units of fuel"),
            HostError::Deadline { limit } => {
                write!(f, "deadline hit: the call ran longer than its limit of {} ms", limit.as_millis())
            }
            HostError::Trap(m) => write!(f, "the component trapped: {m}"),
            HostError::Load(m) => write!(f, "loading the component failed: {m}"),
            HostError::MeteringFixed => {
                write!(f, "fuel metering is fixed when the component is compiled: load a new Backstop to switch it")
            }
        }
    }
}

impl std::error::Error for HostError {}

/// The store's data: the memory limiter and what it saw.
struct HostState {
    memory_limit: usize,
    memory_refused: Option<usize>,
}

impl ResourceLimiter for HostState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.memory_refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// A loaded Backstop component, ready to call.
pub struct Backstop {
    engine: Engine,
    component: Component,
    pre: bindings::BackstopPre<HostState>,
    limits: Limits,
    live: Option<(Store<HostState>, bindings::Backstop)>,
}

/// An instance made by [`Backstop::fresh_instance`]; dropping it tears it down.
pub struct FreshInstance {
    _store: Store<HostState>,
    _instance: bindings::Backstop,
}

/// How many instances an engine's pool holds at once. A `Backstop` keeps one
/// live instance and makes the next one when it drops it.
pub const POOL_INSTANCES: u32 = 4;
/// How much of a pooled instance's linear memory stays resident when the
/// instance is torn down (reset in place instead of unmapped), so that the
/// next instance's first call does not fault those pages back in: the
/// component's data, stack and the heap of a typical call fit.
pub const POOL_KEEP_RESIDENT: usize = 4 << 20;

/// The engine configuration of a Backstop host: epoch interruption (the
/// deadline) always, fuel metering on or off, and instances from a pool
/// (wasmtime's pooling allocator) whose memory stays resident between
/// instances: a fresh instance and its first call cost about three steady
/// calls instead of five (BENCHMARKS.md, host start). The engine's epoch
/// advances while it lives.
pub fn engine(metered: bool) -> Result<Engine, HostError> {
    let mut config = wasmtime::Config::new();
    config.consume_fuel(metered);
    config.epoch_interruption(true);
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 4)
        .total_memories(POOL_INSTANCES)
        .total_tables(POOL_INSTANCES * 4)
        // The most a 32-bit memory can hold: `Limits::memory_bytes` (the
        // store's limiter) is the bound a call meets, not the pool.
        .max_memory_size(1 << 32)
        .linear_memory_keep_resident(POOL_KEEP_RESIDENT)
        .table_keep_resident(64 << 10);
    config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config).map_err(|e| HostError::Load(format!("{e:#}")))?;
    tick(&engine);
    Ok(engine)
}

/// Where `Backstop::cached` keeps precompiled artifacts by default:
/// `$BACKSTOP_CACHE_DIR`, else `$XDG_CACHE_HOME/backstop`, else `~/.cache/backstop`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BACKSTOP_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("backstop"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("backstop"))
}

/// How the component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Compiled from the component bytes.
    Compiled,
    /// Loaded from a precompiled artifact.
    Precompiled,
}

/// A JSON function's answer: its text, or its refusal read back into the
/// policy error (a refusal that is not one is the component's fault).
fn refusal(r: Result<String, String>) -> Result<Result<String, m::PolicyError>, HostError> {
    match r {
        Ok(text) => Ok(Ok(text)),
        Err(e) => serde_json::from_str(&e)
            .map(Err)
            .map_err(|err| HostError::Trap(format!("the component refused with {e:?}, not a policy error: {err}"))),
    }
}

/// The engine interface this host links: `backstop:policy/engine@<version>`.
const ENGINE_PREFIX: &str = "backstop:policy/engine@";

/// Refuses a component whose contract version is not this host's, naming both
/// versions. A component that exports no engine at all is left to the linker,
/// whose error says what is missing.
fn contract(engine: &Engine, component: &Component) -> Result<(), HostError> {
    let ours = env!("CARGO_PKG_VERSION");
    let exports: Vec<String> = component.component_type().exports(engine).map(|(n, _)| n.to_string()).collect();
    match exports.iter().find_map(|e| e.strip_prefix(ENGINE_PREFIX)) {
        Some(theirs) if theirs != ours => Err(HostError::Load(format!(
            "the component's contract version {theirs} is not supported by this host (backstop-host {ours} links contract {ours} only)"
        ))),
        _ => Ok(()),
    }
}

impl Backstop {
    /// Compiles the bundled component.
    pub fn new() -> Result<Backstop, HostError> {
        Backstop::from_bytes(COMPONENT, Limits::default())
    }

    /// Compiles a component from its bytes.
    pub fn from_bytes(bytes: &[u8], limits: Limits) -> Result<Backstop, HostError> {
        let engine = engine(limits.fuel.is_some())?;
        let component = Component::new(&engine, bytes).map_err(|e| HostError::Load(format!("{e:#}")))?;
        Backstop::link(engine, component, limits)
    }

    /// Compiles the component in `path` (for example one pulled from a registry
    /// with `backstop pull`). It must export the same contract version as this
    /// host: another version fails to link with `HostError::Load`.
    pub fn from_file(path: &Path, limits: Limits) -> Result<Backstop, HostError> {
        let bytes = std::fs::read(path).map_err(|e| HostError::Load(format!("cannot read {}: {e}", path.display())))?;
        Backstop::from_bytes(&bytes, limits)
    }

    /// Loads the bundled component from a precompiled artifact in `dir`, named
    /// by the component's digest; compiles and writes it when it is missing or
    /// was made by another engine version or configuration (wasmtime checks both).
    pub fn cached(dir: &Path, limits: Limits) -> Result<(Backstop, Origin), HostError> {
        Backstop::cached_bytes(COMPONENT, dir, limits)
    }

    /// As [`Backstop::cached`], for the component `bytes`.
    pub fn cached_bytes(bytes: &[u8], dir: &Path, limits: Limits) -> Result<(Backstop, Origin), HostError> {
        let metered = limits.fuel.is_some();
        let engine = engine(metered)?;
        let digest: String = Sha256::digest(bytes).iter().take(12).map(|b| format!("{b:02x}")).collect();
        let metering = if metered { "fuel" } else { "nofuel" };
        let path = dir.join(format!("backstop-{digest}-wasmtime{}-{metering}.cwasm", wasmtime_version()));
        // Read into memory rather than map the file: a file truncated under a
        // live mapping would crash the process.
        if let Ok(bytes) = std::fs::read(&path) {
            // SAFETY: the artifact is one this function wrote from the component
            // with this digest; wasmtime checks its header, version and configuration
            // and rejects anything else, which is then recompiled.
            if let Ok(component) = unsafe { Component::deserialize(&engine, &bytes) } {
                return Ok((Backstop::link(engine, component, limits)?, Origin::Precompiled));
            }
        }
        let component = Component::new(&engine, bytes).map_err(|e| HostError::Load(format!("{e:#}")))?;
        if let Ok(bytes) = component.serialize() {
            // A cache that cannot be written is not an error: the next start compiles again.
            let _ = std::fs::create_dir_all(dir);
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, &bytes).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        Ok((Backstop::link(engine, component, limits)?, Origin::Compiled))
    }

    fn link(engine: Engine, component: Component, limits: Limits) -> Result<Backstop, HostError> {
        contract(&engine, &component)?;
        // An empty linker: the component imports nothing and gets nothing.
        let linker: Linker<HostState> = Linker::new(&engine);
        let pre = linker.instantiate_pre(&component).map_err(|e| HostError::Load(format!("{e:#}")))?;
        let pre = bindings::BackstopPre::new(pre).map_err(|e| HostError::Load(format!("{e:#}")))?;
        Ok(Backstop { engine, component, pre, limits, live: None })
    }

    /// The limits applied to each call.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits; they apply from the next call (a fresh instance).
    /// Fails with `MeteringFixed` when it would switch fuel metering on or off,
    /// which needs a newly compiled component.
    pub fn set_limits(&mut self, limits: Limits) -> Result<(), HostError> {
        if limits.fuel.is_some() != self.limits.fuel.is_some() {
            return Err(HostError::MeteringFixed);
        }
        self.limits = limits;
        self.live = None;
        Ok(())
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn component(&self) -> &Component {
        &self.component
    }

    /// Names of the component's imports (always empty for Backstop).
    pub fn imports(&self) -> Vec<String> {
        self.component.component_type().imports(&self.engine).map(|(n, _)| n.to_string()).collect()
    }

    /// Names of the component's exports.
    pub fn exports(&self) -> Vec<String> {
        self.component.component_type().exports(&self.engine).map(|(n, _)| n.to_string()).collect()
    }

    /// The component's world as an OCI artifact's config records it: exports,
    /// imports and the world name (`backstop:policy/backstop@<version>`).
    pub fn component_info(&mut self) -> Result<oci::ComponentInfo, HostError> {
        let version = self.info()?.package_version;
        Ok(oci::ComponentInfo {
            exports: self.exports(),
            imports: self.imports(),
            target: Some(format!("backstop:policy/backstop@{version}")),
        })
    }

    /// Instantiates a fresh instance from the `InstancePre` (no reuse). It
    /// is torn down when the returned value is dropped, so that a caller can
    /// time the two apart.
    pub fn fresh_instance(&self) -> Result<FreshInstance, HostError> {
        self.instantiate().map(|(store, instance)| FreshInstance { _store: store, _instance: instance })
    }

    fn instantiate(&self) -> Result<(Store<HostState>, bindings::Backstop), HostError> {
        let state = HostState { memory_limit: self.limits.memory_bytes, memory_refused: None };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| s as &mut dyn ResourceLimiter);
        store.set_epoch_deadline(deadline_ticks(self.limits.deadline));
        if let Some(fuel) = self.limits.fuel {
            store.set_fuel(fuel).map_err(|e| HostError::Load(format!("{e:#}")))?;
        }
        let instance = self.pre.instantiate(&mut store).map_err(|e| HostError::Load(format!("{e:#}")))?;
        Ok((store, instance))
    }

    /// Runs `f` on the live instance with fresh fuel; a trap discards the instance.
    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Store<HostState>, &bindings::Backstop) -> wasmtime::Result<T>,
    ) -> Result<T, HostError> {
        if self.live.is_none() {
            self.live = Some(self.instantiate()?);
        }
        let limits = self.limits;
        let (store, instance) = self.live.as_mut().expect("instance is live");
        if let Some(fuel) = limits.fuel {
            store.set_fuel(fuel).map_err(|e| HostError::Trap(format!("{e:#}")))?;
        }
        store.set_epoch_deadline(deadline_ticks(limits.deadline));
        store.data_mut().memory_refused = None;
        let running = Running::start();
        let result = f(store, instance);
        drop(running);
        match result {
            Ok(v) => Ok(v),
            Err(e) => {
                let refused = store.data().memory_refused;
                self.live = None;
                if e.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
                    return Err(HostError::FuelLimit { limit: limits.fuel.unwrap_or(0) });
                }
                if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    return Err(HostError::Deadline { limit: limits.deadline.unwrap_or_default() });
                }
                if let Some(requested) = refused {
                    return Err(HostError::MemoryLimit { limit: limits.memory_bytes, requested });
                }
                Err(HostError::Trap(format!("{e:#}")))
            }
        }
    }

    /// `classify` through the component.
    pub fn classify(&mut self, evidence: &m::Evidence) -> Result<m::Classification, HostError> {
        let e: w::Evidence = evidence.clone().conv();
        self.call(|s, b| b.backstop_policy_engine().call_classify(s, &e)).map(Conv::conv)
    }

    /// `classify-with` through the component: `classify` under a configuration
    /// (its evidence bounds and operator markers).
    pub fn classify_with(
        &mut self,
        evidence: &m::Evidence,
        config: &m::Config,
    ) -> Result<Result<m::Classification, m::PolicyError>, HostError> {
        let e: w::Evidence = evidence.clone().conv();
        let c: w::Config = config.clone().conv();
        self.call(|s, b| b.backstop_policy_engine().call_classify_with(s, &e, &c))
            .map(|r| r.map(Conv::conv).map_err(Conv::conv))
    }

    /// `next-action` through the component.
    pub fn next_action(&mut self, state: &m::State) -> Result<Result<m::Decision, m::PolicyError>, HostError> {
        let st: w::State = state.clone().conv();
        self.call(|s, b| b.backstop_policy_engine().call_next_action(s, &st))
            .map(|r| r.map(Conv::conv).map_err(Conv::conv))
    }

    /// `signature` through the component.
    pub fn signature(&mut self, detail: &str, check: Option<&str>) -> Result<String, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_signature(s, detail, check))
    }

    /// `default-config` through the component.
    pub fn default_config(&mut self) -> Result<m::Config, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_default_config(s)).map(Conv::conv)
    }

    /// `info` through the component.
    pub fn info(&mut self) -> Result<m::PolicyInfo, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_info(s)).map(Conv::conv)
    }

    /// `classify-json` through the component: evidence as JSON text in, the
    /// classification as JSON text out.
    pub fn classify_json(&mut self, evidence: &str) -> Result<Result<String, m::PolicyError>, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_classify_json(s, evidence)).and_then(refusal)
    }

    /// `classify-with-json` through the component.
    pub fn classify_with_json(
        &mut self,
        evidence: &str,
        config: &str,
    ) -> Result<Result<String, m::PolicyError>, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_classify_with_json(s, evidence, config)).and_then(refusal)
    }

    /// `next-action-json` through the component: the state as JSON text in,
    /// the decision record as JSON text out.
    pub fn next_action_json(&mut self, state: &str) -> Result<Result<String, m::PolicyError>, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_next_action_json(s, state)).and_then(refusal)
    }

    /// `default-config-json` through the component.
    pub fn default_config_json(&mut self) -> Result<String, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_default_config_json(s))
    }

    /// `info-json` through the component.
    pub fn info_json(&mut self) -> Result<String, HostError> {
        self.call(|s, b| b.backstop_policy_engine().call_info_json(s))
    }
}

/// The wasmtime version this host links.
pub fn wasmtime_version() -> &'static str {
    "48.0.8"
}
