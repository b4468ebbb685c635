//! The stores of one live run: check the server the backend needs, create the run's own
//! schema (PostgreSQL) or key prefix (Redis), and drop them afterwards.

use crate::live::adapter::LiveSpec;
use crate::live::settings::{PgSettings, RedisSettings};
use crate::live::{LiveError, StoreUse, pg, redis as lredis};
use crate::scenario::Scenario;
use std::time::Duration;

/// The stores of one run, and what to clean up.
pub(super) struct Stores {
    pub(super) pg: Option<(PgSettings, String)>,
    pub(super) redis: Option<(RedisSettings, String)>,
    /// The run's id (its Redis lease).
    run_id: String,
    /// Refreshes the run's leases while it lasts.
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    /// Tells the heartbeat to stop (cleanup waits for it before deleting anything).
    stop: tokio::sync::watch::Sender<bool>,
}

/// Who owns a run's schema and keys, for the leases: `PACESIM_OWNER`, else this host's name
/// and the parent's pid.
pub fn owner() -> String {
    std::env::var("PACESIM_OWNER")
        .ok()
        .filter(|o| !o.is_empty())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}:{}", host.trim(), std::process::id())
        })
}

impl Stores {
    pub(super) async fn setup(sc: &Scenario, run_id: &str, live: &dyn LiveSpec) -> Result<Stores, LiveError> {
        Stores::setup_for(run_id, live.store(), live.slots(sc), &live.tables(sc)).await
    }

    /// Set up the store `used` (a schema with `slots` slot rows and the backend's own
    /// `tables`, or a key prefix).
    pub(super) async fn setup_for(
        run_id: &str,
        used: StoreUse,
        slots: u32,
        tables: &[String],
    ) -> Result<Stores, LiveError> {
        let t = Duration::from_secs(3);
        let mut s = Stores {
            pg: None,
            redis: None,
            run_id: run_id.to_string(),
            heartbeat: None,
            stop: tokio::sync::watch::channel(false).0,
        };
        let owner = owner();
        if used == StoreUse::Postgres {
            let (settings, admin) = PgSettings::try_from_env()?.connect_resolving_user(t).await?;
            // the lease table is pacesim's own, or nothing of it is read or written
            pg::ensure_lease_table(&admin).await.map_err(|e| {
                LiveError::Setup(match e {
                    pg::LeaseError::Untrusted(m) => m,
                    e => format!(
                        "the lease table {}: {}",
                        pg::LEASES,
                        crate::live::settings::error_chain(&e)
                    ),
                })
            })?;
            // Schemas left by runs whose lease went stale (SIGKILLed, or their host is gone):
            // never a schema another live run, on any host, still renews.
            if let Ok(orphans) = pg::orphan_schemas(&admin).await {
                for o in orphans {
                    if pg::drop_schema(&admin, &o).await.is_ok() {
                        let _ = pg::drop_lease(&admin, &o).await;
                    }
                }
            }
            let schema = pg::schema_name(run_id);
            pg::take_lease(&admin, &schema, &owner).await.map_err(|e| {
                LiveError::Setup(format!(
                    "taking the lease of schema {schema}: {}",
                    crate::live::settings::error_chain(&e)
                ))
            })?;
            pg::create_schema(&admin, &schema, slots).await.map_err(|e| {
                LiveError::Setup(format!(
                    "creating schema {schema}: {}",
                    crate::live::settings::error_chain(&e)
                ))
            })?;
            if let Err(e) = pg::create_own_tables(&admin, &schema, tables).await {
                // nothing of this run may stay: its schema and lease go now
                let _ = pg::drop_schema(&admin, &schema).await;
                let _ = pg::drop_lease(&admin, &schema).await;
                return Err(LiveError::Setup(format!(
                    "the backend's own tables (Open::tables) in schema {schema}: {}",
                    crate::live::settings::error_chain(&e)
                )));
            }
            s.pg = Some((settings, schema));
        }
        if used == StoreUse::Redis {
            let r = RedisSettings::from_env();
            tokio::task::spawn_blocking({
                let r = r.clone();
                move || r.check(t)
            })
            .await
            .map_err(|e| LiveError::Setup(e.to_string()))??;
            // the lease first, then the keys of runs whose lease expired
            let (r2, id, o) = (r.clone(), run_id.to_string(), owner.clone());
            tokio::task::spawn_blocking(move || {
                let mut c = r2.connect(None, t)?;
                lredis::take_lease(&mut c, &id, &o)?;
                // a failed start leaves no lease behind (each failed run would leak one more)
                lredis::delete_abandoned(&mut c).map(drop).inspect_err(|_| {
                    let _ = lredis::drop_lease(&mut c, &id);
                })
            })
            .await
            .map_err(|e| LiveError::Setup(e.to_string()))?
            .map_err(|e| LiveError::Setup(format!("taking the Redis lease: {e}")))?;
            s.redis = Some((r, lredis::key_prefix(run_id)));
        }
        s.heartbeat = Some(s.start_heartbeat(owner));
        Ok(s)
    }

