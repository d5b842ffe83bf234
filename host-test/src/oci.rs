//! Distributing the component as an OCI artifact, in the layout the
//! WebAssembly ecosystem uses (the CNCF "Wasm OCI Artifact layout", what
//! `wkg oci push` writes): an image manifest whose config has the media type
//! `application/vnd.wasm.config.v0+json` and whose one layer is the component,
//! `application/wasm`.
//!
//! Speaks the OCI distribution HTTP API (blob upload, manifest put, tag list,
//! manifest and blob get) over plain HTTP, and only to loopback registries
//! (`127.0.0.0/8`, `localhost`, `[::1]`): there is no TLS stack and no
//! registry authentication here. Every pull checks what it received: the
//! manifest's sha256 against the digest asked for (or the registry's
//! `Docker-Content-Digest`), and the config and layer blobs against the
//! digests and sizes the manifest names.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config's media type: marks the artifact as WebAssembly.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The one layer's media type: the component itself.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// A manifest larger than this is refused.
const MAX_MANIFEST: u64 = 4 << 20;
/// A config blob larger than this is refused.
const MAX_CONFIG: u64 = 1 << 20;
/// A component larger than this is refused.
pub const MAX_COMPONENT: u64 = 64 << 20;

/// Why publishing or pulling failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OciError {
    /// The reference does not parse, or lacks what the operation needs.
    Reference(String),
    /// The registry is not a loopback address.
    NotLoopback(String),
    /// The registry could not be reached (connection refused, timeout, a broken answer).
    Unreachable { url: String, detail: String },
    /// The registry answered with an unexpected status.
    Status { method: &'static str, url: String, status: u16, body: String },
    /// What arrived does not hash to the digest it was asked for or named by.
    Digest { what: String, expected: String, actual: String },
    /// What arrived is not a Wasm component artifact (media types, layers, sizes, JSON).
    Artifact(String),
}

impl OciError {
    /// The CLI's exit code: 2 for a bad reference, 4 when the registry cannot be
    /// reached or refuses, 5 when the artifact fails verification.
    pub fn exit_code(&self) -> u8 {
        match self {
            OciError::Reference(_) | OciError::NotLoopback(_) => 2,
            OciError::Unreachable { .. } | OciError::Status { .. } => 4,
            OciError::Digest { .. } | OciError::Artifact(_) => 5,
        }
    }
}

impl std::fmt::Display for OciError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OciError::Reference(m) => write!(f, "bad reference: {m}"),
            OciError::NotLoopback(r) => write!(
                f,
                "registry {r} is not a loopback address: this build speaks plain HTTP to loopback registries only (127.0.0.1, localhost, [::1])"
            ),
            OciError::Unreachable { url, detail } => write!(f, "cannot reach the registry at {url}: {detail}"),
            OciError::Status { method, url, status, body } => {
                write!(f, "the registry answered {method} {url} with HTTP {status}")?;
                if !body.is_empty() {
                    write!(f, ": {body}")?;
                }
                Ok(())
            }
            OciError::Digest { what, expected, actual } => {
                write!(f, "digest mismatch for the {what}: expected {expected}, got {actual}; refusing it")
            }
            OciError::Artifact(m) => write!(f, "not a Wasm component artifact: {m}"),
        }
    }
}

impl std::error::Error for OciError {}

