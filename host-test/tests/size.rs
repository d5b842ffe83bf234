//! The component's size is a decision: this test fails when the component
//! built by `build.rs` grows past the limit, and prints its size in bytes and
//! gzipped (run with `--nocapture` to see it; `scripts/bench` reports it too).

use std::io::Write;

use backstop_host::COMPONENT;
use flate2::write::GzEncoder;
use flate2::Compression;

/// The most bytes the component may have. Raise it only on purpose, in its own
/// commit that says what the bytes bought.
const LIMIT_BYTES: usize = 1_048_576;

fn gzipped_len(bytes: &[u8]) -> usize {
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(bytes).expect("gzip into memory");
    gz.finish().expect("gzip into memory").len()
}

#[test]
fn component_stays_under_the_size_limit() {
    // The limit is for the component as shipped: its core module optimised
    // by binaryen's wasm-opt (host-test/build.rs).
    assert_eq!(
        env!("BACKSTOP_COMPONENT_OPTIMIZED"),
        "1",
        "the component was built without binaryen's wasm-opt (see the build's warning): \
         install it (apt-get install binaryen, or set BACKSTOP_WASM_OPT) and rebuild"
    );
    let bytes = COMPONENT.len();
    let gz = gzipped_len(COMPONENT);
    println!("component: {bytes} bytes, {gz} bytes gzipped (limit {LIMIT_BYTES} bytes)");
    assert!(
        bytes <= LIMIT_BYTES,
        "the component is {bytes} bytes ({gz} gzipped), past the limit of {LIMIT_BYTES} bytes: \
         find what grew it (`twiggy top`, features of dependencies) or raise LIMIT_BYTES on purpose"
    );
}

#[test]
fn the_size_check_measures_a_real_component() {
    // A component starts with the wasm magic and the component-model layer
    // (version 0x0d, layer 1); an empty or stray file would pass the limit
    // without measuring anything.
    assert_eq!(&COMPONENT[..4], b"\0asm");
    assert_eq!(&COMPONENT[4..8], &[0x0d, 0x00, 0x01, 0x00]);
    assert!(COMPONENT.len() > 10_000, "{} bytes is too small to be the Backstop component", COMPONENT.len());
    // gzip shrinks wasm but never to nothing: the measurement is of these bytes.
    let gz = gzipped_len(COMPONENT);
    assert!(gz < COMPONENT.len() && gz > COMPONENT.len() / 20);
}
