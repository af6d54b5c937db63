//! The locks written against this service's seam.

pub mod etcd_mutex;
