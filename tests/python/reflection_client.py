"""A gRPC server reflection client that is not ours (grpcio-reflection) asking an rpc
provider what it serves.

Usage: reflection_client.py HOST:PORT

Prints one line per finding and exits 0, whatever the provider answers:
- `v1alpha services: NAME,NAME,...` — the list, through grpcio-reflection's
  ProtoReflectionDescriptorDatabase (which speaks grpc.reflection.v1alpha);
- `SayHello input: helloworld.HelloRequest (fields name,count)` — the method's input
  type, looked up in a descriptor pool over that database (file_containing_symbol and
  the files it depends on);
- `v1 services: NAME,...` — the same list asked of grpc.reflection.v1 (same messages on
  the wire, another service name), with the v1alpha message classes;
- `v1alpha: CODE` or `v1: CODE` instead, when the provider answers with an error
  status (UNIMPLEMENTED when reflection is off).
"""

import sys

import grpc
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

TIMEOUT = 10


def v1alpha(channel):
    database = ProtoReflectionDescriptorDatabase(channel)
    try:
        services = database.get_services()
    except grpc.RpcError as error:
        print(f"v1alpha: {error.code().name}")
        return
    print(f"v1alpha services: {','.join(sorted(services))}")
    if "helloworld.Greeter" in services:
        pool = DescriptorPool(database)
        method = pool.FindMethodByName("helloworld.Greeter.SayHello")
        fields = ",".join(field.name for field in method.input_type.fields)
        print(f"SayHello input: {method.input_type.full_name} (fields {fields})")


def v1(channel):
    info = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    try:
        responses = list(info(iter([request]), timeout=TIMEOUT))
    except grpc.RpcError as error:
        print(f"v1: {error.code().name}")
        return
    names = [s.name for r in responses for s in r.list_services_response.service]
    print(f"v1 services: {','.join(sorted(names))}")


def main():
    with grpc.insecure_channel(sys.argv[1]) as channel:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
        v1alpha(channel)
        v1(channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
