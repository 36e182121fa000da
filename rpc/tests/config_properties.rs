//! Issue 12, rule 6: bad configuration never panics. Generated YAML and TOML documents
//! and `RPC_*` environment overrides are fed to the configuration loader
//! (`Config::from_str_with_env`, the code `Config::from_file` runs), at least 10 000
//! documents in all:
//!
//! 1. **text that is barely configuration**: arbitrary text, and valid documents with
//!    bytes cut, repeated or replaced: nothing panics; a parse error names the file,
//!    an invalid key names a key and where its value came from;
//! 2. **random documents**: the default configuration's own tree (every key the code
//!    knows) with values replaced by random scalars, sequences and maps and random keys
//!    added, plus random overrides: the same;
//! 3. **one fault in a good document**: a wrong type, an out-of-range value or an unknown
//!    key at one known place, in the file or in an environment variable: the error names
//!    exactly that key, and the file or the variable.
//!
//! Runs in a few seconds: no network, no file system, one loader call per document.

use lossless_rpc::{Config, ConfigError, ConfigFormat};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value};

const FILE: &str = "generated.yaml";
/// Cases of each of the three kinds; each case loads one document (a random one TOML
/// cannot hold, should there be one, is skipped).
const CASES: [u32; 3] = [4_000, 5_000, 2_500];

/// Where a rejection says the bad value came from.
fn origin_of(error: &ConfigError) -> Option<(&str, &str)> {
    match error {
        ConfigError::Invalid { origin, key, .. } => Some((origin, key)),
        _ => None,
    }
}

/// Loads `text` with `vars`, and checks what every outcome must satisfy: a rejection
/// names the file (or the variable that set the value) and, for a bad value, a key.
fn load(
    text: &str,
    format: ConfigFormat,
    vars: &[(String, String)],
) -> Result<Result<Config, ConfigError>, TestCaseError> {
    let result = Config::from_str_with_env(text, format, FILE, vars.iter().cloned());
    if let Err(error) = &result {
        let shown = error.to_string();
        match error {
            ConfigError::Parse { file, .. } => {
                prop_assert_eq!(file.to_str(), Some(FILE), "{}", shown);
            }
            ConfigError::Invalid { origin, key, .. } => {
                prop_assert!(!key.is_empty(), "no key: {}", shown);
                let from_variable = origin
                    .strip_prefix("environment variable ")
                    .is_some_and(|variable| vars.iter().any(|(name, _)| name == variable));
                prop_assert!(origin == FILE || from_variable, "origin: {}", shown);
                prop_assert!(shown.contains(origin.as_str()), "{}", shown);
                prop_assert!(shown.contains(key.as_str()), "{}", shown);
            }
            other => prop_assert!(false, "an error of another kind: {}", other),
        }
    }
    Ok(result)
}

/// The default configuration as a tree (every key the code knows), without the unset
/// optional values.
fn known_tree() -> Value {
    fn without_nulls(value: Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k, without_nulls(v)))
                    .collect(),
            ),
            other => other,
        }
    }
    without_nulls(serde_json::to_value(Config::default()).expect("the defaults serialize"))
}

/// Every leaf of `tree` with its dotted path.
fn leaves(tree: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match tree {
        Value::Object(map) => {
            for (key, value) in map {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                leaves(value, &path, out);
            }
        }
        leaf => out.push((path.to_owned(), leaf.clone())),
    }
}

fn set(tree: &mut Value, path: &str, value: Value) {
    let mut node = tree;
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        let Value::Object(map) = node else { return };
        if segments.peek().is_none() {
            map.insert(segment.to_owned(), value);
            return;
        }
        node = map
            .entry(segment.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// The document as text: JSON is YAML's flow style, TOML through the `toml` crate
/// (without the nulls TOML has no word for; `None` if TOML still cannot hold it).
fn render(tree: &Value, format: ConfigFormat) -> Option<String> {
    fn without_nulls(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), without_nulls(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .filter(|v| !v.is_null())
                    .map(without_nulls)
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    match format {
        ConfigFormat::Toml => toml::to_string(&without_nulls(tree)).ok(),
        _ => serde_json::to_string_pretty(tree).ok(),
    }
}

/// Values that reach the loader's corners: durations, sizes, URLs, hosts, numbers at
/// the edges of their types, and any short text.
fn scalar() -> impl Strategy<Value = Value> {
    let words = [
        "3s",
        "500ms",
        "0s",
        "-3s",
        "1h 2m",
        "soon",
        "1e400s",
        "18446744073709551616s",
        "4MiB",
        "0",
        "-1",
        "lots",
        "16 EiB",
        "memory://",
        "etcd://127.0.0.1:2379",
        "foo://x",
        "nacos://h?namespace=x&bogus=1",
        "zookeeper://",
        "static://a:1,b:2",
        "127.0.0.1",
        "0.0.0.0",
        "::1",
        "not-a-host",
        "tri",
        "grpc",
        "failover",
        "p2c",
        "random",
        "true",
        "",
    ];
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![0i64, -1, 1, 65_535, 65_536, 4_294_967_295, i64::MIN])
            .prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop::sample::select(words.to_vec()).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ]
}

/// Any value: scalars, and sequences and maps of them, a few levels deep.
fn node() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_.-]{1,8}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn format() -> impl Strategy<Value = ConfigFormat> {
    prop_oneof![Just(ConfigFormat::Yaml), Just(ConfigFormat::Toml)]
}

