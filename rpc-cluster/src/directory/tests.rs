use std::time::Duration;

use rpc_core::Instance;

use super::*;

fn directory() -> Directory {
    Directory::new(
        ServiceKey::new("t.S"),
        DirectoryConfig::default(),
        ChannelOptions::default(),
    )
}

fn instance(port: u16) -> Instance {
    let mut instance = Instance::new(ServiceKey::new("t.S"), "127.0.0.1", port);
    instance.id = InstanceId::new(format!("id-{port}"));
    // The same registration every time, as a registry would return it.
    instance.start_time_ms = 1;
    instance
}

fn snapshot(revision: u64, ports: &[u16]) -> Snapshot {
    Snapshot::new(
        ServiceKey::new("t.S"),
        revision,
        ports.iter().map(|&p| instance(p)).collect(),
    )
}

fn ports(directory: &Directory) -> Vec<u16> {
    let mut ports: Vec<u16> = directory
        .list()
        .invokers()
        .iter()
        .map(|i| i.instance().port)
        .collect();
    ports.sort_unstable();
    ports
}

#[tokio::test]
async fn repeated_or_unchanged_snapshots_cause_no_churn() {
    let directory = directory();
    directory.apply(snapshot(1, &[1, 2]));
    let before = directory.list();
    // Connect both, as if picked.
    for invoker in before.invokers() {
        invoker.channel();
    }
    assert_eq!(directory.apply(snapshot(1, &[1, 2])), Applied::Stale);
    assert_eq!(directory.apply(snapshot(2, &[2, 1])), Applied::Unchanged);
    let after = directory.list();
    assert!(
        Arc::ptr_eq(&before, &after),
        "same list, same invokers, same channels"
    );
    assert!(
        after
            .invokers()
            .iter()
            .all(|i| i.is_connected() && !i.is_removed())
    );
}

#[tokio::test]
async fn an_instance_listed_twice_keeps_its_one_invoker() {
    let directory = directory();
    directory.apply(snapshot(1, &[1, 2]));
    let before = directory.list();
    assert_eq!(directory.apply(snapshot(2, &[1, 2, 1])), Applied::Unchanged);
    assert!(
        Arc::ptr_eq(&before, &directory.list()),
        "no new invoker for the repeat"
    );
    assert_eq!(ports(&directory), [1, 2]);
}

#[tokio::test]
async fn older_snapshots_never_overwrite_newer_ones() {
    let directory = directory();
    directory.apply(snapshot(5, &[1, 2, 3]));
    assert_eq!(directory.apply(snapshot(4, &[1])), Applied::Stale);
    assert_eq!(ports(&directory), [1, 2, 3]);
    assert!(matches!(
        directory.apply(snapshot(6, &[1])),
        Applied::Changed { removed: 2, .. }
    ));
    assert_eq!(ports(&directory), [1]);
}

#[tokio::test]
async fn weight_changes_update_in_place() {
    let directory = directory();
    directory.apply(snapshot(1, &[1]));
    let invoker = directory.list().invokers()[0].clone();
    let mut heavier = snapshot(2, &[1]);
    heavier.instances = vec![instance(1).with_weight(7)].into();
    assert_eq!(
        directory.apply(heavier),
        Applied::Changed {
            added: 0,
            removed: 0,
            updated: 1
        }
    );
    assert!(Arc::ptr_eq(&invoker, &directory.list().invokers()[0]));
    assert_eq!(invoker.weight(), 7);
}

/// A provider taken offline while its registry could not be written keeps its entry;
/// its online then writes the entry with a higher `online-revision`. That change is
/// what lifts the closing mark its responses set: the consumer picks it again at once,
/// not after `closing_invoker_expire_time`. An unchanged listing lifts nothing.
#[tokio::test]
async fn a_changed_registration_lifts_the_closing_mark() {
    let directory = directory();
    directory.apply(snapshot(1, &[1, 2]));
    let invoker = directory.list().invokers()[0].clone();
    let now = Instant::now();
    assert!(
        invoker
            .health()
            .mark_closing(now, now + Duration::from_secs(30))
    );
    assert_eq!(directory.apply(snapshot(2, &[2, 1])), Applied::Unchanged);
    assert!(invoker.is_closing(Instant::now()), "nothing new was listed");
    let mut online = snapshot(3, &[1, 2]);
    let mut anew = instance(1);
    anew.metadata
        .insert("online-revision".to_owned(), "1".to_owned());
    online.instances = vec![anew, instance(2)].into();
    directory.apply(online);
    assert!(Arc::ptr_eq(&invoker, &directory.list().invokers()[0]));
    assert!(!invoker.is_closing(Instant::now()), "the mark is lifted");
}

#[tokio::test]
async fn empty_protection_keeps_instances_only_on_a_fault() {
    let directory = directory();
    directory.apply(snapshot(1, &[1, 2]));
    assert_eq!(
        directory.apply(snapshot(2, &[]).degraded()),
        Applied::EmptyProtected
    );
    assert_eq!(ports(&directory), [1, 2]);
    // The registry says the last instance left: applied.
    assert!(matches!(
        directory.apply(snapshot(3, &[])),
        Applied::Changed { removed: 2, .. }
    ));
    assert!(ports(&directory).is_empty());
}

#[tokio::test]
async fn empty_protection_can_be_switched_off() {
    let config = DirectoryConfig {
        empty_protection: false,
        ..DirectoryConfig::default()
    };
    let directory = Directory::new(ServiceKey::new("t.S"), config, ChannelOptions::default());
    directory.apply(snapshot(1, &[1]));
    assert!(matches!(
        directory.apply(snapshot(2, &[]).degraded()),
        Applied::Changed { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_removed_instance_stops_being_picked_at_once_but_closes_after_its_calls() {
    let directory = directory();
    directory.apply(snapshot(1, &[1, 2]));
    let leaving = directory.list().invokers()[0].clone();
    leaving.channel();
    let call = leaving.start_call();
    directory.apply(snapshot(2, &[2]));
    assert_eq!(ports(&directory), [2]);
    assert!(leaving.is_removed());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !leaving.destroyed().is_cancelled(),
        "its call is still in flight"
    );
    drop(call);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(leaving.destroyed().is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_removed_busy_instance_is_destroyed_after_the_expire_time() {
    let directory = directory();
    directory.apply(snapshot(1, &[1]));
    let leaving = directory.list().invokers()[0].clone();
    leaving.channel();
    let _stuck = leaving.start_call();
    directory.apply(snapshot(2, &[]));
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(!leaving.destroyed().is_cancelled());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(leaving.destroyed().is_cancelled());
}

#[tokio::test]
async fn wait_for_provider_ends_when_one_is_known() {
    let directory = Arc::new(directory());
    let waiter = tokio::spawn({
        let directory = directory.clone();
        async move { directory.wait_for_provider().await }
    });
    directory.apply(snapshot(1, &[9]));
    waiter.await.unwrap();
}
