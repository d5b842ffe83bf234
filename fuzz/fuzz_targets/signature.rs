//! The failure signature on arbitrary bytes: the detail, and an optional check
//! name after the first NUL byte. Never panics; the signature is bounded and
//! the same input always gives the same signature.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (detail, check) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(String::from_utf8_lossy(&data[i + 1..]).into_owned())),
        None => (data, None),
    };
    let detail = String::from_utf8_lossy(detail);
    let a = backstop::signature(&detail, check.as_deref());
    let b = backstop::signature(&detail, check.as_deref());
    assert_eq!(a, b, "signature is deterministic");
    assert!(!a.contains(['\n', '\r']), "a signature is one line: {a:?}");
    assert!(a.len() <= backstop::signature::MAX_SIGNATURE, "signature of {} bytes", a.len());
});
