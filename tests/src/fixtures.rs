//! Small builders and waits shared by the e2e tests.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

use crate::Error;

/// Label put on the nodes a test creates; its pods select it, so tests sharing a scheduler never
/// land on each other's nodes.
pub const TEST_LABEL: &str = "e2e.kubectl-sched.dev/test";

/// A node as a kubelet would have registered it: capacity = allocatable, Ready, no taints,
/// the usual hostname/os/arch labels plus [`TEST_LABEL`]`=<test>`.
pub fn ready_node(name: &str, test: &str, cpu: &str, memory: &str, pods: &str) -> Node {
    let resources = serde_json::json!({"cpu": cpu, "memory": memory, "pods": pods});
    let node = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                TEST_LABEL: test,
            },
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "e2e node without a kubelet",
            }],
        },
    });
    // The literal above is a valid Node; a failure here is a bug in this function.
    serde_json::from_value(node).unwrap_or_else(|e| panic!("ready_node builds an invalid Node: {e}"))
}

/// Calls `probe` every 200 ms until it yields `Some`, for at most `timeout`. Errors from the probe
/// end the wait at once.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, Error>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                timeout,
                what: what.to_owned(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_node_carries_status_and_label() {
        let node = ready_node("n1", "t1", "4", "8Gi", "110");
        let status = node.status.expect("status");
        let allocatable = status.allocatable.expect("allocatable");
        assert_eq!(allocatable["cpu"].0, "4");
        assert_eq!(allocatable["memory"].0, "8Gi");
        assert_eq!(allocatable["pods"].0, "110");
        assert_eq!(node.metadata.labels.expect("labels")[TEST_LABEL], "t1");
        assert!(node.spec.is_none_or(|s| s.taints.is_none()));
    }

    #[tokio::test]
    async fn wait_for_times_out_and_returns_values() {
        let err = wait_for::<(), _, _>("never", Duration::from_millis(300), || async { Ok(None) })
            .await
            .expect_err("times out");
        assert!(err.to_string().contains("never"), "{err}");
        let mut calls = 0;
        let got = wait_for("third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { Ok((n >= 3).then_some(n)) }
        })
        .await
        .expect("value");
        assert_eq!(got, 3);
    }
}
