//! Where a TLS context's certificates come from when they can change (files, and SDS secrets: the bootstrap's, over ADS, or from a file), and the recipe that reads them again when they do.
//!
//! A context that names SDS secrets is *pending* until every one of them
//! is held: its listener warms meanwhile, as Envoy's init manager waits
//! for SDS. When a secret changes, the context is read again and its
//! rustls config swapped in place: open connections keep theirs, the
//! listener is not drained. This crate never parses a secret: `xds`
//! decodes it, with the same validators inline certificates go through.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use super::TlsError;

/// One SDS secret as its source sent it: the `Secret` proto, encoded.
#[derive(Debug, PartialEq, Eq)]
pub struct SdsSecret {
    /// The `version_info` it came with (empty for the bootstrap's).
    pub version: String,
    pub encoded: Vec<u8>,
}

/// Secrets by name.
pub type SecretMap = BTreeMap<String, Arc<SdsSecret>>;

/// Where an `SdsSecretConfig` finds its secret.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecretSource {
    /// No `sds_config`: the bootstrap's `static_resources.secrets`.
    Static,
    /// `sds_config: {ads: {}}`.
    Ads,
    /// `sds_config.path_config_source`: a file holding a
    /// `DiscoveryResponse` of secrets, read again when it changes.
    File(PathBuf),
}

/// One `SdsSecretConfig`: a secret's name and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef {
    pub name: String,
    pub source: SecretSource,
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            SecretSource::Static => write!(f, "static secret {:?}", self.name),
            SecretSource::Ads => write!(f, "SDS secret {:?} (ADS)", self.name),
            SecretSource::File(p) => write!(f, "SDS secret {:?} in {}", self.name, p.display()),
        }
    }
}

/// The secrets held now: the bootstrap's and those received over ADS.
#[derive(Debug, Clone, Copy)]
pub struct SecretView<'a> {
    pub statics: &'a SecretMap,
    pub ads: &'a SecretMap,
}

static NO_SECRETS: SecretMap = BTreeMap::new();

impl SecretView<'_> {
    /// No secrets at all: what validation alone can resolve.
    pub fn empty() -> SecretView<'static> {
        SecretView {
            statics: &NO_SECRETS,
            ads: &NO_SECRETS,
        }
    }

    /// The secret `r` names, if held (`None` for file secrets, which the
    /// recipe reads itself).
    pub fn get(&self, r: &SecretRef) -> Option<&Arc<SdsSecret>> {
        match r.source {
            SecretSource::Static => self.statics.get(&r.name),
            SecretSource::Ads => self.ads.get(&r.name),
            SecretSource::File(_) => None,
        }
    }
}

/// Why a context could not be read (again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildError {
    /// A secret it names is not held (yet): the context stays as it is.
    Waiting(SecretRef),
    /// What it read is wrong (the message names the field).
    Invalid(String),
}

impl std::fmt::Display for RebuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Waiting(r) => write!(f, "waiting for {r}"),
            Self::Invalid(m) => f.write_str(m),
        }
    }
}

/// What one reading of a context's sources gave: its spec, and the files
/// it read (to watch: certificates, keys, SDS files).
pub struct Rebuilt<S> {
    pub spec: S,
    pub files: Vec<PathBuf>,
}

/// Reads a context's sources and decodes them as at load time: the
/// caller's (`xds`'s) recipe, so that this crate does no I/O and parses
/// no protos.
pub type Rebuild<S> = Arc<dyn Fn(&SecretView) -> Result<Rebuilt<S>, RebuildError> + Send + Sync>;

/// A context's changeable sources: the static and ADS secrets it names
/// (file secrets are among its files) and how to read them.
pub struct TlsSource<S> {
    pub secrets: Vec<SecretRef>,
    rebuild: Rebuild<S>,
}

impl<S> TlsSource<S> {
    pub fn new(secrets: Vec<SecretRef>, rebuild: Rebuild<S>) -> Self {
        Self { secrets, rebuild }
    }

