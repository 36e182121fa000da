"""A grpcio client instrumented by opentelemetry-instrumentation-grpc: calls SayHello once
on HOST:PORT and prints its spans (otel_spans.py) and the reply.

Usage: otel_greeter_client.py PROTO_DIR HOST:PORT
"""

import sys

import grpc
from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient

import greeter_stubs
import otel_spans


def main() -> int:
    proto_dir, target = sys.argv[1], sys.argv[2]
    provider = otel_spans.install()
    GrpcInstrumentorClient().instrument()
    greeter_pb2, greeter_pb2_grpc = greeter_stubs.load(proto_dir)
    with grpc.insecure_channel(target) as channel:
        stub = greeter_pb2_grpc.GreeterStub(channel)
        reply = stub.SayHello(greeter_pb2.HelloRequest(name="chain"), timeout=10)
        print(f"reply: {reply.message}", flush=True)
    provider.force_flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
