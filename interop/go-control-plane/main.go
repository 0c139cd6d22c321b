// Command xds-interop-server is a minimal go-control-plane ADS management
// server used to check the gateway against the reference Go control plane.
// It serves one snapshot for every node (an EDS cluster "echo", its
// ClusterLoadAssignment, a Listener "ingress" with an HCM using RDS over ADS,
// the RouteConfiguration "routes" and, with --tls-listener-port, a Listener
// "tls" whose DownstreamTlsContext takes its certificate over SDS (the
// Secret "server-cert", also sent over ADS)) over both State of the World
// (StreamAggregatedResources) and Delta xDS (DeltaAggregatedResources, from
// the same SnapshotCache), and logs every request as INITIAL / ACK / NACK
// (api=sotw or api=delta) so a script can check what the client did.
//
// Delta requests carry no version_info: an ACK or NACK names a nonce, so
// their lines show the system_version_info of the response that nonce came
// with (the version ACKed or NACKed), which keeps one grep for both APIs.
//
// The snapshot is bumped to the next version (adding the --backend2 endpoint,
// or toggling it off again) on SIGHUP, or once after --update-after. SIGUSR1
// publishes a next version whose cluster has connect_timeout 0s, which Envoy
// (protoc-gen-validate: gt 0s) and the gateway both reject, to check the NACK
// path against go-control-plane.
//
// The Secret "server-cert" holds, inline, the PEM files --secret-cert and
// --secret-key name, read again for every version: a script rotates the
// certificate (or breaks it, to check the NACK of a Secret) by rewriting
// those files before a SIGHUP.
package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
)

var (
	port         = flag.Uint("port", 18000, "ADS gRPC (h2c) port")
	listenerPort = flag.Uint("listener-port", 10000, "port of the Listener 'ingress' (on 127.0.0.1)")
	backend      = flag.String("backend", "127.0.0.1:8081", "first endpoint of cluster 'echo' (host:port)")
	backend2     = flag.String("backend2", "", "second endpoint added by the snapshot update (host:port)")
	updateAfter  = flag.Duration("update-after", 0, "if > 0, publish the next snapshot version once after this delay")
	nodeID       = flag.String("node", "", "node id to serve; empty serves every node that connects")
	verbose      = flag.Bool("v", false, "also log the snapshot cache's debug lines")
	tlsPort      = flag.Uint("tls-listener-port", 0, "if > 0, also serve a Listener 'tls' on 127.0.0.1 at this port, its certificate the SDS Secret 'server-cert' (needs --secret-cert and --secret-key)")
	secretCert   = flag.String("secret-cert", "", "PEM certificate chain of the Secret 'server-cert' (read again for every version)")
	secretKey    = flag.String("secret-key", "", "PEM private key of the Secret 'server-cert' (read again for every version)")
	grpcOpts     = flag.String("grpc-options", "example", "gRPC server options: 'example' (go-control-plane's example server: keepalive 30s, ping enforcement MinTime 30s, PermitWithoutStream) or 'default' (grpc.NewServer() with no options: grpc-go's default ping enforcement, MinTime 5m)")
)

// logger adapts go-control-plane's log.Logger to the standard logger.
type logger struct{}

func (logger) Debugf(format string, args ...interface{}) {
	if *verbose {
		log.Printf("cache DEBUG "+format, args...)
	}
}
func (logger) Infof(format string, args ...interface{})  { log.Printf("cache INFO "+format, args...) }
func (logger) Warnf(format string, args ...interface{})  { log.Printf("cache WARN "+format, args...) }
func (logger) Errorf(format string, args ...interface{}) { log.Printf("cache ERROR "+format, args...) }

func addr(hostport string) *core.Address {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		log.Fatalf("bad address %q: %v", hostport, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		log.Fatalf("bad port in %q: %v", hostport, err)
	}
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol: core.SocketAddress_TCP, Address: host,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(n)},
	}}}
}

func adsSource() *core.ConfigSource {
	return &core.ConfigSource{
		ResourceApiVersion:    core.ApiVersion_V3,
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
	}
}

