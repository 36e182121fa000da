"""A plain gRPC client (Python grpcio) that knows nothing of rpc: round_robin over a
static list of providers, open-loop load on echo.Echo, for a fixed time.

Usage: balanced_load.py PROTO_DIR RATE DELAY_MS SECONDS HOST:PORT [HOST:PORT ...]

Sends RATE calls per second for SECONDS seconds, each asking the provider to work
DELAY_MS milliseconds, whatever the previous calls do (open loop, as a real client
population). Prints `started` once the first call was answered, then at the end one
`failed CODE: MESSAGE` line per distinct failure and a summary line:

    sent=N ok=N failed=N

No retry policy is configured: only what gRPC does by itself (transparent retry of
streams the server refused or never saw). Exits 0 whatever the calls did; the caller
reads the summary.
"""

import collections
import importlib
import sys
import tempfile
import threading
import time

import grpc
from grpc_tools import protoc


def main() -> int:
    proto_dir, rate, delay_ms, seconds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    addresses = sys.argv[5:]
    with tempfile.TemporaryDirectory(prefix="rpc-balanced-") as out:
        code = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", "echo.proto"])
        if code != 0:
            print(f"protoc failed with {code}", file=sys.stderr)
            return 1
        sys.path.insert(0, out)
        echo_pb2 = importlib.import_module("echo_pb2")
        echo_pb2_grpc = importlib.import_module("echo_pb2_grpc")
        target = "ipv4:" + ",".join(addresses)
        # The target's text is no valid :authority (it lists several addresses).
        options = [("grpc.lb_policy_name", "round_robin"), ("grpc.default_authority", "localhost")]
        with grpc.insecure_channel(target, options=options) as channel:
            stub = echo_pb2_grpc.EchoStub(channel)
            return run(stub, echo_pb2, rate, delay_ms, seconds)


def run(stub, echo_pb2, rate: float, delay_ms: int, seconds: float) -> int:
    lock = threading.Lock()
    failures = collections.Counter()
    counts = {"ok": 0, "failed": 0}
    done = threading.Semaphore(0)

    def finished(future):
        error = future.exception()
        with lock:
            if error is None:
                counts["ok"] += 1
            else:
                counts["failed"] += 1
                failures[f"{error.code().name}: {error.details()}"] += 1
        done.release()

    request = echo_pb2.EchoRequest(payload=b"load", delay_ms=delay_ms)
    # The first call proves the channel works before the clock starts.
    stub.Echo(request, timeout=10)
    print("started", flush=True)

    interval = 1.0 / rate
    total = int(rate * seconds)
    start = time.monotonic()
    for n in range(total):
        pause = start + n * interval - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        stub.Echo.future(request, timeout=10).add_done_callback(finished)
    for _ in range(total):
        done.acquire()
    for failure, count in sorted(failures.items()):
        print(f"failed {count}x {failure}")
    print(f"sent={total} ok={counts['ok']} failed={counts['failed']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
