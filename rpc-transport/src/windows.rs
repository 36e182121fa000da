//! The bounds every HTTP/2 flow-control window of ours is checked against, on either
//! side of a connection ([`ServerOptions`](crate::ServerOptions) for what a provider
//! lets its clients send, [`ChannelOptions`](crate::ChannelOptions) for what a consumer
//! lets its providers send).

use crate::TransportError;

/// The smallest flow-control window [`ServerOptions::check`](crate::ServerOptions::check)
/// and [`ChannelOptions::check`](crate::ChannelOptions::check) accept: 65 535 bytes, the
/// protocol's initial window (RFC 9113 §6.9.2); a smaller one slows every transfer for
/// nothing.
pub const MIN_WINDOW_SIZE: u32 = 65_535;
/// The largest flow-control window the protocol allows: 2³¹ − 1 bytes (RFC 9113
/// §6.9.1); h2 panics past it.
pub const MAX_WINDOW_SIZE: u32 = (1 << 31) - 1;

/// Checks a stream window and a connection window; the first out of range becomes the
/// error `invalid` makes of its option name and why (each side's options have their
/// own error variant).
pub(crate) fn check_windows(
    stream: u32,
    connection: u32,
    invalid: fn(&'static str, String) -> TransportError,
) -> Result<(), TransportError> {
    window_error(stream, connection).map_or(Ok(()), |(option, reason)| Err(invalid(option, reason)))
}

/// The first of a stream window and a connection window that is out of range: its
/// option name (`initial_stream_window_size` or `initial_connection_window_size`) and
/// why. A connection window smaller than the stream window is refused too: no stream
/// could use its own window.
fn window_error(stream: u32, connection: u32) -> Option<(&'static str, String)> {
    let windows = [
        ("initial_stream_window_size", stream),
        ("initial_connection_window_size", connection),
    ];
    for (option, size) in windows {
        if !(MIN_WINDOW_SIZE..=MAX_WINDOW_SIZE).contains(&size) {
            let reason = format!("{size} is not from {MIN_WINDOW_SIZE} to {MAX_WINDOW_SIZE}");
            return Some((option, reason));
        }
    }
    (connection < stream).then(|| {
        let reason = format!("{connection} is less than initial_stream_window_size ({stream})");
        ("initial_connection_window_size", reason)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_in_range_pass_and_the_first_out_of_range_is_named() {
        assert_eq!(window_error(MIN_WINDOW_SIZE, MAX_WINDOW_SIZE), None);
        assert_eq!(window_error(1 << 20, 1 << 20), None);
        let named = |stream, connection| window_error(stream, connection).map(|(o, _)| o);
        assert_eq!(
            named(MIN_WINDOW_SIZE - 1, 1 << 20),
            Some("initial_stream_window_size")
        );
        assert_eq!(
            named(u32::MAX, u32::MAX),
            Some("initial_stream_window_size")
        );
        assert_eq!(
            named(1 << 20, MAX_WINDOW_SIZE + 1),
            Some("initial_connection_window_size")
        );
        let (option, reason) = window_error(2 << 20, 1 << 20).unwrap();
        assert_eq!(option, "initial_connection_window_size");
        assert!(
            reason.contains("less than initial_stream_window_size"),
            "{reason}"
        );
    }
}
