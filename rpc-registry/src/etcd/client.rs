//! The etcd v3 client of this backend: connections to the cluster's members, etcd
//! authentication, and the few requests the backend sends (prefix reads, puts under a
//! lease, writes and deletes conditional on the lease a key hangs on, leases and their
//! keep-alive stream, prefix watches).
//!
//! It is ours, on stubs generated from etcd's protos and committed (see `proto.rs`),
//! because etcd-client needs a `protoc` from the environment at build time, which a
//! project depending on `lossless-rpc` does not have (issue 25).
//!
//! # Members
//! Every member in the URL is one tonic `Endpoint`, connected on its first request and
//! again after a lost connection, with `TCP_NODELAY`, a connect timeout of the URL's
//! `connect_timeout` divided among the members (so that connecting at start-up can try
//! each in turn when some hosts are gone), and HTTP/2 keep-alive pings every 10 s
//! (etcd's default policy answers pings more often than every 5 s with `GOAWAY`) that
//! give up after `request_timeout`, so a silently dead member is noticed. Requests take
//! the members in turn and go on to the next one when a member cannot be reached
//! (`members.rs`). With `tls_*` parameters every endpoint is HTTPS with the URL's CA,
//! client identity and domain.
//!
//! # Authentication
//! With credentials in the URL, connecting authenticates (the `Authenticate` RPC) and
//! every request carries the token etcd gave; a request whose token etcd refuses
//! authenticates again, once, and is sent again (`auth.rs`).
//!
//! The bounds on every request are the callers' (`error::call`); nothing here waits
//! on its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Status, Streaming};

