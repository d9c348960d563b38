//! AllocateProducerIds (KIP-730): a broker takes the next block of
//! [`PRODUCER_ID_BLOCK_SIZE`] producer ids.
//!
//! The block's end is replicated (`ProducerIds` record) before the broker is
//! told about it, so after any controller failover the next block starts
//! past every id ever handed out: a producer id never repeats in the cluster.
//! The arithmetic is the engine's [`ProducerIdBlocks`], the same one a
//! single node persists in its data dir.

use engine::producer_id_blocks::PRODUCER_ID_BLOCK_SIZE;
use engine::{ProducerIdBlock, ProducerIdBlocks};

use crate::placement::BrokerId;

use super::super::error::MetadataError;
use super::super::record::MetadataRecord;
use super::Controller;

impl Controller<'_> {
    /// The next producer-id block for `broker_id`, and the record that
    /// makes it taken.
    pub fn allocate_producer_ids(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<(ProducerIdBlock, Vec<MetadataRecord>), MetadataError> {
        self.registered(broker_id, broker_epoch)?;
        let start = self.image.next_producer_id_block_start();
        let mut blocks = ProducerIdBlocks::new(start);
        let block = blocks.take_block(PRODUCER_ID_BLOCK_SIZE).map_err(|_| {
            MetadataError::ProducerIdsExhausted {
                next_block_start: start,
            }
        })?;
        assert_eq!(block.first, start);
        assert!(blocks.next_block_start() > block.last);
        let mut proposal = self.proposal();
        proposal.push(MetadataRecord::ProducerIds {
            broker_id,
            broker_epoch,
            next_block_start: blocks.next_block_start(),
        });
        Ok((block, proposal.into_records()))
    }
}
