//! A fake Kubernetes API server for end-to-end tests of the binary's kube
//! executor: plain HTTP on loopback (axum, on a runtime of its own), holding
//! objects in memory and recording every request. It answers what the
//! executor asks of a cluster: LIST and WATCH (a watch that stays quiet),
//! GET, create (409 when the name is taken), replace (409 when the
//! resourceVersion is not the stored one), delete, and the `binding` (sets
//! the Pod's node and makes it Running, as a kubelet would) and `eviction`
//! (marks the Pod terminating) subresources. Nothing else: anything it does
//! not know is a 405, which the tests notice.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub body: Value,
    /// The answer's status code.
    pub status: u16,
}

impl Seen {
    /// A write (anything but GET).
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }

    /// A request for the leader-election Lease.
    pub fn is_lease(&self) -> bool {
        self.path.contains("/leases")
    }

    /// `METHOD PATH`, as the tests compare them.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// What the fake cluster holds.
#[derive(Debug, Default)]
pub struct Cluster {
    /// (resource, namespace, name) → object; cluster-scoped objects have no
    /// namespace.
    pub objects: BTreeMap<(String, String, String), Value>,
    /// Every request, in order.
    pub seen: Vec<Seen>,
    version: u64,
}

impl Cluster {
    fn next_version(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }

    /// Adds a Node.
    pub fn add_node(&mut self, mut node: Value) {
        let name = node["metadata"]["name"].as_str().unwrap().to_string();
        node["metadata"]["resourceVersion"] = json!(self.next_version());
        self.objects
            .insert(("nodes".into(), String::new(), name), node);
    }

    /// The Pods of namespace `ns`, by name.
    pub fn pods(&self, ns: &str) -> BTreeMap<String, Value> {
        self.objects
            .iter()
            .filter(|((r, n, _), _)| r == "pods" && n == ns)
            .map(|((_, _, name), v)| (name.clone(), v.clone()))
            .collect()
    }

    /// The kubelet's part of an eviction: every Pod marked terminating is
    /// gone (its grace period is over).
    pub fn finish_evictions(&mut self) -> usize {
        let before = self.objects.len();
        self.objects
            .retain(|(r, _, _), v| r != "pods" || v["metadata"]["deletionTimestamp"].is_null());
        before - self.objects.len()
    }

    fn answer(
        &mut self,
        method: &Method,
        path: &str,
        query: &BTreeMap<String, String>,
        body: Value,
    ) -> (u16, Answer) {
        let Some(route) = Route::parse(path) else {
            return (404, Answer::Json(status(404, "NotFound")));
        };
        let key = |name: &str| {
            (
                route.resource.clone(),
                route.namespace.clone(),
                name.to_string(),
            )
        };
        match (method.as_str(), route.name.as_deref(), route.sub.as_deref()) {
            ("GET", None, None) if query.get("watch").is_some_and(|w| w == "true") => {
                (200, Answer::Quiet)
            }
            ("GET", None, None) => {
                let selector = query.get("labelSelector").map(String::as_str).unwrap_or("");
                let items: Vec<Value> = self
                    .objects
                    .iter()
                    .filter(|((r, ns, _), v)| {
                        *r == route.resource
                            && (route.namespace.is_empty() || *ns == route.namespace)
                            && selected(v, selector)
                    })
                    .map(|(_, v)| v.clone())
                    .collect();
                let list = json!({"apiVersion": route.api_version, "kind": format!("{}List", route.kind()),
                    "metadata": {"resourceVersion": self.version.to_string()}, "items": items});
                (200, Answer::Json(list))
            }
            ("GET", Some(name), None) => match self.objects.get(&key(name)) {
                Some(v) => (200, Answer::Json(v.clone())),
                None => (404, Answer::Json(status(404, "NotFound"))),
            },
            ("POST", None, None) => {
                let name = body["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if self.objects.contains_key(&key(&name)) {
                    return (409, Answer::Json(status(409, "AlreadyExists")));
                }
                let mut object = body;
                let version = self.next_version();
                let meta = &mut object["metadata"];
                meta["uid"] = json!(format!("uid-{version}"));
                meta["resourceVersion"] = json!(version);
                meta["creationTimestamp"] = json!(now());
                if !route.namespace.is_empty() {
                    meta["namespace"] = json!(route.namespace);
                }
                if route.resource == "pods" {
                    object["status"] = json!({"phase": "Pending"});
                }
                self.objects.insert(key(&name), object.clone());
                (201, Answer::Json(object))
            }
            ("POST", Some(name), Some(sub @ ("binding" | "eviction"))) => {
                let version = self.next_version();
                let Some(pod) = self.objects.get_mut(&key(name)) else {
                    return (404, Answer::Json(status(404, "NotFound")));
                };
                if sub == "binding" {
                    if !pod["spec"]["nodeName"].is_null() {
                        return (409, Answer::Json(status(409, "Conflict")));
                    }
                    pod["spec"]["nodeName"] = body["target"]["name"].clone();
                    pod["status"] = json!({"phase": "Running", "startTime": now()});
                } else {
                    pod["metadata"]["deletionTimestamp"] = json!(now());
                    pod["metadata"]["deletionGracePeriodSeconds"] =
                        body["deleteOptions"]["gracePeriodSeconds"].clone();
                }
                pod["metadata"]["resourceVersion"] = json!(version);
                (
                    201,
                    Answer::Json(
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
                    ),
                )
            }
            ("PUT", Some(name), None) => {
                let Some(stored) = self.objects.get(&key(name)) else {
                    return (404, Answer::Json(status(404, "NotFound")));
                };
                if body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"] {
                    return (409, Answer::Json(status(409, "Conflict")));
                }
                let mut object = body;
                object["metadata"]["resourceVersion"] = json!(self.next_version());
                self.objects.insert(key(name), object.clone());
                (200, Answer::Json(object))
            }
            ("DELETE", Some(name), None) => match self.objects.remove(&key(name)) {
                Some(v) => (200, Answer::Json(v)),
                None => (404, Answer::Json(status(404, "NotFound"))),
            },
            _ => (405, Answer::Json(status(405, "MethodNotAllowed"))),
        }
    }
}

