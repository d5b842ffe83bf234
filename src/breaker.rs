//! The identical-failure circuit breaker over a work item's history.

use crate::model::*;

pub fn decide(_now: Timestamp, _config: &Config, _w: &WorkFailure) -> Result<Decision, PolicyError> {
    Err(PolicyError::input("situation.work_failed", "not implemented in this build yet"))
}
