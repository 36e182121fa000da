//! The rules of issue 36: an entry belongs to the generation that wrote it last. A hot
//! upgrade's new generation registers the same instance (same id, same key) the old one
//! holds; from then on nothing the old generation's client does — renewing a lost lease
//! or session, `unregister`, `release`, `close` — takes the entry back or removes it.
//!
//! The two generations are two clients of one scope; the old one reaches the server
//! through a [`Proxy`], so that its session can be lost (its connection cut for longer
//! than its short lease or session) and restored. It also holds an instance of its own,
//! `own`, of a service whose keys sort after the handed one's: when `own` is listed again
//! after the cut, the old client has written its registrations again, in key order
//! (etcd's renewal and ZooKeeper's restore go through them in order), so whatever it
//! did to the handed entry is done.

use std::sync::Arc;
use std::time::Duration;

use rpc_core::{Instance, Registry};
use tokio::time::Instant;

use crate::backends::{Fixture, Kind, Presence, report};
use crate::proxy::Proxy;
use crate::{REREGISTER_BOUND, Watch, close, ids, instance, ms};

/// nacos-sdk runs its redo tasks every 3 s: within a window longer than one period
/// after a reconnection, any task it still had has run.
const SDK_REDO_WINDOW: Duration = Duration::from_secs(4);

/// An old generation, its successor holding the instance it handed over, and a
/// consumer watching both services.
struct Generations {
    old: Arc<dyn Registry>,
    new: Arc<dyn Registry>,
    consumer: Arc<dyn Registry>,
    /// Between the old generation and the server (network backends).
    proxy: Option<Proxy>,
    /// The instance the successor took over.
    handed: Instance,
    /// An instance only the old generation holds.
    own: Instance,
    watch_handed: Watch,
    watch_own: Watch,
    /// Who held `handed` on the server once the successor registered it.
    successor: i64,
}

/// The old generation registers `handed` and `own`; the successor registers `handed`.
async fn hand_over(f: &Fixture) -> Generations {
    let proxy = match f.can_cut() {
        true => Some(Proxy::start(f.upstream()).await),
        false => None,
    };
    let old = match &proxy {
        Some(proxy) => f.client_via(proxy.addr(), Presence::Short).await,
        None => f.client(Presence::Short).await,
    };
    let new = f.client(Presence::Short).await;
    let consumer = f.client(Presence::Short).await;
    // `handed` sorts before `own` (see the module documentation).
    let handed = instance(&f.service("handed"), 27101);
    let own = instance(&f.service("own"), 27102);
    old.register(&handed)
        .await
        .expect("the old generation registers");
    old.register(&own)
        .await
        .expect("the old generation registers its own");
    let mut watch_handed = Watch::new(&consumer, &handed.service).await;
    let mut watch_own = Watch::new(&consumer, &own.service).await;
    watch_handed.until(&[&handed], f.propagation_bound()).await;
    watch_own.until(&[&own], f.propagation_bound()).await;
    let before = f.owner(&handed).await.expect("the old generation's entry");

    new.register(&handed)
        .await
        .expect("the successor registers the same instance");
    let successor = f.owner(&handed).await.expect("the successor's entry");
    if matches!(f.kind, Kind::Etcd | Kind::ZooKeeper) {
        assert_ne!(
            before, successor,
            "the registration moved the entry to the successor"
        );
    }
    Generations {
        old,
        new,
        consumer,
        proxy,
        handed,
        own,
        watch_handed,
        watch_own,
        successor,
    }
}

impl Generations {
    /// Cuts the old generation's connection until the server dropped its session (its
    /// `own` instance is gone), restores it, and waits until it registered again (`own`
    /// is back). How long that took.
    async fn lose_and_restore_the_old_session(&mut self, f: &Fixture) -> Duration {
        let proxy = self.proxy.as_ref().expect("a network backend");
        let cut = Instant::now();
        proxy.cut();
        self.watch_own.until(&[], f.expiry_bound()).await;
        proxy.restore();
        self.watch_own.until(&[&self.own], REREGISTER_BOUND).await;
        cut.elapsed()
    }

    /// The successor still holds the handed entry on the server.
    async fn assert_successor_holds(&self, f: &Fixture, when: &str) {
        assert_eq!(
            f.owner(&self.handed).await,
            Some(self.successor),
            "the successor's entry {when}"
        );
    }

    /// The successor's close still withdraws the entry (it was the successor's), and
    /// no snapshot the consumer saw lacked it before.
    async fn finish(mut self, f: &Fixture) {
        let handed = self.handed.id.to_string();
        self.watch_handed.collect_for(Duration::ZERO).await;
        let gaps: Vec<u64> = self
            .watch_handed
            .seen
            .iter()
            .skip_while(|snapshot| !ids(snapshot).contains(&handed))
            .filter(|snapshot| !ids(snapshot).contains(&handed))
            .map(|snapshot| snapshot.revision)
            .collect();
        assert!(
            gaps.is_empty(),
            "snapshots without the handed instance: {gaps:?}"
        );
        close(&self.new).await;
        self.watch_handed.until(&[], f.expiry_bound()).await;
        close(&self.consumer).await;
    }
}

