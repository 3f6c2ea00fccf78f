//! FunctionConfig objects in the cluster: their CRD and the live watch.

pub mod cluster;
pub mod crd;
