//! A Dubbo URL (`tri://10.0.0.1:50051/helloworld.Greeter?interface=...&version=...`): what
//! Dubbo registers for one provider of one interface, and how it is written as one
//! ZooKeeper node name.
//!
//! Dubbo's Java SDK writes the URL's parameters raw (`methods=a,b`) and encodes the whole
//! URL once into the node name (`java.net.URLEncoder`: a space becomes `+`); its Python
//! SDK form-encodes the parameters, then percent-encodes the whole URL. Reading accepts
//! both: the name is decoded once, then each parameter is form-decoded. Writing encodes
//! in a value only what would break that reading (`&`, `=`, `#`, `%`, `+`, spaces and
//! control characters), so a Java consumer sees our values as they are.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use percent_encoding::{
    AsciiSet, CONTROLS, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode,
};

/// What a node name encodes: everything but letters, digits and `.-_*` (as Java's
/// `URLEncoder`, with `%20` for a space).
const NODE_NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'-')
    .remove(b'_')
    .remove(b'*');

/// What a parameter's key or value encodes: only what would end it early or be decoded.
const PARAMETER: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'&')
    .add(b'=')
    .add(b'#')
    .add(b'%')
    .add(b'+');

/// One Dubbo URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DubboUrl {
    /// The protocol (`tri`, `dubbo`, `rest`, ...), lower-cased.
    pub protocol: String,
    /// Host or IP (IPv6 without brackets).
    pub host: String,
    /// Port, if the URL has one.
    pub port: Option<u16>,
    /// The path without its leading `/` (the interface, for Java's SDK; empty for
    /// Python's).
    pub path: String,
    /// The parameters, decoded.
    pub parameters: BTreeMap<String, String>,
}

impl DubboUrl {
    /// Reads a URL as written (not encoded as a node name).
    ///
    /// # Errors
    /// A message naming what is wrong: no `://`, an empty protocol or host, an
    /// unclosed `[`, a port that is not a number in 1..=65535.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (protocol, rest) = text
            .split_once("://")
            .ok_or_else(|| "no `://` after a protocol".to_owned())?;
        if protocol.is_empty()
            || !protocol
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(format!("bad protocol `{protocol}`"));
        }
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        // user:password@ (Dubbo allows it; a provider's has no use for it here)
        let address = authority
            .rsplit_once('@')
            .map_or(authority, |(_, address)| address);
        let (host, port) = split_host_port(address)?;
        if host.is_empty() {
            return Err("no host".to_owned());
        }
        let parameters = form_urlencoded::parse(query.as_bytes())
            .filter(|(key, _)| !key.is_empty())
            .map(|(key, value)| (key.into_owned(), value.into_owned()))
            .collect();
        Ok(Self {
            protocol: protocol.to_ascii_lowercase(),
            host: host.to_owned(),
            port,
            path: path.to_owned(),
            parameters,
        })
    }

    /// Reads a URL from a ZooKeeper node name (the URL encoded once more, see the module
    /// documentation).
    ///
    /// # Errors
    /// As [`DubboUrl::parse`], and when the name does not decode to UTF-8.
    pub fn from_node_name(name: &str) -> Result<Self, String> {
        let spaced = name.replace('+', " ");
        let decoded = percent_decode_str(&spaced)
            .decode_utf8()
            .map_err(|_| "the node name does not decode to UTF-8".to_owned())?;
        Self::parse(&decoded)
    }

    /// The URL encoded as one ZooKeeper node name (no `/`, never `.` or `..`).
    pub fn node_name(&self) -> String {
        utf8_percent_encode(&self.to_string(), NODE_NAME).to_string()
    }

    /// The parameter `key`, if present.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters.get(key).map(String::as_str)
    }
}

/// `host[:port]` or `[v6][:port]`.
fn split_host_port(address: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(bracketed) = address.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("unclosed `[` in `{address}`"))?;
        (host, after.strip_prefix(':'))
    } else {
        match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        }
    };
    let port = match port {
        None => None,
        Some(port) => match port.parse::<u16>() {
            Ok(port) if port > 0 => Some(port),
            _ => return Err(format!("bad port `{port}` (expected 1..=65535)")),
        },
    };
    Ok((host, port))
}

impl fmt::Display for DubboUrl {
    /// `protocol://host[:port]/path?key=value&...`, the parameters in key order (as
    /// Dubbo writes them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.protocol)?;
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        write!(f, "/{}", self.path)?;
        for (index, (key, value)) in self.parameters.iter().enumerate() {
            f.write_char(if index == 0 { '?' } else { '&' })?;
            write!(
                f,
                "{}={}",
                utf8_percent_encode(key, PARAMETER),
                utf8_percent_encode(value, PARAMETER)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_java_providers_node_name_reads_back() {
        // As Dubbo 3's Java SDK names it (URLEncoder over the whole URL).
        let name = "tri%3A%2F%2F10.0.0.7%3A50052%2Fhelloworld.Greeter%3Fapplication%3Ddemo-provider%26group%3Dblue%26interface%3Dhelloworld.Greeter%26methods%3DSayHello%2CSayHelloStream%26side%3Dprovider%26version%3D1.0.0";
        let url = DubboUrl::from_node_name(name).unwrap();
        assert_eq!(
            (
                url.protocol.as_str(),
                url.host.as_str(),
                url.port,
                url.path.as_str()
            ),
            ("tri", "10.0.0.7", Some(50052), "helloworld.Greeter")
        );
        assert_eq!(url.parameter("methods"), Some("SayHello,SayHelloStream"));
        assert_eq!(url.parameter("group"), Some("blue"));
    }

    #[test]
    fn a_python_providers_node_name_reads_back() {
        // As apache-dubbo 3.0.0b1 names it: urlencode'd parameters, then quote(safe="").
        let name =
            "tri%3A%2F%2F127.0.0.1%3A50051%3Fservice%3Dhelloworld.Greeter%26note%3Da%2Bb%2520c";
        let url = DubboUrl::from_node_name(name).unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.path.as_str()),
            ("127.0.0.1", Some(50051), "")
        );
        assert_eq!(url.parameter("service"), Some("helloworld.Greeter"));
        assert_eq!(url.parameter("note"), Some("a b c"));
    }

    #[test]
    fn written_urls_read_back_whatever_their_values() {
        let url = DubboUrl {
            protocol: "tri".into(),
            host: "fe80::1".into(),
            port: Some(7),
            path: "a.B".into(),
            parameters: [
                ("methods", "X,Y"),
                ("odd", "a&b=c #%+ é"),
                ("version", "1.0.0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        };
        let text = url.to_string();
        assert!(
            text.starts_with("tri://[fe80::1]:7/a.B?methods=X,Y&odd="),
            "{text}"
        );
        let name = url.node_name();
        assert!(!name.contains('/') && !name.contains('+'), "{name}");
        assert_eq!(DubboUrl::from_node_name(&name).unwrap(), url);
        assert_eq!(DubboUrl::parse(&text).unwrap(), url);
    }

    #[test]
    fn what_is_not_a_url_is_named() {
        for (text, expected) in [
            ("10.0.0.1:80", "no `://`"),
            ("://h:1", "bad protocol"),
            ("tri://:80/a", "no host"),
            ("tri://h:0/a", "bad port `0`"),
            ("tri://h:http/a", "bad port `http`"),
            ("tri://[::1/a", "unclosed `[`"),
        ] {
            let error = DubboUrl::parse(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
        assert!(DubboUrl::from_node_name("tri%3A%2F%2F%FF").is_err());
    }
}
