"""Admin `/stats/prometheus`, Envoy 1.40 and the gateway side by side.

The same bootstrap (each proxy gets its own copy, see `bootstrap()`) runs
through Envoy and then through the gateway, in front of one HTTP/1.1 backend
(Python's http.server, in a thread) and one closed port. Three listeners:

  ingress (HCM stat_prefix ingress_http)
    /ok     -> cluster backend, 200 "ok"
    /fail   -> cluster backend, 503 "fail"
    /dead   -> cluster dead (one endpoint on a port bound but never
               listening: every connect is refused), 503 from the proxy
    /retry  -> cluster backend, retry_on 5xx, num_retries 1: 503 twice
    others  -> no route, 404
  other   (HCM stat_prefix other_http): everything -> cluster backend
  filters (HCM stat_prefix filters_http): everything -> cluster backend,
          through the HTTP filters health_check (/healthz answered here),
          fault (header_abort), rbac (DENY /forbidden; shadow DENY of any
          request with x-shadow; rules_stat_prefix myrbac_),
          local_ratelimit (stat_prefix lrl, a bucket of 3 that never
          refills here), then the router

Traffic, each request on a fresh connection, sequentially: 10 x /ok,
3 x /fail, 2 x /dead, 2 x /retry, 2 x /nothing on ingress, 1 x /ok on other;
on filters 2 x /healthz, 1 abort (x-envoy-fault-abort-request: 503),
1 x /forbidden, 1 x /ok with x-shadow, 2 x /ok, then 2 x /ok refused 429.
Then the script waits until the histograms are current (Envoy merges them
only at its stats flush) and the values have settled, and scrapes
`/stats/prometheus` once per proxy.

Both scrapes are parsed twice: by prometheus_client's parser
(`text_string_to_metric_families`) and by a literal line parser that keeps
each series exactly as printed (label order included) and checks the
`# TYPE` lines. Compared, Envoy's against the gateway's:

  series      a fixed list (COMPARED, below) of series, by name and labels
              exactly as Envoy prints them; values must be equal (and
              Envoy's must be what the traffic implies, else the setup is
              broken: PROBLEM). Histograms by `_count` only.
  histograms  each compared histogram: all 20 default `le` buckets, `le`
              the last label, cumulative, +Inf equal to `_count`, a `_sum`.
  format      `# HELP`/other comment/blank lines, the final newline, the
              block order (every counter family, then every gauge family,
              then every histogram family), duplicate `# TYPE`s, samples
              outside a `# TYPE`d family, label-less series without `{}`,
              whether prometheus_client parses it and agrees with the line
              parser, the content type.
  types       every `envoy_*` family the gateway prints has Envoy's type.

Envoy's listener label is `<ip>_<port>` of the listener's address, and the
two proxies listen on different ports: in both scrapes the label value is
rewritten to `<ingress>` / `<other>` / `<filters>` (by the ports each proxy
was given / reported), in every series that has it, before anything else.
Every difference fails unless ALLOWED (below) lists it with its reason; the
output lists each as `DIFF <section> <item>: envoy .., gateway ..`. Families
Envoy prints that the gateway does not (outside COMPARED) and `envoy_*`
families only the gateway prints are listed for information and do not
fail.

Usage: stats_side_by_side.py GATEWAY_BIN ENVOY_BIN [--base-id N] [-v]
Exit status 0 when everything matched ("stats side by side: all matched"),
1 on a difference or a problem, 2 when the run itself failed (a proxy did
not start, the watchdog fired). SBS_KEEP=1 keeps the work directory (both
bootstraps, logs and scrapes) and prints its path.
"""
import argparse
import fnmatch
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prom_text import LineParse, View, split_key
import side_by_side as sbs
from side_by_side import WAIT_S, free_port, log_tail, spawn, stop, wait_for, write_bootstrap

OVERALL_S = 120  # a watchdog over the whole script
ENVOY_FLUSH_S = 1  # Envoy's stats_flush_interval (its copy of the bootstrap only)

# ---------------------------------------------------------------- traffic

N_OK, N_FAIL, N_DEAD, N_RETRY, N_NOROUTE, N_OTHER = 10, 3, 2, 2, 2, 1
# The `filters` listener, in the order sent: health checks (answered by
# health_check), fault aborts (by header), RBAC denials (/forbidden),
# shadow-denied requests (x-shadow: served), plain requests (served), then
# requests the local rate limit refuses: its bucket holds exactly the
# requests that reach it before (shadow + plain) and never refills here.
N_F_HC, N_F_ABORT, N_F_DENY, N_F_SHADOW, N_F_OK, N_F_LIMITED = 2, 1, 1, 1, 2, 2
LRL_TOKENS = N_F_SHADOW + N_F_OK
# (listener, path, request headers, count, the status the client must get)
TRAFFIC = [
    ("ingress", "/ok", {}, N_OK, 200),
    ("ingress", "/fail", {}, N_FAIL, 503),
    ("ingress", "/dead", {}, N_DEAD, 503),
    ("ingress", "/retry", {}, N_RETRY, 503),
    ("ingress", "/nothing", {}, N_NOROUTE, 404),
    ("other", "/ok", {}, N_OTHER, 200),
    ("filters", "/healthz", {}, N_F_HC, 200),
    ("filters", "/ok", {"x-envoy-fault-abort-request": "503"}, N_F_ABORT, 503),
    ("filters", "/forbidden", {}, N_F_DENY, 403),
    ("filters", "/ok", {"x-shadow": "1"}, N_F_SHADOW, 200),
    ("filters", "/ok", {}, N_F_OK, 200),
    ("filters", "/ok", {}, N_F_LIMITED, 429),
]
N_INGRESS = N_OK + N_FAIL + N_DEAD + N_RETRY + N_NOROUTE  # 19
N_FILTERS = N_F_HC + N_F_ABORT + N_F_DENY + N_F_SHADOW + N_F_OK + N_F_LIMITED  # 9
N_F_UP = N_F_SHADOW + N_F_OK  # the filters listener's requests that reach the backend
# What the backend must see per path, through either proxy (a retried
# /retry is two requests upstream).
BACKEND_WANTS = {"/ok": N_OK + N_OTHER + N_F_UP, "/fail": N_FAIL, "/retry": 2 * N_RETRY}

