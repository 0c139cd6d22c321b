//! `accept-encoding` against the chain's compressors, decided as Envoy 1.40 decides it: the client's order breaks ties, `choose_first` beats a tie, `q=0` strikes a coding out, `*` takes the first compressor left, codings are matched case-sensitively.

use engine::Coding;

/// What a request's `accept-encoding` asks of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No `accept-encoding` field.
    NoHeader,
    /// Nothing acceptable was named (or every value was refused).
    NotValid,
    /// `identity` won.
    Identity,
    /// `*` won: the first compressor left, in chain order.
    Wildcard(Coding),
    /// A compressor named by its coding won.
    Named(Coding),
}

impl Decision {
    /// The coding the response gets, if any.
    pub fn coding(self) -> Option<Coding> {
        match self {
            Self::Wildcard(c) | Self::Named(c) => Some(c),
            _ => None,
        }
    }
}

/// One candidate: a compressor of the chain that may serve the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub coding: Coding,
    pub choose_first: bool,
}

/// One `accept-encoding` element: its coding's name and q.
#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    name: &'a [u8],
    q: f64,
}

/// Every element of the values, in order; an element whose `q` does not
/// parse is dropped.
fn tokens<'a>(values: impl Iterator<Item = &'a [u8]>) -> impl Iterator<Item = Token<'a>> {
    values
        .flat_map(|v| v.split(|&b| b == b','))
        .filter_map(|element| {
            let element = element.trim_ascii();
            if element.is_empty() {
                return None;
            }
            let (name, param) = match element.iter().position(|&b| b == b';') {
                Some(at) => (&element[..at], Some(&element[at + 1..])),
                None => (element, None),
            };
            let name = name.trim_ascii();
            // Only the first parameter counts, and only when it is `q`.
            let q = match param.and_then(|p| {
                let at = p.iter().position(|&b| b == b'=')?;
                let key = p[..at].trim_ascii();
                key.eq_ignore_ascii_case(b"q")
                    .then(|| p[at + 1..].trim_ascii())
            }) {
                Some(value) => parse_q(value)?,
                None => 1.0,
            };
            Some(Token { name, q })
        })
}

/// A q value as Envoy reads one (a permissive float: `.5`, `1e-3`,
/// `inf`; no clamping).
fn parse_q(v: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(v).ok()?;
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|n| n as f64);
    }
    s.parse::<f64>().ok()
}

