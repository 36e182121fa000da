//! What the scenario of a clustered registry losing its leader (`tests/lab_cluster.rs`)
//! needs on every backend: the loss, finding the leader, and what the run must show.

use std::time::Duration;

use rpc_testkit::netlab::{Fault, Lab};
use rpc_testkit::registry_server::RegistryServer;
use rpc_tests::lab_load::{Tally, print_tallies};
use tokio::time::timeout;

use super::lab::{answered_by, assert_none_failed};

/// Bound on finding the cluster's leader.
const ELECTION: Duration = Duration::from_secs(30);

/// How the leader is lost.
#[derive(Clone, Copy, Debug)]
pub enum Loss {
    /// Its process is killed (SIGKILL, as a crashed machine).
    Killed,
    /// Its host drops every packet, in and out (no reset: its clients must time out).
    Partitioned,
}

impl Loss {
    /// Loses the member that leads `members` now (on host `index` of `lab`, as the
    /// cluster was started on hosts 0, 1, 2); its index.
    pub async fn inflict(self, lab: &Lab, members: &mut [RegistryServer]) -> usize {
        let lost = leader(members).await;
        match self {
            Loss::Killed => members[lost].stop(),
            Loss::Partitioned => lab.host(lost).apply(Fault::Blackhole),
        }
        lost
    }

    /// Ends the loss where it can end (a partition); a killed member stays down.
    pub fn end(self, lab: &Lab, lost: usize) {
        if let Loss::Partitioned = self {
            lab.host(lost).restore();
        }
    }
}

/// The index of the member that leads now.
async fn leader(members: &[RegistryServer]) -> usize {
    timeout(ELECTION, async {
        loop {
            for (index, member) in members.iter().enumerate() {
                if member.is_leader().await {
                    return index;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the cluster has a leader")
}

/// Whether one of `members` other than `lost` leads now.
pub async fn a_survivor_leads(members: &[RegistryServer], lost: usize) -> bool {
    for (index, member) in members.iter().enumerate() {
        if index != lost && member.is_leader().await {
            return true;
        }
    }
    false
}

/// What one run of the scenario showed.
pub struct Outcome {
    /// The index of the member lost, and how.
    pub lost: (usize, Loss),
    /// Whether a surviving member led after the loss.
    pub survivor_leads: bool,
    /// How long after the roll the consumer's directory listed the new providers.
    pub converged: Duration,
    /// The tallies of its four phases: before the loss; after it, nothing else
    /// happening; the rolling deploy; the new providers serving.
    pub tallies: Vec<Tally>,
    /// The providers' addresses before and after the roll.
    pub old: Vec<String>,
    pub new: Vec<String>,
}

impl Outcome {
    /// Prints the run, then checks what the scenario must show: no call failed, the
    /// survivors elected a leader, the providers registered after the loss take calls
    /// and the stopped ones none.
    pub fn check(&self, test: &str) {
        let ((lost, loss), tallies) = (self.lost, &self.tallies);
        println!(
            "{test}: member {lost} led and was {loss:?}; a surviving member led after: {}; \
             the directory listed the new providers {:?} after the roll",
            self.survivor_leads, self.converged
        );
        print_tallies(test, tallies);
        assert_none_failed(test, tallies);
        assert_eq!(tallies.len(), 4, "every phase sent calls");
        assert!(self.survivor_leads, "the survivors elected a leader");
        for address in &self.new {
            assert!(
                answered_by(&tallies[3], address) > 0,
                "{address}, registered after the leader was lost, takes calls"
            );
        }
        for address in &self.old {
            assert_eq!(
                answered_by(&tallies[3], address),
                0,
                "{address}, stopped, is gone"
            );
        }
    }
}
