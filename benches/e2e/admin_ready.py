"""The admin's `/ready` latency while `/stats/prometheus` is scraped back to back.

A gateway with N static clusters (default 10,000; `--shards 2`), one
thread scraping the Envoy page in a loop, this one polling `/ready` every
20 ms for 8 s. Prints the `/ready` median, p99 and max, and the pages'
count, median time and size. Run it for two builds, alternating:

    python3 benches/e2e/admin_ready.py target/release/gateway [N]
"""
import json, os, socket, subprocess, sys, tempfile, threading, time, urllib.request

gw = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
admin = free_port()
clusters = [{"name": f"c{i}", "type": "STATIC", "connect_timeout": "1s",
             "load_assignment": {"cluster_name": f"c{i}", "endpoints": [{"lb_endpoints": [
                 {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9}}}}]}]}}
            for i in range(n)]
boot = {"admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {"listeners": [{"name": "l", "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
            "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "in", "route_config": {"virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [
                    {"match": {"prefix": "/"}, "route": {"cluster": "c0"}}]}]},
                "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]}}]}]}],
            "clusters": clusters}}
path = os.path.join(tempfile.mkdtemp(prefix="admin-ready-"), f"boot-{n}.json")
json.dump(boot, open(path, "w"))
p = subprocess.Popen([gw, "-c", path, "--shards", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{admin}"
try:
    for _ in range(300):
        try:
            if urllib.request.urlopen(base + "/ready", timeout=1).status == 200: break
        except Exception: time.sleep(0.1)
    stop = False
    pages = []
    def scrape():
        while not stop:
            t = time.time(); b = urllib.request.urlopen(base + "/stats/prometheus", timeout=30).read(); pages.append((time.time() - t, len(b)))
    th = threading.Thread(target=scrape); th.start()
    lat = []
    t_end = time.time() + 8
    while time.time() < t_end:
        t = time.time(); urllib.request.urlopen(base + "/ready", timeout=10).read(); lat.append(time.time() - t); time.sleep(0.02)
    stop = True; th.join()
    lat.sort()
    print(f"{gw}: /ready n={len(lat)} median {lat[len(lat)//2]*1000:.1f} ms p99 {lat[int(len(lat)*0.99)]*1000:.1f} ms max {lat[-1]*1000:.1f} ms; pages {len(pages)} median {sorted(x[0] for x in pages)[len(pages)//2]:.2f} s, {pages[0][1]/1e6:.1f} MB")
finally:
    p.terminate(); p.wait()
