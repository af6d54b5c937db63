//! How lockcheck's own clients find the master in a real Sentinel run: they ask the sentinels
//! (`SENTINEL get-master-addr-by-name`), as a Sentinel-aware client library does.
//!
//! A client starts with the master the deployment began with (it asked before the run), and asks
//! again whenever a request fails on the connection (a crashed or cut-off master) or with
//! `READONLY` (the master it knew was demoted). It asks the sentinels in order, each through its
//! own link from the client's address, so a client cut off from the sentinels hears nothing and
//! keeps the master it knew, as in simulation.

use crate::real::connection::{connect_from, ConnectionTimeouts, FindMaster, Route};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

/// One client's view of one master group: whom to ask and where the answer goes.
pub struct MasterFinder {
    /// The sentinels' announced addresses.
    sentinels: Vec<SocketAddr>,
    /// The master group's name in the sentinels' `monitor` lines.
    name: String,
    /// The client's node address.
    source: IpAddr,
    /// The route the client's connections follow: switched to the answer.
    route: Arc<Route>,
    /// Bounds on each question.
    timeouts: ConnectionTimeouts,
}

impl MasterFinder {
    /// A finder for group `name` that asks `sentinels` from `source` and switches `route`.
    pub(crate) fn new(
        sentinels: Vec<SocketAddr>,
        name: String,
        source: IpAddr,
        route: Arc<Route>,
        timeouts: ConnectionTimeouts,
    ) -> Arc<MasterFinder> {
        Arc::new(MasterFinder {
            sentinels,
            name,
            source,
            route,
            timeouts,
        })
    }

    /// The client's node address, which its connections are sent from.
    pub(crate) fn source(&self) -> IpAddr {
        self.source
    }

    /// One sentinel's answer, if it gives one in time.
    async fn ask(&self, sentinel: SocketAddr) -> Option<SocketAddr> {
        let mut conn = connect_from(self.source, &format!("redis://{sentinel}/"), self.timeouts)
            .await
            .ok()?;
        let (ip, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.name)
            .query_async::<Option<(String, u16)>>(&mut conn)
            .await
            .ok()??;
        Some(SocketAddr::new(ip.parse().ok()?, port))
    }
}

impl FindMaster for MasterFinder {
    /// Asks the sentinels in order; the first answer becomes the route (a switch only when it
    /// names another server). No answer: the route stays as it was.
    fn reask(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            for sentinel in &self.sentinels {
                if let Some(master) = self.ask(*sentinel).await {
                    let url = format!("redis://{master}/");
                    if self.route.url() != url {
                        self.route.switch_to(url);
                    }
                    return;
                }
            }
        })
    }
}
