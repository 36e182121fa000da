//! The blacklist's tests: ejection, probes, the percentage cap, closing marks.

use rand::SeedableRng;

use super::*;
use crate::health::Availability;
use crate::invoker::tests::invoker;

fn config() -> BlacklistConfig {
    BlacklistConfig {
        jitter: 0.0,
        ..BlacklistConfig::default()
    }
}

fn rng() -> SmallRng {
    SmallRng::seed_from_u64(1)
}

fn fail(blacklist: &Blacklist, target: &Invoker, peers: &[Arc<Invoker>], times: u32) {
    for _ in 0..times {
        blacklist.on_failure(target, peers, Instant::now(), &mut rng());
    }
}

#[tokio::test(start_paused = true)]
async fn five_failures_in_a_row_eject_and_a_success_resets_the_streak() {
    let peers: Vec<_> = (0..4).map(invoker).collect();
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    fail(&blacklist, &peers[0], &peers, 4);
    blacklist.on_success(&peers[0], Instant::now());
    fail(&blacklist, &peers[0], &peers, 4);
    assert_eq!(
        peers[0].health().availability(Instant::now()),
        Availability::Ready
    );
    fail(&blacklist, &peers[0], &peers, 1);
    assert!(matches!(
        peers[0].health().availability(Instant::now()),
        Availability::Unavailable { .. }
    ));
    assert_eq!(blacklist.stats().counts().ejections, 1);
}

#[tokio::test(start_paused = true)]
async fn probe_decides_after_ejection_and_failure_doubles_the_time() {
    let peers: Vec<_> = (0..4).map(invoker).collect();
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    let target = &peers[0];
    fail(&blacklist, target, &peers, 5);
    tokio::time::advance(Duration::from_secs(30)).await;
    let now = Instant::now();
    assert_eq!(target.health().availability(now), Availability::Probe);
    assert!(target.health().begin_probe(now));
    assert!(
        !target.health().begin_probe(now),
        "only one probe at a time"
    );
    assert!(matches!(
        target.health().availability(now),
        Availability::Unavailable { .. }
    ));
    // The probe fails: ejected again, for 2 × 30 s.
    blacklist.on_failure(target, &peers, now, &mut rng());
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(matches!(
        target.health().availability(Instant::now()),
        Availability::Unavailable { .. }
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    let now = Instant::now();
    assert_eq!(target.health().availability(now), Availability::Probe);
    assert!(target.health().begin_probe(now));
    blacklist.on_success(target, now);
    assert_eq!(target.health().availability(now), Availability::Ready);
    assert_eq!(blacklist.stats().counts().recoveries, 1);
    assert_eq!(blacklist.stats().counts().ejections, 2);
}

#[tokio::test(start_paused = true)]
async fn an_unresponsive_connection_ejects_at_once_within_the_percentage() {
    let peers: Vec<_> = (0..4).map(invoker).collect();
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    blacklist.on_unresponsive(
        &peers[0],
        &peers,
        Instant::now(),
        &mut rng(),
        "PING unanswered",
    );
    assert!(
        peers[0].health().ejected(Instant::now()),
        "no streak needed"
    );
    blacklist.on_unresponsive(
        &peers[1],
        &peers,
        Instant::now(),
        &mut rng(),
        "PING unanswered",
    );
    blacklist.on_unresponsive(
        &peers[2],
        &peers,
        Instant::now(),
        &mut rng(),
        "PING unanswered",
    );
    let ejected = peers
        .iter()
        .filter(|p| p.health().ejected(Instant::now()))
        .count();
    assert_eq!(ejected, 2, "50 % of 4 still");
    let counts = blacklist.stats().counts();
    assert_eq!((counts.ejections, counts.unresponsive), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn ejection_time_is_capped() {
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    assert_eq!(
        blacklist.ejection_time(3, &mut rng()),
        Duration::from_secs(90)
    );
    assert_eq!(
        blacklist.ejection_time(50, &mut rng()),
        Duration::from_secs(300)
    );
}

#[tokio::test(start_paused = true)]
async fn never_ejects_more_than_the_percentage() {
    let peers: Vec<_> = (0..4).map(invoker).collect();
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    for target in &peers {
        fail(&blacklist, target, &peers, 5);
    }
    let now = Instant::now();
    let ejected = peers.iter().filter(|p| p.health().ejected(now)).count();
    assert_eq!(ejected, 2, "50 % of 4");
}

#[tokio::test(start_paused = true)]
async fn application_errors_are_successes_for_the_blacklist() {
    // The cluster calls on_success for application errors; here we only check that a
    // closing mark is not an ejection and does not count as one.
    let peers: Vec<_> = (0..2).map(invoker).collect();
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    blacklist.mark_closing(&peers[0], &peers, Instant::now());
    assert!(peers[0].health().is_closing(Instant::now()));
    assert!(!peers[0].health().ejected(Instant::now()));
    assert_eq!(blacklist.stats().counts().ejections, 0);
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(
        peers[0].health().availability(Instant::now()),
        Availability::Ready
    );
}

#[tokio::test(start_paused = true)]
async fn disabled_blacklist_never_ejects() {
    let peers: Vec<_> = (0..2).map(invoker).collect();
    let blacklist = Blacklist::new(
        BlacklistConfig {
            enabled: false,
            ..config()
        },
        Duration::from_secs(30),
    );
    fail(&blacklist, &peers[0], &peers, 50);
    assert_eq!(
        peers[0].health().availability(Instant::now()),
        Availability::Ready
    );
}

#[tokio::test(start_paused = true)]
async fn a_closing_mark_covers_every_registration_of_the_address() {
    // A crashed process's entry (i0) and its successor's (i1) at one address, and
    // another instance elsewhere.
    let stale = invoker(0);
    let mut instance = (*stale.instance()).clone();
    instance.id = rpc_core::InstanceId::new("i1");
    let successor = Arc::new(Invoker::new(
        instance,
        crate::invoker::tests::settings(),
        Instant::now(),
    ));
    let peers = vec![stale.clone(), successor.clone(), invoker(2)];
    let blacklist = Blacklist::new(config(), Duration::from_secs(30));
    let now = Instant::now();
    blacklist.mark_closing(&stale, &peers, now);
    assert!(stale.health().is_closing(now));
    assert!(
        successor.health().is_closing(now),
        "same address, same process"
    );
    assert!(!peers[2].health().is_closing(now));
    assert_eq!(blacklist.stats().counts().closing_marks, 2);
}
