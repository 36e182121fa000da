"""A plain gRPC client (Python grpcio), not ours, following a feed across a provider's stop.

Usage: feed_resume_client.py PROTO_DIR HOST:PORT[,HOST:PORT...] UNTIL

Subscribes to feed.Feed/Subscribe (events 0..UNTIL, 100 ms apart) on the first address.
When the stream ends with UNAVAILABLE and the trailer `rpc-stream-moved: 1` (the provider
is going offline and moved the stream), it subscribes again on the next address with the
trailer `resume-from` as request metadata: the rule our own consumers follow, in a few
lines of any gRPC client. Prints `event N from PROVIDER` for each event, `moved to ADDR
resume-from N` for each move, and at the end `received N events in order, moved M
times`. Exits non-zero on a gap, a repeat, or any other error.
"""

import importlib
import shutil
import sys
import tempfile
import atexit

import grpc
from grpc_tools import protoc


def stubs(proto_dir):
    out = tempfile.mkdtemp(prefix="rpc-feed-stubs-")
    atexit.register(shutil.rmtree, out, True)
    code = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", "feed.proto"])
    if code != 0:
        raise RuntimeError(f"protoc failed with {code}")
    sys.path.insert(0, out)
    return importlib.import_module("feed_pb2"), importlib.import_module("feed_pb2_grpc")


def moved_from(error):
    """The `resume-from` of a moved stream's trailers, or None if it did not move."""
    if error.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    trailers = dict(error.trailing_metadata() or ())
    if trailers.get("rpc-stream-moved") != "1":
        return None
    return trailers.get("resume-from")


def main() -> int:
    proto_dir, targets, until = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
    feed_pb2, feed_pb2_grpc = stubs(proto_dir)
    request = feed_pb2.SubscribeRequest(until=until, interval_ms=100)
    expected, moves, metadata = 0, 0, ()
    while True:
        target = targets[moves % len(targets)]
        with grpc.insecure_channel(target) as channel:
            stub = feed_pb2_grpc.FeedStub(channel)
            try:
                for event in stub.Subscribe(request, metadata=metadata, timeout=60):
                    if event.seq != expected:
                        print(f"event {event.seq} where {expected} was due", flush=True)
                        return 1
                    print(f"event {event.seq} from {event.provider}", flush=True)
                    expected += 1
                break
            except grpc.RpcError as error:
                resume = moved_from(error)
                if resume is None:
                    print(f"error: {error.code().name}: {error.details()}", flush=True)
                    return 1
                moves += 1
                metadata = (("resume-from", resume),)
                print(f"moved to {targets[moves % len(targets)]} resume-from {resume}", flush=True)
    print(f"received {expected} events in order, moved {moves} times", flush=True)
    return 0 if expected == until else 1


if __name__ == "__main__":
    sys.exit(main())