# ---------------------------------------------------------------- compared series

CL = 'envoy_cluster_name="{}"'
HP = 'envoy_http_conn_manager_prefix="{}"'
LA = 'envoy_listener_address="<{}>"'  # normalised: see normalise_listeners()

# 19 final answers charged to backend. The filters listener's local
# replies (health check, abort, RBAC 403, rate-limit 429) never reach the
# router and are charged to no cluster.
BACKEND_FINAL = N_OK + N_OTHER + N_F_UP + N_FAIL + N_RETRY
BACKEND_200 = N_OK + N_OTHER + N_F_UP
COMPARED = [
    # ---- cluster family. upstream_rq_total counts each attempt that got a
    # connection (the two /retry attempts each; /dead never got one); the
    # per-code, per-class and _completed ones count the final answer
    # charged by the router, including its own 503 for /dead; the 503s a
    # retry replaced go to retry.upstream_rq_<code>.
    ("envoy_cluster_upstream_rq_total{" + CL.format("backend") + "}", BACKEND_200 + N_FAIL + 2 * N_RETRY),
    ("envoy_cluster_upstream_rq_total{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_rq_completed{" + CL.format("backend") + "}", BACKEND_FINAL),
    ("envoy_cluster_upstream_rq_completed{" + CL.format("dead") + "}", N_DEAD),
    ('envoy_cluster_upstream_rq{envoy_response_code="200",' + CL.format("backend") + "}", BACKEND_200),
    ('envoy_cluster_upstream_rq{envoy_response_code="503",' + CL.format("backend") + "}", N_FAIL + N_RETRY),
    ('envoy_cluster_upstream_rq{envoy_response_code="503",' + CL.format("dead") + "}", N_DEAD),
    ('envoy_cluster_upstream_rq_xx{envoy_response_code_class="2",' + CL.format("backend") + "}", BACKEND_200),
    ('envoy_cluster_upstream_rq_xx{envoy_response_code_class="5",' + CL.format("backend") + "}", N_FAIL + N_RETRY),
    ('envoy_cluster_upstream_rq_xx{envoy_response_code_class="5",' + CL.format("dead") + "}", N_DEAD),
    ('envoy_cluster_retry_upstream_rq{envoy_response_code="503",' + CL.format("backend") + "}", N_RETRY),
    ("envoy_cluster_upstream_rq_retry{" + CL.format("backend") + "}", N_RETRY),
    ("envoy_cluster_upstream_rq_retry{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_rq_retry_limit_exceeded{" + CL.format("backend") + "}", N_RETRY),
    ("envoy_cluster_upstream_rq_retry_limit_exceeded{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_rq_retry_success{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_upstream_rq_retry_success{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_rq_pending_overflow{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_upstream_rq_pending_overflow{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_rq_timeout{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_upstream_rq_timeout{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_rq_per_try_timeout{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_upstream_rq_per_try_timeout{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_cx_connect_fail{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_upstream_cx_connect_fail{" + CL.format("dead") + "}", N_DEAD),
    ("envoy_cluster_upstream_rq_active{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_upstream_rq_active{" + CL.format("dead") + "}", 0),
    # dead only: no connection to it can ever be open. backend's depends on
    # the pool (see NOT_COMPARED).
    ("envoy_cluster_upstream_cx_active{" + CL.format("dead") + "}", 0),
    # Envoy counts each refused connect as a connection that ended, closed
    # by the remote end, with no request on it yet (the request waits in
    # the pool's queue, not on the connection).
    ("envoy_cluster_upstream_cx_destroy{" + CL.format("dead") + "}", N_DEAD),
    ("envoy_cluster_upstream_cx_destroy_remote{" + CL.format("dead") + "}", N_DEAD),
    ("envoy_cluster_upstream_cx_destroy_local{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_upstream_cx_destroy_with_active_rq{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_membership_total{" + CL.format("backend") + "}", 1),
    ("envoy_cluster_membership_total{" + CL.format("dead") + "}", 1),
    ("envoy_cluster_membership_healthy{" + CL.format("backend") + "}", 1),
    ("envoy_cluster_membership_healthy{" + CL.format("dead") + "}", 1),
    ("envoy_cluster_membership_degraded{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_membership_degraded{" + CL.format("dead") + "}", 0),
    ("envoy_cluster_membership_excluded{" + CL.format("backend") + "}", 0),
    ("envoy_cluster_membership_excluded{" + CL.format("dead") + "}", 0),
    # One per final upstream answer; none for connect failures (Envoy
    # prints no upstream_rq_time series for dead at all).
    ("envoy_cluster_upstream_rq_time_count{" + CL.format("backend") + "}", BACKEND_FINAL),
    # Failed connects are not timed; the histogram is there, empty.
    ("envoy_cluster_upstream_cx_connect_ms_count{" + CL.format("dead") + "}", 0),
]
# Per HCM: (prefix, its listener, requests, answers by class 2/4/5, no
# route). Envoy leaves the health_check filter's own answers out of
# downstream_rq_completed and _<n>xx (at the HCM and the listener level),
# not out of downstream_rq_total or the request-time histogram.
for _p, _l, _rq, _ok, _4xx, _5xx, _noroute in [
        ("ingress_http", "ingress", N_INGRESS, N_OK, N_NOROUTE, N_FAIL + N_DEAD + N_RETRY, N_NOROUTE),
        ("other_http", "other", N_OTHER, N_OTHER, 0, 0, 0),
        ("filters_http", "filters", N_FILTERS, N_F_SHADOW + N_F_OK, N_F_DENY + N_F_LIMITED, N_F_ABORT, 0)]:
    # ---- http family. One connection per request, closed by the client
    # once it has the answer (no answer here closes the connection: local
    # replies keep HTTP/1.1 connections open), so every end is remote and
    # none has a request in flight.
    _h = HP.format(_p)
    _completed = _ok + _4xx + _5xx  # = _rq but for the filters listener's health checks
    COMPARED += [
        ("envoy_http_downstream_rq_total{" + _h + "}", _rq),
        ("envoy_http_downstream_rq_completed{" + _h + "}", _completed),
        ('envoy_http_downstream_rq_xx{envoy_response_code_class="2",' + _h + "}", _ok),
        ('envoy_http_downstream_rq_xx{envoy_response_code_class="4",' + _h + "}", _4xx),
        ('envoy_http_downstream_rq_xx{envoy_response_code_class="5",' + _h + "}", _5xx),
        ("envoy_http_downstream_rq_active{" + _h + "}", 0),
        ("envoy_http_downstream_cx_total{" + _h + "}", _rq),
        ("envoy_http_downstream_cx_active{" + _h + "}", 0),
        ("envoy_http_downstream_cx_http1_active{" + _h + "}", 0),
        ("envoy_http_downstream_cx_http2_active{" + _h + "}", 0),
        ("envoy_http_downstream_cx_ssl_active{" + _h + "}", 0),
        ("envoy_http_downstream_cx_destroy{" + _h + "}", _rq),
        ("envoy_http_downstream_cx_destroy_remote{" + _h + "}", _rq),
        ("envoy_http_downstream_cx_destroy_local{" + _h + "}", 0),
        ("envoy_http_downstream_cx_destroy_active_rq{" + _h + "}", 0),
        ("envoy_http_downstream_cx_destroy_local_active_rq{" + _h + "}", 0),
        ("envoy_http_downstream_cx_destroy_remote_active_rq{" + _h + "}", 0),
        ("envoy_http_downstream_cx_http1_total{" + _h + "}", _rq),
        ("envoy_http_downstream_rq_http1_total{" + _h + "}", _rq),
        ("envoy_http_no_route{" + _h + "}", _noroute),
        ("envoy_http_downstream_rq_time_count{" + _h + "}", _rq),
        ("envoy_http_downstream_cx_length_ms_count{" + _h + "}", _rq),
    ]
    # ---- listener family: its connections (all on worker 0: Envoy
    # --concurrency 1, gateway --shards 1), and its HCM's answers again,
    # per listener (worker label first, the listener's address last).
    _a = LA.format(_l)
    _w = 'envoy_worker_id="0",' + _a
    _la = _h + "," + _a
    COMPARED += [
        ("envoy_listener_downstream_cx_total{" + _a + "}", _rq),
        ("envoy_listener_downstream_cx_active{" + _a + "}", 0),
        ("envoy_listener_downstream_cx_destroy{" + _a + "}", _rq),
        ("envoy_listener_downstream_cx_length_ms_count{" + _a + "}", _rq),
        ("envoy_listener_worker_downstream_cx_total{" + _w + "}", _rq),
        ("envoy_listener_worker_downstream_cx_active{" + _w + "}", 0),
        ("envoy_listener_no_filter_chain_match{" + _a + "}", 0),
        ('envoy_listener_http_downstream_rq_xx{envoy_response_code_class="2",' + _la + "}", _ok),
        ('envoy_listener_http_downstream_rq_xx{envoy_response_code_class="4",' + _la + "}", _4xx),
        ('envoy_listener_http_downstream_rq_xx{envoy_response_code_class="5",' + _la + "}", _5xx),
        ("envoy_listener_http_downstream_rq_completed{" + _la + "}", _completed),
    ]
