"""gRPC's interop test client in Python grpcio, written for this project from the
interop test descriptions (doc/interop-test-descriptions.md in the grpc repository).

Usage: interop_client.py PROTO_DIR --server_host HOST --server_port PORT
                         [--test_case NAME|all]

Prints one line per case, in the format of the Rust client (`PASS name`,
`FAIL name: why`, `N/A name: why`), and exits 1 when a case failed.

grpcio does not show a caller whether a response message was compressed, so
server_compressed_unary checks that both calls succeed with the right payload, not the
message flag (the Rust client checks the flag).
"""

import argparse
import queue
import sys

import grpc

import interop_stubs

LARGE_REQUEST = 271828
LARGE_RESPONSE = 314159
REQUEST_SIZES = (27182, 8, 1828, 45904)
RESPONSE_SIZES = (31415, 9, 2653, 58979)
STATUS_MESSAGE = "test status message"
SPECIAL_STATUS_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
INITIAL_KEY = "x-grpc-test-echo-initial"
INITIAL_VALUE = "test_initial_metadata_value"
TRAILING_KEY = "x-grpc-test-echo-trailing-bin"
TRAILING_VALUE = b"\xab\xab\xab"
TIMEOUT = 10  # seconds; bounds every call that has no deadline of its own

CASES = (
    "empty_unary",
    "large_unary",
    "client_compressed_unary",
    "server_compressed_unary",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "custom_metadata",
    "status_code_and_message",
    "special_status_message",
    "unimplemented_method",
    "unimplemented_service",
    "cancel_after_begin",
    "cancel_after_first_response",
    "timeout_on_sleeping_server",
)


class Failed(Exception):
    """An assertion of a case did not hold."""


class NotApplicable(Exception):
    """The server lacks a feature the case needs."""


class Requests:
    """A request stream the case feeds one message at a time, then half-closes."""

    _END = object()

    def __init__(self):
        self._queue = queue.Queue()

    def send(self, message):
        self._queue.put(message)

    def close(self):
        self._queue.put(self._END)

    def __iter__(self):
        while True:
            message = self._queue.get()
            if message is self._END:
                return
            yield message


def expect(condition, why):
    if not condition:
        raise Failed(why)


def expect_code(error, code, message=None):
    expect(error.code() == code, f"want {code.name}, got {error.code().name}: {error.details()}")
    if message is not None:
        expect(error.details() == message, f"want message {message!r}, got {error.details()!r}")


def expect_unimplemented(method, request):
    try:
        method(request, timeout=TIMEOUT)
        raise Failed("the call succeeded")
    except grpc.RpcError as error:
        expect_code(error, grpc.StatusCode.UNIMPLEMENTED)


