//! Workloads expanded into the pods their controllers would create (placeholder, being written).