_F = HP.format("filters_http")
COMPARED += [
    # ---- the filters listener's HTTP filters. health_check counts only
    # the requests it matches (and answers: pass_through_mode false).
    ("envoy_http_health_check_request_total{" + _F + "}", N_F_HC),
    ("envoy_http_health_check_ok{" + _F + "}", N_F_HC),
    ("envoy_http_health_check_failed{" + _F + "}", 0),
    # fault: header_abort at 100 %, only the requests with the header.
    ("envoy_http_fault_aborts_injected{" + _F + "}", N_F_ABORT),
    ("envoy_http_fault_delays_injected{" + _F + "}", 0),
    ("envoy_http_fault_faults_overflow{" + _F + "}", 0),
    ("envoy_http_fault_active_faults{" + _F + "}", 0),
    # rbac judges what health_check and fault let through; the shadow
    # rules judge each of those too, the denied one included. Only the
    # enforcing rules have a stat prefix (rules_stat_prefix, a label);
    # the shadow counters have none.
    ('envoy_http_rbac_allowed{envoy_rbac_http_prefix="myrbac_",' + _F + "}",
     N_F_SHADOW + N_F_OK + N_F_LIMITED),
    ('envoy_http_rbac_denied{envoy_rbac_http_prefix="myrbac_",' + _F + "}", N_F_DENY),
    ("envoy_http_rbac_shadow_allowed{" + _F + "}", N_F_DENY + N_F_OK + N_F_LIMITED),
    ("envoy_http_rbac_shadow_denied{" + _F + "}", N_F_SHADOW),
    # local_ratelimit (stats at the root, under its stat_prefix, no HCM
    # label): every request rbac allowed; the first LRL_TOKENS pass, the
    # rest are refused (enforced: filter_enforced 100 %).
    ('envoy_http_local_rate_limit_enabled{envoy_local_http_ratelimit_prefix="lrl"}', N_F_UP + N_F_LIMITED),
    ('envoy_http_local_rate_limit_ok{envoy_local_http_ratelimit_prefix="lrl"}', LRL_TOKENS),
    ('envoy_http_local_rate_limit_rate_limited{envoy_local_http_ratelimit_prefix="lrl"}', N_F_LIMITED),
    ('envoy_http_local_rate_limit_enforced{envoy_local_http_ratelimit_prefix="lrl"}', N_F_LIMITED),
]
COMPARED += [
    # ---- server family (Envoy --concurrency 1, gateway --shards 1)
    ("envoy_server_live{}", 1),
    ("envoy_server_concurrency{}", 1),
    # No certificate in the bootstrap: Envoy's "never" (u32::MAX).
    ("envoy_server_days_until_first_cert_expiring{}", 4294967295),
    ("envoy_cluster_manager_active_clusters{}", 2),
    ("envoy_cluster_manager_warming_clusters{}", 0),
    ("envoy_listener_manager_total_listeners_active{}", 3),
    ("envoy_listener_manager_total_listeners_warming{}", 0),
    ("envoy_listener_manager_total_filter_chains_draining{}", 0),
    ("envoy_listener_manager_workers_started{}", 1),
]
# Deliberately NOT compared (each proxy's own business, or no traffic-
# determined value):
#  * backend's upstream_cx_total / upstream_cx_connect_ms_count /
#    upstream_cx_active / upstream_cx_destroy* / upstream_cx_length_ms /
#    upstream_rq_per_cx / upstream_rq_pending_total: how many upstream
#    connections serve the 19 requests is connection-pool policy. Envoy
#    opens 3 (cx_connect_ms_count 3, cx_active 1 at the end): its HTTP/1
#    pool keeps one keep-alive connection, but when it retries a 503 whose
#    body has not arrived yet it resets the stream, which closes that
#    connection (2 /retry -> 2 new connections). A proxy that reads the
#    5-byte body and reuses the connection (1 connection), keeps several,
#    pre-connects, or closes idle ones is as correct; Envoy and a
#    well-behaved proxy need not agree. dead's are compared where they
#    are fixed: connect_fail, cx_destroy(_remote) 2, cx_active 0,
#    connect_ms_count 0.
#  * histogram _sum and bucket values below +Inf: timings.
#  * bytes (rx/tx_bytes_total), server uptime/memory/version/state, the
#    admin listener and HCM (scraping moves them), outlier detection and
#    active health checks (neither is configured).

