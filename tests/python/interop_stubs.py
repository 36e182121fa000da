"""Python stubs of the interop protos (proto/proto/interop), generated at run time.

`load(proto_dir)` runs grpcio-tools' protoc on `interop/{empty,messages,test}.proto`
into a temporary directory that lives as long as the process, and returns the modules
`(empty_pb2, messages_pb2, test_pb2_grpc)`. The protos live in `interop/`, not
`grpc/testing/`, so the generated package does not shadow grpcio's own `grpc` package.
"""

import atexit
import importlib
import shutil
import sys
import tempfile

from grpc_tools import protoc

_FILES = ("interop/empty.proto", "interop/messages.proto", "interop/test.proto")


def load(proto_dir):
    out = tempfile.mkdtemp(prefix="rpc-interop-stubs-")
    atexit.register(shutil.rmtree, out, True)
    code = protoc.main(
        ["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}", *_FILES]
    )
    if code != 0:
        raise RuntimeError(f"protoc failed with {code}")
    sys.path.insert(0, out)
    return (
        importlib.import_module("interop.empty_pb2"),
        importlib.import_module("interop.messages_pb2"),
        importlib.import_module("interop.test_pb2_grpc"),
    )
