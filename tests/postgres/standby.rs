//! A streaming standby of the shared primary: it receives a committed row, and once promoted it
//! accepts writes and holds none of the old primary's advisory locks (they live in the
//! primary's shared memory, never in the WAL: timescale/prometheus-postgresql-adapter#91).

use crate::{connect, holders, one, primary, q};
use lockcheck::backend::postgres::real::Postgres;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_promoted_standby_accepts_writes_and_holds_no_advisory_lock() {
    let p = primary();
    let mut writer = connect(&p.conninfo()).await;
    q(&mut writer, "CREATE TABLE standby_rows (id int)").await;
    q(&mut writer, "SELECT pg_advisory_lock(6)").await;
    let started = Instant::now();
    let standby = tokio::task::spawn_blocking(move || Postgres::spawn_standby(p))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("standby: spawned in {:?}", started.elapsed());
    // A row committed after the base backup arrives by streaming.
    q(&mut writer, "INSERT INTO standby_rows VALUES (1)").await;
    let mut reader = connect(&standby.conninfo()).await;
    assert_eq!(
        one(&mut reader, "SELECT pg_is_in_recovery()").await,
        Some("t".into())
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while one(&mut reader, "SELECT count(*) FROM standby_rows").await != Some("1".into()) {
        assert!(
            Instant::now() < deadline,
            "the row never reached the standby"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let standby = tokio::task::spawn_blocking(move || standby.promote().map(|()| standby))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("standby: promoted in {:?}", started.elapsed());
    let mut promoted = connect(&standby.conninfo()).await;
    assert_eq!(
        one(&mut promoted, "SELECT pg_is_in_recovery()").await,
        Some("f".into())
    );
    q(&mut promoted, "INSERT INTO standby_rows VALUES (2)").await;
    assert_eq!(
        one(
            &mut promoted,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
        )
        .await,
        Some("0".into())
    );
    // The old primary's holder still holds it there, and the new primary grants it again.
    assert_eq!(holders(p, 6).await.len(), 1);
    assert_eq!(
        one(&mut promoted, "SELECT pg_try_advisory_lock(6)").await,
        Some("t".into())
    );
    q(&mut writer, "DROP TABLE standby_rows").await;
}
