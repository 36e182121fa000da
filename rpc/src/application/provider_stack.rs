//! The provider's stack, assembled here in one place: everything a call passes through
//! between the socket and the handler, outermost first.
//!
//! In the transport, per connection (`rpc-transport`, assembled in `connection.rs`):
//! 1. TLS, when configured, then HTTP/2 (hyper, with the connection's limits);
//! 2. the peer's service (`peer.rs`): an rpc consumer's call is refused as "closing, not
//!    executed" once the provider closes; a plain client's call after the lifecycle sent
//!    plain clients away starts its connection's GOAWAY;
//! 3. the call's bounds (`call_bounds.rs`): a request that is not gRPC gets HTTP 415; the
//!    caller's `grpc-timeout` ends the call (handler and response stream); the drain's
//!    bound ends a call still open with `UNAVAILABLE` in its trailers;
//! 4. the connection's addresses put in the request, for tonic's `remote_addr()`.
//!
//! Ours, built by [`ApplicationBuilder::provider_stack`] below:
//! 5. the access log, when configured;
//! 6. metrics and trace, one layer (`CallObserve`), when either is on: the call's
//!    duration and span include everything below;
//! 7. the graceful filter (`rpc_filter::graceful`): a closing provider refuses a new call
//!    as "closing, not executed", and counts what is in flight for the drain;
//! 8. the concurrency limit, when `provider.limit.enabled`: inside the graceful filter so
//!    a closing provider refuses as closing first, and a call refused at the limit is
//!    still logged, counted and traced;
//! 9. message sizes (`protocol.max_*_message_size`): the size of what travels, compressed;
//! 10. compression (`provider.services.<name>.compression`);
//! 11. the application's own layers (`ApplicationBuilder::provider_layer`, the first
//!     added outermost): they see only admitted calls, as plain messages;
//! 12. the routes: the application's services, the health service, reflection when on.
//!
//! A layer that is off is left out rather than passed through: each is one more future
//! and body wrapper per call. The response body, wrappers in wrappers, is boxed once,
//! into tonic's body type, at the top of 5–12.

use std::convert::Infallible;

use http::{Request, Response};
use hyper::body::Incoming;
use rpc_filter::compression::ProviderCompressionLayer;
use rpc_filter::graceful::ProviderGracefulLayer;
use rpc_filter::limit::{ConcurrencyLimitLayer, ConcurrencyLimiter};
use rpc_filter::observe::CallObserveLayer;
use rpc_filter::trace::{CallTraceLayer, Side};
use rpc_lifecycle::BoxHttpService;
use rpc_transport::{MessageLimitLayer, ServiceRoutes};
use tonic::body::Body as TonicBody;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
use tower_layer::Layer;

use super::{ApplicationBuilder, ProviderService};

impl ApplicationBuilder {
    /// Layers 5–12 of the module's list over `routes`, boxed for the lifecycle.
    pub(super) fn provider_stack(&self, routes: ServiceRoutes) -> BoxHttpService {
        let protocol = &self.config.protocol;
        let message_limits = MessageLimitLayer::new(protocol.message_limits());
        let compression = ProviderCompressionLayer::new(
            self.config
                .provider
                .services
                .iter()
                .map(|(name, service)| (name.clone(), service.compression)),
            protocol.compression_limits(),
        );
        // Without application layers the routes are not boxed.
        if self.provider_layers.is_empty() {
            return self.admitted(message_limits.layer(compression.layer(routes)));
        }
        let mut handler = ProviderService::new(routes);
        for layer in self.provider_layers.iter().rev() {
            handler = layer(handler);
        }
        self.admitted(message_limits.layer(compression.layer(handler)))
    }

    /// Layers 5–8 over `handler`.
    fn admitted<S>(&self, handler: S) -> BoxHttpService
    where
        S: tower::Service<Request<Incoming>, Response = Response<TonicBody>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let limit = &self.config.provider.limit;
        let graceful = ProviderGracefulLayer::new(self.lifecycle.provider_handles());
        if limit.enabled {
            let limiter = ConcurrencyLimiter::new(limit.gradient());
            self.metrics.observe_limiter(&limiter);
            let limited = ConcurrencyLimitLayer::new(limiter).layer(handler);
            self.observed(graceful.layer(limited))
        } else {
            self.observed(graceful.layer(handler))
        }
    }

    /// Layers 5–6 over `graceful`, when any is on; with both off `graceful` alone. Either
    /// way the response body is boxed once here.
    fn observed<S, B>(&self, graceful: S) -> BoxHttpService
    where
        S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        B: hyper::body::Body<Data = hyper::body::Bytes> + Send + 'static,
        B::Error: Into<rpc_core::BoxError>,
    {
        let tracing = self.config.tracing.enabled;
        let conventions = self.config.tracing.semantic_conventions();
        let access_log = self.access_log_layer(Side::Server);
        if !self.metrics.is_enabled() && !tracing && access_log.is_none() {
            return boxed(graceful);
        }
        let trace = if tracing {
            CallTraceLayer::server().with_conventions(conventions)
        } else {
            CallTraceLayer::disabled()
        };
        let observed = CallObserveLayer::new(self.metrics.server_layer(), trace).layer(graceful);
        match access_log {
            Some(access_log) => boxed(access_log.layer(observed)),
            None => boxed(observed),
        }
    }
}

/// `service` as the lifecycle serves it: its future and its response body boxed, once.
fn boxed<S, B>(service: S) -> BoxHttpService
where
    S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = hyper::body::Bytes> + Send + 'static,
    B::Error: Into<rpc_core::BoxError>,
{
    BoxCloneSyncService::new(service.map_response(|response| response.map(TonicBody::new)))
}
