//! What `kubectl drain` would evict from a node (placeholder, being written).
