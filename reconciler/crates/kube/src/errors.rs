//! kube-rs errors as the loop's [`ExecError`]: what trying again may fix
//! (an unreachable or busy API server, a conflict, a PodDisruptionBudget
//! that blocks an eviction for now) is transient; the rest is permanent.

use exec::ExecError;

/// HTTP codes after which the same request may succeed: 409 Conflict (a
/// stale write; AlreadyExists is handled before), 429 Too Many Requests (also
/// an eviction a PodDisruptionBudget refuses for now), 5xx.
fn transient_code(code: u16) -> bool {
    matches!(code, 409 | 429 | 500 | 502 | 503 | 504)
}

/// Whether the API server answered that the object exists already.
pub fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// Whether the API server answered 409 (exists, or a conflicting change).
pub fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Whether the API server answered that the object does not exist.
pub fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether trying again later may help.
pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => transient_code(s.code),
        kube::Error::SerdeError(_)
        | kube::Error::BuildRequest(_)
        | kube::Error::FromUtf8(_)
        | kube::Error::LinesCodecMaxLineLengthExceeded => false,
        // Connections, TLS, auth refresh, timeouts.
        _ => true,
    }
}

fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let reason = if s.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.reason)
            };
            format!("the API server answered {}{reason}: {}", s.code, s.message)
        }
        other => other.to_string(),
    }
}

/// `e` while doing `action` to `subject` (a job, a node).
pub fn action_error(action: &'static str, subject: &str, e: &kube::Error) -> ExecError {
    if is_transient(e) {
        let retry_after = match e {
            kube::Error::Api(s) => s
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| std::time::Duration::from_secs(u64::from(s))),
            _ => None,
        };
        ExecError::Transient {
            what: format!("{action} {subject}"),
            message: message(e),
            retry_after,
        }
    } else {
        ExecError::Action {
            action,
            subject: subject.to_string(),
            message: message(e),
        }
    }
}

/// `e` while reading the cluster (`what`: nodes, pods).
pub fn observe_error(what: &str, e: &kube::Error) -> ExecError {
    match action_error("list", what, e) {
        transient @ ExecError::Transient { .. } => transient,
        _ => ExecError::Inventory(format!("cannot list {what}: {}", message(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        let mut status = kube::core::Status::failure("boom", reason);
        status.code = code;
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn codes_are_transient_or_permanent() {
        assert!(action_error("place", "j", &api(500, "InternalError")).is_transient());
        assert!(action_error("place", "j", &api(503, "ServiceUnavailable")).is_transient());
        assert!(action_error("preempt", "j", &api(429, "TooManyRequests")).is_transient());
        assert!(!action_error("place", "j", &api(403, "Forbidden")).is_transient());
        assert!(!action_error("place", "j", &api(422, "Invalid")).is_transient());
        assert!(already_exists(&api(409, "AlreadyExists")));
        assert!(!already_exists(&api(409, "Conflict")));
        assert!(not_found(&api(404, "NotFound")));
        let e = action_error("place", "j", &api(403, "Forbidden"));
        assert_eq!(
            e.to_string(),
            "place j: the API server answered 403 (Forbidden): boom"
        );
        assert!(matches!(
            observe_error("nodes", &api(401, "Unauthorized")),
            ExecError::Inventory(_)
        ));
    }
}
