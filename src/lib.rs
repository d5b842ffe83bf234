//! Backstop: a retry-policy engine for autonomous agent pipelines.
//!
//! The crate is a pure core (no I/O, no clock, no randomness: the host passes
//! `now` and entropy) and, on `wasm32`, one glue module that exports it as the
//! WebAssembly component described by `wit/`.

pub mod automaton;
pub mod backoff;
pub mod breaker;
pub mod civil;
pub mod classify;
pub mod codeset;
pub mod config;
pub mod decision;
pub mod hints;
pub mod json;
pub mod jsonpath;
pub mod limits;
pub mod markers;
pub mod model;
pub mod patterns;
pub mod policy;
pub mod record;
pub mod reset;
pub mod resume;
pub mod signature;
pub mod statusforms;
pub mod text;
pub mod transport;
pub mod weigh;
pub mod words;

#[cfg(target_arch = "wasm32")]
mod component;

pub use classify::classify;
pub use model::*;
pub use policy::next_action;
pub use record::{marker_line, MARKER_PREFIX, SCHEMA_VERSION};
pub use signature::signature;

/// The package version.
pub const PACKAGE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `classify` as `next-action` sees it: with the configuration's evidence
/// bounds and operator markers. Fails with `invalid-config` as `next-action` does.
pub fn classify_with_config(evidence: &Evidence, config: &Config) -> Result<Classification, PolicyError> {
    config::validate(config)?;
    Ok(classify::classify_configured(evidence, config))
}

/// The default configuration.
pub fn default_config() -> Config {
    Config::default()
}

/// Package version, schema version and the marker-table digest.
/// Cheap: it compiles no table.
pub fn info() -> PolicyInfo {
    let (markers_digest, marker_count) = markers::shipped_info();
    PolicyInfo {
        package_version: PACKAGE_VERSION.to_string(),
        schema_version: SCHEMA_VERSION,
        markers_digest,
        marker_count,
    }
}