class Cases:
    def __init__(self, channel, empty_pb2, messages_pb2, test_pb2_grpc):
        self.empty = empty_pb2
        self.m = messages_pb2
        self.stub = test_pb2_grpc.TestServiceStub(channel)
        self.unimplemented = test_pb2_grpc.UnimplementedServiceStub(channel)

    def payload(self, size):
        return self.m.Payload(type=self.m.COMPRESSABLE, body=b"\x00" * size)

    def large_request(self, **fields):
        return self.m.SimpleRequest(
            response_type=self.m.COMPRESSABLE,
            response_size=LARGE_RESPONSE,
            payload=self.payload(LARGE_REQUEST),
            **fields,
        )

    def ping(self, request_size, response_size):
        return self.m.StreamingOutputCallRequest(
            response_type=self.m.COMPRESSABLE,
            response_parameters=(self.m.ResponseParameters(size=response_size),),
            payload=self.payload(request_size),
        )

    def check_payload(self, payload, size):
        expect(len(payload.body) == size, f"payload of {len(payload.body)} bytes, want {size}")
        expect(payload.body == b"\x00" * size, "payload is not all zeros")

    def empty_unary(self):
        response = self.stub.EmptyCall(self.empty.Empty(), timeout=TIMEOUT)
        expect(response == self.empty.Empty(), f"response {response!r}")

    def large_unary(self):
        response = self.stub.UnaryCall(self.large_request(), timeout=TIMEOUT)
        self.check_payload(response.payload, LARGE_RESPONSE)

    def client_compressed_unary(self):
        probe = self.large_request(expect_compressed=self.m.BoolValue(value=True))
        try:
            self.stub.UnaryCall(probe, timeout=TIMEOUT)
            raise NotApplicable("the server accepted the probe: no CompressedRequest feature")
        except grpc.RpcError as error:
            expect_code(error, grpc.StatusCode.INVALID_ARGUMENT)
        response = self.stub.UnaryCall(probe, timeout=TIMEOUT, compression=grpc.Compression.Gzip)
        self.check_payload(response.payload, LARGE_RESPONSE)
        plain = self.large_request(expect_compressed=self.m.BoolValue(value=False))
        response = self.stub.UnaryCall(plain, timeout=TIMEOUT)
        self.check_payload(response.payload, LARGE_RESPONSE)

    def server_compressed_unary(self):
        for compressed in (True, False):
            request = self.large_request(response_compressed=self.m.BoolValue(value=compressed))
            response = self.stub.UnaryCall(request, timeout=TIMEOUT)
            self.check_payload(response.payload, LARGE_RESPONSE)

    def client_streaming(self):
        requests = (self.m.StreamingInputCallRequest(payload=self.payload(size)) for size in REQUEST_SIZES)
        response = self.stub.StreamingInputCall(requests, timeout=TIMEOUT)
        expect(response.aggregated_payload_size == 74922, f"aggregated {response.aggregated_payload_size}")

    def server_streaming(self):
        request = self.m.StreamingOutputCallRequest(
            response_type=self.m.COMPRESSABLE,
            response_parameters=[self.m.ResponseParameters(size=size) for size in RESPONSE_SIZES],
        )
        sizes = [len(r.payload.body) for r in self.stub.StreamingOutputCall(request, timeout=TIMEOUT)]
        expect(sizes == list(RESPONSE_SIZES), f"response sizes {sizes}")

    def ping_pong(self):
        requests = Requests()
        responses = self.stub.FullDuplexCall(iter(requests), timeout=TIMEOUT)
        for request_size, response_size in zip(REQUEST_SIZES, RESPONSE_SIZES):
            requests.send(self.ping(request_size, response_size))
            self.check_payload(next(responses).payload, response_size)
        requests.close()
        rest = list(responses)
        expect(not rest, f"{len(rest)} responses too many")
        expect(responses.code() == grpc.StatusCode.OK, f"status {responses.code().name}")

    def empty_stream(self):
        requests = Requests()
        requests.close()
        rest = list(self.stub.FullDuplexCall(iter(requests), timeout=TIMEOUT))
        expect(not rest, f"{len(rest)} responses, want none")

    def custom_metadata(self):
        metadata = ((INITIAL_KEY, INITIAL_VALUE), (TRAILING_KEY, TRAILING_VALUE))

        def check(call, kind):
            initial = dict(call.initial_metadata())
            trailing = dict(call.trailing_metadata())
            expect(initial.get(INITIAL_KEY) == INITIAL_VALUE, f"{kind}: initial {initial!r}")
            expect(trailing.get(TRAILING_KEY) == TRAILING_VALUE, f"{kind}: trailing {trailing!r}")

        _, call = self.stub.UnaryCall.with_call(self.large_request(), metadata=metadata, timeout=TIMEOUT)
        check(call, "unary")
        requests = Requests()
        responses = self.stub.FullDuplexCall(iter(requests), metadata=metadata, timeout=TIMEOUT)
        requests.send(self.ping(LARGE_REQUEST, LARGE_RESPONSE))
        self.check_payload(next(responses).payload, LARGE_RESPONSE)
        requests.close()
        expect(not list(responses), "bidi: responses too many")
        check(responses, "bidi")

    def echoed_status(self, message):
        request = self.m.SimpleRequest(response_status=self.m.EchoStatus(code=2, message=message))
        try:
            self.stub.UnaryCall(request, timeout=TIMEOUT)
            raise Failed("unary: the call succeeded")
        except grpc.RpcError as error:
            expect_code(error, grpc.StatusCode.UNKNOWN, message)

    def status_code_and_message(self):
        self.echoed_status(STATUS_MESSAGE)
        requests = Requests()
        responses = self.stub.FullDuplexCall(iter(requests), timeout=TIMEOUT)
        requests.send(
            self.m.StreamingOutputCallRequest(
                response_status=self.m.EchoStatus(code=2, message=STATUS_MESSAGE)
            )
        )
        requests.close()
        try:
            list(responses)
            raise Failed("bidi: the call succeeded")
        except grpc.RpcError as error:
            expect_code(error, grpc.StatusCode.UNKNOWN, STATUS_MESSAGE)

    def special_status_message(self):
        self.echoed_status(SPECIAL_STATUS_MESSAGE)

    def unimplemented_method(self):
        expect_unimplemented(self.stub.UnimplementedCall, self.empty.Empty())

    def unimplemented_service(self):
        expect_unimplemented(self.unimplemented.UnimplementedCall, self.empty.Empty())

    def cancel_after_begin(self):
        requests = Requests()
        call = self.stub.StreamingInputCall.future(iter(requests), timeout=TIMEOUT)
        call.cancel()
        requests.close()
        expect(call.cancelled(), "the call was not cancelled")
        expect(call.code() == grpc.StatusCode.CANCELLED, f"status {call.code().name}")

    def cancel_after_first_response(self):
        requests = Requests()
        responses = self.stub.FullDuplexCall(iter(requests), timeout=TIMEOUT)
        requests.send(self.ping(REQUEST_SIZES[0], RESPONSE_SIZES[0]))
        next(responses)
        responses.cancel()
        try:
            next(responses)
            raise Failed("a response after the cancel")
        except grpc.RpcError as error:
            expect_code(error, grpc.StatusCode.CANCELLED)
        finally:
            requests.close()

    def timeout_on_sleeping_server(self):
        requests = Requests()
        responses = self.stub.FullDuplexCall(iter(requests), timeout=0.001)
        requests.send(self.m.StreamingOutputCallRequest(payload=self.payload(27182)))
        try:
            next(responses)
            raise Failed("a response before the deadline")
        except grpc.RpcError as error:
            expect_code(error, grpc.StatusCode.DEADLINE_EXCEEDED)
        finally:
            requests.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("proto_dir")
    parser.add_argument("--server_host", default="127.0.0.1")
    parser.add_argument("--server_port", type=int, required=True)
    parser.add_argument("--test_case", default="all")
    args = parser.parse_args()
    names = CASES if args.test_case == "all" else (args.test_case,)
    unknown = [name for name in names if name not in CASES]
    if unknown:
        print(f"unknown test case {unknown[0]!r}", file=sys.stderr)
        return 2
    stubs = interop_stubs.load(args.proto_dir)
    failed = 0
    with grpc.insecure_channel(f"{args.server_host}:{args.server_port}") as channel:
        cases = Cases(channel, *stubs)
        for name in names:
            try:
                getattr(cases, name)()
                line = f"PASS {name}"
            except NotApplicable as why:
                line = f"N/A {name}: {why}"
            except Exception as error:  # every failure, assertion or RPC, is a FAIL line
                failed += 1
                why = f"{type(error).__name__}: {error}".replace("\n", " ")
                line = f"FAIL {name}: {why}"
            print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
