//! The HTTP filters' Envoy series, one block per filter instance on a shard, found by the instance's name as a connection opens; a filter counts into its instance's block and the shard's gateway-wide one (`/stats`) alike.
//!
//! Envoy names a filter's counters after its connection manager and what
//! tells its instances apart: `http.<prefix>.fault.*`,
//! `http.<prefix>.rbac.<rules_stat_prefix>.*`,
//! `http.<prefix>.compressor.<library>.<coding>.*`,
//! `<stat_prefix>.http_local_rate_limit.*`, `http.<prefix>.cors.*`. The block of an instance is
//! kept under [`instance_name`], which holds exactly those parts, so two
//! connection managers with one `stat_prefix` (or two listeners running
//! one) share their counts, as Envoy's do.

use std::sync::Arc;

use engine::HttpFilterConfig;

use super::envoy::Registry;
use super::{
    CompressorStats, CorsStats, Counter, CsrfStats, DecompressorStats, ExtAuthzStats, FaultStats,
    HealthCheckStats, LocalRateLimitStats, RbacStats, ShardStats,
};

/// A filter instance's block, as a connection holds it (one per filter
/// of its chain; `None` for a filter without series).
#[derive(Debug, Clone, Default)]
pub enum FilterBlock {
    #[default]
    None,
    Cors(Arc<CorsStats>),
    Csrf(Arc<CsrfStats>),
    Fault(Arc<FaultStats>),
    Rbac(Arc<RbacStats>),
    ExtAuthz(Arc<ExtAuthzStats>),
    LocalRateLimit(Arc<LocalRateLimitStats>),
    Compressor(Arc<CompressorStats>),
    Decompressor(Arc<DecompressorStats>),
    HealthCheck(Arc<HealthCheckStats>),
}

/// One shard's filter blocks, by kind, each by [`instance_name`].
#[derive(Debug, Default)]
pub struct FilterRegistries {
    pub cors: Registry<CorsStats>,
    pub csrf: Registry<CsrfStats>,
    pub fault: Registry<FaultStats>,
    pub rbac: Registry<RbacStats>,
    pub ext_authz: Registry<ExtAuthzStats>,
    pub local_rate_limit: Registry<LocalRateLimitStats>,
    pub compressor: Registry<CompressorStats>,
    pub decompressor: Registry<DecompressorStats>,
    pub health_check: Registry<HealthCheckStats>,
}

/// The name a filter instance's block is kept under, given its connection
/// manager's `stat_prefix`: the parts of Envoy's names for its series,
/// newline-separated (`None`: the filter has no series of its own here).
pub fn instance_name(config: &HttpFilterConfig, hcm_prefix: &str) -> Option<String> {
    Some(match config {
        HttpFilterConfig::Cors
        | HttpFilterConfig::Csrf(_)
        | HttpFilterConfig::Fault(_)
        | HttpFilterConfig::HealthCheck(_) => hcm_prefix.to_owned(),
        HttpFilterConfig::Rbac(r) => format!(
            "{hcm_prefix}\n{}\n{}",
            r.rules_stat_prefix, r.shadow_rules_stat_prefix
        ),
        HttpFilterConfig::ExtAuthz(a) => format!("{hcm_prefix}\n{}", a.stat_prefix),
        // Envoy's are not under the connection manager's name.
        HttpFilterConfig::LocalRateLimit(l) => l.stat_prefix.clone(),
        HttpFilterConfig::Compressor(c) => format!(
            "{hcm_prefix}\n{}\n{}",
            c.library_name,
            coding_stat_name(c.library.coding())
        ),
        HttpFilterConfig::Decompressor(d) => format!(
            "{hcm_prefix}\n{}\n{}",
            d.library_name,
            coding_stat_name(d.library.coding)
        ),
        _ => return None,
    })
}

/// Envoy's name for a coding in its compressors' series (`gzip`,
/// `brotli`, `zstd`).
pub fn coding_stat_name(c: compression::Coding) -> &'static str {
    match c {
        compression::Coding::Gzip => "gzip",
        compression::Coding::Brotli => "brotli",
        compression::Coding::Zstd => "zstd",
    }
}

impl FilterRegistries {
    /// The block of the filter `config` of a connection manager named
    /// `hcm_prefix`, made if new: found once per connection.
    pub fn block(&self, config: &HttpFilterConfig, hcm_prefix: &str) -> FilterBlock {
        let Some(name) = instance_name(config, hcm_prefix) else {
            return FilterBlock::None;
        };
        match config {
            HttpFilterConfig::Cors => FilterBlock::Cors(self.cors.get(&name)),
            HttpFilterConfig::Csrf(_) => FilterBlock::Csrf(self.csrf.get(&name)),
            HttpFilterConfig::Fault(_) => FilterBlock::Fault(self.fault.get(&name)),
            HttpFilterConfig::Rbac(_) => FilterBlock::Rbac(self.rbac.get(&name)),
            HttpFilterConfig::ExtAuthz(_) => FilterBlock::ExtAuthz(self.ext_authz.get(&name)),
            HttpFilterConfig::LocalRateLimit(_) => {
                FilterBlock::LocalRateLimit(self.local_rate_limit.get(&name))
            }
            HttpFilterConfig::Compressor(_) => FilterBlock::Compressor(self.compressor.get(&name)),
            HttpFilterConfig::Decompressor(_) => {
                FilterBlock::Decompressor(self.decompressor.get(&name))
            }
            HttpFilterConfig::HealthCheck(_) => {
                FilterBlock::HealthCheck(self.health_check.get(&name))
            }
            _ => FilterBlock::None,
        }
    }
}

