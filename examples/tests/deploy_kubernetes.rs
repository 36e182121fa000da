//! `deploy/kubernetes/` fits the provider it deploys: the grace period is derived from
//! the shutdown timeout, the rollout never lowers capacity, the probes reach the admin
//! endpoint, ports and paths agree with the mounted configuration — and the manifests
//! pass the Kubernetes API schemas, checked offline by `kubernetes-validate` (PyPI),
//! which ships them.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lossless_rpc::Config;
use rpc_testkit::external::Need;
use yaml_rust2::{Yaml, YamlLoader};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/kubernetes");
const MANIFESTS: [&str; 4] = [
    "configmap.yaml",
    "deployment.yaml",
    "poddisruptionbudget.yaml",
    "service.yaml",
];
/// The image the Deployment runs, built from this repository.
const DOCKERFILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/docker/Dockerfile");
/// The oldest Kubernetes the manifests are for (the preStop `sleep` action is on by
/// default from 1.30), and the newest the pinned kubernetes-validate knows.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.30.0", "1.37.0"];
/// The admin endpoint's port (Dubbo's QoS port), as the admin section defaults it.
const ADMIN_PORT: i64 = 22222;

/// The one resource in `deploy/kubernetes/<name>`.
fn manifest(name: &str) -> Yaml {
    let path = Path::new(DIR).join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut documents = YamlLoader::load_from_str(&text).unwrap();
    assert_eq!(
        documents.len(),
        1,
        "{}: one resource per file",
        path.display()
    );
    documents.remove(0)
}

/// The provider configuration the ConfigMap carries, loaded as greeter-provider loads
/// its file.
fn provider_config() -> Config {
    let configmap = manifest("configmap.yaml");
    let text = configmap["data"]["provider.yaml"]
        .as_str()
        .expect("the ConfigMap carries provider.yaml");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("provider.yaml");
    std::fs::write(&path, text).unwrap();
    Config::from_file(&path).unwrap_or_else(|error| panic!("configmap.yaml: {error}"))
}

fn pod_spec(deployment: &Yaml) -> &Yaml {
    &deployment["spec"]["template"]["spec"]
}

fn container(deployment: &Yaml) -> &Yaml {
    let containers = pod_spec(deployment)["containers"].as_vec().unwrap();
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// The entry of `list` whose `name` is `name`.
fn named<'a>(list: &'a Yaml, name: &str) -> &'a Yaml {
    list.as_vec()
        .and_then(|items| {
            items
                .iter()
                .find(|item| item["name"].as_str() == Some(name))
        })
        .unwrap_or_else(|| panic!("no entry named {name}"))
}

fn seconds(value: &Yaml) -> u64 {
    let seconds = value.as_i64().expect("a number of seconds");
    u64::try_from(seconds).expect("not negative")
}

#[test]
fn the_grace_period_is_derived_from_the_shutdown_timeout() {
    let deployment = manifest("deployment.yaml");
    let config = provider_config();
    let grace = seconds(&pod_spec(&deployment)["terminationGracePeriodSeconds"]);
    let pre_stop = seconds(&container(&deployment)["lifecycle"]["preStop"]["sleep"]["seconds"]);
    let timeout = config.graceful_shutdown.timeout;
    let margin = lossless_rpc::systemd::STOP_MARGIN;
    // The grace period runs from the start of preStop; SIGTERM comes after it.
    assert!(
        Duration::from_secs(grace) >= Duration::from_secs(pre_stop) + timeout + margin,
        "terminationGracePeriodSeconds {grace} < preStop {pre_stop} s + \
         graceful_shutdown.timeout {timeout:?} + margin {margin:?}"
    );
    // The figures docs/operations.md and the manifests' comments quote.
    assert_eq!(
        (pre_stop, timeout.as_secs(), margin.as_secs(), grace),
        (5, 25, 5, 35)
    );
    // While preStop sleeps, every node's proxy drops the pod from the Service.
    assert!(pre_stop >= 1, "preStop covers endpoint propagation");
}

