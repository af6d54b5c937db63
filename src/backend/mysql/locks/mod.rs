//! The locks written against this service's seam.

pub mod database_lock;
pub mod for_update;
pub mod insert_unique;
pub mod options;
