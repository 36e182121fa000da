//! How the cases check what came back: each check returns `Err` with a verdict that
//! says what was seen.

use proto::interop::Payload;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::case::Verdict;
use super::echo::{ECHO_INITIAL, ECHO_TRAILING};
use super::messages::{INITIAL_VALUE, TRAILING_VALUE};

/// What a case's body returns: `Err` carries the failure (or the inapplicability).
pub(super) type Checked = Result<(), Verdict>;

pub(super) fn check_echo(call: &str, initial: &MetadataMap, trailing: &MetadataMap) -> Checked {
    let seen_initial = initial.get(ECHO_INITIAL);
    if seen_initial.and_then(|v| v.to_str().ok()) != Some(INITIAL_VALUE) {
        return Err(fail(format!(
            "{call}: initial metadata {ECHO_INITIAL} is {seen_initial:?}"
        )));
    }
    let seen_trailing = trailing
        .get_bin(ECHO_TRAILING)
        .map(|value| value.to_bytes());
    match seen_trailing {
        Some(Ok(bytes)) if bytes[..] == TRAILING_VALUE => Ok(()),
        other => Err(fail(format!(
            "{call}: trailing metadata {ECHO_TRAILING} is {other:?}"
        ))),
    }
}

pub(super) fn check_status(call: &str, status: &Status, code: Code, message: &str) -> Checked {
    if status.code() == code && status.message() == message {
        return Ok(());
    }
    Err(fail(format!(
        "{call}: want {code:?} {message:?}, got {:?} {:?}",
        status.code(),
        status.message()
    )))
}

pub(super) fn expect_code(result: Result<(), Status>, code: Code) -> Checked {
    match result {
        Err(status) if status.code() == code => Ok(()),
        Err(status) => Err(fail(format!(
            "want {code:?}, got {} (source: {:?})",
            show(&status),
            std::error::Error::source(&status)
        ))),
        Ok(()) => Err(fail(format!("want {code:?}, the call succeeded"))),
    }
}

pub(super) fn check_payload(payload: Option<&Payload>, size: i32) -> Checked {
    let body: &[u8] = payload.map_or(&[], |p| &p.body);
    if usize::try_from(size).ok() != Some(body.len()) {
        return Err(fail(format!(
            "payload of {} bytes, want {size}",
            body.len()
        )));
    }
    if body.iter().any(|&byte| byte != 0) {
        return Err(fail("payload is not all zeros"));
    }
    Ok(())
}

pub(super) fn fail(why: impl Into<String>) -> Verdict {
    Verdict::Fail(why.into())
}

pub(super) fn call_failed(status: Status) -> Verdict {
    fail(format!("the call failed: {}", show(&status)))
}

/// A status as `CODE: message`.
pub(super) fn show(status: &Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}
