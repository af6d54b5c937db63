//! Real mode's answers on a spawned MariaDB, before any process is spawned, to what each fault
//! asks of it (see `real/nemesis/recipes.rs`): which faults of a MySQL scenario have a recipe.

use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused, Trigger};
use crate::real::nemesis::plan::unsupported;
use crate::real::nemesis::recipes::{ask, at_a_point};
use crate::real::RealError;
use crate::scenario::Scenario;

/// What the recipes on a spawned MariaDB can do: a client's pause or crash at its named point,
/// and the server's crash, pause and partition at any time.
pub(crate) struct MysqlRecipes<'a> {
    pub(crate) trigger: &'a Trigger,
}

impl Nemesis for MysqlRecipes<'_> {
    fn pause_client(
        &self,
        _at: &Occasion<'_>,
        _victim: &ClientRef,
        _for_ms: u64,
    ) -> Result<(), Refused> {
        at_a_point(self.trigger)
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        at_a_point(self.trigger)
    }

    fn crash_server(&self, _node: &str, _restart_after_ms: u64) -> Result<(), Refused> {
        Ok(())
    }

    fn cut(&self, _cut: &Cut<'_>) -> Result<(), Refused> {
        Ok(())
    }

    fn pause_server(&self, _node: &str, _for_ms: u64) -> Result<(), Refused> {
        Ok(())
    }
}

/// Checks that every fault of a MySQL scenario has a recipe on a spawned MariaDB.
pub(crate) fn check_mysql(s: &Scenario) -> Result<(), RealError> {
    for f in &s.faults {
        if ask(
            &MysqlRecipes {
                trigger: &f.trigger,
            },
            f,
        )
        .is_err()
        {
            return Err(unsupported(format!(
                "fault {} has no real-mode recipe for the MySQL locks (client pauses and crashes fire at a client's point, `on = ...`); run it in simulation",
                crate::fault::fault_table(f).into_inline_table()
            )));
        }
    }
    Ok(())
}
