//! The backends' declarations (`lockcheck::backend::BACKENDS`): every service is declared once,
//! with a table of its own, servers and its fault support, and a declaration that lacks one of
//! them fails here, before any scenario runs on it.

use lockcheck::backend::{declaration_problems, declarations, list_problems, BACKENDS};
use lockcheck::history::Role;
use lockcheck::lock::LockKind;
use lockcheck::lock::Service;
use lockcheck::scenario::{BackendDecl, FailoverShape, Fault, Invalid, Scenario};
use std::collections::BTreeSet;
use std::path::Path;

/// Every service a lock kind lockcheck ships runs on: each must be declared, once.
fn every_service() -> Vec<Service> {
    let services: BTreeSet<Service> = LockKind::builtins()
        .iter()
        .filter_map(|k| k.service())
        .collect();
    services.into_iter().collect()
}

fn bundled(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// One bundled scenario per service: what each declaration is asked about.
fn one_per_service() -> Vec<Scenario> {
    [
        "failover-lock-loss.toml",
        "mysql-insert-unique-server-pause.toml",
        "etcd-lock-leader-failover.toml",
        "zk-ensemble-failover.toml",
        "pg-failover-lock-loss.toml",
    ]
    .map(bundled)
    .to_vec()
}

#[test]
fn every_service_is_declared_once_with_a_table_of_its_own() {
    assert_eq!(
        list_problems(declarations(), &every_service()),
        Vec::<String>::new()
    );
    let covered: Vec<Service> = one_per_service().iter().map(|s| s.lock.service).collect();
    let declared: Vec<Service> = declarations().iter().map(|d| d.service()).collect();
    assert_eq!(
        covered, declared,
        "one bundled scenario per backend, in BACKENDS order"
    );
}

#[test]
fn every_declaration_names_servers_and_its_fault_support() {
    for s in one_per_service() {
        let decl = s.backend();
        assert_eq!(decl.service(), s.lock.service, "{}", s.name);
        assert_eq!(
            declaration_problems(decl, &s),
            Vec::<String>::new(),
            "{}",
            s.name
        );
        // Its servers come first among the scenario's nodes.
        let servers = s.servers();
        assert_eq!(
            s.node_names()[..servers.len()],
            servers.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()[..],
            "{}",
            s.name
        );
    }
}

/// A service's table in a scenario whose clients talk to another service is refused, at the
/// table, whichever service the table is (the first backend's `[redis]` included).
#[test]
fn a_table_of_another_service_is_refused() {
    for s in one_per_service() {
        let text = std::fs::read_to_string(s.path.as_ref().unwrap()).unwrap();
        for other in declarations()
            .iter()
            .filter(|b| b.service() != s.lock.service)
        {
            let table = other.table();
            if text.contains(&format!("[{table}]")) {
                continue;
            }
            let with = format!("{text}\n[{table}]\n");
            let e = Scenario::parse("t.toml", &with).expect_err(&format!(
                "{}: `[{table}]` accepted beside a {} lock",
                s.name,
                s.backend().name()
            ));
            assert!(e.message.contains(table), "{e}");
        }
    }
}

/// A planted declaration that forgot its parts: no table, no servers, a client pause refused,
/// a fault it will not draw with no reason. Each is named.
#[derive(Debug)]
struct Forgetful;

impl BackendDecl for Forgetful {
    fn service(&self) -> Service {
        Service::Etcd
    }
    fn name(&self) -> &'static str {
        "forgetful"
    }
    fn table(&self) -> &'static str {
        ""
    }
    fn client_programs_select_by_table(&self) -> bool {
        false
    }
    fn servers(&self, _s: &Scenario) -> Vec<(String, Role)> {
        Vec::new()
    }
    fn validate(&self, _s: &Scenario, _has_table: bool) -> Result<(), Invalid> {
        Ok(())
    }
    fn lease_ms(&self, _s: &Scenario) -> Option<u64> {
        None
    }
    fn check_fault(&self, _s: &Scenario, _f: &Fault) -> Result<(), String> {
        Err("nothing".into())
    }
    fn pauses_servers(&self) -> bool {
        false
    }
    fn failover(&self) -> FailoverShape {
        FailoverShape::None
    }
    fn not_drawable(&self, _kind: &str, _s: &Scenario) -> Option<String> {
        Some(String::new())
    }
}

#[test]
fn a_declaration_without_table_servers_or_fault_support_fails() {
    static PLANTED: [&dyn BackendDecl; 2] = [&Forgetful, &Forgetful];
    let list = list_problems(&PLANTED, &every_service()).join("\n");
    for expected in [
        "service redis is declared 0 times",
        "service etcd is declared 2 times",
        "declares table `[]`",
        "two backends declare table `[]`",
    ] {
        assert!(list.contains(expected), "{expected:?} not in:\n{list}");
    }
    let s = bundled("etcd-lock-no-faults.toml");
    let answers = declaration_problems(&Forgetful, &s).join("\n");
    for expected in [
        "forgetful declares no servers",
        "forgetful refuses a client pause: nothing",
        "forgetful refuses to draw `failover` without a reason",
    ] {
        assert!(
            answers.contains(expected),
            "{expected:?} not in:\n{answers}"
        );
    }
}

