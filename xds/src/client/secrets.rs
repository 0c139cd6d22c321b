//! SDS over ADS: the secrets listeners' TLS contexts name, subscribed by name, held as sent, and read into those contexts in place when they change; a secret that does not make a context rejects its whole response and changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use engine::tls::{
    DownstreamTls, Reloadable, SdsSecret, SecretMap, SecretSource, SecretView, Step,
};
use engine::Listener;

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

    /// Every TLS context of the static and held listeners, with its
    /// listener's name.
    pub(super) fn tls_contexts(&self) -> impl Iterator<Item = (&str, &Arc<DownstreamTls>)> {
        contexts(self.statics.listeners.iter().chain(self.listeners.values()))
    }

    /// The secrets to ask the ADS server for: every `ads: {}` secret a
    /// held listener's TLS context names.
    pub(super) fn secret_names(&self) -> BTreeSet<String> {
        self.tls_contexts()
            .flat_map(|(_, t)| t.secrets())
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
        let ready = prepare_all(self.tls_contexts(), &view, self.has_ads())?;
        install_all(ready);
        self.secrets = next;
        Ok(())
    }

    /// Reads the TLS contexts of listeners just received with the secrets
    /// held; a context that names a secret not held yet waits for it (its
    /// listener warms).
    pub(super) fn resolve_listeners(
        &self,
        listeners: &BTreeMap<String, Arc<Listener>>,
    ) -> Result<(), String> {
        let ready = prepare_all(
            contexts(listeners.values()),
            &self.secret_view(),
            self.has_ads(),
        )?;
        install_all(ready);
        Ok(())
    }
}

/// The TLS contexts of `listeners`, each once.
fn contexts<'a>(
    listeners: impl Iterator<Item = &'a Arc<Listener>>,
) -> impl Iterator<Item = (&'a str, &'a Arc<DownstreamTls>)> {
    listeners.flat_map(|l| {
        l.chains()
            .filter_map(|c| c.tls.as_ref())
            .filter(|t| !t.secrets().is_empty())
            .map(|t| (l.name.as_str(), t))
    })
}

/// Each context prepared, and how to install its new build.
type Prepared<'a> = Vec<(&'a Arc<DownstreamTls>, Box<dyn FnOnce() + 'a>)>;

/// Every context's new state under `view`, or the first failure. Only a
/// secret that can still come (over `ads`) is waited for.
fn prepare_all<'a>(
    contexts: impl Iterator<Item = (&'a str, &'a Arc<DownstreamTls>)>,
    view: &SecretView,
    ads: bool,
) -> Result<Prepared<'a>, String> {
    let mut ready: Prepared<'a> = Vec::new();
    for (listener, tls) in contexts {
        if ready.iter().any(|(t, _)| Arc::ptr_eq(t, tls)) {
            continue;
        }
        match tls.step(view, false) {
            Step::Unchanged => {}
            Step::Waiting(r) if r.source == SecretSource::Ads && ads => {}
            Step::Waiting(r) => {
                return Err(format!(
                    "listeners[{listener:?}]: TLS: {r} is not held, and nothing sends it"
                ))
            }
            Step::Install(install) => ready.push((tls, install)),
            Step::Failed(m) => return Err(format!("listeners[{listener:?}]: TLS: {m}")),
        }
    }
    Ok(ready)
}

fn install_all(ready: Prepared) {
    for (_, install) in ready {
        install();
    }
}