LES = ["0.5", "1", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000",
       "10000", "30000", "60000", "300000", "600000", "1800000", "3600000", "+Inf"]
# The flush wait polls the request-time count of the listener sent to last.
FLUSH_SERIES = "envoy_http_downstream_rq_time_count{" + HP.format("filters_http") + "}"
FLUSH_WANT = N_FILTERS

# Known differences, each with its reason. A difference is allowed when its
# section matches the first glob and its item (as printed after the
# section in `DIFF <section> <item>`) the second. Only what is cosmetic or
# cannot match belongs here: a different value is a bug to fix in the
# gateway, not to list.
_BACKOFF = ("after a refused connect the gateway's pool waits a back-off before it connects to "
            "that host again, answering 503 (UF) at once meanwhile; Envoy connects again for each "
            "request (docs/observability.md)")
ALLOWED = [
    # Fewer connects to dead, so fewer (refused) connections that ended.
    ("series", 'envoy_cluster_upstream_cx_connect_fail{envoy_cluster_name="dead"}', _BACKOFF),
    ("series", 'envoy_cluster_upstream_cx_destroy{envoy_cluster_name="dead"}', _BACKOFF),
    ("series", 'envoy_cluster_upstream_cx_destroy_remote{envoy_cluster_name="dead"}', _BACKOFF),
    ("format", "help lines", "the gateway documents its families with `# HELP` lines; Envoy "
     "prints none. The text format makes HELP optional and every scraper reads both"),
]

# ---------------------------------------------------------------- processes

# ---------------------------------------------------------------- backend


