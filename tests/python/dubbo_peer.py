"""A real Dubbo peer for the mixed-fleet tests: Apache Dubbo's Python SDK (`apache-dubbo`,
Triple over h2, ZooKeeper through kazoo), as a consumer or as a provider of
helloworld.Greeter, registered and discovered through ZooKeeper in Dubbo's own layout.

    dubbo_peer.py consume PROTO_DIR ZK_HOST:PORT CALLS [--until-stdin-closes] [--fixed-directory]
        Calls SayHello CALLS times (or until stdin closes, at most CALLS), one at a time,
        and prints one JSON line: {"ok": n, "failed": n, "providers": {addr: n}, "errors": {error: n}}
        (each error as the SDK raised it, the call's number left out, with how often).
        Waits first (up to 20 s) for a first provider to answer. --fixed-directory mends the
        SDK's directory first (see `mend_directory`).
    dubbo_peer.py provide PROTO_DIR ZK_HOST:PORT PORT
        Serves SayHello on 127.0.0.1:PORT ("Hello <name>", provider "127.0.0.1:PORT"),
        registered in ZooKeeper; prints "ready" and serves until stdin closes.
"""

import concurrent.futures
import json
import os
import sys
import threading
import time

import dubbo
from dubbo.configs import ReferenceConfig, RegistryConfig, ServiceConfig
from dubbo.proxy.handlers import RpcMethodHandler, RpcServiceHandler

import greeter_stubs

SERVICE = "helloworld.Greeter"

# The SDK's calls have no deadline: a call that never ends is counted as failed after this
# long (seconds), so the consumer always ends.
CALL_BOUND = 5.0

# How long a removed provider's connection stays open for the calls in flight on it
# (seconds; `mend_directory`).
REMOVED_INVOKER_GRACE = 1.0


def mend_directory():
    """Mends apache-dubbo 3.0.0b1's registry directory, which drops calls by itself.

    On every notification from the registry (a provider that joins as much as one that
    leaves) `RegistryDirectory.notify` first empties its invoker map, then connects to
    every listed provider again (its test `k in old_invokers.items()` is never true), and
    closes every old connection, with any call in flight on it; a call in between finds
    no provider. This version keeps the invokers of the providers still listed, swaps the
    new map in whole, and closes only the connections of providers no longer listed, a
    moment later (as Dubbo's Java SDK closes a removed invoker's client after its calls
    end: this one would cut a call in flight on it) — so that what the rolling restart
    measures is the providers' offline, not this bug.
    """
    from dubbo.cluster.directories import RegistryDirectory

    def notify(self, urls):
        old = dict(self._invokers)
        invokers = {}
        for url in urls:
            key = str(url)
            invokers[key] = old.pop(key) if key in old else self._protocol.refer(url)
        self._invokers = invokers
        for invoker in old.values():
            timer = threading.Timer(REMOVED_INVOKER_GRACE, invoker.destroy)
            timer.daemon = True
            timer.start()

    RegistryDirectory.notify = notify


def stdin_closed_event():
    closed = threading.Event()

    def wait():
        sys.stdin.read()
        closed.set()

    threading.Thread(target=wait, daemon=True).start()
    return closed


def consume(pb2, zk, calls, until_stdin_closes):
    registry = RegistryConfig.from_url(f"zookeeper://{zk}")
    bootstrap = dubbo.Dubbo(registry_config=registry)
    client = bootstrap.create_client(ReferenceConfig(protocol="tri", service=SERVICE))
    say_hello = client.unary(
        method_name="SayHello",
        request_serializer=pb2.HelloRequest.SerializeToString,
        response_deserializer=pb2.HelloReply.FromString,
    )
    # The first provider: the directory fills in once kazoo's watch has fired.
    deadline = time.monotonic() + 20
    while True:
        try:
            say_hello(pb2.HelloRequest(name="first"))
            break
        except Exception as error:  # noqa: BLE001 - any failure means "not yet"
            if time.monotonic() > deadline:
                print(json.dumps({"ok": 0, "failed": 0, "providers": {}, "errors": {f"no provider: {error!r}": 1}}), flush=True)
                return 1
            time.sleep(0.05)
    print("started", flush=True)
    closed = stdin_closed_event() if until_stdin_closes else threading.Event()
    ok, failed, providers, errors = 0, 0, {}, {}
    # Each call on a thread of this pool, waited for at most CALL_BOUND (a call that hangs
    # keeps its thread; the pool has room for a few).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    for n in range(calls):
        if closed.is_set():
            break
        try:
            call = pool.submit(say_hello, pb2.HelloRequest(name=f"call-{n}"))
            try:
                reply = call.result(timeout=CALL_BOUND)
            except concurrent.futures.TimeoutError:
                raise RuntimeError(f"call-{n} did not end within {CALL_BOUND} s") from None
            if f"call-{n}" not in reply.message:
                raise RuntimeError(f"unexpected reply {reply.message!r}")
            ok += 1
            providers[reply.provider] = providers.get(reply.provider, 0) + 1
        except Exception as error:  # noqa: BLE001 - counted and reported
            failed += 1
            kind = repr(error).replace(f"call-{n}", "call-N")
            errors[kind] = errors.get(kind, 0) + 1
    print(json.dumps({"ok": ok, "failed": failed, "providers": providers, "errors": errors}), flush=True)
    # A call the SDK never ended holds a thread that the interpreter would wait for.
    os._exit(0)


def provide(pb2, zk, port):
    address = f"127.0.0.1:{port}"

    def say_hello(request):
        return pb2.HelloReply(message=f"Hello {request.name}", provider=address)

    handler = RpcServiceHandler(
        service_name=SERVICE,
        method_handlers=[
            RpcMethodHandler.unary(
                method=say_hello,
                method_name="SayHello",
                request_deserializer=pb2.HelloRequest.FromString,
                response_serializer=pb2.HelloReply.SerializeToString,
            )
        ],
    )
    registry = RegistryConfig.from_url(f"zookeeper://{zk}")
    bootstrap = dubbo.Dubbo(registry_config=registry)
    server = bootstrap.create_server(
        ServiceConfig(service_handler=handler, host="127.0.0.1", port=port, protocol="tri")
    )
    server.start()
    print("ready", flush=True)
    stdin_closed_event().wait()
    return 0


def main(argv):
    command, proto_dir, zk = argv[1], argv[2], argv[3]
    pb2, _ = greeter_stubs.load(proto_dir)
    if command == "consume":
        if "--fixed-directory" in argv[5:]:
            mend_directory()
        return consume(pb2, zk, int(argv[4]), "--until-stdin-closes" in argv[5:])
    if command == "provide":
        return provide(pb2, zk, int(argv[4]))
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
