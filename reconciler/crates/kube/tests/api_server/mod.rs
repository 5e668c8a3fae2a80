//! A mocked API server for the kube executor's tests: tower-test's
//! `mock::pair` behind a kube-rs `Client`, answering a script of expected
//! requests in order and failing on any other, and on any request that the
//! ClusterRole and Roles of `deploy/kubernetes/rbac.yaml` do not allow.

#![allow(dead_code)] // each test file uses its part
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers stop at the first surprise

use std::collections::{BTreeMap, BTreeSet};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};

use bytes::Bytes;
use gitfleet_kube::{KubeConfig, KubeExecutor, Namespaces};
use http::{Request, Response, StatusCode};
use http_body::Frame;
use kube::Client;
use kube::client::Body;
use model::observed::Timestamp;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower_test::mock;

/// One expected request and the answer to it.
pub struct Step {
    method: &'static str,
    path: String,
    query: Vec<(&'static str, String)>,
    status: u16,
    answer: Value,
    /// A watch's answer: events as the test sends them.
    stream: Option<Stream>,
}

/// The body of a watch answer.
enum Stream {
    /// Events sent through a [`Watch`]; ends when it is dropped.
    Channel(mpsc::UnboundedReceiver<Bytes>),
    /// No event, never ending (a quiet cluster).
    Quiet,
}

pub fn step(method: &'static str, path: impl Into<String>, status: u16, answer: Value) -> Step {
    Step {
        method,
        path: path.into(),
        query: Vec::new(),
        status,
        answer,
        stream: None,
    }
}

/// The query of a WATCH from `version` (kube-rs's parameters: bookmarks,
/// the 290 s timeout).
fn watch_query(step: Step, version: &str) -> Step {
    step.query("watch", "true")
        .query("resourceVersion", version)
        .query("allowWatchBookmarks", "true")
        .query("timeoutSeconds", "290")
}

/// An expected WATCH of `path` from `version`, answered with the events the
/// returned [`Watch`] sends (the watch ends when it is dropped).
pub fn watch(path: impl Into<String>, version: &str) -> (Step, Watch) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut s = watch_query(step("GET", path, 200, Value::Null), version);
    s.stream = Some(Stream::Channel(rx));
    (s, Watch { tx, sent: 0 })
}

/// An expected WATCH of `path` from `version` on which nothing happens.
pub fn quiet_watch(path: impl Into<String>, version: &str) -> Step {
    let mut s = watch_query(step("GET", path, 200, Value::Null), version);
    s.stream = Some(Stream::Quiet);
    s
}

/// The first observation of a namespace `ml` executor: LIST and WATCH of
/// the Nodes, then of gitfleet's Pods, both lists at version 7 and both
/// watches quiet.
pub fn first_observation(nodes: Value, pods: Value) -> Vec<Step> {
    vec![
        step("GET", "/api/v1/nodes", 200, nodes),
        quiet_watch("/api/v1/nodes", "7"),
        step("GET", "/api/v1/namespaces/ml/pods", 200, pods)
            .query("labelSelector", "app.kubernetes.io/managed-by=gitfleet"),
        quiet_watch("/api/v1/namespaces/ml/pods", "7")
            .query("labelSelector", "app.kubernetes.io/managed-by=gitfleet"),
    ]
}

/// The sending end of a watch: each call is one event line.
pub struct Watch {
    tx: mpsc::UnboundedSender<Bytes>,
    /// Bytes sent so far.
    pub sent: usize,
}

impl Watch {
    fn line(&mut self, event: Value) {
        let mut bytes = serde_json::to_vec(&event).unwrap();
        bytes.push(b'\n');
        self.sent += bytes.len();
        // A watch the executor dropped (it listed again) takes nothing.
        let _ = self.tx.send(Bytes::from(bytes));
    }

