"""Two grpcio greeter servers for an rpc consumer that compresses.

Usage: compression_server.py PROTO_DIR

- `accepting`: grpcio's defaults, which read gzip and deflate requests;
- `identity-only`: gzip and deflate turned off
  (`grpc.compression_enabled_algorithms_bitset`), so it refuses a gzip request with
  UNIMPLEMENTED "Compression algorithm 'gzip' is disabled": grpcio shows a servicer
  neither the message flag nor `grpc-encoding`, and this refusal is how a grpcio server
  tells, on the wire, that a request arrived gzip-compressed.

SayHello answers `Hello, NAME!` (provider `python`); a NAME that starts with
`compressed-reply` gets its reply gzip-compressed (`context.set_compression`), when the
client accepts gzip.

Prints `accepting on 127.0.0.1:PORT` and `identity-only on 127.0.0.1:PORT` once both
serve, and stops when its standard input closes, so a test that holds the pipe cannot
leave it behind.
"""

import sys
import threading
from concurrent import futures

import grpc

import greeter_stubs

IDENTITY_ONLY = [("grpc.compression_enabled_algorithms_bitset", 1)]


def main():
    greeter_pb2, greeter_pb2_grpc = greeter_stubs.load(sys.argv[1])

    class Greeter(greeter_pb2_grpc.GreeterServicer):
        def SayHello(self, request, context):
            if request.name.startswith("compressed-reply"):
                context.set_compression(grpc.Compression.Gzip)
            return greeter_pb2.HelloReply(message=f"Hello, {request.name}!", provider="python")

    servers = []
    for name, options in (("accepting", []), ("identity-only", IDENTITY_ONLY)):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
        greeter_pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        print(f"{name} on 127.0.0.1:{port}", flush=True)
    stdin_closed = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stdin_closed.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    stdin_closed.wait()
    for server in servers:
        server.stop(grace=1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
