"""Per-upstream-attempt tracing spans (`spawn_upstream_span: true`), Envoy
1.40 and the gateway side by side.

The same bootstrap (one listener, an OpenTelemetry provider exporting over
OTLP/gRPC, four routes) runs through Envoy and then through the gateway,
each exporting to its own in-process OTLP/gRPC receiver (opentelemetry-proto,
grpcio) that keeps every span whole. One HTTP/1.1 backend (Python's
http.server, in a thread) serves both runs and records the `traceparent` and
`tracestate` of every request it gets. One request per scenario, without
trace headers, sequentially:

  /ok        200 with a small body
  /retry     retry_on 5xx, num_retries 2: 503 (content-length 0) twice, then 200
  /refused   a cluster on a closed port, retry_on connect-failure, num_retries 1
  /notfound  404, no retry (a CLIENT span's 4xx is OTLP status ERROR)

Each trace is normalised (the SERVER span; the CLIENT spans in start order:
name, kind, parent, OTLP status, flags, attributes as a dict with the values
that cannot match masked), the backend's view of each attempt (which span
its traceparent named, its tracestate), and what all of a run's spans share
(the resource and scope, section "exporter") are compared, Envoy's against
the gateway's. Every difference fails unless ALLOWED (below) lists it with
its reason; the output lists each one as `DIFF <path>: envoy .., gateway ..`,
then both sides in full for each section that differs. Each
proxy must also have sent the backend, on every attempt, the id of that
attempt's CLIENT span.

Usage: tracing_side_by_side.py GATEWAY_BIN ENVOY_BIN [--base-id N] [-v]
Exit status 0 when everything matched ("tracing side by side: all matched").
"""
import argparse
import fnmatch
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import side_by_side as sbs
from side_by_side import free_port, spawn, stop, wait_for, write_bootstrap

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

OVERALL_S = 150  # a watchdog over the whole script
SETTLE_S = 1.5  # after the expected spans arrived, a pause for unexpected extra ones

SERVER, CLIENT = 2, 3
_ABSENT = object()  # a field, attribute or header one side lacks

# (path, what the client should get, spans expected: server + attempts)
SCENARIOS = [
    ("/ok", 200, 2),
    ("/retry", 200, 4),
    ("/refused", 503, 3),
    ("/notfound", 404, 2),
]

# Known differences, each with its reason. A difference is allowed when
# the scenario matches the first glob and its path (as printed in the diff,
# e.g. `server.attrs.response_size`) the second. Only differences that are
# cosmetic or cannot match belong here: a behaviour difference is a bug to
# fix in the gateway, not to list.
ALLOWED = [
    # (scenario glob, path glob, "differ": both sides have it with other
    # values / "any": also when one side lacks it, reason)
    ("exporter", "resource.telemetry.sdk.version", "differ",
     "each proxy's own build string (Envoy: <sha>/1.40.0/Clean/RELEASE/BoringSSL)"),
    ("exporter", "scope.version", "differ", "Envoy's scope version is its build string, as above"),
    ("exporter", "resource.telemetry.sdk.name", "differ", "each names itself (envoy / gateway)"),
    ("exporter", "resource.telemetry.sdk.language", "differ", "each its own language (cpp / rust)"),
    ("*", "backend[[]*[]].tracestate", "any",
     "Envoy sends an empty `tracestate` where none came; W3C Trace Context says "
     "vendors SHOULD avoid sending an empty one, and the gateway sends none"),
]
# Not listed because compared as dicts: attribute ORDER (Envoy's is the
# order tags were first set; the gateway's may differ, which OTLP ignores).
# Not masked because the setup makes them equal on both sides: node_id (the
# same `node` in both bootstraps), user_agent (the same client), peer.address
# and upstream_address (one backend and one closed port serve both runs,
# and the client is 127.0.0.1 for both). Masked: `guid:x-request-id` (a fresh
# UUID per request) and each proxy's own listener address (in http.url).

# ---------------------------------------------------------------- processes

# ---------------------------------------------------------------- backend


