//! The control loop's side of the ADS stream: a stream opened, a response (State of the World or Delta) turned into a push and an ACK or NACK, requests held back while a rejection repeats, and framed requests written.

use std::time::Instant;

use bytes::Bytes;
use xds::pb::envoy::service::discovery::v3::DiscoveryRequest;

use super::Control;
use crate::events::AdsEvent;
use crate::xds::grpc;

/// A response's outcome as the loop acts on it: changed, the rejection,
/// its repeats, the hold-back, and the framed ACK/NACK and subscriptions.
type AdsOutcome = (bool, Option<String>, u32, std::time::Duration, Vec<Bytes>);

impl Control {
    pub(super) async fn on_ads(&mut self, event: AdsEvent) {
        match event {
            AdsEvent::Connected { gen, send, server } => {
                tracing::info!(%server, "ADS stream open");
                self.ads.gen = gen;
                self.ads.send = Some(send);
                self.ads.server = Some(server);
                match self.client.is_delta() {
                    true => {
                        let requests = self.client.on_delta_stream_open();
                        self.send_frames(requests.iter().map(grpc::encode).collect());
                    }
                    false => {
                        let requests = self.client.on_stream_open();
                        self.send(requests);
                    }
                }
            }
            AdsEvent::DeltaResponse { gen, response } if gen == self.ads.gen => {
                let started = Instant::now();
                let type_url = response.type_url.clone();
                let version = response.system_version_info.clone();
                let o = self.client.on_delta_response(response, started);
                let frames = o.requests.iter().map(grpc::encode).collect();
                let outcome = (o.changed, o.rejected, o.repeated, o.delay, frames);
                self.after_response(&type_url, &version, outcome, started)
                    .await;
            }
            AdsEvent::DeltaResponse { .. } => {}
            AdsEvent::Response { gen, response } if gen == self.ads.gen => {
                let started = Instant::now();
                let type_url = response.type_url.clone();
                let version = response.version_info.clone();
                let o = self.client.on_response(response, started);
                let frames = o.requests.iter().map(grpc::encode).collect();
                let outcome = (o.changed, o.rejected, o.repeated, o.delay, frames);
                self.after_response(&type_url, &version, outcome, started)
                    .await;
            }
            AdsEvent::Response { .. } => {} // from a stream already given up
            AdsEvent::Lost { gen, reason } if gen == self.ads.gen => {
                tracing::warn!("ADS stream lost: {reason}");
                self.ads.send = None;
                self.ads.pending.clear();
                self.client.on_stream_closed();
                self.ads.restarts += 1;
            }
            AdsEvent::Lost { reason, .. } => {
                // Never opened: the next attempt follows the backoff.
                tracing::warn!("ADS server unreachable: {reason}");
                self.ads.connect_failures += 1;
            }
        }
    }

    /// What follows a response, State of the World or Delta: the log of a
    /// rejection, the push, then the ACK or NACK (held back while the
    /// same rejection repeats).
    async fn after_response(
        &mut self,
        type_url: &str,
        version: &str,
        (changed, rejected, n, delay, frames): AdsOutcome,
        started: Instant,
    ) {
        match &rejected {
            // A control plane resending the same bad version would flood
            // the log: say it again at 1, 2, 4, 8… repeats.
            Some(e) if n == 0 || n.is_power_of_two() => tracing::warn!(
                %type_url,
                %version,
                repeated = n,
                "xDS update rejected: {e}"
            ),
            _ => {}
        }
        if changed {
            self.push_xds(started).await;
        }
        // After the push: an ACK means every shard serves it.
        if delay.is_zero() {
            self.send_frames(frames);
        } else {
            let at = Instant::now() + delay;
            self.ads.pending.extend(frames.into_iter().map(|f| (at, f)));
        }
    }

    /// Sends held-back requests whose time has come.
    pub(super) fn send_due(&mut self, now: Instant) {
        if self.ads.pending.is_empty() {
            return;
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.ads.pending)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.ads.pending = later;
        self.send_frames(due.into_iter().map(|(_, f)| f).collect());
    }

    /// Writes requests on the ADS stream, if one is up. h2 queues them
    /// (they are small); a broken stream is noticed by the reader task.
    pub(super) fn send(&mut self, requests: Vec<DiscoveryRequest>) {
        let frames = match self.client.is_delta() {
            true => self
                .client
                .delta_requests(requests)
                .iter()
                .map(grpc::encode)
                .collect(),
            false => requests.iter().map(grpc::encode).collect(),
        };
        self.send_frames(frames);
    }

    /// Writes framed requests on the ADS stream, if one is up.
    fn send_frames(&mut self, frames: Vec<Bytes>) {
        let Some(send) = &mut self.ads.send else {
            return; // re-requested with current state when a stream opens
        };
        for f in frames {
            if let Err(e) = send.send_data(f, false) {
                tracing::warn!("ADS send: {e}");
                break;
            }
        }
    }
}
