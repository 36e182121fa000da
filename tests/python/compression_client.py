"""A grpcio client that compresses, calling an rpc provider's greeter.

Usage: compression_client.py PROTO_DIR HOST:PORT

Prints one line per call and exits 0 (an error status is printed, not raised):
- `gzip unary: MESSAGE` — SayHello sent with per-call gzip compression;
- `gzip stream: MESSAGE | MESSAGE | ...` — SayHelloStream, gzip;
- `plain unary: MESSAGE` — SayHello uncompressed (a reply the provider compressed is
  decompressed by grpcio, which accepts gzip by default);
- `deflate unary: CODE DETAILS` — SayHello sent with deflate, which rpc does not read.
"""

import sys

import grpc

import greeter_stubs

TIMEOUT = 10
# Long enough that gzip shrinks it (grpcio sends a message that would grow uncompressed,
# flag clear, even in a gzip call); the provider echoes it in its replies.
NAME = "compressible " * 40


def main():
    proto_dir, target = sys.argv[1], sys.argv[2]
    greeter_pb2, greeter_pb2_grpc = greeter_stubs.load(proto_dir)
    with grpc.insecure_channel(target) as channel:
        stub = greeter_pb2_grpc.GreeterStub(channel)
        request = greeter_pb2.HelloRequest(name=NAME.strip())
        reply = stub.SayHello(request, timeout=TIMEOUT, compression=grpc.Compression.Gzip)
        print(f"gzip unary: {reply.message}")
        streamed = stub.SayHelloStream(
            greeter_pb2.HelloRequest(name=NAME.strip(), count=3),
            timeout=TIMEOUT,
            compression=grpc.Compression.Gzip,
        )
        print(f"gzip stream: {' | '.join(r.message for r in streamed)}")
        reply = stub.SayHello(request, timeout=TIMEOUT)
        print(f"plain unary: {reply.message}")
        try:
            stub.SayHello(request, timeout=TIMEOUT, compression=grpc.Compression.Deflate)
            print("deflate unary: OK")
        except grpc.RpcError as error:
            print(f"deflate unary: {error.code().name} {error.details()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
