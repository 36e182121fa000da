//! The backends the conformance suite runs against, and how a test reaches, cuts and
//! inspects each one.
//!
//! A [`Fixture`] is one test's view of one backend: the server URL (from
//! `RPC_TEST_<BACKEND>_URL`), a scope no other test shares (an etcd prefix, a ZooKeeper
//! root, a Nacos group, a memory hub) so that tests run in parallel against one server, and
//! an inspector that looks at the server directly (not through the client under test) to
//! find what a client left behind.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rpc_core::{Instance, Registry, ServiceKey};
use rpc_registry::{MemoryHub, RegistryUrl};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// When set (CI sets it), a missing server URL fails the test instead of skipping it.
pub const REQUIRE_ENV: &str = "RPC_TEST_REQUIRE_REGISTRIES";

/// Writes a line to the real stderr, past libtest's output capture, so that skips and
/// measured latencies show in every run.
pub fn report(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// One registry backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The in-process hub (always available).
    Memory,
    /// etcd, at `RPC_TEST_ETCD_URL`.
    Etcd,
    /// ZooKeeper, at `RPC_TEST_ZOOKEEPER_URL`.
    ZooKeeper,
    /// Nacos (rnacos), at `RPC_TEST_NACOS_URL`.
    Nacos,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::Etcd => "etcd",
            Kind::ZooKeeper => "zookeeper",
            Kind::Nacos => "nacos",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Kind::Memory => 0,
            Kind::Etcd => 2379,
            Kind::ZooKeeper => 2181,
            Kind::Nacos => 8848,
        }
    }

    fn env_var(self) -> Option<&'static str> {
        match self {
            Kind::Memory => None,
            Kind::Etcd => Some("RPC_TEST_ETCD_URL"),
            Kind::ZooKeeper => Some("RPC_TEST_ZOOKEEPER_URL"),
            Kind::Nacos => Some("RPC_TEST_NACOS_URL"),
        }
    }
}

/// How long a client's presence outlives it: short for the tests that wait for expiry,
/// long for those that must show an explicit release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// etcd lease 2 s, ZooKeeper session 2 s.
    Short,
    /// etcd lease 30 s, ZooKeeper session 10 s (the most a tickTime of 500 ms allows).
    Long,
}

/// One test's view of one backend.
pub struct Fixture {
    pub kind: Kind,
    /// The server URL without parameters (memory: `memory://<scope>`).
    server: RegistryUrl,
    /// `scheme://[user:pass@]` of the server URL, kept verbatim for building URLs.
    scheme_and_credentials: String,
    /// Unique per test: `conformance-<test>-<random>`.
    scope: String,
}