func makeCluster(bad bool) *cluster.Cluster {
	opts, err := anypb.New(&upstreamhttp.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &core.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	timeout := 2 * time.Second
	if bad {
		timeout = 0
	}
	return &cluster.Cluster{
		Name:                 "echo",
		ConnectTimeout:       durationpb.New(timeout),
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{EdsConfig: adsSource()},
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": opts,
		},
	}
}

func makeCLA(backends []string) *endpoint.ClusterLoadAssignment {
	var lbs []*endpoint.LbEndpoint
	for _, b := range backends {
		lbs = append(lbs, &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{
			Endpoint: &endpoint.Endpoint{Address: addr(b)},
		}})
	}
	return &endpoint.ClusterLoadAssignment{
		ClusterName: "echo",
		Endpoints:   []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}},
	}
}

func makeRoute() *route.RouteConfiguration {
	return &route.RouteConfiguration{
		Name: "routes",
		VirtualHosts: []*route.VirtualHost{{
			Name:    "all",
			Domains: []string{"*"},
			Routes: []*route.Route{{
				Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{
					ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "echo"},
				}},
			}},
		}},
	}
}

// secretName is the SDS Secret the Listener "tls" takes its certificate from.
const secretName = "server-cert"

// makeSecret reads --secret-cert and --secret-key into the Secret
// "server-cert" (inline, as sent), and describes the certificate for the
// log: its subject's CN, or why it does not parse (the gateway should NACK
// such a Secret; go-control-plane sends it as it is).
func makeSecret() (*tlsv3.Secret, string) {
	chain, err := os.ReadFile(*secretCert)
	if err != nil {
		log.Fatalf("--secret-cert: %v", err)
	}
	key, err := os.ReadFile(*secretKey)
	if err != nil {
		log.Fatalf("--secret-key: %v", err)
	}
	desc := "unparsable"
	if b, _ := pem.Decode(chain); b != nil {
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			desc = "CN=" + c.Subject.CommonName
		}
	}
	return &tlsv3.Secret{
		Name: secretName,
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: string(chain)}},
			PrivateKey:       &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: string(key)}},
		}},
	}, desc
}

// makeListener builds the plaintext Listener "ingress" (tls false), or the
// Listener "tls": the same HCM behind a DownstreamTlsContext whose
// certificate is the Secret "server-cert" over ADS (ALPN h2, http/1.1).
func makeListener(tls bool) *listener.Listener {
	routerCfg, err := anypb.New(&router.Router{})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := anypb.New(&hcm.HttpConnectionManager{
		CodecType:  hcm.HttpConnectionManager_AUTO,
		StatPrefix: "ingress_http",
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: "routes",
		}},
		HttpFilters: []*hcm.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: routerCfg},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	chain := &listener.FilterChain{
		Filters: []*listener.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listener.Filter_TypedConfig{TypedConfig: mgr},
		}},
	}
	name, port := "ingress", *listenerPort
	if tls {
		name, port = "tls", *tlsPort
		ctx, err := anypb.New(&tlsv3.DownstreamTlsContext{
			CommonTlsContext: &tlsv3.CommonTlsContext{
				AlpnProtocols: []string{"h2", "http/1.1"},
				TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{
					Name:      secretName,
					SdsConfig: adsSource(),
				}},
			},
		})
		if err != nil {
			log.Fatal(err)
		}
		chain.TransportSocket = &core.TransportSocket{
			Name:       "envoy.transport_sockets.tls",
			ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: ctx},
		}
	}
	return &listener.Listener{
		Name:         name,
		Address:      addr(fmt.Sprintf("127.0.0.1:%d", port)),
		FilterChains: []*listener.FilterChain{chain},
	}
}

