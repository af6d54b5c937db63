//! The fault executor of a simulated one-connection service (the MySQL, etcd and ZooKeeper
//! locks): its schedule, the client faults every simulated world shares ([`ClientFaults`]), and
//! the service's own handle, whose faults (a server's crash or pause, a leader's failover, a
//! member's clock) the backend writes as `impl Nemesis for ServiceNemesis<ItsService>`. Starting
//! the timed faults, firing one through the backend's capabilities, and the faults due at a
//! client's named point are the same for every such service and are written once here.

use crate::fault::{FaultKind, Nemesis, Occasion};
use crate::schedule::Schedule;
use crate::sim::client_faults::{take_effect, ClientFaults};
use crate::workload::FaultPoints;
use crate::world::points::due;
use madsim::task::NodeId;

/// A simulated service's nemesis; `service` is what its own faults act on.
#[derive(Clone)]
pub struct ServiceNemesis<S> {
    pending: Schedule,
    /// The service's handle (its servers, clocks, timings).
    pub service: S,
    /// The client faults, the nemesis's madsim node and its notes.
    pub faults: ClientFaults,
    /// Who a refused fault is refused for, in the history ("the MySQL locks").
    locks: &'static str,
}

impl<S> ServiceNemesis<S>
where
    S: Clone + Send + Sync + 'static,
    Self: Nemesis,
{
    /// The nemesis of `service` firing `pending`; `locks` names who a refusal is for.
    pub fn new(pending: Schedule, service: S, faults: ClientFaults, locks: &'static str) -> Self {
        ServiceNemesis {
            pending,
            service,
            faults,
            locks,
        }
    }

    /// The nemesis's own madsim node, so a finished run can kill it.
    pub fn madsim_node(&self) -> NodeId {
        self.faults.node
    }

    /// Schedules the faults with an absolute time.
    pub fn start(&self) {
        let me = self.clone();
        self.faults
            .start_timed(&self.pending, move |kind| me.fire(kind, None, "at_ms"));
    }

    /// A line in the history, from the nemesis.
    pub fn note(&self, what: String) {
        self.faults.note(what)
    }

    /// Carries out one fault now; what this world lacks, the history says.
    fn fire(&self, kind: &FaultKind, holder: Option<u32>, point: &str) {
        let at = Occasion { point, by: holder };
        self.faults.fire_through(self, kind, &at, self.locks);
    }
}

impl<S> FaultPoints for ServiceNemesis<S>
where
    S: Clone + Send + Sync + 'static,
    Self: Nemesis,
{
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.pending.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.faults.rec, client, point);
        for kind in &fired {
            self.fire(kind, Some(client), point);
        }
        take_effect(&fired, client).await;
    }

    async fn write_window(&self, client: u32, open: bool) {
        if self.faults.write_window(client, open) {
            madsim::task::yield_now().await;
        }
    }
}
