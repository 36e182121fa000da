//! The provider's route table: each call to the generated server of its service, by the
//! first segment of its path (`/package.Service/Method`), `UNIMPLEMENTED` for a service
//! not served.
//!
//! In place of tonic's `Routes` (an axum router): a provider serves a handful of
//! services, so the table is a list compared in order (the application's services
//! first), with no pattern matching, no boxed service cloned per call and no extension
//! written into the request. A generated server is cheap to clone (its handler is
//! behind an `Arc`) and always ready, which is what each call takes.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tonic::body::Body as TonicBody;
use tonic::server::NamedService;
use tower::{Service, ServiceExt};

type CallFuture = Pin<Box<dyn Future<Output = Result<Response<TonicBody>, Infallible>> + Send>>;

/// One served service: its full name, and how a call reaches it.
type Route = (
    Box<str>,
    Arc<dyn Fn(Request<TonicBody>) -> CallFuture + Send + Sync>,
);

/// The services a provider serves, by name; a `tower::Service` for their calls.
#[derive(Clone, Default)]
pub struct ServiceRoutes {
    routes: Arc<Vec<Route>>,
}

impl std::fmt::Debug for ServiceRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.routes.iter().map(|(name, _)| name))
            .finish()
    }
}

impl ServiceRoutes {
    /// Serves `service` (a tonic-generated server, or any service named by
    /// [`NamedService`]) for calls whose path begins `/<S::NAME>/`. A second service of
    /// the same name replaces the first.
    pub fn add_service<S>(&mut self, service: S) -> &mut Self
    where
        S: Service<Request<TonicBody>, Response = Response<TonicBody>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let call = move |request| -> CallFuture { Box::pin(service.clone().oneshot(request)) };
        let routes = Arc::make_mut(&mut self.routes);
        routes.retain(|(name, _)| &**name != S::NAME);
        routes.push((S::NAME.into(), Arc::new(call)));
        self
    }

    /// The names of the services served, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|(name, _)| &**name)
    }
}

impl Service<Request<TonicBody>> for ServiceRoutes {
    type Response = Response<TonicBody>;
    type Error = Infallible;
    type Future = CallFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<TonicBody>) -> CallFuture {
        let service = service_of(request.uri().path());
        match self.routes.iter().find(|(name, _)| &**name == service) {
            Some((_, call)) => call(request),
            None => Box::pin(std::future::ready(Ok(unimplemented(service)))),
        }
    }
}

/// `package.Service` of `/package.Service/Method`.
fn service_of(path: &str) -> &str {
    let path = path.strip_prefix('/').unwrap_or(path);
    path.split_once('/').map_or(path, |(service, _)| service)
}

/// The answer to a call of a service not served (gRPC's `UNIMPLEMENTED`, trailers-only).
fn unimplemented(service: &str) -> Response<TonicBody> {
    tonic::Status::unimplemented(format!("service `{service}` is not served here")).into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Named<const CODE: i32>;

    impl<const CODE: i32> NamedService for Named<CODE> {
        const NAME: &'static str = if CODE == 5 { "a.Five" } else { "a.Six" };
    }

    impl<const CODE: i32> Service<Request<TonicBody>> for Named<CODE> {
        type Response = Response<TonicBody>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<TonicBody>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<TonicBody>) -> Self::Future {
            std::future::ready(Ok(tonic::Status::new(CODE.into(), "").into_http()))
        }
    }

    async fn status(routes: &ServiceRoutes, path: &str) -> String {
        let request = Request::post(path).body(TonicBody::empty()).unwrap();
        let response = routes.clone().oneshot(request).await.unwrap();
        response.headers()["grpc-status"]
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn each_call_reaches_the_service_its_path_names() {
        let mut routes = ServiceRoutes::default();
        routes.add_service(Named::<5>).add_service(Named::<6>);
        assert_eq!(status(&routes, "/a.Five/M").await, "5");
        assert_eq!(status(&routes, "/a.Six/Other").await, "6");
        assert_eq!(routes.names().collect::<Vec<_>>(), ["a.Five", "a.Six"]);
    }

    #[tokio::test]
    async fn a_service_not_served_is_unimplemented() {
        let mut routes = ServiceRoutes::default();
        routes.add_service(Named::<5>);
        assert_eq!(status(&routes, "/a.Fiv/M").await, "12");
        assert_eq!(
            status(&routes, "/a.Five").await,
            "5",
            "no method: the service says"
        );
        assert_eq!(status(&routes, "/").await, "12");
        assert_eq!(status(&ServiceRoutes::default(), "/a.Five/M").await, "12");
    }
}
