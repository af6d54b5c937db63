//! A network black hole for real-mode partitions.
//!
//! To cut a client off from one `redis-server` without touching the server (other clients must
//! still reach it) or the machine's network configuration, lockcheck points that client's
//! connection to the server at a black hole instead: a local TCP port that accepts connections and
//! then never reads or answers. That is what a partition looks like from the client's side: the
//! connection attempt or the request gets no reply and the client's timeout fires. (A closed port
//! would refuse at once, which is faster and kinder than a real partition.) Healing points the
//! connection back at the server.

use std::net::SocketAddr;

/// How many swallowed connections stay open at most.
const HELD: usize = 256;

/// A listening black hole; it lives as long as the tokio runtime that runs it.
pub struct BlackHole {
    addr: SocketAddr,
}

impl BlackHole {
    /// Binds a free 127.0.0.1 port and starts swallowing connections. Call inside a tokio runtime.
    pub async fn start() -> std::io::Result<BlackHole> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            // Accepted sockets are kept open and never read: requests sit unanswered. Clients
            // abandon them at their timeout; the oldest are closed so a long run cannot run out
            // of file descriptors.
            let mut held = std::collections::VecDeque::new();
            while let Ok((socket, _)) = listener.accept().await {
                if held.len() >= HELD {
                    held.pop_front();
                }
                held.push_back(socket);
            }
        });
        Ok(BlackHole { addr })
    }

    /// The `redis://` URL that leads into the hole.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }
}
