//! W3C Trace Context on the wire: the `traceparent` header a call carries (with
//! `tracestate` and `baggage`, passed on as they came), so a trace continues across
//! every process of a chain — ours, and any other that speaks the W3C format
//! (OpenTelemetry's gRPC instrumentation in every language, grpc-go, Dubbo 3).
//!
//! A provider continues the caller's trace: its call gets a span id of its own under the
//! caller's (the transport does this for every request, see [`CallContext`]). A consumer
//! sends, on each attempt, a new span id under the call being served, or starts a trace
//! when it serves none. The ids are random (`fastrand`, per thread), never zero.
//!
//! [`CallContext`]: crate::CallContext

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};

/// The header that names the trace and the sender's span: `00-<trace id>-<span id>-<flags>`.
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// Vendor-specific trace data, passed on unchanged.
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
/// W3C Baggage: the application's key-value pairs that travel with the trace, passed on
/// unchanged.
pub const BAGGAGE: HeaderName = HeaderName::from_static("baggage");

/// One span's place in a trace, as `traceparent` carries it, with the trace's
/// `tracestate` and `baggage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: u128,
    span_id: u64,
    parent_span_id: Option<u64>,
    sampled: bool,
    tracestate: Option<HeaderValue>,
    baggage: Option<HeaderValue>,
}

impl TraceContext {
    /// The first span of a new trace (random ids, sampled).
    pub fn new_root() -> Self {
        Self {
            trace_id: nonzero_u128(),
            span_id: nonzero_u64(),
            parent_span_id: None,
            sampled: true,
            tracestate: None,
            baggage: None,
        }
    }

    /// The sender's span as `headers` name it (`traceparent`, with `tracestate` and
    /// `baggage`); `None` when there is no `traceparent` or it is not valid (the W3C
    /// rules: a known layout, lowercase hex, no all-zero id, version `ff` refused).
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        Self::from_found(&TraceHeaders::of(headers))
    }

    /// The sender's span from the trace headers `found`.
    fn from_found(found: &TraceHeaders<'_>) -> Option<Self> {
        let (Some(value), 1) = (found.traceparent, found.traceparents) else {
            // None, or two (W3C: a vendor accepts one traceparent; two start a new trace).
            return None;
        };
        let (trace_id, span_id, flags) = parse_traceparent(value.as_bytes())?;
        Some(Self {
            trace_id,
            span_id,
            parent_span_id: None,
            sampled: flags & 1 == 1,
            tracestate: found.tracestate.cloned(),
            baggage: found.baggage.cloned(),
        })
    }

    /// The span of a call that `headers` came with: a child of the caller's span, or the
    /// first of a new trace when they carry no valid `traceparent` — which keeps their
    /// `baggage` (W3C Baggage does not depend on a trace) but not their `tracestate`
    /// (which only has meaning with its `traceparent`).
    pub fn continued_from(headers: &HeaderMap) -> Self {
        let found = TraceHeaders::of(headers);
        match Self::from_found(&found) {
            Some(caller) => caller.child(),
            None => Self {
                baggage: found.baggage.cloned(),
                ..Self::new_root()
            },
        }
    }

    /// A new span under this one: the same trace, flags, state and baggage, a new span id.
    pub fn child(&self) -> Self {
        Self {
            span_id: nonzero_u64(),
            parent_span_id: Some(self.span_id),
            tracestate: self.tracestate.clone(),
            baggage: self.baggage.clone(),
            ..*self
        }
    }

    /// The trace's id (128 bits, never zero).
    pub fn trace_id(&self) -> u128 {
        self.trace_id
    }

    /// This span's id (64 bits, never zero).
    pub fn span_id(&self) -> u64 {
        self.span_id
    }

    /// The id of the span this one is a child of, when it was made by [`child`](Self::child).
    pub fn parent_span_id(&self) -> Option<u64> {
        self.parent_span_id
    }

    /// Whether the trace is sampled (the `sampled` flag, passed on as it came).
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// This span's state and baggage under other ids: those an exporter gave the span
    /// (see [`exported_spans`](crate::exported_spans)).
    pub fn with_ids(&self, trace_id: u128, span_id: u64) -> Self {
        Self {
            trace_id,
            span_id,
            ..self.clone()
        }
    }

    /// The caller's span this one is the child of, as the caller named it (its trace,
    /// its span id, this span's flags); `None` for the first span of a trace.
    pub fn parent(&self) -> Option<Self> {
        let span_id = self.parent_span_id?;
        Some(Self {
            span_id,
            parent_span_id: None,
            ..self.clone()
        })
    }

    /// The trace id as 32 lowercase hex digits, as logs and trace back ends show it.
    pub fn trace_id_hex(&self) -> impl fmt::Display + use<> {
        Hex32(self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub fn span_id_hex(&self) -> impl fmt::Display + use<> {
        Hex16(self.span_id)
    }

    /// Writes `traceparent` naming this span (and `tracestate`, `baggage` when the trace
    /// has them) into `headers`, replacing what was there.
    pub fn write_to(&self, headers: &mut HeaderMap) {
        let mut value = [0u8; 55];
        value[..3].copy_from_slice(b"00-");
        write_hex(&mut value[3..35], self.trace_id);
        value[35] = b'-';
        write_hex(&mut value[36..52], u128::from(self.span_id));
        value[52] = b'-';
        value[53] = b'0';
        value[54] = if self.sampled { b'1' } else { b'0' };
        let mut value = HeaderValue::from_bytes(&value).expect("hex digits and dashes");
        // A value no later request repeats: HPACK must not index it, or each request
        // would evict the connection's useful entries (`content-type`, `te`, …) from the
        // dynamic table and make the next requests send those as literals again.
        value.set_sensitive(true);
        headers.insert(TRACEPARENT, value);
        if let Some(state) = &self.tracestate {
            headers.insert(TRACESTATE, state.clone());
        }
        if let Some(baggage) = &self.baggage {
            headers.insert(BAGGAGE, baggage.clone());
        }
    }
}

/// `(trace id, span id, flags)` of a `traceparent` value, if valid.
fn parse_traceparent(value: &[u8]) -> Option<(u128, u64, u8)> {
    if value.len() < 55 || [2, 35, 52].iter().any(|&at| value[at] != b'-') {
        return None;
    }
    let version = hex(&value[..2])?;
    // Version 00 is exactly 55 bytes; a later version may append fields after a dash.
    let layout_known = match version {
        0 => value.len() == 55,
        0xff => false,
        _ => value.len() == 55 || value[55] == b'-',
    };
    if !layout_known {
        return None;
    }
    let trace_id = hex(&value[3..35])?;
    let span_id = u64::try_from(hex(&value[36..52])?).ok()?;
    let flags = u8::try_from(hex(&value[53..55])?).ok()?;
    (trace_id != 0 && span_id != 0).then_some((trace_id, span_id, flags))
}

/// The value of lowercase hex digits (at most 32).
fn hex(digits: &[u8]) -> Option<u128> {
    digits.iter().try_fold(0u128, |value, &digit| {
        let nibble = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => return None,
        };
        Some(value << 4 | u128::from(nibble))
    })
}

