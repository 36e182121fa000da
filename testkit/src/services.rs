//! Provider implementations of the example services.

use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use proto::echo::echo_server::Echo;
use proto::echo::{EchoReply, EchoRequest};
use proto::greeter::greeter_server::Greeter;
use proto::greeter::{HelloReply, HelloRequest};
use tonic::{Request, Response, Status};

/// Largest `delay_ms` the echo provider accepts (a minute): a bad request must not park
/// a handler for hours.
pub const MAX_DELAY_MS: u32 = 60_000;

/// Largest number of replies `SayHelloStream` sends for one request.
pub const MAX_STREAM_REPLIES: u32 = 1_000;

fn provider_of<T>(request: &Request<T>) -> String {
    request
        .local_addr()
        .map_or_else(|| "unknown".to_owned(), |addr| addr.to_string())
}

/// The greeter provider: answers with a greeting and its own address.
#[derive(Clone, Copy, Debug, Default)]
pub struct GreeterProvider;

#[tonic::async_trait]
impl Greeter for GreeterProvider {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let provider = provider_of(&request);
        let name = request.into_inner().name;
        if name.is_empty() {
            return Err(Status::invalid_argument("name must not be empty"));
        }
        Ok(Response::new(HelloReply {
            message: format!("Hello, {name}!"),
            provider,
        }))
    }

    type SayHelloStreamStream = Pin<Box<dyn Stream<Item = Result<HelloReply, Status>> + Send>>;

    async fn say_hello_stream(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<Self::SayHelloStreamStream>, Status> {
        let provider = provider_of(&request);
        let HelloRequest { name, count } = request.into_inner();
        if count > MAX_STREAM_REPLIES {
            return Err(Status::invalid_argument(format!(
                "count must be at most {MAX_STREAM_REPLIES}"
            )));
        }
        let replies = (1..=count.max(1)).map(move |n| {
            Ok(HelloReply {
                message: format!("Hello #{n}, {name}!"),
                provider: provider.clone(),
            })
        });
        Ok(Response::new(Box::pin(futures_util::stream::iter(replies))))
    }
}

/// The echo provider: sleeps `delay_ms` (simulated work), then returns the payload.
#[derive(Clone, Copy, Debug, Default)]
pub struct EchoProvider {
    /// Work added to every request, in milliseconds, on top of `delay_ms`.
    pub work_ms: u32,
}

#[tonic::async_trait]
impl Echo for EchoProvider {
    async fn echo(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let provider = provider_of(&request);
        let EchoRequest { payload, delay_ms } = request.into_inner();
        let delay = delay_ms.unwrap_or(0);
        if delay > MAX_DELAY_MS {
            return Err(Status::invalid_argument(format!(
                "delay_ms must be at most {MAX_DELAY_MS}"
            )));
        }
        let work = u64::from(delay) + u64::from(self.work_ms);
        if work > 0 {
            tokio::time::sleep(Duration::from_millis(work)).await;
        }
        Ok(Response::new(EchoReply { payload, provider }))
    }
}
