//! An instance as a Dubbo provider URL, and back: the parameters Dubbo consumers read,
//! and which entries of a Dubbo registry a subscription to one service takes.

use std::collections::BTreeMap;

use rpc_core::{DEFAULT_WEIGHT, Instance, InstanceId, ServiceKey};

use super::url::DubboUrl;

/// The parameter holding our instance id, so that our consumers tell instances apart
/// (and one instance keeps one id through a hot upgrade); a Dubbo provider's id is its
/// `host:port`.
pub const INSTANCE_PARAMETER: &str = "rpc.instance";

/// The protocols our consumers speak: Triple, and plain gRPC (the same on the wire).
pub const PROTOCOLS: [&str; 2] = ["tri", "grpc"];

/// The Dubbo protocol version the parameters follow (Dubbo 2.7 and 3 write `2.0.2`).
const DUBBO_PROTOCOL_VERSION: &str = "2.0.2";

/// Parameters that are the instance's fields or Dubbo's bookkeeping, not its metadata.
const NOT_METADATA: [&str; 13] = [
    "anyhost",
    "deprecated",
    "dubbo",
    "dynamic",
    "generic",
    "group",
    "interface",
    "release",
    "side",
    "timestamp",
    "version",
    "weight",
    INSTANCE_PARAMETER,
];

/// What one entry of a Dubbo providers list is to a subscription.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// A provider of the subscribed service.
    Provider(Instance),
    /// A provider of another version or group, or one disabled (`enabled=false`): not
    /// this subscription's, and nothing wrong.
    Other,
    /// An entry that cannot be used, and why (a protocol we do not speak, no port, the
    /// wrong interface, a weight that is not a number).
    Unusable(String),
}

/// The provider URL of `instance`, as Dubbo 3 registers one at interface level:
/// `tri://host:port/<interface>?application=…&interface=…&side=provider&version=…&group=…&weight=…&timestamp=…`,
/// its metadata as further parameters, and its id as [`INSTANCE_PARAMETER`].
pub fn provider_url(instance: &Instance) -> DubboUrl {
    let service = &instance.service;
    let mut parameters: BTreeMap<String, String> = instance.metadata.clone();
    let mut set = |key: &str, value: String| {
        parameters.insert(key.to_owned(), value);
    };
    set("anyhost", "false".into());
    set("deprecated", "false".into());
    set("dubbo", DUBBO_PROTOCOL_VERSION.into());
    set("dynamic", "true".into());
    set("generic", "false".into());
    set("interface", service.interface.to_string());
    set("release", concat!("rpc-", env!("CARGO_PKG_VERSION")).into());
    set("side", "provider".into());
    set("timestamp", instance.start_time_ms.to_string());
    set("weight", instance.weight.to_string());
    set(INSTANCE_PARAMETER, instance.id.to_string());
    if !service.version.is_empty() {
        set("version", service.version.to_string());
    }
    if !service.group.is_empty() {
        set("group", service.group.to_string());
    }
    DubboUrl {
        protocol: "tri".into(),
        host: instance.host.clone(),
        port: Some(instance.port),
        path: service.interface.to_string(),
        parameters,
    }
}

/// What the provider `url`, listed under `wanted`'s interface, is to a subscription to
/// `wanted` (see [`Entry`]). Version and group match as Dubbo matches them: equal, or
/// `*` in `wanted` for any; a group of `wanted` may list several (`a,b`).
pub fn entry(url: &DubboUrl, wanted: &ServiceKey) -> Entry {
    match provider(url, wanted) {
        Ok(Some(instance)) => Entry::Provider(instance),
        Ok(None) => Entry::Other,
        Err(reason) => Entry::Unusable(reason),
    }
}