use crate::etcd::auth::{Auth, Token, token_from, with_token};
use crate::etcd::codec::prefix_end;
use crate::etcd::config::EtcdTls;
use crate::etcd::error::{EtcdError, is_invalid_token, try_another_member};
use crate::etcd::member_heard::MemberHeard;
use crate::etcd::members::Members;
use crate::etcd::proto::etcdserverpb::auth_client::AuthClient;
use crate::etcd::proto::etcdserverpb::kv_client::KvClient;
use crate::etcd::proto::etcdserverpb::lease_client::LeaseClient;
use crate::etcd::proto::etcdserverpb::{
    AuthenticateRequest, LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseRevokeRequest, PutRequest, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use crate::etcd::txn::{self, Held};
use crate::remote::NetworkSettings;

/// Interval of the HTTP/2 keep-alive pings.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// A client of one etcd cluster; clones share the connections and the token.
#[derive(Clone)]
pub(super) struct EtcdClient {
    shared: Arc<Shared>,
}

struct Shared {
    /// Every member of the URL.
    members: Members,
    /// The credentials and the token requests carry.
    auth: Auth,
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
        // Connecting at start-up may have to try every member within `connect_timeout`.
        let members = u32::try_from(network.endpoints.len().max(1)).unwrap_or(u32::MAX);
        let connect_timeout = (network.connect_timeout / members).max(Duration::from_millis(1));
        let endpoints = network
            .endpoints
            .iter()
            .map(|authority| endpoint(authority, network, connect_timeout, tls.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let client = Self {
            shared: Arc::new(Shared {
                members: Members::new(endpoints),
                auth: Auth::new(network.credentials.clone()),
            }),
        };
        client
            .shared
            .auth
            .renew(None, |credentials| client.authenticate(credentials))
            .await?;
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

    /// Writes `value` at `key` under `lease` if the key is absent or still hangs on
    /// `previous` (the lease this client wrote it under before), in one transaction:
    /// [`Held::Done`] when written, else [`Held::ByLease`] of the lease that holds it now
    /// (another generation's, left alone).
    pub(super) async fn put_if_ours(
        &self,
        key: &str,
        value: &str,
        lease: i64,
        previous: i64,
    ) -> Result<Held, EtcdError> {
        let request = txn::put_if_absent_or_held(key, value, lease, previous);
        let answer = self.txn(request).await?;
        txn::put_outcome(&answer)
    }

    /// Deletes `key` if it hangs on `lease`, in one transaction: [`Held::Done`] when
    /// deleted, [`Held::Absent`] when there was no such key, [`Held::ByLease`] when
    /// another lease holds it (it is left alone).
    pub(super) async fn delete_if_held(&self, key: &str, lease: i64) -> Result<Held, EtcdError> {
        let answer = self.txn(txn::delete_if_held(key, lease)).await?;
        txn::delete_outcome(&answer)
    }

    /// Sends one transaction.
    async fn txn(&self, message: TxnRequest) -> Result<TxnResponse, EtcdError> {
        self.authorized(|channel, token| {
            let request = with_token(message.clone(), token);
            async move { KvClient::new(channel).txn(request).await }
        })
        .await
        .map(tonic::Response::into_inner)
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

    /// Runs `send` with the current token on a member that answers; when etcd refuses
    /// the token, authenticates again (once) and runs it again with the new one.
    async fn authorized<T, F, Fut>(&self, send: F) -> Result<T, EtcdError>
    where
        F: Fn(Channel, Option<Token>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        Ok(self.authorized_on(send).await?.0)
    }

    /// [`EtcdClient::authorized`], with what the watches on the member that answered
    /// heard of it.
    pub(super) async fn authorized_on<T, F, Fut>(
        &self,
        send: F,
    ) -> Result<(T, Arc<MemberHeard>), EtcdError>
    where
        F: Fn(Channel, Option<Token>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let auth = &self.shared.auth;
        let token = auth.token();
        match self
            .to_a_member(|channel| send(channel, token.clone()))
            .await
        {
            Err(status) if auth.enabled() && is_invalid_token(&status) => {
                auth.renew(token, |credentials| self.authenticate(credentials))
                    .await?;
                tracing::debug!(
                    "etcd refused the authentication token; sending again with a new one"
                );
                let token = auth.token();
                Ok(self
                    .to_a_member(|channel| send(channel, token.clone()))
                    .await?)
            }
            result => Ok(result?),
        }
    }

    /// Runs `send` on the members in the order of [`Members::order`] until one is
    /// reached: its answer and what the watches on that member heard of it, or the last
    /// member's failure.
    async fn to_a_member<T, F, Fut>(&self, send: F) -> Result<(T, Arc<MemberHeard>), Status>
    where
        F: Fn(Channel) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let members = &self.shared.members;
        let mut failure = None;
        for attempt in members
            .order()
            .into_iter()
            .filter_map(|i| members.attempt(i))
        {
            match send(attempt.channel()).await {
                // The attempt, dropped, sets the member aside.
                Err(status) if try_another_member(&status) => failure = Some(status),
                answer => {
                    let heard = attempt.heard();
                    attempt.reached();
                    return answer.map(|answer| (answer, heard));
                }
            }
        }
        Err(failure.unwrap_or_else(|| Status::unavailable("no etcd member to send to")))
    }

    /// A token for `credentials` (the `Authenticate` RPC, which itself carries none).
    async fn authenticate(&self, (name, password): (String, String)) -> Result<Token, EtcdError> {
        let request = AuthenticateRequest { name, password };
        let (answer, _) = self
            .to_a_member(|channel| {
                let request = request.clone();
                async move { AuthClient::new(channel).authenticate(request).await }
            })
            .await?;
        token_from(answer.into_inner().token)
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

/// The endpoint of the member at `authority` (`host:port`), whose connections must be
/// made within `connect_timeout`.
fn endpoint(
    authority: &str,
    network: &NetworkSettings,
    connect_timeout: Duration,
    tls: Option<&ClientTlsConfig>,
) -> Result<Endpoint, EtcdError> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let endpoint = Endpoint::from_shared(format!("{scheme}://{authority}"))
        .map_err(EtcdError::Setup)?
        .tcp_nodelay(true)
        .connect_timeout(connect_timeout)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(network.request_timeout)
        .keep_alive_while_idle(false);
    match tls {
        Some(tls) => endpoint.tls_config(tls.clone()).map_err(EtcdError::Setup),
        None => Ok(endpoint),
    }
}
