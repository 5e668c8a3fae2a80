//! Limits on the HTTP endpoint, so that clients cannot starve the loop:
//! a cap on open connections, an idle timeout and a lifetime per connection,
//! and a rate limit on the webhook.
//!
//! Idle connections once exhausted the process's file handles and made every
//! iteration fail (the state and Git need handles too). With the cap, a
//! connection beyond it is closed at once; with the timeouts, a connection
//! that sends or reads nothing for [`IDLE_TIMEOUT`] (a slow-loris client),
//! or that is older than [`MAX_LIFETIME`], is closed.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection with no bytes in or out for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this long whatever it does (keep-alive
/// scrapers reconnect).
pub const MAX_LIFETIME: Duration = Duration::from_secs(120);

/// A TCP listener that hands out at most `max` connections at once, each
/// with the idle timeout and lifetime above.
#[derive(Debug)]
pub struct LimitedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    idle: Duration,
}

impl LimitedListener {
    /// Wraps `inner` with a cap of `max` connections and an idle timeout.
    pub fn new(inner: TcpListener, max: usize, idle: Duration) -> Self {
        LimitedListener {
            inner,
            permits: Arc::new(Semaphore::new(max)),
            idle,
        }
    }
}

impl axum::serve::Listener for LimitedListener {
    type Io = LimitedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.inner.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file handles, say: wait instead of spinning.
                    tracing::warn!(error = %e, "cannot accept an HTTP connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => return (LimitedIo::new(stream, permit, self.idle), addr),
                Err(_) => {
                    tracing::debug!(%addr, "HTTP connection refused: too many open");
                    drop(stream);
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that fails with `TimedOut` once idle or too old, and gives
/// its place back when dropped.
#[derive(Debug)]
pub struct LimitedIo {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    idle: Duration,
    idle_timer: Pin<Box<Sleep>>,
    lifetime: Pin<Box<Sleep>>,
}

impl LimitedIo {
    fn new(stream: TcpStream, permit: OwnedSemaphorePermit, idle: Duration) -> Self {
        LimitedIo {
            stream,
            _permit: permit,
            idle,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            lifetime: Box::pin(tokio::time::sleep(MAX_LIFETIME)),
        }
    }

    fn progressed(&mut self) {
        let deadline = tokio::time::Instant::now() + self.idle;
        self.idle_timer.as_mut().reset(deadline);
    }

    /// After the stream said Pending: an error if a timer ran out (the
    /// timers' wakers are registered by polling them).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.lifetime.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection lifetime over",
            ));
        }
        if self.idle_timer.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(io::ErrorKind::TimedOut, "connection idle"));
        }
        None
    }
}

impl AsyncRead for LimitedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.progressed();
                Poll::Ready(result)
            }
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for LimitedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write(cx, buf) {
            Poll::Ready(result) => {
                this.progressed();
                Poll::Ready(result)
            }
            Poll::Pending => match this.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A token bucket: `burst` calls at once, then one per `every`.
#[derive(Debug)]
pub struct RateLimit {
    every: Duration,
    burst: u32,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    /// A full bucket.
    pub fn new(every: Duration, burst: u32) -> Self {
        RateLimit {
            every,
            burst,
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token if there is one.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        let (tokens, last) = *state;
        let refill = now.saturating_duration_since(last).as_secs_f64() / self.every.as_secs_f64();
        let tokens = (tokens + refill).min(f64::from(self.burst));
        if tokens >= 1.0 {
            *state = (tokens - 1.0, now);
            true
        } else {
            *state = (tokens, now);
            false
        }
    }
}

impl Default for RateLimit {
    /// The webhook's: bursts of 5, then one a second.
    fn default() -> Self {
        RateLimit::new(Duration::from_secs(1), 5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_one_per_period() {
        let limit = RateLimit::new(Duration::from_secs(1), 3);
        let start = Instant::now();
        assert!((0..3).all(|_| limit.allow_at(start)));
        assert!(!limit.allow_at(start));
        assert!(!limit.allow_at(start + Duration::from_millis(500)));
        assert!(limit.allow_at(start + Duration::from_millis(1000)));
        assert!(!limit.allow_at(start + Duration::from_millis(1100)));
    }
}

/// The most bytes of a webhook body read (GitHub sends at most 25 MB, but
/// a push event's body is far smaller; only the signature needs it).
pub const MAX_WEBHOOK_BODY: usize = 1 << 20;

/// Whether `signature` (`X-Hub-Signature-256`: `sha256=` and the hex
/// HMAC-SHA256 of `body` under `secret`, as GitHub and Gitea send it) is
/// right, compared in constant time.
pub fn webhook_signature_ok(secret: &[u8], body: &[u8], signature: Option<&str>) -> bool {
    use hmac::{Hmac, Mac};
    let Some(hex) = signature.and_then(|s| s.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Some(expected) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod signature_tests {
    use super::*;

    #[test]
    fn github_s_example_signature_verifies() {
        // The example of GitHub's "Validating webhook deliveries" page.
        let secret = b"It's a Secret to Everybody";
        let body = b"Hello, World!";
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(webhook_signature_ok(secret, body, Some(good)));
        assert!(!webhook_signature_ok(secret, b"Hello, World?", Some(good)));
        assert!(!webhook_signature_ok(b"other", body, Some(good)));
        assert!(!webhook_signature_ok(secret, body, None));
        assert!(!webhook_signature_ok(secret, body, Some("sha1=757107")));
        assert!(!webhook_signature_ok(secret, body, Some("sha256=zz")));
    }
}
