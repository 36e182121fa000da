//! Heap held by a directory of 10 000 known instances that were never picked.
//! Target: under 20 KiB per instance — nothing (connection, task, buffer) is created
//! before an instance is first picked.

use rpc_cluster::{Directory, DirectoryConfig};
use rpc_core::{Instance, InstanceId, ServiceKey, Snapshot};
use rpc_transport::ChannelOptions;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const INSTANCES: usize = 10_000;

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let base = dhat::HeapStats::get().curr_bytes;
    let service = ServiceKey::new("bench.Service").with_version("1.0.0");
    let snapshot = Snapshot::new(
        service.clone(),
        1,
        (0..INSTANCES)
            .map(|i| {
                let mut instance = Instance::new(
                    service.clone(),
                    format!("10.1.{}.{}", i / 250, i % 250),
                    20_880,
                )
                .with_metadata("application", "bench-provider")
                .with_metadata("zone", "zone-a");
                instance.id =
                    InstanceId::new(format!("10.1.{}.{}:20880-{i:016x}", i / 250, i % 250));
                instance
            })
            .collect(),
    );
    let snapshot_bytes = dhat::HeapStats::get().curr_bytes - base;

    let directory = Directory::new(
        service,
        DirectoryConfig::default(),
        ChannelOptions::default(),
    );
    directory.apply(snapshot);
    // The snapshot is gone (apply consumed it); what is left is the directory.
    let held = (dhat::HeapStats::get().curr_bytes - base) as f64;

    let list = directory.list();
    let connected = list.invokers().iter().filter(|i| i.is_connected()).count();
    let per_instance = held / INSTANCES as f64;
    println!(
        "snapshot of {INSTANCES} instances (registry data, freed by apply): {snapshot_bytes:>10} bytes"
    );
    println!("directory holding {INSTANCES} instances:                        {held:>10.0} bytes");
    println!(
        "per instance:                                                {per_instance:>10.0} bytes ({:.2} KiB; target < 20 KiB)",
        per_instance / 1024.0
    );
    println!("instances with a channel before any pick:                   {connected:>10}");
    println!("directory_memory: per_instance_bytes={per_instance:.0} connected={connected}");
}
