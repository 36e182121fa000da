//! The two kinds of instance a run restarts.

/// The two kinds of restarted instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Serves `echo.Echo` (group `backend`) with simulated work.
    Provider,
    /// Serves `echo.Echo` (group `proxy`) by calling a provider.
    Proxy,
}

impl Role {
    /// `provider` or `proxy`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Provider => "provider",
            Role::Proxy => "proxy",
        }
    }
}
