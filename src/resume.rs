//! Run-level auto-resume.

use crate::model::*;

pub fn decide(_now: Timestamp, _entropy: u64, _config: &Config, _r: &RunStop) -> Result<Decision, PolicyError> {
    Err(PolicyError::input("situation.run_stopped", "not implemented in this build yet"))
}
