//! `next-action`: validates the configuration, then answers the situation.

use crate::model::*;
use crate::{breaker, config, limits, resume, transport};

pub fn next_action(state: &State) -> Result<Decision, PolicyError> {
    config::validate(&state.config)?;
    let c = &state.config;
    match &state.situation {
        Situation::StepFailed(s) => transport::decide(state.now, state.entropy, c, s),
        Situation::WorkFailed(w) => breaker::decide(c, w),
        Situation::TaskFailed(t) => limits::window(state.now, c, t),
        Situation::CycleEntered(e) => limits::cycle(c, e),
        Situation::RunStopped(r) => resume::decide(state.now, state.entropy, c, r),
    }
}
