//! DNS messages, sans-I/O (RFC 1035, RFC 3596): the query a resolver sends for a name's A or AAAA records, and the addresses, with their TTLs, it takes from the answer.
//!
//! A response is checked against the query it answers (id, question), its
//! names are read with compression pointers followed (a loop or a name
//! longer than 255 bytes is an error), and CNAME chains inside it are
//! followed from the asked name. Nothing here does I/O or keeps state, so
//! every rule has a deterministic test and the parser is fuzzed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The record types asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    A,
    Aaaa,
}

impl RecordType {
    fn code(self) -> u16 {
        match self {
            Self::A => 1,
            Self::Aaaa => 28,
        }
    }
}

const CNAME: u16 = 5;
const CLASS_IN: u16 = 1;
/// Header length.
const HEADER: usize = 12;
/// A name's longest wire form (RFC 1035 §3.1).
const MAX_NAME: usize = 255;
/// Compression pointers followed per name at most: more is a loop.
const MAX_JUMPS: usize = 32;

/// A response code (RFC 1035 §4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    NoError,
    FormErr,
    ServFail,
    NxDomain,
    NotImp,
    Refused,
    Other(u8),
}

impl Rcode {
    fn from_bits(b: u8) -> Self {
        match b {
            0 => Self::NoError,
            1 => Self::FormErr,
            2 => Self::ServFail,
            3 => Self::NxDomain,
            4 => Self::NotImp,
            5 => Self::Refused,
            n => Self::Other(n),
        }
    }
}

/// Why a name cannot be asked for, or a response not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    #[error("not a host name: {0}")]
    BadName(String),
    #[error("the response is cut short")]
    Short,
    #[error("the response answers another query (id or question)")]
    Mismatch,
    #[error("not a response")]
    NotResponse,
    #[error("a name in the response is malformed (too long, a bad label or a pointer loop)")]
    BadNameInResponse,
    #[error("a record's data does not fit its type")]
    BadRecord,
}

/// What a resolver keeps of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub rcode: Rcode,
    /// The TC bit: the answer did not fit (retry over TCP).
    pub truncated: bool,
    /// The asked type's addresses for the asked name (or what it is an
    /// alias of), each with its TTL in seconds, in the response's order.
    pub addrs: Vec<(IpAddr, u32)>,
}

/// A name's labels, lowercase, checked: a host name of at most 253
/// characters, labels of 1 to 63 bytes (a trailing dot is allowed).
fn labels(name: &str) -> Result<Vec<&str>, DnsError> {
    let bad = || DnsError::BadName(name.to_string());
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.is_empty() || trimmed.len() > 253 {
        return Err(bad());
    }
    let labels: Vec<&str> = trimmed.split('.').collect();
    let ok = labels.iter().all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if ok {
        Ok(labels)
    } else {
        Err(bad())
    }
}

/// A query for `name`'s records of type `rtype`, id `id`, recursion
/// desired.
pub fn query(id: u16, name: &str, rtype: RecordType) -> Result<Vec<u8>, DnsError> {
    let labels = labels(name)?;
    let mut q = Vec::with_capacity(HEADER + name.len() + 6);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00]); // RD
    q.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // one question
    for l in labels {
        q.push(l.len() as u8);
        q.extend(l.bytes().map(|b| b.to_ascii_lowercase()));
    }
    q.push(0);
    q.extend_from_slice(&rtype.code().to_be_bytes());
    q.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(q)
}

