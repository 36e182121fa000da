#!/usr/bin/env bash
# Starts and stops the registry servers the conformance tests and benchmarks run against:
# etcd, ZooKeeper and a Nacos-compatible server (rnacos), each on free loopback ports.
#
#   eval "$(scripts/registries.sh start)"   # start all three, export RPC_TEST_*_URL
#   scripts/registries.sh env               # print the export lines again
#   scripts/registries.sh stop              # stop exactly the processes `start` started
#
# `start` prints only `export ...` lines on stdout (so it can be eval'ed) and everything
# else on stderr. Pids, data and logs live in ${RPC_REGISTRY_STATE:-/tmp/rpc-registries};
# `stop` removes that directory. Nothing is installed: a missing binary is an error that
# names the Debian package (etcd, etcd-client, zookeeper, default-jre-headless) or the
# cargo command (rnacos) to install it with.
#
# Environment: RPC_REGISTRY_STATE (state dir), RPC_REGISTRY_READY_TIMEOUT (seconds to wait
# for each server, default 30), RNACOS (path of the rnacos binary), ZOOKEEPER_CLASSPATH.
set -euo pipefail

STATE="${RPC_REGISTRY_STATE:-/tmp/rpc-registries}"
READY_TIMEOUT="${RPC_REGISTRY_READY_TIMEOUT:-30}"
ZOOKEEPER_CLASSPATH="${ZOOKEEPER_CLASSPATH:-/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar}"

log() { echo "registries: $*" >&2; }
die() { log "error: $*"; exit 1; }

# True when something accepts connections on 127.0.0.1:$1.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port nobody listens on, from a random start in 20000..59999 (ports are bound by the
# servers moments later; `start` fails clearly in the rare case another process wins).
free_port() {
    local port tries=0
    while ((tries < 200)); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        tries=$((tries + 1))
        if ! listening "$port" && ! listening "$((port + 1000))"; then
            echo "$port"
            return 0
        fi
    done
    die "no free loopback port found"
}

need() { # need BINARY HOW-TO-INSTALL
    command -v "$1" >/dev/null 2>&1 || die "\`$1\` not found: $2"
}

find_rnacos() {
    if [[ -n "${RNACOS:-}" ]]; then
        [[ -x "$RNACOS" ]] || die "RNACOS=$RNACOS is not an executable"
        echo "$RNACOS"
    elif command -v rnacos >/dev/null 2>&1; then
        command -v rnacos
    elif [[ -x "${CARGO_HOME:-$HOME/.cargo}/bin/rnacos" ]]; then
        echo "${CARGO_HOME:-$HOME/.cargo}/bin/rnacos"
    else
        die "\`rnacos\` (a Nacos-compatible server) not found on PATH nor in ${CARGO_HOME:-$HOME/.cargo}/bin: install it with \`cargo install rnacos --locked\` or set RNACOS"
    fi
}

