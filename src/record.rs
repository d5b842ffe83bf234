//! The decision record: one line of compact JSON with a stable key order
//! (the field order of [`Decision`]), prefixed for grep.

use crate::model::Decision;

/// The decision-record schema version. Changes only with a documented migration.
pub const SCHEMA_VERSION: u32 = 1;

/// The prefix of the greppable marker line (one trailing space).
pub const MARKER_PREFIX: &str = "backstop.failure_class ";

/// The marker line: `backstop.failure_class {json}`.
pub fn marker_line(d: &Decision) -> String {
    format!("{MARKER_PREFIX}{}", d.record_json)
}
