//! The consumer process of the lab's tests (`tests/lab_nacos.rs`): a consumer of
//! `echo.Echo` configured by the file its first argument names, run inside a host of the
//! lab (`ip netns exec`), sending the lab's load (`rpc_tests::lab_load`) at the rate its
//! second argument gives. A process, not a thread of the test, where a registry client
//! keeps connections on a runtime of its own for the whole process (nacos-sdk): each
//! process's connections then leave from its own host.
//!
//! It speaks to the test in lines:
//! - out `pid N` once started; `listed A,B` each time the set its directory lists
//!   changes (the first time too);
//! - in `phase N`: the calls sent from now on are tallied under phase N; the end of its
//!   input ends the load;
//! - out, at the end: `tally {…}` for each phase in order (`Tally::to_line`), `stats …`,
//!   and `shutdown REPORT`; it exits with the report's code.

use std::io::Write;
use std::time::Duration;

use proto::echo::echo_client::EchoClient;
use rpc::{Application, Config};
use rpc_tests::lab_load::{listed, phases_at};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

/// How often the directory is looked at for a change of what it lists.
const LOOK_EVERY: Duration = Duration::from_millis(20);

fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

async fn consume() -> i32 {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(rate)) = (args.next(), args.next().and_then(|r| r.parse().ok())) else {
        eprintln!("usage: lab_echo_consumer CONFIG RATE");
        return 2;
    };
    let config = match Config::from_file(&path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("lab_echo_consumer: {error}");
            return 2;
        }
    };
    let mut builder = Application::builder(config);
    let client = EchoClient::new(builder.reference("echo.Echo"));
    let app = match builder.start().await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("lab_echo_consumer: {error}");
            return error.exit_code();
        }
    };
    say(&format!("pid {}", std::process::id()));
    let directory = app.references()[0].directory().clone();
    let reporting = tokio::spawn(async move {
        let mut last = None;
        loop {
            let now = listed(&directory);
            if last.as_ref() != Some(&now) {
                say(&format!(
                    "listed {}",
                    Vec::from_iter(now.iter().cloned()).join(",")
                ));
                last = Some(now);
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    });
    let tallies = phases_at(&client, rate, phases_from_stdin()).await;
    reporting.abort();
    for tally in &tallies {
        say(&format!("tally {}", tally.to_line()));
    }
    say(&format!("stats {:?}", app.references()[0].stats()));
    let report = app.before_shutdown().await;
    say(&format!("shutdown {report}"));
    report.exit_code()
}

/// The phase the test last named on standard input; closed at its end.
fn phases_from_stdin() -> watch::Receiver<usize> {
    let (phase, phases) = watch::channel(0);
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match line.strip_prefix("phase ").map(str::parse) {
                Some(Ok(next)) => {
                    phase.send_replace(next);
                }
                _ => eprintln!("lab_echo_consumer: not a phase: {line}"),
            }
        }
    });
    phases
}

#[tokio::main]
async fn main() {
    let code = consume().await;
    std::process::exit(code);
}