# wait_until NAME PID COMMAND...: runs COMMAND every 100 ms until it succeeds, the process
# dies, or READY_TIMEOUT passes.
wait_until() {
    local name=$1 pid=$2
    shift 2
    local deadline=$((SECONDS + READY_TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "$name exited during start-up; last lines of $STATE/$name.log:"
            tail -n 20 "$STATE/$name.log" >&2 || true
            return 1
        fi
        if ((SECONDS >= deadline)); then
            log "$name did not become ready within ${READY_TIMEOUT}s; last lines of $STATE/$name.log:"
            tail -n 20 "$STATE/$name.log" >&2 || true
            return 1
        fi
        sleep 0.1
    done
}

# spawn NAME COMMAND...: starts COMMAND in its own session, output to NAME.log, pid to
# NAME.pid (the pid is that of COMMAND itself, thanks to exec).
spawn() {
    local name=$1
    shift
    setsid bash -c 'exec "$@"' "$name" "$@" >"$STATE/$name.log" 2>&1 </dev/null &
    echo $! >"$STATE/$name.pid"
    echo $!
}

zookeeper_ok() { [[ "$(echo ruok | nc -w1 127.0.0.1 "$1" 2>/dev/null)" == imok ]]; }
nacos_ok() {
    curl -fsS -m 1 "http://127.0.0.1:$1/nacos/v1/ns/service/list?pageNo=1&pageSize=1" >/dev/null &&
        listening "$2"
}

print_env() {
    [[ -f "$STATE/env" ]] || die "not started (no $STATE/env); run \`$0 start\`"
    cat "$STATE/env"
}

start() {
    need etcd "install the Debian package \`etcd-server\` (or \`etcd\`)"
    need etcdctl "install the Debian package \`etcd-client\`"
    need java "install a Java runtime, e.g. the Debian package \`default-jre-headless\`"
    need nc "install the Debian package \`netcat-openbsd\`"
    need curl "install the Debian package \`curl\`"
    need setsid "install the Debian package \`util-linux\`"
    [[ -f /usr/share/java/zookeeper.jar ]] || die "/usr/share/java/zookeeper.jar not found: install the Debian package \`zookeeper\`"
    local rnacos
    rnacos=$(find_rnacos)

    if [[ -d "$STATE" ]]; then
        local pidfile
        for pidfile in "$STATE"/*.pid; do
            [[ -f "$pidfile" ]] || continue
            if kill -0 "$(cat "$pidfile")" 2>/dev/null; then
                die "already running (state in $STATE); run \`$0 stop\` first"
            fi
        done
        rm -rf "$STATE"
    fi
    mkdir -p "$STATE"
    # Whatever happens below, a failed start leaves nothing running.
    trap 'log "start failed; stopping what was started"; stop >/dev/null 2>&1 || true' ERR

    # etcd: one member, client and peer URLs on loopback.
    local etcd_port etcd_peer etcd_pid
    etcd_port=$(free_port)
    etcd_peer=$(free_port)
    etcd_pid=$(spawn etcd etcd --name rpc-test --data-dir "$STATE/etcd-data" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "rpc-test=http://127.0.0.1:$etcd_peer")

    # ZooKeeper: standalone, tickTime 500 ms so sessions of 1..10 s are allowed.
    local zk_port zk_pid
    zk_port=$(free_port)
    mkdir -p "$STATE/zookeeper-data"
    cat >"$STATE/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$STATE/zookeeper-data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok
EOF
    zk_pid=$(spawn zookeeper java -Dzookeeper.log.dir="$STATE" -cp "$ZOOKEEPER_CLASSPATH" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$STATE/zoo.cfg")

    # rnacos: nacos-sdk expects the gRPC port at HTTP port + 1000; no console.
    local nacos_port nacos_pid
    nacos_port=$(free_port)
    nacos_pid=$(RNACOS_SDK_HOST=127.0.0.1 RNACOS_HTTP_PORT=$nacos_port \
        RNACOS_GRPC_PORT=$((nacos_port + 1000)) RNACOS_HTTP_CONSOLE_PORT=0 \
        RNACOS_DATA_DIR="$STATE/nacos-data" RNACOS_RAFT_NODE_ADDR="127.0.0.1:$((nacos_port + 1000))" \
        spawn nacos "$rnacos")

    wait_until etcd "$etcd_pid" etcdctl --endpoints="127.0.0.1:$etcd_port" --command-timeout=1s endpoint health
    wait_until zookeeper "$zk_pid" zookeeper_ok "$zk_port"
    wait_until nacos "$nacos_pid" nacos_ok "$nacos_port" "$((nacos_port + 1000))"
    trap - ERR

    cat >"$STATE/env" <<EOF
export RPC_TEST_ETCD_URL=etcd://127.0.0.1:$etcd_port
export RPC_TEST_ZOOKEEPER_URL=zookeeper://127.0.0.1:$zk_port
export RPC_TEST_NACOS_URL=nacos://127.0.0.1:$nacos_port
EOF
    log "etcd      etcd://127.0.0.1:$etcd_port (pid $etcd_pid)"
    log "ZooKeeper zookeeper://127.0.0.1:$zk_port (pid $zk_pid)"
    log "Nacos     nacos://127.0.0.1:$nacos_port, gRPC on $((nacos_port + 1000)) (rnacos, pid $nacos_pid)"
    log "state, data and logs in $STATE; stop with \`$0 stop\`"
    print_env
}

# Stops the process recorded in NAME.pid if it is still the one we started (its command
# line names BINARY), TERM first, KILL after 10 s.
stop_one() {
    local name=$1 binary=$2 pidfile="$STATE/$1.pid" pid
    [[ -f "$pidfile" ]] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$binary"; then
        kill -TERM "$pid" 2>/dev/null || true
        local waited=0
        while kill -0 "$pid" 2>/dev/null && ((waited < 100)); do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        log "stopped $name (pid $pid)"
    fi
    rm -f "$pidfile"
}

stop() {
    [[ -d "$STATE" ]] || { log "nothing to stop ($STATE does not exist)"; return 0; }
    stop_one etcd etcd
    stop_one zookeeper QuorumPeerMain
    stop_one nacos rnacos
    rm -rf "$STATE"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    env) print_env ;;
    *)
        echo "usage: $0 start|stop|env" >&2
        exit 2
        ;;
esac