impl Fixture {
    /// The fixture of `kind` for the test `test`, or `None` (after reporting the skip) when
    /// its server URL is not set.
    pub fn new(kind: Kind, test: &str) -> Option<Self> {
        let scope = format!(
            "conformance-{}-{:08x}",
            test.replace('_', "-"),
            fastrand::u32(..)
        );
        let raw = match kind.env_var() {
            None => format!("memory://{scope}"),
            Some(var) => match std::env::var(var) {
                Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
                _ => {
                    if std::env::var_os(REQUIRE_ENV).is_some() {
                        panic!(
                            "{var} is not set but {REQUIRE_ENV} is: the {} server is required",
                            kind.name()
                        );
                    }
                    report(format_args!(
                        "SKIPPED {}::{test}: {var} is not set (start the servers with `eval \"$(scripts/registries.sh start)\"`; CI always sets it)",
                        kind.name()
                    ));
                    return None;
                }
            },
        };
        let server = RegistryUrl::parse(&raw).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            server.scheme(),
            kind.name(),
            "{raw} is not a {} URL",
            kind.name()
        );
        let after_scheme = raw.split_once("://").map_or("", |(_, rest)| rest);
        let credentials = after_scheme
            .split(['/', '?'])
            .next()
            .and_then(|authority| authority.rsplit_once('@'))
            .map(|(info, _)| format!("{info}@"))
            .unwrap_or_default();
        Some(Self {
            kind,
            scheme_and_credentials: format!("{}://{credentials}", kind.name()),
            server,
            scope,
        })
    }

    /// A service no other test uses: `conformance.<name>.<scope>`.
    pub fn service(&self, name: &str) -> ServiceKey {
        ServiceKey::new(format!("conformance.{name}.{}", self.scope))
    }

    /// Whether a connection can be cut (not for the in-process hub).
    pub fn can_cut(&self) -> bool {
        self.kind != Kind::Memory
    }

    /// The address a proxy must forward to (for Nacos its gRPC port, HTTP port + 1000).
    pub fn upstream(&self) -> SocketAddr {
        let host = &self.server.hosts()[0];
        let port = host.port.unwrap_or(self.kind.default_port());
        let port = if self.kind == Kind::Nacos {
            port + 1000
        } else {
            port
        };
        format!("{}:{port}", host.host)
            .parse()
            .expect("a loopback IP in the server URL")
    }

    /// The URL of a client of this test's scope.
    pub fn url(&self, presence: Presence) -> String {
        match self.kind {
            Kind::Memory => format!("memory://{}", self.scope),
            _ => {
                let hosts: Vec<String> = self
                    .server
                    .hosts()
                    .iter()
                    .map(|h| h.authority(self.kind.default_port()))
                    .collect();
                format!(
                    "{}{}?{}",
                    self.scheme_and_credentials,
                    hosts.join(","),
                    self.params(presence, None)
                )
            }
        }
    }

    /// The URL of a client that reaches the server through `proxy`.
    pub fn url_via(&self, proxy: SocketAddr, presence: Presence) -> String {
        match self.kind {
            Kind::Memory => self.url(presence),
            // Nacos: HTTP (login only) straight to the server, gRPC through the proxy.
            Kind::Nacos => {
                let host = self.server.hosts()[0].authority(self.kind.default_port());
                format!(
                    "{}{host}?{}",
                    self.scheme_and_credentials,
                    self.params(presence, Some(proxy.port()))
                )
            }
            _ => format!(
                "{}{proxy}?{}",
                self.scheme_and_credentials,
                self.params(presence, None)
            ),
        }
    }

    fn params(&self, presence: Presence, grpc_port: Option<u16>) -> String {
        let long = presence == Presence::Long;
        match self.kind {
            Kind::Memory => String::new(),
            Kind::Etcd => format!(
                "ttl={}&prefix=/{}",
                if long { "30s" } else { "2s" },
                self.scope
            ),
            Kind::ZooKeeper => format!(
                "session_timeout={}&root=/{}",
                if long { "10s" } else { "2s" },
                self.scope
            ),
            Kind::Nacos => match grpc_port {
                Some(port) => format!("group={}&grpc_port={port}", self.scope),
                None => format!("group={}", self.scope),
            },
        }
    }

    /// A connected client of this test's scope.
    pub async fn client(&self, presence: Presence) -> Arc<dyn Registry> {
        let url = self.url(presence);
        rpc_registry::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("connect {url}: {e}"))
    }

    /// A connected client that reaches the server through `proxy`.
    pub async fn client_via(&self, proxy: SocketAddr, presence: Presence) -> Arc<dyn Registry> {
        let url = self.url_via(proxy, presence);
        rpc_registry::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("connect {url}: {e}"))
    }

    /// A generous bound on how long the server takes to drop the instances of a client
    /// that vanished (with [`Presence::Short`]), plus propagation.
    pub fn expiry_bound(&self) -> Duration {
        match self.kind {
            Kind::Memory => Duration::from_secs(1),
            // Lease / session of 2 s; etcd checks expiry every 500 ms, ZooKeeper every tick.
            Kind::Etcd | Kind::ZooKeeper => Duration::from_secs(8),
            // Removed when the connection closes; rnacos pushes in batches of ~500 ms. If
            // only the health check notices, it takes up to 15 s: allow that.
            Kind::Nacos => Duration::from_secs(20),
        }
    }

    /// A bound on propagating one change to a subscriber of a healthy registry.
    pub fn propagation_bound(&self) -> Duration {
        Duration::from_secs(5)
    }

    /// How long a cut lasts in the "unreachable" rule: longer than a short session/lease,
    /// so that the subscriber's own session is lost too.
    pub fn outage(&self) -> Duration {
        Duration::from_secs(4)
    }

    /// Starts a provider of `instance` that can be killed without unregistering: a child
    /// process for network backends (killed with SIGKILL), an in-process client for the
    /// in-process hub (dropped). Returns once the instance is registered.
    pub async fn spawn_provider(&self, instance: &Instance) -> Provider {
        let url = self.url(Presence::Short);
        if self.kind == Kind::Memory {
            let client = rpc_registry::connect(&url).await.expect("memory client");
            client.register(instance).await.expect("register");
            return Provider::InProcess(Some(client));
        }
        let spec = serde_json::json!({ "url": url, "instance": instance }).to_string();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_registry_child"))
            .arg(spec)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the provider child process");
        let stdout = child.stdout.take().expect("child stdout");
        let mut lines = BufReader::new(stdout).lines();
        let registered = tokio::time::timeout(Duration::from_secs(20), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim_end() == "REGISTERED" {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            matches!(registered, Ok(true)),
            "the provider child did not register within 20 s"
        );
        // Keep draining its stdout so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Provider::Child(child)
    }

    /// What this test's clients left on the server, looked up directly: etcd keys under the
    /// scope's prefix, instance znodes under the scope's root, Nacos instances and
    /// subscribers of `services` in the scope's group, memory instances and subscriptions.
    pub async fn leftovers(&self, services: &[ServiceKey]) -> Vec<String> {
        match self.kind {
            Kind::Memory => {
                let hub = MemoryHub::named(&self.scope);
                let mut left: Vec<String> = services
                    .iter()
                    .flat_map(|s| hub.instances(s))
                    .map(|i| format!("instance {}", i.id))
                    .collect();
                if hub.subscription_count() > 0 {
                    left.push(format!("{} subscription(s)", hub.subscription_count()));
                }
                left
            }
            Kind::Etcd => self
                .etcd_scope_keys()
                .await
                .into_iter()
                .map(|(key, lease)| format!("key {key} (lease {lease:x})"))
                .collect(),
            Kind::ZooKeeper => {
                let client = self.zookeeper().await;
                let root = format!("/{}", self.scope);
                let mut left = Vec::new();
                let services = match client.list_children(&root).await {
                    Ok(children) => children,
                    Err(zookeeper_client::Error::NoNode) => Vec::new(),
                    Err(e) => panic!("list {root}: {e}"),
                };
                for service in services {
                    let providers = format!("{root}/{service}/providers");
                    match client.list_children(&providers).await {
                        Ok(nodes) => {
                            left.extend(nodes.into_iter().map(|n| format!("znode {providers}/{n}")))
                        }
                        Err(zookeeper_client::Error::NoNode) => {}
                        Err(e) => panic!("list {providers}: {e}"),
                    }
                }
                left
            }
            Kind::Nacos => {
                let mut left = Vec::new();
                for service in services {
                    let path = format!(
                        "/nacos/v1/ns/instance/list?serviceName={}&groupName={}&namespaceId=public",
                        encode(&service.path_segment()),
                        encode(&self.scope)
                    );
                    let body = http_get(self.upstream_http(), &path).await;
                    let json: serde_json::Value =
                        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
                    if let Some(hosts) = json.get("hosts").and_then(|h| h.as_array()) {
                        left.extend(
                            hosts
                                .iter()
                                .map(|h| format!("nacos instance of {service}: {h}")),
                        );
                    }
                    let path = format!(
                        "/nacos/v1/ns/service/subscribers?serviceName={}&groupName={}&namespaceId=public",
                        encode(&service.path_segment()),
                        encode(&self.scope)
                    );
                    let body = http_get(self.upstream_http(), &path).await;
                    let json: serde_json::Value =
                        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
                    if let Some(subscribers) = json.get("subscribers").and_then(|s| s.as_array()) {
                        left.extend(
                            subscribers
                                .iter()
                                .map(|s| format!("nacos subscriber of {service}: {s}")),
                        );
                    }
                }
                left
            }
        }
    }

    /// Who holds `instance`'s entry on the server, looked up directly: the lease its etcd
    /// key hangs on, the session that owns its znode (its `ephemeralOwner`); `None` when
    /// there is no entry. Nacos shows no owner, and the in-process hub needs none: for
    /// them, `Some(0)` while the entry is there.
    pub async fn owner(&self, instance: &Instance) -> Option<i64> {
        let suffix = format!("/{}", instance.id);
        match self.kind {
            Kind::Etcd => self
                .etcd_scope_keys()
                .await
                .into_iter()
                .find(|(key, _)| key.ends_with(&suffix))
                .map(|(_, lease)| lease),
            Kind::ZooKeeper => {
                let client = self.zookeeper().await;
                let path = self
                    .leftovers(std::slice::from_ref(&instance.service))
                    .await
                    .into_iter()
                    .filter_map(|left| left.strip_prefix("znode ").map(str::to_owned))
                    .find(|path| path.ends_with(&suffix))?;
                match client.check_stat(&path).await {
                    Ok(stat) => stat.map(|stat| stat.ephemeral_owner),
                    Err(e) => panic!("stat {path}: {e}"),
                }
            }
            Kind::Nacos => {
                let port = format!("\"port\":{}", instance.port);
                let left = self
                    .leftovers(std::slice::from_ref(&instance.service))
                    .await;
                left.iter()
                    .any(|l| l.starts_with("nacos instance of") && l.contains(&port))
                    .then_some(0)
            }
            Kind::Memory => MemoryHub::named(&self.scope)
                .instances(&instance.service)
                .iter()
                .any(|i| i.id == instance.id)
                .then_some(0),
        }
    }

    /// Server-side sessions behind what this test's clients registered (etcd: the leases
    /// of the scope's keys). Other backends have no per-session query: empty.
    pub async fn held_sessions(&self) -> Vec<i64> {
        if self.kind != Kind::Etcd {
            return Vec::new();
        }
        let mut leases: Vec<i64> = self
            .etcd_scope_keys()
            .await
            .into_iter()
            .map(|(_, lease)| lease)
            .filter(|l| *l != 0)
            .collect();
        leases.dedup();
        leases
    }

    /// Which of `sessions` the server still holds (etcd: leases with time left).
    pub async fn live_sessions(&self, sessions: &[i64]) -> Vec<String> {
        let mut live = Vec::new();
        if self.kind != Kind::Etcd {
            return live;
        }
        for lease in sessions {
            let response = self
                .etcd_gateway(
                    "/v3/lease/timetolive",
                    serde_json::json!({ "ID": lease.to_string() }),
                )
                .await;
            let ttl = json_i64(response.get("TTL").or_else(|| response.get("ttl")));
            if ttl > 0 {
                live.push(format!("lease {lease:x} ({ttl} s left)"));
            }
        }
        live
    }

    /// Every key under the scope's etcd prefix, with the lease it hangs on (0: none).
    async fn etcd_scope_keys(&self) -> Vec<(String, i64)> {
        let prefix = format!("/{}/", self.scope);
        // The end of the prefix's range: its last byte plus one (`/` + 1 is `0`).
        let mut end = prefix.clone().into_bytes();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let range =
            serde_json::json!({ "key": BASE64.encode(&prefix), "range_end": BASE64.encode(&end) });
        let response = self.etcd_gateway("/v3/kv/range", range).await;
        let kvs = response.get("kvs").and_then(|kvs| kvs.as_array());
        kvs.into_iter()
            .flatten()
            .map(|kv| {
                let key = kv.get("key").and_then(|k| k.as_str()).unwrap_or_default();
                let key = BASE64.decode(key).expect("etcd keys in base64");
                (
                    String::from_utf8_lossy(&key).into_owned(),
                    json_i64(kv.get("lease")),
                )
            })
            .collect()
    }

    /// `POST path` with `body` to etcd's JSON gateway (the client port's `/v3/...`), the
    /// inspector's way in that does not go through the client under test: the first
    /// member that answers, with a token from `/v3/auth/authenticate` when the server URL
    /// has credentials.
    async fn etcd_gateway(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        let mut failures = Vec::new();
        for member in self.server.hosts().iter().map(|h| h.authority(2379)) {
            let mut headers = Vec::new();
            if let (Some(user), Some(password)) = (self.server.username(), self.server.password()) {
                let login = serde_json::json!({ "name": user, "password": password });
                match http_post(&member, "/v3/auth/authenticate", &[], &login.to_string()).await {
                    Ok(answer) => {
                        let answer: serde_json::Value =
                            serde_json::from_str(&answer).unwrap_or(serde_json::Value::Null);
                        let token = answer.get("token").and_then(|t| t.as_str());
                        headers.push(("Authorization", token.unwrap_or_default().to_owned()));
                    }
                    Err(error) => {
                        failures.push(format!("{member}: authenticate: {error}"));
                        continue;
                    }
                }
            }
            match http_post(&member, path, &headers, &body.to_string()).await {
                Ok(answer) => {
                    return serde_json::from_str(&answer)
                        .unwrap_or_else(|e| panic!("etcd gateway {path}: {e}: {answer}"));
                }
                Err(error) => failures.push(format!("{member}: {error}")),
            }
        }
        panic!("etcd inspector: no member answered {path}: {failures:#?}");
    }

    async fn zookeeper(&self) -> zookeeper_client::Client {
        let hosts: Vec<String> = self
            .server
            .hosts()
            .iter()
            .map(|h| h.authority(2181))
            .collect();
        let mut connector =
            zookeeper_client::Client::connector().with_session_timeout(Duration::from_secs(5));
        let auth;
        if let (Some(user), Some(password)) = (self.server.username(), self.server.password()) {
            auth = format!("{user}:{password}");
            connector = connector.with_auth("digest", auth.as_bytes());
        }
        tokio::time::timeout(Duration::from_secs(5), connector.connect(&hosts.join(",")))
            .await
            .expect("ZooKeeper inspector connects within 5 s")
            .expect("ZooKeeper inspector")
    }

    fn upstream_http(&self) -> SocketAddr {
        let host = &self.server.hosts()[0];
        format!(
            "{}:{}",
            host.host,
            host.port.unwrap_or(self.kind.default_port())
        )
        .parse()
        .expect("a loopback IP in the Nacos URL")
    }
}