    /// An `ADDED`, `MODIFIED` or `DELETED` event of `object` at `version`.
    pub fn send(&mut self, kind: &str, mut object: Value, version: &str) {
        object["metadata"]["resourceVersion"] = json!(version);
        self.line(json!({"type": kind, "object": object}));
    }

    /// A `BOOKMARK` at `version`.
    pub fn bookmark(&mut self, kind: &str, version: &str) {
        self.line(
            json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": "v1",
            "metadata": {"resourceVersion": version}}}),
        );
    }

    /// An `ERROR` event `410 Gone` (the version is too old).
    pub fn gone(&mut self) {
        self.line(json!({"type": "ERROR", "object": status(410, "Expired")}));
    }
}

/// The mock's answer body: all at once, or a watch's events.
pub enum MockBody {
    Full(Option<Bytes>),
    Events(mpsc::UnboundedReceiver<Bytes>),
    Quiet,
}

impl http_body::Body for MockBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            MockBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Events(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
            MockBody::Quiet => Poll::Pending,
        }
    }
}

impl Step {
    pub fn query(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.query.push((key, value.into()));
        self
    }
}

/// A request's body as the server saw it (method and path are asserted
/// as they come).
#[derive(Debug)]
pub struct Seen {
    pub body: Value,
}

/// A query string's pairs, percent-decoded.
fn query_map(query: Option<&str>) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// A client whose requests are checked against `script`; the handle
/// returns what was seen once the client is dropped (and fails if the
/// executor asked for more).
pub fn mock_client(script: Vec<Step>) -> (Client, tokio::task::JoinHandle<Vec<Seen>>) {
    mock_client_as("rbac.yaml", script)
}

/// [`mock_client`] checking requests against the roles of another file of
/// `deploy/kubernetes/` (the node agent's `agent-rbac.yaml`).
pub fn mock_client_as(
    rbac: &str,
    script: Vec<Step>,
) -> (Client, tokio::task::JoinHandle<Vec<Seen>>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<MockBody>>();
    let granted = granted(rbac);
    let rbac = rbac.to_string();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let mut seen = Vec::new();
        for (i, s) in script.into_iter().enumerate() {
            let (request, send) = handle
                .next_request()
                .await
                .unwrap_or_else(|| panic!("request {i} ({} {}) never came", s.method, s.path));
            let method = request.method().to_string();
            let path = request.uri().path().to_string();
            let query = query_map(request.uri().query());
            assert!(
                method == s.method && matches(&s.path, &path),
                "request {i}: {method} {path}, expected {} {}",
                s.method,
                s.path
            );
            let need = needs(&method, &path, query.contains_key("watch"));
            assert!(
                granted.contains(&need),
                "request {i}: {method} {path} needs {need:?}, which deploy/kubernetes/{rbac} does not grant"
            );
            if !s.query.iter().any(|(k, _)| *k == "watch") {
                assert!(
                    !query.contains_key("watch"),
                    "request {i}: a WATCH of {path}, expected a LIST or a read"
                );
            }
            for (key, value) in &s.query {
                assert_eq!(
                    query.get(*key),
                    Some(value),
                    "request {i} {path}: query {key}"
                );
            }
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            };
            let answer = match s.stream {
                Some(Stream::Channel(rx)) => MockBody::Events(rx),
                Some(Stream::Quiet) => MockBody::Quiet,
                None => MockBody::Full(Some(Bytes::from(serde_json::to_vec(&s.answer).unwrap()))),
            };
            let response = Response::builder()
                .status(StatusCode::from_u16(s.status).unwrap())
                .body(answer)
                .unwrap();
            send.send_response(response);
            seen.push(Seen { body });
        }
        if let Some((request, _)) = handle.next_request().await {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
        seen
    });
    (Client::new(service, "default"), server)
}

/// Whether `path` matches `pattern`, in which one `*` stands for any text.
fn matches(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        Some((head, tail)) => {
            path.len() >= head.len() + tail.len() && path.starts_with(head) && path.ends_with(tail)
        }
        None => pattern == path,
    }
}

