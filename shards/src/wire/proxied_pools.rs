//! Upstream pools of clusters with `envoy.transport_sockets.upstream_proxy_protocol`: every connection opens with a PROXY header naming one downstream client, so such a cluster's connections are not shared between clients: a pool per client (its address and the one it connected to) and host, as Envoy keys its pools by the header's addresses, gone with the client's connection.

use std::net::SocketAddr;
use std::rc::Rc;

use engine::snapshot::Host;
use engine::ClusterSnapshot;

use super::pool::PoolRef;
use super::WireShard;

impl WireShard {
    /// The pool a stream of the client `peer` → `local` (with the PROXY
    /// TLVs it came with) takes to `host`: the host's shared one, or for a
    /// cluster that sends PROXY headers the client's own (made on first
    /// use, within `max_connection_pools`; only then is its header
    /// encoded).
    pub(crate) fn pool_for(
        &self,
        host: &Host,
        cluster: &ClusterSnapshot,
        (peer, local, tlvs): (SocketAddr, SocketAddr, &[proxywire::Tlv]),
    ) -> Option<PoolRef> {
        let Some(proxy) = &cluster.config.upstream.proxy_protocol else {
            return self.pool(host, cluster);
        };
        let key = (peer, local);
        let mut proxied = self.proxied.borrow_mut();
        let pools = proxied.entry(key).or_default();
        pools.retain(|p| !p.borrow().retired);
        if let Some(p) = pools
            .iter()
            .find(|p| p.borrow().host == host.id && p.borrow().addr == host.address)
        {
            return Some(Rc::clone(p));
        }
        let p = self.new_pool(host, cluster)?;
        let header = super::tls::proxy_header(proxy, key, tlvs);
        p.borrow_mut().proxy_header = Some(header.into_boxed_slice());
        pools.push(Rc::clone(&p));
        Some(p)
    }

    /// The client of `peer` → `local` is gone: its pools close once their
    /// streams end.
    pub(crate) fn release_proxied(&self, peer: SocketAddr, local: SocketAddr) {
        let gone = self.proxied.borrow_mut().remove(&(peer, local));
        for p in gone.into_iter().flatten() {
            p.borrow_mut().retire();
        }
    }

    /// Whether any client has pools of its own (so that a closing
    /// connection need not look).
    pub(crate) fn has_proxied(&self) -> bool {
        !self.proxied.borrow().is_empty()
    }
}
