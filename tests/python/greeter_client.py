"""A plain gRPC client (Python grpcio), not ours, calling an rpc provider.

Usage: greeter_client.py PROTO_DIR HOST:PORT

Generates stubs from greeter.proto with grpcio-tools (greeter_stubs.py), then calls
SayHello, SayHelloStream and the standard health check, printing one line each. Exits
non-zero on any error.
"""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

import greeter_stubs


def main() -> int:
    proto_dir, target = sys.argv[1], sys.argv[2]
    return call(proto_dir, target)


def call(proto_dir: str, target: str) -> int:
    greeter_pb2, greeter_pb2_grpc = greeter_stubs.load(proto_dir)

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