    /// Reads the sources if it is needed: always when `force` (a file
    /// changed) or never built (`built_from` is `None`), else only when
    /// one of the named secrets is no longer the one it was built from.
    /// `Ok(None)`: nothing changed. On success, also the secrets read.
    #[allow(clippy::type_complexity)]
    pub fn read(
        &self,
        view: &SecretView,
        built_from: Option<&[Arc<SdsSecret>]>,
        force: bool,
    ) -> Result<Option<(Rebuilt<S>, Vec<Arc<SdsSecret>>)>, RebuildError> {
        let mut held = Vec::with_capacity(self.secrets.len());
        for r in &self.secrets {
            if matches!(r.source, SecretSource::File(_)) {
                continue;
            }
            match view.get(r) {
                Some(s) => held.push(Arc::clone(s)),
                None => return Err(RebuildError::Waiting(r.clone())),
            }
        }
        let same = built_from.is_some_and(|b| {
            b.len() == held.len() && b.iter().zip(&held).all(|(a, b)| Arc::ptr_eq(a, b))
        });
        if same && !force {
            return Ok(None);
        }
        Ok(Some(((self.rebuild)(view)?, held)))
    }
}

/// One build of a context: what connections take (`St`: a rustls config
/// and what is shown of it), and what it was read from.
#[derive(Debug)]
pub struct Current<St> {
    pub value: St,
    /// The files its certificates, keys, CAs and SDS secrets were read
    /// from, to watch.
    pub files: Vec<PathBuf>,
    /// The static and ADS secrets it was read from.
    built_from: Vec<Arc<SdsSecret>>,
}

impl<St> std::ops::Deref for Current<St> {
    type Target = St;
    fn deref(&self) -> &St {
        &self.value
    }
}

/// What reading a context's sources again found.
#[derive(Debug)]
pub enum Resolution<St> {
    /// Nothing it reads changed.
    Unchanged,
    /// A new build, not yet installed.
    Ready(Arc<Current<St>>),
    /// A secret it names is not held yet.
    Waiting(SecretRef),
    /// What it read does not make a context (the message says why).
    Failed(String),
}

/// A context's current build, swapped whole when its sources change (new
/// connections take the new one, open ones keep theirs), and the recipe
/// to read them; no build (`None`) while a secret it names has not come.
pub struct Sourced<Sp, St> {
    current: ArcSwapOption<Current<St>>,
    source: Option<TlsSource<Sp>>,
}

impl<Sp, St> Sourced<Sp, St> {
    /// Built once, with nothing to read again.
    pub fn built(value: St) -> Self {
        Self {
            current: ArcSwapOption::from_pointee(Current {
                value,
                files: Vec::new(),
                built_from: Vec::new(),
            }),
            source: None,
        }
    }

    /// Not built yet: [`Reloadable::resolve`] reads `source` when what it names
    /// is held.
    pub fn pending(source: TlsSource<Sp>) -> Self {
        Self {
            current: ArcSwapOption::empty(),
            source: Some(source),
        }
    }

    /// Built just now from `source` (which named no secret to wait for),
    /// reading `files`: kept, with the recipe to read it again.
    pub fn built_from(value: St, source: TlsSource<Sp>, files: Vec<PathBuf>) -> Self {
        Self {
            current: ArcSwapOption::from_pointee(Current {
                value,
                files,
                built_from: Vec::new(),
            }),
            source: Some(source),
        }
    }

    pub fn load(&self) -> Option<Arc<Current<St>>> {
        self.current.load_full()
    }

    pub fn is_ready(&self) -> bool {
        self.current.load().is_some()
    }

    /// The static and SDS secrets it names.
    pub fn secrets(&self) -> &[SecretRef] {
        self.source.as_ref().map_or(&[], |s| &s.secrets[..])
    }

    /// The files its current build was read from.
    pub fn files(&self) -> Vec<PathBuf> {
        self.load().map(|c| c.files.clone()).unwrap_or_default()
    }

