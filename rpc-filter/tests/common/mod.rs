//! What the allocation tests share: sending requests through a service and counting
//! the heap blocks each costs (dhat's global allocator must be installed by the test
//! binary).

use http::{Request, Response};
use std::convert::Infallible;
use tonic::body::Body;
use tower::{Service, ServiceExt};

const REQUESTS: u64 = 1_000;

/// Stands in for the connection info our server puts in every request.
#[derive(Clone, Copy, Debug)]
struct ConnectionMark;

/// Heap blocks allocated per request sent to `service` (cloned per request), after a
/// warm-up; the response is dropped before the next request. Rounded to the nearest
/// whole block: a one-off allocation somewhere in the runtime during the 1 000 requests
/// must not read as one more per request.
pub fn allocations_per_request<S, RB>(runtime: &tokio::runtime::Runtime, service: S) -> u64
where
    S: Service<Request<Body>, Response = Response<RB>, Error = Infallible> + Clone,
{
    runtime.block_on(async {
        let send = |service: S| async move {
            let mut request = Request::builder()
                .uri(http::Uri::from_static("/echo.Echo/Echo"))
                .body(Body::empty())
                .expect("a valid request");
            // As our server's requests carry the connection's addresses: the
            // extensions' map exists before any filter adds to it.
            request.extensions_mut().insert(ConnectionMark);
            let response = service
                .oneshot(request)
                .await
                .unwrap_or_else(|never| match never {});
            drop(response);
        };
        for _ in 0..100 {
            send(service.clone()).await;
        }
        let before = dhat::HeapStats::get().total_blocks;
        for _ in 0..REQUESTS {
            send(service.clone()).await;
        }
        let after = dhat::HeapStats::get().total_blocks;
        (after - before + REQUESTS / 2) / REQUESTS
    })
}