/// `registry/repository[:tag][@sha256:…]`, e.g. `127.0.0.1:5000/backstop/policy:0.2.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    /// The repository path, e.g. `backstop/policy`.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses a reference; the registry must be named and be a loopback address.
    pub fn parse(s: &str) -> Result<Reference, OciError> {
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) => (r, Some(check_digest(d).map_err(OciError::Reference)?)),
            None => (s, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| OciError::Reference(format!("{s:?}: expected registry/repository[:tag][@sha256:...]")))?;
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t.to_string())),
            _ => (path, None),
        };
        if let Some(t) = &tag {
            let ok = t.len() <= 128
                && t.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                && t.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !ok {
                return Err(OciError::Reference(format!(
                    "{s:?}: tag {t:?} is not [A-Za-z0-9_][A-Za-z0-9._-]{{0,127}}"
                )));
            }
        }
        if !valid_repository(repository) {
            return Err(OciError::Reference(format!(
                "{s:?}: repository {repository:?} must be lowercase path components of [a-z0-9] joined by . _ - and /"
            )));
        }
        if !is_loopback(registry) {
            return Err(OciError::NotLoopback(registry.to_string()));
        }
        Ok(Reference { registry: registry.to_string(), repository: repository.to_string(), tag, digest })
    }

    /// The tag to publish under: a reference to publish needs a tag and no digest.
    pub fn publish_tag(&self) -> Result<&str, OciError> {
        match (&self.tag, &self.digest) {
            (Some(t), None) => Ok(t),
            _ => Err(OciError::Reference(format!("{self}: publishing needs a tag and no digest"))),
        }
    }

    /// The same repository at a digest.
    pub fn at_digest(&self, digest: &str) -> Reference {
        Reference { digest: Some(digest.to_string()), ..self.clone() }
    }

    fn url(&self, tail: &str) -> String {
        format!("http://{}/v2/{}/{tail}", self.registry, self.repository)
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

fn valid_repository(r: &str) -> bool {
    !r.is_empty()
        && r.split('/').all(|c| {
            let b = c.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|&x| x.is_ascii_lowercase() || x.is_ascii_digit() || b"._-".contains(&x))
        })
}

fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split_once(']').map(|(h, _)| h).unwrap_or("")
    } else {
        registry.split(':').next().unwrap_or("")
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_digest(d: &str) -> Result<String, String> {
    match d.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => {
            Ok(d.to_string())
        }
        _ => Err(format!("digest {d:?} is not sha256: followed by 64 lowercase hex digits")),
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A content descriptor of the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
}

/// An OCI image manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The config blob, `application/vnd.wasm.config.v0+json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339 time of creation.
    pub created: String,
    #[serde(default)]
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component (`wasip1` marks a core module).
    pub os: String,
    /// The digests of the manifest's layers, in order.
    pub layer_digests: Vec<String>,
    #[serde(default)]
    pub component: Option<ComponentInfo>,
}

/// The component's world, as the config records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentInfo {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    /// The world, e.g. `backstop:policy/backstop@0.2.0`.
    #[serde(default)]
    pub target: Option<String>,
}

/// What a publish wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The reference pinned to the manifest digest.
    pub reference: Reference,
    pub manifest_digest: String,
    pub config_digest: String,
    pub layer_digest: String,
    pub size: u64,
}

/// What a pull received, every digest checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The component bytes (the layer).
    pub component: Vec<u8>,
    pub manifest_digest: String,
    pub layer_digest: String,
    pub manifest: Manifest,
    pub config: WasmConfig,
}

/// What `publish` puts in the config besides the layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishOptions {
    pub component: ComponentInfo,
    /// RFC 3339 creation time.
    pub created: String,
    /// Manifest annotations (e.g. `org.opencontainers.image.version`).
    pub annotations: BTreeMap<String, String>,
}

/// A blocking HTTP client for one repository.
struct Client {
    agent: ureq::Agent,
}

type Response = ureq::http::Response<ureq::Body>;

