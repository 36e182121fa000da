//! Registry URLs: `scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...]`.
//!
//! Several hosts separated by commas are not a valid authority for generic URL parsers,
//! but they are how ZooKeeper, etcd and Dubbo users write a cluster, so the form is
//! parsed here. Every error names the URL (password redacted) and the part at fault.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_core::RegistryError;

use crate::format::RegistryFormat;

/// A parsed registry URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryUrl {
    scheme: String,
    username: Option<String>,
    password: Option<String>,
    hosts: Vec<HostPort>,
    path: String,
    params: BTreeMap<String, String>,
    redacted: String,
    /// The layout of the registry's entries: not part of the URL's text, set by
    /// [`RegistryUrl::with_format`] (from `registries.<name>.format`).
    format: RegistryFormat,
}

/// One `host[:port]` of a URL's authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    /// Host name or IP (IPv6 without brackets).
    pub host: String,
    /// Port, if given.
    pub port: Option<u16>,
}

impl HostPort {
    /// `host:port`, with `default_port` when none was given (IPv6 bracketed).
    pub fn authority(&self, default_port: u16) -> String {
        rpc_core::format_authority(&self.host, self.port.unwrap_or(default_port))
    }
}

impl RegistryUrl {
    /// Parses `url`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming what is wrong: no `://`, a bad scheme, an
    /// empty host in a list, a port that is not a number in 1..=65535, a bad
    /// percent-encoding.
    pub fn parse(url: &str) -> Result<Self, RegistryError> {
        let redacted = redact(url);
        let fail = |reason: String| RegistryError::InvalidUrl {
            url: redacted.clone(),
            reason,
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| fail("expected `scheme://...` (e.g. `etcd://127.0.0.1:2379`)".into()))?;
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return Err(fail(format!("bad scheme `{scheme}`")));
        }
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, pass) = match info.split_once(':') {
                    Some((user, pass)) => (user, Some(pass)),
                    None => (info, None),
                };
                let decode = |part: &str, what: &str| {
                    percent_decode(part)
                        .ok_or_else(|| fail(format!("bad percent-encoding in the {what}")))
                };
                (
                    Some(decode(user, "user name")?),
                    pass.map(|p| decode(p, "password")).transpose()?,
                )
            }
        };
        let hosts = parse_hosts(hosts).map_err(fail)?;
        let mut params = BTreeMap::new();
        if let Some(query) = query {
            for (key, value) in form_urlencoded::parse(query.as_bytes()) {
                if key.is_empty() {
                    return Err(fail("empty parameter name in the query".into()));
                }
                params.insert(key.into_owned(), value.into_owned());
            }
        }
        Ok(Self {
            scheme: scheme.to_ascii_lowercase(),
            username,
            password,
            hosts,
            path: path.to_owned(),
            params,
            redacted,
            format: RegistryFormat::Rpc,
        })
    }

    /// The same URL with its registry's entries in `format`.
    pub fn with_format(mut self, format: RegistryFormat) -> Self {
        self.format = format;
        self
    }

    /// The layout of the registry's entries ([`RegistryFormat::Rpc`] unless
    /// [`RegistryUrl::with_format`] said otherwise).
    pub fn format(&self) -> RegistryFormat {
        self.format
    }

    /// The scheme, lower-cased (`etcd`, `zookeeper`, ...).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The user name, if the URL has credentials.
    pub fn username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// The password, if the URL has one. Never logged: use [`RegistryUrl::redacted`].
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// The hosts of the authority, in order (may be empty, e.g. `memory://`).
    pub fn hosts(&self) -> &[HostPort] {
        &self.hosts
    }

    /// The path after the authority, `""` if none.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The URL as given with the password replaced by `***`: safe to log.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The query parameter `name`, if present.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    /// The query parameter `name` as a duration (`10s`, `500ms`), or `default`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the parameter when the value does not parse.
    pub fn duration_param(&self, name: &str, default: Duration) -> Result<Duration, RegistryError> {
        match self.param(name) {
            None => Ok(default),
            Some(value) => humantime::parse_duration(value).map_err(|error| {
                self.invalid(format!(
                "parameter `{name}`: `{value}` is not a duration like `10s` or `500ms` ({error})"
            ))
            }),
        }
    }

    /// Checks that every query parameter is one of `known`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] naming the first unknown parameter and the known ones.
    pub fn expect_params(&self, known: &[&str]) -> Result<(), RegistryError> {
        match self
            .params
            .keys()
            .find(|key| !known.contains(&key.as_str()))
        {
            None => Ok(()),
            Some(unknown) => Err(self.invalid(format!(
                "unknown parameter `{unknown}` for {}:// (known: {})",
                self.scheme,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ))),
        }
    }

    /// The hosts as `host:port` strings with `default_port` where none was given.
    ///
    /// # Errors
    /// [`RegistryError::InvalidUrl`] when the URL has no host.
    pub fn endpoints(&self, default_port: u16) -> Result<Vec<String>, RegistryError> {
        if self.hosts.is_empty() {
            return Err(self.invalid(format!("{}:// needs at least one host", self.scheme)));
        }
        Ok(self
            .hosts
            .iter()
            .map(|h| h.authority(default_port))
            .collect())
    }

    /// An [`RegistryError::InvalidUrl`] for this URL.
    pub fn invalid(&self, reason: String) -> RegistryError {
        RegistryError::InvalidUrl {
            url: self.redacted.clone(),
            reason,
        }
    }
}

