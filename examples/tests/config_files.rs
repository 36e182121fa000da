//! The example configuration files load, in both formats, and mean the same thing; the
//! reference file shows every key of the configuration with its default.

use std::time::Duration;

use lossless_rpc::{Config, ConfigError};

const YAML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.yaml");
const TOML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/provider.toml");
const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/reference.yaml");

/// The reference configuration (docs/configuration.md quotes this file) loads, and its
/// reference finds its provider: the same group and version on both sides (issue 15).
#[test]
fn the_readme_reference_configuration_loads_and_agrees_with_itself() {
    let config = Config::from_file(REFERENCE).unwrap();
    let provided = &config.provider.services["helloworld.Greeter"];
    let reference = &config.consumer.references["helloworld.Greeter"];
    assert_eq!(
        (&provided.group, &provided.version),
        (&reference.group, &reference.version)
    );
    assert_eq!(reference.max_replay_bytes, 4 * 1024 * 1024);
    assert_eq!(reference.max_replay_stream_bytes, 256 * 1024);
    assert!(config.application.logging);
    assert_eq!(config.origin(), REFERENCE);
}

#[test]
fn the_yaml_and_toml_examples_load_and_agree() {
    let yaml = Config::from_file(YAML).unwrap();
    let toml = Config::from_file(TOML).unwrap();
    assert_eq!(yaml.application.name, "greeter-provider");
    assert_eq!(yaml.graceful_shutdown.timeout, Duration::from_secs(25));
    assert_eq!(
        yaml.graceful_shutdown.offline_request_window_timeout,
        Duration::from_millis(500)
    );
    assert_eq!(yaml.graceful_shutdown, toml.graceful_shutdown);
    assert_eq!(yaml.protocol, toml.protocol);
    assert_eq!(yaml.registries, toml.registries);
    assert_eq!(yaml.admin, toml.admin);
    assert_eq!(
        yaml.provider.services["helloworld.Greeter"].weight,
        toml.provider.services["helloworld.Greeter"].weight
    );
}

#[test]
fn a_bad_file_names_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "graceful_shutdown:\n  step_timeout: three seconds\n").unwrap();
    let error = Config::from_file(&path).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, ConfigError::Invalid { .. }), "{message}");
    assert!(message.contains("bad.yaml"), "{message}");
    assert!(
        message.contains("graceful_shutdown.step_timeout"),
        "{message}"
    );

    let missing = Config::from_file(dir.path().join("missing.yaml"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("missing.yaml"), "{missing}");
    let unknown_format = Config::from_file(dir.path().join("x.json"))
        .unwrap_err()
        .to_string();
    assert!(
        unknown_format.contains(".yaml, .yml or .toml"),
        "{unknown_format}"
    );
}

/// Issue 25, point 8: provider.toml spells the section dubbo-go's way (`[shutdown]`); an
/// override spelled ours merges with it instead of failing start-up ("duplicate field
/// `graceful_shutdown`"). The configuration check (`RPC_UPGRADE=check`) loads it and
/// starts nothing.
#[test]
fn the_toml_example_and_an_override_in_our_spelling_pass_the_configuration_check() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_greeter-provider"))
        .args(["--config", TOML])
        .env("RPC_GRACEFUL_SHUTDOWN__TIMEOUT", "20s")
        .env("RPC_UPGRADE", "check")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("configuration checked"), "{stderr}");
}

#[test]
fn a_bad_environment_override_names_the_variable() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_greeter-provider"))
        .args(["--config", YAML])
        .env("RPC_GRACEFUL_SHUTDOWN__TIMEOUT", "soon")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("environment variable RPC_GRACEFUL_SHUTDOWN__TIMEOUT"),
        "{stderr}"
    );
    assert!(stderr.contains("graceful_shutdown.timeout"), "{stderr}");
}