impl Client {
    fn new() -> Client {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // Loopback only: no proxy from the environment may carry the traffic elsewhere.
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(300)))
            .build();
        Client { agent: config.into() }
    }

    fn unreachable(url: &str, e: ureq::Error) -> OciError {
        OciError::Unreachable { url: url.to_string(), detail: e.to_string() }
    }

    fn read(url: &str, resp: &mut Response, limit: u64) -> Result<Vec<u8>, OciError> {
        resp.body_mut().with_config().limit(limit).read_to_vec().map_err(|e| Client::unreachable(url, e))
    }

    /// Fails with `Status` unless the answer has one of `ok`.
    fn expect(method: &'static str, url: &str, mut resp: Response, ok: &[u16]) -> Result<Response, OciError> {
        let status = resp.status().as_u16();
        if ok.contains(&status) {
            return Ok(resp);
        }
        let body = Client::read(url, &mut resp, 4096).unwrap_or_default();
        let body = String::from_utf8_lossy(&body).trim().chars().take(300).collect();
        Err(OciError::Status { method, url: url.to_string(), status, body })
    }

    fn header(resp: &Response, name: &str) -> Option<String> {
        resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    }

    fn get(&self, url: &str, accept: &str) -> Result<Response, OciError> {
        let resp = self.agent.get(url).header("Accept", accept).call().map_err(|e| Client::unreachable(url, e))?;
        Client::expect("GET", url, resp, &[200])
    }

    /// Uploads a blob unless the registry has it: HEAD, else POST then a monolithic PUT.
    fn upload_blob(&self, r: &Reference, bytes: &[u8]) -> Result<String, OciError> {
        let digest = sha256_digest(bytes);
        let url = r.url(&format!("blobs/{digest}"));
        let head = self.agent.head(&url).call().map_err(|e| Client::unreachable(&url, e))?;
        if head.status().as_u16() == 200 {
            return Ok(digest);
        }
        let url = r.url("blobs/uploads/");
        let resp = self.agent.post(&url).send_empty().map_err(|e| Client::unreachable(&url, e))?;
        let resp = Client::expect("POST", &url, resp, &[202])?;
        let location = Client::header(&resp, "location")
            .ok_or_else(|| OciError::Artifact(format!("POST {url} answered 202 without a Location")))?;
        let mut put = if location.starts_with('/') { format!("http://{}{location}", r.registry) } else { location };
        put.push(if put.contains('?') { '&' } else { '?' });
        put.push_str("digest=");
        put.push_str(&digest);
        let resp = self
            .agent
            .put(&put)
            .header("Content-Type", "application/octet-stream")
            .send(bytes)
            .map_err(|e| Client::unreachable(&put, e))?;
        Client::expect("PUT", &put, resp, &[201])?;
        Ok(digest)
    }

    /// Gets a blob and checks its digest and size against the descriptor.
    fn blob(&self, r: &Reference, d: &Descriptor, what: &str, limit: u64) -> Result<Vec<u8>, OciError> {
        check_digest(&d.digest).map_err(|e| OciError::Artifact(format!("the {what}: {e}")))?;
        if d.size > limit {
            return Err(OciError::Artifact(format!("the {what} is {} bytes, more than {limit}", d.size)));
        }
        let url = r.url(&format!("blobs/{}", d.digest));
        let mut resp = self.get(&url, "*/*")?;
        // Read one byte past the size so that a longer blob shows as a mismatch.
        let bytes = Client::read(&url, &mut resp, d.size + 1)?;
        let actual = sha256_digest(&bytes);
        if actual != d.digest {
            return Err(OciError::Digest { what: what.to_string(), expected: d.digest.clone(), actual });
        }
        if bytes.len() as u64 != d.size {
            return Err(OciError::Artifact(format!(
                "the {what} is {} bytes, the manifest says {}",
                bytes.len(),
                d.size
            )));
        }
        Ok(bytes)
    }
}

/// Publishes `component` at `r` (which needs a tag and no digest): the config
/// and layer blobs, then the manifest under the tag.
pub fn publish(r: &Reference, component: &[u8], options: &PublishOptions) -> Result<Published, OciError> {
    let tag = r.publish_tag()?;
    if component.len() as u64 > MAX_COMPONENT {
        return Err(OciError::Artifact(format!("the component is larger than {} MiB", MAX_COMPONENT >> 20)));
    }
    let client = Client::new();
    let layer = Descriptor {
        media_type: LAYER_MEDIA_TYPE.into(),
        digest: sha256_digest(component),
        size: component.len() as u64,
    };
    let config = WasmConfig {
        created: options.created.clone(),
        author: None,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![layer.digest.clone()],
        component: Some(options.component.clone()),
    };
    let config_bytes = serde_json::to_vec(&config).expect("the config serializes");
    let config_desc = Descriptor {
        media_type: CONFIG_MEDIA_TYPE.into(),
        digest: client.upload_blob(r, &config_bytes)?,
        size: config_bytes.len() as u64,
    };
    client.upload_blob(r, component)?;
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        config: config_desc.clone(),
        layers: vec![layer.clone()],
        annotations: options.annotations.clone(),
    };
    let body = serde_json::to_vec(&manifest).expect("the manifest serializes");
    let manifest_digest = sha256_digest(&body);
    let url = r.url(&format!("manifests/{tag}"));
    let resp = client
        .agent
        .put(&url)
        .header("Content-Type", MANIFEST_MEDIA_TYPE)
        .send(&body[..])
        .map_err(|e| Client::unreachable(&url, e))?;
    let resp = Client::expect("PUT", &url, resp, &[201])?;
    if let Some(stored) = Client::header(&resp, "docker-content-digest") {
        if stored != manifest_digest {
            return Err(OciError::Digest { what: "stored manifest".into(), expected: manifest_digest, actual: stored });
        }
    }
    Ok(Published {
        reference: r.at_digest(&manifest_digest),
        manifest_digest,
        config_digest: config_desc.digest,
        layer_digest: layer.digest,
        size: layer.size,
    })
}

