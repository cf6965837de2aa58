//! A client error in one line, as kubectl prints it: `Error from server (Forbidden): pods is forbidden:
//! User "x" cannot list resource "pods" ...`. kube's own `Display` for [`kube::Error::Api`] appends a
//! `Debug` dump of the whole Status object, which is noise to a user; the Status's message already names
//! the verb, the resource and the user.

use kube::core::Status;

/// `Error from server (<Reason>): <message>` (kubectl's `StandardErrorMessage`): without a reason, `Error
/// from server: <message>`; without a message, the HTTP code stands in for it.
pub fn server_error(status: &Status) -> String {
    let message = if status.message.trim().is_empty() {
        format!("HTTP {}", status.code)
    } else {
        status.message.trim().to_string()
    };
    if status.reason.trim().is_empty() {
        format!("Error from server: {message}")
    } else {
        format!("Error from server ({}): {message}", status.reason.trim())
    }
}

/// [`server_error`] for a Status the API server sent, the client's own message for anything else
/// (connection, TLS, decoding) followed by its causes: kube's message alone is often only
/// `ServiceError: client error (SendRequest)`, while the cause says what happened (`operation timed
/// out`, `Connection refused`).
pub fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => server_error(status),
        other => with_causes(other),
    }
}

/// The error's message, then each cause's that it does not already contain, joined by `: `.
pub fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !more.is_empty() && !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Status as kube-apiserver sends it with a 403 (the body of a denied list).
    const FORBIDDEN: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"pods is forbidden: User \"x\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
        "reason":"Forbidden","details":{"kind":"pods"},"code":403}"#;

    fn status(json: &str) -> Status {
        serde_json::from_str(json).expect("a Status")
    }

    #[test]
    fn api_errors_render_as_kubectl_does() {
        let cases = [
            (
                "forbidden",
                FORBIDDEN.to_string(),
                "Error from server (Forbidden): pods is forbidden: User \"x\" cannot list resource \"pods\" \
                 in API group \"\" in the namespace \"default\"",
            ),
            (
                "no reason",
                r#"{"status":"Failure","message":"etcd is down","code":500}"#.to_string(),
                "Error from server: etcd is down",
            ),
            (
                "no message",
                r#"{"status":"Failure","reason":"NotFound","code":404}"#.to_string(),
                "Error from server (NotFound): HTTP 404",
            ),
        ];
        for (name, json, want) in cases {
            let err = kube::Error::Api(Box::new(status(&json)));
            let got = describe(&err);
            assert_eq!(got, want, "{name}");
            assert!(!got.contains("Status {"), "{name}: a Debug dump: {got}");
            assert!(!got.contains('\n'), "{name}: more than one line: {got}");
        }
    }

    #[test]
    fn other_errors_keep_the_clients_message() {
        let err = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(describe(&err), err.to_string());
    }

    /// An error whose message hides its cause, as hyper-util's `client error (SendRequest)` does.
    #[derive(Debug)]
    struct Wrapper(std::io::Error);

    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (SendRequest)")
        }
    }

    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn client_errors_name_their_causes() {
        let cases = [
            (
                "timed out",
                Wrapper(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "operation timed out",
                )),
                "ServiceError: client error (SendRequest): operation timed out",
            ),
            (
                "refused",
                Wrapper(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "Connection refused (os error 111)",
                )),
                "ServiceError: client error (SendRequest): Connection refused (os error 111)",
            ),
        ];
        for (name, cause, want) in cases {
            let err = kube::Error::Service(Box::new(cause));
            assert_eq!(describe(&err), want, "{name}");
        }
    }
}
