//! Publishing and pulling the component through a real OCI registry: Debian's
//! `docker-registry` (installed by `scripts/ensure-services`), started here on
//! 127.0.0.1 at a free port with a temporary storage directory and stopped by
//! its pid. A missing registry fails these tests; it never skips them.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use backstop_host::oci::{self, OciError, Reference};
use backstop_host::{Backstop, Limits};
use serde_json::Value;
use support::cli as backstop;

/// A registry process of its own, killed by its pid on drop.
struct Registry {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let bin = ["/usr/bin/docker-registry", "/usr/local/bin/docker-registry"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect("docker-registry is not installed: run scripts/ensure-services (apt-get install docker-registry)");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: backstop-test-only\n",
            dir.path().join("storage").display()
        );
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry starts");
        let mut reg = Registry { child, port, dir };
        reg.wait_ready();
        reg
    }

    /// Waits until the registry accepts connections (a bounded number of tries).
    fn wait_ready(&mut self) {
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("docker-registry exited with {status}: {}", self.log());
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("docker-registry did not listen on 127.0.0.1:{}: {}", self.port, self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn repo(&self) -> String {
        format!("127.0.0.1:{}/backstop/policy", self.port)
    }

    /// The file the registry stores a blob in.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join(format!("storage/docker/registry/v2/blobs/sha256/{}/{hex}/data", &hex[..2]))
    }

    fn get(&self, path: &str) -> Vec<u8> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let mut resp = ureq::get(&url).header("Accept", oci::MANIFEST_MEDIA_TYPE).call().unwrap();
        resp.body_mut().read_to_vec().unwrap()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Child::kill signals this child's own pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn version() -> String {
    backstop::info().package_version
}

fn json_ok(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Publishes the bundled component with the CLI; returns its summary.
fn publish(reg: &Registry) -> Value {
    let r = format!("{}:{}", reg.repo(), version());
    json_ok(&backstop(&["publish", &r], b""))
}

const SEED: &[u8] =
    b"agent step failed (exit 1)\nAPI Error: 529 Overloaded. This is a server-side issue, usually temporary\n";

#[test]
fn publish_lists_pulls_by_tag_and_digest_and_runs_the_pulled_component() {
    let reg = Registry::start();
    let published = publish(&reg);
    let digest = published["manifest_digest"].as_str().unwrap().to_string();
    assert_eq!(published["layer_digest"], oci::sha256_digest(backstop_host::COMPONENT));
    assert_eq!(published["reference"], format!("{}:{}@{digest}", reg.repo(), version()));

    // The tag list, straight from the distribution API and through the CLI.
    let tags: Value = serde_json::from_slice(&reg.get("/v2/backstop/policy/tags/list")).unwrap();
    assert_eq!(tags["tags"], serde_json::json!([version()]));
    assert_eq!(json_ok(&backstop(&["tags", &reg.repo()], b"")), serde_json::json!([version()]));

    // The manifest and config have the Wasm OCI artifact layout.
    let raw = reg.get(&format!("/v2/backstop/policy/manifests/{}", version()));
    assert_eq!(oci::sha256_digest(&raw), digest);
    let manifest: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    assert_eq!(layers[0]["size"], backstop_host::COMPONENT.len());
    let config: Value = serde_json::from_slice(
        &reg.get(&format!("/v2/backstop/policy/blobs/{}", manifest["config"]["digest"].as_str().unwrap())),
    )
    .unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"], serde_json::json!([layers[0]["digest"]]));
    let exports = config["component"]["exports"].as_array().unwrap();
    assert!(exports.contains(&Value::from(format!("backstop:policy/engine@{}", version()))), "{exports:?}");
    assert_eq!(config["component"]["imports"], serde_json::json!([]));
    assert!(config["created"].as_str().unwrap().ends_with('Z'));

    let dir = tempfile::tempdir().unwrap();
    let by_tag = dir.path().join("by-tag.wasm");
    let pulled =
        json_ok(&backstop(&["pull", &format!("{}:{}", reg.repo(), version()), "-o", by_tag.to_str().unwrap()], b""));
    assert_eq!(pulled["manifest_digest"], digest.as_str());
    assert_eq!(std::fs::read(&by_tag).unwrap(), backstop_host::COMPONENT);
    let pinned = format!("{}@{digest}", reg.repo());
    let by_digest = dir.path().join("by-digest.wasm");
    json_ok(&backstop(&["pull", &pinned, "-o", by_digest.to_str().unwrap()], b""));
    assert_eq!(std::fs::read(&by_digest).unwrap(), backstop_host::COMPONENT);

    // The pulled component runs: from the file (CLI and library) and straight from the registry.
    for args in [vec!["--component", by_digest.to_str().unwrap(), "classify"], vec!["--oci", &pinned, "classify"]] {
        let v = json_ok(&backstop(&args, SEED));
        assert_eq!(v["class"], "transient_transport", "{args:?}");
        assert_eq!(v["signal"], "api error: 529");
    }
    let mut b = Backstop::from_file(&by_digest, Limits::default()).unwrap();
    let c = b.classify(&backstop::model::Evidence::from_text(String::from_utf8_lossy(SEED).into_owned())).unwrap();
    assert_eq!(c.class.as_str(), "transient_transport");
}

#[test]
fn a_tampered_layer_is_refused_naming_both_digests() {
    let reg = Registry::start();
    let published = publish(&reg);
    let layer_digest = published["layer_digest"].as_str().unwrap();
    let file = reg.blob_file(layer_digest);
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let tampered = oci::sha256_digest(&bytes);

    let pinned = format!("{}@{}", reg.repo(), published["manifest_digest"].as_str().unwrap());
    let out = tempfile::tempdir().unwrap().path().join("never.wasm");
    for args in [vec!["pull", &pinned, "-o", out.to_str().unwrap()], vec!["--oci", &pinned, "info"]] {
        let o = backstop(&args, b"");
        assert_eq!(o.status.code(), Some(5), "{args:?}: {}", stderr(&o));
        let msg = stderr(&o);
        assert!(msg.contains("digest mismatch for the component layer"), "{msg}");
        assert!(msg.contains(layer_digest) && msg.contains(&tampered), "{msg}");
    }
    assert!(!out.exists(), "a refused pull writes nothing");
    // The library refuses it the same way, by tag too.
    let by_tag = Reference::parse(&format!("{}:{}", reg.repo(), version())).unwrap();
    let err = oci::pull(&by_tag).unwrap_err();
    assert_eq!(
        err,
        OciError::Digest { what: "component layer".into(), expected: layer_digest.into(), actual: tampered }
    );
}

#[test]
fn a_tampered_manifest_is_refused_by_digest_and_by_tag() {
    let reg = Registry::start();
    let digest = publish(&reg)["manifest_digest"].as_str().unwrap().to_string();
    let file = reg.blob_file(&digest);
    let text = std::fs::read_to_string(&file).unwrap();
    // Still valid JSON, so the registry serves it as it is: one annotation renamed.
    let edited = text.replace("\"org.opencontainers.image.title\"", "\"org.opencontainers.image.titlf\"");
    assert_ne!(edited, text);
    std::fs::write(&file, &edited).unwrap();
    let tampered = oci::sha256_digest(edited.as_bytes());

    let o = backstop(&["pull", &format!("{}@{digest}", reg.repo()), "-o", "/dev/null"], b"");
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let msg = stderr(&o);
    assert!(
        msg.contains("digest mismatch for the manifest") && msg.contains(&digest) && msg.contains(&tampered),
        "{msg}"
    );
    // By tag, the registry's own Docker-Content-Digest still names the original.
    let o = backstop(&["pull", &format!("{}:{}", reg.repo(), version()), "-o", "/dev/null"], b"");
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains(&tampered), "{}", stderr(&o));
}