    /// Reads the sources again if needed (`force`: a file changed) and
    /// builds with `build`, without installing: a caller updating several
    /// contexts installs all or none.
    pub fn prepare(
        &self,
        view: &SecretView,
        force: bool,
        build: impl FnOnce(Sp) -> Result<St, TlsError>,
    ) -> Resolution<St> {
        let Some(source) = &self.source else {
            return Resolution::Unchanged;
        };
        let current = self.load();
        let built_from = current.as_ref().map(|c| &c.built_from[..]);
        match source.read(view, built_from, force) {
            Ok(None) => Resolution::Unchanged,
            Ok(Some((rebuilt, secrets))) => match build(rebuilt.spec) {
                Ok(value) => Resolution::Ready(Arc::new(Current {
                    value,
                    files: rebuilt.files,
                    built_from: secrets,
                })),
                Err(e) => Resolution::Failed(e.to_string()),
            },
            Err(RebuildError::Waiting(r)) => Resolution::Waiting(r),
            Err(RebuildError::Invalid(m)) => Resolution::Failed(m),
        }
    }

    /// Swaps a prepared build in.
    pub fn install(&self, current: Arc<Current<St>>) {
        self.current.store(Some(current));
    }
}

/// What [`Reloadable::step`] found: what to install, or why not.
pub enum Step<'a> {
    Unchanged,
    /// Installs the new build (run it, or drop it to keep the current).
    Install(Box<dyn FnOnce() + 'a>),
    Waiting(SecretRef),
    Failed(String),
}

/// A TLS context (a listener's or a cluster's) whose sources can change:
/// what the control shard reads again when a file or a secret does.
pub trait Reloadable: Send + Sync {
    /// The static and SDS secrets it names.
    fn secrets(&self) -> &[SecretRef];
    /// The files its current build was read from.
    fn files(&self) -> Vec<PathBuf>;
    /// Whether it has a build (every secret it names has come).
    fn is_ready(&self) -> bool;
    /// Reads its sources again if needed (`force`: a file changed).
    fn step(&self, view: &SecretView, force: bool) -> Step<'_>;

    /// [`Self::step`], installed at once: whether a new build went in. On
    /// any error the current build stays.
    fn resolve(&self, view: &SecretView, force: bool) -> Result<bool, RebuildError> {
        match self.step(view, force) {
            Step::Unchanged => Ok(false),
            Step::Install(install) => {
                install();
                Ok(true)
            }
            Step::Waiting(r) => Err(RebuildError::Waiting(r)),
            Step::Failed(m) => Err(RebuildError::Invalid(m)),
        }
    }
}

/// [`Reloadable::step`] of a [`Sourced`] built with `build`.
pub(super) fn step<'a, Sp, St: Send + Sync + 'a>(
    sourced: &'a Sourced<Sp, St>,
    view: &SecretView,
    force: bool,
    build: impl FnOnce(Sp) -> Result<St, TlsError>,
) -> Step<'a> {
    match sourced.prepare(view, force, build) {
        Resolution::Unchanged => Step::Unchanged,
        Resolution::Ready(c) => Step::Install(Box::new(move || sourced.install(c))),
        Resolution::Waiting(r) => Step::Waiting(r),
        Resolution::Failed(m) => Step::Failed(m),
    }
}

/// [`Reloadable`] for a TLS context type whose field `tls` is its
/// [`Sourced`] build and `$build` makes a build from a spec.
macro_rules! reloadable {
    ($t:ty, $build:path) => {
        impl $crate::tls::Reloadable for $t {
            fn secrets(&self) -> &[$crate::tls::SecretRef] {
                self.tls.secrets()
            }
            fn files(&self) -> Vec<std::path::PathBuf> {
                self.tls.files()
            }
            fn is_ready(&self) -> bool {
                self.tls.is_ready()
            }
            fn step(&self, view: &$crate::tls::SecretView, force: bool) -> $crate::tls::Step<'_> {
                $crate::tls::source::step(&self.tls, view, force, $build)
            }
        }
    };
}
pub(super) use reloadable;
