//! The cluster's explainer (`sched-webhook explainer`, the aggregated API
//! `sched.kubectl-sched.io/v1alpha1`) as a source of answers: whether its APIService is Available,
//! and one explanation asked of it through the API server, which authenticates the user and checks
//! RBAC as for any resource. What a request and an answer hold is defined here, for both sides.

use std::fmt::Write as _;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde::{Deserialize, Serialize};

use super::load::{Cluster, LoadError};
use crate::cli::{JsonFormat, Output, TemplateSource};

/// The APIService that registers the explainer.
pub const API_SERVICE: &str = "v1alpha1.sched.kubectl-sched.io";
/// Where its resources are.
pub const GROUP_VERSION_PATH: &str = "/apis/sched.kubectl-sched.io/v1alpha1";
/// The resource that explains one pod.
pub const POD_EXPLANATIONS: &str = "podexplanations";

/// What one `explain` of one pod asks for: the parameters the aggregated API accepts. Everything
/// else `explain` can do (files, what-if edits, `--watch`, groups) stays with the CLI's listing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainRequest {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// `-o` as the user wrote it (`table`, `wide`, `json`, `yaml`, `name`, `jsonpath=…`); None: the
    /// table.
    pub output: Option<String>,
    /// `--node`.
    pub node: Option<String>,
    /// `--profile`.
    pub profile: Option<String>,
    /// `--exit-code`.
    pub exit_code: bool,
}

impl ExplainRequest {
    /// The request's path and query under the API server.
    pub fn path(&self) -> String {
        let mut path = format!(
            "{GROUP_VERSION_PATH}/namespaces/{}/{POD_EXPLANATIONS}/{}",
            percent_encoded(&self.namespace),
            percent_encoded(&self.pod)
        );
        let mut query = Vec::new();
        let params = [
            ("output", self.output.as_deref()),
            ("node", self.node.as_deref()),
            ("profile", self.profile.as_deref()),
            ("exitCode", self.exit_code.then_some("true")),
        ];
        for (name, value) in params {
            if let Some(value) = value {
                query.push(format!("{name}={}", percent_encoded(value)));
            }
        }
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query.join("&"));
        }
        path
    }
}

/// `text` with every byte but RFC 3986's unreserved characters percent-encoded.
fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// `-o` back as the text that parses into `output`; None for `jsonpath-file=FILE` (a file on the
/// user's machine, which a server cannot read).
pub fn output_flag<F: JsonFormat>(output: &Output<F>) -> Option<String> {
    match output {
        Output::Format(format) => format.to_possible_value().map(|v| v.get_name().to_string()),
        Output::Name => Some("name".to_string()),
        Output::JsonPath {
            source: TemplateSource::Inline(template),
            as_json,
        } => Some(format!(
            "{}={template}",
            if *as_json { "jsonpath-as-json" } else { "jsonpath" }
        )),
        Output::JsonPath {
            source: TemplateSource::File(_),
            ..
        } => None,
    }
}

/// A served command's answer: what the CLI would print where, and its exit code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedAnswer {
    /// The text for stdout.
    pub stdout: String,
    /// A line for stderr instead of an empty table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nothing_found: Option<String>,
    /// Warnings (stderr, always).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Notes (stderr, `-v 1`).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The process exit code the CLI ends with.
    pub exit_code: u8,
}

/// How current the explainer's snapshot was when it answered.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotAge {
    /// The highest resourceVersion the snapshot has.
    pub resource_version: String,
    /// Seconds since its last event (None: none yet).
    pub seconds_since_last_event: Option<f64>,
    /// Every watch listed and following.
    pub in_sync: bool,
    /// How long a watch has been re-listing or failing (0 when in sync).
    pub stale_seconds: f64,
}

/// A `PodExplanation` object.
#[derive(Debug, Clone, Deserialize)]
pub struct PodExplanation {
    /// The snapshot's age.
    pub snapshot: SnapshotAge,
    /// The answer.
    pub answer: ServedAnswer,
}

/// Whether the explainer can be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Its APIService is Available.
    Available,
    /// It is not installed or not Available (why, for `-v 1`).
    Unavailable(String),
    /// The APIService could not be read (why); asking may still work.
    Unknown(String),
}

