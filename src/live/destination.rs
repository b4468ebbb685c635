//! The live destination: a small HTTP/1.1 server on 127.0.0.1 in the parent process, the
//! witness of a live run.
//!
//! It stamps every arrival with the run clock (one clock for every arrival, whichever worker
//! sent it) and answers with the simulator's own destination model: 429 above
//! the destination's true limit (GCRA), 503 with probability `p503`, else 200. The response is
//! held back for the fetch duration the worker drew (the `hold` query parameter), so a fetch
//! takes as long as the scenario says.
//!
//! ```text
//! GET /fetch?pid=3&hold=50000000 HTTP/1.1\r\nHost: dest\r\n\r\n
//! HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n
//! ```
//!
//! Connections are kept alive; a worker uses one for all its fetches.

use crate::destination::Destination;
use crate::live::EventLog;
use crate::live::clock::RunClock;
use crate::rng::{self, Entity};
use crate::scenario::DestinationCfg;
use crate::time::Instant;
use crate::trace::Event;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A running destination.
pub struct DestinationServer {
    /// Where it listens.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DestinationServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DestinationServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl DestinationServer {
    /// Move the `destination_throttle` windows `by` ns later on the run clock: an external
    /// program's run starts the scenario's clock when its workers are ready.
    pub fn delay_throttles(&self, by: u64) {
        if by == 0 || self.shared.throttles.is_empty() {
            return;
        }
        let moved = self
            .shared
            .throttles
            .iter()
            .map(|&(a, b, s)| (a + by, b + by, s))
            .collect();
        let mut d = self.shared.dest.lock().expect("destination lock");
        let placeholder = Destination::new(&DestinationCfg::default(), rng::stream(0, Entity::Destination));
        let old = std::mem::replace(&mut *d, placeholder);
        *d = old.with_throttles(moved);
    }
}

impl Drop for DestinationServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    dest: Mutex<Destination>,
    // the throttle windows the destination was given, as the scenario states them
    throttles: Vec<(u64, u64, u16)>,
    clock: Arc<OnceLock<RunClock>>,
    log: EventLog,
    external: Option<External>,
}

/// How the destination serves external worker programs: they only send `GET` requests, so
/// the destination itself records each fetch's start and end and draws its duration.
struct External {
    /// Worker processes in the run (valid `pid`s are below it).
    processes: u32,
    /// The fetch duration, drawn for each request without a `hold` parameter.
    fetch: crate::dist::Dist,
    rng: Mutex<crate::rng::Rng>,
    /// Requests that named no valid process (`?pid=` missing or out of range), for the
    /// runner's message.
    strays: Arc<Mutex<Vec<String>>>,
}

/// The destination's settings for external worker programs (see [`start_external`]).
#[derive(Clone, Debug)]
pub struct ExternalCfg {
    /// Worker processes in the run.
    pub processes: u32,
    /// Fetch duration (the scenario's `fetch.duration`).
    pub fetch: crate::dist::Dist,
    /// Where requests that named no valid process are listed (their request lines).
    pub strays: Arc<Mutex<Vec<String>>>,
}

/// Start the destination on an ephemeral loopback port. Arrivals are stamped with `clock`
/// once it is set (workers fetch only after the run's origin is fixed).
pub async fn start(
    cfg: &DestinationCfg,
    throttles: Vec<(u64, u64, u16)>,
    seed: u64,
    clock: Arc<OnceLock<RunClock>>,
    log: EventLog,
) -> std::io::Result<DestinationServer> {
    start_with(cfg, throttles, seed, clock, log, None).await
}

/// [`start`] for external worker programs: besides each arrival, the destination records the
/// fetch's start (at the arrival: on loopback the request left a moment before) and its end
/// (when the response is written), and holds each response for a fetch duration it draws from
/// `ext.fetch` (a request may still give its own `hold`). A request without a valid `?pid=`
/// is answered 400 and listed in `ext.strays`.
pub async fn start_external(
    cfg: &DestinationCfg,
    throttles: Vec<(u64, u64, u16)>,
    seed: u64,
    clock: Arc<OnceLock<RunClock>>,
    log: EventLog,
    ext: ExternalCfg,
) -> std::io::Result<DestinationServer> {
    let external = External {
        processes: ext.processes,
        fetch: ext.fetch,
        rng: Mutex::new(rng::stream(seed ^ 0x6578_7465_726e, Entity::Destination)),
        strays: ext.strays,
    };
    start_with(cfg, throttles, seed, clock, log, Some(external)).await
}

async fn start_with(
    cfg: &DestinationCfg,
    throttles: Vec<(u64, u64, u16)>,
    seed: u64,
    clock: Arc<OnceLock<RunClock>>,
    log: EventLog,
    external: Option<External>,
) -> std::io::Result<DestinationServer> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        dest: Mutex::new(
            Destination::new(cfg, rng::stream(seed, Entity::Destination)).with_throttles(throttles.clone()),
        ),
        throttles,
        clock,
        log,
        external,
    });
    let server = Arc::clone(&shared);
    let task = tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let _ = sock.set_nodelay(true);
            tokio::spawn(serve(sock, Arc::clone(&shared)));
        }
    });
    Ok(DestinationServer {
        addr,
        task,
        shared: server,
    })
}

