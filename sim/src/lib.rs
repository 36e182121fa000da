//! # lossless-rpc-sim: the fleet simulator
//!
//! Providers and consumers run as simulated hosts of [turmoil] in one process, each the
//! framework's real `Application` — cluster, filters, transport, lifecycle and
//! shutdown — on turmoil's network (through the transport's `NetworkStack` seam) and a
//! simulated registry (`registry.rs`). A seed draws a schedule of deploys and faults
//! (`schedule/`), the driver carries it out at simulated times (`driver.rs`), the
//! hosts record every call and execution in a ledger (`ledger.rs`), and the invariants
//! are checked on it (`invariants.rs`). At fleet scale (`fleet/`), consumers — real
//! `Application`s — run one after another through a roll of thousands of stand-in
//! providers decided beforehand.
//!
//! `cargo test -p lossless-rpc-sim --release --test schedules -- --schedules 1000` runs
//! seeds 0..1000; `-- --seed N` runs one and prints its schedule, ledger summary and
//! violations. See docs/simulator.md.

pub mod driver;
pub mod fleet;
pub mod generations;
pub mod hosts;
pub mod invariants;
pub mod ledger;
pub mod network;
pub mod registry;
pub mod schedule;

pub use driver::{Overrides, RunOutcome, run};
pub use schedule::Schedule;