/// `RPC_<SECTION>__<KEY>` overrides of known keys (some with random values), and a few
/// variables the loader must ignore.
fn overrides(known: Vec<String>) -> impl Strategy<Value = Vec<(String, String)>> {
    let variable = |path: &str| format!("RPC_{}", path.to_uppercase().replace('.', "__"));
    let known: Vec<String> = known.iter().map(|path| variable(path)).collect();
    let pair = prop_oneof![
        (prop::sample::select(known), scalar()).prop_map(|(name, value)| {
            let value = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            (name, value)
        }),
        ("RPC_[A-Z_]{0,12}", "\\PC{0,8}"),
    ];
    prop::collection::vec(pair, 0..3)
}

/// A rendering of a good document with some bytes cut, repeated or replaced.
fn mutated(text: String) -> impl Strategy<Value = String> {
    let len = text.len().max(1);
    prop::collection::vec((0..len, 0..len, any::<u8>()), 1..4).prop_map(move |edits| {
        let mut bytes = text.clone().into_bytes();
        for (at, to, byte) in edits {
            let (at, to) = (at.min(bytes.len()), to.min(bytes.len()));
            match byte % 3 {
                0 => drop(bytes.drain(at.min(to)..at.max(to))),
                1 => bytes.insert(at, byte),
                _ => {
                    let copy = bytes[at.min(to)..at.max(to)].to_vec();
                    bytes.splice(at..at, copy);
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// A known place where a value is wrong for a reason the loader must name.
#[derive(Clone, Debug)]
enum Fault {
    /// A value of the wrong type, or out of range, at a known key.
    Value(String, Value),
    /// A key no section has.
    UnknownKey(String),
}

/// The faults a leaf can take, by the type of its default value.
fn faults_for(path: &str, default: &Value) -> Vec<Value> {
    let always = [Value::from(vec![1, 2])];
    let mut faults: Vec<Value> = always.to_vec();
    match default {
        Value::Bool(_) => faults.push(Value::from("maybe")),
        Value::Number(_) => faults.extend([Value::from("abc"), Value::from(-1.5)]),
        Value::String(text) if humantime::parse_duration(text).is_ok() => {
            faults.extend([Value::from("soon"), Value::from("-3s")]);
        }
        _ => {}
    }
    // Bounds the loader checks beyond types.
    match path {
        "protocol.port" | "admin.port" => faults.push(Value::from(70_000)),
        "protocol.host" => faults.push(Value::from("not-a-host")),
        "protocol.name" => faults.push(Value::from("http")),
        "protocol.max_concurrent_streams" => faults.push(Value::from(0)),
        "protocol.max_header_list_size" => faults.push(Value::from("8 GiB")),
        "graceful_shutdown.timeout" | "graceful_shutdown.step_timeout" => {
            faults.push(Value::from("0s"));
        }
        "consumer.blacklist.jitter" => faults.push(Value::from(7.5)),
        "registries.default.url" => faults.push(Value::from("redis://x")),
        _ => {}
    }
    faults
}

/// Sections whose fields are fixed (a key they do not know is an error), unlike the
/// maps keyed by name (`registries`, `provider.services`, ...).
const STRUCT_SECTIONS: [&str; 11] = [
    "application",
    "protocol",
    "consumer",
    "consumer.blacklist",
    "consumer.directory",
    "graceful_shutdown",
    "admin",
    "metrics",
    "tracing",
    "upgrade",
    "provider",
];

#[test]
fn ten_thousand_generated_configurations_never_panic_and_name_key_and_file() {
    let tree = known_tree();
    let mut known = Vec::new();
    leaves(&tree, "", &mut known);
    let known_paths: Vec<String> = known.iter().map(|(path, _)| path.clone()).collect();
    let runner = |cases| {
        TestRunner::new(RunnerConfig {
            cases,
            failure_persistence: None,
            ..RunnerConfig::default()
        })
    };
    let documents = std::cell::Cell::new(0usize);

    // The defaults, written out, load back: the base of the faults below is good.
    for format in [ConfigFormat::Yaml, ConfigFormat::Toml] {
        let text = render(&tree, format).expect("renders");
        let loaded = Config::from_str_with_env(&text, format, FILE, []);
        assert!(loaded.is_ok(), "{format:?}: {loaded:?}\n{text}");
    }

    // 1. Text that is barely configuration.
    let good_yaml = render(&tree, ConfigFormat::Yaml).expect("renders");
    let good_toml = render(&tree, ConfigFormat::Toml).expect("renders");
    let text = prop_oneof![
        "\\PC{0,200}",
        "[a-z_:{}\\[\\]=\" \\n.0-9-]{0,120}",
        mutated(good_yaml),
        mutated(good_toml),
    ];
    runner(CASES[0])
        .run(&(text, format()), |(text, format)| {
            documents.set(documents.get() + 1);
            load(&text, format, &[]).map(drop)
        })
        .unwrap();

    // 2. Random documents over the known keys, with random overrides.
    let placed = prop::collection::vec(
        (
            prop_oneof![
                prop::sample::select(known_paths.clone()),
                "[a-z_]{1,8}(\\.[a-z_]{1,8}){0,2}",
            ],
            node(),
        ),
        0..8,
    );
    let base = tree.clone();
    runner(CASES[1])
        .run(
            &(placed, format(), overrides(known_paths.clone())),
            |(placed, format, vars)| {
                let mut document = base.clone();
                for (path, value) in placed {
                    set(&mut document, &path, value);
                }
                if let Some(text) = render(&document, format) {
                    documents.set(documents.get() + 1);
                    load(&text, format, &vars)?.ok();
                }
                Ok(())
            },
        )
        .unwrap();

    // 3. One fault at a known place, in the file or in the environment.
    let mut faults: Vec<Fault> = known
        .iter()
        .flat_map(|(path, default)| {
            faults_for(path, default)
                .into_iter()
                .map(|value| Fault::Value(path.clone(), value))
        })
        .collect();
    faults.extend(
        STRUCT_SECTIONS
            .iter()
            .map(|section| Fault::UnknownKey(format!("{section}.colour"))),
    );
    faults.push(Fault::UnknownKey("colour".to_owned()));
    let base = tree.clone();
    runner(CASES[2])
        .run(
            &(prop::sample::select(faults), format(), any::<bool>()),
            |(fault, format, in_environment)| {
                let mut document = base.clone();
                let mut vars = Vec::new();
                let key = match &fault {
                    Fault::UnknownKey(path) => {
                        set(&mut document, path, Value::from(1));
                        path.clone()
                    }
                    // The environment holds text: a fault it can carry goes there.
                    Fault::Value(path, Value::String(text)) if in_environment => {
                        let variable = format!("RPC_{}", path.to_uppercase().replace('.', "__"));
                        vars.push((variable, text.clone()));
                        path.clone()
                    }
                    Fault::Value(path, value) => {
                        set(&mut document, path, value.clone());
                        path.clone()
                    }
                };
                let Some(text) = render(&document, format) else {
                    return Ok(());
                };
                documents.set(documents.get() + 1);
                let result = load(&text, format, &vars)?;
                let error = match result {
                    Ok(_) => return Err(TestCaseError::fail(format!("{fault:?} was accepted"))),
                    Err(error) => error,
                };
                let Some((origin, named)) = origin_of(&error) else {
                    return Err(TestCaseError::fail(format!("{fault:?}: {error}")));
                };
                prop_assert_eq!(named, key.as_str(), "{:?}: {}", fault, error);
                match vars.first() {
                    Some((variable, _)) => prop_assert_eq!(
                        origin,
                        format!("environment variable {variable}"),
                        "{}",
                        error
                    ),
                    None => prop_assert_eq!(origin, FILE, "{}", error),
                }
                Ok(())
            },
        )
        .unwrap();

    println!("{} documents loaded, none panicked", documents.get());
    assert!(documents.get() >= 10_000, "{}", documents.get());
}