/// How long `--via auto` waits for the APIService before it lists the cluster.
pub const AVAILABILITY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn is_forbidden(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 403)
}

/// True for errors after which a listing may still answer: the explainer did not (5xx, 429, no
/// connection), as opposed to an answer of its own (a 403, a pod not found).
pub fn is_unanswered(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

impl Cluster {
    /// Whether the explainer's APIService is Available (one GET, bounded by
    /// [`AVAILABILITY_TIMEOUT`]: a listing must not wait long on a question about the explainer).
    /// `--request-timeout` bounds the whole command: when the API server does not answer within it,
    /// the command fails here as a listing would, rather than waiting as long again to list.
    pub fn explainer_availability(&self) -> Result<Availability, LoadError> {
        let api: kube::Api<APIService> = kube::Api::all(self.client());
        let answer = self.bounded(&format!("reading the APIService {API_SERVICE}"), async {
            tokio::time::timeout(AVAILABILITY_TIMEOUT, api.get_opt(API_SERVICE)).await
        })?;
        let Ok(answer) = answer else {
            return Ok(Availability::Unavailable(format!(
                "the APIService {API_SERVICE} could not be read within {AVAILABILITY_TIMEOUT:?}"
            )));
        };
        Ok(match answer {
            Ok(None) => Availability::Unavailable(format!("the APIService {API_SERVICE} is not installed")),
            Ok(Some(service)) => {
                let condition = service
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "Available");
                match condition {
                    Some(c) if c.status == "True" => Availability::Available,
                    Some(c) => Availability::Unavailable(format!(
                        "the APIService {API_SERVICE} is not Available ({}: {})",
                        c.reason.unwrap_or_default(),
                        c.message.unwrap_or_default()
                    )),
                    None => Availability::Unavailable(format!(
                        "the APIService {API_SERVICE} has no Available condition yet"
                    )),
                }
            }
            // A user who may not read APIServices (a namespace's user) may still ask the explainer:
            // the API server decides.
            Err(e @ kube::Error::Api(_)) if is_forbidden(&e) => Availability::Unknown(format!(
                "cannot read the APIService {API_SERVICE}: {}",
                sched_core::api_error::describe(&e)
            )),
            Err(e) => Availability::Unavailable(format!(
                "cannot read the APIService {API_SERVICE}: {}",
                sched_core::api_error::describe(&e)
            )),
        })
    }

    /// Asks the explainer for `request` through the API server.
    pub fn served_explain(&self, request: &ExplainRequest) -> Result<PodExplanation, kube::Error> {
        let path = request.path();
        let http_request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        self.block_on(self.client().request::<PodExplanation>(http_request))
    }

    /// [`Cluster::served_explain`]'s error as the command's (with what was asked).
    pub fn served_error(&self, request: &ExplainRequest, source: kube::Error) -> LoadError {
        LoadError::Lookup {
            server: self.server.clone(),
            what: format!(
                "asking the cluster's explainer ({API_SERVICE}) about pod {}/{}",
                request.namespace, request.pod
            ),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths() {
        let cases = [
            (
                "a pod, the table",
                ExplainRequest {
                    namespace: "team-a".into(),
                    pod: "web-0".into(),
                    ..ExplainRequest::default()
                },
                "/apis/sched.kubectl-sched.io/v1alpha1/namespaces/team-a/podexplanations/web-0",
            ),
            (
                "every parameter, encoded",
                ExplainRequest {
                    namespace: "a".into(),
                    pod: "p".into(),
                    output: Some("jsonpath={.outcome} x".into()),
                    node: Some("n/1".into()),
                    profile: Some("default-scheduler".into()),
                    exit_code: true,
                },
                "/apis/sched.kubectl-sched.io/v1alpha1/namespaces/a/podexplanations/p?output=jsonpath%3D%7B.outcome%7D%20x&node=n%2F1&profile=default-scheduler&exitCode=true",
            ),
        ];
        for (name, request, want) in cases {
            assert_eq!(request.path(), want, "{name}");
        }
    }
}
