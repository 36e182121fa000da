//! The etcd v3 client of this backend: one gRPC channel over the cluster's members, etcd
//! authentication, and the few requests the backend sends (prefix reads, puts under a
//! lease, deletes, leases and their keep-alive stream, prefix watches).
//!
//! It is ours, on stubs `build.rs` generates with a vendored `protoc` (see `proto.rs`),
//! because etcd-client needs a `protoc` from the environment at build time, which a
//! project depending on `rpc` does not have (issue 25).
//!
//! # Channel
//! Every member in the URL is one tonic `Endpoint` of a channel balanced over them
//! (power of two random choices), as etcd-client did. Each endpoint sets `TCP_NODELAY`,
//! the URL's `connect_timeout`, and HTTP/2 keep-alive pings every 10 s (etcd's default
//! policy answers pings more often than every 5 s with `GOAWAY`) that give up after
//! `request_timeout`, so a silently dead member is noticed. Connections are made lazily
//! and again after a loss: a member that is down fails the requests the balancer gives
//! it, each with its own connect error, while the others keep answering theirs; every
//! caller in this backend then retries (its background loops, whose next pick is likely
//! another member) or reports the error. With `tls_*` parameters every endpoint is
//! HTTPS with the URL's CA, client identity and domain.
//!
//! # Authentication
//! With credentials in the URL, connecting authenticates (the `Authenticate` RPC) and
//! every request carries the token etcd gave in its `token` metadata. When etcd refuses a
//! token (expired: a simple token lives 5 minutes unused; or forgotten by a restarted
//! etcd), the request authenticates again, once, and is sent again; concurrent requests
//! that hit the same stale token authenticate once between them.
//!
//! The bounds on every request are the callers' (`error::call`); nothing here waits
//! on its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::sync::{Mutex, mpsc};
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status, Streaming};

use crate::etcd::config::EtcdTls;
use crate::etcd::error::{EtcdError, is_invalid_token};
use crate::etcd::proto::etcdserverpb::auth_client::AuthClient;
use crate::etcd::proto::etcdserverpb::kv_client::KvClient;
use crate::etcd::proto::etcdserverpb::lease_client::LeaseClient;
use crate::etcd::proto::etcdserverpb::watch_client::WatchClient;
use crate::etcd::proto::etcdserverpb::{
    AuthenticateRequest, DeleteRangeRequest, LeaseGrantRequest, LeaseKeepAliveRequest,
    LeaseKeepAliveResponse, LeaseRevokeRequest, PutRequest, RangeRequest, RangeResponse,
    WatchCreateRequest, WatchRequest, WatchResponse, watch_request,
};
use crate::remote::NetworkSettings;

/// Interval of the HTTP/2 keep-alive pings.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// The metadata key etcd reads the authentication token from.
const TOKEN_KEY: &str = "token";

/// A client of one etcd cluster; clones share the channel and the token.
#[derive(Clone)]
pub(super) struct EtcdClient {
    shared: Arc<Shared>,
}

struct Shared {
    /// Balanced over every member of the URL.
    channel: Channel,
    /// User and password, if etcd authentication is on.
    credentials: Option<(String, String)>,
    /// The token every request carries, once authenticated.
    token: RwLock<Option<AsciiMetadataValue>>,
    /// Held while authenticating again, so that concurrent refusals authenticate once.
    refresh: Mutex<()>,
}

