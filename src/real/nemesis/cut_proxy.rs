//! A TCP forwarder per client and server that a partition can cut without closing anything: the
//! client's bytes are held, not refused, as a network partition holds them, so a lock's client
//! sees the same silence it would see on a real cut link. The MySQL, etcd and ZooKeeper worlds
//! put one between every client and every server.

use crate::real::RealError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How often a held byte stream checks whether its partition healed.
const POLL: Duration = Duration::from_millis(5);

/// A TCP forwarder to the server that a partition can cut without closing anything.
#[derive(Clone)]
pub struct CutProxy {
    port: u16,
    /// How many partitions cut it now.
    cuts: Arc<AtomicU32>,
    /// Bumped by [`CutProxy::forget_new_connections`]: a connection accepted before a bump and
    /// still waiting for the cut to end is closed instead of forwarded.
    forgets: Arc<AtomicU32>,
}

impl CutProxy {
    /// Binds a free 127.0.0.1 port and forwards every connection to `target` (call inside a
    /// tokio runtime).
    pub async fn start(target: u16) -> std::io::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = CutProxy {
            port: listener.local_addr()?.port(),
            cuts: Arc::default(),
            forgets: Arc::default(),
        };
        let me = proxy.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(me.clone().forward(inbound, target));
            }
        });
        Ok(proxy)
    }

    /// `proxies[c][s]`: a forwarder of its own for each of `clients` clients to each of the
    /// servers on `ports` (call inside a tokio runtime).
    pub async fn per_client(clients: u32, ports: &[u16]) -> Result<Vec<Vec<CutProxy>>, RealError> {
        let mut proxies = Vec::new();
        for _ in 0..clients {
            let mut mine = Vec::new();
            for &port in ports {
                mine.push(
                    CutProxy::start(port)
                        .await
                        .map_err(|e| RealError::io("starting a client's forwarder", e))?,
                );
            }
            proxies.push(mine);
        }
        Ok(proxies)
    }

    /// Holds every one of `proxies` now and lets them go `for_ms` later, then calls `healed`
    /// (call inside a tokio runtime).
    pub fn hold_for(proxies: Vec<CutProxy>, for_ms: u64, healed: impl FnOnce() + Send + 'static) {
        for p in &proxies {
            p.cut(true);
        }
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            for p in &proxies {
                p.cut(false);
            }
            healed();
        });
    }

    /// The forwarder's port: the client connects here instead of to MariaDB.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts (`true`) or ends (`false`) one partition.
    pub fn cut(&self, on: bool) {
        if on {
            self.cuts.fetch_add(1, Ordering::SeqCst);
        } else {
            let _ = self
                .cuts
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    async fn healed(&self) {
        while self.cuts.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Closes, instead of forwarding, every connection accepted while the forwarder is cut
    /// (call before the cut ends): what a paused client's library opened during the pause, on
    /// timers a paused process would not have run, never reaches the server.
    pub fn forget_new_connections(&self) {
        self.forgets.fetch_add(1, Ordering::SeqCst);
    }

    async fn forward(self, inbound: TcpStream, target: u16) {
        let forgets = self.forgets.load(Ordering::SeqCst);
        self.healed().await;
        if self.forgets.load(Ordering::SeqCst) != forgets {
            return;
        }
        let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)).await else {
            return;
        };
        let (ri, wi) = inbound.into_split();
        let (ro, wo) = outbound.into_split();
        tokio::join!(self.pump(ri, wo), self.pump(ro, wi));
    }

    /// Copies one direction; bytes (and the end of the stream) wait while the link is cut.
    async fn pump(
        &self,
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = from.read(&mut buf).await.unwrap_or(0);
            self.healed().await;
            if n == 0 || to.write_all(&buf[..n]).await.is_err() {
                let _ = to.shutdown().await;
                return;
            }
        }
    }
}