class Backend:
    """HTTP/1.1 keep-alive backend: /ok 200 "ok", /fail and /retry 503
    "fail", anything else 404; counts the requests per path per run."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self):
                path = self.path.split("?")[0]
                with backend.lock:
                    backend.counts[path] = backend.counts.get(path, 0) + 1
                if path == "/ok":
                    code, body = 200, b"ok\n"
                elif path in ("/fail", "/retry"):
                    code, body = 503, b"fail\n"
                else:
                    code, body = 404, b"nf\n"
                self.send_response(code)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a proxy resetting its pooled connection as it stops

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self):
        with self.lock:
            counts, self.counts = self.counts, {}
        return counts


# ---------------------------------------------------------------- bootstrap


LISTENERS = ("ingress", "other", "filters")
PCT100 = {"numerator": 100, "denominator": "HUNDRED"}
TYPES = "type.googleapis.com/envoy.extensions.filters.http."
FILTERS_CHAIN = [  # the filters listener's, ahead of its router
    {"name": "envoy.filters.http.health_check", "typed_config": {
        "@type": TYPES + "health_check.v3.HealthCheck", "pass_through_mode": False,
        "headers": [{"name": ":path", "string_match": {"exact": "/healthz"}}]}},
    {"name": "envoy.filters.http.fault", "typed_config": {
        "@type": TYPES + "fault.v3.HTTPFault", "abort": {"header_abort": {}, "percentage": PCT100}}},
    {"name": "envoy.filters.http.rbac", "typed_config": {
        "@type": TYPES + "rbac.v3.RBAC", "rules_stat_prefix": "myrbac_",
        "rules": {"action": "DENY", "policies": {"deny-forbidden": {
            "permissions": [{"url_path": {"path": {"prefix": "/forbidden"}}}],
            "principals": [{"any": True}]}}},
        "shadow_rules": {"action": "DENY", "policies": {"shadow-deny": {
            "permissions": [{"header": {"name": "x-shadow", "present_match": True}}],
            "principals": [{"any": True}]}}}}},
    {"name": "envoy.filters.http.local_ratelimit", "typed_config": {
        "@type": TYPES + "local_ratelimit.v3.LocalRateLimit", "stat_prefix": "lrl",
        "token_bucket": {"max_tokens": LRL_TOKENS, "tokens_per_fill": LRL_TOKENS, "fill_interval": "3600s"},
        "filter_enabled": {"runtime_key": "lrl_enabled", "default_value": PCT100},
        "filter_enforced": {"runtime_key": "lrl_enforced", "default_value": PCT100}}},
]


def bootstrap(ports, admin_port, backend_port, dead_port, envoy):
    """`ports`: each of LISTENERS' port."""
    def cluster(name, port, connect_timeout):
        return {"name": name, "type": "STATIC", "connect_timeout": connect_timeout,
                "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {
                        "address": "127.0.0.1", "port_value": port}}}}]}]}}

    def route(match, cluster_name, retry=None):
        r = {"cluster": cluster_name}
        if retry:
            r["retry_policy"] = retry
        return {"match": match, "route": r}

    def listener(name, stat_prefix, routes, filters=()):
        hcm = {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": stat_prefix,
            "route_config": {"name": f"r_{name}", "virtual_hosts": [{
                "name": "vh", "domains": ["*"], "routes": routes}]},
            "http_filters": list(filters) + [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": TYPES + "router.v3.Router"}}],
        }
        return {"name": name,
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": ports[name]}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}]}

    b = {
        "node": {"id": "n1", "cluster": "c1"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {
            "listeners": [
                listener("ingress", "ingress_http", [
                    route({"path": "/ok"}, "backend"),
                    route({"path": "/fail"}, "backend"),
                    route({"path": "/dead"}, "dead"),
                    route({"path": "/retry"}, "backend", {"retry_on": "5xx", "num_retries": 1}),
                ]),
                listener("other", "other_http", [route({"prefix": "/"}, "backend")]),
                listener("filters", "filters_http", [route({"prefix": "/"}, "backend")], FILTERS_CHAIN),
            ],
            # No active health checks, no outlier detection: nothing but the
            # traffic moves a compared value.
            "clusters": [cluster("backend", backend_port, "1s"), cluster("dead", dead_port, "0.25s")],
        },
    }
    # The one difference between the two copies: Envoy merges histograms
    # only at its stats flush (default every 5 s), so its copy flushes every
    # second; the gateway's histograms are current at once, and it may
    # refuse bootstrap fields it does not implement.
    if envoy:
        b["stats_flush_interval"] = f"{ENVOY_FLUSH_S}s"
    return b


def http_get(url, timeout=5):
    """(status, content type, body) of a GET, or None when it failed."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("content-type", ""), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type", ""), e.read().decode("utf-8", "replace")
    except OSError:
        return None


def start_gateway(gateway, backend, dead_port):
    """The gateway on port 0 everywhere; its addresses read from its output
    (`listener <name> on <addr>`, `admin on http://<addr>/`)."""
    log = os.path.join(sbs.work_dir(), "gateway.log")
    path = write_bootstrap("gateway", bootstrap({n: 0 for n in LISTENERS}, 0, backend.port, dead_port,
                                                envoy=False))
    proc = spawn([gateway, "-c", path, "--shards", "1"], log)

    def reported():
        with open(log, errors="replace") as f:
            text = f.read()
        found = {n: re.search(rf"listener {n} on (\S+)", text) for n in LISTENERS}
        a = re.search(r"admin on (\S+)", text)
        if a and all(found.values()):
            return {**{n: m.group(1) for n, m in found.items()},
                    "admin": a.group(1).rstrip("/").removeprefix("http://")}
        return None
    try:
        addrs = wait_for("the gateway's listener and admin addresses", reported, proc=proc, log=log)
        return proc, addrs, log
    except Exception:
        stop(proc)
        raise


def start_envoy(envoy, base_id, backend, dead_port):
    """Envoy on fixed ports (chosen free by the kernel, then released),
    ready when its admin says so. Started again, on other ports and another
    base id, when it exits at once: another Envoy may hold the base id's
    domain socket (a concurrent run), or a port may have been taken since."""
    log = os.path.join(sbs.work_dir(), "envoy.log")
    for attempt in range(3):
        ports, aport = {n: free_port() for n in LISTENERS}, free_port()
        bid = base_id if attempt == 0 else base_id + 1 + (os.getpid() * 7 + attempt) % 400
        path = write_bootstrap("envoy", bootstrap(ports, aport, backend.port, dead_port, envoy=True))
        proc = spawn([envoy, "-c", path, "--concurrency", "1", "--base-id", str(bid),
                      "-l", "warning"], log)

        def ready():
            r = http_get(f"http://127.0.0.1:{aport}/ready", timeout=1)
            return r is not None and r[0] == 200
        try:
            wait_for("Envoy's admin /ready", ready, proc=proc, log=log)
            return proc, {**{n: f"127.0.0.1:{p}" for n, p in ports.items()},
                          "admin": f"127.0.0.1:{aport}"}, log
        except RuntimeError:
            stop(proc)
            if proc.returncode is None or attempt == 2:
                raise
            print(f"  envoy exited at start (base id {bid}), starting it again", flush=True)
    raise AssertionError("unreachable")


def request(addr, path, headers):
    """One GET on a connection of its own, closed after the answer."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status
    except OSError as e:
        return f"error: {e}"
    finally:
        conn.close()


def normalise_listeners(text, addrs):
    """`envoy_listener_address="127.0.0.1_<port>"` -> `"<name>"`, wherever
    the label is (alone, or among others)."""
    for name in LISTENERS:
        ip, port = addrs[name].rsplit(":", 1)
        text = text.replace(f'envoy_listener_address="{ip}_{port}"', f'envoy_listener_address="<{name}>"')
    return text


def scrape(addrs):
    r = http_get(f"http://{addrs['admin']}/stats/prometheus")
    if r is None:
        return None
    status, ctype, body = r
    return status, ctype, normalise_listeners(body, addrs)


def flushed_value(text):
    """FLUSH_SERIES's value in a scrape, None when it has none (a plain
    search: the real parsing comes later)."""
    for line in text.split("\n"):
        if line.startswith(FLUSH_SERIES + " "):
            try:
                return float(line.rsplit(" ", 1)[1])
            except ValueError:
                return None
    return None


def compared_values(text):
    lp = LineParse(text)
    return {k: lp.samples.get(k) for k, _ in COMPARED}


def run_proxy(label, start, backend, settle_s, lag):
    """Starts one proxy, sends the traffic, waits for its stats to be
    current and settled, scrapes them and stops it. Returns (client
    statuses, backend counts, (status, content type, text), addresses)."""
    backend.take()
    proc, addrs, log = start()
    try:
        # One list of statuses per TRAFFIC entry, in its order.
        statuses = [[request(addrs[listener], path, headers) for _ in range(n)]
                    for listener, path, headers, n, _ in TRAFFIC]
        # Histograms: Envoy's only move at a flush. Poll the filters
        # listener's request-time count; a proxy without lag (lag False) that prints
        # no such series at all will not grow one, so stop early there.
        absent_since = time.time()

        def current():
            nonlocal absent_since
            s = scrape(addrs)
            v = flushed_value(s[2]) if s and s[0] == 200 else None
            if v is None:
                if not lag and time.time() - absent_since > 1.0:
                    return "absent"
                return None
            absent_since = time.time()
            return v >= FLUSH_WANT
        try:
            got = wait_for(f"{FLUSH_SERIES} >= {FLUSH_WANT} from {label}", current, proc=proc, log=log)
            if got == "absent":
                print(f"  {label}: prints no {FLUSH_SERIES}; not waiting for it", flush=True)
        except RuntimeError as e:
            print(f"  {label}: {str(e).splitlines()[0]}; comparing what came", flush=True)
        # Settled: two scrapes `settle_s` apart (more than one flush for
        # Envoy: a flush may have caught the last connection before it
        # closed) agreeing on every compared value.
        deadline = time.time() + WAIT_S
        last = scrape(addrs)
        while True:
            time.sleep(settle_s)
            now = scrape(addrs)
            if now is None or last is None:
                raise RuntimeError(f"{label}'s admin stopped answering; log tail:\n{log_tail(log)}")
            if now[0] != 200 or compared_values(now[2]) == compared_values(last[2]):
                break
            if time.time() > deadline:
                print(f"  {label}: compared values still moving after {WAIT_S} s; comparing the last scrape",
                      flush=True)
                break
            last = now
        if proc.poll() is not None:
            raise RuntimeError(f"{label} exited during the run; log tail:\n{log_tail(log)}")
        return statuses, backend.take(), now, addrs
    finally:
        stop(proc)


# ---------------------------------------------------------------- comparing

_ABSENT = object()


def show(v):
    if v is _ABSENT or v is None:
        return "<absent>"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    return json.dumps(v) if not isinstance(v, str) else v


def allowed(section, item):
    for sglob, iglob, why in ALLOWED:
        if fnmatch.fnmatchcase(section, sglob) and fnmatch.fnmatchcase(item, iglob):
            return why
    return None


def series_view(v):
    """Per compared series: its value as both parsers read it, or what is
    wrong with how it is printed."""
    out = {}
    for key, _ in COMPARED:
        pcv, lpv, printed = v.value(key)
        if pcv is None and lpv is None:
            out[key] = _ABSENT
        elif lpv is None:
            out[key] = f"{show(pcv)}, printed as `{printed}`" if printed else \
                f"{show(pcv)} for prometheus_client, not found by the line parser"
        elif v.pc_error is None and pcv != lpv:
            out[key] = f"prometheus_client reads {show(pcv)}, the line parser {show(lpv)}"
        else:
            out[key] = lpv
    return out


def histogram_view(v):
    out = {}
    for key, _ in COMPARED:
        name, labels = split_key(key)
        if not name.endswith("_count"):
            continue
        base = name[:-len("_count")]
        inner = key[len(name) + 1:-1]
        item = f"{base}{{{inner}}}"
        count = v.lp.samples.get(key)
        t = v.lp.type_of.get(base)
        if t != "histogram":
            out[item] = f"`# TYPE {base}` is {t or '<absent>'}"
            continue
        # The `le` values printed for these labels, in order, by either parser.
        les = [dict(k[1]).get("le") for k in v.pc if k[0] == base + "_bucket"
               and frozenset(x for x in k[1] if x[0] != "le") == frozenset(labels)]
        problems = []
        missing = [le for le in LES if f'{base}_bucket{{{inner + "," if inner else ""}le="{le}"}}' not in v.lp.samples]
        if missing:
            problems.append(f"no literal bucket line (le last) for le {','.join(missing)}")
        extra = sorted(set(les) - set(LES))
        if extra:
            problems.append(f"other le values {','.join(extra)}")
        vals = [v.lp.samples.get(f'{base}_bucket{{{inner + "," if inner else ""}le="{le}"}}') for le in LES]
        known = [x for x in vals if x is not None]
        if any(b < a for a, b in zip(known, known[1:])):
            problems.append("buckets not cumulative")
        if vals[-1] is not None and count is not None and vals[-1] != count:
            problems.append(f"+Inf {show(vals[-1])} != _count {show(count)}")
        if f"{base}_sum{{{inner}}}" not in v.lp.samples:
            problems.append("no _sum")
        if count is None:
            problems.append("no _count")
        out[item] = "; ".join(problems) or "ok"
    return out


def format_view(v):
    lp = v.lp
    first = lambda xs: f" (first: `{xs[0]}`)" if xs else ""  # noqa: E731
    return {
        "status": v.status,
        "content-type media type": v.ctype.split(";")[0].strip().lower(),
        "help lines": len(lp.help),
        "other comment lines": f"{len(lp.comments)}{first(lp.comments)}",
        "blank lines": lp.blank,
        "ends with a newline": lp.final_newline,
        "unparsable lines": f"{len(lp.bad)}{first(lp.bad)}",
        "duplicate # TYPE": f"{len(lp.dup_types)}{first(lp.dup_types)}",
        "duplicate series": f"{len(lp.dup_series)}{first(lp.dup_series)}",
        "samples outside a # TYPE'd family": f"{len(lp.untyped)}{first(lp.untyped)}",
        "label-less series printed without {}": f"{len(lp.no_braces)}{first(lp.no_braces)}",
        "block order (counters, gauges, histograms)": lp.block_order(),
        "prometheus_client parses it": v.pc_error or "yes",
        "series the two parsers read differently": len(
            [k for k, val in lp.samples.items()
             if v.pc_error is None and v.pc.get((split_key(k)[0], frozenset(split_key(k)[1]))) != val]),
    }


def compare(section, ev_view, gv_view, lines_out, verbose):
    """Prints the section's verdict and DIFF lines; returns whether it
    failed."""
    diffs, known, listing = [], [], []
    for item in list(ev_view) + [i for i in gv_view if i not in ev_view]:
        ev, gv = ev_view.get(item, _ABSENT), gv_view.get(item, _ABSENT)
        if ev == gv and ev is not _ABSENT:
            listing.append(f"    = {item}: {show(ev)}")
            continue
        why = allowed(section, item)
        line = f"{section} {item}: envoy {show(ev)}, gateway {show(gv)}"
        (known if why else diffs).append(line + (f"   [known: {why}]" if why else ""))
        listing.append(f"    {'~' if why else '!'} {item}: envoy {show(ev)}, gateway {show(gv)}")
    verdict = "matched" if not diffs else f"{len(diffs)} difference(s)"
    print(f"== {section} ({len(listing)} compared): {verdict}" + (f", {len(known)} known" if known else ""))
    for line in diffs:
        print("  DIFF  " + line)
    for line in known:
        print("  known " + line)
    if verbose:
        lines_out.append(f"-- {section}, both sides (= same, ! differs, ~ known difference):")
        lines_out.extend(listing)
    return bool(diffs)


def types_view(e, g):
    """Envoy's type for every `envoy_*` family the gateway prints."""
    ev, gv, extra = {}, {}, []
    for fam, typ in g.lp.types:
        if not fam.startswith("envoy_"):
            continue
        if fam in e.lp.type_of:
            ev[fam], gv[fam] = e.lp.type_of[fam], typ
        else:
            extra.append(f"{fam} ({typ})")
    return ev, gv, extra


def wrap(names, indent="    ", width=110):
    out, line = [], indent
    for n in names:
        if len(line) + len(n) + 2 > width and line.strip():
            out.append(line.rstrip(", "))
            line = indent
        line += n + ", "
    if line.strip():
        out.append(line.rstrip(", "))
    return "\n".join(out)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gateway")
    ap.add_argument("envoy")
    ap.add_argument("--base-id", type=int, default=33)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every compared item of both sides")
    args = ap.parse_args()

    for label, path in (("gateway", args.gateway), ("envoy", args.envoy)):
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"no {label} binary at {path}")
    sbs.begin("stats side by side", OVERALL_S)

    backend = Backend()
    # The dead cluster's endpoint: bound, never listening (connecting to it
    # is refused), held until the end so nothing else takes the port.
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]

    runs = {
        "envoy": run_proxy("envoy", lambda: start_envoy(args.envoy, args.base_id, backend, dead_port),
                           backend, settle_s=ENVOY_FLUSH_S + 0.3, lag=True),
        "gateway": run_proxy("gateway", lambda: start_gateway(args.gateway, backend, dead_port),
                             backend, settle_s=0.3, lag=False),
    }

    problems = []
    views = {}
    for label, (statuses, counts, (status, ctype, text), addrs) in runs.items():
        with open(os.path.join(sbs.work_dir(), f"{label}.prom"), "w") as f:
            f.write(text)
        for got, (listener, path, headers, n, want) in zip(statuses, TRAFFIC):
            if got != [want] * n:
                hs = "".join(f" {k}: {v}" for k, v in headers.items())
                problems.append(f"{label}: {listener} {path}{hs}: the client got {got}, not {n} x {want}")
        for path, n in BACKEND_WANTS.items():
            if counts.get(path, 0) != n:
                problems.append(f"{label}: the backend got {counts.get(path, 0)} x {path}, not {n}")
        for path in set(counts) - set(BACKEND_WANTS):
            problems.append(f"{label}: the backend got {counts[path]} x {path}, none expected")
        if status != 200:
            problems.append(f"{label}: /stats/prometheus answered {status}")
        views[label] = View(status, ctype, text)
    e, g = views["envoy"], views["gateway"]

    # Envoy is the reference: its values must be what the traffic implies
    # and its exposition must pass the checks, or the setup (or a check)
    # is wrong, not the gateway.
    e_series = series_view(e)
    for key, want in COMPARED:
        if e_series[key] != want:
            problems.append(f"envoy: {key} is {show(e_series[key])}, the traffic implies {want}")
    for item, res in histogram_view(e).items():
        if res != "ok":
            problems.append(f"envoy: histogram {item}: {res}")
    ef = format_view(e)
    for item, want in [("help lines", 0), ("blank lines", 0), ("ends with a newline", True),
                       ("block order (counters, gauges, histograms)", "ok"),
                       ("prometheus_client parses it", "yes"),
                       ("series the two parsers read differently", 0)]:
        if ef[item] != want:
            problems.append(f"envoy: format {item}: {show(ef[item])}, expected {show(want)}")

    details = []
    failed = bool(problems)
    failed |= compare("series", e_series, series_view(g), details, args.verbose)
    failed |= compare("histograms", histogram_view(e), histogram_view(g), details, args.verbose)
    failed |= compare("format", ef, format_view(g), details, args.verbose)
    tev, tgv, extra = types_view(e, g)
    failed |= compare("types", tev, tgv, details, args.verbose)

    # For information only.
    compared_fams = {split_key(k)[0] for k, _ in COMPARED}
    compared_fams |= {n[:-len("_count")] for n in compared_fams if n.endswith("_count")}
    missing = [f"{fam} ({typ})" for fam, typ in e.lp.types
               if fam not in g.lp.type_of and fam not in compared_fams]
    if missing:
        print(f"info: {len(missing)} of Envoy's {len(e.lp.types)} families are not in the gateway's "
              f"output (not compared, not failing):")
        print(wrap(missing))
    if extra:
        print(f"info: {len(extra)} envoy_* families only the gateway prints (not in Envoy's output "
              f"for this setup; not failing):")
        print(wrap(extra))
    other = [f for f, _ in g.lp.types if not f.startswith("envoy_")]
    if other:
        print(f"info: the gateway prints {len(other)} families without the envoy_ prefix "
              f"(not compared), e.g. {', '.join(other[:5])}")
    if details:
        print("\n".join(details))
    for p in problems:
        print("PROBLEM " + p)
    if os.environ.get("SBS_KEEP"):
        print(f"kept: {sbs.work_dir()} (bootstraps, logs, envoy.prom, gateway.prom)")
    if failed:
        print("stats side by side: FAILED")
        return 1
    print("stats side by side: all matched")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as e:  # noqa: BLE001 - any failure is a CI failure, reported plainly
        print(f"stats side by side: error: {e}", file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sbs.cleanup()
    os._exit(code)