func snapshot(version int, bad bool) *cachev3.Snapshot {
	backends := []string{*backend}
	// Even versions carry the second endpoint (when one is given).
	if version%2 == 0 && *backend2 != "" {
		backends = append(backends, *backend2)
	}
	resources := map[resource.Type][]types.Resource{
		resource.ClusterType:  {makeCluster(bad)},
		resource.EndpointType: {makeCLA(backends)},
		resource.ListenerType: {makeListener(false)},
		resource.RouteType:    {makeRoute()},
	}
	secret := "none"
	if *tlsPort > 0 {
		s, desc := makeSecret()
		resources[resource.ListenerType] = append(resources[resource.ListenerType], makeListener(true))
		resources[resource.SecretType] = []types.Resource{s}
		secret = desc
	}
	snap, err := cachev3.NewSnapshot(strconv.Itoa(version), resources)
	if err != nil {
		log.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		log.Fatalf("snapshot v%d inconsistent: %v", version, err)
	}
	log.Printf("SNAPSHOT version=%d endpoints=%s bad_cluster=%v secret=%s", version, strings.Join(backends, ","), bad, secret)
	return snap
}

func shortType(url string) string {
	return url[strings.LastIndex(url, ".")+1:]
}

func main() {
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *tlsPort > 0 && (*secretCert == "" || *secretKey == "") {
		log.Fatal("--tls-listener-port needs --secret-cert and --secret-key")
	}
	ctx := context.Background()

	// ads=true: the snapshot cache's ADS mode, as used with Envoy.
	var hash cachev3.NodeHash = cachev3.IDHash{}
	if *nodeID == "" {
		hash = anyNode{}
	}
	cache := cachev3.NewSnapshotCache(true, hash, logger{})

	// mu serialises version bumps (signals and the timer).
	var mu sync.Mutex
	version := 0
	bump := func(why string, bad bool) {
		mu.Lock()
		defer mu.Unlock()
		version++
		if why != "" {
			log.Printf("UPDATE (%s)", why)
		}
		key := *nodeID
		if key == "" {
			key = anyNodeKey
		}
		if err := cache.SetSnapshot(ctx, key, snapshot(version, bad)); err != nil {
			log.Fatalf("set snapshot: %v", err)
		}
	}
	bump("", false)

	cb := serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, typ string) error {
			log.Printf("STREAM_OPEN stream=%d type=%q", id, typ)
			return nil
		},
		StreamClosedFunc: func(id int64, node *core.Node) {
			log.Printf("STREAM_CLOSED stream=%d node=%q", id, node.GetId())
		},
		StreamRequestFunc: func(id int64, r *discovery.DiscoveryRequest) error {
			kind := "ACK"
			switch {
			case r.GetErrorDetail() != nil:
				kind = "NACK"
			case r.GetResponseNonce() == "":
				kind = "INITIAL"
			}
			nodeDesc := ""
			if r.GetNode() != nil {
				nodeDesc = fmt.Sprintf(" node=%q cluster=%q agent=%q", r.GetNode().GetId(), r.GetNode().GetCluster(), r.GetNode().GetUserAgentName())
			}
			msg := ""
			if r.GetErrorDetail() != nil {
				msg = fmt.Sprintf(" error=%q", r.GetErrorDetail().GetMessage())
			}
			log.Printf("REQUEST %s stream=%d type=%s version=%q nonce=%q names=%v%s%s api=sotw",
				kind, id, shortType(r.GetTypeUrl()), r.GetVersionInfo(), r.GetResponseNonce(), r.GetResourceNames(), nodeDesc, msg)
			return nil
		},
		StreamResponseFunc: func(_ context.Context, id int64, _ *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
			log.Printf("RESPONSE stream=%d type=%s version=%q nonce=%q resources=%d api=sotw",
				id, shortType(resp.GetTypeUrl()), resp.GetVersionInfo(), resp.GetNonce(), len(resp.GetResources()))
		},
	}
	dv := deltaVersions{byStream: map[int64]map[string]string{}}
	cb.DeltaStreamOpenFunc = func(_ context.Context, id int64, typ string) error {
		log.Printf("STREAM_OPEN stream=%d type=%q api=delta", id, typ)
		return nil
	}
	cb.DeltaStreamClosedFunc = func(id int64, node *core.Node) {
		dv.forget(id)
		log.Printf("STREAM_CLOSED stream=%d node=%q api=delta", id, node.GetId())
	}
	cb.StreamDeltaRequestFunc = func(id int64, r *discovery.DeltaDiscoveryRequest) error {
		kind, version := "INITIAL", ""
		switch {
		case r.GetErrorDetail() != nil:
			kind, version = "NACK", dv.get(id, r.GetResponseNonce())
		case r.GetResponseNonce() != "":
			kind, version = "ACK", dv.get(id, r.GetResponseNonce())
		}
		nodeDesc := ""
		if r.GetNode() != nil {
			nodeDesc = fmt.Sprintf(" node=%q", r.GetNode().GetId())
		}
		msg := ""
		if r.GetErrorDetail() != nil {
			msg = fmt.Sprintf(" error=%q", r.GetErrorDetail().GetMessage())
		}
		// Go prints maps sorted by key: a stable line to grep.
		log.Printf("REQUEST %s stream=%d type=%s version=%q nonce=%q names=%v unsubscribe=%v initial=%v%s%s api=delta",
			kind, id, shortType(r.GetTypeUrl()), version, r.GetResponseNonce(), r.GetResourceNamesSubscribe(),
			r.GetResourceNamesUnsubscribe(), r.GetInitialResourceVersions(), nodeDesc, msg)
		return nil
	}
	cb.StreamDeltaResponseFunc = func(id int64, _ *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
		dv.put(id, resp.GetNonce(), resp.GetSystemVersionInfo())
		var names []string
		for _, r := range resp.GetResources() {
			names = append(names, r.GetName())
		}
		log.Printf("RESPONSE stream=%d type=%s version=%q nonce=%q resources=%d names=%v removed=%v api=delta",
			id, shortType(resp.GetTypeUrl()), resp.GetSystemVersionInfo(), resp.GetNonce(), len(names), names,
			resp.GetRemovedResources())
	}
	srv := serverv3.NewServer(ctx, cache, cb)

	var gs *grpc.Server
	switch *grpcOpts {
	case "example":
		// Same gRPC server options as go-control-plane's example server.
		gs = grpc.NewServer(
			grpc.MaxConcurrentStreams(1000000),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 5 * time.Second}),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 30 * time.Second, PermitWithoutStream: true}),
		)
	case "default":
		gs = grpc.NewServer()
	default:
		log.Fatalf("-grpc-options: want 'example' or 'default', got %q", *grpcOpts)
	}
	log.Printf("gRPC server options: %s", *grpcOpts)
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, srv)

	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("ADS server listening on %s", lis.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGUSR1)
	go func() {
		for s := range sig {
			if s == syscall.SIGUSR1 {
				bump("SIGUSR1, invalid cluster", true)
			} else {
				bump("SIGHUP", false)
			}
		}
	}()
	if *updateAfter > 0 {
		go func() {
			time.Sleep(*updateAfter)
			bump("timer", false)
		}()
	}
	if err := gs.Serve(lis); err != nil {
		log.Fatal(err)
	}
}

// anyNode hashes every node to one key, so one snapshot serves all clients.
type anyNode struct{}

const anyNodeKey = "*"

func (anyNode) ID(*core.Node) string { return anyNodeKey }

// deltaVersions remembers, per Delta stream, the system_version_info each
// response nonce was sent with (go-control-plane's Delta nonces count from 1
// on every stream), so an ACK or NACK can be logged with its version.
type deltaVersions struct {
	mu       sync.Mutex
	byStream map[int64]map[string]string
}

func (d *deltaVersions) put(stream int64, nonce, version string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byStream[stream] == nil {
		d.byStream[stream] = map[string]string{}
	}
	d.byStream[stream][nonce] = version
}

func (d *deltaVersions) get(stream int64, nonce string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byStream[stream][nonce]
}

func (d *deltaVersions) forget(stream int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byStream, stream)
}
