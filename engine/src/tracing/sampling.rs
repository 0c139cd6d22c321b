//! The per-request tracing decision of Envoy's HCM, as a pure function of its inputs.
//!
//! Envoy splits this in two: `ConnectionManagerUtility::mutateTracingRequestHeader`
//! stamps a trace reason into `x-request-id` (client / forced / random, then
//! `overall_sampling` may clear it), and the tracer driver later overrides
//! that with the sampling flag of a propagated parent context, if any. The
//! function here folds both steps into one.

/// HCM `tracing` sampling percentages, each 0..=100 (Envoy's defaults: 100).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingConfig {
    /// `random_sampling`: requests with no other reason to be traced.
    pub random_sampling: f64,
    /// `client_sampling`: requests carrying `x-client-trace-id`.
    pub client_sampling: f64,
    /// `overall_sampling`: applied to every local decision, after the others.
    pub overall_sampling: f64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        Self {
            random_sampling: 100.0,
            client_sampling: 100.0,
            overall_sampling: 100.0,
        }
    }
}

/// What the request brought that bears on the decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplingInput {
    /// The propagated context's sampled flag (`Extracted::sampled()`).
    pub parent_sampled: Option<bool>,
    /// `x-envoy-force-trace` present *and* the request is internal/trusted;
    /// Envoy strips the header from external requests before this point.
    pub force_trace: bool,
    /// `x-client-trace-id` present.
    pub client_trace_id: bool,
    /// The health check filter answered or marked the request.
    pub health_check: bool,
}

/// The decision and why; the reason maps onto Envoy's tracing stats
/// (`tracing.random_sampling`, `tracing.client_enabled`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The upstream sender's decision, honoured by both providers as is.
    Parent { sampled: bool },
    /// `x-client-trace-id` won the `client_sampling` draw.
    Client,
    /// `x-envoy-force-trace` on an internal request.
    Forced,
    /// Won the `random_sampling` draw.
    Random,
    /// Health check requests are never traced.
    HealthCheck,
    /// A reason above applied but lost the `overall_sampling` draw.
    OverallRejected,
    /// No reason to trace.
    NotTraced,
}

impl Decision {
    pub fn traced(self) -> bool {
        matches!(
            self,
            Decision::Parent { sampled: true }
                | Decision::Client
                | Decision::Forced
                | Decision::Random
        )
    }
}

/// Envoy turns a `type.v3.Percent` into a fraction of 10 000 rounding to
/// the nearest integer (`PROTOBUF_PERCENT_TO_ROUNDED_INTEGER_OR_DEFAULT`),
/// then `featureEnabled` accepts when `draw % 10000 < numerator`.
fn enabled(percent: f64, draw: u64) -> bool {
    let numerator = if percent.is_nan() {
        0
    } else {
        (percent.clamp(0.0, 100.0) * 100.0).round() as u64
    };
    draw % 10_000 < numerator
}

