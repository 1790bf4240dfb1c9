//! A switchable TCP endpoint: what a virtual IP or a proxy is in production, in front of a
//! primary and its standby. Connections go to the current target; [`Switch::switch_to`] points
//! new connections at another server and cuts the open ones, as a failover does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};

use idemgen_runtime::testing::HarnessError;

/// A TCP endpoint on a free loopback port forwarding to a switchable loopback port.
#[derive(Debug)]
pub struct Switch {
    port: u16,
    target: Arc<AtomicU16>,
    generation: Arc<AtomicU64>,
}

impl Switch {
    /// An endpoint forwarding to `target_port`, served by a thread of its own.
    pub fn start(target_port: u16) -> Result<Switch, HarnessError> {
        Switch::start_lagging(target_port, Duration::ZERO)
    }

    /// An endpoint that holds what the target sends for `lag` before passing it on: between a
    /// primary and its standby, replication lag (what the primary sent in its last `lag` is lost
    /// when it dies).
    pub fn start_lagging(target_port: u16, lag: Duration) -> Result<Switch, HarnessError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| HarnessError::new(format!("binding the switch: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| HarnessError::new(format!("switch: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| HarnessError::new(format!("switch: {e}")))?
            .port();
        let target = Arc::new(AtomicU16::new(target_port));
        let generation = Arc::new(AtomicU64::new(0));
        let (t, g) = (target.clone(), generation.clone());
        std::thread::Builder::new()
            .name("idemgen-switch".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("the switch's runtime");
                runtime.block_on(serve(listener, t, g, lag));
            })
            .map_err(|e| HarnessError::new(format!("starting the switch: {e}")))?;
        Ok(Switch {
            port,
            target,
            generation,
        })
    }

    /// The endpoint's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for `database` through the endpoint.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Points the endpoint at `target_port` and cuts every open connection.
    pub fn switch_to(&self, target_port: u16) {
        self.target.store(target_port, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

async fn serve(
    listener: std::net::TcpListener,
    target: Arc<AtomicU16>,
    generation: Arc<AtomicU64>,
    lag: Duration,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let Ok((mut downstream, _)) = listener.accept().await else {
            continue;
        };
        let (target, generation) = (target.clone(), generation.clone());
        tokio::spawn(async move {
            let born = generation.load(Ordering::SeqCst);
            let address = SocketAddr::from(([127, 0, 0, 1], target.load(Ordering::SeqCst)));
            let Ok(mut upstream) = TcpStream::connect(address).await else {
                return;
            };
            let cut = async {
                while generation.load(Ordering::SeqCst) == born {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            if lag.is_zero() {
                tokio::select! {
                    _ = copy_bidirectional(&mut downstream, &mut upstream) => {}
                    _ = cut => {}
                }
            } else {
                tokio::select! {
                    _ = lagging(downstream, upstream, lag) => {}
                    _ = cut => {}
                }
            }
        });
    }
}

/// Copies both ways, holding each chunk from `upstream` for `lag` before writing it downstream.
async fn lagging(downstream: TcpStream, upstream: TcpStream, lag: Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut down_read, mut down_write) = downstream.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    let (sender, mut receiver) =
        tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let read_up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = up_read.read(&mut buf).await {
            let due = tokio::time::Instant::now() + lag;
            if n == 0 || sender.send((due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let write_down = async move {
        while let Some((due, chunk)) = receiver.recv().await {
            tokio::time::sleep_until(due).await;
            if down_write.write_all(&chunk).await.is_err() {
                break;
            }
        }
    };
    let forward = async move {
        let _ = tokio::io::copy(&mut down_read, &mut up_write).await;
    };
    tokio::join!(read_up, write_down, forward);
}