/// Writes `value`'s low `out.len()` nibbles into `out` as lowercase hex.
fn write_hex(out: &mut [u8], value: u128) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (index, byte) in out.iter_mut().rev().enumerate() {
        *byte = DIGITS[((value >> (4 * index)) & 0xf) as usize];
    }
}

/// The trace headers of a request, found in one pass.
#[derive(Default)]
struct TraceHeaders<'a> {
    traceparent: Option<&'a HeaderValue>,
    /// How many `traceparent` values there are (2 stands for two or more).
    traceparents: u8,
    tracestate: Option<&'a HeaderValue>,
    baggage: Option<&'a HeaderValue>,
}

impl<'a> TraceHeaders<'a> {
    /// Most entries scanned; beyond, three hashed lookups are the cheaper way.
    const MOST_SCANNED: usize = 12;

    /// The trace headers of `headers`. A request carries a handful of headers, and one
    /// pass comparing their names costs less than hashing three names (about 170
    /// instructions each: callgrind, `benches/instructions.sh`), which every served call
    /// paid.
    fn of(headers: &'a HeaderMap) -> Self {
        if headers.len() > Self::MOST_SCANNED {
            let mut traceparents = headers.get_all(TRACEPARENT).iter();
            let traceparent = traceparents.next();
            let count = u8::from(traceparent.is_some()) + u8::from(traceparents.next().is_some());
            return Self {
                traceparent,
                traceparents: count,
                tracestate: headers.get(TRACESTATE),
                baggage: headers.get(BAGGAGE),
            };
        }
        let mut found = Self::default();
        for (name, value) in headers {
            if *name == TRACEPARENT {
                found.traceparent.get_or_insert(value);
                found.traceparents = found.traceparents.saturating_add(1).min(2);
            } else if *name == TRACESTATE {
                found.tracestate.get_or_insert(value);
            } else if *name == BAGGAGE {
                found.baggage.get_or_insert(value);
            }
        }
        found
    }
}