/// A reader over a message.
struct Reader<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DnsError> {
        let end = self.at.checked_add(n).ok_or(DnsError::Short)?;
        let out = self.msg.get(self.at..end).ok_or(DnsError::Short)?;
        self.at = end;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, DnsError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DnsError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A name, lowercase and dot-separated (no trailing dot), pointers
    /// followed.
    fn name(&mut self) -> Result<String, DnsError> {
        let mut out = String::new();
        let mut pos = self.at;
        let mut jumps = 0;
        let mut wire_len = 0;
        let mut resume = None;
        loop {
            let len = *self.msg.get(pos).ok_or(DnsError::Short)? as usize;
            match len >> 6 {
                0b00 => {
                    if len == 0 {
                        pos += 1;
                        break;
                    }
                    let label = self
                        .msg
                        .get(pos + 1..pos + 1 + len)
                        .ok_or(DnsError::Short)?;
                    wire_len += len + 1;
                    if wire_len > MAX_NAME {
                        return Err(DnsError::BadNameInResponse);
                    }
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.extend(label.iter().map(|b| b.to_ascii_lowercase() as char));
                    pos += 1 + len;
                }
                0b11 => {
                    let low = *self.msg.get(pos + 1).ok_or(DnsError::Short)? as usize;
                    jumps += 1;
                    if jumps > MAX_JUMPS {
                        return Err(DnsError::BadNameInResponse);
                    }
                    resume.get_or_insert(pos + 2);
                    pos = ((len & 0x3f) << 8) | low;
                }
                _ => return Err(DnsError::BadNameInResponse),
            }
        }
        self.at = resume.unwrap_or(pos);
        Ok(out)
    }
}

/// One resource record, as far as a resolver needs it.
struct Record<'a> {
    owner: String,
    rtype: u16,
    class: u16,
    ttl: u32,
    data: &'a [u8],
    /// Where `data` starts in the message (a CNAME's target may point back).
    data_at: usize,
}

fn record<'a>(r: &mut Reader<'a>) -> Result<Record<'a>, DnsError> {
    let owner = r.name()?;
    let rtype = r.u16()?;
    let class = r.u16()?;
    let ttl = r.u32()?;
    let len = r.u16()? as usize;
    let data_at = r.at;
    let data = r.take(len)?;
    Ok(Record {
        owner,
        rtype,
        class,
        // RFC 2181 §8: a TTL with the top bit set is read as 0.
        ttl: if ttl > i32::MAX as u32 { 0 } else { ttl },
        data,
        data_at,
    })
}

/// The answer to query `id` for `name`'s `rtype` records in `msg`.
pub fn parse_response(
    msg: &[u8],
    id: u16,
    name: &str,
    rtype: RecordType,
) -> Result<Answer, DnsError> {
    let asked: String = labels(name)?.join(".").to_ascii_lowercase();
    let mut r = Reader { msg, at: 0 };
    let header = r.take(HEADER)?;
    if u16::from_be_bytes([header[0], header[1]]) != id {
        return Err(DnsError::Mismatch);
    }
    if header[2] & 0x80 == 0 {
        return Err(DnsError::NotResponse);
    }
    let truncated = header[2] & 0x02 != 0;
    let rcode = Rcode::from_bits(header[3] & 0x0f);
    let count = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]) as usize;
    let (questions, answers) = (count(4), count(6));
    if questions != 1 {
        return Err(DnsError::Mismatch);
    }
    let qname = r.name()?;
    let (qtype, qclass) = (r.u16()?, r.u16()?);
    if qname != asked || qtype != rtype.code() || qclass != CLASS_IN {
        return Err(DnsError::Mismatch);
    }
    let mut records = Vec::with_capacity(answers.min(64));
    for _ in 0..answers {
        match record(&mut r) {
            Ok(rec) => records.push(rec),
            // A truncated response may end inside its answers.
            Err(DnsError::Short) if truncated => break,
            Err(e) => return Err(e),
        }
    }
    // The asked name and every name it is an alias of, in chain order.
    let mut names = vec![asked];
    let mut grew = true;
    while grew && names.len() <= MAX_JUMPS {
        grew = false;
        for rec in &records {
            if rec.rtype == CNAME && rec.class == CLASS_IN && names.contains(&rec.owner) {
                let mut target = Reader {
                    msg,
                    at: rec.data_at,
                };
                let t = target.name()?;
                if target.at != rec.data_at + rec.data.len() {
                    return Err(DnsError::BadRecord);
                }
                if !names.contains(&t) {
                    names.push(t);
                    grew = true;
                }
            }
        }
    }
    let mut addrs = Vec::new();
    for rec in &records {
        if rec.rtype != rtype.code() || rec.class != CLASS_IN || !names.contains(&rec.owner) {
            continue;
        }
        let ip = match (rtype, rec.data.len()) {
            (RecordType::A, 4) => IpAddr::V4(Ipv4Addr::new(
                rec.data[0],
                rec.data[1],
                rec.data[2],
                rec.data[3],
            )),
            (RecordType::Aaaa, 16) => {
                let mut b = [0u8; 16];
                b.copy_from_slice(rec.data);
                IpAddr::V6(Ipv6Addr::from(b))
            }
            _ => return Err(DnsError::BadRecord),
        };
        addrs.push((ip, rec.ttl));
    }
    Ok(Answer {
        rcode,
        truncated,
        addrs,
    })
}

