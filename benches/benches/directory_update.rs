//! What one registry event costs a consumer that knows 10 000 instances: the time
//! `Directory::apply` takes for a snapshot in which one instance left and one arrived
//! (a rolling deploy's step), and for a snapshot that changed nothing (a registry's
//! repeated or re-sent list). Every snapshot is built before the clock starts and freed
//! after it stops: only the directory's work is timed.
//!
//! Prints one line per shape, `directory_update: shape=… instances=10000 p50_us=…
//! p99_us=… max_us=…` (microseconds over 300 events, after 20 not timed).
//!
//! Run: `cargo bench -p rpc-benches --bench directory_update`.

use std::time::Instant;

use hdrhistogram::Histogram;
use rpc_cluster::{Applied, Directory, DirectoryConfig};
use rpc_core::{Instance, InstanceId, ServiceKey, Snapshot};
use rpc_transport::ChannelOptions;

const INSTANCES: usize = 10_000;
const WARM_UP: usize = 20;
const EVENTS: usize = 300;

/// Instance number `n` of `service`, as a provider on its own host registers it.
fn instance(service: &ServiceKey, n: usize) -> Instance {
    let host = format!("10.{}.{}.{}", n / 62_500, n / 250 % 250, n % 250);
    let mut instance = Instance::new(service.clone(), host.clone(), 20_880)
        .with_metadata("application", "bench-provider")
        .with_metadata("zone", "zone-a");
    instance.id = InstanceId::new(format!("{host}:20880-{n:016x}"));
    instance
}

/// Event `e` of a roll: from `INSTANCES` numbered 0.., instance `e` replaced by
/// instance `INSTANCES + e` (revision `e + 2`).
fn one_replaced(service: &ServiceKey, current: &mut [Instance], e: usize) -> Snapshot {
    current[e] = instance(service, INSTANCES + e);
    Snapshot::new(service.clone(), e as u64 + 2, current.to_vec())
}

/// The same list again at revision `e + 2`.
fn unchanged(service: &ServiceKey, current: &mut [Instance], e: usize) -> Snapshot {
    Snapshot::new(service.clone(), e as u64 + 2, current.to_vec())
}

/// A snapshot maker: the next event's snapshot from the current list.
type Event = fn(&ServiceKey, &mut [Instance], usize) -> Snapshot;

/// What the directory must say it did with each event.
type Expect = fn(Applied) -> bool;

/// Applies the first snapshot of every instance, then `WARM_UP + EVENTS` events made by
/// `event` (each built before its clock starts); the microseconds each took past the
/// warm-up.
fn measure(service: &ServiceKey, event: Event, expect: Expect) -> Histogram<u64> {
    let directory = Directory::new(
        service.clone(),
        DirectoryConfig::default(),
        ChannelOptions::default(),
    );
    let mut current: Vec<Instance> = (0..INSTANCES).map(|n| instance(service, n)).collect();
    directory.apply(Snapshot::new(service.clone(), 1, current.clone()));
    let mut histogram = Histogram::<u64>::new(3).expect("a histogram");
    for e in 0..WARM_UP + EVENTS {
        let snapshot = event(service, &mut current, e);
        // The registry's data is freed after the clock stops: a backend that shares one
        // snapshot among its subscribers frees it once, not per directory.
        let registry_data = snapshot.instances.clone();
        let began = Instant::now();
        let applied = directory.apply(snapshot);
        let took = began.elapsed();
        drop(registry_data);
        assert!(expect(applied), "event {e}: {applied:?}");
        if e >= WARM_UP {
            histogram.record(took.as_micros() as u64).expect("recorded");
        }
    }
    assert_eq!(directory.list().len(), INSTANCES);
    histogram
}

fn main() {
    let service = ServiceKey::new("bench.Service").with_version("1.0.0");
    let shapes: [(&str, Event, Expect); 2] = [
        ("one_replaced", one_replaced, |applied| {
            applied
                == Applied::Changed {
                    added: 1,
                    removed: 1,
                    updated: 0,
                }
        }),
        ("unchanged", unchanged, |applied| {
            applied == Applied::Unchanged
        }),
    ];
    for (shape, event, expect) in shapes {
        let histogram = measure(&service, event, expect);
        println!(
            "directory_update: shape={shape} instances={INSTANCES} p50_us={} p99_us={} max_us={}",
            histogram.value_at_quantile(0.5),
            histogram.value_at_quantile(0.99),
            histogram.max()
        );
    }
}