impl EtcdClient {
    /// A client of the members of `network` (TLS to each with `tls`), authenticated when
    /// `network` has credentials. Only authenticating talks to etcd here; without
    /// credentials the first request is the first contact.
    ///
    /// # Errors
    /// [`EtcdError::Setup`] for an endpoint or TLS settings tonic refuses;
    /// [`EtcdError::Status`] when authenticating fails (no member answered, or bad
    /// credentials).
    pub(super) async fn connect(
        network: &NetworkSettings,
        tls: Option<&EtcdTls>,
    ) -> Result<Self, EtcdError> {
        let tls = tls.map(EtcdTls::client_config);
        let endpoints = network
            .endpoints
            .iter()
            .map(|authority| endpoint(authority, network, tls.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let client = Self {
            shared: Arc::new(Shared {
                channel: Channel::balance_list(endpoints.into_iter()),
                credentials: network.credentials.clone(),
                token: RwLock::new(None),
                refresh: Mutex::new(()),
            }),
        };
        if let Some(credentials) = &client.shared.credentials {
            let token = authenticate(client.shared.channel.clone(), credentials).await?;
            *client.shared.token.write() = Some(token);
        }
        Ok(client)
    }

    /// The keys starting with `prefix` and their values (only their number with
    /// `count_only`), with the revision of the read in the header.
    pub(super) async fn range_prefix(
        &self,
        prefix: &[u8],
        count_only: bool,
    ) -> Result<RangeResponse, EtcdError> {
        let message = RangeRequest {
            key: prefix.to_vec(),
            range_end: prefix_end(prefix),
            count_only,
            ..RangeRequest::default()
        };
        self.authorized(|channel, token| {
            let request = with_token(message.clone(), token);
            async move { KvClient::new(channel).range(request).await }
        })
        .await
        .map(tonic::Response::into_inner)
    }

    /// Writes `value` at `key`, attached to `lease` (taking it off any lease it had).
    pub(super) async fn put(&self, key: &str, value: &str, lease: i64) -> Result<(), EtcdError> {
        let message = PutRequest {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            lease,
            ..PutRequest::default()
        };
        self.authorized(|channel, token| {
            let request = with_token(message.clone(), token);
            async move { KvClient::new(channel).put(request).await }
        })
        .await
        .map(drop)
    }

    /// Deletes `key` (nothing happens when it is not there).
    pub(super) async fn delete(&self, key: &str) -> Result<(), EtcdError> {
        let message = DeleteRangeRequest {
            key: key.as_bytes().to_vec(),
            ..DeleteRangeRequest::default()
        };
        self.authorized(|channel, token| {
            let request = with_token(message.clone(), token);
            async move { KvClient::new(channel).delete_range(request).await }
        })
        .await
        .map(drop)
    }

    /// Grants a lease of `ttl` seconds; its id.
    pub(super) async fn lease_grant(&self, ttl: i64) -> Result<i64, EtcdError> {
        let message = LeaseGrantRequest {
            ttl,
            ..LeaseGrantRequest::default()
        };
        let granted = self
            .authorized(|channel, token| {
                let request = with_token(message, token);
                async move { LeaseClient::new(channel).lease_grant(request).await }
            })
            .await?
            .into_inner();
        if !granted.error.is_empty() {
            return Err(EtcdError::Protocol(format!(
                "etcd refused the lease: {}",
                granted.error
            )));
        }
        Ok(granted.id)
    }

    /// Revokes `lease`, deleting every key attached to it.
    pub(super) async fn lease_revoke(&self, lease: i64) -> Result<(), EtcdError> {
        let message = LeaseRevokeRequest { id: lease };
        self.authorized(|channel, token| {
            let request = with_token(message, token);
            async move { LeaseClient::new(channel).lease_revoke(request).await }
        })
        .await
        .map(drop)
    }

    /// Opens the keep-alive stream of `lease`, renewing it once on the way.
    ///
    /// # Errors
    /// [`EtcdError::LeaseNotFound`] when etcd no longer knows the lease; else as a
    /// request.
    pub(super) async fn lease_keep_alive(&self, lease: i64) -> Result<LeaseKeepAlive, EtcdError> {
        let renew = LeaseKeepAliveRequest { id: lease };
        let (requests, mut responses) = self
            .authorized(|channel, token| {
                // The first renewal goes out with the call; later ones through the sender.
                let (requests, queued) = mpsc::channel(4);
                let stream = tokio_stream::once(renew).chain(ReceiverStream::new(queued));
                let request = with_token(stream, token);
                async move {
                    let responses = LeaseClient::new(channel)
                        .lease_keep_alive(request)
                        .await?
                        .into_inner();
                    Ok((requests, responses))
                }
            })
            .await?;
        match responses.message().await? {
            Some(first) if first.ttl > 0 => Ok(LeaseKeepAlive {
                renew,
                requests,
                responses,
            }),
            Some(_) => Err(EtcdError::LeaseNotFound(lease)),
            None => Err(EtcdError::Protocol(
                "etcd ended the lease keep-alive stream before answering".to_owned(),
            )),
        }
    }

    /// Watches the keys starting with `prefix`, from `start_revision` (inclusive) on.
    pub(super) async fn watch_prefix(
        &self,
        prefix: &[u8],
        start_revision: i64,
    ) -> Result<Watch, EtcdError> {
        let create = WatchRequest {
            request_union: Some(watch_request::RequestUnion::CreateRequest(
                WatchCreateRequest {
                    key: prefix.to_vec(),
                    range_end: prefix_end(prefix),
                    start_revision,
                    ..WatchCreateRequest::default()
                },
            )),
        };
        let responses = self
            .authorized(|channel, token| {
                // One watch per stream, so nothing is ever sent after the create request;
                // the request half stays open (pending) until the watch is dropped, which
                // resets the stream and ends the watch in etcd.
                let stream = tokio_stream::once(create.clone()).chain(tokio_stream::pending());
                let request = with_token(stream, token);
                async move { WatchClient::new(channel).watch(request).await }
            })
            .await?
            .into_inner();
        Ok(Watch { responses })
    }

    /// Runs `send` with the current token; when etcd refuses the token, authenticates
    /// again (once) and runs it again with the new one.
    async fn authorized<T, F, Fut>(&self, send: F) -> Result<T, EtcdError>
    where
        F: Fn(Channel, Option<AsciiMetadataValue>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let token = self.shared.token.read().clone();
        match send(self.shared.channel.clone(), token.clone()).await {
            Err(status) if self.shared.credentials.is_some() && is_invalid_token(&status) => {
                self.authenticate_again(token).await?;
                let token = self.shared.token.read().clone();
                Ok(send(self.shared.channel.clone(), token).await?)
            }
            result => Ok(result?),
        }
    }

    /// Replaces the token `stale`, unless a concurrent request already did.
    async fn authenticate_again(&self, stale: Option<AsciiMetadataValue>) -> Result<(), EtcdError> {
        let Some(credentials) = &self.shared.credentials else {
            return Ok(());
        };
        let _one_at_a_time = self.shared.refresh.lock().await;
        if *self.shared.token.read() != stale {
            return Ok(());
        }
        let token = authenticate(self.shared.channel.clone(), credentials).await?;
        *self.shared.token.write() = Some(token);
        tracing::debug!("etcd refused the authentication token; authenticated again");
        Ok(())
    }
}

/// The keep-alive stream of one lease.
pub(super) struct LeaseKeepAlive {
    /// The renewal request of the lease.
    renew: LeaseKeepAliveRequest,
    /// Renewals to send; closed by tonic when the stream ends.
    requests: mpsc::Sender<LeaseKeepAliveRequest>,
    /// etcd's answers, one per renewal.
    responses: Streaming<LeaseKeepAliveResponse>,
}

impl LeaseKeepAlive {
    /// Asks etcd to renew the lease; the answer comes through [`LeaseKeepAlive::message`].
    ///
    /// # Errors
    /// [`EtcdError::Protocol`] when the stream has ended.
    pub(super) async fn keep_alive(&mut self) -> Result<(), EtcdError> {
        self.requests
            .send(self.renew)
            .await
            .map_err(|_| EtcdError::Protocol("the lease keep-alive stream is closed".to_owned()))
    }

    /// etcd's next answer (its `ttl` is 0 when etcd no longer knows the lease); `None`
    /// when etcd ended the stream.
    pub(super) async fn message(&mut self) -> Result<Option<LeaseKeepAliveResponse>, EtcdError> {
        Ok(self.responses.message().await?)
    }
}

/// A watch of a prefix; dropping it cancels it.
pub(super) struct Watch {
    responses: Streaming<WatchResponse>,
}

impl Watch {
    /// etcd's next watch response (the first says `created`); `None` when etcd ended the
    /// stream.
    pub(super) async fn message(&mut self) -> Result<Option<WatchResponse>, EtcdError> {
        Ok(self.responses.message().await?)
    }
}

/// The endpoint of the member at `authority` (`host:port`).
fn endpoint(
    authority: &str,
    network: &NetworkSettings,
    tls: Option<&ClientTlsConfig>,
) -> Result<Endpoint, EtcdError> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let endpoint = Endpoint::from_shared(format!("{scheme}://{authority}"))
        .map_err(EtcdError::Setup)?
        .tcp_nodelay(true)
        .connect_timeout(network.connect_timeout)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(network.request_timeout)
        .keep_alive_while_idle(false);
    match tls {
        Some(tls) => endpoint.tls_config(tls.clone()).map_err(EtcdError::Setup),
        None => Ok(endpoint),
    }
}

/// A token for `credentials` (the `Authenticate` RPC, which itself carries none).
async fn authenticate(
    channel: Channel,
    (name, password): &(String, String),
) -> Result<AsciiMetadataValue, EtcdError> {
    let request = AuthenticateRequest {
        name: name.clone(),
        password: password.clone(),
    };
    let token = AuthClient::new(channel)
        .authenticate(request)
        .await?
        .into_inner()
        .token;
    AsciiMetadataValue::try_from(token).map_err(|_| {
        EtcdError::Protocol("etcd answered with a token that is not valid metadata".to_owned())
    })
}

/// `message` as a request carrying `token`, if any.
fn with_token<M>(message: M, token: Option<AsciiMetadataValue>) -> Request<M> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert(TOKEN_KEY, token);
    }
    request
}

/// The end of the range of every key that starts with `prefix` (etcd's `range_end`):
/// the prefix with its last byte below 0xff incremented and what follows it dropped;
/// `\0` (every key from `prefix` on) when every byte is 0xff.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_the_last_key_with_the_prefix() {
        assert_eq!(prefix_end(b"/rpc/a/"), b"/rpc/a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn a_token_travels_as_metadata_only_when_there_is_one() {
        let token = AsciiMetadataValue::from_static("abc.42");
        let request = with_token((), Some(token));
        assert_eq!(
            request
                .metadata()
                .get(TOKEN_KEY)
                .and_then(|v| v.to_str().ok()),
            Some("abc.42")
        );
        assert!(with_token((), None).metadata().get(TOKEN_KEY).is_none());
    }
}
