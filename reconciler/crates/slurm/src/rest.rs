//! slurmrestd as scheduler mode's source of observed state
//! (`--slurm-rest`): nodes from `GET /slurm/v0.0.38/nodes`, the queue
//! from `GET /slurm/v0.0.38/jobs`, jobs that left the queue from
//! `GET /slurmdb/v0.0.38/job/{id}`, read into the same types the commands
//! give ([`SlurmNode`], [`SlurmJob`], [`AccountedJob`]). Submitting,
//! releasing, cancelling and draining still run the commands.
//!
//! The HTTP/1.1 client is a plain `GET` with `Connection: close` over a
//! Unix socket (`unix:/run/slurmrestd.sock`, `rest_auth/local`) or TCP
//! (`http://host:port`, `rest_auth/jwt` with a token); no TLS.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::jobs::{AccountedJob, QueueResponse, SlurmJob, ended_code, is_active};
use crate::nodes::{SlurmNode, parse_gres};

/// The OpenAPI plugin read (Slurm 22.05's newest: `openapi/v0.0.38`).
pub const API: &str = "v0.0.38";

/// How long a connection, a request or a response may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// At most this much of a body is quoted in an error.
const EXCERPT: usize = 200;

/// Where slurmrestd listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket (`unix:PATH`).
    Unix(PathBuf),
    /// A TCP address (`http://HOST:PORT`).
    Tcp {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
            Endpoint::Tcp { host, port } => write!(f, "http://{host}:{port}"),
        }
    }
}

impl std::str::FromStr for Endpoint {
    type Err = RestError;

    /// `unix:/path/to/socket` or `http://host:port` (a trailing `/` is
    /// allowed; no other path, no `https`).
    fn from_str(text: &str) -> Result<Self, RestError> {
        let bad = |why: &str| RestError::Address {
            address: text.to_string(),
            why: why.to_string(),
        };
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(bad("no socket path after `unix:`"));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        if text.starts_with("https://") {
            return Err(bad(
                "https is not supported: use a Unix socket, or TLS in front of plain http",
            ));
        }
        let Some(rest) = text.strip_prefix("http://") else {
            return Err(bad("expected unix:PATH or http://HOST:PORT"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let Some((host, port)) = rest.rsplit_once(':') else {
            return Err(bad("no port (http://HOST:PORT)"));
        };
        let port = port.parse().map_err(|_| bad("the port is not a number"))?;
        if host.is_empty() || host.contains('/') {
            return Err(bad("expected http://HOST:PORT with no path"));
        }
        Ok(Endpoint::Tcp {
            host: host.to_string(),
            port,
        })
    }
}

/// What went wrong talking to slurmrestd.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestError {
    /// `--slurm-rest`'s value is not an address.
    #[error("invalid slurmrestd address `{address}`: {why}")]
    Address {
        /// The text given.
        address: String,
        /// Why it is not one.
        why: String,
    },
    /// No connection, or it broke or timed out.
    #[error("slurmrestd {url}: {message}")]
    Io {
        /// The request's URL.
        url: String,
        /// The I/O error.
        message: String,
    },
    /// An HTTP status other than 200.
    #[error("slurmrestd {url}: HTTP {status}: {excerpt}")]
    Status {
        /// The request's URL.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the body.
        excerpt: String,
    },
    /// Not HTTP, or not the JSON expected.
    #[error("slurmrestd {url}: unreadable response: {message}")]
    Response {
        /// The request's URL.
        url: String,
        /// What was wrong, with the start of the body.
        message: String,
    },
    /// Slurm answered with errors (the response's `errors` array).
    #[error("slurmrestd {url}: {errors}")]
    Slurm {
        /// The request's URL.
        url: String,
        /// The errors, `; `-separated.
        errors: String,
    },
}

impl RestError {
    /// Whether slurmrestd (or the controller behind it) could not be
    /// reached: trying again later may help.
    pub fn is_unreachable(&self) -> bool {
        match self {
            RestError::Io { .. } => true,
            RestError::Status { status, .. } => *status >= 500,
            RestError::Slurm { errors, .. } => [
                "Unable to contact",
                "Connection refused",
                "Socket timed out",
            ]
            .iter()
            .any(|m| errors.contains(m)),
            _ => false,
        }
    }
}

/// The start of a body, on one line.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(EXCERPT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// A slurmrestd client.
#[derive(Debug, Clone)]
pub struct RestClient {
    endpoint: Endpoint,
    /// `rest_auth/jwt`: the user name and token sent with each request.
    token: Option<(String, String)>,
}

impl RestClient {
    /// A client of the slurmrestd at `endpoint`.
    pub fn new(endpoint: Endpoint) -> Self {
        RestClient {
            endpoint,
            token: None,
        }
    }

    /// Sends `X-SLURM-USER-NAME` and `X-SLURM-USER-TOKEN` (`rest_auth/jwt`,
    /// e.g. a token from `scontrol token`; surrounding white space and
    /// control characters are dropped, so neither can add a header).
    pub fn with_token(mut self, user: String, token: String) -> Self {
        let clean =
            |text: String| -> String { text.trim().chars().filter(|c| !c.is_control()).collect() };
        self.token = Some((clean(user), clean(token)));
        self
    }

    /// Where it connects.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint)
    }

    /// The request line and headers of `GET path`.
    fn request(&self, path: &str) -> String {
        let host = match &self.endpoint {
            Endpoint::Unix(_) => "localhost".to_string(),
            Endpoint::Tcp { host, port } => format!("{host}:{port}"),
        };
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nConnection: close\r\n"
        );
        if let Some((user, token)) = &self.token {
            request.push_str(&format!(
                "X-SLURM-USER-NAME: {user}\r\nX-SLURM-USER-TOKEN: {token}\r\n"
            ));
        }
        request.push_str("\r\n");
        request
    }

