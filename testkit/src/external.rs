//! What a test needs from outside this repository — a registry server, Python with
//! grpcio, a browser, the Kubernetes schema validator, network namespaces — and what
//! happens when it is missing.
//!
//! Each need is a variable that names the thing (`RPC_TEST_PYTHON=/path/to/python`) and
//! a switch that makes it required (`RPC_TEST_REQUIRE_PYTHON=1`). `scripts/test.sh` sets
//! both for everything it installs, so in CI a missing prerequisite fails the test. On
//! a developer's machine without it, the test prints one `SKIPPED` line saying what to
//! set and returns — and only then: once the prerequisite is there, a peer that does
//! not start, crashes or hangs is a failure, never a skip.

/// A prerequisite of some tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Python with grpcio (`RPC_TEST_PYTHON`, required by `RPC_TEST_REQUIRE_PYTHON`).
    Python,
    /// The `kubernetes-validate` command (`RPC_TEST_KUBERNETES_VALIDATE`, required by
    /// `RPC_TEST_REQUIRE_KUBERNETES_VALIDATE`).
    KubernetesValidate,
}

impl Need {
    /// The variable that names it.
    pub fn var(self) -> &'static str {
        match self {
            Self::Python => "RPC_TEST_PYTHON",
            Self::KubernetesValidate => "RPC_TEST_KUBERNETES_VALIDATE",
        }
    }

    /// The switch that makes it required.
    pub fn require_var(self) -> &'static str {
        match self {
            Self::Python => "RPC_TEST_REQUIRE_PYTHON",
            Self::KubernetesValidate => "RPC_TEST_REQUIRE_KUBERNETES_VALIDATE",
        }
    }

    /// Whether the switch is set (to anything but `0` or nothing).
    pub fn required(self) -> bool {
        std::env::var(self.require_var()).is_ok_and(|value| !value.is_empty() && value != "0")
    }

    /// The value of [`Need::var`], or `None` when it is not set and not required (after
    /// printing `SKIPPED <test>: …`, so the skip shows in the test's output).
    ///
    /// # Panics
    /// When it is not set but required: the test fails, saying which variable is
    /// missing.
    pub fn get(self, test: &str) -> Option<String> {
        match std::env::var(self.var()) {
            Ok(value) if !value.is_empty() => Some(value),
            _ => {
                assert!(
                    !self.required(),
                    "{test}: {} is not set but {} is (run scripts/test.sh)",
                    self.var(),
                    self.require_var()
                );
                println!(
                    "SKIPPED {test}: {} is not set (scripts/test.sh sets it)",
                    self.var()
                );
                None
            }
        }
    }
}
