//! The request's headers across a call's attempts.
//!
//! Every attempt needs the headers, and the connection consumes the map it is given, so a call
//! that may be sent again must keep a copy. Cloning a `HeaderMap` costs two or three
//! allocations on every call, while most calls succeed on their first attempt. So the
//! first attempt takes the caller's map as it is, and the call keeps the entries inline
//! (names and values share their bytes, and gRPC's usual headers are static): a second
//! attempt rebuilds a map from them, and only then allocates.

use http::{HeaderMap, HeaderName, HeaderValue};
use smallvec::SmallVec;

/// Entries kept without allocating: a gRPC call usually sends `te`, `content-type`,
/// `rpc-consumer` and perhaps `grpc-timeout`, a trace context and a few of the caller's.
const INLINE_ENTRIES: usize = 6;

/// The headers of one call, for each of its attempts.
#[derive(Debug)]
pub(super) struct RequestHeaders {
    /// The caller's map, until the first attempt takes it.
    first: Option<HeaderMap>,
    /// Every entry in order, repeated names included, for the attempts after it.
    entries: SmallVec<[(HeaderName, HeaderValue); INLINE_ENTRIES]>,
}

impl RequestHeaders {
    pub(super) fn new(map: HeaderMap) -> Self {
        let entries = map
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        Self {
            first: Some(map),
            entries,
        }
    }

    /// The headers for the next attempt: the caller's own map the first time, a copy
    /// after that.
    pub(super) fn for_attempt(&mut self) -> HeaderMap {
        if let Some(map) = self.first.take() {
            return map;
        }
        let mut map = HeaderMap::with_capacity(self.entries.len());
        for (name, value) in &self.entries {
            map.append(name.clone(), value.clone());
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attempt_gets_the_same_headers_repeated_names_included() {
        let mut map = HeaderMap::new();
        map.insert("te", HeaderValue::from_static("trailers"));
        map.append("x-tag", HeaderValue::from_static("a"));
        map.append("x-tag", HeaderValue::from_static("b"));
        for n in 0..INLINE_ENTRIES {
            map.insert(
                HeaderName::from_bytes(format!("x-extra-{n}").as_bytes()).unwrap(),
                HeaderValue::from(n),
            );
        }
        let mut headers = RequestHeaders::new(map.clone());
        for _ in 0..3 {
            let attempt = headers.for_attempt();
            assert_eq!(attempt, map);
            let tags: Vec<_> = attempt.get_all("x-tag").iter().collect();
            assert_eq!(tags, ["a", "b"], "order of repeated values kept");
        }
    }
}