// Zero (one draw in 2^64 or 2^128) becomes one: cheaper than drawing from a range,
// which rejects and multiplies, and no id is zero, as W3C asks.
fn nonzero_u64() -> u64 {
    fastrand::u64(..).max(1)
}

fn nonzero_u128() -> u128 {
    fastrand::u128(..).max(1)
}

struct Hex32(u128);

impl fmt::Display for Hex32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

struct Hex16(u64);

impl fmt::Display for Hex16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(traceparent: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, HeaderValue::from_str(traceparent).unwrap());
        headers
    }

    #[test]
    fn the_w3c_example_is_read_and_written_back_the_same() {
        let mut sent = headers(EXAMPLE);
        sent.insert(
            TRACESTATE,
            HeaderValue::from_static("rojo=00f067aa0ba902b7"),
        );
        let context = TraceContext::from_headers(&sent).expect("valid");
        assert_eq!(
            context.trace_id_hex().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id_hex().to_string(), "00f067aa0ba902b7");
        assert!(context.sampled());
        let mut written = HeaderMap::new();
        context.write_to(&mut written);
        assert_eq!(written[TRACEPARENT], EXAMPLE);
        assert_eq!(written[TRACESTATE], "rojo=00f067aa0ba902b7");
    }

    #[test]
    fn a_child_keeps_the_trace_and_names_its_parent() {
        let parent = TraceContext::from_headers(&headers(EXAMPLE)).unwrap();
        let child = parent.child();
        assert_eq!(child.trace_id(), parent.trace_id());
        assert_ne!(child.span_id(), parent.span_id());
        assert_eq!(child.parent_span_id(), Some(parent.span_id()));
        let root = TraceContext::new_root();
        assert_ne!(root.trace_id(), 0);
        assert_eq!(root.parent_span_id(), None);
    }

    #[test]
    fn invalid_values_are_ignored() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // 00 with more
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",    // short
        ] {
            assert_eq!(TraceContext::from_headers(&headers(bad)), None, "{bad}");
        }
        let mut twice = headers(EXAMPLE);
        twice.append(TRACEPARENT, HeaderValue::from_static(EXAMPLE));
        assert_eq!(
            TraceContext::from_headers(&twice),
            None,
            "two traceparent headers"
        );
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        assert!(
            TraceContext::from_headers(&headers(later)).is_some(),
            "a later version's extra field"
        );
        assert_eq!(TraceContext::from_headers(&HeaderMap::new()), None);
    }

    #[test]
    fn baggage_travels_without_a_trace_and_tracestate_does_not() {
        let mut sent = headers("not a traceparent");
        sent.insert(
            TRACESTATE,
            HeaderValue::from_static("rojo=00f067aa0ba902b7"),
        );
        sent.insert(BAGGAGE, HeaderValue::from_static("userId=bob"));
        let started = TraceContext::continued_from(&sent);
        assert_eq!(started.parent_span_id(), None, "a new trace");
        let mut written = HeaderMap::new();
        started.write_to(&mut written);
        assert_eq!(written[BAGGAGE], "userId=bob");
        assert!(written.get(TRACESTATE).is_none());
    }

    #[test]
    fn many_headers_are_looked_up_as_few_are_scanned() {
        let mut many = headers(EXAMPLE);
        many.insert(BAGGAGE, HeaderValue::from_static("userId=bob"));
        let few = TraceContext::from_headers(&many).unwrap();
        for n in 0..TraceHeaders::MOST_SCANNED {
            let name = HeaderName::from_bytes(format!("x-filler-{n}").as_bytes()).unwrap();
            many.insert(name, HeaderValue::from_static("1"));
        }
        assert!(many.len() > TraceHeaders::MOST_SCANNED);
        assert_eq!(TraceContext::from_headers(&many), Some(few));
        many.append(TRACEPARENT, HeaderValue::from_static(EXAMPLE));
        assert_eq!(TraceContext::from_headers(&many), None, "two traceparents");
        let started = TraceContext::continued_from(&many);
        assert_eq!(
            started.baggage.as_ref().map(|b| b.as_bytes()),
            Some(&b"userId=bob"[..])
        );
    }
}
