//! The hidden `worker` mode: one live worker process.
//!
//! A worker runs the one worker loop (`crate::worker::Worker`) for real. The process side is
//! the backend's own ([`crate::backend::ProcessSide`], built from the same scenario); only the
//! store side is different: where the simulator calls [`crate::backend::StoreSide::serve`], a
//! worker runs the backend's live adapter ([`crate::live::adapter`]) against PostgreSQL or
//! Redis. So simulator and live runs share one definition of every backend's process side
//! and of the loop, and differ exactly where reality does.
//!
//! A worker process connects to its store, waits for the parent's `go` (the run origin), and
//! runs the [`Driver`]. Every event is stamped on the run clock and written to stdout as a JSON line. An armed
//! kill point makes the worker write its `crash` event and SIGKILL itself right there.

use crate::backend::Backend;
use crate::fault::KillPoint;
use crate::live::adapter::{LiveStore, Open, timeout};
use crate::live::clock::RunClock;
use crate::live::destination::DestClient;
pub use crate::live::driver::{Driver, Fetcher, LiveOut};
use crate::live::proto::{EventMsg, SPEC_ENV, ToParent, ToWorker, WorkerSpec};
use crate::trace::{Event, Sink};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entry point of `pacesim worker`: read the spec, find the backend's live adapter, run;
/// the exit status.
pub fn main(run_id: &str, pid: u32, backends: &dyn crate::live::adapter::Backends) -> i32 {
    let spec: WorkerSpec = match std::env::var(SPEC_ENV)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pacesim worker: bad or missing {SPEC_ENV}: {e}");
            return 2;
        }
    };
    if spec.run_id != run_id || spec.pid != pid {
        eprintln!("pacesim worker: spec is for run {} pid {}", spec.run_id, spec.pid);
        return 2;
    }
    match backends.adapter(&spec.scenario) {
        Some(live) => live.worker_main(spec),
        None => {
            eprintln!(
                "pacesim worker: backend `{}` has no live store side",
                spec.scenario.pacer.backend
            );
            2
        }
    }
}

/// Run one worker process with `backend` and its live store `S`; the exit status.
pub fn main_with<B, S>(spec: WorkerSpec, backend: B) -> i32
where
    B: Backend,
    S: Open<Backend = B> + LiveStore<Op = B::Op, Reply = B::Reply>,
{
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pacesim worker: {e}");
            return 2;
        }
    };
    rt.block_on(async move {
        let armed: Arc<Mutex<Vec<KillPoint>>> = Arc::default();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel();
        {
            let armed = Arc::clone(&armed);
            std::thread::spawn(move || control(armed, go_tx));
        }
        let mut out = Out;
        let mut store = match S::open(&spec, &backend, timeout(&spec.scenario)).await {
            Ok(s) => s,
            Err(e) => {
                out.msg(&ToParent::Fatal { message: e.to_string() });
                return 3;
            }
        };
        // A worker started with the run connects before it reports ready: a store down then
        // is a setup error. A restarted worker (its origin already given) may start during an
        // outage: it goes on, its first operation fails like any other (the link reconnects
        // on each use) and the backend's fallback decides, instead of the whole run aborting.
        if let Err(e) = store.connect().await
            && spec.origin.is_none()
        {
            out.msg(&ToParent::Fatal { message: e.to_string() });
            return 3;
        }
        let origin = match spec.origin {
            Some(o) => o,
            None => {
                out.msg(&ToParent::Ready);
                match go_rx.await {
                    Ok(o) => o,
                    Err(_) => return 3,
                }
            }
        };
        let clock = RunClock::from_parts(origin.0, origin.1);
        clock.wait_origin().await;
        let dest = DestClient::new(&spec.dest);
        let mut d = Driver::new(&spec, &backend, store, dest, clock, out, armed);
        match d.run().await {
            Ok(()) => 0,
            Err(e) => {
                d.out.msg(&ToParent::Fatal { message: e.to_string() });
                3
            }
        }
    })
}

/// Reads the parent's commands on a plain thread; exits the process when the parent goes
/// away (stdin closes).
fn control(armed: Arc<Mutex<Vec<KillPoint>>>, go: tokio::sync::oneshot::Sender<(u64, i64)>) {
    let mut go = Some(go);
    for line in std::io::stdin().lines() {
        let Ok(l) = line else { break };
        match ToWorker::parse(&l) {
            Some(ToWorker::Go(o, w)) => {
                if let Some(g) = go.take() {
                    let _ = g.send((o, w));
                }
            }
            Some(ToWorker::Arm(p)) => armed.lock().expect("armed").push(p),
            None => eprintln!("pacesim worker: unknown command {l:?}"),
        }
    }
    // The parent is gone: no worker outlives its run.
    std::process::exit(4);
}

/// The worker's output: JSON lines on stdout, flushed per line (a line written before a
/// SIGKILL is not lost).
#[derive(Debug)]
pub struct Out;

impl Out {
    fn line(&mut self, s: String) {
        let mut o = std::io::stdout().lock();
        if o.write_all(s.as_bytes())
            .and_then(|_| o.write_all(b"\n"))
            .and_then(|_| o.flush())
            .is_err()
        {
            // The parent is gone.
            std::process::exit(4);
        }
    }
}

impl Sink for Out {
    fn event(&mut self, ev: &Event) {
        self.line(serde_json::to_string(&EventMsg { m: "event", ev }).expect("events serialise"));
    }
}

impl LiveOut for Out {
    fn msg(&mut self, m: &ToParent) {
        self.line(serde_json::to_string(m).expect("messages serialise"));
    }
    fn die(&mut self) {
        // SAFETY: signalling our own process; SIGKILL does not return.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}