class Backend:
    """HTTP/1.1 backend answering per path, counting per run, recording the
    trace headers of every request."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.seen = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                path = self.path.split("?")[0]
                with backend.lock:
                    n = backend.counts.get(path, 0)
                    backend.counts[path] = n + 1
                    backend.seen.append({
                        "path": path,
                        "traceparent": self.headers.get("traceparent"),
                        "tracestate": self.headers.get("tracestate"),
                    })
                if path == "/ok":
                    self.answer(200, b"ok\n")
                elif path == "/retry":
                    # Headers-only 503 (so Envoy does not tag `canceled`).
                    self.answer(503, b"") if n < 2 else self.answer(200, b"third time\n")
                elif path == "/notfound":
                    self.answer(404, b"not here\n")
                else:
                    self.answer(500, b"unexpected path\n")

            def answer(self, code, body):
                self.send_response(code)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self):
        with self.lock:
            self.counts.clear()
            self.seen = []

    def take(self):
        with self.lock:
            seen, self.seen = self.seen, []
        return seen


# ---------------------------------------------------------------- OTLP


def any_value(v):
    """An attribute value as a comparable string: strings as they are,
    other types prefixed with theirs (Envoy sends only strings)."""
    k = v.WhichOneof("value")
    if k == "string_value":
        return v.string_value
    if k == "array_value":
        return "array:[" + ", ".join(any_value(e) for e in v.array_value.values) + "]"
    if k is None:
        return "<empty AnyValue>"
    return f"{k.replace('_value', '')}:{getattr(v, k)}"


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self):
        self.lock = threading.Lock()
        self.spans = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request, context):
        got = []
        for rs in request.resource_spans:
            resource = {a.key: any_value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    attrs = {}
                    dup = []
                    for a in s.attributes:
                        if a.key in attrs:
                            dup.append(a.key)
                        attrs[a.key] = any_value(a.value)
                    got.append({
                        "name": s.name, "kind": s.kind,
                        "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(), "trace_state": s.trace_state,
                        "flags": s.flags, "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano, "attrs": attrs,
                        "attr_order": [a.key for a in s.attributes], "dup_keys": dup,
                        "status_code": s.status.code, "status_message": s.status.message,
                        "events": [e.name for e in s.events], "links": len(s.links),
                        "scope": ss.scope.name, "scope_version": ss.scope.version,
                        "resource": resource,
                    })
        with self.lock:
            self.spans.extend(got)
        return trace_service_pb2.ExportTraceServiceResponse()

    def count(self):
        with self.lock:
            return len(self.spans)

    def take(self):
        with self.lock:
            return list(self.spans)

    def stop(self):
        self.server.stop(0)


# ---------------------------------------------------------------- bootstrap


def bootstrap(listener_port, admin_port, backend_port, closed_port, otlp_port, envoy_runtime):
    def cluster(name, port, h2=False):
        c = {"name": name, "type": "STATIC", "connect_timeout": "1s",
             "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                 {"endpoint": {"address": {"socket_address": {
                     "address": "127.0.0.1", "port_value": port}}}}]}]}}
        if h2:
            c["typed_extension_protocol_options"] = {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": {"http2_protocol_options": {}}}}
        return c

    def route(path, cluster_name, retry=None):
        r = {"cluster": cluster_name}
        if retry:
            r["retry_policy"] = retry
        return {"match": {"path": path}, "route": r}

    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "ingress",
        "tracing": {
            "random_sampling": {"value": 100},
            "spawn_upstream_span": True,
            "provider": {"name": "envoy.tracers.opentelemetry", "typed_config": {
                "@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig",
                "grpc_service": {"envoy_grpc": {"cluster_name": "otel"}, "timeout": "1s"},
                "service_name": "side-by-side"}},
        },
        "route_config": {"name": "routes", "virtual_hosts": [{
            "name": "all", "domains": ["*"], "routes": [
                route("/ok", "backend"),
                route("/retry", "backend", {"retry_on": "5xx", "num_retries": 2}),
                route("/refused", "closed", {"retry_on": "connect-failure", "num_retries": 1}),
                route("/notfound", "backend"),
            ]}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    }
    b = {
        "node": {"id": "side-by-side-node", "cluster": "side-by-side"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {
            "listeners": [{
                "name": "ingress",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": listener_port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}],
            }],
            "clusters": [cluster("backend", backend_port), cluster("closed", closed_port),
                         cluster("otel", otlp_port, h2=True)],
        },
    }
    # The one difference between the two bootstraps: Envoy's copy makes its
    # OpenTelemetry tracer export each span at once (by default it batches
    # 5 spans or waits 5 s); the gateway exports within about a second on
    # its own, and refuses runtime keys it does not implement.
    if envoy_runtime:
        b["layered_runtime"] = {"layers": [{"name": "static", "static_layer": {
            "tracing.opentelemetry.min_flush_spans": 1,
            "tracing.opentelemetry.flush_interval_ms": 200}}]}
    return b


# ---------------------------------------------------------------- one run


def request(addr, path):
    try:
        with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        e.read()
        return e.code
    except OSError as e:
        return f"error: {e}"


def start_gateway(gateway, backend, closed_port, collector):
    """The gateway on port 0 everywhere; its listener's address read from
    its output (`listener ingress on <addr>`)."""
    log = os.path.join(sbs.work_dir(), "gateway.log")
    path = write_bootstrap("gateway", bootstrap(0, 0, backend.port, closed_port, collector.port,
                                                envoy_runtime=False))
    proc = spawn([gateway, "-c", path, "--shards", "1"], log)

    def reported():
        with open(log, errors="replace") as f:
            m = re.search(r"listener ingress on (\S+)", f.read())
        return m and m.group(1)
    try:
        return proc, wait_for("the gateway's listener", reported, proc=proc, log=log)
    except Exception:
        stop(proc)
        raise


def start_envoy(envoy, base_id, backend, closed_port, collector):
    """Envoy on fixed ports (chosen free by the kernel, then released),
    ready when its admin says so. Started again, on other ports and another
    base id, when it exits at once: another Envoy may hold the base id's
    domain socket (a concurrent run), or a port may have been taken since."""
    log = os.path.join(sbs.work_dir(), "envoy.log")
    for attempt in range(3):
        lport, aport = free_port(), free_port()
        bid = base_id if attempt == 0 else base_id + 1 + (os.getpid() * 7 + attempt) % 400
        path = write_bootstrap("envoy", bootstrap(lport, aport, backend.port, closed_port,
                                                  collector.port, envoy_runtime=True))
        proc = spawn([envoy, "-c", path, "--concurrency", "1", "--base-id", str(bid),
                      "-l", "warning"], log)

        def ready():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{aport}/ready", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        try:
            wait_for("Envoy's admin /ready", ready, proc=proc, log=log)
            return proc, f"127.0.0.1:{lport}"
        except RuntimeError:
            stop(proc)
            if proc.returncode is None or attempt == 2:
                raise
            print(f"  envoy exited at start (base id {bid}), starting it again", flush=True)
    raise AssertionError("unreachable")


def run_proxy(label, start, backend, collector):
    """Starts one proxy, sends the scenarios' requests, waits for the spans
    and stops it. Returns (listener address, client statuses, spans,
    backend records)."""
    backend.reset()
    proc, addr = start()
    try:
        statuses = {}
        for p, _, _ in SCENARIOS:
            statuses[p] = request(addr, p)
        want = sum(n for _, _, n in SCENARIOS)
        try:
            wait_for(f"{want} spans from {label}", lambda: collector.count() >= want, proc=proc)
        except RuntimeError as e:
            print(f"  {label}: {e} (got {collector.count()}); comparing what came", flush=True)
        time.sleep(SETTLE_S)
        return addr, statuses, collector.take(), backend.take()
    finally:
        stop(proc)


# ---------------------------------------------------------------- normalising

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def mask_attrs(attrs, proxy_addr):
    out = {}
    for k, v in attrs.items():
        if k == "guid:x-request-id" and UUID.match(v):
            v = "<uuid>"
        v = v.replace(proxy_addr, "<proxy>")
        out[k] = v
    return out


def group_traces(spans):
    """Traces, ordered by when their first span started."""
    by_trace = {}
    for s in spans:
        by_trace.setdefault(s["trace_id"], []).append(s)
    return sorted(by_trace.values(), key=lambda ss: min(s["start"] for s in ss))


def normalise(trace, seen, status, proxy_addr, problems, label, scenario):
    """The comparable view of one scenario's trace, and the checks that
    each proxy must pass on its own (in `problems`)."""
    view = {"client.status": status}
    if trace is None:
        view["spans"] = 0
        problems.append(f"{label} {scenario}: no trace exported")
        return view
    servers = [s for s in trace if s["kind"] == SERVER]
    others = sorted([s for s in trace if s["kind"] != SERVER], key=lambda s: (s["start"], s["end"]))
    view["spans"] = len(trace)
    view["server spans"] = len(servers)
    view["other spans"] = len(others)
    server = servers[0] if len(servers) == 1 else None
    if len(servers) != 1:
        problems.append(f"{label} {scenario}: {len(servers)} SERVER spans")
    if server:
        view["server"] = {
            "name": server["name"], "kind": server["kind"],
            "parent": server["parent_span_id"] or "<none>",
            "status": server["status_code"], "status.message": server["status_message"],
            "flags": server["flags"], "trace_state": server["trace_state"], "events": server["events"], "links": server["links"],
            "duplicate keys": server["dup_keys"],
            "attrs": mask_attrs(server["attrs"], proxy_addr),
        }
    for i, c in enumerate(others):
        nested = bool(server) and server["start"] <= c["start"] and c["end"] <= server["end"]
        after_previous = i == 0 or others[i - 1]["end"] <= c["start"]
        view[f"clients[{i}]"] = {
            "name": c["name"], "kind": c["kind"],
            "parent": "<server span>" if server and c["parent_span_id"] == server["span_id"]
            else (c["parent_span_id"] or "<none>"),
            "status": c["status_code"], "status.message": c["status_message"],
            "flags": c["flags"], "trace_state": c["trace_state"], "events": c["events"], "links": c["links"],
            "duplicate keys": c["dup_keys"],
            "within the server span": nested,
            "starts after the previous attempt ended": after_previous,
            "attrs": mask_attrs(c["attrs"], proxy_addr),
        }
    # What the backend saw: for each request, which CLIENT span's id it carried.
    client_ids = [c["span_id"] for c in others]
    trace_id = trace[0]["trace_id"]
    for j, rec in enumerate(seen):
        tp = rec["traceparent"]
        m = TRACEPARENT.match(tp or "")
        if not m:
            which = f"malformed: {tp!r}"
        elif m.group(1) != trace_id:
            which = "another trace"
        elif m.group(2) in client_ids:
            which = f"clients[{client_ids.index(m.group(2))}]"
        elif server and m.group(2) == server["span_id"]:
            which = "the server span"
        else:
            which = "an unknown span"
        view[f"backend[{j}]"] = {
            "traceparent span": which,
            "traceparent flags": m.group(3) if m else None,
            "tracestate": _ABSENT if rec["tracestate"] is None else rec["tracestate"],
        }
        if which != f"clients[{j}]":
            problems.append(f"{label} {scenario}: backend request {j} carried {tp!r}, "
                            f"the id of {which}, not clients[{j}]'s ({client_ids})")
    view["backend requests"] = len(seen)
    return view


def exporter_view(spans):
    """What every span of a run shares: its resource and its scope."""
    view = {}
    resources = {json.dumps(s["resource"], sort_keys=True) for s in spans}
    scopes = {(s["scope"], s["scope_version"]) for s in spans}
    view["distinct resources"] = len(resources)
    view["distinct scopes"] = len(scopes)
    if len(resources) == 1:
        view["resource"] = json.loads(resources.pop())
    if len(scopes) == 1:
        name, version = scopes.pop()
        view["scope.name"] = name
        if version:  # proto3: empty is unset
            view["scope.version"] = version
    return view


def attr_orders(trace):
    """Each span's attribute keys in the order exported (for information)."""
    if not trace:
        return {}
    servers = [s for s in trace if s["kind"] == SERVER]
    others = sorted([s for s in trace if s["kind"] != SERVER], key=lambda s: (s["start"], s["end"]))
    out = {f"clients[{i}]": c["attr_order"] for i, c in enumerate(others)}
    if servers:
        out["server"] = servers[0]["attr_order"]
    return out