#[test]
fn an_artifact_that_is_not_a_wasm_component_is_refused() {
    let reg = Registry::start();
    // A well-formed image whose one layer is not application/wasm.
    let r = Reference::parse(&format!("{}:not-wasm", reg.repo())).unwrap();
    oci::publish(&r, b"\0asm\x01\0\0\0", &options()).unwrap();
    let digest = oci::pull(&r).unwrap().manifest_digest;
    let manifest = reg.blob_file(&digest);
    let text = std::fs::read_to_string(&manifest).unwrap().replace("application/wasm", "application/x-tar");
    let put = format!("http://127.0.0.1:{}/v2/backstop/policy/manifests/tar", reg.port);
    ureq::put(&put).header("Content-Type", oci::MANIFEST_MEDIA_TYPE).send(text.as_bytes()).unwrap();
    let o = backstop(&["pull", &format!("{}:tar", reg.repo()), "-o", "/dev/null"], b"");
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("exactly one layer of mediaType \"application/wasm\""), "{}", stderr(&o));
    // Bytes that are no Backstop component cannot be published by the CLI.
    let junk = support::file("junk.wasm", b"\0asm\x01\0\0\0");
    let o = backstop(&["--component", junk.to_str().unwrap(), "publish", &format!("{}:junk", reg.repo())], b"");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("loading the component failed"), "{}", stderr(&o));
}

fn options() -> oci::PublishOptions {
    oci::PublishOptions {
        component: oci::ComponentInfo { exports: vec![], imports: vec![], target: None },
        created: "2026-01-01T00:00:00Z".into(),
        annotations: Default::default(),
    }
}

#[test]
fn an_unreachable_registry_exits_4_naming_the_url() {
    // A port that was just free: nothing listens there.
    let r = format!("127.0.0.1:{}/backstop/policy:{}", free_port(), version());
    for args in [vec!["publish", r.as_str()], vec!["pull", r.as_str(), "-o", "/dev/null"]] {
        let o = backstop(&args, b"");
        assert_eq!(o.status.code(), Some(4), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot reach the registry at http://127.0.0.1:"), "{}", stderr(&o));
    }
}

#[test]
fn references_are_checked_before_any_connection() {
    let cases = [
        ("registry.example:5000/backstop/policy:1", 2, "not a loopback address"),
        ("127.0.0.1:5000/Backstop/policy:1", 2, "repository \"Backstop/policy\""),
        ("127.0.0.1:5000/backstop/policy@sha256:abc", 2, "64 lowercase hex"),
        ("127.0.0.1:5000", 2, "expected registry/repository"),
    ];
    for (r, code, text) in cases {
        let o = backstop(&["pull", r, "-o", "/dev/null"], b"");
        assert_eq!(o.status.code(), Some(code), "{r}: {}", stderr(&o));
        assert!(stderr(&o).contains(text), "{r}: {}", stderr(&o));
    }
    let o = backstop(&["publish", "127.0.0.1:5000/backstop/policy"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("publishing needs a tag"), "{}", stderr(&o));
    assert!(Reference::parse("[::1]:5000/a/b:1.0@sha256:").is_err());
    let ok = Reference::parse(&format!("[::1]:5000/a/b:1.0@sha256:{}", "0".repeat(64))).unwrap();
    assert_eq!((ok.registry.as_str(), ok.repository.as_str(), ok.tag.as_deref()), ("[::1]:5000", "a/b", Some("1.0")));
    assert_eq!(Reference::parse("localhost/a").unwrap().tag, None);
}
