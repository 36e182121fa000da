//! The `Host` rule, against DNS rebinding: a page on a domain whose name its owner made
//! resolve to 127.0.0.1 talks to the admin endpoint as to its own origin, so the browser
//! lets it read the answers — but the request still names that domain in `Host`. The
//! endpoint answers only to what names it: an IP address, `localhost`, or a name an
//! operator listed in `admin.allowed_hosts`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A `Host` value (or an `Origin`'s authority) taken apart: the name as written (an IP
/// literal keeps its brackets) and the port, if one is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Authority<'a> {
    pub(crate) name: &'a str,
    pub(crate) port: Option<u16>,
}

impl<'a> Authority<'a> {
    /// `name[:port]` or `[v6]` `[:port]`; `None` when it is neither (an empty name or
    /// one with what no host name holds, a port that is not a number, an IPv6 address
    /// without its brackets).
    pub(crate) fn parse(text: &'a str) -> Option<Self> {
        let (name, port) = if text.starts_with('[') {
            let end = text.find(']')? + 1;
            match &text[end..] {
                "" => (&text[..end], None),
                rest => (&text[..end], Some(rest.strip_prefix(':')?)),
            }
        } else {
            match text.split_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (text, None),
            }
        };
        let port = match port {
            Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
                Some(port.parse().ok()?)
            }
            Some(_) => return None,
            None => None,
        };
        let is_name = if name.starts_with('[') {
            name.len() > 2
        } else {
            is_host_name(name)
        };
        is_name.then_some(Self { name, port })
    }

    /// An IP address written as such: dotted IPv4, or bracketed IPv6.
    fn is_ip_literal(&self) -> bool {
        match self.name.strip_prefix('[') {
            Some(v6) => v6
                .strip_suffix(']')
                .is_some_and(|v6| v6.parse::<Ipv6Addr>().is_ok()),
            None => self.name.parse::<Ipv4Addr>().is_ok(),
        }
    }

    /// The same endpoint as `other`: names equal ignoring case, ports equal once an
    /// absent one is read as HTTP's 80.
    pub(crate) fn same_as(&self, other: &Authority<'_>) -> bool {
        self.name.eq_ignore_ascii_case(other.name)
            && self.port.or(Some(80)) == other.port.or(Some(80))
    }
}

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// The names, besides IP addresses and `localhost`, that a request's `Host` may give:
/// `admin.allowed_hosts`, each with a port or for any port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AllowedHosts {
    /// Lower-cased names, each with the port it is limited to, if any.
    names: Vec<(String, Option<u16>)>,
}

impl AllowedHosts {
    /// The configured `entries` (`greeter.internal`, `greeter.internal:22222`).
    ///
    /// # Errors
    /// One line naming the first entry that is not a host name with an optional port:
    /// empty, a URL (a scheme, a `/`), or holding what no host name holds.
    pub(crate) fn parse(entries: &[String]) -> Result<Self, String> {
        let names = entries
            .iter()
            .map(|entry| {
                let bad = |why: &str| format!("`{entry}` is not a host name: {why}");
                if entry.trim().is_empty() {
                    return Err(bad("it is empty"));
                }
                if entry.contains('/') {
                    return Err(bad(
                        "write the name alone, without a scheme or a path (greeter.internal)",
                    ));
                }
                if !entry
                    .bytes()
                    .all(|b| is_host_name_byte(b) || matches!(b, b':' | b'[' | b']'))
                {
                    return Err(bad("a name holds only letters, digits, `-`, `_` and `.`"));
                }
                let authority = Authority::parse(entry)
                    .ok_or_else(|| bad("write a name, optionally with :port"))?;
                // An address needs no listing (every IP literal is accepted), and a name
                // of digits and dots alone is one (or a number that YAML read as text).
                if authority.is_ip_literal()
                    || authority
                        .name
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b == b'.')
                {
                    return Err(bad(
                        "IP addresses are always accepted; list only names (greeter.internal)",
                    ));
                }
                Ok((authority.name.to_ascii_lowercase(), authority.port))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { names })
    }

    /// Whether `host` (a request's `Host`) names this endpoint: an IP literal,
    /// `localhost`, or a configured name (with its port, when the entry gives one).
    pub(crate) fn allow(&self, host: &Authority<'_>) -> bool {
        host.is_ip_literal()
            || host.name.eq_ignore_ascii_case("localhost")
            || self.names.iter().any(|(name, port)| {
                host.name.eq_ignore_ascii_case(name)
                    && port.is_none_or(|port| host.port == Some(port))
            })
    }
}

