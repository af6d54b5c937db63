//! A Redis Cluster's manual failover (`kind = "cluster_failover"`, `"cluster_failover_force"`,
//! `"cluster_failover_takeover"`): `CLUSTER FAILOVER [FORCE|TAKEOVER]` sent to the first replica
//! of master group `master`, which then takes its master's slots. The three forms differ in what
//! they wait for, and so in what a lock loses:
//!
//! - `CLUSTER FAILOVER` (coordinated): the master stops its clients' writes, the replica waits
//!   until it has replicated everything the master had, then is elected. Nothing acknowledged
//!   is lost: a lock granted before the switch is on the new master.
//! - `FORCE`: no handshake with the master; the replica is still elected by a majority of
//!   masters. Whatever the master had not replicated yet is lost, a fresh grant with it.
//! - `TAKEOVER`: no handshake and no election: the replica bumps the epoch alone and claims the
//!   slots. Loses the same, and the old master serves until it hears of the newer epoch.
//!
//! Only a Redis Cluster (`[redis.cluster]`) carries these out; lockcheck's own `failover` is
//! refused there, since the cluster promotes by itself.

use super::{FaultKind, KeyError, Nemesis, Refused, Table, Written};

/// Which form of `CLUSTER FAILOVER` a [`FaultKind::ClusterFailover`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterFailoverForm {
    /// `CLUSTER FAILOVER`: coordinated with the master.
    Coordinated,
    /// `CLUSTER FAILOVER FORCE`: elected without the master.
    Force,
    /// `CLUSTER FAILOVER TAKEOVER`: neither the master nor an election.
    Takeover,
}

impl ClusterFailoverForm {
    /// The command's words after `CLUSTER FAILOVER` (empty for the coordinated form).
    pub fn option(self) -> &'static str {
        match self {
            ClusterFailoverForm::Coordinated => "",
            ClusterFailoverForm::Force => " FORCE",
            ClusterFailoverForm::Takeover => " TAKEOVER",
        }
    }
}

/// `kind = "cluster_failover"`.
pub const COORDINATED: Written = Written {
    name: "cluster_failover",
    keys: &["master", "client"],
    parse: |t| parse(t, ClusterFailoverForm::Coordinated),
};

/// `kind = "cluster_failover_force"`.
pub const FORCE: Written = Written {
    name: "cluster_failover_force",
    keys: &["master", "client"],
    parse: |t| parse(t, ClusterFailoverForm::Force),
};

/// `kind = "cluster_failover_takeover"`.
pub const TAKEOVER: Written = Written {
    name: "cluster_failover_takeover",
    keys: &["master", "client"],
    parse: |t| parse(t, ClusterFailoverForm::Takeover),
};

fn parse(t: &Table<'_>, form: ClusterFailoverForm) -> Result<FaultKind, KeyError> {
    super::failover::needs_master_groups(t, "a Redis Cluster's manual failover")?;
    let master = super::failover::group_with_replica(t, "a manual failover")?;
    Ok(FaultKind::ClusterFailover { master, form })
}

/// The `kind = "..."` a form is written with.
pub(super) fn name(form: ClusterFailoverForm) -> &'static str {
    match form {
        ClusterFailoverForm::Coordinated => COORDINATED.name,
        ClusterFailoverForm::Force => FORCE.name,
        ClusterFailoverForm::Takeover => TAKEOVER.name,
    }
}

pub(super) fn write(master: u32, t: &mut toml_edit::Table) {
    t["master"] = toml_edit::value(i64::from(master));
}

pub(super) fn label(form: ClusterFailoverForm) -> String {
    format!("CLUSTER FAILOVER{}", form.option())
}

pub(super) fn fire<N: Nemesis + ?Sized>(
    n: &N,
    master: u32,
    form: ClusterFailoverForm,
) -> Result<(), Refused> {
    n.cluster_failover(master, form)
}