/// Decides whether the request is traced. `draw` is any uniform u64 source.
///
/// Order, as Envoy:
/// 1. a parent's sampled flag wins outright (Envoy's drivers override the
///    local decision with it; `overall_sampling` never touches it);
/// 2. health check requests are not traced;
/// 3. `x-client-trace-id`, if it wins a `client_sampling` draw; Envoy
///    checks this *before* force-trace, and falls through when it loses;
/// 4. `x-envoy-force-trace` (already filtered to trusted requests);
/// 5. `random_sampling`;
/// 6. `overall_sampling` then clears any of 3–5.
///
/// Draws: the client check takes its own draw (Envoy uses the runtime's
/// RNG); `random_sampling` and `overall_sampling` share one draw, because
/// Envoy evaluates both against the same `x-request-id`-derived integer. So
/// with `overall >= random` the overall check never removes a randomly
/// sampled request. Draws are taken lazily, client first, so a test's
/// sequence is predictable.
pub fn decide(
    cfg: &SamplingConfig,
    input: &SamplingInput,
    draw: &mut impl FnMut() -> u64,
) -> Decision {
    if let Some(sampled) = input.parent_sampled {
        return Decision::Parent { sampled };
    }
    if input.health_check {
        return Decision::HealthCheck;
    }
    let local = if input.client_trace_id && enabled(cfg.client_sampling, draw()) {
        Decision::Client
    } else if input.force_trace {
        Decision::Forced
    } else {
        let request_draw = draw();
        if !enabled(cfg.random_sampling, request_draw) {
            return Decision::NotTraced;
        }
        return if enabled(cfg.overall_sampling, request_draw) {
            Decision::Random
        } else {
            Decision::OverallRejected
        };
    };
    if enabled(cfg.overall_sampling, draw()) {
        local
    } else {
        Decision::OverallRejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out the given draws in order; running past them is a test bug.
    fn draws(values: &[u64]) -> impl FnMut() -> u64 + '_ {
        let mut it = values.iter();
        move || *it.next().expect("unexpected draw")
    }

    fn cfg(random: f64, client: f64, overall: f64) -> SamplingConfig {
        SamplingConfig {
            random_sampling: random,
            client_sampling: client,
            overall_sampling: overall,
        }
    }

    #[test]
    fn defaults_trace_everything() {
        let d = decide(
            &SamplingConfig::default(),
            &SamplingInput::default(),
            &mut draws(&[9_999]),
        );
        assert_eq!(d, Decision::Random);
        assert!(d.traced());
    }

    #[test]
    fn parent_decision_wins_without_draws() {
        let none = cfg(0.0, 0.0, 0.0);
        for sampled in [true, false] {
            let input = SamplingInput {
                parent_sampled: Some(sampled),
                force_trace: true,
                client_trace_id: true,
                health_check: true,
            };
            let d = decide(&none, &input, &mut draws(&[]));
            assert_eq!(d, Decision::Parent { sampled });
            assert_eq!(d.traced(), sampled);
        }
    }

    #[test]
    fn health_checks_are_not_traced() {
        let input = SamplingInput {
            health_check: true,
            force_trace: true,
            ..Default::default()
        };
        assert_eq!(
            decide(&SamplingConfig::default(), &input, &mut draws(&[])),
            Decision::HealthCheck
        );
    }

    #[test]
    fn random_sampling_threshold() {
        // 25% = 2500 / 10000: draws 0..2499 are in.
        let c = cfg(25.0, 100.0, 100.0);
        let input = SamplingInput::default();
        assert_eq!(decide(&c, &input, &mut draws(&[2_499])), Decision::Random);
        assert_eq!(
            decide(&c, &input, &mut draws(&[2_500])),
            Decision::NotTraced
        );
        // Only draw % 10000 matters.
        assert_eq!(
            decide(&c, &input, &mut draws(&[10_000 + 17])),
            Decision::Random
        );
        // 0.01% is one in 10000; Envoy rounds 0.005 up to it.
        assert_eq!(
            decide(&cfg(0.005, 0.0, 100.0), &input, &mut draws(&[0])),
            Decision::Random
        );
        assert_eq!(
            decide(&cfg(0.004, 0.0, 100.0), &input, &mut draws(&[0])),
            Decision::NotTraced
        );
        assert_eq!(
            decide(&cfg(0.0, 0.0, 100.0), &input, &mut draws(&[0])),
            Decision::NotTraced
        );
        assert_eq!(
            decide(&cfg(f64::NAN, 0.0, 100.0), &input, &mut draws(&[0])),
            Decision::NotTraced
        );
    }

    #[test]
    fn random_and_overall_share_a_draw() {
        let input = SamplingInput::default();
        // overall >= random: a randomly sampled request always survives.
        assert_eq!(
            decide(&cfg(10.0, 100.0, 50.0), &input, &mut draws(&[999])),
            Decision::Random
        );
        // overall < random: the same draw decides both.
        let c = cfg(50.0, 100.0, 10.0);
        assert_eq!(decide(&c, &input, &mut draws(&[999])), Decision::Random);
        assert_eq!(
            decide(&c, &input, &mut draws(&[1_000])),
            Decision::OverallRejected
        );
        assert_eq!(
            decide(&c, &input, &mut draws(&[5_000])),
            Decision::NotTraced
        );
    }

    #[test]
    fn client_trace_id_precedes_force_trace() {
        let c = cfg(0.0, 50.0, 100.0);
        let both = SamplingInput {
            client_trace_id: true,
            force_trace: true,
            ..Default::default()
        };
        // Client draw wins, then the overall draw.
        assert_eq!(decide(&c, &both, &mut draws(&[4_999, 0])), Decision::Client);
        // Client draw loses: force-trace still applies.
        assert_eq!(decide(&c, &both, &mut draws(&[5_000, 0])), Decision::Forced);
        // Client draw loses, no force: random (0%) has the last word.
        let client = SamplingInput {
            client_trace_id: true,
            ..Default::default()
        };
        assert_eq!(
            decide(&c, &client, &mut draws(&[5_000, 0])),
            Decision::NotTraced
        );
        assert_eq!(
            decide(&cfg(100.0, 50.0, 100.0), &client, &mut draws(&[5_000, 42])),
            Decision::Random
        );
    }

    #[test]
    fn overall_sampling_applies_to_client_and_forced() {
        let c = cfg(0.0, 100.0, 20.0);
        let forced = SamplingInput {
            force_trace: true,
            ..Default::default()
        };
        assert_eq!(decide(&c, &forced, &mut draws(&[1_999])), Decision::Forced);
        assert_eq!(
            decide(&c, &forced, &mut draws(&[2_000])),
            Decision::OverallRejected
        );
        let client = SamplingInput {
            client_trace_id: true,
            ..Default::default()
        };
        assert_eq!(
            decide(&c, &client, &mut draws(&[0, 1_999])),
            Decision::Client
        );
        assert_eq!(
            decide(&c, &client, &mut draws(&[0, 2_000])),
            Decision::OverallRejected
        );
        assert!(!Decision::OverallRejected.traced());
        // overall 0 turns tracing off except for propagated decisions.
        let off = cfg(100.0, 100.0, 0.0);
        assert_eq!(
            decide(&off, &forced, &mut draws(&[0])),
            Decision::OverallRejected
        );
        let parent = SamplingInput {
            parent_sampled: Some(true),
            ..Default::default()
        };
        assert_eq!(
            decide(&off, &parent, &mut draws(&[])),
            Decision::Parent { sampled: true }
        );
    }
}
