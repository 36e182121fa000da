//! A user's project on `lossless-rpc`: the stubs generated from `proto/hello.proto`,
//! and the service implementation the provider serves.

/// The code `tonic-prost-build` generated from `proto/hello.proto` (package `hello`).
pub mod hello {
    tonic::include_proto!("hello");
}

use hello::greeter_server::Greeter;
use hello::{HelloReply, HelloRequest};
use tonic::{Request, Response, Status};

/// The provider's implementation of `hello.Greeter`.
#[derive(Debug, Default)]
pub struct MyGreeter;

#[tonic::async_trait]
impl Greeter for MyGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(HelloReply {
            message: format!("Hello, {name}!"),
        }))
    }
}