/// Builds responses, for tests of resolvers (a DNS server on loopback)
/// and of this parser.
pub mod server {
    use super::*;

    /// A record a test server answers with.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Rr {
        Addr(IpAddr, u32),
        /// An alias of the asked name for `target`, with `target`'s
        /// addresses.
        Cname(String, u32),
    }

    /// The question of query `q`: its id, name (lowercase) and type code.
    pub fn question(q: &[u8]) -> Result<(u16, String, u16), DnsError> {
        let mut r = Reader { msg: q, at: 0 };
        let header = r.take(HEADER)?;
        let id = u16::from_be_bytes([header[0], header[1]]);
        let name = r.name()?;
        let qtype = r.u16()?;
        Ok((id, name, qtype))
    }

    /// The response to query `q` with `rcode`, the TC bit when
    /// `truncated`, and `answers` for the asked name (names written
    /// uncompressed, except a pointer to the question for the asked one).
    pub fn response(q: &[u8], rcode: u8, truncated: bool, answers: &[(String, Rr)]) -> Vec<u8> {
        let Ok((id, qname, qtype)) = question(q) else {
            return Vec::new();
        };
        let mut m = Vec::new();
        m.extend_from_slice(&id.to_be_bytes());
        m.push(0x81 | if truncated { 0x02 } else { 0 }); // QR, RD
        m.push(0x80 | (rcode & 0x0f)); // RA
        m.extend_from_slice(&[0, 1]);
        m.extend_from_slice(&(answers.len() as u16).to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 0]);
        let write_name = |m: &mut Vec<u8>, n: &str| {
            if n == qname {
                m.extend_from_slice(&[0xc0, HEADER as u8]);
                return;
            }
            for l in n.split('.').filter(|l| !l.is_empty()) {
                m.push(l.len() as u8);
                m.extend_from_slice(l.as_bytes());
            }
            m.push(0);
        };
        for l in qname.split('.') {
            m.push(l.len() as u8);
            m.extend_from_slice(l.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        for (owner, rr) in answers {
            write_name(&mut m, owner);
            match rr {
                Rr::Addr(ip, ttl) => {
                    let (t, data): (u16, Vec<u8>) = match ip {
                        IpAddr::V4(v4) => (1, v4.octets().to_vec()),
                        IpAddr::V6(v6) => (28, v6.octets().to_vec()),
                    };
                    m.extend_from_slice(&t.to_be_bytes());
                    m.extend_from_slice(&CLASS_IN.to_be_bytes());
                    m.extend_from_slice(&ttl.to_be_bytes());
                    m.extend_from_slice(&(data.len() as u16).to_be_bytes());
                    m.extend_from_slice(&data);
                }
                Rr::Cname(target, ttl) => {
                    let mut data = Vec::new();
                    write_name(&mut data, target);
                    m.extend_from_slice(&CNAME.to_be_bytes());
                    m.extend_from_slice(&CLASS_IN.to_be_bytes());
                    m.extend_from_slice(&ttl.to_be_bytes());
                    m.extend_from_slice(&(data.len() as u16).to_be_bytes());
                    m.extend_from_slice(&data);
                }
            }
        }
        m
    }
}

#[cfg(test)]
mod tests;
