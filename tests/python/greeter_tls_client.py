"""A plain gRPC client (Python grpcio), not ours, calling an rpc provider over TLS.

Usage: greeter_tls_client.py PROTO_DIR HOST:PORT CA_PEM NAME [CERT_PEM KEY_PEM]

Verifies the provider against CA_PEM under the name NAME (grpc.ssl_target_name_override),
presenting CERT_PEM/KEY_PEM when given (mutual TLS). Prints `unary: MESSAGE` when the call
succeeds, `refused: CODE` when it fails with a gRPC status; exits non-zero on anything
else.
"""

import sys

import grpc

import greeter_stubs


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main() -> int:
    proto_dir, target, ca, name = sys.argv[1:5]
    identity = sys.argv[5:7]
    greeter_pb2, greeter_pb2_grpc = greeter_stubs.load(proto_dir)
    cert, key = (read(identity[0]), read(identity[1])) if identity else (None, None)
    credentials = grpc.ssl_channel_credentials(root_certificates=read(ca), private_key=key, certificate_chain=cert)
    options = [("grpc.ssl_target_name_override", name)]
    with grpc.secure_channel(target, credentials, options=options) as channel:
        stub = greeter_pb2_grpc.GreeterStub(channel)
        try:
            reply = stub.SayHello(greeter_pb2.HelloRequest(name="grpcio over TLS"), timeout=5)
            print(f"unary: {reply.message}")
        except grpc.RpcError as error:
            print(f"refused: {error.code().name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
