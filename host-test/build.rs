//! Builds the `backstop` guest crate for wasm32-unknown-unknown with a nested
//! cargo invocation, then wraps the core module into a WebAssembly component
//! with `wit-component` (library, not the wasm-tools CLI).
//!
//! Output: `$OUT_DIR/backstop.component.wasm` (exposed to the crate as
//! `env!("BACKSTOP_COMPONENT")`), plus a copy at
//! `<workspace>/target/backstop.component.wasm` for humans/other tools.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const GUEST_PACKAGE: &str = "backstop";
const GUEST_PROFILE: &str = "component";
const WASM_TARGET: &str = "wasm32-unknown-unknown";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().expect("host-test lives inside the workspace").to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    // Rebuild when the guest sources / WIT change (directories are scanned
    // recursively by cargo for mtime changes); the guest's own build script
    // compiles the marker tables and learns the weights from tests/corpus.
    for p in ["src", "wit", "markers", "build.rs", "tests/corpus", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(p).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BACKSTOP_GUEST_TARGET_DIR");

    // Avoid infinite recursion if someone builds this crate *for* wasm32
    // (or if the nested build somehow pulled host-test in).
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        panic!("host-test is a native-only crate; do not build it for wasm32");
    }

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    ensure_wasm_target(&rustc);

    // Separate target dir: the outer cargo holds the lock on its own target
    // dir for the whole build, so reusing it from a build script deadlocks.
    let guest_target_dir = env::var_os("BACKSTOP_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| outer_target_dir(&workspace).join("guest"));

    let mut cmd = Command::new(&cargo);
    cmd.current_dir(&workspace)
        .arg("build")
        .arg("--package")
        .arg(GUEST_PACKAGE)
        .arg("--lib")
        .arg("--target")
        .arg(WASM_TARGET)
        .arg("--profile")
        .arg(GUEST_PROFILE)
        .arg("--target-dir")
        .arg(&guest_target_dir);
    if env::var_os("CARGO_NET_OFFLINE").is_some() {
        cmd.arg("--offline");
    }
    // Env the outer cargo sets for build scripts that would leak into / break
    // the nested build (host flags, coverage instrumentation, the outer
    // target dir, a forced build target, wrappers, coverage, ...).
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTDOCFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_LLVM_COV",
        "CARGO_LLVM_COV_TARGET_DIR",
        "LLVM_PROFILE_FILE",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS",
        "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER",
    ] {
        cmd.env_remove(var);
    }
    // NOTE: CARGO_MAKEFLAGS (jobserver) is deliberately inherited so the nested
    // build shares the outer -j budget instead of oversubscribing the cores.
    // Make sure the nested cargo uses the same rustc as the outer build.
    cmd.env("RUSTC", &rustc);

    let status = cmd.status().unwrap_or_else(|e| panic!("failed to spawn nested cargo ({cargo:?}): {e}"));
    if !status.success() {
        panic!("nested guest build failed ({status}); command: {cmd:?}");
    }

    let core_path = guest_target_dir
        .join(WASM_TARGET)
        .join(GUEST_PROFILE)
        .join(format!("{}.wasm", GUEST_PACKAGE.replace('-', "_")));
    let core_path = optimize(&core_path, &out_dir);
    let core = std::fs::read(&core_path).unwrap_or_else(|e| panic!("reading core module {}: {e}", core_path.display()));

    // The core module carries the `component-type` custom section emitted by
    // wit-bindgen; ComponentEncoder turns it into the component's type.
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&core)
        .expect("core module's component-type section not understood by wit-component")
        .encode()
        .expect("encoding the component failed");

    let out = out_dir.join("backstop.component.wasm");
    std::fs::write(&out, &component).expect("write component");
    println!("cargo:rustc-env=BACKSTOP_COMPONENT={}", out.display());
    println!("cargo:rustc-env=BACKSTOP_CORE_MODULE={}", core_path.display());

    // Stable copy for inspection (`wasm-tools component wit target/backstop.component.wasm`).
    let stable = outer_target_dir(&workspace).join("backstop.component.wasm");
    let _ = std::fs::create_dir_all(stable.parent().unwrap());
    let _ = std::fs::write(&stable, &component);
}

