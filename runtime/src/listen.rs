//! Serving a router on a socket with production defaults: [`serve`] and [`ServeConfig`].
//!
//! `axum::serve` builds hyper without a timer, so hyper's header read timeout never applies, and
//! it has no body timeout, no connection limit and no shutdown deadline. [`serve`] is the same
//! loop (hyper-util's HTTP/1.1 + HTTP/2 `auto` connection per accepted socket) with them:
//!
//! - **connection limit** ([`ServeConfig::max_connections`]), **fair**: the server holds at most
//!   that many connections, plus the one that just arrived. When every slot is taken, the next
//!   connection is accepted and the connection that has made no progress for the longest (no
//!   request in flight: one that never completed a request head, an HTTP/2 connection with no
//!   open stream, a kept-alive HTTP/1 connection between requests) is closed to make room for
//!   it. Connections idle, stalled or sending only PINGs cannot hold the slots others need,
//!   however many there are; only connections with a request in flight are never closed for
//!   room, and when all of them are, the new connection waits for one to end. Per-peer limits
//!   would not replace this: behind a proxy or a NAT every client has one address.
//! - **header read timeout** ([`ServeConfig::header_read_timeout`]): hyper's HTTP/1 timer,
//!   which also runs between requests on a kept-alive connection; and a deadline of ours for the
//!   first request of every connection, which covers what hyper's timer does not (a socket that
//!   sends nothing, or fewer bytes than hyper-util needs to tell HTTP/1 from HTTP/2, and a
//!   HTTP/2 connection that never completes a request).
//! - **body read timeout** ([`ServeConfig::body_read_timeout`]): every request body is wrapped
//!   so that reading it fails once the deadline (counted from the request head) passes; the
//!   pipeline answers 408 (`request_timeout`, `Connection: close`) and hyper closes the
//!   connection, whose body was not read to its end (a handler of one's own that reads the body
//!   with axum's extractors answers what they answer, 400). A total deadline, not an idle one between
//!   chunks, so a client trickling a byte a second is cut off too.
//! - **idle timeout** ([`ServeConfig::idle_timeout`]): a connection with no request in flight
//!   for this long since its last request ended is closed, HTTP/2 included, where hyper has no
//!   such timer; frames that are not requests (PING, SETTINGS, WINDOW_UPDATE) do not count. An
//!   idle HTTP/1 connection is closed by whichever of this and the header read timeout is
//!   shorter. A response counts as in flight until its body is written; one whose reader takes
//!   nothing for this long (no byte written or read) is closed too.
//! - **graceful shutdown with a deadline** ([`ServeConfig::shutdown_grace`]): when `shutdown`
//!   completes, the listener is closed (new connections are refused by the kernel), every
//!   connection is told to finish (HTTP/1: close after the response in progress; HTTP/2:
//!   GOAWAY), and `serve` returns once all are done or the grace has passed; then the remaining
//!   connections are dropped, and with them their sockets and handler futures.
//!
//! What happens to the requests cut at the deadline: an idempotent attempt runs in a task of
//! its own (`Executor::execute`), so dropping the connection does not stop it; it ends when it
//! ends, or when the process exits and the runtime drops it. Either way its transaction commits
//! only as a whole, record and business write together: if it did not commit, with the
//! separate-claim strategy its claim stays in the store, answered 409 until the claim is taken
//! over as stale (`ExecutorConfig::stale_claim`) and the retry executes once; with the
//! in-transaction strategy nothing was written (the gate lives in the rolled-back transaction) and
//! the retry executes at once. A plain or transactional handler's future is dropped with its
//! connection, and its transaction rolls back. On HTTP/2, hyper runs each stream in a task of
//! its own: its handler is not dropped with the connection but runs on (its answer has nowhere
//! to go) until it ends or the process exits, with the same consequences.
//! `examples/widgets/tests/e2e/serving.rs` proves both strategies across a SIGTERM with the write
//! blocked; `runtime/tests/integration/listen.rs` that an HTTP/1 handler's future is dropped.
//!
//! Framing: a request whose body is `chunked` more than once (`Transfer-Encoding: chunked,
//! chunked`, or the header twice) is answered 400 without being handled, and its connection
//! closed: hyper alone would decode it by the last `chunked`, and a proxy in front that reads it
//! otherwise would see another request (smuggling). `Transfer-Encoding` beside
//! `Content-Length` is read as chunked (RFC 9112 §6.3, hyper's reading) and the connection closed
//! after the answer. Request lines and headers ended by a bare LF are accepted, as hyper's parser
//! (httparse) reads them: one way to read them, and RFC 9112 §2.2 lets a recipient accept them.
//!
//! Nothing here logs per connection above DEBUG: a thousand slow clients are a thousand DEBUG
//! lines, not WARN lines. Accept errors (`EMFILE`) are logged at WARN at most once a second.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use http::{Request, Response};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// How [`serve`] treats connections. Every field has a production default
/// ([`ServeConfig::default`]); the example reads overrides from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// How long a client may take to send a request's head (request line and headers), counted
    /// from the connection's accept or, on a kept-alive HTTP/1 connection, from the previous
    /// response. Past it the connection is closed without an answer. Default 10 s.
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's whole body, counted from its head. Past it
    /// reading fails (answered 408 by the pipeline) and the connection is closed. Default 30 s: 1 MiB, the
    /// default body limit, at 35 KB/s.
    pub body_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight, counted from its last
    /// request's end (frames that are no request, PINGs among them, do not count); and how long
    /// a response's reader may take nothing. Default 60 s (an idle HTTP/1 connection is closed
    /// after `header_read_timeout` already).
    pub idle_timeout: Duration,
    /// How many connections are served at once. Beyond it, the arrival takes the slot of the
    /// connection that has made no progress for the longest (no request in flight), which is
    /// closed; when every connection has a request in flight, the arrival waits (with those
    /// behind it in the kernel's accept queue) until one ends. Default 512. Keep it below the
    /// descriptor limit (`ulimit -n`) minus the database pools and some slack: every connection
    /// is one descriptor, and one more is held for the arrival.
    pub max_connections: usize,
    /// After the shutdown signal, how long connections may take to finish before they are
    /// dropped. Default 25 s, below the 30 s after which Kubernetes (and systemd's default
    /// `TimeoutStopSec=90s`, later) sends SIGKILL.
    pub shutdown_grace: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
            shutdown_grace: Duration::from_secs(25),
        }
    }
}

