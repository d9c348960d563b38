//! The simulation's auditor: it watches every node from outside after every
//! step and names the first broken promise of the quorum.
//!
//! What it checks:
//! - agreement: a committed index holds the same bytes on every node that
//!   applies it, and each node applies indexes in increasing order with no
//!   committed index skipped (its state machine equals the committed log up
//!   to its applied index);
//! - election safety: at most one leader per term, over the whole run,
//!   restarts included;
//! - durability: the newest committed entry is held durably (in the log or
//!   under a snapshot) by a majority, and a restarted node still holds every
//!   entry it had applied before the crash.

use std::collections::BTreeMap;

/// A broken promise, as the auditor saw it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViolationKind {
    /// Two nodes applied different bytes at one index.
    #[error("node {node} applied index {index} as {got:?}, committed elsewhere as {expected:?}")]
    Divergence {
        /// The node that disagrees.
        node: u64,
        /// The index.
        index: u64,
        /// The bytes first committed there.
        expected: String,
        /// The bytes this node applied.
        got: String,
    },
    /// A node applied an index not after the previous one.
    #[error("node {node} applied index {index} after index {previous}")]
    OutOfOrder {
        /// The node.
        node: u64,
        /// The index applied.
        index: u64,
        /// The index applied before it.
        previous: u64,
    },
    /// A node's state machine is not the committed log up to its applied
    /// index (an entry skipped, or one too many).
    #[error("node {node}'s state machine differs from the committed log near index {index}")]
    StateMismatch {
        /// The node.
        node: u64,
        /// The first index where they differ.
        index: u64,
    },
    /// Two leaders in one term.
    #[error("term {term} has two leaders: node {first} and node {second}")]
    TwoLeaders {
        /// The term.
        term: u64,
        /// The leader seen first.
        first: u64,
        /// The other.
        second: u64,
    },
    /// A restart lost entries the node had applied.
    #[error("node {node} applied up to {applied_index} before a crash, its store commits only to {commit_index} after it")]
    LostAfterRestart {
        /// The node.
        node: u64,
        /// Applied before the crash.
        applied_index: u64,
        /// The durable commit index found by the restart.
        commit_index: u64,
    },
    /// The newest committed entry is durable on fewer than a majority.
    #[error("committed index {index} is durable on {holders} of {nodes} nodes, not a majority")]
    NotOnMajority {
        /// The index.
        index: u64,
        /// How many nodes hold it.
        holders: usize,
        /// Quorum size.
        nodes: usize,
    },
    /// A node returned an error where none is expected.
    #[error("node {node}: {error}")]
    NodeError {
        /// The node.
        node: u64,
        /// The error.
        error: String,
    },
}

/// The auditor's memory of the run: what was committed, who led when.
#[derive(Debug, Default)]
pub struct Auditor {
    committed: BTreeMap<u64, Vec<u8>>,
    leaders: BTreeMap<u64, u64>,
    /// Per node, the last index it applied in its current incarnation.
    last_applied: BTreeMap<u64, u64>,
}

impl Auditor {
    /// Records that `node` applied `data` at `index`.
    pub fn applied(&mut self, node: u64, index: u64, data: &[u8]) -> Result<(), ViolationKind> {
        let previous = self.last_applied.get(&node).copied().unwrap_or(0);
        if index <= previous {
            return Err(ViolationKind::OutOfOrder {
                node,
                index,
                previous,
            });
        }
        self.last_applied.insert(node, index);
        match self.committed.get(&index) {
            Some(expected) if expected.as_slice() != data => Err(ViolationKind::Divergence {
                node,
                index,
                expected: String::from_utf8_lossy(expected).into_owned(),
                got: String::from_utf8_lossy(data).into_owned(),
            }),
            Some(_) => Ok(()),
            None => {
                self.committed.insert(index, data.to_vec());
                Ok(())
            }
        }
    }

    /// Starts a node's new incarnation, whose state machine begins at
    /// `applied_index` (its snapshot).
    pub fn restarted(&mut self, node: u64, applied_index: u64) {
        self.last_applied.insert(node, applied_index);
    }

    /// Records who leads which term.
    pub fn leader(&mut self, term: u64, node: u64) -> Result<(), ViolationKind> {
        match self.leaders.get(&term) {
            Some(&first) if first != node => Err(ViolationKind::TwoLeaders {
                term,
                first,
                second: node,
            }),
            Some(_) => Ok(()),
            None => {
                self.leaders.insert(term, node);
                Ok(())
            }
        }
    }

    /// Checks a node's applied records, in order, against the committed log
    /// up to `applied_index`: the same indexes, the same bytes.
    pub fn check_machine(
        &self,
        node: u64,
        records: &[(u64, Vec<u8>)],
        applied_index: u64,
    ) -> Result<(), ViolationKind> {
        let mut expected = self.committed.range(..=applied_index);
        for (index, data) in records {
            match expected.next() {
                Some((committed_index, committed_data))
                    if committed_index == index && committed_data == data => {}
                Some((committed_index, _)) => {
                    return Err(ViolationKind::StateMismatch {
                        node,
                        index: (*committed_index).min(*index),
                    })
                }
                None => {
                    return Err(ViolationKind::StateMismatch {
                        node,
                        index: *index,
                    })
                }
            }
        }
        match expected.next() {
            Some((index, _)) => Err(ViolationKind::StateMismatch {
                node,
                index: *index,
            }),
            None => Ok(()),
        }
    }

    /// The newest committed index and its bytes.
    pub fn newest_committed(&self) -> Option<(u64, &[u8])> {
        self.committed
            .last_key_value()
            .map(|(index, data)| (*index, data.as_slice()))
    }

    /// How many records were committed.
    pub fn committed_count(&self) -> u64 {
        self.committed.len() as u64
    }

    /// How many terms had a leader.
    pub fn leader_count(&self) -> u64 {
        self.leaders.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catches_divergence_order_two_leaders_and_gaps() {
        let mut auditor = Auditor::default();
        assert_eq!(auditor.applied(1, 3, b"a"), Ok(()));
        assert_eq!(auditor.applied(2, 3, b"a"), Ok(()));
        assert!(matches!(
            auditor.applied(3, 3, b"b"),
            Err(ViolationKind::Divergence { index: 3, .. })
        ));
        assert!(matches!(
            auditor.applied(1, 2, b"x"),
            Err(ViolationKind::OutOfOrder { .. })
        ));
        assert_eq!(auditor.leader(4, 1), Ok(()));
        assert_eq!(auditor.leader(4, 1), Ok(()));
        assert!(matches!(
            auditor.leader(4, 2),
            Err(ViolationKind::TwoLeaders { term: 4, .. })
        ));
        assert_eq!(auditor.applied(1, 5, b"c"), Ok(()));
        let whole = vec![(3, b"a".to_vec()), (5, b"c".to_vec())];
        assert_eq!(auditor.check_machine(1, &whole, 5), Ok(()));
        let skipped = vec![(5, b"c".to_vec())];
        assert!(auditor.check_machine(2, &skipped, 5).is_err());
        let short = vec![(3, b"a".to_vec())];
        assert!(auditor.check_machine(2, &short, 5).is_err());
        assert_eq!(auditor.check_machine(2, &short, 4), Ok(()));
    }
}
