//! The AdmissionReview (admission.k8s.io/v1) wire format: only the request fields the webhook reads, and
//! the response it writes. The object stays raw JSON until a decision needs it, so requests that need
//! nothing are answered without decoding a whole pod.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The only API version served.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The review kind.
pub const KIND: &str = "AdmissionReview";

/// Why a body is not a usable AdmissionReview (answered with 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or not shaped like an AdmissionReview.
    #[error("failed to decode the AdmissionReview: {0}")]
    Decode(#[source] serde_json::Error),
    /// Not UTF-8, which JSON must be (the parser does not check the values it skips).
    #[error("failed to decode the AdmissionReview: the body is not UTF-8 ({0})")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// Another apiVersion or kind.
    #[error("unsupported {field} {value:?}: this webhook serves {API_VERSION} AdmissionReview only")]
    Unsupported {
        /// "apiVersion" or "kind".
        field: &'static str,
        /// What was sent.
        value: String,
    },
    /// No `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// No `request.uid` (the response could not be matched to it).
    #[error("the AdmissionReview request has no uid")]
    NoUid,
}

/// An incoming review.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewIn {
    /// Must be [`API_VERSION`].
    #[serde(default)]
    pub api_version: String,
    /// Must be [`KIND`].
    #[serde(default)]
    pub kind: String,
    /// The request.
    pub request: Option<AdmissionRequest>,
}

/// group/version/kind.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group ("" for core).
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// group/version/resource.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource {
    /// API group ("" for core).
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Resource (plural).
    #[serde(default)]
    pub resource: String,
}

/// The fields of `request` the webhook reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Echoed in the response.
    #[serde(default)]
    pub uid: String,
    /// The object's kind.
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// The resource.
    #[serde(default)]
    pub resource: GroupVersionResource,
    /// The subresource ("binding" for pods/binding).
    #[serde(default)]
    pub sub_resource: String,
    /// The object's name (the pod's, for a binding).
    #[serde(default)]
    pub name: String,
    /// The namespace.
    #[serde(default)]
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(default)]
    pub operation: String,
    /// The object, undecoded.
    #[serde(default)]
    pub object: Option<Box<RawValue>>,
    /// Set for dry-run requests: no side effects allowed.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// Who made the request, as the API server authenticated them (for the log).
    #[serde(default)]
    pub user_info: UserInfo,
}

/// The requesting user's name (the other fields of `userInfo` are not read).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo {
    /// The user name, e.g. `system:serviceaccount:kube-system:kube-scheduler`.
    #[serde(default)]
    pub username: String,
}

impl AdmissionRequest {
    /// The requesting user's name ("" when the review names none).
    pub fn user(&self) -> &str {
        &self.user_info.username
    }

    /// True for a dry-run request.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run == Some(true)
    }
}

/// Decodes and checks a review body.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    // serde_json checks UTF-8 only in the strings it keeps, so a body with invalid bytes in a field
    // this webhook skips would be answered though it is not JSON (found by fuzzing).
    let text = std::str::from_utf8(body).map_err(ReviewError::NotUtf8)?;
    let review: AdmissionReviewIn = serde_json::from_str(text).map_err(ReviewError::Decode)?;
    if review.api_version != API_VERSION {
        return Err(ReviewError::Unsupported {
            field: "apiVersion",
            value: review.api_version,
        });
    }
    if review.kind != KIND {
        return Err(ReviewError::Unsupported {
            field: "kind",
            value: review.kind,
        });
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    Ok(request)
}

/// `response.status` of a denial.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ResponseStatus {
    /// HTTP-like code the API server reports (403 for a denial).
    pub code: u16,
    /// The message users see.
    pub message: String,
    /// A machine-readable reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The `response` of a review.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Admitted or not.
    pub allowed: bool,
    /// Why not (denials only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ResponseStatus>,
    /// A base64 JSONPatch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// "JSONPatch" when a patch is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Warnings shown to the client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    /// Allowed, unchanged.
    pub fn allow(uid: &str) -> Self {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
        }
    }

    /// Denied with a message: code 403 and reason Forbidden, as the API server reports admission
    /// denials. (Not "Conflict": clients such as client-go's IsConflict would take a denial for an
    /// optimistic-concurrency conflict and retry it.)
    pub fn deny(uid: &str, message: impl Into<String>) -> Self {
        AdmissionResponse {
            allowed: false,
            status: Some(ResponseStatus {
                code: 403,
                message: message.into(),
                reason: "Forbidden".to_string(),
            }),
            ..Self::allow(uid)
        }
    }

    /// Adds a JSONPatch (ignored when empty).
    pub fn with_patch(mut self, ops: &[serde_json::Value]) -> Self {
        if !ops.is_empty() {
            let bytes = serde_json::to_vec(ops).unwrap_or_default();
            self.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            self.patch_type = Some("JSONPatch".to_string());
        }
        self
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }

    /// Wraps the response in a review.
    pub fn into_review(self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "response": self,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_pod_create_and_keeps_the_object_raw() {
        let body = serde_json::json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "request": {
                "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "ns", "operation": "CREATE", "dryRun": true,
                "object": {"metadata": {"name": "p"}},
            }
        });
        let request = decode(body.to_string().as_bytes()).expect("decodes");
        assert_eq!(request.kind.kind, "Pod");
        assert_eq!(request.resource.resource, "pods");
        assert!(request.is_dry_run());
        assert_eq!(
            request.object.expect("object").get(),
            r#"{"metadata":{"name":"p"}}"#
        );
    }

    #[test]
    fn rejects_what_is_not_a_v1_review() {
        for (body, expected) in [
            ("not json", "failed to decode"),
            (
                r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#,
                "unsupported apiVersion",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#,
                "unsupported kind",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                "has no request",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
                "has no uid",
            ),
            ("[1,2]", "failed to decode"),
        ] {
            let err = decode(body.as_bytes()).expect_err(body);
            assert!(err.to_string().contains(expected), "{body}: {err}");
        }
        // A byte that is not UTF-8 in a field the webhook skips (found by fuzzing): not JSON.
        let body = b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"userInfo\":{\"user\x97\":\"u\"}}}";
        let err = decode(body).expect_err("a body that is not UTF-8");
        assert!(err.to_string().contains("the body is not UTF-8"), "{err}");
    }

    #[test]
    fn responses_carry_patch_and_denial() {
        let ops = vec![serde_json::json!({"op": "add", "path": "/x", "value": 1})];
        let review = AdmissionResponse::allow("u").with_patch(&ops).into_review();
        assert_eq!(review["response"]["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(review["response"]["patch"].as_str().expect("patch"))
            .expect("base64");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&patch).expect("json")[0]["path"],
            "/x"
        );
        let denied = AdmissionResponse::deny("u", "no").into_review();
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(denied["response"]["status"]["code"], 403);
        assert_eq!(denied["response"]["status"]["reason"], "Forbidden");
        assert!(AdmissionResponse::allow("u").with_patch(&[]).patch.is_none());
    }
}
