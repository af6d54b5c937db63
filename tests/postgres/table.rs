//! The `[postgres]` table's `app_transactions` key: read as written, refused with the key's
//! position when malformed or when there is no pool to share.

use lockcheck::backend::postgres::table::{of, Pooler};
use lockcheck::scenario::Scenario;

fn parse(postgres: &str) -> Result<Scenario, String> {
    Scenario::parse(
        "t.toml",
        &format!(
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"pg-advisory-lock\"\n\
             [workload]\nclients = 2\n[postgres]\n{postgres}\n"
        ),
    )
    .map_err(|e| e.to_string())
}

#[test]
fn app_transactions_are_read_in_the_order_written() {
    let s = parse("pooler = \"transaction\"\napp_transactions = [[100, 2000], [0, 5]]").unwrap();
    let t = of(&s);
    assert_eq!(t.pooler, Pooler::Transaction);
    assert_eq!(t.app_transactions, vec![(100, 2000), (0, 5)]);
    assert!(of(&parse("pooler = \"session\"").unwrap())
        .app_transactions
        .is_empty());
}

#[test]
fn app_transactions_need_a_pool_and_pairs_of_whole_ms() {
    let no_pool = parse("app_transactions = [[100, 2000]]").unwrap_err();
    assert!(no_pool.starts_with("t.toml:9:20"), "{no_pool}");
    assert!(no_pool.contains("set `pooler"), "{no_pool}");
    for bad in ["[100, 2000]", "[[100]]", "[[100, -1]]", "[[\"a\", 1]]", "5"] {
        let e = parse(&format!(
            "pooler = \"transaction\"\napp_transactions = {bad}"
        ))
        .unwrap_err();
        assert!(e.starts_with("t.toml:10:20"), "{bad}: {e}");
        assert!(e.contains("list of [at_ms, for_ms] pairs"), "{bad}: {e}");
    }
    let zero = parse("pooler = \"transaction\"\napp_transactions = [[100, 0]]").unwrap_err();
    assert!(zero.contains("1 <= for_ms"), "{zero}");
}
