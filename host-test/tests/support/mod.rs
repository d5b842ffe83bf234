//! Running the `backstop` binary from the tests, as a user would.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Runs `backstop ARGS` with `stdin`, a cache under the test target dir.
pub fn cli(args: &[&str], stdin: &[u8]) -> Output {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache");
    let mut child = Command::new(env!("CARGO_BIN_EXE_backstop"))
        .args(args)
        .env("BACKSTOP_CACHE_DIR", &cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("backstop runs");
    // The CLI may refuse before reading all of stdin: a broken pipe is fine.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

/// Writes a file under the test target dir and returns its path.
pub fn file(name: &str, content: &[u8]) -> PathBuf {
    let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&p, content).unwrap();
    p
}
