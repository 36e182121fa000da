//! Dubbo's Triple headers: what a Dubbo consumer adds to a gRPC request to say which
//! version and group of a service it wants (Dubbo routes by service key, an interface
//! being served in several versions and groups). Triple is gRPC over HTTP/2 otherwise,
//! so these headers are all there is to speak it: our consumer sends them for a reference
//! with a version or a group, and our provider refuses a call that asks a version or
//! group it does not serve (`UNIMPLEMENTED`); a request without them (any plain gRPC
//! client) is served as before.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::ServiceKey;

/// Request header: the version of the service asked for.
pub const SERVICE_VERSION: HeaderName = HeaderName::from_static("tri-service-version");

/// Request header: the group of the service asked for.
pub const SERVICE_GROUP: HeaderName = HeaderName::from_static("tri-service-group");

/// The Triple headers a call of `service` carries: its version and group, each when set
/// and not a pattern (a value that cannot be a header value is left out and logged).
///
/// A reference that takes any version or group (`*`), or one of several groups (`a,b`),
/// names none: the provider it reached is one of those it takes, and no single value
/// would be true of every one.
pub fn service_headers(service: &ServiceKey) -> Vec<(HeaderName, HeaderValue)> {
    [(SERVICE_VERSION, &service.version), (SERVICE_GROUP, &service.group)]
        .into_iter()
        .filter(|(_, value)| !value.is_empty() && !is_pattern(value))
        .filter_map(|(name, value)| match HeaderValue::from_str(value) {
            Ok(value) => Some((name, value)),
            Err(_) => {
                tracing::warn!(%service, header = %name, "not sent: the value cannot be an HTTP header");
                None
            }
        })
        .collect()
}

/// Whether a reference's version or group takes more than one value (`*`, `a,b`).
pub fn is_pattern(value: &str) -> bool {
    value == "*" || value.contains(',')
}

/// Why a request with `headers` is not for the `version` and `group` served here, if it
/// is not: it names a version or group (Triple headers) other than those. A request that
/// names neither is for whatever is served.
pub fn mismatch(headers: &HeaderMap, version: &str, group: &str) -> Option<String> {
    let differs = |name: &HeaderName, served: &str| {
        let asked = headers.get(name)?;
        (asked.as_bytes() != served.as_bytes())
            .then(|| String::from_utf8_lossy(asked.as_bytes()).into_owned())
    };
    if let Some(asked) = differs(&SERVICE_VERSION, version) {
        return Some(format!(
            "version `{asked}` is not served here (served: `{version}`)"
        ));
    }
    differs(&SERVICE_GROUP, group)
        .map(|asked| format!("group `{asked}` is not served here (served: `{group}`)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_sends_what_it_has() {
        assert!(service_headers(&ServiceKey::new("a.B")).is_empty());
        let both = service_headers(&ServiceKey::new("a.B").with_version("1.0.0").with_group("g"));
        assert_eq!(both.len(), 2);
        assert_eq!(
            (both[0].0.as_str(), both[0].1.to_str().unwrap()),
            ("tri-service-version", "1.0.0")
        );
        assert_eq!(
            (both[1].0.as_str(), both[1].1.to_str().unwrap()),
            ("tri-service-group", "g")
        );
        assert!(service_headers(&ServiceKey::new("a.B").with_group("bad\nvalue")).is_empty());
        let patterns = ServiceKey::new("a.B")
            .with_version("*")
            .with_group("red,blue");
        assert!(
            service_headers(&patterns).is_empty(),
            "no value is true of every provider"
        );
        let any_group = service_headers(&ServiceKey::new("a.B").with_version("1").with_group("*"));
        assert_eq!(any_group.len(), 1);
        assert_eq!(any_group[0].0, SERVICE_VERSION);
    }

    #[test]
    fn a_request_for_another_version_or_group_is_named() {
        let mut headers = HeaderMap::new();
        assert_eq!(mismatch(&headers, "1.0.0", "g"), None, "plain gRPC");
        headers.insert(SERVICE_VERSION, HeaderValue::from_static("1.0.0"));
        assert_eq!(mismatch(&headers, "1.0.0", "g"), None);
        headers.insert(SERVICE_GROUP, HeaderValue::from_static("h"));
        assert!(
            mismatch(&headers, "1.0.0", "g")
                .unwrap()
                .contains("group `h`")
        );
        headers.insert(SERVICE_VERSION, HeaderValue::from_static("2.0.0"));
        assert!(
            mismatch(&headers, "1.0.0", "h")
                .unwrap()
                .contains("version `2.0.0`")
        );
        assert!(mismatch(&headers, "", "h").unwrap().contains("served: ``"));
    }
}