/// A kind of filter counters: the shard's gateway-wide block of it, and
/// an instance's, if a [`FilterBlock`] is one.
pub trait FilterCounters: Sized {
    fn shard(stats: &ShardStats) -> &Self;
    fn instance(block: &FilterBlock) -> Option<&Arc<Self>>;
}

macro_rules! filter_counters {
    ($t:ty, $field:ident, $variant:ident) => {
        impl FilterCounters for $t {
            fn shard(stats: &ShardStats) -> &Self {
                &stats.$field
            }
            fn instance(block: &FilterBlock) -> Option<&Arc<Self>> {
                match block {
                    FilterBlock::$variant(b) => Some(b),
                    _ => None,
                }
            }
        }
    };
}

filter_counters!(CorsStats, cors, Cors);
filter_counters!(CsrfStats, csrf, Csrf);
filter_counters!(FaultStats, fault, Fault);
filter_counters!(RbacStats, rbac, Rbac);
filter_counters!(ExtAuthzStats, ext_authz, ExtAuthz);
filter_counters!(LocalRateLimitStats, local_rate_limit, LocalRateLimit);
filter_counters!(CompressorStats, compressor, Compressor);
filter_counters!(DecompressorStats, decompressor, Decompressor);
filter_counters!(HealthCheckStats, health_check, HealthCheck);

/// A filter's counters where it counts: the shard's (`/stats`) and its
/// instance's (Envoy's series), when it has one.
#[derive(Debug)]
pub struct Both<'a, T> {
    pub shard: &'a T,
    pub instance: Option<&'a T>,
}

impl<T> Clone for Both<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Both<'_, T> {}

impl<'a, T> Both<'a, T> {
    pub fn inc(&self, c: impl Fn(&T) -> &Counter) {
        c(self.shard).inc();
        if let Some(i) = self.instance {
            c(i).inc();
        }
    }

    pub fn add(&self, c: impl Fn(&T) -> &Counter, n: u64) {
        c(self.shard).add(n);
        if let Some(i) = self.instance {
            c(i).add(n);
        }
    }

    pub fn dec(&self, c: impl Fn(&T) -> &Counter) {
        c(self.shard).dec();
        if let Some(i) = self.instance {
            c(i).dec();
        }
    }
}

/// [`Both`] owned, for a count made after the filter's hook returned (an
/// authorization's answer, a fault's end).
#[derive(Debug)]
pub struct OwnedBoth<T> {
    pub shard: Arc<ShardStats>,
    pub instance: Option<Arc<T>>,
}

impl<T> Clone for OwnedBoth<T> {
    fn clone(&self) -> Self {
        Self {
            shard: Arc::clone(&self.shard),
            instance: self.instance.clone(),
        }
    }
}

impl<T: FilterCounters> OwnedBoth<T> {
    pub fn get(&self) -> Both<'_, T> {
        Both {
            shard: T::shard(&self.shard),
            instance: self.instance.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_goes_to_the_shard_and_the_instance() {
        let (shard, instance) = (FaultStats::default(), FaultStats::default());
        let both = Both {
            shard: &shard,
            instance: Some(&instance),
        };
        both.inc(|f| &f.aborts_injected);
        both.add(|f| &f.delays_injected, 2);
        assert_eq!(shard.aborts_injected.get(), 1);
        assert_eq!(instance.delays_injected.get(), 2);
        let alone = Both {
            shard: &shard,
            instance: None,
        };
        alone.inc(|f| &f.aborts_injected);
        assert_eq!(
            (shard.aborts_injected.get(), instance.aborts_injected.get()),
            (2, 1)
        );
    }

    #[test]
    fn instances_are_named_by_what_envoy_names_them_by() {
        let rbac = |rules: &str| {
            HttpFilterConfig::Rbac(Arc::new(engine::RbacFilter {
                rules_stat_prefix: rules.into(),
                ..Default::default()
            }))
        };
        assert_eq!(instance_name(&rbac("r_"), "a").as_deref(), Some("a\nr_\n"));
        assert_eq!(instance_name(&HttpFilterConfig::Router, "a"), None);
        let regs = FilterRegistries::default();
        let same = |x: FilterBlock, y: FilterBlock| match (x, y) {
            (FilterBlock::Rbac(x), FilterBlock::Rbac(y)) => Arc::ptr_eq(&x, &y),
            other => panic!("{other:?}"),
        };
        // One block per name: two connections (or listeners) of one
        // manager share it; another prefix is another block.
        assert!(same(
            regs.block(&rbac("r_"), "a"),
            regs.block(&rbac("r_"), "a")
        ));
        assert!(!same(
            regs.block(&rbac("r_"), "a"),
            regs.block(&rbac("r_"), "b")
        ));
        assert!(!same(
            regs.block(&rbac("r_"), "a"),
            regs.block(&rbac(""), "a")
        ));
    }
}