/// Issue 25, point 9: reference.yaml is "every key, with its default", and cannot drift
/// from the structs. Its convention (written at its top): a line shows the key's
/// default, unless its comment begins with `example` (then it and what is under it
/// show another value), or it is a commented-out key (`# key: value`), which is unset
/// by default. Checked both ways:
///
/// 1. every key of the file, its commented-out keys too, is one the configuration reads
///    and writes under that spelling (nothing the structs lack);
/// 2. every field of `Config` — the default configuration written out, walked as a tree,
///    and every field of each map entry the file shows (a reference, a service) — is in
///    the file;
/// 3. each line shows its real default, or is marked, and a marked line differs from
///    it; a commented-out key is one whose default is unset.
#[test]
fn the_reference_file_shows_every_key_of_the_structs_with_its_default() {
    let text = std::fs::read_to_string(REFERENCE).unwrap();
    let (uncommented, lines) = reference::key_lines(&text);
    let documents = yaml_rust2::YamlLoader::load_from_str(&uncommented)
        .unwrap_or_else(|error| panic!("reference.yaml, its keys uncommented: {error}"));
    let file = reference::json(&documents[0]);
    let written: Config = serde_json::from_value(file.clone()).unwrap_or_else(|error| {
        panic!("reference.yaml (its commented-out keys too) has what Config refuses: {error}")
    });
    let read = serde_json::to_value(&written).unwrap();
    let defaults = serde_json::to_value(Config::default()).unwrap();

    let mut problems = Vec::new();
    reference::unknown_keys(&[], &file, &read, &mut problems);
    reference::missing_keys(&mut Vec::new(), &defaults, &file, &mut problems);
    reference::wrong_values(&mut Vec::new(), &file, &read, &lines, &mut problems);
    assert!(
        problems.is_empty(),
        "reference.yaml and the configuration's structs disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// The pieces of the reference file's check.
mod reference {
    use std::collections::HashMap;

    use lossless_rpc::Config;
    use serde_json::{Map, Value as Json};
    use yaml_rust2::Yaml;

    /// How a line of the file shows its key.
    pub struct KeyLine {
        /// 1-based, for messages.
        pub number: usize,
        /// A commented-out key (`# key: value`): unset by default.
        pub commented: bool,
        /// Its comment begins with `example`: another value than the default.
        pub example: bool,
    }

    /// The file with its commented-out keys uncommented, and each key line by path.
    pub fn key_lines(text: &str) -> (String, HashMap<Vec<String>, KeyLine>) {
        let mut uncommented = String::new();
        let mut lines = HashMap::new();
        let mut open: Vec<(usize, String)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let (line, commented) = uncomment(line);
            uncommented.push_str(&line);
            uncommented.push('\n');
            let content = line.trim_start();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let indent = line.len() - content.len();
            let Some(colon) = content
                .find(": ")
                .or_else(|| content.strip_suffix(':').map(str::len))
            else {
                continue;
            };
            let comment = content.find(" #").map_or("", |at| &content[at + 2..]);
            while open.last().is_some_and(|(depth, _)| *depth >= indent) {
                open.pop();
            }
            open.push((indent, content[..colon].to_owned()));
            let path = open.iter().map(|(_, key)| key.clone()).collect();
            let line = KeyLine {
                number: index + 1,
                commented,
                example: comment.trim_start().starts_with("example"),
            };
            lines.insert(path, line);
        }
        (uncommented, lines)
    }

    /// `  # key: value` → (`  key: value`, true), for a lower-case key; any other line
    /// as it is.
    fn uncomment(line: &str) -> (String, bool) {
        let indent = line.len() - line.trim_start().len();
        if let Some(rest) = line[indent..].strip_prefix("# ") {
            let key = rest.trim_start();
            let name = key.split(':').next().unwrap_or_default();
            let after = &key[name.len()..];
            let is_key = name.starts_with(|c: char| c.is_ascii_lowercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && (after == ":" || after.starts_with(": "));
            if is_key {
                return (format!("{}{rest}", &line[..indent]), true);
            }
        }
        (line.to_owned(), false)
    }

    /// A YAML document as JSON, which `Config` deserializes from and serializes to.
    pub fn json(yaml: &Yaml) -> Json {
        match yaml {
            Yaml::Hash(hash) => Json::Object(
                hash.iter()
                    .map(|(key, value)| {
                        let key = match key {
                            Yaml::String(text) => text.clone(),
                            Yaml::Integer(number) => number.to_string(),
                            other => format!("{other:?}"),
                        };
                        (key, json(value))
                    })
                    .collect(),
            ),
            Yaml::Array(items) => items.iter().map(json).collect(),
            Yaml::String(text) => text.clone().into(),
            Yaml::Integer(number) => (*number).into(),
            Yaml::Real(text) => text.parse::<f64>().map_or(Json::Null, Json::from),
            Yaml::Boolean(flag) => (*flag).into(),
            _ => Json::Null,
        }
    }

    fn dotted(path: &[String]) -> String {
        path.join(".")
    }

    /// The node at `path` of `tree`.
    fn at<'a>(tree: &'a Json, path: &[String]) -> Option<&'a Json> {
        path.iter().try_fold(tree, |node, key| node.get(key))
    }

    /// The configuration read from a document holding only `leaf` at `path`.
    fn probe(path: &[String], leaf: Json) -> Result<Config, serde_json::Error> {
        let document = path.iter().rev().fold(leaf, |inner, key| {
            Json::Object(Map::from_iter([(key.clone(), inner)]))
        });
        serde_json::from_value(document)
    }

    /// Whether `path` holds a map keyed by name (registries, services, references,
    /// methods, metadata) rather than a section with fixed fields.
    fn is_map(path: &[String]) -> bool {
        let leaf = Json::Object(Map::from_iter([(
            "zz-probe".into(),
            Json::Object(Map::new()),
        )]));
        match probe(path, leaf) {
            Ok(_) => true,
            Err(error) => !error.to_string().contains("unknown field `zz-probe`"),
        }
    }

    /// The default at `path`: in the default configuration written out, or, inside an
    /// entry of a map, in that entry read empty and written out. `None` where an entry
    /// cannot be read empty (a registry needs its `url`).
    pub fn default_at(path: &[String]) -> Option<Json> {
        let mut node = serde_json::to_value(Config::default()).ok()?;
        for (depth, key) in path.iter().enumerate() {
            node = match node.get(key) {
                Some(child) => child.clone(),
                None => {
                    let entry = probe(&path[..=depth], Json::Object(Map::new())).ok()?;
                    at(&serde_json::to_value(entry).ok()?, &path[..=depth])?.clone()
                }
            };
        }
        Some(node)
    }

    /// 1. Keys of `file` that `read` (the configuration it makes, written out) lacks: not
    ///    keys of ours, or not spelled as ours. `admin.token` is never written out.
    pub fn unknown_keys(path: &[String], file: &Json, read: &Json, problems: &mut Vec<String>) {
        let Json::Object(keys) = file else { return };
        for (key, value) in keys {
            let path = [path, std::slice::from_ref(key)].concat();
            match read.get(key) {
                None if dotted(&path) == "admin.token" => {}
                None => problems.push(format!(
                    "{}: not a key the configuration writes (unknown, or not our spelling)",
                    dotted(&path)
                )),
                Some(read) => unknown_keys(&path, value, read, problems),
            }
        }
    }

    /// 2. Fields of `expected` (the defaults at `path`) that `file` lacks. At a map, the
    ///    file's entries stand for the default ones, and each must show every field of
    ///    an entry.
    pub fn missing_keys(
        path: &mut Vec<String>,
        expected: &Json,
        file: &Json,
        problems: &mut Vec<String>,
    ) {
        let Json::Object(fields) = expected else {
            return;
        };
        if is_map(path) {
            for (entry, given) in file.as_object().into_iter().flatten() {
                path.push(entry.clone());
                if let Some(fields) = default_at(path) {
                    missing_keys(path, &fields, given, problems);
                }
                path.pop();
            }
            return;
        }
        for (key, default) in fields {
            path.push(key.clone());
            match file.get(key) {
                None => problems.push(format!(
                    "{}: missing (its default is {default})",
                    dotted(path)
                )),
                Some(given) => missing_keys(path, default, given, problems),
            }
            path.pop();
        }
    }

    /// 3. Lines that do not show their default and are not marked, marked lines that
    ///    do, and commented-out keys whose default is set.
    pub fn wrong_values(
        path: &mut Vec<String>,
        file: &Json,
        read: &Json,
        lines: &HashMap<Vec<String>, KeyLine>,
        problems: &mut Vec<String>,
    ) {
        let Json::Object(keys) = file else { return };
        for (key, given) in keys {
            path.push(key.clone());
            let line = lines.get(path.as_slice());
            let shown = read.get(key);
            let default = default_at(path);
            let place = match line {
                Some(line) => format!("{} (line {})", dotted(path), line.number),
                None => dotted(path),
            };
            match (line, default.as_ref()) {
                (Some(line), Some(default)) if line.commented && !default.is_null() => problems
                    .push(format!(
                        "{place}: commented out, but its default is {default}: write it"
                    )),
                (Some(line), _) if line.commented => {}
                (Some(line), default) if line.example && shown.is_some() && shown == default => {
                    problems.push(format!(
                        "{place}: marked `example` but shows the default, {}",
                        shown.map(Json::to_string).unwrap_or_default()
                    ));
                }
                (Some(line), _) if line.example => {}
                _ if given.is_object() => {
                    wrong_values(path, given, shown.unwrap_or(&Json::Null), lines, problems);
                }
                (_, None) => problems.push(format!(
                    "{place}: no default to compare with: mark the line `# example`"
                )),
                (_, Some(default)) if shown != Some(default) => problems.push(format!(
                    "{place}: shows {} but its default is {default}: write the default, or \
                     mark the line `# example (default ...)`",
                    shown.map(Json::to_string).unwrap_or_default()
                )),
                _ => {}
            }
            path.pop();
        }
    }
}