/// Serves `router` on `listener` (HTTP/1.1 and HTTP/2 cleartext, told apart per connection)
/// under `config` until `shutdown` completes, then drains for at most `config.shutdown_grace`
/// (module docs). Handlers may extract `axum::extract::ConnectInfo<SocketAddr>`. Returns once
/// every connection is closed or dropped; an error only if the listener's address cannot be read.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let local = listener.local_addr()?;
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut last_accept_warning: Option<Instant> = None;
    tokio::pin!(shutdown);
    tracing::debug!(%local, ?config, "serving");
    let slots = Arc::new(Slots::default());
    loop {
        while connections.try_join_next().is_some() {}
        // A free slot, or the arrival first and then the slot of a connection making no progress.
        let free = Arc::clone(&permits).try_acquire_owned().ok();
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: wait a little rather than spin, warn once a second.
                    if last_accept_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        last_accept_warning = Some(Instant::now());
                    }
                    drop(free);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let permit = match free {
            Some(permit) => permit,
            None => {
                let made = tokio::select! {
                    () = &mut shutdown => None,
                    permit = make_room(&slots, &permits) => Some(permit),
                };
                match made {
                    Some(permit) => permit,
                    None => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            builder: Arc::clone(&builder),
            router: router.clone(),
            config: config.clone(),
            stop: stop_rx.clone(),
            slots: Arc::clone(&slots),
        };
        connections.spawn(async move {
            connection.run(stream, peer).await;
            drop(permit);
        });
    }
    drop(listener);
    let open = connections.len();
    tracing::info!(
        open,
        grace_ms = config.shutdown_grace.as_millis() as u64,
        "shutting down: draining connections"
    );
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(config.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        let cut = connections.len();
        connections.abort_all();
        while connections.join_next().await.is_some() {}
        tracing::warn!(
            cut,
            "shutdown grace passed: connections still open were dropped"
        );
    } else {
        tracing::info!("all connections drained");
    }
    Ok(())
}

/// Completes on SIGTERM or Ctrl-C (SIGINT): the usual `shutdown` of [`serve`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received");
}

/// The connections being served, for [`make_room`] to choose from.
#[derive(Default)]
struct Slots {
    open: Mutex<HashMap<u64, Arc<Activity>>>,
    next: AtomicU64,
}

