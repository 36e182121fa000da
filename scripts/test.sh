#!/usr/bin/env bash
# The test command of the README: runs every test of the workspace against real registry
# servers, on a fresh Debian/Ubuntu machine with the Rust toolchain.
#
#   bash scripts/test.sh [`cargo test` arguments, instead of --workspace]
#
# 1. installs what the tests need and is missing: etcd, ZooKeeper and Chromium (Debian
#    packages; Chromium renders the admin status page in tests/tests/admin_page.rs),
#    rnacos (a Nacos-compatible server, `cargo install`, 15-25 min the first time), and a
#    Python venv in .venv with grpcio for the interop test (grpcio-reflection for the
#    reflection test), Apache Dubbo's Python SDK and kazoo for the Dubbo fleet test,
#    OpenTelemetry's SDK and gRPC instrumentation for the trace chain test, prometheus-client for the
#    metrics parser test, and kubernetes-validate for
#    the deploy/kubernetes manifests;
# 2. starts etcd, ZooKeeper and rnacos on free loopback ports (scripts/registries.sh) and
#    exports RPC_TEST_ETCD_URL, RPC_TEST_ZOOKEEPER_URL, RPC_TEST_NACOS_URL,
#    RPC_TEST_PYTHON, RPC_TEST_KUBERNETES_VALIDATE and RPC_TEST_CHROMIUM, which the tests
#    read (RPC_TEST_REQUIRE_REGISTRIES=1, RPC_TEST_REQUIRE_BROWSER=1, RPC_TEST_REQUIRE_NETNS=1,
#    RPC_TEST_REQUIRE_PYTHON=1 and RPC_TEST_REQUIRE_KUBERNETES_VALIDATE=1 make a missing
#    server, browser, Python or validator a failure rather than a skip);
# 3. runs `cargo test --workspace`, then lossless-rpc's tests with its `otlp` feature, then
#    scripts/out_of_tree.sh (the getting-started project built outside the repository,
#    with a target directory of its own: 5-10 min, and run against the etcd started
#    here), then the fleet simulator's 10 000-instance roll and its 1 000 seeded
#    schedules (scripts/sim.sh: a release build, 2-3 min, then about 3 min and 2 min),
#    then stops exactly the servers it started.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "test.sh: $*" >&2; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

install_packages() {
    local missing=()
    command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
    [[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
    command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
    command -v nc >/dev/null 2>&1 || missing+=(netcat-openbsd)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    # the lab of network namespaces (tests/tests/lab_faults.rs): ip netns, nftables
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    command -v nft >/dev/null 2>&1 || missing+=(nftables)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    if ((${#missing[@]})); then
        say "installing ${missing[*]}"
        as_root apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q "${missing[@]}" >&2
    fi
}

install_rnacos() {
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    if ! command -v rnacos >/dev/null 2>&1; then
        say "installing rnacos (cargo install rnacos --locked; this takes a while once)"
        cargo install rnacos --locked >&2
    fi
}

install_python() {
    local python=.venv/bin/python
    if ! [[ -x $python ]] || ! $python -c 'import grpc, grpc_tools, grpc_health, grpc_reflection, prometheus_client, dubbo, kazoo, opentelemetry.sdk, opentelemetry.instrumentation.grpc, opentelemetry.semconv.schemas' >/dev/null 2>&1; then
        say "creating .venv with grpcio, prometheus-client and Apache Dubbo's Python SDK"
        python3 -m venv .venv
        # apache-dubbo: a real Dubbo peer (Triple, ZooKeeper through kazoo) for tests/tests/dubbo_fleet.rs;
        # OpenTelemetry's SDK and gRPC instrumentation: both ends of rpc/tests/otel_chain.rs;
        # its semantic-conventions registry (v1.44.0) checks our names in rpc/tests/semconv.rs
        $python -m pip install -q grpcio==1.85.3 grpcio-tools==1.85.1 grpcio-health-checking==1.85.1 \
            grpcio-reflection==1.85.1 prometheus-client==0.21.1 apache-dubbo==3.0.0b1 kazoo==2.11.0 \
            opentelemetry-sdk==1.45.2 opentelemetry-instrumentation-grpc==0.66b2 \
            opentelemetry-semantic-conventions==0.66b2 >&2
    fi
    export RPC_TEST_PYTHON="$PWD/$python"
    # kubernetes-validate ships the Kubernetes API schemas (1.25 to 1.37 in this
    # version), so the manifests in deploy/kubernetes are validated offline.
    local validate=.venv/bin/kubernetes-validate
    if ! [[ -x $validate ]] || [[ $($validate --version 2>/dev/null) != *1.37.0* ]]; then
        say "installing kubernetes-validate into .venv"
        $python -m pip install -q kubernetes-validate==1.37.0 >&2
    fi
    export RPC_TEST_KUBERNETES_VALIDATE="$PWD/$validate"
}

install_packages
install_rnacos
install_python
# The admin page's browser test must run here, not skip.
export RPC_TEST_CHROMIUM="$(command -v chromium)"
export RPC_TEST_REQUIRE_BROWSER=1
# Nor may the Python and Kubernetes-schema tests: install_python set both variables.
export RPC_TEST_REQUIRE_PYTHON=1
export RPC_TEST_REQUIRE_KUBERNETES_VALIDATE=1
# The fault tests across hosts need root (network namespaces) and nftables: CI runs as
# root, so a lab that cannot be built there is a failure, not a skip.
export RPC_TEST_REQUIRE_NETNS=1

# Servers of this run live in a state directory of their own, so two runs (or another
# engineer's servers) never stop each other's. A failed start ends the script here.
export RPC_REGISTRY_STATE="${RPC_REGISTRY_STATE:-$(mktemp -d /tmp/rpc-registries.XXXXXX)}"
exports=$(scripts/registries.sh start)
trap 'scripts/registries.sh stop' EXIT
eval "$exports"
# Every registry test must run here: a missing server is a failure, not a skip.
export RPC_TEST_REQUIRE_REGISTRIES=1

if (($#)); then
    cargo test --no-fail-fast "$@"
else
    status=0
    cargo test --workspace --no-fail-fast || status=$?
    # The OTLP export test needs lossless-rpc's `otlp` feature, which the workspace build leaves
    # off (it is off by default for users too).
    cargo test -p lossless-rpc --features otlp --no-fail-fast || status=$?
    # A project outside this repository that depends on `lossless-rpc` builds with nothing
    # installed (no protoc) and runs against etcd (issue 25).
    bash scripts/out_of_tree.sh || status=$?
    # The fleet simulator: a roll of 10 000 providers behind 1 000 consumers, then
    # 1 000 seeded schedules of deploys and faults (release build).
    bash scripts/sim.sh 1000 || status=$?
    exit "$status"
fi