/// The decision for `values` (every `accept-encoding` value, in order;
/// `None`: no field) among `candidates` (chain order; the first of a
/// coding stands for it).
pub fn decide<'a>(
    values: Option<impl Iterator<Item = &'a [u8]> + Clone>,
    candidates: &[Candidate],
) -> Decision {
    let Some(values) = values else {
        return Decision::NoHeader;
    };
    let named = |name: &[u8]| {
        candidates
            .iter()
            .find(|c| c.coding.token().as_bytes() == name)
    };
    // `q=0` strikes a coding out of the candidates.
    let struck = |c: &Candidate| {
        tokens(values.clone()).any(|t| t.q == 0.0 && t.name == c.coding.token().as_bytes())
    };
    let left: smallvec::SmallVec<[Candidate; 3]> =
        candidates.iter().filter(|c| !struck(c)).copied().collect();
    if left.is_empty() {
        return Decision::NotValid;
    }
    #[derive(Clone, Copy)]
    enum Pick {
        Identity,
        Any,
        Coding(Candidate),
    }
    let mut best = (Pick::Identity, 0.0_f64);
    let mut any_token = false;
    for t in tokens(values) {
        any_token = true;
        let pick = match t.name {
            b"identity" => Pick::Identity,
            b"*" => Pick::Any,
            name => match named(name).filter(|c| left.contains(c)) {
                Some(c) => Pick::Coding(*c),
                None => continue,
            },
        };
        let first = matches!(pick, Pick::Coding(c) if c.choose_first);
        if t.q > best.1 || (t.q == best.1 && first) {
            best = (pick, t.q);
        }
    }
    if !any_token || best.1 == 0.0 || best.1.is_nan() {
        return Decision::NotValid;
    }
    match best.0 {
        Pick::Identity => Decision::Identity,
        Pick::Any => Decision::Wildcard(left[0].coding),
        Pick::Coding(c) => Decision::Named(c.coding),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GZ: Candidate = Candidate {
        coding: Coding::Gzip,
        choose_first: false,
    };
    const BR: Candidate = Candidate {
        coding: Coding::Brotli,
        choose_first: false,
    };
    const ZS: Candidate = Candidate {
        coding: Coding::Zstd,
        choose_first: false,
    };

    fn one(header: &str, chain: &[Candidate]) -> Decision {
        decide(Some(std::iter::once(header.as_bytes())), chain)
    }

    /// Envoy 1.40's answers with one gzip compressor (recorded
    /// 2026-11-28, /tmp/research-compress section A).
    #[test]
    fn one_gzip_compressor_as_envoy() {
        use Decision::*;
        let gz = [GZ];
        for (header, want) in [
            ("gzip", Named(Coding::Gzip)),
            ("GZIP", NotValid),
            ("Gzip", NotValid),
            (" gzip ", Named(Coding::Gzip)),
            ("gzip;q=0", NotValid),
            ("gzip;q=0.0", NotValid),
            ("gzip; q=0.001", Named(Coding::Gzip)),
            ("gzip;q=1.5", Named(Coding::Gzip)),
            ("gzip;Q=0.5", Named(Coding::Gzip)),
            ("gzip;q=abc", NotValid),
            ("gzip;q=", NotValid),
            ("gzip;level=1", Named(Coding::Gzip)),
            ("gzip;q=0.5;foo=bar", NotValid),
            ("*", Wildcard(Coding::Gzip)),
            ("*;q=0", NotValid),
            ("identity", Identity),
            ("identity;q=0", NotValid),
            ("identity, gzip;q=0.5", Identity),
            ("gzip;q=0.5, identity", Identity),
            ("gzip;q=0.5, identity;q=0.5", Named(Coding::Gzip)),
            ("identity;q=0.5, gzip;q=0.5", Identity),
            ("gzip;q=0, *", NotValid),
            ("*;q=0, gzip", Named(Coding::Gzip)),
            ("*, gzip;q=0", NotValid),
            ("br", NotValid),
            ("deflate, br", NotValid),
            ("br, *;q=0.1", Wildcard(Coding::Gzip)),
            ("x-gzip", NotValid),
            ("", NotValid),
            (",", NotValid),
            ("gzip,", Named(Coding::Gzip)),
            (",,gzip", Named(Coding::Gzip)),
            ("gzip;q=0, gzip", NotValid),
            ("gzip, gzip;q=0", NotValid),
            ("gzip;q=-1", NotValid),
            ("gzip;q=1e-3", Named(Coding::Gzip)),
            ("gzip ;q=0", NotValid),
            ("gzip; q = 0", NotValid),
            ("gzip;q=0.3, *;q=0.5", Wildcard(Coding::Gzip)),
            ("gzip;foo=bar;q=0", Named(Coding::Gzip)),
            ("gzip;q=1;", NotValid),
            ("gzip;q=\"0.5\"", NotValid),
            ("gzip;q=.5", Named(Coding::Gzip)),
            ("gzip;q=0x1", Named(Coding::Gzip)),
            ("gzip;q=inf", Named(Coding::Gzip)),
            ("gzip;q=nan", NotValid),
            ("gzip;q", Named(Coding::Gzip)),
            ("gzip;=0", Named(Coding::Gzip)),
            ("gzip;q==0", NotValid),
            ("*;q=0.5, gzip;q=nan", Wildcard(Coding::Gzip)),
        ] {
            assert_eq!(one(header, &gz), want, "{header:?}");
        }
        assert_eq!(decide(None::<std::iter::Empty<&[u8]>>, &gz), NoHeader);
    }

    /// gzip, br, zstd in that order, then with br `choose_first`
    /// (section B).
    #[test]
    fn several_compressors_as_envoy() {
        use Decision::*;
        let chain = [GZ, BR, ZS];
        for (header, want) in [
            ("gzip, br", Named(Coding::Gzip)),
            ("br, gzip", Named(Coding::Brotli)),
            ("zstd, br, gzip", Named(Coding::Zstd)),
            ("br;q=0.5, gzip", Named(Coding::Gzip)),
            ("*", Wildcard(Coding::Gzip)),
            ("*, gzip;q=0", Wildcard(Coding::Brotli)),
            ("*, br;q=0, gzip;q=0", Wildcard(Coding::Zstd)),
            ("br;q=0.9, gzip;q=0.9, zstd;q=0.9", Named(Coding::Brotli)),
            ("identity, br", Identity),
            ("deflate, *;q=0.5", Wildcard(Coding::Gzip)),
            ("BR", NotValid),
            ("br;q=0.5, *", Wildcard(Coding::Gzip)),
        ] {
            assert_eq!(one(header, &chain), want, "{header:?}");
        }
        let br_first = Candidate {
            choose_first: true,
            ..BR
        };
        let chain = [GZ, br_first, ZS];
        for (header, want) in [
            ("gzip, br", Named(Coding::Brotli)),
            ("zstd, br, gzip", Named(Coding::Brotli)),
            ("identity, br", Named(Coding::Brotli)),
            ("br;q=0.5, gzip", Named(Coding::Gzip)),
        ] {
            assert_eq!(one(header, &chain), want, "{header:?}");
        }
        // Several fields read as one list.
        let two = [&b"br"[..], &b"gzip;q=0"[..]];
        assert_eq!(
            decide(Some(two.into_iter()), &[GZ, BR]),
            Named(Coding::Brotli)
        );
    }
}
