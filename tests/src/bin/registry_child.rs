//! A registry client in a process of its own, for the tests that need one to die or
//! pause: `tests/registry_conformance.rs`'s rule 3 (a dead provider disappears by
//! itself) kills it with SIGKILL, so it never unregisters; `tests/upgrade_registry.rs`
//! pauses it (SIGSTOP) as an old generation during a hand-over, then tells it what to do.
//!
//! Its one argument describes what to register: `{"url": ..., "instance": ...,
//! "also": [...]}` (`also`: more instances, optional) in the registry at `url`. It prints
//! `REGISTERED` once they are, then obeys the lines of its standard input: `release`
//! (gives `instance` up: `Registry::release`, then prints `RELEASED`) and `close` (closes
//! the client, prints `CLOSED` and exits). At the end of its input it waits to be killed.
//! Bounded to 60 s, so it never outlives a crashed parent for long.

use std::time::Duration;

use rpc_core::Instance;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = std::env::args()
        .nth(1)
        .ok_or("usage: registry_child '{\"url\": ..., \"instance\": ..., \"also\": [...]}'")?;
    let spec: serde_json::Value = serde_json::from_str(&spec)?;
    let url = spec["url"].as_str().ok_or("spec: no `url`")?;
    let instance: Instance = serde_json::from_value(spec["instance"].clone())?;
    let also: Vec<Instance> = match spec.get("also") {
        Some(also) => serde_json::from_value(also.clone())?,
        None => Vec::new(),
    };
    let registry = rpc_registry::connect(url).await?;
    for instance in std::iter::once(&instance).chain(&also) {
        registry.register(instance).await?;
    }
    println!("REGISTERED");
    let obey = async {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await? {
            match line.trim() {
                "release" => {
                    registry.release(&instance).await?;
                    println!("RELEASED");
                }
                "close" => {
                    registry.close().await?;
                    println!("CLOSED");
                    return Ok(true);
                }
                other => return Err(format!("unknown command `{other}`").into()),
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(false)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    match tokio::time::timeout_at(deadline, obey).await {
        Ok(Ok(true)) => return Ok(()),
        Ok(Err(error)) => return Err(error),
        Ok(Ok(false)) | Err(_) => {}
    }
    // No more commands: live until killed (or the bound).
    tokio::time::sleep_until(deadline).await;
    Ok(())
}
