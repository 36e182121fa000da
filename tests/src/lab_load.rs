//! The load of the lab's tests (`tests/lab_*.rs`): a fixed rate of echo calls, each
//! awaited and tallied by the phase of the test's script it was sent in. Here rather
//! than in the tests' `common` module because a consumer process of its own
//! (`src/bin/lab_echo_consumer.rs`) runs the same load inside a host and hands its
//! tallies back to the test as lines ([`Tally::to_line`], [`Tally::from_line`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::cluster::Directory;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

/// Calls a second of the load: 500, each 20 ms of work.
pub const RATE: u32 = 500;
/// Milliseconds of work per call.
pub const WORK_MS: u32 = 20;

/// How the calls of one phase of the run ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Answers by the provider that gave them (host:port).
    pub answered: BTreeMap<String, usize>,
    /// The status of each call that failed.
    pub failed: Vec<String>,
}

impl Tally {
    /// The tally as one line of JSON (`{"answered":{…},"failed":[…]}`).
    pub fn to_line(&self) -> String {
        json!({ "answered": self.answered, "failed": self.failed }).to_string()
    }

    /// The tally a line of [`Tally::to_line`] holds; `None` for any other line.
    pub fn from_line(line: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(line).ok()?;
        let answered = value
            .get("answered")?
            .as_object()?
            .iter()
            .map(|(provider, count)| {
                Some((provider.clone(), usize::try_from(count.as_u64()?).ok()?))
            })
            .collect::<Option<_>>()?;
        let failed = value
            .get("failed")?
            .as_array()?
            .iter()
            .map(|status| status.as_str().map(str::to_owned))
            .collect::<Option<_>>()?;
        Some(Self { answered, failed })
    }
}

impl Tally {
    /// Calls tallied: answered and failed.
    pub fn sent(&self) -> usize {
        self.answered.values().sum::<usize>() + self.failed.len()
    }
}

/// Prints the tally of each phase of `test`, then one line of totals (`sent N, failed
/// F`): the figures the tables of docs/faults.md quote.
pub fn print_tallies(test: &str, tallies: &[Tally]) {
    for (phase, tally) in tallies.iter().enumerate() {
        println!("{test}: phase {phase}: {tally:?}");
    }
    let sent: usize = tallies.iter().map(Tally::sent).sum();
    let failed: usize = tallies.iter().map(|tally| tally.failed.len()).sum();
    println!("{test}: sent {sent}, failed {failed}");
}

/// `RATE` calls a second for `length`, each awaited; how they ended.
pub async fn phase(client: &EchoClient<rpc::ReferenceChannel>, length: Duration) -> Tally {
    phase_seen(client, length, &watch::Sender::default()).await
}

/// As [`phase`], each provider that answered added to `seen` as its first answer
/// arrives, so that a test's script can wait for it rather than for a fixed time.
pub async fn phase_seen(
    client: &EchoClient<rpc::ReferenceChannel>,
    length: Duration,
    seen: &watch::Sender<BTreeSet<String>>,
) -> Tally {
    let end = Instant::now() + length;
    let mut tallies = load(client, RATE, seen, || (Instant::now() < end).then_some(0)).await;
    tallies.pop().unwrap_or_default()
}

/// `rate` calls a second until `phases`' sender is dropped, each tallied under the
/// phase `phases` held when it was sent; the tally of each phase, by index.
pub async fn phases_at(
    client: &EchoClient<rpc::ReferenceChannel>,
    rate: u32,
    phases: watch::Receiver<usize>,
) -> Vec<Tally> {
    load(client, rate, &watch::Sender::default(), || {
        phases.has_changed().is_ok().then(|| *phases.borrow())
    })
    .await
}

/// `rate` calls a second while `current` gives the phase of the next call; how the calls
/// of each phase ended. Each provider's first answer is added to `seen` as it arrives.
async fn load(
    client: &EchoClient<rpc::ReferenceChannel>,
    rate: u32,
    seen: &watch::Sender<BTreeSet<String>>,
    current: impl Fn() -> Option<usize>,
) -> Vec<Tally> {
    let mut calls = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / rate);
    loop {
        ticker.tick().await;
        let Some(phase) = current() else {
            break;
        };
        let (mut client, seen) = (client.clone(), seen.clone());
        calls.spawn(async move {
            let answer = client
                .echo(EchoRequest {
                    payload: bytes::Bytes::from_static(b"x"),
                    delay_ms: None,
                })
                .await
                .map(|reply| reply.into_inner().provider);
            if let Ok(provider) = &answer {
                seen.send_if_modified(|seen| seen.insert(provider.clone()));
            }
            (phase, answer)
        });
    }
    let mut tallies: Vec<Tally> = Vec::new();
    while let Some(done) = calls.join_next().await {
        let (phase, answer) = done.expect("a call task does not panic");
        if tallies.len() <= phase {
            tallies.resize_with(phase + 1, Tally::default);
        }
        let tally = &mut tallies[phase];
        match answer {
            Ok(provider) => *tally.answered.entry(provider).or_default() += 1,
            Err(status) => tally.failed.push(status.to_string()),
        }
    }
    tallies
}

/// The addresses the consumer's directory lists now (removed invokers left out).
pub fn listed(directory: &Directory) -> BTreeSet<String> {
    directory
        .list()
        .invokers()
        .iter()
        .filter(|invoker| !invoker.is_removed())
        .map(|invoker| invoker.authority().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn a_tally_survives_its_line() {
        let tally = Tally {
            answered: [
                ("10.77.0.2:4100".to_owned(), 7),
                ("10.77.0.3:4100".to_owned(), 1),
            ]
            .into_iter()
            .collect(),
            failed: vec!["status: Unavailable, message: \"no \\\"provider\\\"\"".to_owned()],
        };
        assert_eq!(Tally::from_line(&tally.to_line()), Some(tally));
        assert_eq!(Tally::from_line("listed 10.77.0.2:4100"), None);
    }
}