fn provider(url: &DubboUrl, wanted: &ServiceKey) -> Result<Option<Instance>, String> {
    if !PROTOCOLS.contains(&url.protocol.as_str()) {
        return Err(format!(
            "protocol `{}` is not spoken here (only {})",
            url.protocol,
            PROTOCOLS.join(" and ")
        ));
    }
    let port = url.port.ok_or("no port")?;
    if let Some(side) = url.parameter("side").filter(|side| *side != "provider") {
        return Err(format!("side `{side}` is not a provider"));
    }
    let interface = interface(url);
    if interface != &*wanted.interface {
        return Err(format!(
            "interface `{interface}` listed under `{}`",
            wanted.interface
        ));
    }
    let version = url.parameter("version").unwrap_or("");
    let group = url.parameter("group").unwrap_or("");
    if !matches(&wanted.version, version)
        || !group_matches(&wanted.group, group)
        || url.parameter("enabled") == Some("false")
    {
        return Ok(None);
    }
    let weight = match url.parameter("weight") {
        None => DEFAULT_WEIGHT,
        Some(weight) => weight
            .parse()
            .map_err(|_| format!("weight `{weight}` is not a whole number"))?,
    };
    let id = url.parameter(INSTANCE_PARAMETER).map_or_else(
        || rpc_core::format_authority(&url.host, port),
        str::to_owned,
    );
    let metadata = url
        .parameters
        .iter()
        .filter(|(key, _)| !NOT_METADATA.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Ok(Some(Instance {
        service: wanted.clone(),
        host: url.host.clone(),
        port,
        id: InstanceId::new(id),
        weight,
        metadata,
        start_time_ms: url
            .parameter("timestamp")
            .and_then(|at| at.parse().ok())
            .unwrap_or(0),
    }))
}

/// The interface a provider URL serves: its `interface` parameter (Java's SDK), else its
/// path, else its `service` parameter (Python's SDK writes only that).
fn interface(url: &DubboUrl) -> &str {
    url.parameter("interface")
        .or(Some(url.path.as_str()).filter(|path| !path.is_empty()))
        .or(url.parameter("service"))
        .unwrap_or("")
}

/// Dubbo's rule for a version: equal, or `*` wanted.
fn matches(wanted: &str, offered: &str) -> bool {
    wanted == "*" || wanted == offered
}

/// Dubbo's rule for a group: equal, `*` wanted, or one of a comma-separated list.
fn group_matches(wanted: &str, offered: &str) -> bool {
    matches(wanted, offered)
        || (wanted.contains(',') && wanted.split(',').any(|one| one.trim() == offered))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> ServiceKey {
        ServiceKey::new("helloworld.Greeter")
            .with_version("1.0.0")
            .with_group("blue")
    }

    #[test]
    fn an_instance_round_trips_through_its_provider_url() {
        let mut instance = Instance::new(service(), "10.0.0.1", 50051)
            .with_weight(7)
            .with_metadata("application", "shop")
            .with_metadata("zone", "z1");
        instance.start_time_ms = 1_700_000_000_000;
        let url = provider_url(&instance);
        for (key, value) in [
            ("interface", "helloworld.Greeter"),
            ("version", "1.0.0"),
            ("group", "blue"),
            ("side", "provider"),
            ("application", "shop"),
            ("weight", "7"),
            ("timestamp", "1700000000000"),
            (INSTANCE_PARAMETER, instance.id.as_str()),
        ] {
            assert_eq!(url.parameter(key), Some(value), "{key}");
        }
        assert_eq!(
            (url.protocol.as_str(), url.path.as_str()),
            ("tri", "helloworld.Greeter")
        );
        let read = DubboUrl::from_node_name(&url.node_name()).unwrap();
        assert_eq!(entry(&read, &service()), Entry::Provider(instance));
    }

    #[test]
    fn a_python_provider_is_its_address() {
        let url = DubboUrl::parse("tri://127.0.0.1:50051?service=helloworld.Greeter").unwrap();
        let wanted = ServiceKey::new("helloworld.Greeter");
        let Entry::Provider(instance) = entry(&url, &wanted) else {
            panic!("not a provider");
        };
        assert_eq!(instance.id.as_str(), "127.0.0.1:50051");
        assert_eq!(
            (instance.weight, instance.start_time_ms),
            (DEFAULT_WEIGHT, 0)
        );
        assert_eq!(
            instance.metadata.get("service").map(String::as_str),
            Some("helloworld.Greeter")
        );
    }

    #[test]
    fn version_and_group_are_matched_as_dubbo_matches_them() {
        let url = provider_url(&Instance::new(service(), "h", 1));
        let want = |version: &str, group: &str| {
            let key = ServiceKey::new("helloworld.Greeter")
                .with_version(version)
                .with_group(group);
            matches!(entry(&url, &key), Entry::Provider(_))
        };
        assert!(want("1.0.0", "blue"));
        assert!(want("*", "*"));
        assert!(want("1.0.0", "red,blue"));
        assert!(!want("2.0.0", "blue"));
        assert!(!want("1.0.0", ""));
        assert!(!want("", "blue"));
        let mut disabled = url.clone();
        disabled.parameters.insert("enabled".into(), "false".into());
        assert_eq!(entry(&disabled, &service()), Entry::Other);
    }

    #[test]
    fn unusable_entries_say_why() {
        for (text, expected) in [
            (
                "dubbo://h:1/helloworld.Greeter?version=1.0.0&group=blue",
                "protocol `dubbo`",
            ),
            (
                "tri://h/helloworld.Greeter?version=1.0.0&group=blue",
                "no port",
            ),
            (
                "tri://h:1/helloworld.Greeter?side=consumer",
                "side `consumer`",
            ),
            (
                "tri://h:1/other.Service?version=1.0.0&group=blue",
                "interface `other.Service`",
            ),
            (
                "tri://h:1/helloworld.Greeter?version=1.0.0&group=blue&weight=heavy",
                "weight `heavy`",
            ),
        ] {
            let url = DubboUrl::parse(text).unwrap();
            match entry(&url, &service()) {
                Entry::Unusable(reason) => assert!(reason.contains(expected), "{text}: {reason}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
