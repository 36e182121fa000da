//! The provider of the demonstration, run as its own process (`hot-upgrade provider`):
//! a greeter whose server streams last, upgraded in place again and again. Every
//! generation inherits stdout, on which it prints what the parent reads:
//! `listening on ADDR`, `admin on ADDR`, `pid N`, `upgrade JSON` (each upgrade decided, and the final
//! report of a generation that handed over) and `shutdown REPORT`.
//!
//! How a new generation behaves comes from a file the demonstration writes before each
//! upgrade (`good`, `fail`, `hang`): standing in for the new build installed on disk.

use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use lossless_rpc::lifecycle::process::Role;
use lossless_rpc::{Application, Config};
use proto::feed::feed_server::FeedServer;
use proto::greeter::greeter_server::{Greeter, GreeterServer};
use proto::greeter::{HelloReply, HelloRequest};
use rpc_testkit::feed::FeedProvider;
use tonic::{Request, Response, Status};

/// Interval between the replies of a server stream.
pub const STREAM_INTERVAL: Duration = Duration::from_millis(100);

/// The demonstration's greeter: `SayHelloStream` sends `count` replies, one every
/// [`STREAM_INTERVAL`], so a stream lasts as long as the client asks.
#[derive(Clone, Copy, Debug, Default)]
pub struct SlowStreams;

#[tonic::async_trait]
impl Greeter for SlowStreams {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply {
            message: format!("Hello, {}!", request.into_inner().name),
            provider: std::process::id().to_string(),
        }))
    }

    type SayHelloStreamStream = Pin<Box<dyn Stream<Item = Result<HelloReply, Status>> + Send>>;

    async fn say_hello_stream(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<Self::SayHelloStreamStream>, Status> {
        let count = request.into_inner().count.clamp(1, 1000);
        let pid = std::process::id().to_string();
        let replies = futures_util::stream::unfold(0u32, move |n| {
            let pid = pid.clone();
            async move {
                if n == count {
                    return None;
                }
                tokio::time::sleep(STREAM_INTERVAL).await;
                let reply = HelloReply {
                    message: format!("#{}", n + 1),
                    provider: pid,
                };
                Some((Ok(reply), n + 1))
            }
        });
        Ok(Response::new(Box::pin(replies)))
    }
}

/// Prints one line on stdout (ignoring a closed pipe: the parent may be gone).
fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// The body of the provider process: returns its exit code.
pub async fn run_provider(config: &Path, behaviour: &Path) -> i32 {
    let config = match Config::from_file(config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("hot-upgrade provider: {error}");
            return 2;
        }
    };
    let mut gate = None;
    if Role::current() == Role::Successor {
        match std::fs::read_to_string(behaviour)
            .unwrap_or_default()
            .trim()
        {
            gated @ ("gate-fails" | "gate-hangs") => gate = Some(gated.to_owned()),
            "fail" => {
                eprintln!(
                    "hot-upgrade provider: this build is broken (--child fail): exiting before ready"
                );
                return 1;
            }
            "hang" => {
                eprintln!("hot-upgrade provider: this build hangs at start-up (--child hang)");
                std::future::pending::<()>().await;
            }
            _ => {}
        }
    }
    let mut builder = Application::builder(config);
    if let Some(gate) = gate {
        // After the services serve, before registration: what the new process
        // accepts meanwhile is the question (issue 36).
        builder.readiness_gate(move || async move {
            eprintln!("hot-upgrade provider: this build's readiness gate {gate} (--child {gate})");
            if gate == "gate-hangs" {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            Err("the warm-up cannot reach what it needs".into())
        });
    }
    builder.service(GreeterServer::new(SlowStreams));
    // The long streams of `--streams resumable`, moved at every hand-over.
    builder.service(FeedServer::new(FeedProvider::moving(
        std::process::id().to_string(),
    )));
    let app = match builder.start().await {
        Ok(app) => app,
        Err(error) => {
            eprintln!("hot-upgrade provider: {error}");
            return error.exit_code();
        }
    };
    if let Some(addr) = app.local_addr() {
        say(&format!("listening on {addr}"));
    }
    if let Some(addr) = app.admin_addr() {
        say(&format!("admin on {addr}"));
    }
    say(&format!("pid {}", std::process::id()));
    report_upgrades(&app);
    let report = app.wait().await;
    if let Some(last) = app.lifecycle().last_upgrade()
        && report.handed_over_to.is_some()
    {
        say(&format!(
            "upgrade {}",
            serde_json::to_string(&last).unwrap_or_default()
        ));
    }
    say(&format!("shutdown {report}"));
    report.exit_code()
}

/// Prints each upgrade's report once it is decided (failed ones included).
fn report_upgrades(app: &Application) {
    let lifecycle = app.lifecycle().clone();
    tokio::spawn(async move {
        let mut told = None;
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let last = lifecycle.last_upgrade();
            if last.is_some() && last != told {
                if let Some(report) = &last {
                    say(&format!(
                        "upgrade {}",
                        serde_json::to_string(report).unwrap_or_default()
                    ));
                }
                told = last;
            }
        }
    });
}
