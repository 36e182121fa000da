"""A plain gRPC client (Python grpcio), not ours, calling an rpc provider.

Usage: greeter_client.py PROTO_DIR HOST:PORT

Generates stubs from greeter.proto with grpcio-tools into a temporary directory, then
calls SayHello, SayHelloStream and the standard health check, printing one line each.
Exits non-zero on any error.
"""

import importlib
import sys
import tempfile

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_tools import protoc


def main() -> int:
    proto_dir, target = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="rpc-interop-") as out:
        return call(proto_dir, target, out)


def call(proto_dir: str, target: str, out: str) -> int:
    code = protoc.main(
        ["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", "greeter.proto"]
    )
    if code != 0:
        print(f"protoc failed with {code}", file=sys.stderr)
        return 1
    sys.path.insert(0, out)
    greeter_pb2 = importlib.import_module("greeter_pb2")
    greeter_pb2_grpc = importlib.import_module("greeter_pb2_grpc")

    with grpc.insecure_channel(target) as channel:
        stub = greeter_pb2_grpc.GreeterStub(channel)
        reply = stub.SayHello(greeter_pb2.HelloRequest(name="python"), timeout=5)
        print(f"unary: {reply.message} from {reply.provider}")
        replies = [r.message for r in stub.SayHelloStream(greeter_pb2.HelloRequest(name="py", count=2), timeout=5)]
        print(f"stream: {' | '.join(replies)}")
        try:
            stub.SayHello(greeter_pb2.HelloRequest(name=""), timeout=5)
            print("error: empty name was accepted")
            return 1
        except grpc.RpcError as error:
            print(f"status: {error.code().name}")
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(service="helloworld.Greeter"), timeout=5)
        print(f"health: {health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
