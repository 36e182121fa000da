//! Configuration of references, the directory and the blacklist, with the defaults
//! Dubbo users expect. Every struct denies unknown keys so a typo is an error that
//! names it, and accepts dubbo-go's kebab-case spellings as aliases.
//!
//! One file per section: [`ReferenceConfig`] (`consumer.references.<service>`) with
//! its [`RetryBudgetConfig`] and [`FailbackConfig`], the strategy and load-balance
//! choices ([`ClusterKind`], [`LoadBalanceKind`]), [`BlacklistConfig`]
//! (`consumer.blacklist`) and [`DirectoryConfig`] (`consumer.directory`).

mod blacklist;
mod directory;
mod failback;
mod invalid;
mod kinds;
mod reference;
mod retry_budget;

pub use blacklist::BlacklistConfig;
pub use directory::DirectoryConfig;
pub use failback::FailbackConfig;
pub use invalid::InvalidSetting;
pub use kinds::{ClusterKind, LoadBalanceKind};
pub use reference::{MethodConfig, ReferenceConfig};
pub(crate) use retry_budget::MAX_RETRY_BUDGET_TTL;
pub use retry_budget::RetryBudgetConfig;
