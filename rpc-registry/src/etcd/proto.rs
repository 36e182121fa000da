//! The etcd v3 API as generated code: messages and client stubs of the KV, Watch, Lease and
//! Auth services, generated from the protos vendored in `proto/etcd/` (etcd v3.7.2,
//! Apache-2.0) and committed in `generated/`, one file per proto package.
//!
//! The code is committed rather than generated when this crate is built, so that
//! building it needs no `protoc` at all (as tonic-health does): neither a system package
//! nor `protoc-bin-vendored`, whose ~29 MB of binaries a build used to download and
//! which has none for FreeBSD or for Linux on riscv64, armv7 or loongarch.
//! It is not taken from a client library either: etcd-client compiles the same protos
//! in its own build script with whatever `protoc` the environment names, so a project
//! depending on `lossless-rpc` could not build without a system `protoc` (issue 25).
//! `proto/tests/etcd_stubs.rs` (CI) regenerates the files and fails when they differ
//! from what is committed; `RPC_WRITE_ETCD_STUBS=1 cargo test -p proto --test
//! etcd_stubs` writes them. Only `client.rs` uses these types; the rest of the backend
//! sees what it returns.
//!
//! The modules mirror the proto packages, because the generated code names its
//! neighbours through them (`super::mvccpb::KeyValue`).

#![allow(
    missing_docs,
    dead_code,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    rustdoc::all
)]

/// `mvccpb`: keys, values and watch events.
pub(crate) mod mvccpb {
    include!("generated/mvccpb.rs");
}

/// `authpb`: users, roles and permissions (named by the Auth service's messages).
pub(crate) mod authpb {
    include!("generated/authpb.rs");
}

/// `etcdserverpb`: the requests and responses of the services, and their clients.
pub(crate) mod etcdserverpb {
    include!("generated/etcdserverpb.rs");
}
