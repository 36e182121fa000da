//! Which layout a registry's entries follow: ours (the default), or Dubbo's, so that a
//! provider is found by Dubbo consumers and Dubbo providers are found by our consumers.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How instances are stored in a registry: under which keys, in which encoding.
///
/// Set per registry (`registries.<name>.format` in `rpc`'s configuration, or
/// [`connect_as`](crate::connect_as)); the default is [`RegistryFormat::Rpc`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum RegistryFormat {
    /// Our own layout: one entry per instance id holding the instance's JSON (each
    /// backend's module documentation gives its keys). Every backend speaks it.
    #[default]
    Rpc,
    /// Apache Dubbo's interface-level layout: on ZooKeeper one ephemeral znode
    /// `/dubbo/<interface>/providers/<URL-encoded dubbo URL>`, on Nacos the service
    /// `providers:<interface>:<version>:<group>` with the URL's parameters as metadata
    /// (see [`crate::dubbo`]). ZooKeeper and Nacos speak it.
    Dubbo,
}

impl RegistryFormat {
    /// Every format, in the order of the documentation.
    pub const ALL: [RegistryFormat; 2] = [Self::Rpc, Self::Dubbo];

    /// Its name in configuration: `rpc` or `dubbo`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rpc => "rpc",
            Self::Dubbo => "dubbo",
        }
    }
}

impl fmt::Display for RegistryFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl TryFrom<String> for RegistryFormat {
    type Error = String;

    /// As [`FromStr`]: what configuration reads (so a bad value names the known ones).
    fn try_from(name: String) -> Result<Self, Self::Error> {
        name.parse()
    }
}

impl FromStr for RegistryFormat {
    type Err = String;

    /// Parses `rpc` or `dubbo`; anything else is an error naming the known formats.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|format| format.name() == name)
            .ok_or_else(|| format!("unknown format `{name}` (known: rpc, dubbo)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_others_are_refused() {
        for format in RegistryFormat::ALL {
            assert_eq!(format.name().parse::<RegistryFormat>(), Ok(format));
        }
        assert!(
            "Dubbo"
                .parse::<RegistryFormat>()
                .unwrap_err()
                .contains("unknown format `Dubbo`")
        );
        assert_eq!(RegistryFormat::default(), RegistryFormat::Rpc);
    }

    #[test]
    fn configuration_reads_names_and_says_which_are_known() {
        let read =
            |json: &str| serde_json::from_str::<RegistryFormat>(json).map_err(|e| e.to_string());
        assert_eq!(read("\"dubbo\""), Ok(RegistryFormat::Dubbo));
        assert_eq!(
            serde_json::to_string(&RegistryFormat::Dubbo).unwrap(),
            "\"dubbo\""
        );
        for bad in ["\"Dubbo\"", "\"xml\"", "\"\""] {
            let error = read(bad).unwrap_err();
            assert!(error.contains("(known: rpc, dubbo)"), "{bad}: {error}");
        }
    }
}
