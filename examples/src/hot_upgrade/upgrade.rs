//! One upgrade of the running generation: triggered by SIGUSR2 or `POST /upgrade`, and
//! waited for until decided, as the generations' output and pid file show it.

use std::time::Duration;

use lossless_rpc::UpgradeReport;
use rpc_testkit::http;
use tokio::time::Instant;

use super::generation::{Generations, listening_inode};
use super::options::{Options, Trigger};
use super::summary::GenerationRecord;

/// Triggers one upgrade and waits until it is decided (and, when it succeeded, until
/// the old generation has exited): the new generation's record, if any.
pub(super) async fn upgrade_once(
    options: &Options,
    generations: &Generations,
    port: u16,
    bad: bool,
) -> Result<Option<GenerationRecord>, String> {
    let old = generations.current().ok_or("no pid file")?;
    let failed_before = failed_upgrades(&generations.lines());
    trigger(options, generations, old).await?;
    let decided = options.ready_timeout + Duration::from_secs(10);
    if bad {
        let deadline = Instant::now() + decided;
        while failed_upgrades(&generations.lines()) == failed_before {
            if Instant::now() > deadline {
                return Err(format!(
                    "the failed upgrade was not reported within {decided:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        return Ok(None);
    }
    let new = generations.wait_for_pid_change(old, decided).await?;
    let record = GenerationRecord {
        pid: new,
        listening_inode: listening_inode(new, port),
        exit_code: None,
    };
    if generations
        .wait_exit(old, Duration::from_secs(30))
        .await
        .is_none()
    {
        return Err(format!(
            "generation {old} did not exit within 30 s after handing over"
        ));
    }
    Ok(Some(record))
}

/// Starts one upgrade of process `pid`: SIGUSR2, or `POST /upgrade` on its admin
/// endpoint (whose answer comes once the upgrade is decided; the run watches the
/// generations for that, so the answer is only checked for a transport error).
async fn trigger(options: &Options, generations: &Generations, pid: i32) -> Result<(), String> {
    match options.trigger {
        Trigger::Signal => nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGUSR2,
        )
        .map_err(|e| format!("SIGUSR2 to {pid}: {e}")),
        Trigger::Admin => {
            let admin = generations
                .admin_addr()
                .ok_or("the provider printed no admin address")?;
            // Answered once the upgrade is decided: after the check and the new
            // process's start, each bounded by ready_timeout.
            let within = options.ready_timeout * 2 + Duration::from_secs(10);
            tokio::spawn(async move {
                let upgrade = http::request_within(admin, "POST", "/upgrade", None, within);
                if let Err(error) = upgrade.await {
                    eprintln!("hot-upgrade: POST /upgrade to {admin}: {error}");
                }
            });
            Ok(())
        }
    }
}

/// The upgrade reports the generations printed, without repeats.
pub(super) fn upgrade_reports(lines: &[String]) -> Vec<UpgradeReport> {
    let mut reports: Vec<UpgradeReport> = Vec::new();
    for json in lines.iter().filter_map(|l| l.strip_prefix("upgrade ")) {
        if let Ok(report) = serde_json::from_str::<UpgradeReport>(json)
            && !reports.contains(&report)
        {
            reports.push(report);
        }
    }
    reports
}

fn failed_upgrades(lines: &[String]) -> usize {
    upgrade_reports(lines)
        .iter()
        .filter(|r| !r.succeeded())
        .count()
}
