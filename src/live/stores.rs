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
}

impl Stores {
    pub(super) async fn setup(sc: &Scenario, run_id: &str, live: &dyn LiveSpec) -> Result<Stores, LiveError> {
        let used = live.store();
        let t = Duration::from_secs(3);
        let mut s = Stores { pg: None, redis: None };
        if used == StoreUse::Postgres {
            let (settings, admin) = PgSettings::try_from_env()?.connect_resolving_user(t).await?;
            // Schemas left by runs whose parent was SIGKILLed (and so could not clean up).
            if let Ok(orphans) = pg::orphan_schemas(&admin).await {
                for o in orphans {
                    let _ = pg::drop_schema(&admin, &o).await;
                }
            }
            let schema = pg::schema_name(run_id);
            pg::create_schema(&admin, &schema, live.slots(sc)).await.map_err(|e| {
                LiveError::Setup(format!(
                    "creating schema {schema}: {}",
                    crate::live::settings::error_chain(&e)
                ))
            })?;
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
            s.redis = Some((r, lredis::key_prefix(run_id)));
        }
        Ok(s)
    }

    /// Drop the schema and delete the keys; problems are returned, not raised.
    pub(super) async fn cleanup(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some((settings, schema)) = &self.pg {
            match settings.connect(Duration::from_secs(5)).await {
                Ok(c) => {
                    if let Err(e) = pg::drop_schema(&c, schema).await {
                        warnings.push(format!("dropping schema {schema}: {e}"));
                    }
                }
                Err(e) => warnings.push(format!("dropping schema {schema}: {e}")),
            }
        }
        if let Some((settings, prefix)) = &self.redis {
            let (s, p) = (settings.clone(), prefix.clone());
            let r = tokio::task::spawn_blocking(move || {
                let mut c = s.connect(None, Duration::from_secs(5))?;
                lredis::delete_prefix(&mut c, &p)
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
