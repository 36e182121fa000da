//! Generated gRPC stubs for the `rpc` examples, tests and benchmarks.
//!
//! The code is produced at build time by `tonic-prost-build` from the files in `proto/`,
//! with the `protoc` that the `protoc-bin-vendored` crate ships, so no system package is
//! needed. The generated client and server types are used unchanged by application code:
//! `GreeterClient<C>` works over any `tonic::client::GrpcService`, including the cluster
//! channel of an `rpc` reference.

/// `helloworld.Greeter`: unary `SayHello` and server-streaming `SayHelloStream`.
#[allow(missing_docs)]
pub mod greeter {
    tonic::include_proto!("helloworld");
}

/// `echo.Echo`: unary `Echo` with a `bytes` payload and an optional simulated delay.
#[allow(missing_docs)]
pub mod echo {
    tonic::include_proto!("echo");
}

/// `feed.Feed`: server-streaming `Subscribe`, numbered events at an interval (the long
/// stream carried through deploys).
#[allow(missing_docs)]
pub mod feed {
    tonic::include_proto!("feed");
}

/// `grpc.testing`: gRPC's interoperability test services (`TestService`,
/// `UnimplementedService`) and their messages, for the interop server and client.
#[allow(missing_docs)]
pub mod interop {
    tonic::include_proto!("grpc.testing");
}

/// The encoded `FileDescriptorSet` of every `.proto` here (greeter, echo, interop), for
/// gRPC server reflection: `builder.file_descriptor_set(proto::FILE_DESCRIPTOR_SET)`
/// with `provider.reflection: true`.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("proto_descriptors");

/// Path of the directory that holds the `.proto` sources, for tools that need them
/// (for example the Python interop test, which generates its own stubs).
pub const PROTO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