async fn serve(sock: TcpStream, shared: Arc<Shared>) {
    let (rd, mut wr) = sock.into_split();
    let mut rd = BufReader::new(rd);
    let mut line = String::new();
    loop {
        line.clear();
        match rd.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.trim().is_empty() {
            continue;
        }
        // 1. Stamp the arrival on the run clock, before anything else.
        let t = shared.clock.get().map_or(0, RunClock::now);
        let (pid, mut hold) = parse_request_line(&line);
        // 2. Skip the rest of the head.
        let mut h = String::new();
        loop {
            h.clear();
            match rd.read_line(&mut h).await {
                Ok(0) | Err(_) => return,
                Ok(_) if h.trim().is_empty() => break,
                Ok(_) => {}
            }
        }
        if let Some(x) = &shared.external {
            if !valid_pid(&line, x.processes) {
                {
                    let mut strays = x.strays.lock().expect("strays");
                    if strays.len() < 8 {
                        strays.push(line.trim().to_string());
                    }
                }
                if wr
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            if !line.contains("hold=") {
                hold = x.fetch.sample(&mut x.rng.lock().expect("fetch rng")).0;
            }
        }
        // 3. Decide: the simulator's destination (true limit, 503s).
        let status = shared.dest.lock().expect("destination lock").arrive(Instant(t), 0);
        {
            let mut log = shared.log.lock().expect("event log");
            if shared.external.is_some() {
                log.push(Event::FetchStart { t, pid, thread: 0 });
            }
            log.push(Event::Arrival {
                t,
                pid,
                thread: 0,
                status,
            });
        }
        // 4. Answer after the fetch duration.
        if hold > 0 {
            tokio::time::sleep(Duration::from_nanos(hold)).await;
        }
        let reason = match status {
            200 => "OK",
            429 => "Too Many Requests",
            503 => "Service Unavailable",
            _ => "Status",
        };
        let resp = format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n\r\n");
        let written = wr.write_all(resp.as_bytes()).await.is_ok();
        if shared.external.is_some() && written {
            let t = shared.clock.get().map_or(0, RunClock::now);
            shared.log.lock().expect("event log").push(Event::FetchEnd {
                t,
                pid,
                thread: 0,
                status,
            });
        }
        if !written {
            return;
        }
    }
}

/// `GET /fetch?pid=3&hold=50 HTTP/1.1` -> (3, 50). Missing values are 0.
fn parse_request_line(line: &str) -> (u32, u64) {
    let target = line.split_whitespace().nth(1).unwrap_or("");
    let query = target.split_once('?').map_or("", |q| q.1);
    let mut pid = 0;
    let mut hold = 0;
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("pid", v)) => pid = v.parse().unwrap_or(0),
            Some(("hold", v)) => hold = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    (pid, hold)
}

/// Whether the request line names a process below `processes` (`?pid=N`).
fn valid_pid(line: &str, processes: u32) -> bool {
    let target = line.split_whitespace().nth(1).unwrap_or("");
    let query = target.split_once('?').map_or("", |q| q.1);
    query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("pid="))
        .any(|v| v.parse::<u32>().is_ok_and(|p| p < processes))
}

/// A worker's keep-alive connection to the destination.
#[derive(Debug)]
pub struct DestClient {
    addr: String,
    conn: Option<BufReader<TcpStream>>,
}

impl DestClient {
    /// A client for `addr` (`host:port`); connects on first use.
    pub fn new(addr: &str) -> DestClient {
        DestClient {
            addr: addr.into(),
            conn: None,
        }
    }

    /// Send one fetch request (the arrival happens when it reaches the server).
    pub async fn send(&mut self, pid: u32, hold_ns: u64) -> std::io::Result<()> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.addr).await?;
            s.set_nodelay(true)?;
            self.conn = Some(BufReader::new(s));
        }
        let req = format!("GET /fetch?pid={pid}&hold={hold_ns} HTTP/1.1\r\nHost: dest\r\n\r\n");
        let c = self.conn.as_mut().expect("connected above");
        if let Err(e) = c.get_mut().write_all(req.as_bytes()).await {
            self.conn = None;
            return Err(e);
        }
        Ok(())
    }

    /// Read the response to the request sent; its status.
    pub async fn status(&mut self) -> std::io::Result<u16> {
        let c = self
            .conn
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no request in flight"))?;
        let r = read_response(c).await;
        if r.is_err() {
            self.conn = None;
        }
        r
    }
}

async fn read_response(c: &mut BufReader<TcpStream>) -> std::io::Result<u16> {
    let mut line = String::new();
    if c.read_line(&mut line).await? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "destination closed",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    loop {
        line.clear();
        if c.read_line(&mut line).await? == 0 || line.trim().is_empty() {
            return Ok(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_request_line() {
        assert_eq!(parse_request_line("GET /fetch?pid=3&hold=50 HTTP/1.1\r\n"), (3, 50));
        assert_eq!(parse_request_line("GET / HTTP/1.1"), (0, 0));
    }

    #[tokio::test]
    async fn stamps_and_answers_with_the_limit() {
        let clock = Arc::new(OnceLock::new());
        clock.set(RunClock::new(crate::live::clock::mono_ns())).unwrap();
        let log: EventLog = Arc::default();
        let cfg = DestinationCfg {
            limit: Some(1.0),
            ..Default::default()
        };
        let srv = start(&cfg, Vec::new(), 1, clock, Arc::clone(&log)).await.unwrap();
        let mut c = DestClient::new(&srv.addr.to_string());
        c.send(2, 0).await.unwrap();
        assert_eq!(c.status().await.unwrap(), 200);
        c.send(2, 1_000_000).await.unwrap();
        assert_eq!(c.status().await.unwrap(), 429);
        let evs = log.lock().unwrap().clone();
        assert_eq!(evs.len(), 2);
        assert!(matches!(
            evs[1],
            Event::Arrival {
                pid: 2,
                status: 429,
                ..
            }
        ));
    }
}