/// What a path names.
struct Route {
    api_version: String,
    namespace: String,
    resource: String,
    name: Option<String>,
    sub: Option<String>,
}

impl Route {
    fn parse(path: &str) -> Option<Route> {
        let (api_version, rest) = match path.strip_prefix("/api/v1/") {
            Some(rest) => ("v1".to_string(), rest),
            None => {
                let mut it = path.strip_prefix("/apis/")?.splitn(3, '/');
                let (group, version, rest) = (it.next()?, it.next()?, it.next()?);
                (format!("{group}/{version}"), rest)
            }
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let (namespace, parts) = match parts.as_slice() {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (ns.to_string(), rest),
            all => (String::new(), all),
        };
        let (resource, name, sub) = match parts {
            [r] => (r, None, None),
            [r, n] => (r, Some(n.to_string()), None),
            [r, n, s] => (r, Some(n.to_string()), Some(s.to_string())),
            _ => return None,
        };
        Some(Route {
            api_version,
            namespace,
            resource: resource.to_string(),
            name,
            sub,
        })
    }

    /// The kind of the resource (its list is `KindList`).
    fn kind(&self) -> &'static str {
        match self.resource.as_str() {
            "nodes" => "Node",
            "pods" => "Pod",
            "services" => "Service",
            "leases" => "Lease",
            _ => "Object",
        }
    }
}

/// Whether `object`'s labels satisfy an equality `selector` (`a=b,c=d`).
fn selected(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        object["metadata"]["labels"][k].as_str() == Some(v)
    })
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A Status answer (an error).
pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "message": format!("{reason} (fake)"), "reason": reason, "code": code})
}

enum Answer {
    Json(Value),
    /// A watch on which nothing happens; it ends when the client goes.
    Quiet,
}

/// A query string's pairs, percent-decoded.
fn query_map(query: Option<&str>) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

async fn handle(State(cluster): State<Arc<Mutex<Cluster>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let body: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    let path = parts.uri.path().to_string();
    let query = query_map(parts.uri.query());
    let (code, answer) = {
        let mut cluster = cluster.lock().unwrap();
        let seen = Seen {
            method: parts.method.to_string(),
            path: path.clone(),
            query: query.clone(),
            body: body.clone(),
            status: 0,
        };
        let (code, answer) = cluster.answer(&parts.method, &path, &query, body);
        cluster.seen.push(Seen {
            status: code,
            ..seen
        });
        (code, answer)
    };
    let body = match answer {
        Answer::Json(v) => Body::from(serde_json::to_vec(&v).unwrap()),
        Answer::Quiet => {
            Body::from_stream(futures_util::stream::pending::<Result<Bytes, std::io::Error>>())
        }
    };
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

/// The fake API server, served until dropped.
pub struct FakeApi {
    pub cluster: Arc<Mutex<Cluster>>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    runtime: tokio::runtime::Runtime,
}

impl FakeApi {
    /// Serves `cluster` on a free loopback port.
    pub fn start(cluster: Cluster) -> FakeApi {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cluster = Arc::new(Mutex::new(cluster));
        let app = Router::new().fallback(handle).with_state(cluster.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, app).await });
        FakeApi {
            cluster,
            url,
            runtime,
        }
    }

    /// The requests seen since the `from`-th.
    pub fn seen_since(&self, from: usize) -> Vec<Seen> {
        self.cluster.lock().unwrap().seen[from..].to_vec()
    }

    /// How many requests it has seen.
    pub fn count(&self) -> usize {
        self.cluster.lock().unwrap().seen.len()
    }

    /// Writes a kubeconfig naming this server (context namespace `ns`)
    /// into `dir`; its path.
    pub fn kubeconfig(&self, dir: &Path, ns: &str) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n\
             clusters:\n- name: fake\n  cluster: {{server: \"{}\"}}\n\
             users:\n- name: tester\n  user: {{token: fake-token}}\n\
             contexts:\n- name: fake\n  context: {{cluster: fake, user: tester, namespace: {ns}}}\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}