def flatten(view, prefix=""):
    out = {}
    for k, v in view.items():
        key = f"{prefix}{k}"
        if v is _ABSENT:
            continue
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def allowed(scenario, path, ev, gv):
    for sglob, pglob, mode, why in ALLOWED:
        if not (fnmatch.fnmatchcase(scenario, sglob) and fnmatch.fnmatchcase(path, pglob)):
            continue
        if mode == "any" or (ev is not _ABSENT and gv is not _ABSENT):
            return why
    return None


def show(v):
    return "<absent>" if v is _ABSENT else json.dumps(v) if not isinstance(v, str) else repr(v)



# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gateway")
    ap.add_argument("envoy")
    ap.add_argument("--base-id", type=int, default=31)
    ap.add_argument("-v", "--verbose", action="store_true", help="print both views in full")
    args = ap.parse_args()

    sbs.begin("tracing side by side", OVERALL_S)

    backend = Backend()
    # A closed port that stays closed: bound, never listening (connecting
    # to it is refused), held until the end so nothing else takes it.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]

    results = {}
    # Each proxy exports to a receiver of its own.
    col = Collector()
    try:
        results["envoy"] = run_proxy(
            "envoy", lambda: start_envoy(args.envoy, args.base_id, backend, closed_port, col),
            backend, col)
    finally:
        col.stop()
    col = Collector()
    try:
        results["gateway"] = run_proxy(
            "gateway", lambda: start_gateway(args.gateway, backend, closed_port, col), backend, col)
    finally:
        col.stop()

    problems = []
    views = {}
    orders = {}
    exporters = {}
    for label, (addr, statuses, spans, seen) in results.items():
        traces = group_traces(spans)
        if len(traces) != len(SCENARIOS):
            problems.append(f"{label}: {len(traces)} traces exported, {len(SCENARIOS)} expected")
        views[label] = {}
        orders[label] = {}
        exporters[label] = exporter_view(spans)
        for i, (scenario, want_status, want_spans) in enumerate(SCENARIOS):
            trace = traces[i] if i < len(traces) else None
            mine = [r for r in seen if r["path"] == scenario]
            if statuses[scenario] != want_status:
                problems.append(f"{label} {scenario}: client got {statuses[scenario]}, not {want_status}")
            if trace is not None and len(trace) != want_spans:
                problems.append(f"{label} {scenario}: {len(trace)} spans, {want_spans} expected")
            views[label][scenario] = normalise(trace, mine, statuses[scenario], addr, problems, label, scenario)
            orders[label][scenario] = attr_orders(trace)
        if not spans:
            problems.append(f"{label}: exported no spans at all; log:\n" +
                            open(os.path.join(sbs.work_dir(), f"{label}.log"), errors="replace").read()[-3000:])

    failed = bool(problems)
    details = []
    sections = [("exporter", exporters["envoy"], exporters["gateway"])] + [
        (sc, views["envoy"][sc], views["gateway"][sc]) for sc, _, _ in SCENARIOS]
    for section, ev_view, gv_view in sections:
        e, g = flatten(ev_view), flatten(gv_view)
        paths = list(e) + [p for p in g if p not in e]
        diffs, known, listing = [], [], []
        for path in paths:
            ev, gv = e.get(path, _ABSENT), g.get(path, _ABSENT)
            if ev == gv:
                listing.append(f"    = {path}: {show(ev)}")
                continue
            why = allowed(section, path, ev, gv)
            line = f"{path}: envoy {show(ev)}, gateway {show(gv)}"
            (known if why else diffs).append(line + (f"   [known: {why}]" if why else ""))
            listing.append(f"    {'~' if why else '!'} {line}")
        verdict = "matched" if not diffs else f"{len(diffs)} difference(s)"
        print(f"== {section}: {verdict}" + (f", {len(known)} known" if known else ""))
        for line in diffs:
            print("  DIFF  " + line)
        for line in known:
            print("  known " + line)
        if section != "exporter":
            # Attribute order is not compared (OTLP attributes are a map):
            # shown with -v for information.
            for span, eo in orders["envoy"][section].items():
                go = orders["gateway"][section].get(span)
                if args.verbose and go and eo != go:
                    print(f"  order {span}.attrs (not compared): envoy {eo}; gateway {go}")
        if diffs or args.verbose:
            details.append(f"-- {section}, both sides (= same, ! differs, ~ known difference):")
            details.extend(listing)
        failed |= bool(diffs)
    if details:
        print("\n".join(details))
    for p in problems:
        print("PROBLEM " + p)
    if failed:
        print("tracing side by side: FAILED")
        return 1
    print("tracing side by side: all matched")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as e:  # noqa: BLE001 - any failure is a CI failure, reported plainly
        print(f"tracing side by side: error: {e}", file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sbs.cleanup()
    os._exit(code)
