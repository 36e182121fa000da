"""Python stubs of greeter.proto (proto/proto), generated at run time.

`load(proto_dir)` runs grpcio-tools' protoc on `greeter.proto` into a temporary directory
that lives as long as the process, and returns the modules `(greeter_pb2,
greeter_pb2_grpc)`.
"""

import atexit
import importlib
import shutil
import sys
import tempfile

from grpc_tools import protoc


def load(proto_dir):
    out = tempfile.mkdtemp(prefix="rpc-greeter-stubs-")
    atexit.register(shutil.rmtree, out, True)
    code = protoc.main(
        ["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", "greeter.proto"]
    )
    if code != 0:
        raise RuntimeError(f"protoc failed with {code}")
    sys.path.insert(0, out)
    return importlib.import_module("greeter_pb2"), importlib.import_module("greeter_pb2_grpc")
