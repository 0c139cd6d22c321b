//! `session_ticket_keys`: TLS session tickets sealed with keys the operator gives, so that every gateway holding the same keys resumes the others' sessions (many gateways behind ECMP or an L4 balancer).
//!
//! A key is Envoy's 80-byte format: a 16-byte name, 32 bytes Envoy uses
//! for an HMAC (unused here), and a 32-byte AES-256 key. The first key
//! seals new tickets; every key opens the tickets named by it, so keys
//! rotate by putting the new one first and keeping the old one for a
//! ticket lifetime. A ticket is the key's name, a random 96-bit nonce and
//! the state sealed with AES-256-GCM (the name as associated data). The
//! tickets are not Envoy's (its are AES-CBC with an HMAC): gateways share
//! them with gateways, not with Envoys.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

/// Envoy's key size.
pub const TICKET_KEY_LEN: usize = 80;
const NAME_LEN: usize = 16;
/// What a ticket may live: rustls's own ticketer's lifetime (12 h).
const LIFETIME_SECS: u32 = 12 * 60 * 60;

/// Seals tickets with the first key, opens them with any.
pub struct SharedTicketer {
    keys: Vec<([u8; NAME_LEN], LessSafeKey)>,
    rng: SystemRandom,
}

impl std::fmt::Debug for SharedTicketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTicketer")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl SharedTicketer {
    /// From keys of [`TICKET_KEY_LEN`] bytes each, at least one; the
    /// error says which key is wrong.
    pub fn new(keys: &[Vec<u8>]) -> Result<Self, String> {
        if keys.is_empty() {
            return Err("at least one key is required".into());
        }
        let keys = keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                if k.len() != TICKET_KEY_LEN {
                    return Err(format!(
                        "key {i}: {} bytes; a key is {TICKET_KEY_LEN} bytes",
                        k.len()
                    ));
                }
                let mut name = [0u8; NAME_LEN];
                name.copy_from_slice(&k[..NAME_LEN]);
                let aes = UnboundKey::new(&AES_256_GCM, &k[48..80])
                    .map_err(|_| format!("key {i}: not an AES-256 key"))?;
                Ok((name, LessSafeKey::new(aes)))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            keys,
            rng: SystemRandom::new(),
        })
    }
}

impl ProducesTickets for SharedTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME_SECS
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let (name, key) = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut sealed = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(name),
            &mut sealed,
        )
        .ok()?;
        let mut ticket = Vec::with_capacity(NAME_LEN + NONCE_LEN + sealed.len());
        ticket.extend_from_slice(name);
        ticket.extend_from_slice(&nonce);
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < NAME_LEN + NONCE_LEN {
            return None;
        }
        let (name, rest) = ticket.split_at(NAME_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let (name, key) = self.keys.iter().find(|(n, _)| n == name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key.open_in_place(nonce, Aad::from(name), &mut buf).ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(fill: u8) -> Vec<u8> {
        let mut k = vec![fill; TICKET_KEY_LEN];
        k[0] = fill.wrapping_add(1); // a distinct name
        k
    }

    #[test]
    fn tickets_open_with_any_key_and_seal_with_the_first() {
        let old = SharedTicketer::new(&[key(1)]).unwrap();
        let rotated = SharedTicketer::new(&[key(2), key(1)]).unwrap();
        let t = old.encrypt(b"session state").unwrap();
        assert_eq!(rotated.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        let t2 = rotated.encrypt(b"newer").unwrap();
        assert_eq!(
            old.decrypt(&t2),
            None,
            "sealed with a key the old set lacks"
        );
        assert_eq!(
            SharedTicketer::new(&[key(2)])
                .unwrap()
                .decrypt(&t2)
                .as_deref(),
            Some(&b"newer"[..])
        );
    }

    #[test]
    fn tampered_or_short_tickets_do_not_open() {
        let t = SharedTicketer::new(&[key(1)]).unwrap();
        let mut ticket = t.encrypt(b"state").unwrap();
        let last = ticket.len() - 1;
        ticket[last] ^= 1;
        assert_eq!(t.decrypt(&ticket), None);
        assert_eq!(t.decrypt(&[0u8; 10]), None);
        // Two sealings of the same state differ (fresh nonces).
        assert_ne!(t.encrypt(b"state"), t.encrypt(b"state"));
    }

    #[test]
    fn keys_must_be_80_bytes() {
        assert_eq!(
            SharedTicketer::new(&[key(1), vec![0; 48]]).unwrap_err(),
            "key 1: 48 bytes; a key is 80 bytes"
        );
        assert!(SharedTicketer::new(&[]).is_err());
    }
}
