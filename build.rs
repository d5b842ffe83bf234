//! Compacts the marker tables for the component: `markers/markers.jsonl`
//! without the `source` of each entry (the sources stay in the repository and
//! in `MARKERS_JSONL` for the tests; the component only matches), and the
//! SHA-256 of the full file, which `info()` reports as the tables' digest.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

fn main() {
    let path = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("markers").join("markers.jsonl");
    println!("cargo:rerun-if-changed={}", path.display());
    let full = std::fs::read_to_string(&path).expect("markers/markers.jsonl is readable");
    let mut compact = String::with_capacity(full.len() / 2);
    for line in full.lines().filter(|l| !l.trim().is_empty()) {
        // A line that does not parse is kept whole, so `markers::parse` names it.
        let Ok(serde_json::Value::Object(mut entry)) = serde_json::from_str(line) else {
            compact.push_str(line);
            compact.push('\n');
            continue;
        };
        entry.remove("source");
        compact.push_str(&serde_json::Value::Object(entry).to_string());
        compact.push('\n');
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("markers.compact.jsonl"), compact).unwrap();
    let digest: String = Sha256::digest(full.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(out.join("markers.sha256"), digest).unwrap();
}
