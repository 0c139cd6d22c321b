//! Flow-controlled copying of an h2 body (and trailers) from one stream to
//! another, for both directions of the proxy.

use std::future::poll_fn;

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

/// Copies a body (and its trailers) from one h2 stream to another. A chunk is
/// read only after the previous one was handed to the destination, and its
/// window is released only then, so at most one stream window per direction
/// is ever buffered.
pub async fn pump(
    mut from: RecvStream,
    mut to: SendStream<Bytes>,
    activity: &impl Activity,
) -> Result<(), PumpError> {
    loop {
        match from.data().await {
            Some(Ok(chunk)) => {
                let n = chunk.len();
                let eos = from.is_end_stream();
                send_with_capacity(&mut to, chunk, eos)
                    .await
                    .map_err(|_| PumpError::To)?;
                let _ = from.flow_control().release_capacity(n);
                activity.touch();
                if eos {
                    return Ok(());
                }
            }
            Some(Err(_)) => {
                to.send_reset(Reason::CANCEL);
                return Err(PumpError::From);
            }
            None => break,
        }
    }
    match from.trailers().await {
        Ok(Some(trailers)) => to.send_trailers(trailers).map_err(|_| PumpError::To),
        Ok(None) => to.send_data(Bytes::new(), true).map_err(|_| PumpError::To),
        Err(_) => {
            to.send_reset(Reason::CANCEL);
            Err(PumpError::From)
        }
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
