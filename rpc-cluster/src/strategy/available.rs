//! Available: the first selectable instance.

use super::{Plan, Strategy};

/// Available: calls the first selectable instance in the directory's order (sorted by
/// instance id), without load balancing; a closing provider's refusal moves on to the
/// next one.
#[derive(Debug)]
pub(crate) struct Available;

impl Strategy for Available {
    fn plan(&self) -> Plan {
        Plan::InOrder
    }
}
