//! SDS over ADS: the secrets listeners' and clusters' TLS contexts name, subscribed by name, held as sent, and read into those contexts in place when they change; a secret that does not make a context rejects its whole response and changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use engine::tls::{Reloadable, SdsSecret, SecretMap, SecretSource, SecretView, Step};
use engine::{Cluster, Listener, SourcedTls};

use super::XdsClient;

impl XdsClient {
    /// The secrets held now: the bootstrap's and those received over ADS.
    pub fn secret_view(&self) -> SecretView<'_> {
        SecretView {
            statics: &self.statics.secrets,
            ads: &self.secrets,
        }
    }

    /// Secrets received over ADS, by name.
    pub fn secrets(&self) -> &SecretMap {
        &self.secrets
    }

    fn has_ads(&self) -> bool {
        self.statics
            .dynamic
            .as_ref()
            .is_some_and(|d| d.ads.is_some())
    }

    /// Every TLS context of the static and held listeners and clusters
    /// that reads files or secrets.
    pub(super) fn tls_contexts(&self) -> Vec<SourcedTls> {
        engine::sourced_tls(
            self.statics.listeners.iter().chain(self.listeners.values()),
            self.statics.clusters.iter().chain(self.clusters.values()),
        )
    }

    /// The secrets to ask the ADS server for: every `ads: {}` secret a
    /// held listener's or cluster's TLS context names.
    pub(super) fn secret_names(&self) -> BTreeSet<String> {
        let listeners = self.statics.listeners.iter().chain(self.listeners.values());
        let clusters = self.statics.clusters.iter().chain(self.clusters.values());
        let downstream = listeners
            .flat_map(|l| l.chains())
            .filter_map(|c| c.tls.as_ref())
            .flat_map(|t| t.secrets());
        let upstream = clusters
            .filter_map(|c| c.upstream.tls.as_ref())
            .flat_map(|t| t.secrets());
        downstream
            .chain(upstream)
            .filter(|r| r.source == SecretSource::Ads)
            .map(|r| r.name.clone())
            .collect()
    }

    /// A response's secrets (encoded, by name): those subscribed replace
    /// the held ones (an unchanged one keeps its `Arc`, so nothing is read
    /// again for it), and every context that reads a changed one is read
    /// again. Any context that fails rejects the whole response.
    pub(super) fn apply_secrets(
        &mut self,
        received: BTreeMap<String, Vec<u8>>,
        version: &str,
    ) -> Result<(), String> {
        let names = &self.types[super::ResourceType::Secret.index()].names;
        let mut next = self.secrets.clone();
        for (name, encoded) in received.into_iter().filter(|(n, _)| names.contains(n)) {
            if next.get(&name).is_some_and(|s| s.encoded == encoded) {
                continue;
            }
            let secret = SdsSecret {
                version: version.to_owned(),
                encoded,
            };
            next.insert(name, Arc::new(secret));
        }
        let view = SecretView {
            statics: &self.statics.secrets,
            ads: &next,
        };
        let contexts = self.tls_contexts();
        install_all(prepare_all(&contexts, &view, self.has_ads())?);
        self.secrets = next;
        Ok(())
    }

    /// Clusters just received whose TLS is the context a held cluster of
    /// the same name has (the same config, secrets by name) take that
    /// context itself: connection pools kept across the update hold it,
    /// so they follow its rotations.
    pub(super) fn keep_upstream_tls(&self, received: &mut BTreeMap<String, Arc<Cluster>>) {
        for (name, c) in received.iter_mut() {
            let Some(held) = self
                .clusters
                .get(name)
                .and_then(|h| h.upstream.tls.as_ref())
            else {
                continue;
            };
            let same = c.upstream.tls.as_ref().is_some_and(|t| t == held);
            if let (true, Some(c)) = (same, Arc::get_mut(c)) {
                c.upstream.tls = Some(Arc::clone(held));
            }
        }
    }

    /// Reads the TLS contexts of listeners or clusters just received (or
    /// of new static ones) with the secrets held; a context that names a
    /// secret not held yet waits for it (its listener or cluster warms).
    pub(super) fn resolve_new<'a>(
        &self,
        listeners: impl Iterator<Item = &'a Arc<Listener>>,
        clusters: impl Iterator<Item = &'a Arc<Cluster>>,
    ) -> Result<(), String> {
        let contexts = engine::sourced_tls(listeners, clusters);
        install_all(prepare_all(&contexts, &self.secret_view(), self.has_ads())?);
        Ok(())
    }
}

/// Each context prepared, and how to install its new build.
type Prepared<'a> = Vec<Box<dyn FnOnce() + 'a>>;

/// Every context's new build under `view`, or the first failure. Only a
/// secret that can still come (over `ads`) is waited for.
fn prepare_all<'a>(
    contexts: &'a [SourcedTls],
    view: &SecretView,
    ads: bool,
) -> Result<Prepared<'a>, String> {
    let mut ready: Prepared<'a> = Vec::new();
    for SourcedTls { owner, tls } in contexts {
        match tls.step(view, false) {
            Step::Unchanged => {}
            Step::Waiting(r) if r.source == SecretSource::Ads && ads => {}
            Step::Waiting(r) => {
                return Err(format!(
                    "{owner}: TLS: {r} is not held, and nothing sends it"
                ))
            }
            Step::Install(install) => ready.push(install),
            Step::Failed(m) => return Err(format!("{owner}: TLS: {m}")),
        }
    }
    Ok(ready)
}

fn install_all(ready: Prepared) {
    for install in ready {
        install();
    }
}