    /// Renew the run's leases every [`pg::HEARTBEAT`] until [`cleanup`](Self::cleanup) says
    /// stop. A renewal in flight finishes before the task ends (cleanup waits for it), and a
    /// renewal only rewrites a lease that still exists, so none lands after cleanup's delete.
    fn start_heartbeat(&self, owner: String) -> tokio::task::JoinHandle<()> {
        let pg = self.pg.clone();
        let redis = self.redis.as_ref().map(|(r, _)| r.clone());
        let run_id = self.run_id.clone();
        let mut stop = self.stop.subscribe();
        tokio::spawn(async move {
            let mut client = None;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(pg::HEARTBEAT) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                if let Some((settings, schema)) = &pg {
                    if client.is_none() {
                        client = settings.connect(Duration::from_secs(5)).await.ok();
                    }
                    if let Some(c) = &client
                        && pg::renew_lease(c, schema).await.is_err()
                    {
                        client = None;
                    }
                }
                if let Some(r) = &redis {
                    let (r, id, o) = (r.clone(), run_id.clone(), owner.clone());
                    let _ = tokio::task::spawn_blocking(move || {
                        let mut c = r.connect(None, Duration::from_secs(5))?;
                        lredis::renew_lease(&mut c, &id, &o)
                    })
                    .await;
                }
            }
        })
    }

    /// Stop the heartbeat and wait for a renewal in flight (each is bounded by its 5 s
    /// timeouts) before anything is deleted.
    async fn stop_heartbeat(&mut self) {
        let _ = self.stop.send(true);
        if let Some(h) = self.heartbeat.take() {
            // a renewal stuck past its own timeouts can only rewrite a lease that still exists
            let _ = tokio::time::timeout(Duration::from_secs(15), h).await;
        }
    }

    /// Drop the schema and delete the keys; problems are returned, not raised.
    pub(super) async fn cleanup(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        self.stop_heartbeat().await;
        if let Some((settings, schema)) = &self.pg {
            match settings.connect(Duration::from_secs(5)).await {
                Ok(c) => {
                    if let Err(e) = pg::drop_schema(&c, schema).await {
                        warnings.push(format!("dropping schema {schema}: {e}"));
                    } else if let Err(e) = pg::drop_lease(&c, schema).await {
                        warnings.push(format!("dropping the lease of schema {schema}: {e}"));
                    }
                }
                Err(e) => warnings.push(format!("dropping schema {schema}: {e}")),
            }
        }
        if let Some((settings, prefix)) = &self.redis {
            let (s, p, id) = (settings.clone(), prefix.clone(), self.run_id.clone());
            let r = tokio::task::spawn_blocking(move || {
                let mut c = s.connect(None, Duration::from_secs(5))?;
                let n = lredis::delete_prefix(&mut c, &p)?;
                lredis::drop_lease(&mut c, &id).map(|()| n)
            })
            .await;
            match r {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => warnings.push(format!("deleting keys {prefix}*: {e}")),
                Err(e) => warnings.push(format!("deleting keys {prefix}*: {e}")),
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend's own tables ([`crate::live::adapter::Open::tables`]) are created in the
    /// run's schema, unqualified names landing there, and go with it; a failing statement
    /// stops the setup and leaves no schema behind. Needs PostgreSQL (else the loud line).
    #[test]
    fn own_tables_live_in_the_run_schema_and_go_with_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let t = Duration::from_secs(2);
            let admin = match PgSettings::from_env().connect_resolving_user(t).await {
                Ok((s, _)) => s.connect(t).await.unwrap(),
                Err(e) => {
                    use std::io::Write;
                    let _ = writeln!(std::io::stderr(), "LIVE TESTS NOT RUN (own tables): {e}");
                    return;
                }
            };
            let exists = |schema: String| {
                let admin = &admin;
                async move {
                    admin
                        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
                        .await
                        .unwrap()
                        .is_some()
                }
            };
            let tables = vec![
                "CREATE TABLE log (at timestamptz NOT NULL, who int4 NOT NULL)".to_string(),
                "INSERT INTO log VALUES (clock_timestamp(), 7)".to_string(),
            ];
            let run = crate::live::runner::new_run_id();
            let mut s = Stores::setup_for(&run, StoreUse::Postgres, 1, &tables).await.unwrap();
            let schema = s.pg.as_ref().unwrap().1.clone();
            let who: i32 = admin
                .query_one(&format!("SELECT who FROM {}.log", pg::quote_ident(&schema)), &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(who, 7);
            assert!(s.cleanup().await.is_empty());
            assert!(
                !exists(schema).await,
                "the schema, with the backend's table, is dropped"
            );

            let bad = vec![tables[0].clone(), "INSERT INTO nowhere VALUES (1)".to_string()];
            let run = crate::live::runner::new_run_id();
            let e = Stores::setup_for(&run, StoreUse::Postgres, 1, &bad)
                .await
                .err()
                .unwrap();
            assert!(
                e.to_string().contains("Open::tables") && e.to_string().contains("nowhere"),
                "{e}"
            );
            assert!(!exists(pg::schema_name(&run)).await, "a failed setup leaves no schema");
        });
    }
}