/// A container ends with its first process: the hot upgrade's new process would die with
/// the old one, so the pod's configuration turns the upgrade off and a stray trigger is
/// refused with the reason.
#[test]
fn the_hot_upgrade_is_off_in_the_pod() {
    let config = provider_config();
    assert!(!config.upgrade.enabled, "upgrade.enabled in configmap.yaml");
}

#[test]
fn a_rollout_never_lowers_capacity() {
    let deployment = manifest("deployment.yaml");
    let strategy = &deployment["spec"]["strategy"];
    assert_eq!(strategy["type"].as_str(), Some("RollingUpdate"));
    let rolling = &strategy["rollingUpdate"];
    assert_eq!(rolling["maxUnavailable"].as_i64(), Some(0));
    let surge = &rolling["maxSurge"];
    assert!(
        surge.as_i64() == Some(1) || surge.as_str() == Some("25%"),
        "maxSurge {surge:?}"
    );
}

#[test]
fn the_probes_reach_the_admin_endpoint() {
    let deployment = manifest("deployment.yaml");
    let container = container(&deployment);
    for (probe, path) in [
        ("startupProbe", "/startup"),
        ("readinessProbe", "/ready"),
        ("livenessProbe", "/live"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{probe}");
        assert_eq!(get["port"].as_str(), Some("admin"), "{probe}");
    }
    let admin = named(&container["ports"], "admin");
    assert_eq!(admin["containerPort"].as_i64(), Some(ADMIN_PORT));
    // The kubelet probes the pod IP: the admin endpoint must listen beyond loopback,
    // which requires its token.
    let env = &container["env"];
    assert_eq!(
        named(env, "RPC_ADMIN__HOST")["value"].as_str(),
        Some("0.0.0.0")
    );
    let port = ADMIN_PORT.to_string();
    assert_eq!(
        named(env, "RPC_ADMIN__PORT")["value"].as_str(),
        Some(port.as_str())
    );
    let token = &named(env, "RPC_ADMIN__TOKEN")["valueFrom"]["secretKeyRef"];
    assert!(
        token["name"].as_str().is_some(),
        "the token comes from a Secret"
    );
}

#[test]
fn ports_and_the_configuration_agree() {
    let deployment = manifest("deployment.yaml");
    let service = manifest("service.yaml");
    let configmap = manifest("configmap.yaml");
    let config = provider_config();
    let container = container(&deployment);

    let grpc = named(&container["ports"], "grpc");
    assert_eq!(
        grpc["containerPort"].as_i64(),
        Some(i64::from(config.protocol.port))
    );
    assert_eq!(config.protocol.host, "0.0.0.0", "the pod serves on its IP");
    let advertise = &named(&container["env"], "RPC_PROTOCOL__ADVERTISE_HOST")["valueFrom"];
    assert_eq!(
        advertise["fieldRef"]["fieldPath"].as_str(),
        Some("status.podIP"),
        "consumers dial the pod IP"
    );
    let service_port = named(&service["spec"]["ports"], "grpc");
    assert_eq!(service_port["targetPort"].as_str(), Some("grpc"));
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );

    // The configuration is mounted where the command reads it.
    let command: Vec<&str> = container["command"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    let at = command.iter().position(|a| *a == "--config").unwrap();
    let file = Path::new(command[at + 1]);
    let mount = named(&container["volumeMounts"], "config");
    assert_eq!(
        file.parent().and_then(Path::to_str),
        mount["mountPath"].as_str()
    );
    let volume = named(&pod_spec(&deployment)["volumes"], "config");
    assert_eq!(
        volume["configMap"]["name"], configmap["metadata"]["name"],
        "the volume is the ConfigMap"
    );
    let key = file.file_name().and_then(|f| f.to_str()).unwrap();
    assert!(
        !configmap["data"][key].is_badvalue(),
        "the ConfigMap has {key}"
    );
}

#[test]
fn an_eviction_takes_one_pod_at_a_time() {
    let deployment = manifest("deployment.yaml");
    let budget = manifest("poddisruptionbudget.yaml");
    assert_eq!(budget["kind"].as_str(), Some("PodDisruptionBudget"));
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"],
        "the budget covers the Deployment's pods"
    );
    let max_unavailable = budget["spec"]["maxUnavailable"].as_i64().expect("a number");
    let replicas = deployment["spec"]["replicas"].as_i64().expect("a number");
    // As in a rollout (maxSurge 1, maxUnavailable 0): one pod leaves at a time, and
    // the others serve what it drains.
    assert_eq!(max_unavailable, 1);
    assert!(replicas > max_unavailable, "{replicas} replicas");
}

