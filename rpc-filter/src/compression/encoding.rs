//! The encodings this filter speaks, and what a call's `grpc-encoding` and
//! `grpc-accept-encoding` headers say about them.

use http::{HeaderMap, HeaderName, HeaderValue};
use rpc_core::Compression;

/// The header naming the encoding of a call's compressed messages, one way.
pub(crate) const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");

/// The header listing the encodings a side can read.
pub(crate) const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");

/// What a provider reads, as it advertises it on every response (gRPC's compression
/// spec: the list a client may choose from, and the answer to one it chose wrongly).
pub(crate) const PROVIDER_ACCEPTS: HeaderValue = HeaderValue::from_static("gzip,zstd,identity");

/// What a reference reads, as it advertises it on every request it decodes itself.
pub(crate) const CONSUMER_ACCEPTS: HeaderValue = HeaderValue::from_static("gzip,zstd");

/// A message compression the filter compresses and decompresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `gzip`.
    Gzip,
    /// `zstd`.
    Zstd,
}

impl Encoding {
    /// Its name in `grpc-encoding`: `gzip`, `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }

    /// The encoding configured `compression` means; `None` for [`Compression::None`].
    pub fn configured(compression: Compression) -> Option<Self> {
        match compression {
            Compression::None => None,
            Compression::Gzip => Some(Self::Gzip),
            Compression::Zstd => Some(Self::Zstd),
        }
    }

    fn named(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("gzip") {
            Some(Self::Gzip)
        } else if name.eq_ignore_ascii_case("zstd") {
            Some(Self::Zstd)
        } else {
            None
        }
    }

    fn header_value(self) -> HeaderValue {
        HeaderValue::from_static(self.name())
    }

    /// Sets `grpc-encoding` to this encoding.
    pub(crate) fn mark(self, headers: &mut HeaderMap) {
        headers.insert(GRPC_ENCODING, self.header_value());
    }
}

/// What a call's `grpc-encoding` says its compressed messages are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// No header, or `identity`: nothing is compressed.
    Identity,
    /// One this filter decompresses.
    Known(Encoding),
    /// Any other (`deflate`, `snappy`, or bytes that are not text), as written.
    Unsupported(String),
}

impl Sent {
    /// What `headers` say.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let Some(value) = rpc_core::metadata::header(headers, &GRPC_ENCODING) else {
            return Self::Identity;
        };
        let Ok(name) = value.to_str() else {
            return Self::Unsupported(String::from_utf8_lossy(value.as_bytes()).into_owned());
        };
        let name = name.trim();
        if name.is_empty() || name.eq_ignore_ascii_case("identity") {
            return Self::Identity;
        }
        match Encoding::named(name) {
            Some(encoding) => Self::Known(encoding),
            None => Self::Unsupported(name.to_owned()),
        }
    }
}

/// Whether `headers` list `encoding` in `grpc-accept-encoding` (a comma-separated list,
/// possibly over several header lines).
pub(crate) fn accepts(headers: &HeaderMap, encoding: Encoding) -> bool {
    headers
        .get_all(GRPC_ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','))
        .any(|name| Encoding::named(name.trim()) == Some(encoding))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn grpc_encoding_is_identity_known_or_unsupported() {
        assert_eq!(Sent::of(&headers(&[])), Sent::Identity);
        assert_eq!(
            Sent::of(&headers(&[("grpc-encoding", "identity")])),
            Sent::Identity
        );
        assert_eq!(
            Sent::of(&headers(&[("grpc-encoding", "gzip")])),
            Sent::Known(Encoding::Gzip)
        );
        assert_eq!(
            Sent::of(&headers(&[("grpc-encoding", "zstd")])),
            Sent::Known(Encoding::Zstd)
        );
        assert_eq!(
            Sent::of(&headers(&[("grpc-encoding", "deflate")])),
            Sent::Unsupported("deflate".into())
        );
    }

    #[test]
    fn accept_encoding_is_a_list_over_any_number_of_lines() {
        let grpcio = headers(&[("grpc-accept-encoding", "identity,deflate,gzip")]);
        assert!(accepts(&grpcio, Encoding::Gzip));
        assert!(!accepts(&grpcio, Encoding::Zstd));
        let split = headers(&[
            ("grpc-accept-encoding", "identity"),
            ("grpc-accept-encoding", " zstd , gzip"),
        ]);
        assert!(accepts(&split, Encoding::Zstd));
        assert!(accepts(&split, Encoding::Gzip));
        assert!(!accepts(&headers(&[]), Encoding::Gzip));
    }

    #[test]
    fn configuration_maps_to_encodings() {
        assert_eq!(Encoding::configured(Compression::None), None);
        assert_eq!(
            Encoding::configured(Compression::Gzip),
            Some(Encoding::Gzip)
        );
        assert_eq!(
            Encoding::configured(Compression::Zstd),
            Some(Encoding::Zstd)
        );
    }
}
