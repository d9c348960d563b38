//! TEMPORARY placeholder, replaced by the `snap` branch's MetadataMachine.

use super::image::MetadataImage;
use super::record::MetadataRecord;
use crate::quorum::node::StateMachine;

/// Placeholder.
#[derive(Debug, Default)]
pub struct MetadataMachine {
    image: MetadataImage,
}

impl MetadataMachine {
    /// Placeholder.
    pub fn new() -> Self {
        MetadataMachine::default()
    }
    /// Placeholder.
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }
}

impl StateMachine for MetadataMachine {
    fn apply(&mut self, index: u64, data: &[u8]) {
        if let Ok(record) = MetadataRecord::decode(data) {
            let _ = self.image.apply(index as i64, &record);
        }
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _data: &[u8]) -> Result<(), String> {
        Err(String::from("placeholder"))
    }
}
