//! A TCP forwarder that follows a [`Route`]: how a client program that lockcheck did not write
//! still sees failovers, restarts and partitions.
//!
//! A lock client in another language connects to the address lockcheck gives it and keeps that
//! address. lockcheck gives it this proxy's address instead of a server's; each accepted
//! connection is forwarded to wherever the route leads now (the master, the promoted replica
//! after a failover, the restarted server, or the black hole while the client is cut off). When
//! the route switches, forwarded connections are closed, as the old server's would be: the
//! client sees a dropped connection and reconnects, which now reaches the new target, as a
//! Sentinel-aware or DNS-following client would.

use crate::real::connection::Route;
use crate::real::observers::connection_names::ConnectionNames;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// How often a forwarded connection checks whether its route switched.
const ROUTE_POLL: Duration = Duration::from_millis(10);

/// A listening forwarder; it lives as long as the tokio runtime that runs it.
pub struct RouteProxy {
    port: u16,
}

impl RouteProxy {
    /// Binds a free 127.0.0.1 port and forwards every connection along `route`, registering
    /// each connection it opens to a server in `names` as client `client`'s (so the witness knows
    /// whose commands it reads). Call inside a tokio runtime.
    pub async fn start(
        route: Arc<Route>,
        client: u32,
        names: ConnectionNames,
    ) -> std::io::Result<RouteProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(forward(inbound, route.clone(), client, names.clone()));
            }
        });
        Ok(RouteProxy { port })
    }

    /// The `redis://` URL a client program connects to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// `host:port` of a `redis://host:port/...` URL.
fn address(url: &str) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let rest = rest.rsplit('@').next()?;
    Some(rest.split('/').next()?.to_string())
}

async fn forward(mut inbound: TcpStream, route: Arc<Route>, client: u32, names: ConnectionNames) {
    let (url, generation) = route.current();
    let Some(addr) = address(&url) else { return };
    let Ok(mut outbound) = TcpStream::connect(&addr).await else {
        return;
    };
    // Before the first byte goes through, so the server's MONITOR never shows a command from
    // an address the witness cannot name.
    if let Ok(local) = outbound.local_addr() {
        names.register(local.to_string(), client);
    }
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let switched = async {
        while route.generation() == generation {
            tokio::time::sleep(ROUTE_POLL).await;
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = switched => {}
    }
}

#[cfg(test)]
mod tests {
    use super::address;

    #[test]
    fn address_of_urls() {
        assert_eq!(
            address("redis://127.0.0.1:7000/").as_deref(),
            Some("127.0.0.1:7000")
        );
        assert_eq!(
            address("redis://u:p@127.0.0.1:7001").as_deref(),
            Some("127.0.0.1:7001")
        );
        assert_eq!(address("http://x"), None);
    }
}
