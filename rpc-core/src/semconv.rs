//! Which of OpenTelemetry's semantic conventions for RPC the spans and metrics use.
//!
//! OpenTelemetry renamed its RPC attributes after v1.37 of the conventions: `rpc.system`
//! became `rpc.system.name`, `rpc.method` became the fully-qualified method
//! (`echo.Echo/Echo`, with no separate `rpc.service`), and the numeric
//! `rpc.grpc.status_code` became the string `rpc.response.status_code` (`NOT_FOUND`).
//! Dashboards and alerts written against one set break when a framework switches, so
//! the conventions ask instrumentations to keep the old names by default and switch
//! on request — `OTEL_SEMCONV_STABILITY_OPT_IN=rpc` for the new names, `rpc/dup` for
//! both while dashboards move. [`RpcConventions`] is that choice; the names are those
//! of the conventions' v1.44.0 registry (checked by `tests/tests/semconv.rs`).

use serde::{Deserialize, Serialize};
use tonic::Code;

/// The variable OpenTelemetry's SDKs read the opt-in from (a comma-separated list).
pub const OPT_IN_VAR: &str = "OTEL_SEMCONV_STABILITY_OPT_IN";

/// Which names a call's spans and metrics carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RpcConventions {
    /// The names of v1.37 and before: `rpc.system`, `rpc.service`, `rpc.method` (the
    /// method alone), `rpc.grpc.status_code` (a number). The default, as the conventions
    /// ask of an instrumentation that emitted them before.
    #[default]
    Old,
    /// The current names: `rpc.system.name`, `rpc.method` (fully qualified),
    /// `rpc.response.status_code` (the code's name), `error.type` on failures.
    Stable,
    /// Both, for a migration (`rpc/dup`). One name is in both sets with different
    /// values: `rpc.method` then holds the fully-qualified method, as in `Stable`.
    Dup,
}

impl RpcConventions {
    /// The choice `value` (the form of [`OPT_IN_VAR`]: comma-separated, e.g.
    /// `http,rpc/dup`) makes: `rpc/dup` over `rpc`, [`Old`](Self::Old) when it names
    /// neither.
    pub fn from_opt_in(value: &str) -> Self {
        let mut found = Self::Old;
        for item in value.split(',').map(str::trim) {
            match item {
                "rpc/dup" => return Self::Dup,
                "rpc" => found = Self::Stable,
                _ => {}
            }
        }
        found
    }

    /// The choice [`OPT_IN_VAR`] makes in this process's environment ([`Old`](Self::Old)
    /// when it is unset).
    pub fn from_env() -> Self {
        std::env::var(OPT_IN_VAR).map_or(Self::Old, |value| Self::from_opt_in(&value))
    }

    /// Whether the names of v1.37 and before are emitted.
    pub fn emits_old(self) -> bool {
        matches!(self, Self::Old | Self::Dup)
    }

    /// Whether the current names are emitted.
    pub fn emits_stable(self) -> bool {
        matches!(self, Self::Stable | Self::Dup)
    }
}

/// The value of `rpc.method` under the stable conventions for a call to `path`: the
/// fully-qualified method (`echo.Echo/Echo` from `/echo.Echo/Echo`), or `_OTHER` for a
/// path that is not `/service/method`, as the conventions name a method they cannot
/// recognise (with [`rpc_method_original`] beside it).
pub fn rpc_method(path: &str) -> &str {
    if is_method_path(path) {
        &path[1..]
    } else {
        OTHER
    }
}

/// The value of `rpc.method_original`: the path itself, when [`rpc_method`] could not use
/// it; `None` otherwise.
pub fn rpc_method_original(path: &str) -> Option<&str> {
    (!is_method_path(path)).then_some(path)
}

/// `rpc.method` of a call whose method is not recognised.
pub const OTHER: &str = "_OTHER";

/// Whether `path` is `/service/method`, both parts non-empty.
fn is_method_path(path: &str) -> bool {
    let Some((service, method)) = path.strip_prefix('/').and_then(|rest| rest.split_once('/'))
    else {
        return false;
    };
    !service.is_empty() && !method.is_empty() && !method.contains('/')
}

/// The name of a gRPC status code as `rpc.response.status_code` takes it (`OK`,
/// `DEADLINE_EXCEEDED`: gRPC's own spelling).
pub fn status_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// [`status_name`] of every code, by its number (`Code as usize`).
pub const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opt_in_list_chooses_dup_over_stable_over_old() {
        assert_eq!(RpcConventions::from_opt_in(""), RpcConventions::Old);
        assert_eq!(RpcConventions::from_opt_in("http"), RpcConventions::Old);
        assert_eq!(
            RpcConventions::from_opt_in("http, rpc"),
            RpcConventions::Stable
        );
        assert_eq!(
            RpcConventions::from_opt_in("rpc,rpc/dup"),
            RpcConventions::Dup
        );
        assert_eq!(
            RpcConventions::from_opt_in("rpc/dup,rpc"),
            RpcConventions::Dup
        );
        assert_eq!(RpcConventions::from_opt_in("rpcs"), RpcConventions::Old);
    }

    #[test]
    fn a_path_that_is_no_method_is_other_with_its_original() {
        assert_eq!(rpc_method("/echo.Echo/Echo"), "echo.Echo/Echo");
        assert_eq!(rpc_method_original("/echo.Echo/Echo"), None);
        for odd in [
            "/",
            "//Echo",
            "/echo.Echo/",
            "/a/b/c",
            "notgrpc",
            "/notgrpc",
        ] {
            assert_eq!(rpc_method(odd), "_OTHER", "{odd}");
            assert_eq!(rpc_method_original(odd), Some(odd));
        }
    }

    #[test]
    fn status_names_are_indexed_by_code_number() {
        for number in 0..17 {
            let code = Code::from_i32(number);
            assert_eq!(STATUS_NAMES[number as usize], status_name(code));
        }
    }
}
