//! Small builders and waits shared by the e2e tests.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Error;

/// Label put on the nodes a test creates; its pods select it, so tests sharing a scheduler never
/// land on each other's nodes.
pub const TEST_LABEL: &str = "e2e.kubectl-sched.dev/test";

/// A node as a kubelet would have registered it: capacity = allocatable, Ready, no taints,
/// the usual hostname/os/arch labels plus [`TEST_LABEL`]`=<test>`.
pub fn ready_node(name: &str, test: &str, cpu: &str, memory: &str, pods: &str) -> Node {
    let resources: BTreeMap<String, Quantity> = [("cpu", cpu), ("memory", memory), ("pods", pods)]
        .into_iter()
        .map(|(resource, amount)| (resource.to_owned(), Quantity(amount.to_owned())))
        .collect();
    let labels = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        (TEST_LABEL, test),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("e2e node without a kubelet".into()),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    }
}

/// Calls `probe` every 200 ms until it yields `Some`, for at most `timeout`. Errors from the probe
/// end the wait at once.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, probe: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, Error>>,
{
    poll_until(what, timeout, probe).await
}

/// [`wait_for`] for tests written with `anyhow` (the probe's errors are `anyhow::Error`).
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    poll_until(what, timeout, probe).await
}

/// The loop of [`wait_for`] and [`eventually`], for either error type.
async fn poll_until<T, E, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, E>
where
    E: From<Error>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
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
            }
            .into());
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
