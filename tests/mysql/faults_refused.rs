//! Which faults the MySQL worlds can carry out, as the scenario's parser refuses the rest at
//! their key (no server needed).

use lockcheck::Scenario;

/// The MySQL worlds carry out client pauses and crashes, the server's crash and pause and
/// partitions from the server; any other fault is refused at its `kind` key (it used to be checked
/// before the faults were read, so it never ran, and the simulator noted "not modelled" instead).
#[test]
fn a_fault_the_mysql_worlds_cannot_carry_out_is_refused_at_its_kind() {
    let text = |fault: &str| {
        format!(
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n\n[lock]\nkind = \"mysql-for-update\"\n\n\
             [workload]\nclients = 2\n\n[[faults]]\n{fault}\n"
        )
    };
    for ok in [
        "kind = \"pause\"\nclient = 0\nat_ms = 10\nfor_ms = 100",
        "kind = \"pause\"\nnode = \"mysql-0\"\nat_ms = 10\nfor_ms = 100",
        "kind = \"partition\"\nnodes = [\"client-0\"]\nat_ms = 10\nfor_ms = 100",
    ] {
        Scenario::parse("t.toml", &text(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    let e = Scenario::parse(
        "t.toml",
        &text("kind = \"clock_jump\"\nnode = \"client-0\"\nat_ms = 10\nby_ms = 100"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("t.toml:12:"), "{e}");
    assert!(
        e.contains("`kind = \"clock_jump\"` is not modelled for the MySQL locks"),
        "{e}"
    );
    let e = Scenario::parse(
        "t.toml",
        &text("kind = \"partition\"\nnodes = [\"client-0\"]\nfrom = [\"client-1\"]\nat_ms = 10\nfor_ms = 100"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cuts clients from `mysql-0`"), "{e}");
}
