"""A grpcio Greeter server instrumented by opentelemetry-instrumentation-grpc, on
127.0.0.1 and a free port: prints `port N`, then each finished span (otel_spans.py);
serves until its standard input closes.

Usage: otel_greeter_server.py PROTO_DIR
"""

import sys
from concurrent import futures

import grpc
from opentelemetry.instrumentation.grpc import GrpcInstrumentorServer

import greeter_stubs
import otel_spans


def main() -> int:
    proto_dir = sys.argv[1]
    otel_spans.install()
    GrpcInstrumentorServer().instrument()
    greeter_pb2, greeter_pb2_grpc = greeter_stubs.load(proto_dir)

    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request, context):
            return greeter_pb2.HelloReply(message=f"Hello, {request.name}!", provider="python")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    greeter_pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"port {port}", flush=True)
    sys.stdin.read()
    server.stop(grace=1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
