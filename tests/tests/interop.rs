//! gRPC's interop test cases through the cluster, in three pairings:
//!
//! - `rust→rust`: our client (a reference, `static://` registry) → our server (an
//!   `Application` provider);
//! - `python→rust`: a grpcio client (`tests/python/interop_client.py`) → our server;
//! - `rust→python`: our client → a grpcio server (`tests/python/interop_server.py`).
//!
//! The three runs happen once per test binary (the first test to ask runs them); each
//! case is then its own test, which fails when its row has a failure. The table case ×
//! pairing is printed by `case_by_pairing_table`, past the output capture so every run
//! shows it.
//!
//! The Python pairings need `RPC_TEST_PYTHON` (a Python with grpcio and grpcio-tools;
//! `scripts/test.sh` creates `.venv` and sets it, with `RPC_TEST_REQUIRE_PYTHON=1`).
//! Without it, and not required, they are reported as skipped — the only way a cell is
//! skipped. Everything else that keeps a cell from running (a client that does not
//! start, connect, finish within the bound or exit 0; a server that does not start or
//! give its address; a case with no output line) is a broken cell, and fails its case.

mod common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use rpc::registry::MemoryHub;
use rpc_testkit::external::Need;
use rpc_testkit::interop::case::{Case, Verdict, parse_line};
use rpc_testkit::interop::client::{client_config, connect};
use rpc_testkit::interop::procedures;
use rpc_testkit::interop::server;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::{Instant, timeout};

/// The pairings, in the table's column order.
const PAIRINGS: [&str; 3] = ["rust→rust", "python→rust", "rust→python"];

/// What the table does not show: limits of a pairing that make a pass mean less.
const NOTES: &[&str] = &[
    "server_compressed_unary python→rust: grpcio does not show a caller the compressed flag of a message; the Python client checks both calls' payloads, the Rust client also the flag",
    "client_compressed_streaming, server_compressed_streaming: not run; they compress some messages of a stream and not others, and tonic compresses all of a stream's messages or none",
];

/// Bound on one pairing's whole run (process start, every case, stop).
const RUN_BOUND: Duration = Duration::from_secs(120);

/// One cell of the table.
#[derive(Clone, Debug)]
enum Cell {
    Ran(Verdict),
    /// The pairing could not run the case although everything it needs is there (a peer
    /// did not start, hung, crashed or printed nothing for the case): why. A failure.
    Broken(String),
    /// The pairing did not run: Python is not set and not required. Not a failure.
    Skipped(String),
}

impl Cell {
    fn short(&self) -> &'static str {
        match self {
            Cell::Ran(Verdict::Pass) => "pass",
            Cell::Ran(Verdict::Fail(_)) => "FAIL",
            Cell::Ran(Verdict::NotApplicable(_)) => "n/a",
            Cell::Broken(_) => "BROKEN",
            Cell::Skipped(_) => "skipped",
        }
    }

    /// Whether the cell fails its case: a failed verdict or a pairing that could not
    /// run it.
    fn failed(&self) -> bool {
        matches!(self, Cell::Ran(Verdict::Fail(_)) | Cell::Broken(_))
    }

    fn why(&self) -> Option<&str> {
        match self {
            Cell::Ran(Verdict::Pass) => None,
            Cell::Ran(Verdict::Fail(why) | Verdict::NotApplicable(why))
            | Cell::Broken(why)
            | Cell::Skipped(why) => Some(why),
        }
    }
}

/// Every case's cells, one per pairing, plus what the provider showed afterwards.
struct Matrix {
    rows: BTreeMap<Case, [Cell; 3]>,
    /// Calls still in flight on our provider once both clients were done (must be 0:
    /// a cancelled or timed-out stream is released, not leaked).
    provider_in_flight_after: usize,
    /// Our provider's shutdown report after the runs.
    provider_report: rpc::ShutdownReport,
}

fn matrix() -> &'static Matrix {
    static MATRIX: OnceLock<Matrix> = OnceLock::new();
    MATRIX.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        runtime.block_on(run_pairings())
    })
}