/// A Status answer (an error).
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "message": format!("{reason} (mocked)"), "reason": reason, "code": code})
}

/// A Status answer (success).
pub fn ok_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
}

/// A list answer.
pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "7"}, "items": items})
}

/// What the ClusterRole and Roles in `deploy/kubernetes/rbac.yaml` grant,
/// as (API group, resource, verb).
fn granted(rbac: &str) -> BTreeSet<(String, String, String)> {
    let file = format!(
        "{}/../../../deploy/kubernetes/{rbac}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(file).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut granted = BTreeSet::new();
    for role in docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        for rule in role["rules"].as_array().unwrap() {
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        granted.insert((
                            group.as_str().unwrap().to_string(),
                            resource.as_str().unwrap().to_string(),
                            verb.as_str().unwrap().to_string(),
                        ));
                    }
                }
            }
        }
    }
    granted
}

/// The (API group, resource, verb) a request needs in RBAC terms.
fn needs(method: &str, path: &str, watch: bool) -> (String, String, String) {
    let (group, tail) = match path.strip_prefix("/api/v1/") {
        Some(tail) => ("", tail),
        None => {
            let rest = path.strip_prefix("/apis/").unwrap();
            let mut it = rest.splitn(3, '/');
            let group = it.next().unwrap();
            let _version = it.next().unwrap();
            (group, it.next().unwrap())
        }
    };
    let parts: Vec<&str> = tail.split('/').collect();
    let rest = match parts.as_slice() {
        ["namespaces", _, rest @ ..] if !rest.is_empty() => rest,
        all => all,
    };
    let resource = match rest {
        [resource, _, sub] => format!("{resource}/{sub}"),
        [resource, ..] => (*resource).to_string(),
        [] => panic!("no resource in {path}"),
    };
    let verb = match (method, rest.len()) {
        ("GET", 1) if watch => "watch",
        ("GET", 1) => "list",
        ("GET", _) => "get",
        ("POST", _) => "create",
        ("DELETE", _) => "delete",
        ("PATCH", _) => "patch",
        ("PUT", _) => "update",
        _ => panic!("unexpected method {method}"),
    };
    (group.to_string(), resource, verb.to_string())
}

/// An expected WATCH of `path` from `version` that the server refuses
/// with `code` (410: the version is gone).
pub fn refused_watch(path: impl Into<String>, version: &str, code: u16) -> Step {
    watch_query(step("GET", path, code, status(code, "Expired")), version)
}

// Fixtures shared by the test files.

/// The tests' clock: 2026-11-21T12:00:00Z.
pub fn now() -> Timestamp {
    "2026-11-21T12:00:00Z".parse().unwrap()
}

/// An executor over `client` putting jobs in namespace `ml`, without
/// leader election.
pub fn executor(client: Client) -> KubeExecutor {
    KubeExecutor::new(client, KubeConfig::new(Namespaces::Fixed("ml".to_string())))
}

/// Replica `rank` of `job` (attempt `a1`, Pod `JOB-pRANK` in `ml`) bound to
/// `node`, in `phase`; with `code`, its main container ended so.
pub fn pod(job: &str, rank: u32, node: &str, phase: &str, code: Option<i32>) -> Value {
    let mut pod = json!({
        "metadata": {"name": format!("{job}-p{rank}"), "namespace": "ml",
            "creationTimestamp": "2026-11-21T11:00:00Z",
            "labels": {"app.kubernetes.io/managed-by": "gitfleet", "gitfleet.io/job": job,
                       "gitfleet.io/replica": rank.to_string(), "gitfleet.io/attempt": "a1"}},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": phase}
    });
    if let Some(code) = code {
        pod["status"]["containerStatuses"] = json!([{"name": "main", "image": "x",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "finishedAt": "2026-11-21T11:30:00Z"}}}]);
    }
    pod
}
