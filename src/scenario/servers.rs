//! The servers of a scenario's deployment and the role each starts the run in: what a report
//! draws a lane for, before any note says a role changed (`history::ServerNote`).

use super::Scenario;
use crate::history::Role;

impl Scenario {
    /// Every server of the deployment, in [`Scenario::node_names`]'s order, with the role it
    /// starts in, as its backend declares them ([`super::BackendDecl::servers`]). Both worlds
    /// start them alike. What only watches the servers (Redis's sentinels) is not listed: it
    /// holds no data.
    pub fn servers(&self) -> Vec<(String, Role)> {
        self.backend.servers(self)
    }
}
