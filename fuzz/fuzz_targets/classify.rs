//! `classify` on arbitrary bytes: as free text (invalid UTF-8 read lossily, as
//! the CLI does) and, when the bytes are a JSON evidence object, as that.
//! Never panics; the result is always well-formed.
#![no_main]

use backstop::model::{Evidence, FailureClass};
use libfuzzer_sys::fuzz_target;

fn check(e: &Evidence) {
    let c = backstop::classify(e);
    // The record invariants a host relies on.
    assert_eq!(c.retryable, c.class == FailureClass::TransientTransport);
    assert_eq!(c.signal.is_none(), c.class == FailureClass::Indeterminate);
    // The echo is bounded: at most echo-bytes of text plus the signal line and the elision note.
    assert!(c.evidence.len() <= 2_000 + 2 * 256 + 64 + 512, "echo of {} bytes", c.evidence.len());
    serde_json::to_string(&c).expect("classification serialises");
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    check(&Evidence::from_text(text.as_ref()));
    if let Ok(e) = serde_json::from_slice::<Evidence>(data) {
        check(&e);
    }
});
