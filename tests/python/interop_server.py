"""gRPC's interop test server (grpc.testing.TestService) in Python grpcio, written for
this project from the interop test descriptions (doc/interop-test-descriptions.md in
the grpc repository).

Usage: interop_server.py PROTO_DIR [--port PORT]

Prints `listening on 127.0.0.1:PORT` once it serves (port 0 picks a free one) and stops
when its standard input closes, so a test that holds the pipe cannot leave it behind.

Server features: EmptyCall, UnaryCall, StreamingInputCall, StreamingOutputCall,
FullDuplexCall, Echo Status, Echo Metadata, CompressedResponse (unary), paced responses
(interval_us). Not CompressedRequest: grpcio decompresses before the servicer runs and
shows it neither the message flag nor the grpc-encoding header, so this server cannot
tell whether a request was compressed (it accepts both; clients report the case as not
applicable).
"""

import argparse
import sys
import threading
import time
from concurrent import futures

import grpc

import interop_stubs

INITIAL_KEY = "x-grpc-test-echo-initial"
TRAILING_KEY = "x-grpc-test-echo-trailing-bin"
CODES = {code.value[0]: code for code in grpc.StatusCode}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("proto_dir")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    empty_pb2, messages_pb2, test_pb2_grpc = interop_stubs.load(args.proto_dir)

    def payload(size):
        return messages_pb2.Payload(type=messages_pb2.COMPRESSABLE, body=b"\x00" * size)

    def echo_metadata(context):
        metadata = dict(context.invocation_metadata())
        if INITIAL_KEY in metadata:
            context.send_initial_metadata(((INITIAL_KEY, metadata[INITIAL_KEY]),))
        if TRAILING_KEY in metadata:
            context.set_trailing_metadata(((TRAILING_KEY, metadata[TRAILING_KEY]),))

    def echo_status(request, context):
        """Sets the status the request asks for; True when it asked for one."""
        if request.HasField("response_status") and request.response_status.code != 0:
            context.set_code(CODES.get(request.response_status.code, grpc.StatusCode.UNKNOWN))
            context.set_details(request.response_status.message)
            return True
        return False

    def responses(parameters_list, context):
        for parameters in parameters_list:
            if parameters.interval_us > 0:
                time.sleep(parameters.interval_us / 1e6)
            if not context.is_active():
                return
            yield messages_pb2.StreamingOutputCallResponse(payload=payload(parameters.size))

    class TestService(test_pb2_grpc.TestServiceServicer):
        def EmptyCall(self, request, context):
            echo_metadata(context)
            return empty_pb2.Empty()

        def UnaryCall(self, request, context):
            echo_metadata(context)
            if echo_status(request, context):
                return messages_pb2.SimpleResponse()
            if request.HasField("response_compressed"):
                context.set_compression(
                    grpc.Compression.Gzip if request.response_compressed.value else grpc.Compression.NoCompression
                )
            response = messages_pb2.SimpleResponse(payload=payload(request.response_size))
            if request.fill_server_id:
                response.server_id = f"python:{port}"
            return response

        def StreamingOutputCall(self, request, context):
            yield from responses(request.response_parameters, context)
            echo_status(request, context)

        def StreamingInputCall(self, request_iterator, context):
            total = sum(len(request.payload.body) for request in request_iterator)
            return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)

        def FullDuplexCall(self, request_iterator, context):
            echo_metadata(context)
            for request in request_iterator:
                if echo_status(request, context):
                    return
                yield from responses(request.response_parameters, context)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    test_pb2_grpc.add_TestServiceServicer_to_server(TestService(), server)
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    stdin_closed = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stdin_closed.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    stdin_closed.wait()
    server.stop(grace=1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
