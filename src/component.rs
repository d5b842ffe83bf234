//! The component's glue: the wit-bindgen export of `wit/`, converting to and
//! from the core's types (the conversion table is `wit_convert.rs`, shared
//! with the wasmtime host) and calling the core (the JSON functions: `json.rs`).
//! Nothing else.

mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "backstop",
    });
}

use crate::model as m;
use bindings::exports::backstop::policy::engine::Guest;
use bindings::exports::backstop::policy::types as w;

include!("wit_convert.rs");

struct Component;

impl Guest for Component {
    fn classify(evidence: w::Evidence) -> w::Classification {
        crate::classify(&evidence.conv()).conv()
    }

    fn classify_with(evidence: w::Evidence, config: w::Config) -> Result<w::Classification, w::PolicyError> {
        crate::classify_with_config(&evidence.conv(), &config.conv()).map(Conv::conv).map_err(Conv::conv)
    }

    fn next_action(state: w::State) -> Result<w::Decision, w::PolicyError> {
        crate::next_action(&state.conv()).map(Conv::conv).map_err(Conv::conv)
    }

    fn signature(detail: String, check: Option<String>) -> String {
        crate::signature(&detail, check.as_deref())
    }

    fn default_config() -> w::Config {
        crate::default_config().conv()
    }

    fn info() -> w::PolicyInfo {
        crate::info().conv()
    }

    fn classify_json(evidence: String) -> Result<String, String> {
        crate::json::classify_json(&evidence).map_err(|e| crate::json::error_json(&e))
    }

    fn classify_with_json(evidence: String, config: String) -> Result<String, String> {
        crate::json::classify_with_json(&evidence, &config).map_err(|e| crate::json::error_json(&e))
    }

    fn next_action_json(state: String) -> Result<String, String> {
        crate::json::next_action_json(&state).map_err(|e| crate::json::error_json(&e))
    }

    fn default_config_json() -> String {
        crate::json::default_config_json()
    }

    fn info_json() -> String {
        crate::json::info_json()
    }
}

bindings::export!(Component with_types_in bindings);