/// Not empty, and only what a DNS name (or a hosts-file alias) holds.
fn is_host_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_host_name_byte)
}

/// Letters, digits, `-`, `_` and `.`.
fn is_host_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str], host: &str) -> bool {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        let hosts = AllowedHosts::parse(&entries).unwrap();
        Authority::parse(host).is_some_and(|host| hosts.allow(&host))
    }

    #[test]
    fn addresses_and_numbers_are_not_names_to_list() {
        for entry in ["1", "10.0.0.7", "10.0.0.7:22222", "[::1]"] {
            let error = AllowedHosts::parse(&[entry.to_owned()]).unwrap_err();
            assert!(error.contains("list only names"), "{entry}: {error}");
        }
        assert!(AllowedHosts::parse(&["node-1".to_owned()]).is_ok());
    }

    #[test]
    fn an_authority_is_a_name_and_an_optional_port() {
        let parse = Authority::parse;
        assert_eq!(
            parse("localhost:22222"),
            Some(Authority {
                name: "localhost",
                port: Some(22222)
            })
        );
        assert_eq!(
            parse("[::1]:22222"),
            Some(Authority {
                name: "[::1]",
                port: Some(22222)
            })
        );
        assert_eq!(
            parse("[::1]"),
            Some(Authority {
                name: "[::1]",
                port: None
            })
        );
        assert_eq!(
            parse("127.0.0.1"),
            Some(Authority {
                name: "127.0.0.1",
                port: None
            })
        );
        for bad in [
            "",
            ":80",
            "host:",
            "host:x",
            "host:70000",
            "::1",
            "[::1",
            "[::1]x",
            "a:1:2",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ip_literals_and_localhost_name_the_endpoint() {
        for host in [
            "127.0.0.1:22222",
            "127.0.0.1",
            "[::1]:22222",
            "[::1]",
            "10.1.2.3:22222",
        ] {
            assert!(allowed(&[], host), "{host}");
        }
        for host in ["localhost:22222", "localhost", "LocalHost:22222"] {
            assert!(allowed(&[], host), "{host}");
        }
        assert!(!allowed(&[], "[not-v6]:22222"));
    }

    #[test]
    fn another_name_is_refused_unless_configured() {
        assert!(!allowed(&[], "evil.example"));
        assert!(!allowed(&[], "rebind.example:22222"));
        assert!(!allowed(&[], "localhost.evil.example:22222"));
        assert!(!allowed(&[], "127.0.0.1.evil.example"));
        assert!(allowed(&["greeter.internal"], "greeter.internal:22222"));
        assert!(allowed(&["greeter.internal"], "Greeter.Internal"));
        assert!(allowed(&["Greeter.Internal"], "greeter.internal:1"));
        assert!(!allowed(&["greeter.internal"], "evil.example:22222"));
        // An entry with a port allows that port only.
        assert!(allowed(
            &["greeter.internal:22222"],
            "greeter.internal:22222"
        ));
        assert!(!allowed(
            &["greeter.internal:22222"],
            "greeter.internal:8080"
        ));
        assert!(!allowed(&["greeter.internal:22222"], "greeter.internal"));
    }

    #[test]
    fn an_entry_that_is_not_a_host_name_is_an_error_naming_it() {
        for (entry, why) in [
            ("", "empty"),
            ("  ", "empty"),
            ("http://greeter.internal", "without a scheme"),
            ("greeter.internal/", "without a scheme or a path"),
            ("http:greeter", "optionally with :port"),
            ("greeter.internal:port", "optionally with :port"),
            ("*.internal", "only letters"),
            ("greeter internal", "only letters"),
        ] {
            let error = AllowedHosts::parse(&[entry.to_owned()]).unwrap_err();
            assert!(error.contains(&format!("`{entry}`")), "{error}");
            assert!(error.contains(why), "{entry}: {error}");
        }
        assert!(AllowedHosts::parse(&["a-b_c.d:1".to_owned()]).is_ok());
    }

    #[test]
    fn same_endpoint_compares_names_without_case_and_ports_with_80_for_none() {
        let same = |a: &str, b: &str| {
            Authority::parse(a)
                .unwrap()
                .same_as(&Authority::parse(b).unwrap())
        };
        assert!(same("LOCALHOST:22222", "localhost:22222"));
        assert!(same("127.0.0.1", "127.0.0.1:80"));
        assert!(!same("127.0.0.1:8080", "127.0.0.1:22222"));
        assert!(!same("127.0.0.1:22222", "127.0.0.1"));
        assert!(!same("localhost:22222", "127.0.0.1:22222"));
    }
}
