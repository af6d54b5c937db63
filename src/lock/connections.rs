//! A lock's connections: every constructor gets one connection per master group, in group order
//! (Redlock has several; every other lock talks to one server, or one database, or one
//! cluster), so the constructors share one signature. Each backend registers its locks with
//! their runs in both worlds (`backend::<service>::locks`).

/// The one connection of a lock that talks to one server (every kind but Redlock): the first of
/// the client's connections, which is its only one.
pub(crate) fn only_connection<C>(conns: Vec<C>) -> C {
    conns
        .into_iter()
        .next()
        .expect("a client gets at least one connection")
}