/// Pulls the component at `r` (a tag or a digest; a digest wins) and checks
/// every digest on the way.
pub fn pull(r: &Reference) -> Result<Pulled, OciError> {
    let at = match (&r.digest, &r.tag) {
        (Some(d), _) => d.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => return Err(OciError::Reference(format!("{r}: pulling needs a tag or a digest"))),
    };
    let client = Client::new();
    let url = r.url(&format!("manifests/{at}"));
    let mut resp = client.get(&url, MANIFEST_MEDIA_TYPE)?;
    let served = Client::header(&resp, "docker-content-digest");
    let body = Client::read(&url, &mut resp, MAX_MANIFEST)?;
    let manifest_digest = sha256_digest(&body);
    let (what, expected) = match (&r.digest, served) {
        (Some(d), _) => ("manifest", Some(d.clone())),
        (None, s) => ("manifest (the registry's Docker-Content-Digest)", s),
    };
    if let Some(expected) = expected {
        if expected != manifest_digest {
            return Err(OciError::Digest { what: what.into(), expected, actual: manifest_digest });
        }
    }
    let manifest = check_manifest(&body)?;
    let config_bytes = client.blob(r, &manifest.config, "config blob", MAX_CONFIG)?;
    let config: WasmConfig =
        serde_json::from_slice(&config_bytes).map_err(|e| OciError::Artifact(format!("the config: {e}")))?;
    let layer = &manifest.layers[0];
    if config.architecture != "wasm" || config.layer_digests != [layer.digest.clone()] {
        return Err(OciError::Artifact(format!(
            "the config says architecture {:?} and layerDigests {:?}; expected \"wasm\" and [{:?}]",
            config.architecture, config.layer_digests, layer.digest
        )));
    }
    let component = client.blob(r, layer, "component layer", MAX_COMPONENT)?;
    Ok(Pulled { component, manifest_digest, layer_digest: layer.digest.clone(), manifest, config })
}

/// Parses a manifest and checks it is a Wasm artifact of exactly one `application/wasm` layer.
fn check_manifest(body: &[u8]) -> Result<Manifest, OciError> {
    let manifest: Manifest =
        serde_json::from_slice(body).map_err(|e| OciError::Artifact(format!("the manifest: {e}")))?;
    if manifest.schema_version != 2 {
        return Err(OciError::Artifact(format!("manifest schemaVersion {}, expected 2", manifest.schema_version)));
    }
    if let Some(t) = manifest.media_type.as_deref().filter(|t| *t != MANIFEST_MEDIA_TYPE) {
        return Err(OciError::Artifact(format!("manifest mediaType {t:?}, expected {MANIFEST_MEDIA_TYPE:?}")));
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(OciError::Artifact(format!(
            "config mediaType {:?}, expected {CONFIG_MEDIA_TYPE:?}",
            manifest.config.media_type
        )));
    }
    match manifest.layers.as_slice() {
        [l] if l.media_type == LAYER_MEDIA_TYPE => Ok(manifest),
        layers => Err(OciError::Artifact(format!(
            "expected exactly one layer of mediaType {LAYER_MEDIA_TYPE:?}, found {:?}",
            layers.iter().map(|l| l.media_type.as_str()).collect::<Vec<_>>()
        ))),
    }
}

/// The tags of `r`'s repository (`GET /v2/<name>/tags/list`).
pub fn tags(r: &Reference) -> Result<Vec<String>, OciError> {
    #[derive(Deserialize)]
    struct TagList {
        #[serde(default)]
        tags: Option<Vec<String>>,
    }
    let client = Client::new();
    let url = r.url("tags/list");
    let mut resp = client.get(&url, "application/json")?;
    let body = Client::read(&url, &mut resp, MAX_MANIFEST)?;
    let list: TagList = serde_json::from_slice(&body)
        .map_err(|e| OciError::Artifact(format!("the tag list of {}: {e}", r.repository)))?;
    Ok(list.tags.unwrap_or_default())
}
