//! The fault proxy: a small TCP proxy on loopback, one listener per worker, between the
//! workers and a store. The parent drives it through [`ProxyState`] to make store faults real:
//!
//! | state                  | what a worker's connection sees                               |
//! |------------------------|---------------------------------------------------------------|
//! | outage `refuse`        | existing connections closed; new ones accepted and closed at once |
//! | outage `timeout`       | bytes held (not forwarded) until the window ends: the client times out |
//! | partitioned pid        | as `timeout`, for that worker's listener only                 |
//! | added latency          | each chunk, each direction, delayed by a draw from the distribution |
//!
//! A store restart is an outage `refuse` (sessions, and the advisory locks they hold, end).

use crate::dist::Dist;
use crate::fault::OutageMode;
use crate::rng::{self, Entity, Rng};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does now. Overlapping windows compose (each is a list entry).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyState {
    /// Outage windows open now (the last one opened decides the mode).
    pub outages: Vec<OutageMode>,
    /// Added one-way latency windows open now (their draws add up).
    pub added: Vec<Dist>,
    /// Workers cut off from the store.
    pub partitioned: Vec<u32>,
}

impl ProxyState {
    fn refusing(&self) -> bool {
        self.outages.last() == Some(&OutageMode::Refuse)
    }
    fn holding(&self, pid: u32) -> bool {
        self.outages.last() == Some(&OutageMode::Timeout) || self.partitioned.contains(&pid)
    }
}

/// The parent's handle on a running proxy.
#[derive(Debug)]
pub struct Proxy {
    /// Listener address of each worker's link, by pid.
    pub addrs: Vec<SocketAddr>,
    state: watch::Sender<ProxyState>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Proxy {
    /// Start one listener per worker (`n`) forwarding to `upstream`.
    pub async fn start(upstream: (String, u16), n: u32, seed: u64) -> std::io::Result<Proxy> {
        let (tx, rx) = watch::channel(ProxyState::default());
        let upstream = Arc::new(upstream);
        let mut addrs = Vec::new();
        let mut tasks = Vec::new();
        for pid in 0..n {
            let l = TcpListener::bind("127.0.0.1:0").await?;
            addrs.push(l.local_addr()?);
            let rx = rx.clone();
            let up = Arc::clone(&upstream);
            tasks.push(tokio::spawn(async move {
                let mut k: u32 = 0;
                loop {
                    let Ok((sock, _)) = l.accept().await else {
                        continue;
                    };
                    k = k.wrapping_add(1);
                    let rng = rng::stream(seed ^ 0x7072_6f78_7900_0000, Entity::Process { pid, incarnation: k });
                    tokio::spawn(link(sock, Arc::clone(&up), pid, rx.clone(), rng));
                }
            }));
        }
        Ok(Proxy {
            addrs,
            state: tx,
            tasks,
        })
    }

    /// Change the state.
    pub fn update(&self, f: impl FnOnce(&mut ProxyState)) {
        self.state.send_modify(f);
    }
}

/// One proxied connection, until either side closes or an outage refuses it.
async fn link(client: TcpStream, up: Arc<(String, u16)>, pid: u32, mut st: watch::Receiver<ProxyState>, rng: Rng) {
    if st.borrow().refusing() {
        return; // accepted and closed at once: the client sees a refused connection
    }
    // A held link does not even reach the store until the window ends.
    while st.borrow().holding(pid) {
        if st.changed().await.is_err() {
            return;
        }
        if st.borrow().refusing() {
            return;
        }
    }
    let Ok(server) = TcpStream::connect((up.0.as_str(), up.1)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let rng = std::sync::Mutex::new(rng);
    let mut refused = st.clone();
    let watch_refuse = async move {
        loop {
            if refused.borrow().refusing() {
                return;
            }
            if refused.changed().await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        _ = pump(cr, sw, pid, st.clone(), &rng) => {}
        _ = pump(sr, cw, pid, st, &rng) => {}
        _ = watch_refuse => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    pid: u32,
    mut st: watch::Receiver<ProxyState>,
    rng: &std::sync::Mutex<Rng>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while st.borrow().holding(pid) {
            if st.changed().await.is_err() {
                return;
            }
        }
        let delay: u64 = {
            let s = st.borrow();
            let mut r = rng.lock().expect("proxy rng");
            s.added.iter().map(|d| d.sample(&mut r).0).sum()
        };
        if delay > 0 {
            tokio::time::sleep(Duration::from_nanos(delay)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn forwards_delays_and_refuses() {
        // an echo server
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = echo.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let p = Proxy::start(("127.0.0.1".into(), port), 1, 1).await.unwrap();
        let mut c = TcpStream::connect(p.addrs[0]).await.unwrap();
        c.write_all(b"hi").await.unwrap();
        let mut b = [0u8; 2];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"hi");
        p.update(|s| s.added.push(Dist::constant(crate::time::Nanos::from_millis(30))));
        let t = std::time::Instant::now();
        c.write_all(b"yo").await.unwrap();
        c.read_exact(&mut b).await.unwrap();
        assert!(t.elapsed() >= Duration::from_millis(55), "{:?}", t.elapsed());
        p.update(|s| {
            s.added.clear();
            s.outages.push(OutageMode::Refuse);
        });
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(2), c.read_to_end(&mut rest)).await;
        assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "{n:?}");
    }
}