    /// `GET path`: the body of a 200 answer.
    pub fn get(&self, path: &str) -> Result<Vec<u8>, RestError> {
        let url = self.url(path);
        let io = |e: std::io::Error| RestError::Io {
            url: url.clone(),
            message: e.to_string(),
        };
        let request = self.request(path);
        let raw = match &self.endpoint {
            Endpoint::Unix(socket) => {
                let stream = UnixStream::connect(socket).map_err(io)?;
                stream.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
                stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
                exchange(stream, &request).map_err(io)?
            }
            Endpoint::Tcp { host, port } => {
                let mut last = None;
                let mut connected = None;
                for addr in (host.as_str(), *port).to_socket_addrs().map_err(io)? {
                    match TcpStream::connect_timeout(&addr, TIMEOUT) {
                        Ok(stream) => {
                            connected = Some(stream);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                let stream = match connected {
                    Some(stream) => stream,
                    None => {
                        return Err(io(last.unwrap_or_else(|| {
                            std::io::Error::new(
                                std::io::ErrorKind::NotFound,
                                "the host name has no address",
                            )
                        })));
                    }
                };
                stream.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
                stream.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
                exchange(stream, &request).map_err(io)?
            }
        };
        let (status, body) = parse_response(&raw).map_err(|message| RestError::Response {
            url: url.clone(),
            message,
        })?;
        if status != 200 {
            return Err(RestError::Status {
                url,
                status,
                excerpt: excerpt(&body),
            });
        }
        Ok(body)
    }

    /// `GET path` read as `T`, refused when Slurm put errors in it
    /// (`allow` says which error numbers are an answer, not a failure).
    fn get_json<T: DeserializeOwned + HasErrors>(
        &self,
        path: &str,
        allow: &[i64],
    ) -> Result<T, RestError> {
        let body = self.get(path)?;
        let value: T = serde_json::from_slice(&body).map_err(|e| RestError::Response {
            url: self.url(path),
            message: format!("{e}: {}", excerpt(&body)),
        })?;
        let errors: Vec<String> = value
            .errors()
            .iter()
            .filter(|e| !allow.contains(&e.error_number.unwrap_or(0)))
            .map(ApiError::to_string)
            .collect();
        if !errors.is_empty() {
            return Err(RestError::Slurm {
                url: self.url(path),
                errors: errors.join("; "),
            });
        }
        Ok(value)
    }

    /// Every node, as `sinfo -N` gives them.
    pub fn nodes(&self) -> Result<Vec<SlurmNode>, RestError> {
        let nodes: NodesResponse = self.get_json(&format!("/slurm/{API}/nodes"), &[])?;
        Ok(nodes.nodes.into_iter().map(RestNode::into_node).collect())
    }

    /// The queue, as `squeue --json` gives it (the same document: 22.05's
    /// `squeue --json` prints what slurmrestd's v0.0.38 plugin serves).
    pub fn jobs(&self) -> Result<Vec<SlurmJob>, RestError> {
        let queue: QueueResponse = self.get_json(&format!("/slurm/{API}/jobs"), &[])?;
        queue.into_jobs().map_err(|message| RestError::Response {
            url: self.url(&format!("/slurm/{API}/jobs")),
            message,
        })
    }

    /// Jobs that left the queue, as the accounting database has them (one
    /// request each; an id it does not know is left out, as `sacct` does).
    pub fn accounted(&self, ids: &[u64]) -> Result<Vec<AccountedJob>, RestError> {
        let mut found = Vec::new();
        for id in ids {
            let jobs: DbJobsResponse =
                self.get_json(&format!("/slurmdb/{API}/job/{id}"), &[NOTHING_FOUND])?;
            found.extend(jobs.jobs.into_iter().map(DbJob::into_accounted));
        }
        Ok(found)
    }
}

/// Writes `request`, reads until the server closes.
fn exchange<S: Read + Write>(mut stream: S, request: &str) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    Ok(raw)
}

/// An HTTP/1.1 response's status and body (`Content-Length`, chunked, or
/// up to the end).
pub fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in `{}`", excerpt(raw)))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut words = status_line.split_whitespace();
    let status = match (words.next(), words.next()) {
        (Some(version), Some(code)) if version.starts_with("HTTP/") => code
            .parse::<u16>()
            .map_err(|_| format!("bad status line `{status_line}`"))?,
        _ => return Err(format!("not HTTP: `{}`", excerpt(raw))),
    };
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("bad Content-Length `{value}`"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let body = if chunked {
        dechunk(body)?
    } else if let Some(length) = length {
        body.get(..length)
            .ok_or_else(|| format!("body cut short: {} of {length} bytes", body.len()))?
            .to_vec()
    } else {
        body.to_vec()
    };
    Ok((status, body))
}

/// The body of a chunked transfer.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunked body cut short")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size `{size_text}`"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or("chunked body cut short")?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("chunked body cut short")?;
    }
}

