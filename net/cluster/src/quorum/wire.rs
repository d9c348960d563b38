//! The quorum's messages on the wire between controllers: a raft-rs
//! `Message` as its protobuf bytes.
//!
//! Why protobuf here when the disk format is our own ([`super::codec`]):
//! messages live for one hop between processes of the same build, so the
//! protobuf crate's version never meets old bytes, and raft-rs already
//! carries the encoder. A message that does not parse is dropped by the
//! transport (Raft resends what matters); decoding never panics.

use protobuf::Message as _;
use raft::eraftpb::Message;

/// The bytes of one Raft message.
pub fn encode_message(message: &Message) -> Result<Vec<u8>, String> {
    message.write_to_bytes().map_err(|e| e.to_string())
}

/// A Raft message from its bytes.
pub fn decode_message(bytes: &[u8]) -> Result<Message, String> {
    Message::parse_from_bytes(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::{Entry, MessageType};

    #[test]
    fn a_message_with_entries_round_trips() {
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgAppend);
        message.from = 2;
        message.to = 3;
        message.term = 7;
        message.index = 41;
        message.log_term = 6;
        message.commit = 40;
        let entry = Entry {
            index: 42,
            term: 7,
            data: b"record".to_vec().into(),
            ..Default::default()
        };
        message.entries = vec![entry].into();
        let bytes = encode_message(&message).expect("encode");
        assert_eq!(decode_message(&bytes).expect("decode"), message);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_message(&[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }
}