impl Slots {
    fn register(&self, activity: Arc<Activity>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, activity);
        id
    }

    fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// The connection without a request in flight whose last progress (its last request's
    /// end, else its accept) is the oldest, not yet told to close.
    fn least_progressing(&self) -> Option<Arc<Activity>> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.values()
            .filter(|a| {
                a.in_flight.load(Ordering::Relaxed) == 0 && !a.evicted.load(Ordering::Relaxed)
            })
            .min_by_key(|a| a.progress_at())
            .cloned()
    }
}

/// A connection's place in [`Slots`], given back when dropped.
struct Registered {
    slots: Arc<Slots>,
    id: u64,
}

impl Registered {
    fn new(slots: Arc<Slots>, activity: Arc<Activity>) -> Registered {
        let id = slots.register(activity);
        Registered { slots, id }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.slots.remove(self.id);
    }
}

/// A slot for the connection just accepted while every slot is taken: the connection making no
/// progress for the longest is told to close, and its slot taken when it has; when every
/// connection has a request in flight, the first slot that frees up.
async fn make_room(slots: &Slots, permits: &Arc<Semaphore>) -> tokio::sync::OwnedSemaphorePermit {
    loop {
        if let Some(victim) = slots.least_progressing() {
            victim.evicted.store(true, Ordering::Relaxed);
            victim.evict.notify_one();
        }
        // The victim closes within a wake-up; or a request ends somewhere; else look again.
        let waited = tokio::time::timeout(
            Duration::from_millis(50),
            Arc::clone(permits).acquire_owned(),
        )
        .await;
        if let Ok(permit) = waited {
            return permit.expect("never closed");
        }
    }
}

/// One accepted connection's share of the server.
struct Connection {
    builder: Arc<Builder<TokioExecutor>>,
    router: axum::Router,
    config: ServeConfig,
    stop: watch::Receiver<bool>,
    slots: Arc<Slots>,
}

/// What the watchdog of one connection and [`make_room`] read: requests in flight and started,
/// the last progress (a request's start or end) and the last traffic.
struct Activity {
    opened: Instant,
    /// Milliseconds since `opened` of the last byte read or written.
    last_io_ms: AtomicU64,
    /// Milliseconds since `opened` of the last request's start or end.
    last_progress_ms: AtomicU64,
    /// Requests whose handler runs or whose response body is being written.
    in_flight: AtomicUsize,
    /// Responses whose body is being written.
    responding: AtomicUsize,
    started: AtomicUsize,
    /// Told to close to make room ([`make_room`]).
    evicted: AtomicBool,
    evict: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            last_io_ms: AtomicU64::new(0),
            last_progress_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            responding: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    fn touch(&self) {
        self.last_io_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn progressed(&self) {
        self.last_progress_ms
            .store(self.now_ms(), Ordering::Relaxed);
    }

    fn progress_at(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_progress_ms.load(Ordering::Relaxed))
    }

    /// How long since a byte was read or written.
    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_io_ms.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }

    /// How long since a request started or ended.
    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_progress_ms.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }
}

/// Counts a request in flight until its handler's future is dropped without an answer, or the
/// answer's body has been written (or dropped).
struct InFlight {
    activity: Arc<Activity>,
    responding: bool,
}

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.started.fetch_add(1, Ordering::Relaxed);
        activity.progressed();
        InFlight {
            activity: Arc::clone(activity),
            responding: false,
        }
    }

    fn responding(mut self) -> InFlight {
        self.activity.responding.fetch_add(1, Ordering::Relaxed);
        self.responding = true;
        self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.responding {
            self.activity.responding.fetch_sub(1, Ordering::Relaxed);
        }
        self.activity.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.activity.progressed();
        self.activity.touch();
    }
}

/// A response body that holds its request's [`InFlight`] until it is written or dropped.
struct Answering {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Connection {
    async fn run(self, stream: TcpStream, peer: SocketAddr) {
        let activity = Arc::new(Activity::new());
        // Out of the registry however the connection ends (aborted at the shutdown deadline too).
        let _registered = Registered::new(Arc::clone(&self.slots), Arc::clone(&activity));
        self.serve(stream, peer, &activity).await;
    }

