"""An OTLP/gRPC trace receiver built on the official generated protos
(opentelemetry-proto, grpcio): it prints each span it gets as one JSON line
(service name, span name, kind, ids in hex, status code attribute) and
answers every export. An independent decoder of what the gateway's
OpenTelemetry tracer sends. Usage: otlp_receiver.py PORT_FILE"""
import json
import sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        for rs in request.resource_spans:
            service = next(
                (a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), ""
            )
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attrs = {a.key: a.value.string_value for a in span.attributes}
                    print(json.dumps({
                        "service": service,
                        "name": span.name,
                        "kind": span.kind,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "status_code": attrs.get("http.status_code"),
                    }), flush=True)
        return trace_service_pb2.ExportTraceServiceResponse()


server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
with open(sys.argv[1], "w") as f:
    f.write(f"{port}\n")
server.wait_for_termination()
