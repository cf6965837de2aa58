//! The e2e harness: a real control plane on 127.0.0.1.
