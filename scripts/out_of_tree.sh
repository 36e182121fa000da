#!/usr/bin/env bash
# Builds and runs examples/getting-started the way a project OUTSIDE this repository
# does, against a real etcd, to prove that depending on `lossless-rpc` needs nothing installed
# (issue 25, point 1: etcd-client's build script needed a system `protoc`, and the
# repository's .cargo/config.toml, which hid that, is not read for a dependency).
#
#   eval "$(scripts/registries.sh start)"   # or any etcd: RPC_TEST_ETCD_URL=etcd://h:port
#   bash scripts/out_of_tree.sh
#
# 1. copies examples/getting-started to a fresh directory under /tmp (so no
#    .cargo/config.toml of this repository is among its ancestors; the script checks
#    that, and that no cargo configuration it reads sets PROTOC), points its
#    `lossless-rpc = { path = "../../rpc" }` at this checkout's rpc/ by absolute path and gives it
#    this repository's Cargo.lock (same versions, pruned by cargo to what it uses);
# 2. builds its binaries with PROTOC unset, a `protoc` on PATH hidden if there is one,
#    and a CARGO_TARGET_DIR of its own inside the temporary directory: a shared target
#    directory would hand it artifacts already built here and hide exactly the failure
#    this looks for. The price is a full build of the dependency tree: about 5-10 min on
#    2 cores (8.5 min measured while another build shared them);
# 3. runs the provider in the background against RPC_TEST_ETCD_URL (under a key prefix
#    of its own, admin endpoint on a free port), waits for its /ready, runs the consumer
#    once and checks it prints "Hello, world!" and exits 0, then SIGTERMs the provider
#    and checks it exits 0.
#
# The temporary directory and the provider are removed on every exit path.
set -euo pipefail

say() { echo "out_of_tree.sh: $*" >&2; }
die() {
    say "FAILED: $*"
    exit 1
}

repo=$(cd "$(dirname "$0")/.." && pwd)
url=${RPC_TEST_ETCD_URL:-}
[[ -n $url ]] || die "RPC_TEST_ETCD_URL is not set (eval \"\$(scripts/registries.sh start)\" starts an etcd and sets it)"
command -v curl >/dev/null 2>&1 || die "\`curl\` not found: install the Debian package \`curl\`"

work=$(mktemp -d /tmp/rpc-out-of-tree.XXXXXX)
provider_pid=""
cleanup() {
    if [[ -n $provider_pid ]] && kill -0 "$provider_pid" 2>/dev/null; then
        kill -KILL "$provider_pid" 2>/dev/null || true
        wait "$provider_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The last lines of a log, for a failure message.
tail_of() { tail -n 30 "$1" >&2 2>/dev/null || true; }

# A loopback port nobody listens on (as scripts/registries.sh picks them).
free_port() {
    local port tries=0
    while ((tries < 200)); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        tries=$((tries + 1))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    die "no free loopback port found"
}

# 1. The copy, as a project of its own.
project=$work/getting-started
cp -R "$repo/examples/getting-started" "$project"
rm -rf "$project/target"
manifest=$project/Cargo.toml
grep -q '^lossless-rpc = { path = "../../rpc" }$' "$manifest" ||
    die "examples/getting-started/Cargo.toml no longer says \`lossless-rpc = { path = \"../../rpc\" }\`; update this script"
sed -i "s|^lossless-rpc = { path = \"../../rpc\" }\$|lossless-rpc = { path = \"$repo/rpc\" }|" "$manifest"
cp "$repo/Cargo.lock" "$project/Cargo.lock"

dir=$project
while :; do
    for config in "$dir/.cargo/config.toml" "$dir/.cargo/config"; do
        [[ -e $config ]] && die "$config is an ancestor of the copy: cargo would read it"
    done
    [[ $dir == / ]] && break
    dir=$(dirname "$dir")
done
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for config in "$cargo_home/config.toml" "$cargo_home/config"; do
    if [[ -f $config ]] && grep -q PROTOC "$config"; then
        die "$config sets PROTOC: the build would not show whether one is needed"
    fi
done

# 2. The build, with no protoc but the vendored one the project's own build.rs uses
#    (protoc-bin-vendored, for its hello.proto; the framework's crates need none).
unset PROTOC PROTOC_INCLUDE
if system_protoc=$(command -v protoc 2>/dev/null); then
    mkdir -p "$work/no-protoc"
    cat >"$work/no-protoc/protoc" <<'EOF'
#!/bin/sh
echo "protoc is hidden by scripts/out_of_tree.sh: a build that runs a system protoc fails here" >&2
exit 127
EOF
    chmod +x "$work/no-protoc/protoc"
    export PATH="$work/no-protoc:$PATH"
    say "hid $system_protoc behind a protoc that fails"
fi
export CARGO_TARGET_DIR=$work/target
say "building $project against $repo/rpc (target $CARGO_TARGET_DIR; a full build, 5-10 min on 2 cores)"
started=$SECONDS
(cd "$project" && cargo build --bins) || die "cargo build --bins of the copy failed (see above)"
say "built in $((SECONDS - started)) s"
bin=$CARGO_TARGET_DIR/debug

# 3. The two programs against etcd, under a prefix of their own.
case $url in
    *\?*) url="$url&prefix=/out-of-tree-$$" ;;
    *) url="$url?prefix=/out-of-tree-$$" ;;
esac
admin_port=$(free_port)
cd "$project" # the programs read config/*.yaml relative to it
RPC_REGISTRIES__MAIN__URL=$url RPC_PROTOCOL__PORT=0 RPC_ADMIN__PORT=$admin_port \
    "$bin/hello-provider" >"$work/provider.log" 2>&1 &
provider_pid=$!
deadline=$((SECONDS + 30))
until curl -fsS -m 1 "http://127.0.0.1:$admin_port/ready" >/dev/null 2>&1; do
    if ! kill -0 "$provider_pid" 2>/dev/null; then
        tail_of "$work/provider.log"
        die "the provider exited during start-up (its log above)"
    fi
    if ((SECONDS >= deadline)); then
        tail_of "$work/provider.log"
        die "the provider was not ready (registered) within 30 s (its log above)"
    fi
    sleep 0.2
done
say "provider ready (pid $provider_pid, admin port $admin_port)"

if ! reply=$(RPC_REGISTRIES__MAIN__URL=$url "$bin/hello-consumer" 2>"$work/consumer.log"); then
    tail_of "$work/consumer.log"
    die "the consumer failed (its log above)"
fi
[[ $reply == "Hello, world!" ]] || die "the consumer printed \`$reply\`, not \`Hello, world!\`"
say "consumer: $reply"

kill -TERM "$provider_pid"
status=0
# The provider's graceful shutdown is bounded by its 25 s timeout.
for _ in $(seq 1 600); do
    kill -0 "$provider_pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$provider_pid" 2>/dev/null; then
    tail_of "$work/provider.log"
    die "the provider did not exit within 60 s of SIGTERM"
fi
wait "$provider_pid" || status=$?
provider_pid=""
if ((status != 0)); then
    tail_of "$work/provider.log"
    die "the provider exited with $status after SIGTERM, not 0 (its log above)"
fi
say "provider stopped cleanly after SIGTERM; OK in $((SECONDS - started)) s"
