//! Which compression a service's responses or a reference's requests get: the word the
//! configuration uses on both sides (`provider.services.<name>.compression`,
//! `consumer.references.<name>.compression`). The codecs themselves are
//! lossless-rpc-filter's.

use serde::{Deserialize, Serialize};

/// How the messages one side sends are compressed on the wire (gRPC's message
/// compression: the `grpc-encoding` header and a flag on each message).
///
/// In configuration: `none` (the default), `gzip` or `zstd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Messages are sent as they are. The default.
    #[default]
    None,
    /// gzip (RFC 1952): every gRPC implementation reads it.
    Gzip,
    /// Zstandard (RFC 8878): faster at a better ratio; read by tonic with its `zstd`
    /// feature, grpc-go with a zstd codec registered, and `rpc` itself, not by grpcio.
    Zstd,
}

impl Compression {
    /// Its name in configuration: `none`, `gzip`, `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_names_round_trip() {
        for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let text = serde_json::to_string(&compression).unwrap();
            assert_eq!(text, format!("\"{}\"", compression.name()));
            assert_eq!(
                serde_json::from_str::<Compression>(&text).unwrap(),
                compression
            );
        }
        let error = serde_json::from_str::<Compression>("\"brotli\"").unwrap_err();
        assert!(error.to_string().contains("brotli"), "{error}");
    }
}