async fn run_pairings() -> Matrix {
    common::logs();
    let python = Need::Python.get("interop (the python→rust and rust→python pairings)");
    let hub = MemoryHub::new();
    let mut builder = common::builder("interop-server", &hub, Duration::ZERO);
    server::provide(&mut builder);
    let provider = builder.start().await.expect("the interop provider starts");
    let addr = provider.local_addr().expect("the provider listens");

    let ours = rust_client(&format!("static://{addr}")).await;
    let python_client = match &python {
        Some(python) => python_client(python, addr.port()).await,
        None => skipped("RPC_TEST_PYTHON is not set (scripts/test.sh sets it)"),
    };
    let provider_in_flight_after = settled_in_flight(&provider).await;
    let provider_report = provider.before_shutdown().await;
    let python_server = match &python {
        Some(python) => against_python_server(python).await,
        None => skipped("RPC_TEST_PYTHON is not set (scripts/test.sh sets it)"),
    };

    let mut columns = [ours, python_client, python_server];
    let rows = Case::ALL
        .into_iter()
        .map(|case| {
            let cells = columns.each_mut().map(|column| {
                column
                    .remove(&case)
                    .unwrap_or_else(|| Cell::Broken("the client printed no line for it".into()))
            });
            (case, cells)
        })
        .collect();
    Matrix {
        rows,
        provider_in_flight_after,
        provider_report,
    }
}

type Column = BTreeMap<Case, Cell>;

/// Every case skipped (Python is not set, and not required).
fn skipped(why: &str) -> Column {
    every_case(Cell::Skipped(why.to_owned()))
}

/// Every case broken: the pairing could not run at all.
fn broken(why: &str) -> Column {
    every_case(Cell::Broken(why.to_owned()))
}

fn every_case(cell: Cell) -> Column {
    Case::ALL
        .into_iter()
        .map(|case| (case, cell.clone()))
        .collect()
}

/// Runs every case with our client against the registry at `registry_url`.
async fn rust_client(registry_url: &str) -> Column {
    let run = async {
        let (app, client) = match connect(client_config(registry_url)).await {
            Ok(connected) => connected,
            Err(error) => return broken(&format!("our client did not start: {error}")),
        };
        let mut column = Column::new();
        for case in Case::ALL {
            column.insert(case, Cell::Ran(procedures::run(&client, case).await));
        }
        app.before_shutdown().await;
        column
    };
    timeout(RUN_BOUND, run)
        .await
        .unwrap_or_else(|_| broken("our client did not finish within the bound"))
}

/// Runs every case with the Python client against our server on `port`.
async fn python_client(python: &str, port: u16) -> Column {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/interop_client.py");
    let output = Command::new(python)
        .arg(script)
        .arg(proto::PROTO_DIR)
        .args(["--server_host", "127.0.0.1", "--server_port"])
        .arg(port.to_string())
        .args(["--test_case", "all"])
        .kill_on_drop(true)
        .output();
    match timeout(RUN_BOUND, output).await {
        Err(_) => broken("the Python client did not finish within the bound"),
        Ok(Err(error)) => broken(&format!("the Python client did not start: {error}")),
        Ok(Ok(output)) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !stderr.trim().is_empty() {
                report(format_args!("python interop client stderr:\n{stderr}"));
            }
            if !output.status.success() {
                // A crash (at import, say) would otherwise leave every case without a
                // line; each is then broken with the reason.
                return broken(&format!(
                    "the Python client exited with {}: {}",
                    output.status,
                    stderr.lines().last().unwrap_or("no message")
                ));
            }
            parse_column(&String::from_utf8_lossy(&output.stdout))
        }
    }
}

/// Starts the Python server, runs our client against it, and stops it (by closing its
/// standard input; killed if it does not exit within a bound).
async fn against_python_server(python: &str) -> Column {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/interop_server.py");
    let mut child = match Command::new(python)
        .arg(script)
        .arg(proto::PROTO_DIR)
        .args(["--port", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => return broken(&format!("the Python server did not start: {error}")),
    };
    let Some(stdout) = child.stdout.take() else {
        return broken("the Python server has no stdout");
    };
    let mut lines = BufReader::new(stdout).lines();
    let listening = timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(addr) = line.strip_prefix("listening on ") {
                return Some(addr.trim().to_owned());
            }
        }
        None
    })
    .await;
    let column = match listening {
        Ok(Some(addr)) => rust_client(&format!("static://{addr}")).await,
        _ => broken("the Python server did not report its address within 30 s"),
    };
    drop(child.stdin.take());
    if timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    column
}