/// Each backend's locks run on its own service, and every backend ships at least one.
#[test]
fn every_backend_ships_locks_on_its_own_service() {
    for b in BACKENDS {
        let service = b.declaration.service();
        let locks = (b.locks)();
        assert!(!locks.is_empty(), "{service:?} ships no lock");
        for (kind, _, _) in locks {
            assert_eq!(kind.service(), Some(service), "{}", kind.name());
        }
    }
}

/// A backend declared outside lockcheck's own list, reading its own table: what a new backend
/// (PostgreSQL) does without a field in `Scenario`.
#[derive(Debug)]
struct Planted;

/// `[planted]`'s keys.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlantedTable {
    servers: u32,
}

const PLANTED: Service = Service::named("planted");

impl BackendDecl for Planted {
    fn service(&self) -> Service {
        PLANTED
    }
    fn name(&self) -> &'static str {
        "Planted"
    }
    fn table(&self) -> &'static str {
        "planted"
    }
    fn client_programs_select_by_table(&self) -> bool {
        true
    }
    fn servers(&self, s: &Scenario) -> Vec<(String, Role)> {
        let n = s.table::<PlantedTable>("planted").map_or(1, |t| t.servers);
        (0..n)
            .map(|i| (format!("planted-{i}"), Role::Standalone))
            .collect()
    }
    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid> {
        if has_table && s.lock.service != PLANTED {
            return Err((Some("planted"), "`[planted]` is not this lock's".into()));
        }
        Ok(())
    }
    fn lease_ms(&self, _s: &Scenario) -> Option<u64> {
        None
    }
    fn check_fault(&self, _s: &Scenario, _f: &Fault) -> Result<(), String> {
        Ok(())
    }
    fn pauses_servers(&self) -> bool {
        false
    }
    fn failover(&self) -> FailoverShape {
        FailoverShape::None
    }
    fn not_drawable(&self, _kind: &str, _s: &Scenario) -> Option<String> {
        None
    }
    fn reads_own_table(&self) -> bool {
        true
    }
    fn read_table(
        &self,
        table: Option<&toml::Value>,
    ) -> Result<std::sync::Arc<dyn std::any::Any + Send + Sync>, Invalid> {
        let t: PlantedTable = match table {
            Some(v) => v
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| (None, e.message().to_string()))?,
            None => PlantedTable { servers: 1 },
        };
        if t.servers == 0 {
            return Err((Some("servers"), "`servers` must be at least 1".into()));
        }
        Ok(std::sync::Arc::new(t))
    }
}

/// A backend that reads its own `[planted]` table needs no field in `Scenario`: the table
/// reaches its declaration, the rest of the file is read as before (positions unchanged), and
/// its errors point at its own keys.
#[test]
fn a_backend_reads_its_own_table_without_a_field_in_scenario() {
    let mut backends: Vec<&'static dyn BackendDecl> = declarations().to_vec();
    backends.push(&Planted);
    let catalog = lockcheck::scenario::Catalog {
        backends: &backends,
        builtins: LockKind::builtins(),
        own: &[],
    };
    let file = |table: &str, after: &str| {
        format!(
            "name = \"p\"\nexpect = \"safe\"\nduration_ms = 1000\n\n[lock]\nkind = \
             \"client-program\"\ncommand = [\"x\"]\nttl_ms = 100\n\n{table}\n[workload]\nclients = \
             2\n{after}"
        )
    };
    let s = Scenario::parse_in(
        catalog,
        "p.toml",
        &file("[planted]\nservers = 3\n", ""),
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.lock.service, PLANTED);
    assert_eq!(s.table::<PlantedTable>("planted").unwrap().servers, 3);
    assert_eq!(
        s.node_names(),
        [
            "planted-0",
            "planted-1",
            "planted-2",
            "client-0",
            "client-1"
        ]
        .map(String::from)
    );
    // Its own error, at its own key.
    let e = Scenario::parse_in(
        catalog,
        "p.toml",
        &file("[planted]\nservers = 0\n", ""),
        &[],
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.message.as_str()),
        (11, "`servers` must be at least 1"),
        "{e}"
    );
    // An error after the blanked table keeps its position.
    let e = Scenario::parse_in(
        catalog,
        "p.toml",
        &file("[planted]\nservers = 2\n", "typo = 1\n"),
        &[],
    )
    .unwrap_err();
    assert_eq!(e.line, 15, "{e}");
    assert!(e.message.contains("typo"), "{e}");
    // Without the backend in the catalog, the table is unknown.
    let e = Scenario::parse("p.toml", &file("[planted]\nservers = 3\n", "")).unwrap_err();
    assert!(e.message.contains("planted"), "{e}");
}
