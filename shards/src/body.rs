//! Flow-controlled copying of an h2 body (and trailers) from one stream to
//! another, for both directions of the proxy.

use std::future::poll_fn;
use std::task::Poll;

use bytes::Bytes;
use h2::{Reason, RecvStream, SendStream};

/// Something that wants to know each time bytes move (the stream idle timer).
pub trait Activity {
    fn touch(&self);
}

#[derive(Debug)]
pub enum PumpError {
    /// Reading the source failed (for responses: the upstream reset).
    From,
    /// Writing the destination failed (for responses: the client went away).
    To,
}

/// The `grpc-status` of a header block (trailers, or a trailers-only
/// response), when it has a numeric one.
pub fn grpc_status(headers: &http::HeaderMap) -> Option<u32> {
    std::str::from_utf8(headers.get("grpc-status")?.as_bytes())
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Copies a body (and its trailers) from one h2 stream to another. A chunk is
/// read only after the previous one was handed to the destination, and its
/// window is released only then, so at most one stream window per direction
/// is ever buffered. The destination going away (RST_STREAM, connection
/// loss) ends the copy at once, not at the next chunk, so an abandoned stream
/// holds nothing upstream. Resetting either side is left to the caller, who
/// knows which reason to give. Returns the trailers' `grpc-status`, if any
/// (outlier detection counts gRPC failures).
pub async fn pump(
    from: &mut RecvStream,
    to: &mut SendStream<Bytes>,
    activity: &impl Activity,
) -> Result<Option<u32>, PumpError> {
    loop {
        let next = poll_fn(|cx| {
            if to.poll_reset(cx).is_ready() {
                return Poll::Ready(Err(PumpError::To));
            }
            from.poll_data(cx).map(Ok)
        })
        .await?;
        match next {
            Some(Ok(chunk)) => {
                let n = chunk.len();
                let eos = from.is_end_stream();
                send_with_capacity(to, chunk, eos)
                    .await
                    .map_err(|_| PumpError::To)?;
                let _ = from.flow_control().release_capacity(n);
                activity.touch();
                if eos {
                    return Ok(None);
                }
            }
            Some(Err(_)) => return Err(PumpError::From),
            None => break,
        }
    }
    let trailers = poll_fn(|cx| {
        if to.poll_reset(cx).is_ready() {
            return Poll::Ready(Err(PumpError::To));
        }
        from.poll_trailers(cx)
            .map(|r| r.map_err(|_| PumpError::From))
    })
    .await?;
    match trailers {
        Some(trailers) => {
            let status = grpc_status(&trailers);
            to.send_trailers(trailers).map_err(|_| PumpError::To)?;
            Ok(status)
        }
        None => to
            .send_data(Bytes::new(), true)
            .map(|()| None)
            .map_err(|_| PumpError::To),
    }
}

async fn send_with_capacity(
    to: &mut SendStream<Bytes>,
    mut chunk: Bytes,
    eos: bool,
) -> Result<(), h2::Error> {
    if chunk.is_empty() {
        return if eos {
            to.send_data(chunk, true)
        } else {
            Ok(())
        };
    }
    while !chunk.is_empty() {
        to.reserve_capacity(chunk.len());
        let cap = match poll_fn(|cx| to.poll_capacity(cx)).await {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(e),
            None => return Err(h2::Error::from(Reason::CANCEL)),
        };
        if cap == 0 {
            continue;
        }
        let part = chunk.split_to(cap.min(chunk.len()));
        to.send_data(part, eos && chunk.is_empty())?;
    }
    Ok(())
}
