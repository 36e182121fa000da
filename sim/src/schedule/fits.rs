//! Where an event may go in a schedule: never two on one host at once, always one
//! provider the consumers can use, and no more providers out of their picks at once
//! than their blacklist may hold out.

use std::time::Duration;

use super::{Event, Kind, PROVIDERS, Target};

/// A restart's stop takes up to the shutdown's bound beyond `lasts`: it counts as
/// lasting that much longer when events are placed; an upgrade's hand-over and drain
/// as long.
const RESTART_STOP_BOUND: Duration = Duration::from_secs(3);

/// How long `event` may keep its host out of service.
fn span(event: &Event) -> Duration {
    match event.kind {
        Kind::Restart | Kind::Upgrade => event.lasts + RESTART_STOP_BOUND,
        _ => event.lasts,
    }
}

fn overlaps(a: &Event, b: &Event) -> bool {
    a.at < b.at + span(b) && b.at < a.at + span(a)
}

/// Most providers killed or paused at once, counting one as out until its ejection
/// ends (30 s after it recovered): the consumers' blacklist ejects at most
/// `max_ejection_percent` (50 %) of the instances, by design (a consumer whose own
/// network fails must not eject every provider), so beyond it calls go to an
/// unresponsive host on purpose (docs/limitations.md).
pub const MAX_HARD_FAULTS: usize = PROVIDERS / 2;

/// When `event` takes its provider out of the consumers' picks, and until when: a
/// killed or paused one stays ejected for [`EJECTION`] after it recovered.
fn out_of_service(event: &Event) -> (Duration, Duration) {
    let ejected = if event.kind.is_hard() {
        EJECTION
    } else {
        Duration::ZERO
    };
    (
        event.at,
        (event.at + span(event)).max(event.end() + ejected),
    )
}

/// The consumers' blacklist's base ejection time (its default).
const EJECTION: Duration = Duration::from_secs(30);

/// Whether `event` can join `events`: not on a host already in an event then, leaving
/// at least one provider untouched throughout, and no more than [`MAX_HARD_FAULTS`]
/// providers the consumers may take out of their picks at once ([`Kind::suspends`]).
pub(super) fn fits(events: &[Event], event: &Event) -> bool {
    let concurrent: Vec<&Event> = events
        .iter()
        .filter(|other| overlaps(other, event))
        .collect();
    if concurrent.iter().any(|other| other.target == event.target) {
        return false;
    }
    let Target::Provider(_) = event.target else {
        return true;
    };
    // A provider killed or paused is ejected by the consumers for the blacklist's base
    // ejection time (30 s) after it recovered: it counts as out that long.
    let out_with_ejection: Vec<&Event> = events
        .iter()
        .filter(|other| matches!(other.target, Target::Provider(_)))
        .filter(|other| {
            let (a, b) = (out_of_service(other), out_of_service(event));
            a.0 < b.1 && b.0 < a.1
        })
        .collect();
    let providers_out = out_with_ejection.len();
    let hard = out_with_ejection
        .iter()
        .filter(|other| other.kind.suspends())
        .count();
    providers_out + 1 < PROVIDERS && (!event.kind.suspends() || hard < MAX_HARD_FAULTS)
}