/// slurmdbd's "Nothing found" (a job id it does not know).
const NOTHING_FOUND: i64 = 9003;

/// An entry of a response's `errors` array.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiError {
    /// Slurm's error number.
    #[serde(default)]
    pub error_number: Option<i64>,
    /// Its text.
    #[serde(default)]
    pub error: Option<String>,
    /// More words.
    #[serde(default)]
    pub description: Option<String>,
    /// Where it came from.
    #[serde(default)]
    pub source: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<&str> = [&self.error, &self.description, &self.source]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .filter(|p| !p.is_empty())
            .collect();
        write!(f, "{}", parts.join(": "))?;
        if let Some(number) = self.error_number {
            write!(f, " (error {number})")?;
        }
        Ok(())
    }
}

/// A response with an `errors` array.
trait HasErrors {
    fn errors(&self) -> &[ApiError];
}

#[derive(Debug, Deserialize)]
struct NodesResponse {
    #[serde(default)]
    errors: Vec<ApiError>,
    nodes: Vec<RestNode>,
}

impl HasErrors for NodesResponse {
    fn errors(&self) -> &[ApiError] {
        &self.errors
    }
}

impl HasErrors for QueueResponse {
    fn errors(&self) -> &[ApiError] {
        &self.errors
    }
}

/// A node of `GET /slurm/v0.0.38/nodes`.
#[derive(Debug, Clone, Deserialize)]
struct RestNode {
    name: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    state_flags: Vec<String>,
    #[serde(default)]
    partitions: Vec<String>,
    #[serde(default)]
    gres: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

impl RestNode {
    fn into_node(self) -> SlurmNode {
        let reason = self.reason.filter(|r| !r.is_empty());
        SlurmNode {
            state: node_state(&self.state, &self.state_flags),
            partitions: self.partitions,
            gpus: parse_gres(self.gres.as_deref().unwrap_or("")),
            reason: reason.unwrap_or_else(|| "none".to_string()),
            name: self.name,
        }
    }
}

/// A node's state in `sinfo`'s long form (`%T`) from slurmrestd's base
/// state and flags: `idle` + `DRAIN` is `drained`, `mixed` + `DRAIN`
/// `draining`, `NOT_RESPONDING` a trailing `*`.
pub fn node_state(base: &str, flags: &[String]) -> String {
    let base = base.to_ascii_lowercase();
    let has = |flag: &str| flags.iter().any(|f| f.eq_ignore_ascii_case(flag));
    let busy = matches!(base.as_str(), "allocated" | "mixed") || has("COMPLETING");
    let mut state = if has("DRAIN") {
        if busy { "draining" } else { "drained" }.to_string()
    } else if has("FAIL") {
        if busy { "failing" } else { "fail" }.to_string()
    } else if has("MAINTENANCE") {
        "maint".to_string()
    } else if has("REBOOT_REQUESTED") || has("REBOOT_ISSUED") {
        "reboot".to_string()
    } else if has("POWERED_DOWN") {
        format!("{base}~")
    } else if has("COMPLETING") {
        "completing".to_string()
    } else {
        base
    };
    if has("NOT_RESPONDING") {
        state.push('*');
    }
    state
}

#[derive(Debug, Deserialize)]
struct DbJobsResponse {
    #[serde(default)]
    errors: Vec<ApiError>,
    #[serde(default)]
    jobs: Vec<DbJob>,
}

impl HasErrors for DbJobsResponse {
    fn errors(&self) -> &[ApiError] {
        &self.errors
    }
}

/// A job of `GET /slurmdb/v0.0.38/job/{id}`.
#[derive(Debug, Deserialize)]
struct DbJob {
    job_id: u64,
    #[serde(default)]
    name: String,
    state: DbState,
    #[serde(default)]
    exit_code: Option<DbExitCode>,
}

#[derive(Debug, Deserialize)]
struct DbState {
    current: String,
}

#[derive(Debug, Deserialize)]
struct DbExitCode {
    #[serde(default)]
    status: String,
    #[serde(default)]
    return_code: Option<i64>,
    #[serde(default)]
    signal: Option<DbSignal>,
}

#[derive(Debug, Deserialize)]
struct DbSignal {
    #[serde(default)]
    signal_id: Option<i64>,
}

impl DbJob {
    fn into_accounted(self) -> AccountedJob {
        let state = self
            .state
            .current
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let code = self.exit_code.map_or(0, |exit| {
            let signal = exit.signal.and_then(|s| s.signal_id).unwrap_or(0);
            if exit.status.eq_ignore_ascii_case("SIGNALED") && signal > 0 {
                128 + signal
            } else {
                exit.return_code.unwrap_or(0)
            }
        });
        let code = i32::try_from(code).unwrap_or(-1);
        AccountedJob {
            id: self.job_id,
            name: self.name,
            exit_code: if is_active(&state) {
                None
            } else {
                ended_code(&state, code)
            },
            state,
        }
    }
}

#[cfg(test)]
mod tests;