#[test]
fn prometheus_scrapes_the_admin_endpoint() {
    let deployment = manifest("deployment.yaml");
    let service = manifest("service.yaml");
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"].as_str(), Some("true"));
    let port = ADMIN_PORT.to_string();
    assert_eq!(
        annotations["prometheus.io/port"].as_str(),
        Some(port.as_str())
    );
    assert_eq!(annotations["prometheus.io/path"].as_str(), Some("/metrics"));
    let metrics = named(&service["spec"]["ports"], "metrics");
    assert_eq!(metrics["targetPort"].as_str(), Some("admin"));
    assert_eq!(metrics["port"].as_i64(), Some(ADMIN_PORT));
    // RUST_LOG would replace the default filter (lossless-rpc at info, the rest at warn).
    let env = container(&deployment)["env"].as_vec().unwrap();
    assert!(
        env.iter()
            .all(|var| var["name"].as_str() != Some("RUST_LOG")),
        "the pod keeps the default log filter"
    );
}

#[test]
fn the_image_builds_what_the_pod_runs() {
    let deployment = manifest("deployment.yaml");
    let dockerfile = std::fs::read_to_string(DOCKERFILE).unwrap();
    let container = container(&deployment);
    let binary = container["command"][0].as_str().expect("a command");
    let name = Path::new(binary)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap();
    let build = dockerfile
        .lines()
        .find(|line| line.starts_with("RUN cargo build"))
        .expect("the Dockerfile builds with cargo");
    assert!(
        build.contains("--release") && build.contains(&format!("--bin {name}")),
        "{build}"
    );
    assert!(
        dockerfile.contains(&format!(
            "COPY --from=build /src/target/release/{name} {binary}"
        )),
        "the binary lands where the command runs it"
    );
    let user = pod_spec(&deployment)["securityContext"]["runAsUser"]
        .as_i64()
        .unwrap();
    assert!(
        dockerfile.contains(&format!("USER {user}:{user}")),
        "the image's user is the pod's runAsUser ({user})"
    );
    // The binary is one the workspace builds (src/bin/<name>.rs of this crate).
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("src/bin/{name}.rs"));
    assert!(source.exists(), "{} builds the binary", source.display());
}

/// Needs `RPC_TEST_KUBERNETES_VALIDATE`: the `kubernetes-validate` command, which
/// `scripts/test.sh` installs (pinned) into `.venv` and sets, with
/// `RPC_TEST_REQUIRE_KUBERNETES_VALIDATE=1`. Without it, and not required, the test says
/// it was skipped and why.
#[test]
fn the_manifests_pass_the_kubernetes_schemas() {
    let Some(validate) = Need::KubernetesValidate.get("the_manifests_pass_the_kubernetes_schemas")
    else {
        return;
    };
    for version in KUBERNETES_VERSIONS {
        // --strict: a misspelt or misplaced field is an error, not ignored.
        let output = Command::new(&validate)
            .args(["--strict", "--kubernetes-version", version])
            .args(MANIFESTS.map(|name| Path::new(DIR).join(name)))
            .output()
            .expect("kubernetes-validate runs");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        println!("Kubernetes {version}:\n{report}");
        assert!(output.status.success(), "Kubernetes {version}: {report}");
        assert_eq!(
            report.matches("passed").count(),
            MANIFESTS.len(),
            "{report}"
        );
    }
}