/// A provider that can die without unregistering.
pub enum Provider {
    /// An in-process client; dying drops it.
    InProcess(Option<Arc<dyn Registry>>),
    /// A child process; dying is SIGKILL.
    Child(tokio::process::Child),
}

impl Provider {
    /// Dies without unregistering.
    pub async fn die(&mut self) {
        match self {
            Provider::InProcess(client) => drop(client.take()),
            Provider::Child(child) => {
                child.start_kill().expect("SIGKILL the provider child");
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            }
        }
    }
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An int64 of etcd's JSON gateway: a string of digits (proto3 JSON), absent when 0.
fn json_i64(value: Option<&serde_json::Value>) -> i64 {
    match value {
        Some(serde_json::Value::String(digits)) => digits.parse().unwrap_or_default(),
        Some(number) => number.as_i64().unwrap_or_default(),
        None => 0,
    }
}

/// A minimal HTTP/1.0 POST of a JSON `body` to `authority` (HTTP/1.0, so the answer is
/// never chunked: it ends when the server closes), bounded to 5 s: the body of a 200
/// answer, or what went wrong.
async fn http_post(
    authority: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Result<String, String> {
    let request = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await?;
        let mut head = format!(
            "POST {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = match tokio::time::timeout(Duration::from_secs(5), request).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Err(error.to_string()),
        Err(_) => return Err("no answer within 5 s".to_owned()),
    };
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    if head.starts_with("HTTP/1.") && head.lines().next().is_some_and(|l| l.contains(" 200 ")) {
        Ok(body.to_owned())
    } else {
        Err(format!(
            "{}: {body}",
            head.lines().next().unwrap_or_default()
        ))
    }
}

/// A minimal HTTP/1.0 GET (no client library needed for one query), bounded to 5 s.
async fn http_get(addr: SocketAddr, path: &str) -> String {
    let request = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(
                format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .expect("Nacos HTTP answers within 5 s")
        .expect("Nacos HTTP query");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 "),
        "Nacos HTTP {path}: {head}"
    );
    body.to_owned()
}