/// Rule 8: the old generation's `unregister` of an instance its successor registered
/// since, and its `close`, leave the successor's entry in place.
pub(crate) async fn an_old_generation_s_unregister_and_close_leave_its_successors_entry(
    f: Fixture,
) {
    let g = hand_over(&f).await;
    g.old
        .unregister(&g.handed)
        .await
        .expect("the old generation unregisters");
    g.assert_successor_holds(&f, "after the old generation's unregister")
        .await;
    close(&g.old).await;
    g.assert_successor_holds(&f, "after the old generation's close")
        .await;
    g.finish(&f).await;
}

/// Rule 9: an old generation whose lease or session is lost after its successor took
/// the instance over registers its own instances again under a new one, but does not
/// take the successor's entry back; its `unregister` and `close` then leave it.
pub(crate) async fn an_old_generation_that_lost_its_session_does_not_take_back_its_successors_entry(
    f: Fixture,
) {
    let mut g = hand_over(&f).await;
    let took = g.lose_and_restore_the_old_session(&f).await;
    g.assert_successor_holds(&f, "after the old generation registered again")
        .await;
    g.old
        .unregister(&g.handed)
        .await
        .expect("the old generation unregisters");
    close(&g.old).await;
    g.assert_successor_holds(&f, "after the old generation's unregister and close")
        .await;
    report(format_args!(
        "{}: the old generation lost its session and registered again in {}, leaving the successor's entry",
        f.kind.name(),
        ms(took)
    ));
    g.finish(&f).await;
}

/// Rule 10: once the old generation released the instance, nothing it does takes it
/// back — not a reconnection after a lost session (nor, on Nacos, the SDK's own redo
/// of the registration), not its close.
pub(crate) async fn a_released_entry_stays_with_its_successor_through_the_old_client_s_reconnection(
    f: Fixture,
) {
    let mut g = hand_over(&f).await;
    g.old
        .release(&g.handed)
        .await
        .expect("the old generation releases");
    g.assert_successor_holds(&f, "after the release").await;
    if f.can_cut() {
        g.lose_and_restore_the_old_session(&f).await;
        if f.kind == Kind::Nacos {
            // `own` may be back through this client's own probe before the SDK's redo
            // tick: the window lets the tick run.
            g.watch_own.collect_for(SDK_REDO_WINDOW).await;
        }
        g.assert_successor_holds(&f, "after the old generation's reconnection")
            .await;
    }
    close(&g.old).await;
    g.assert_successor_holds(&f, "after the old generation's close")
        .await;
    g.finish(&f).await;
}

/// Nacos: an `unregister` whose deregistration fails (the connection is cut) is sent
/// again until the server answers it, and holds: neither the SDK's redo task nor this
/// client writes the instance again, at that reconnection or a later one.
pub(crate) async fn a_failed_deregistration_is_sent_again_and_holds_across_a_reconnection(
    f: Fixture,
) {
    let proxy = Proxy::start(f.upstream()).await;
    let provider = f.client_via(proxy.addr(), Presence::Short).await;
    let consumer = f.client(Presence::Short).await;
    let withdrawn = instance(&f.service("withdrawn"), 27201);
    // Of another service: the SDK keeps one redo task per service.
    let witness = instance(&f.service("witness"), 27202);
    provider.register(&withdrawn).await.expect("register");
    provider
        .register(&witness)
        .await
        .expect("register the witness");
    let mut watch_withdrawn = Watch::new(&consumer, &withdrawn.service).await;
    let mut watch_witness = Watch::new(&consumer, &witness.service).await;
    watch_withdrawn
        .until(&[&withdrawn], f.propagation_bound())
        .await;
    watch_witness
        .until(&[&witness], f.propagation_bound())
        .await;

    proxy.cut();
    let failed = provider.unregister(&withdrawn).await;
    assert!(
        failed.is_err(),
        "the deregistration cannot reach the server while the connection is cut"
    );
    // The server dropped the cut connection's instances.
    watch_witness.until(&[], f.expiry_bound()).await;
    proxy.restore();
    let restored = Instant::now();
    watch_witness.until(&[&witness], REREGISTER_BOUND).await;
    watch_withdrawn.until(&[], REREGISTER_BOUND).await;
    // Whatever the SDK still meant to write has been written by now.
    watch_withdrawn.collect_for(SDK_REDO_WINDOW).await;
    assert_eq!(f.owner(&withdrawn).await, None, "the withdrawal holds");
    let confirmed = restored.elapsed();

    // A later reconnection writes the witness again, and only the witness.
    proxy.cut();
    watch_witness.until(&[], f.expiry_bound()).await;
    proxy.restore();
    watch_witness.until(&[&witness], REREGISTER_BOUND).await;
    let later = watch_withdrawn.collect_for(SDK_REDO_WINDOW).await;
    assert!(
        later.iter().all(|snapshot| snapshot.instances.is_empty()),
        "the withdrawn instance came back after a reconnection: {:?}",
        later.iter().map(ids).collect::<Vec<_>>()
    );
    assert_eq!(f.owner(&withdrawn).await, None, "the withdrawal holds");
    report(format_args!(
        "nacos: a failed deregistration was confirmed within {} of the reconnection and held through another",
        ms(confirmed)
    ));
    close(&provider).await;
    close(&consumer).await;
}
