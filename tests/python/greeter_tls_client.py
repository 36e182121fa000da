"""A plain gRPC client (Python grpcio), not ours, calling an rpc provider over TLS.

Usage: greeter_tls_client.py PROTO_DIR HOST:PORT CA_PEM NAME [CERT_PEM KEY_PEM]

Verifies the provider against CA_PEM under the name NAME (grpc.ssl_target_name_override),
presenting CERT_PEM/KEY_PEM when given (mutual TLS). Prints `unary: MESSAGE` when the call
succeeds, `refused: CODE` when it fails with a gRPC status; exits non-zero on anything
else.
"""

import importlib
import sys
import tempfile

import grpc
from grpc_tools import protoc


def main() -> int:
    proto_dir, target, ca, name = sys.argv[1:5]
    identity = sys.argv[5:7]
    with tempfile.TemporaryDirectory(prefix="rpc-tls-") as out:
        code = protoc.main(
            ["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", "greeter.proto"]
        )
        if code != 0:
            print(f"protoc failed with {code}", file=sys.stderr)
            return 1
        sys.path.insert(0, out)
        greeter_pb2 = importlib.import_module("greeter_pb2")
        greeter_pb2_grpc = importlib.import_module("greeter_pb2_grpc")
        with open(ca, "rb") as f:
            root = f.read()
        key = cert = None
        if identity:
            with open(identity[0], "rb") as f:
                cert = f.read()
            with open(identity[1], "rb") as f:
                key = f.read()
        credentials = grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=cert)
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
