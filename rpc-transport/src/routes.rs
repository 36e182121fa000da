//! The provider's route table: each call to the generated server of its service, by the
//! first segment of its path (`/package.Service/Method`), `UNIMPLEMENTED` for a service
//! not served.
//!
//! In place of tonic's `Routes` (an axum router): a provider serves a handful of
//! services, so the table is a list compared in order (the application's services
//! first), with no pattern matching, no boxed service cloned per call and no extension
//! written into the request. A generated server is cheap to clone (its handler is
//! behind an `Arc`) and always ready, which is what each call takes.
//!
//! A service served under a version or group ([`ServiceRoutes::serve_as`]) refuses a
//! Dubbo Triple call that asks another (`tri-service-version`, `tri-service-group`:
//! `UNIMPLEMENTED`, as a Dubbo provider answers); a call that names neither is served,
//! and so is every call of a service served under neither (no header looked up).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use http::{Request, Response};
use tonic::body::Body as TonicBody;
use tonic::server::NamedService;
use tower::{Service, ServiceExt};

type CallFuture = Pin<Box<dyn Future<Output = Result<Response<TonicBody>, Infallible>> + Send>>;

/// One served service: its full name, the version and group it is served under, and how
/// a call reaches it.
#[derive(Clone)]
struct Route {
    name: Box<str>,
    version: Box<str>,
    group: Box<str>,
    call: Arc<dyn Fn(Request<TonicBody>) -> CallFuture + Send + Sync>,
}

/// The services a provider serves, by name; a `tower::Service` for their calls.
#[derive(Clone, Default)]
pub struct ServiceRoutes {
    routes: Arc<Vec<Route>>,
}

impl std::fmt::Debug for ServiceRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.routes.iter().map(|route| &route.name))
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
        let call = move |request| -> CallFuture {
            let mut service = service.clone();
            // A generated server is always ready: its future alone is boxed. Any other
            // service not ready at once is waited on (it has registered the no-op
            // waker only; `oneshot` polls it again with the call's).
            let mut noop = Context::from_waker(Waker::noop());
            match service.poll_ready(&mut noop) {
                Poll::Ready(Ok(())) => Box::pin(service.call(request)),
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => Box::pin(service.oneshot(request)),
            }
        };
        let routes = Arc::make_mut(&mut self.routes);
        routes.retain(|route| &*route.name != S::NAME);
        routes.push(Route {
            name: S::NAME.into(),
            version: "".into(),
            group: "".into(),
            call: Arc::new(call),
        });
        self
    }

    /// Serves the service named `interface` (added before) under `version` and `group`
    /// (empty for none): a Triple call asking another is `UNIMPLEMENTED`.
    pub fn serve_as(&mut self, interface: &str, version: &str, group: &str) -> &mut Self {
        let routes = Arc::make_mut(&mut self.routes);
        for route in routes.iter_mut().filter(|route| &*route.name == interface) {
            route.version = version.into();
            route.group = group.into();
        }
        self
    }

    /// The names of the services served, in the order they were added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|route| &*route.name)
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
        let Some(route) = self.routes.iter().find(|route| &*route.name == service) else {
            return Box::pin(std::future::ready(Ok(unimplemented(service))));
        };
        // A service served under no version or group serves whatever a caller asks (its
        // registration already told Dubbo consumers what it is): no header is looked up.
        let keyed = !route.version.is_empty() || !route.group.is_empty();
        let mismatch = keyed
            .then(|| rpc_core::triple::mismatch(request.headers(), &route.version, &route.group))
            .flatten();
        match mismatch {
            None => (route.call)(request),
            Some(reason) => Box::pin(std::future::ready(Ok(tonic::Status::unimplemented(
                format!("service `{service}`: {reason}"),
            )
            .into_http()))),
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

    /// Not ready the first time it is asked (each clone), ready from then on.
    #[derive(Clone, Default)]
    struct Slow {
        asked: bool,
    }

    impl NamedService for Slow {
        const NAME: &'static str = "a.Slow";
    }

    impl Service<Request<TonicBody>> for Slow {
        type Response = Response<TonicBody>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<TonicBody>, Infallible>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            if std::mem::replace(&mut self.asked, true) {
                return Poll::Ready(Ok(()));
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }

        fn call(&mut self, _: Request<TonicBody>) -> Self::Future {
            assert!(self.asked, "called only once ready");
            std::future::ready(Ok(tonic::Status::new(7.into(), "").into_http()))
        }
    }

    #[tokio::test]
    async fn a_service_not_ready_at_once_is_waited_on() {
        let mut routes = ServiceRoutes::default();
        routes.add_service(Slow::default());
        assert_eq!(status(&routes, "/a.Slow/M").await, "7");
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

    #[tokio::test]
    async fn a_triple_call_for_another_version_or_group_is_unimplemented() {
        let mut routes = ServiceRoutes::default();
        routes
            .add_service(Named::<5>)
            .serve_as("a.Five", "1.0.0", "blue");
        let with = |headers: &[(&'static str, &'static str)]| {
            let mut request = Request::post("/a.Five/M").body(TonicBody::empty()).unwrap();
            for (name, value) in headers {
                request
                    .headers_mut()
                    .insert(*name, http::HeaderValue::from_static(value));
            }
            let routes = routes.clone();
            async move {
                let response = routes.oneshot(request).await.unwrap();
                response.headers()["grpc-status"]
                    .to_str()
                    .unwrap()
                    .to_owned()
            }
        };
        assert_eq!(with(&[]).await, "5", "plain gRPC");
        assert_eq!(
            with(&[
                ("tri-service-version", "1.0.0"),
                ("tri-service-group", "blue")
            ])
            .await,
            "5"
        );
        assert_eq!(with(&[("tri-service-version", "2.0.0")]).await, "12");
        assert_eq!(with(&[("tri-service-group", "red")]).await, "12");
    }
}