fn parse_hosts(hosts: &str) -> Result<Vec<HostPort>, String> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    hosts.split(',').map(parse_host).collect()
}

fn parse_host(entry: &str) -> Result<HostPort, String> {
    if entry.is_empty() {
        return Err("empty host in the host list".into());
    }
    let (host, port) = if let Some(bracketed) = entry.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("unclosed `[` in `{entry}`"))?;
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("unexpected `{after}` after `]` in `{entry}`")),
            },
        }
    } else {
        match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return Err(format!("empty host in `{entry}`"));
    }
    if host.contains(|c: char| c.is_whitespace() || c == '@') {
        return Err(format!("bad host `{host}`"));
    }
    let port = port
        .map(|port| match port.parse::<u16>() {
            Ok(0) | Err(_) => Err(format!(
                "bad port `{port}` in `{entry}` (expected 1..=65535)"
            )),
            Ok(port) => Ok(port),
        })
        .transpose()?;
    Ok(HostPort {
        host: host.to_owned(),
        port,
    })
}

fn percent_decode(part: &str) -> Option<String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `url` with the password of its user info replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let masked = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_owned()
            };
            format!("{scheme}://{masked}@{hosts}{}", &rest[authority_end..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> String {
        match RegistryUrl::parse(url) {
            Err(RegistryError::InvalidUrl { reason, .. }) => reason,
            other => panic!("expected InvalidUrl for {url}, got {other:?}"),
        }
    }

    #[test]
    fn parses_every_documented_form() {
        let etcd =
            RegistryUrl::parse("etcd://127.0.0.1:2379,10.0.0.2:2380?ttl=10s&prefix=/rpc").unwrap();
        assert_eq!(etcd.scheme(), "etcd");
        assert_eq!(
            etcd.endpoints(2379).unwrap(),
            ["127.0.0.1:2379", "10.0.0.2:2380"]
        );
        assert_eq!(
            etcd.duration_param("ttl", Duration::ZERO).unwrap(),
            Duration::from_secs(10)
        );
        assert_eq!(etcd.param("prefix"), Some("/rpc"));

        let zk = RegistryUrl::parse("zookeeper://a:2181,b?session_timeout=2s&root=/x").unwrap();
        assert_eq!(zk.endpoints(2181).unwrap(), ["a:2181", "b:2181"]);

        let nacos =
            RegistryUrl::parse("nacos://nacos:p%40ss@127.0.0.1:8848?namespace=public&group=G")
                .unwrap();
        assert_eq!(nacos.username(), Some("nacos"));
        assert_eq!(nacos.password(), Some("p@ss"));
        assert_eq!(
            nacos.redacted(),
            "nacos://nacos:***@127.0.0.1:8848?namespace=public&group=G"
        );

        let memory = RegistryUrl::parse("memory://").unwrap();
        assert!(memory.hosts().is_empty());

        let fixed = RegistryUrl::parse("static://127.0.0.1:20880,127.0.0.1:20881").unwrap();
        assert_eq!(fixed.hosts().len(), 2);

        let v6 = RegistryUrl::parse("etcd://[::1]:2379").unwrap();
        assert_eq!(v6.endpoints(1).unwrap(), ["[::1]:2379"]);
    }

    #[test]
    fn every_bad_url_names_its_fault() {
        assert!(reason("127.0.0.1:2379").contains("scheme://"));
        assert!(reason("e tcd://h").contains("bad scheme"));
        assert!(reason("etcd://h:99999").contains("bad port `99999`"));
        assert!(reason("etcd://h:0").contains("bad port `0`"));
        assert!(reason("etcd://h:abc").contains("bad port `abc`"));
        assert!(reason("static://a:1,,b:2").contains("empty host"));
        assert!(reason("etcd://[::1:2379").contains("unclosed"));
        assert!(reason("etcd://u:%zz@h").contains("percent-encoding"));
        assert!(reason("etcd://h?=x").contains("empty parameter"));
    }

    #[test]
    fn parameter_errors_name_the_parameter() {
        let url = RegistryUrl::parse("etcd://h?ttl=ten&bogus=1").unwrap();
        let bad = url
            .duration_param("ttl", Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("parameter `ttl`"), "{bad}");
        let unknown = url
            .expect_params(&["ttl", "prefix"])
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("unknown parameter `bogus`"), "{unknown}");
        assert!(unknown.contains("ttl, prefix"), "{unknown}");
    }

    #[test]
    fn errors_never_show_the_password() {
        let error = RegistryUrl::parse("etcd://root:secret@h:abc")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("secret"), "{error}");
        assert!(error.contains("root:***@"), "{error}");
    }
}