/// binaryen's `wasm-opt -O3` over the core module, written to `out_dir`; the
/// path of the module the component is made from. LLVM's output for
/// wasm32 leaves about 85 KB of the component's 1 MiB to a whole-module
/// optimiser (merged duplicate functions, simplified locals and control
/// flow); -O3, not a size level, so the scan's loop is not traded for bytes.
/// The command is `$BACKSTOP_WASM_OPT` or `wasm-opt` (Debian's `binaryen`).
/// Without it the component is built as LLVM wrote it, with a warning, and
/// `BACKSTOP_COMPONENT_OPTIMIZED` says so (the size test names the fix); a
/// `wasm-opt` that runs and fails stops the build.
fn optimize(core: &Path, out_dir: &Path) -> PathBuf {
    println!("cargo:rerun-if-env-changed=BACKSTOP_WASM_OPT");
    let tool = env::var_os("BACKSTOP_WASM_OPT").unwrap_or_else(|| "wasm-opt".into());
    let out = out_dir.join("backstop.opt.wasm");
    // The features the wasm32-unknown-unknown target enables by default,
    // named the way binaryen 108 (Debian 12) and later read them.
    let features = [
        "--enable-bulk-memory",
        "--enable-sign-ext",
        "--enable-mutable-globals",
        "--enable-nontrapping-float-to-int",
        "--enable-multivalue",
        "--enable-reference-types",
    ];
    let run = Command::new(&tool).arg("-O3").args(features).arg(core).arg("-o").arg(&out).output();
    match run {
        Ok(o) if o.status.success() => {
            println!("cargo:rustc-env=BACKSTOP_COMPONENT_OPTIMIZED=1");
            out
        }
        Ok(o) => panic!(
            "{} -O3 failed on {} ({}): {}",
            tool.to_string_lossy(),
            core.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            println!(
                "cargo:warning=the component is built without binaryen's wasm-opt ({}: {e}); install it \
                 (apt-get install binaryen) or set BACKSTOP_WASM_OPT: the shipped component is optimised by it",
                tool.to_string_lossy()
            );
            // A path that never exists keeps this script stale, so the next
            // build looks for the tool again: installing binaryen is enough,
            // without a clean.
            println!("cargo:rerun-if-changed={}", out_dir.join("wasm-opt-was-missing").display());
            println!("cargo:rustc-env=BACKSTOP_COMPONENT_OPTIMIZED=0");
            core.to_path_buf()
        }
    }
}

/// The outer build's target dir: honour CARGO_TARGET_DIR if the user set one
/// (it is visible to the build script), else `<workspace>/target`.
fn outer_target_dir(workspace: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                workspace.join(d)
            }
        }
        None => workspace.join("target"),
    }
}

/// Ensure the wasm32-unknown-unknown std is in the sysroot; try rustup once,
/// otherwise fail with an actionable message.
fn ensure_wasm_target(rustc: &std::ffi::OsStr) {
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let has_target = |root: &Path| root.join("lib/rustlib").join(WASM_TARGET).join("lib").is_dir();
    let Some(sysroot) = sysroot else {
        println!("cargo:warning=could not query rustc sysroot; assuming {WASM_TARGET} is installed");
        return;
    };
    if has_target(&sysroot) {
        return;
    }
    println!(
        "cargo:warning={WASM_TARGET} std missing in {}; running `rustup target add {WASM_TARGET}`",
        sysroot.display()
    );
    let ok = Command::new("rustup").args(["target", "add", WASM_TARGET]).status().map(|s| s.success()).unwrap_or(false);
    if !ok || !has_target(&sysroot) {
        panic!(
            "the Rust target {WASM_TARGET} is not installed for {} and `rustup target add {WASM_TARGET}` failed. \
             Install it (rustup target add {WASM_TARGET}) and rebuild.",
            sysroot.display()
        );
    }
}