    async fn serve(self, stream: TcpStream, peer: SocketAddr, activity: &Arc<Activity>) {
        let io = TokioIo::new(Tracked {
            inner: stream,
            activity: Arc::clone(activity),
        });
        let router = self.router;
        let body_timeout = self.config.body_read_timeout;
        let seen = Arc::clone(activity);
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            let guard = InFlight::start(&seen);
            let framing = ambiguous_framing(request.headers());
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            let request = request.map(|body| Body::new(TimedBody::new(body, body_timeout)));
            let router = router.clone();
            async move {
                let response: Response<Body> = match framing {
                    // Never handled: a proxy in front may have read the body otherwise.
                    Some(why) => {
                        tracing::debug!(%peer, why, "refusing a request of ambiguous framing");
                        let mut response = axum::response::IntoResponse::into_response(
                            crate::problem::Problem::new(
                                crate::problem::ProblemKind::InvalidRequest,
                            )
                            .with_detail(why),
                        );
                        response.headers_mut().insert(
                            http::header::CONNECTION,
                            http::HeaderValue::from_static("close"),
                        );
                        response
                    }
                    None => match router.oneshot(request).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    },
                };
                // In flight until the body is written, so a response being sent is never idle.
                let guard = guard.responding();
                Ok::<_, Infallible>(response.map(|inner| {
                    Body::new(Answering {
                        inner,
                        _in_flight: guard,
                    })
                }))
            }
        });
        let conn = self.builder.serve_connection_with_upgrades(io, service);
        tokio::pin!(conn);
        let mut stop = self.stop;
        let mut stopping = *stop.borrow();
        if stopping {
            conn.as_mut().graceful_shutdown();
        }
        let tick = (self
            .config
            .header_read_timeout
            .min(self.config.idle_timeout)
            / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut watchdog = tokio::time::interval(tick);
        watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                changed = stop.changed(), if !stopping => {
                    if changed.is_err() || *stop.borrow() {
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
                () = activity.evict.notified() => {
                    // Chosen to make room; a request that started since is let finish.
                    if activity.in_flight.load(Ordering::Relaxed) == 0 {
                        tracing::debug!(%peer, "closing a connection without progress to make room");
                        return;
                    }
                    activity.evicted.store(false, Ordering::Relaxed);
                }
                _ = watchdog.tick() => {
                    if activity.in_flight.load(Ordering::Relaxed) > 0 {
                        // A reader that takes nothing of its response for this long.
                        let stalled = activity.responding.load(Ordering::Relaxed) > 0
                            && activity.quiet_for() >= self.config.idle_timeout;
                        if stalled {
                            tracing::debug!(%peer, "closing a connection whose reader stalled");
                            return;
                        }
                        continue;
                    }
                    let first_late = activity.started.load(Ordering::Relaxed) == 0
                        && activity.opened.elapsed() >= self.config.header_read_timeout;
                    let idle = activity.idle_for() >= self.config.idle_timeout;
                    if first_late || idle {
                        tracing::debug!(%peer, first_late, idle, "closing a quiet connection");
                        return;
                    }
                }
            }
        }
    }
}

/// Why a request's body framing is ambiguous, so that a proxy in front could have read another
/// body than hyper does (request smuggling): `chunked` applied more than once (RFC 9112 §6.1;
/// hyper would decode it by the last one). `None` for every other request. (`Transfer-Encoding`
/// beside `Content-Length` never reaches here: hyper reads the body as chunked, as RFC 9112
/// §6.3 requires, drops the `Content-Length` and closes the connection after the answer.)
fn ambiguous_framing(headers: &http::HeaderMap) -> Option<&'static str> {
    let mut chunked = 0;
    for value in headers.get_all(http::header::TRANSFER_ENCODING) {
        let Ok(value) = value.to_str() else {
            return Some("the Transfer-Encoding header is not text");
        };
        chunked += value
            .split(',')
            .filter(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
            .count();
    }
    (chunked > 1).then_some("the body is `chunked` more than once (Transfer-Encoding)")
}

/// The socket, noting the time of every byte read or written.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request body that fails once its deadline passes before it ends.
struct TimedBody {
    inner: Incoming,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl TimedBody {
    fn new(inner: Incoming, timeout: Duration) -> TimedBody {
        TimedBody {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

/// The error of a request body not received within [`ServeConfig::body_read_timeout`].
#[derive(Debug)]
pub(crate) struct BodyTimeout(Duration);

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body was not received within {} ms",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for BodyTimeout {}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(self.timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
