//! Admin resets of a share group's share-partitions
//! (AlterShareGroupOffsets, DeleteShareGroupOffsets, and DeleteGroups of a
//! share group), as Kafka allows them: only while the group has no member. Each partition's share
//! coordinator starts the state again at a higher state epoch
//! ([`persister::reset`]); the partition leader reads it again when a
//! share session opens, or when its next write of the old state is
//! fenced.

use super::persister;
use crate::group_runtime::{self, GroupReply, GroupRequest};
use crate::Shard;
use coordinators::share::ShareKey;
use engine::ErrorCode;
use std::rc::Rc;

/// Whether `group` may be reset: it has no member (NON_EMPTY_GROUP
/// otherwise), or is no share group yet. This broker must coordinate it
/// (NOT_COORDINATOR otherwise, which the admin client follows).
pub async fn require_empty(shard: &Rc<Shard>, group: &str) -> Result<(), ErrorCode> {
    let describe = GroupRequest::DescribeShare(group.to_string());
    match group_runtime::call(shard, group, describe).await {
        GroupReply::DescribedShare(Ok(g)) if g.members.is_empty() => Ok(()),
        GroupReply::DescribedShare(Ok(_)) => Err(ErrorCode::NonEmptyGroup),
        GroupReply::DescribedShare(Err(ErrorCode::GroupIdNotFound)) => Ok(()),
        GroupReply::DescribedShare(Err(code)) | GroupReply::Unavailable(code) => Err(code),
        _ => Err(ErrorCode::UnknownServerError),
    }
}

/// Starts `group`'s share-partition of partition `partition` of topic
/// `topic_id` again from `start_offset` (-1: nothing, the next reader
/// starts by `share.auto.offset.reset`).
pub async fn reset_partition(
    shard: &Rc<Shard>,
    group: &str,
    topic_id: [u8; 16],
    partition: i32,
    start_offset: i64,
) -> Result<(), ErrorCode> {
    let key = ShareKey::new(group.to_string(), topic_id, partition);
    persister::reset(shard, &key, start_offset).await
}

/// Drops every share-partition state of `group` before DeleteGroups
/// removes it: on each partition of the topics it has had assigned (the
/// group coordinator keeps them), so that a group made again under the
/// same id starts afresh. Only while it has no member; nothing to do for a
/// group that is no share group.
pub async fn forget_states(shard: &Rc<Shard>, group: &str) -> Result<(), ErrorCode> {
    let asked = GroupRequest::ShareTopics(group.to_string());
    let topics = match group_runtime::call(shard, group, asked).await {
        GroupReply::ShareTopics(topics) => topics,
        GroupReply::Unavailable(code) => return Err(code),
        _ => return Err(ErrorCode::UnknownServerError),
    };
    if topics.is_empty() {
        return Ok(());
    }
    require_empty(shard, group).await?;
    for topic in topics {
        // A topic deleted since: its states name an id no topic has.
        let Some((topic_id, count)) =
            (shard.topics.borrow().get(&topic)).map(|e| (e.topic_id, e.partitions))
        else {
            continue;
        };
        for partition in 0..count {
            reset_partition(shard, group, topic_id, partition, -1).await?;
        }
    }
    Ok(())
}
