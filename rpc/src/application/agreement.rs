//! Configuration and code agree: a setting the code never reads is an error at start-up,
//! not a silent no-op.
//!
//! `provider.services.<name>` and `consumer.references.<name>` are maps keyed by service
//! name, so serde cannot know which names are real: a typo (`helloworld.Gretter`) or a
//! wrong case (`helloworld.greeter`) would simply never be looked up, and a version pin,
//! a canary weight or a timeout would silently not apply. Start-up compares the names
//! with what the code registered (`builder.service`, `builder.reference`) and fails on the
//! first that matches nothing, naming the key, the file and the closest real name.
//!
//! A reference whose group or version differs from what this same application provides
//! of that interface is *not* an error here: a proxy provides `echo.Echo` in group
//! `proxy` and refers to `echo.Echo` in group `backend`, served by other processes. Only
//! when such a reference then finds no provider does start-up say what this
//! application provides instead ([`provided_instead`]).

use rpc_core::ServiceKey;

use crate::config::{Config, ConfigError};

/// Fails on the first `provider.services.<name>` that names no service in `services`,
/// or `consumer.references.<name>` that names none of `references`.
pub(super) fn check_agreement(
    config: &Config,
    services: &[ServiceKey],
    references: &[ServiceKey],
) -> Result<(), ConfigError> {
    let provided: Vec<&str> = services.iter().map(|key| &*key.interface).collect();
    let referenced: Vec<&str> = references.iter().map(|key| &*key.interface).collect();
    let configured_services: Vec<&String> = config.provider.services.keys().collect();
    let configured_references: Vec<&String> = config.consumer.references.keys().collect();
    let sections = [
        (
            "provider.services",
            configured_services,
            &provided,
            "service this application provides",
        ),
        (
            "consumer.references",
            configured_references,
            &referenced,
            "reference this application makes",
        ),
    ];
    for (section, names, known, what) in sections {
        for name in names {
            if known.contains(&name.as_str()) {
                continue;
            }
            return Err(ConfigError::Invalid {
                origin: config.origin().to_owned(),
                key: format!("{section}.{name}"),
                message: format!("names no {what}; {}", hint(name, known)),
            });
        }
    }
    Ok(())
}

/// For a reference to `wanted` that found no provider: what this application itself
/// provides of the same interface under another group or version, as a sentence, if
/// anything.
pub(super) fn provided_instead(wanted: &ServiceKey, services: &[ServiceKey]) -> Option<String> {
    let same_interface: Vec<String> = services
        .iter()
        .filter(|key| key.interface == wanted.interface && *key != wanted)
        .map(|key| format!("`{}`", spelled(key)))
        .collect();
    if same_interface.is_empty() {
        return None;
    }
    Some(format!(
        "this application provides {} but the reference asks for `{}`: set the same \
         group and version under consumer.references.{} and provider.services.{}",
        same_interface.join(", "),
        spelled(wanted),
        wanted.interface,
        wanted.interface,
    ))
}

/// `helloworld.Greeter (group "", version "1.0.0")`: both parts shown, empty or not.
fn spelled(key: &ServiceKey) -> String {
    format!(
        "{} (group \"{}\", version \"{}\")",
        key.interface, key.group, key.version
    )
}

/// `did you mean `x`?` for the closest of `known` to `name`, else the list of `known`.
fn hint(name: &str, known: &[&str]) -> String {
    match closest(name, known) {
        Some(close) => format!("did you mean `{close}`?"),
        None if known.is_empty() => "the code registers none".to_owned(),
        None => format!("the code registers `{}`", known.join("`, `")),
    }
}

/// The name of `known` closest to `name` (Damerau–Levenshtein distance, case ignored),
/// if it is close enough to be a slip: at most a third of the name's length, and at
/// least 2, apart.
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let allowed = (name.chars().count() / 3).max(2);
    known
        .iter()
        .map(|candidate| {
            let distance = strsim::damerau_levenshtein(&lower, &candidate.to_lowercase());
            (distance, *candidate)
        })
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigFormat;

    fn config(yaml: &str) -> Config {
        Config::from_str(yaml, ConfigFormat::Yaml, "app.yaml").unwrap()
    }

    fn greeter() -> Vec<ServiceKey> {
        vec![ServiceKey::new("helloworld.Greeter")]
    }

    /// A typo in a provided service and the wrong case in a reference: each names the
    /// key, the file and the closest name the code registered.
    #[test]
    fn a_misspelt_name_is_refused_with_the_right_spelling() {
        let cases = [
            (
                "provider:\n  services:\n    helloworld.Gretter: { weight: 5 }\n",
                (greeter(), Vec::new()),
                "app.yaml: key `provider.services.helloworld.Gretter`: names no service this \
                 application provides; did you mean `helloworld.Greeter`?",
            ),
            (
                "consumer:\n  references:\n    helloworld.greeter: { timeout: 1ms }\n",
                (Vec::new(), greeter()),
                "app.yaml: key `consumer.references.helloworld.greeter`: names no reference \
                 this application makes; did you mean `helloworld.Greeter`?",
            ),
        ];
        for (yaml, (services, references), expected) in cases {
            let error = check_agreement(&config(yaml), &services, &references).unwrap_err();
            assert_eq!(error.to_string(), expected);
        }
    }

    #[test]
    fn a_name_far_from_every_real_one_lists_them() {
        let config = config("consumer:\n  references:\n    other.Thing: {}\n");
        let error = check_agreement(&config, &[], &greeter()).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("the code registers `helloworld.Greeter`"),
            "{error}"
        );
        let error = check_agreement(&config, &[], &[]).unwrap_err();
        assert!(
            error.to_string().ends_with("the code registers none"),
            "{error}"
        );
    }

    #[test]
    fn names_the_code_uses_pass() {
        let config = config(
            "provider:\n  services:\n    helloworld.Greeter: {}\n\
             consumer:\n  references:\n    helloworld.Greeter: {}\n",
        );
        assert!(check_agreement(&config, &greeter(), &greeter()).is_ok());
        assert!(check_agreement(&Config::default(), &greeter(), &greeter()).is_ok());
    }

    #[test]
    fn what_is_provided_instead_is_said_only_for_another_group_or_version() {
        let provided = [ServiceKey::new("helloworld.Greeter").with_version("1.0.0")];
        let wanted = ServiceKey::new("helloworld.Greeter");
        let hint = provided_instead(&wanted, &provided).unwrap();
        assert!(
            hint.contains(r#"provides `helloworld.Greeter (group "", version "1.0.0")`"#),
            "{hint}"
        );
        assert!(
            hint.contains(r#"asks for `helloworld.Greeter (group "", version "")`"#),
            "{hint}"
        );
        assert_eq!(provided_instead(&provided[0], &provided), None);
        assert_eq!(
            provided_instead(&ServiceKey::new("echo.Echo"), &provided),
            None
        );
    }
}