fn parse_column(stdout: &str) -> Column {
    stdout
        .lines()
        .filter_map(parse_line)
        .filter_map(|(name, verdict)| Some((name.parse::<Case>().ok()?, Cell::Ran(verdict))))
        .collect()
}

/// The provider's calls in flight, once they settle to 0 or after a bound: a client
/// that cancels resets its stream, and the provider releases the call shortly after.
async fn settled_in_flight(provider: &rpc::Application) -> usize {
    let inbound = provider.lifecycle().inbound();
    let deadline = Instant::now() + Duration::from_secs(5);
    while inbound.current() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    inbound.current()
}

/// Writes to the real stderr, past libtest's capture, so the table shows in every run.
fn report(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Fails the test of `case` when a pairing failed it or could not run it, or when a
/// pairing with our server found a feature missing (ours has every feature the cases
/// need). Only a pairing whose Python is not set, and not required, may skip.
fn check(case: Case) {
    let cells = &matrix().rows[&case];
    let mut problems = Vec::new();
    for (pairing, cell) in PAIRINGS.iter().zip(cells) {
        let ours_lacks_it =
            pairing.ends_with("→rust") && matches!(cell, Cell::Ran(Verdict::NotApplicable(_)));
        if cell.failed() || ours_lacks_it {
            problems.push(format!("{pairing}: {}", cell.why().unwrap_or_default()));
        }
        if let Cell::Skipped(why) = cell {
            report(format_args!("SKIPPED {case} {pairing}: {why}"));
        }
    }
    assert!(problems.is_empty(), "{case}: {problems:#?}");
}

macro_rules! cases {
    ($($name:ident => $case:expr),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check($case);
            }
        )*
    };
}

cases! {
    empty_unary => Case::EmptyUnary,
    large_unary => Case::LargeUnary,
    client_compressed_unary => Case::ClientCompressedUnary,
    server_compressed_unary => Case::ServerCompressedUnary,
    client_streaming => Case::ClientStreaming,
    server_streaming => Case::ServerStreaming,
    ping_pong => Case::PingPong,
    empty_stream => Case::EmptyStream,
    custom_metadata => Case::CustomMetadata,
    status_code_and_message => Case::StatusCodeAndMessage,
    special_status_message => Case::SpecialStatusMessage,
    unimplemented_method => Case::UnimplementedMethod,
    unimplemented_service => Case::UnimplementedService,
    cancel_after_begin => Case::CancelAfterBegin,
    cancel_after_first_response => Case::CancelAfterFirstResponse,
    timeout_on_sleeping_server => Case::TimeoutOnSleepingServer,
}

/// Prints the table case × pairing, with the reason of every cell that is not a pass.
#[test]
fn case_by_pairing_table() {
    let matrix = matrix();
    let mut table = format!("{:<30}", "interop case");
    for pairing in PAIRINGS {
        table += &format!(" {pairing:<13}");
    }
    let mut notes = Vec::new();
    for (case, cells) in &matrix.rows {
        table += &format!("\n{:<30}", case.name());
        for (pairing, cell) in PAIRINGS.iter().zip(cells) {
            table += &format!(" {:<13}", cell.short());
            if let Some(why) = cell.why() {
                notes.push(format!("  {case} {pairing}: {} — {why}", cell.short()));
            }
        }
    }
    notes.extend(NOTES.iter().map(|note| format!("  note: {note}")));
    report(format_args!("{table}\n{}", notes.join("\n")));
    let failed = matrix
        .rows
        .values()
        .flatten()
        .filter(|cell| cell.failed())
        .count();
    assert_eq!(failed, 0, "see the table above");
}

/// After both clients ran every case against it (cancellations and deadlines
/// included), our provider has no call left in flight and shuts down cleanly.
#[test]
fn the_provider_releases_every_call() {
    let matrix = matrix();
    assert_eq!(matrix.provider_in_flight_after, 0);
    let report = &matrix.provider_report;
    assert_eq!(report.exit_code(), 0, "{report}");
}
