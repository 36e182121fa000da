//! The interop test cases this project runs, by their names in the test descriptions,
//! and how a case ends.

use std::fmt;
use std::str::FromStr;

/// One interop test case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Case {
    /// A zero-size request and response (EmptyCall).
    EmptyUnary,
    /// A 271 828-byte request, a 314 159-byte response (UnaryCall).
    LargeUnary,
    /// A gzip-compressed request, after a probe that the server checks compression.
    ClientCompressedUnary,
    /// A compressed and an uncompressed response, each with the flag that says so.
    ServerCompressedUnary,
    /// Four request messages, one response with their total size.
    ClientStreaming,
    /// One request, four response messages of given sizes.
    ServerStreaming,
    /// Four request/response rounds on one bidi stream.
    PingPong,
    /// A bidi stream with no message either way.
    EmptyStream,
    /// Initial and binary trailing metadata echoed on a unary and a bidi call.
    CustomMetadata,
    /// A status code and message chosen by the client, on a unary and a bidi call.
    StatusCodeAndMessage,
    /// A status message with whitespace and non-ASCII characters.
    SpecialStatusMessage,
    /// A method the service declares and does not implement: UNIMPLEMENTED.
    UnimplementedMethod,
    /// A service the server does not have: UNIMPLEMENTED.
    UnimplementedService,
    /// A client stream cancelled before any message: CANCELLED.
    CancelAfterBegin,
    /// A bidi stream cancelled after its first response: CANCELLED.
    CancelAfterFirstResponse,
    /// A bidi call with a 1 ms deadline to a server that never answers:
    /// DEADLINE_EXCEEDED.
    TimeoutOnSleepingServer,
}

impl Case {
    /// Every case, in the order of the test descriptions.
    pub const ALL: [Case; 16] = [
        Case::EmptyUnary,
        Case::LargeUnary,
        Case::ClientCompressedUnary,
        Case::ServerCompressedUnary,
        Case::ClientStreaming,
        Case::ServerStreaming,
        Case::PingPong,
        Case::EmptyStream,
        Case::CustomMetadata,
        Case::StatusCodeAndMessage,
        Case::SpecialStatusMessage,
        Case::UnimplementedMethod,
        Case::UnimplementedService,
        Case::CancelAfterBegin,
        Case::CancelAfterFirstResponse,
        Case::TimeoutOnSleepingServer,
    ];

    /// The case's name in the test descriptions (and on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Case::EmptyUnary => "empty_unary",
            Case::LargeUnary => "large_unary",
            Case::ClientCompressedUnary => "client_compressed_unary",
            Case::ServerCompressedUnary => "server_compressed_unary",
            Case::ClientStreaming => "client_streaming",
            Case::ServerStreaming => "server_streaming",
            Case::PingPong => "ping_pong",
            Case::EmptyStream => "empty_stream",
            Case::CustomMetadata => "custom_metadata",
            Case::StatusCodeAndMessage => "status_code_and_message",
            Case::SpecialStatusMessage => "special_status_message",
            Case::UnimplementedMethod => "unimplemented_method",
            Case::UnimplementedService => "unimplemented_service",
            Case::CancelAfterBegin => "cancel_after_begin",
            Case::CancelAfterFirstResponse => "cancel_after_first_response",
            Case::TimeoutOnSleepingServer => "timeout_on_sleeping_server",
        }
    }

    /// The cases `name` selects: one case, or every case for `all`.
    ///
    /// # Errors
    /// [`UnknownCase`] when `name` is neither `all` nor a case's name.
    pub fn select(name: &str) -> Result<Vec<Case>, UnknownCase> {
        if name == "all" {
            return Ok(Case::ALL.to_vec());
        }
        name.parse().map(|case| vec![case])
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no case of [`Case::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown test case `{0}` (expected `all` or one of the cases in docs/interop.md)")]
pub struct UnknownCase(pub String);

impl FromStr for Case {
    type Err = UnknownCase;

    fn from_str(name: &str) -> Result<Self, UnknownCase> {
        Case::ALL
            .into_iter()
            .find(|case| case.name() == name)
            .ok_or_else(|| UnknownCase(name.to_owned()))
    }
}

/// How a case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every assertion of the case held.
    Pass,
    /// An assertion failed or a call failed unexpectedly; why.
    Fail(String),
    /// The peer lacks a feature the case needs, so the case says nothing about this
    /// pairing (e.g. a server that cannot tell a compressed request); why.
    NotApplicable(String),
}

impl Verdict {
    /// The first word of a result line: `PASS`, `FAIL` or `N/A`.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail(_) => "FAIL",
            Verdict::NotApplicable(_) => "N/A",
        }
    }
}

/// The result line of one case: `PASS empty_unary`, `FAIL large_unary: why`,
/// `N/A client_compressed_unary: why`. The Python client prints the same format.
pub fn line(case: Case, verdict: &Verdict) -> String {
    match verdict {
        Verdict::Pass => format!("PASS {case}"),
        Verdict::Fail(why) | Verdict::NotApplicable(why) => {
            format!("{} {case}: {}", verdict.word(), why.replace('\n', " "))
        }
    }
}

/// Reads a result line back: the case name and its verdict; `None` for any other line.
pub fn parse_line(line: &str) -> Option<(String, Verdict)> {
    let (word, rest) = line.trim_end().split_once(' ')?;
    let (name, why) = match rest.split_once(": ") {
        Some((name, why)) => (name, why.to_owned()),
        None => (rest, String::new()),
    };
    let verdict = match word {
        "PASS" => Verdict::Pass,
        "FAIL" => Verdict::Fail(why),
        "N/A" => Verdict::NotApplicable(why),
        _ => return None,
    };
    Some((name.to_owned(), verdict))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_lines_parse_back() {
        for case in Case::ALL {
            assert_eq!(case.name().parse::<Case>(), Ok(case));
        }
        assert_eq!(Case::select("all").unwrap().len(), Case::ALL.len());
        assert!(Case::select("no_such_case").is_err());
        for verdict in [
            Verdict::Pass,
            Verdict::Fail("size 3: want 4".into()),
            Verdict::NotApplicable("no gzip".into()),
        ] {
            let line = line(Case::PingPong, &verdict);
            assert_eq!(parse_line(&line), Some(("ping_pong".to_owned(), verdict)));
        }
        assert_eq!(parse_line("listening on 127.0.0.1:1"), None);
    }
}
